//! What to serve and with which limits: `ServeConfig` and `Limits`, with safe defaults.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The most worker threads: each listens on its own sockets, and thousands run out of files
/// before they serve (as `load --threads` is bounded).
pub const MAX_THREADS: usize = 4096;

/// Everything `start` needs: listeners, certificate, threads and limits.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Cleartext TCP listener for HTTP/1.1 and h2c prior knowledge; `None` turns it off.
    pub http: Option<SocketAddr>,
    /// TLS listener for h2 and http/1.1 by ALPN; `None` turns it off.
    pub https: Option<SocketAddr>,
    /// UDP listener for HTTP/3; `None` turns it off.
    pub h3: Option<SocketAddr>,
    /// PEM certificate chain and private key; `None` generates a self-signed one.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// The bytes of `cert`'s two files, when the caller read them already (the CLI reads them
    /// before it blocks Ctrl-C, so a FIFO that never opens can still be interrupted); `None`
    /// reads them in `start`.
    pub cert_pem: Option<PemFiles>,
    /// Worker threads, each with its own runtime and its own listening sockets.
    pub threads: usize,
    /// CPUs to pin worker threads to, round-robin; `None` leaves them to the scheduler.
    pub cpus: Option<Vec<usize>>,
    /// Per-connection and per-request limits.
    pub limits: Limits,
    /// Which HTTP/2 implementation serves h2c and h2.
    pub h2_engine: H2Engine,
}

/// A certificate chain file's and a private key file's bytes (`ServeConfig::cert_pem`). Its
/// `Debug` shows their sizes only: a key does not belong in a log.
#[derive(Clone)]
pub struct PemFiles {
    /// The certificate chain, PEM.
    pub cert: Vec<u8>,
    /// The private key, PEM.
    pub key: Vec<u8>,
}

impl std::fmt::Debug for PemFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PemFiles(cert {} bytes, key {} bytes)",
            self.cert.len(),
            self.key.len()
        )
    }
}

/// The HTTP/2 implementation behind the h2c and TLS h2 ports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum H2Engine {
    /// The h2 crate (hyper's HTTP/2): the reference the differential test compares against.
    Hyper,
    /// httpvs's own frame layer (`h2/owned`): h2spec-clean and about 4x cheaper per request.
    #[default]
    Owned,
}

/// Limits that protect the server and that shape protocol comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// h2 SETTINGS_MAX_CONCURRENT_STREAMS and h3 max bidirectional streams.
    pub max_streams: u32,
    /// Requests served on one connection before it is closed (h1) or sent GOAWAY (h2, h3).
    pub max_requests_per_conn: Option<u64>,
    /// A connection without I/O for this long (and no delayed response pending) is closed.
    pub idle_timeout: Duration,
    /// Request header bytes (names + values) above which the answer is 431.
    pub max_header_bytes: usize,
    /// Request body bytes above which the answer is 413.
    pub max_body_bytes: u64,
    /// Open connections (all protocols) above which new ones are closed at once.
    pub max_connections: usize,
    /// Streams a client may reset before their answer could leave, beyond one per stream answered,
    /// before it gets GOAWAY ENHANCE_YOUR_CALM (rapid reset; see `h2/reset_budget.rs`).
    pub max_pending_reset_streams: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_streams: 128,
            max_requests_per_conn: None,
            idle_timeout: Duration::from_secs(30),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 8 * 1024 * 1024,
            max_connections: 20_000,
            max_pending_reset_streams: 20,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        let loopback = |port| Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
        ServeConfig {
            http: loopback(8080),
            https: loopback(8443),
            h3: loopback(8443),
            cert: None,
            cert_pem: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpus: None,
            limits: Limits::default(),
            h2_engine: H2Engine::default(),
        }
    }
}

impl ServeConfig {
    /// All three listeners on 127.0.0.1 with ephemeral ports, a self-signed cert, one thread: for tests.
    pub fn loopback_ephemeral() -> Self {
        let any = Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
        ServeConfig {
            http: any,
            https: any,
            h3: any,
            threads: 1,
            ..ServeConfig::default()
        }
    }
}
