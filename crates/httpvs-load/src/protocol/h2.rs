//! HTTP/2: h2c with prior knowledge for http://, TLS with ALPN h2 for https://.
//!
//! [`Http2`] runs on the owned codec: a sans-IO core (`core`: frames, flow control, SETTINGS,
//! PING, GOAWAY, RST_STREAM, HPACK) driven by one I/O task per connection (`driver`), with each
//! distinct request head encoded once (`head_blocks`). [`Http2Reference`] is the same protocol
//! on the `h2` crate, kept as the correctness reference the differential tests compare against.
//!
//! Flow-control windows follow h2load: 2^30-1 for each stream and for the connection unless
//! `--window`/`--connection-window` set them ([`super::window`]), so by default the client never
//! throttles the server. The server's SETTINGS are awaited during connect, so its
//! MAX_CONCURRENT_STREAMS is known (and honoured) before the first request.

mod accounting;
mod conn_core;
mod conn_state;
mod connection;
mod driver;
pub mod frame_tap;
pub mod frame_write;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod head_blocks;
mod reference;
mod reference_connection;
mod request_template;
mod streams;

pub use conn_state::ConnEnd;
pub use connection::Http2Connection;
pub use reference::Http2Reference;
pub use reference_connection::{stream_error, ReferenceConnection};
pub use request_template::build_template;

use super::tcp;
use super::tls::{AlpnConfigs, ALPN_H2};
use super::window::{H2Windows, ReceiveWindows};
use super::wire::{PlaintextTaps, WireCounter};
use super::{ConnectInfo, ConnectOptions, Protocol, Target};
use crate::error::ErrorKind;
use conn_core::ConnCore;
use std::future::poll_fn;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Opens the TCP (and, for https, TLS) transport both HTTP/2 clients run on, counted by the
/// returned counter. Over TLS the server must choose h2: otherwise it would read our preface as a
/// bad HTTP/1.1 request.
async fn open_transport(
    target: &Target,
    options: &ConnectOptions,
    configs: &AlpnConfigs,
) -> Result<(tcp::Transport, ConnectInfo, Arc<WireCounter>), ErrorKind> {
    let tls = tcp::tls_for(target, options, configs, &[ALPN_H2])?;
    let over_tls = tls.is_some();
    let counter = WireCounter::new_shared();
    let (transport, info) =
        tcp::connect(target, tls, options.connect_timeout, counter.clone()).await?;
    if over_tls && info.alpn.as_deref() != Some(ALPN_H2) {
        // The handshake itself succeeded: say what the server chose instead of h2.
        let chose = match info.alpn.as_deref() {
            Some(other) => format!("ALPN {}", String::from_utf8_lossy(other)),
            None => "no ALPN protocol".to_string(),
        };
        tcp::note_connect_failure(format!(
            "the server chose {chose}, not h2, so it does not speak HTTP/2 over TLS here (-p \
             h1, or -p auto, which follows its choice)"
        ));
        return Err(ErrorKind::Tls);
    }
    Ok((transport, info, counter))
}

/// Waits for the server's SETTINGS (`settings`) until the connect deadline: what it came to and
/// how long the wait took (the `settings` phase), or `None` when the deadline came first. Both
/// HTTP/2 clients wait this way.
async fn wait_settings<T>(
    deadline: Instant,
    settings: impl Future<Output = T>,
) -> Option<(T, Duration)> {
    let waited_from = Instant::now();
    let remaining = deadline.saturating_duration_since(waited_from);
    let got = tokio::time::timeout(remaining, settings).await.ok()?;
    Some((got, waited_from.elapsed()))
}

/// The HTTP/2 protocol (h2c for http targets, h2 for https targets) on the owned codec.
#[derive(Debug, Default)]
pub struct Http2 {
    tls: AlpnConfigs,
    trace: Option<PlaintextTaps>,
    windows: H2Windows,
}

impl Http2 {
    /// HTTP/2 whose connections show their plaintext frames to `taps` (`httpvs trace`).
    pub fn with_trace(taps: PlaintextTaps) -> Self {
        Http2 {
            trace: Some(taps),
            ..Http2::default()
        }
    }

    /// This protocol with its connections advertising `windows` (`--window`,
    /// `--connection-window`); unset ones stay h2load's default.
    pub fn with_windows(mut self, windows: ReceiveWindows) -> Self {
        self.windows = windows.h2();
        self
    }
}

impl Protocol for Http2 {
    type Conn = Http2Connection;

    fn failure_detail(&self) -> Option<String> {
        tcp::take_connect_note()
    }

    async fn connect(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> Result<(Http2Connection, ConnectInfo), ErrorKind> {
        let deadline = Instant::now() + options.connect_timeout;
        let (transport, mut info, counter) = open_transport(target, options, &self.tls).await?;
        tcp::note_connect_step(Some(
            "connected, but the server's HTTP/2 SETTINGS did not come",
        ));
        let mut core = ConnCore::new(counter.clone(), self.windows);
        core.reserve_streams(options.streams as usize);
        let core = Arc::new(Mutex::new(core));
        let io = transport.tapped(self.trace.as_ref());
        let driver = tokio::spawn(driver::drive(io, core.clone()));
        let conn = Http2Connection::new(core.clone(), counter, driver);
        let settings = poll_fn(|cx| driver::lock(&core).poll_settings(cx));
        match wait_settings(deadline, settings).await {
            Some((Ok(max_streams), waited)) => {
                tcp::note_connect_step(None);
                info.server_max_streams = max_streams;
                info.settings = waited.into();
            }
            Some((Err(kind), _)) => {
                if let Some(why) = driver::lock(&core).broken_preface() {
                    tcp::note_connect_failure(why);
                } else if let Some(why) = tcp::take_tls_error().filter(|_| kind == ErrorKind::Tls) {
                    // An alert after the handshake (a client certificate wanted, or refused):
                    // what rustls said, not the step waited at.
                    tcp::note_connect_failure(why);
                } else if options.tls.is_some()
                    && matches!(kind, ErrorKind::ConnectionClosed | ErrorKind::Reset)
                {
                    let how = match kind {
                        ErrorKind::Reset => "reset the connection",
                        _ => "closed the connection",
                    };
                    tcp::note_connect_failure(format!(
                        "{}the server {how} before its HTTP/2 SETTINGS",
                        tcp::AFTER_TLS
                    ));
                }
                return Err(kind);
            }
            None => return Err(ErrorKind::ConnectTimeout),
        }
        Ok((conn, info))
    }
}
