//! How to send: the seam between the engine and each HTTP protocol (h1, h2c/h2, h3).
//!
//! The engine (when to send) and the stats (what to record) only see the types in this file.
//! A protocol opens a [`Connection`] and sends requests on it; it never touches a schedule,
//! a histogram or a report. Adding a protocol means one new file that implements [`Protocol`].

pub mod h1;
pub mod h2;
pub mod h3;
pub use httpvs_h2wire::hpack;
pub mod last_read;
pub mod probe;
pub mod tcp;
pub mod tls;
pub mod window;
pub mod wire;

use crate::error::ErrorKind;
use bytes::Bytes;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest response head read (status line and headers, interim responses apart, or an
/// HTTP/2 header block as sent): 64 KiB, nginx's order of limit (curl and h2load take up to
/// about 300 KB). A longer one is a protocol error, so a server that sends an endless header
/// costs this much memory, not all of it. The h1 and h2 clients, Alt-Svc discovery and the
/// trace all stop there; h2 says it in SETTINGS_MAX_HEADER_LIST_SIZE.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// A `content-length` value: digits only (RFC 9110 §8.6; HTTP/1.1's whitespace around it is the
/// caller's to trim); `None` for one that is no length. Shared by the h1, h2 and h3 clients.
pub(crate) fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// How an h2 or h3 response whose `body` bytes are not the length its head `announced` fails
/// (RFC 9113 §8.1.1, RFC 9114 §4.1.2; nghttp2 takes it so): short is a truncated body, as on
/// HTTP/1.1, long a protocol error. A HEAD's response and a 204 or 304 announce a length they
/// do not carry.
pub(crate) fn body_length_error(
    announced: Option<u64>,
    body: u64,
    head_request: bool,
    status: u16,
) -> Option<ErrorKind> {
    let announced = announced.filter(|_| !head_request && status != 204 && status != 304)?;
    match body.cmp(&announced) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Less => Some(ErrorKind::TruncatedBody),
        std::cmp::Ordering::Greater => Some(ErrorKind::Protocol),
    }
}

/// The fields that belong to one HTTP/1.1 connection, which an h2 or h3 message may not carry
/// (RFC 9113 §8.2.2, RFC 9114 §4.2).
pub(crate) const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Whether a request header is HTTP/1.1's alone, which h2 and h3 leave out (RFC 9113 §8.2.2,
/// RFC 9114 §4.2: a server resets a stream that carries one): the connection headers, and a TE
/// other than "trailers" (`-H 'TE: gzip'` failed every h2c request with PROTOCOL_ERROR).
pub fn connection_specific(name: &http::HeaderName, value: &http::HeaderValue) -> bool {
    CONNECTION_SPECIFIC.contains(&name.as_str())
        || (name == http::header::TE && !value.as_bytes().eq_ignore_ascii_case(b"trailers"))
}

/// The User-Agent every protocol sends unless `-H` sets one.
pub const USER_AGENT: &str = concat!("httpvs/", env!("CARGO_PKG_VERSION"));

/// Which wire protocol a run uses, after `auto` has been resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolKind {
    /// HTTP/1.1 over TCP, or over TLS with ALPN http/1.1.
    H1,
    /// HTTP/2 over cleartext TCP with prior knowledge.
    H2c,
    /// HTTP/2 over TLS (ALPN h2).
    H2,
    /// HTTP/3 over QUIC.
    H3,
}

impl ProtocolKind {
    /// The name users type after `-p`.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::H1 => "h1",
            ProtocolKind::H2c => "h2c",
            ProtocolKind::H2 => "h2",
            ProtocolKind::H3 => "h3",
        }
    }
}

/// Where requests go: resolved once before the run.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http` or `https`.
    pub scheme: String,
    /// Host as written in the URL (used for SNI and the Host/:authority header).
    pub host: String,
    /// Port (explicit or the scheme's default).
    pub port: u16,
    /// The resolved address connections go to.
    pub addr: SocketAddr,
    /// How long the DNS lookup took (reported as the DNS phase).
    pub dns: Duration,
}

/// One request, built once before the run and shared by every worker.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Method, e.g. GET.
    pub method: http::Method,
    /// Full URI (scheme, authority, path and query).
    pub uri: http::Uri,
    /// Extra headers from `-H`, in order.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Request body (`-d`, `--data-file`); empty for none.
    pub body: Bytes,
}

impl RequestSpec {
    /// Whether the request may go out again after a connection dropped it without an answer,
    /// when the server may have processed it: an idempotent method (RFC 9110 §9.2.2: GET,
    /// HEAD, OPTIONS, TRACE, PUT, DELETE) or an `Idempotency-Key` header, as Go's client
    /// decides. A request the server said it did not process (GOAWAY, REFUSED_STREAM, a
    /// `Connection: close` before its turn) goes out again whatever its method.
    pub fn may_resend(&self) -> bool {
        self.method.is_idempotent()
            || self
                .headers
                .iter()
                .any(|(name, _)| name.as_str().eq_ignore_ascii_case("idempotency-key"))
    }
}

/// Options every protocol honours when it opens a connection.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Bound on TCP connect + TLS handshake (or the QUIC handshake), and for h2 the wait for
    /// the server's SETTINGS.
    pub connect_timeout: Duration,
    /// TLS client configuration for https targets (ALPN is set by the protocol).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Requested concurrent streams per connection (`-m`): h2/h3 streams, h1 pipelining depth.
    pub streams: u32,
    /// `--no-keepalive`: h1 sends `Connection: close` and uses a connection once.
    pub keepalive: bool,
}

/// A phase's time, in nanoseconds: 8 bytes where a `Duration` takes 16 (see [`ConnectInfo`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct PhaseTime(u64);

impl PhaseTime {
    /// No time: the phase did not happen (then it is not recorded).
    pub const ZERO: PhaseTime = PhaseTime(0);

    /// As a `Duration`.
    pub fn get(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Whether no time was spent (the phase did not happen).
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl From<Duration> for PhaseTime {
    /// Saturates past 584 years.
    fn from(d: Duration) -> PhaseTime {
        PhaseTime(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// What opening a connection cost, phase by phase. Every byte of it is copied through the
/// connect futures, whose peak while thousands of connections open at once stays in the
/// heap: 8 bytes more cost a held h1 connection about 130 bytes of RSS.
#[derive(Debug, Clone, Default)]
pub struct ConnectInfo {
    /// TCP connect time (zero for QUIC: then not recorded).
    pub tcp_connect: PhaseTime,
    /// TLS handshake time, or the QUIC handshake time for h3.
    pub handshake: PhaseTime,
    /// TLS over TCP: the handshake resumed a session (a ticket from an earlier connection of
    /// the run), rather than a full one.
    pub resumed: bool,
    /// h2 and h2c: from the connection preface to the server's SETTINGS, which the connection
    /// waits for to learn the stream limit (zero for other protocols: then not recorded).
    pub settings: PhaseTime,
    /// ALPN protocol the server chose, if any (a boxed slice: 8 bytes less than a Vec).
    pub alpn: Option<Box<[u8]>>,
    /// The server's concurrent-stream limit (h2 SETTINGS_MAX_CONCURRENT_STREAMS, h3 max bidi).
    pub server_max_streams: Option<u32>,
}

/// What one completed exchange looked like; the engine adds the total latency itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseInfo {
    /// HTTP status code.
    pub status: u16,
    /// From the request's send start to the first response byte (the head).
    pub ttfb: Duration,
    /// Decoded response header bytes (names + values), for header-compression accounting.
    pub header_bytes: u64,
    /// Response body bytes.
    pub body_bytes: u64,
    /// The response asked to close the connection (h1 `Connection: close`).
    pub close_requested: bool,
    /// When the response was complete, where the protocol read the clock as its last bytes
    /// came (the engine reads it otherwise): one clock read a request fewer.
    pub done_at: Option<Instant>,
}

/// Why a send did not produce a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The server never processed it (above a GOAWAY's last-stream-id, REFUSED_STREAM, an h1
    /// request behind a `Connection: close` or not written whole), or it may have and the
    /// request may be resent ([`RequestSpec::may_resend`]: an h1 connection reused and then
    /// closed before any byte of its response). The engine resends it on a new connection and
    /// counts it as "retried", not failed.
    Retry(RetryReason),
    /// The request failed; counted under this kind.
    Failed(ErrorKind),
}

/// Why a request is safe to send again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryReason {
    /// h2/h3 GOAWAY with a last-stream-id below this stream, and its error code (h2's; 0,
    /// NO_ERROR, for h3, whose GOAWAY carries none): the failure named when retries run out.
    Goaway(u64),
    /// h2 RST_STREAM(REFUSED_STREAM).
    Refused,
    /// h3 H3_REQUEST_REJECTED: not processed.
    Rejected,
    /// h3: sent as 0-RTT early data, which the server refused unprocessed.
    EarlyRejected,
    /// h1: the server closed the connection (after `Connection: close` or keep-alive limit)
    /// before this request's response began.
    ConnectionClosed,
    /// h1: pipelined behind a request that timed out (`--timeout`), whose answer may still
    /// come: we closed the connection, and this request's answer could no longer be told
    /// from it.
    BehindTimeout,
}

/// Who ended a connection, as the report counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCause {
    /// Still open.
    Open,
    /// The server sent GOAWAY (h2/h3); the connection drains and takes no new requests.
    Goaway,
    /// The server sent `Connection: close` (h1).
    ConnectionClose,
    /// The server closed the TCP connection (FIN) or the QUIC connection without an error.
    Fin,
    /// The connection was reset or failed with an error.
    Reset,
    /// We closed it (end of run, `--no-keepalive`, or the server broke the protocol).
    Local,
}

/// What an h1 connection found between requests that ended it ([`Connection::close_detail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseDetail {
    /// The server closed it while it sat idle, no request in flight (its FIN came between
    /// requests, an idle timeout), so the engine never sent on it (`CloseCause::Fin`).
    Idle,
    /// We closed it because the server sent bytes no request asked for (an extra response,
    /// or stray bytes while idle), rather than read them as the next response
    /// (`CloseCause::Local`).
    Unasked,
}

/// Bytes on the wire for one connection so far (TLS/QUIC framing included where visible).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireBytes {
    /// All bytes written to the socket.
    pub sent: u64,
    /// All bytes read from the socket.
    pub received: u64,
    /// Encoded request header bytes sent (HPACK/QPACK/h1 head), when the protocol can see them.
    pub header_sent: u64,
    /// Encoded response header bytes received, when the protocol can see them.
    pub header_received: u64,
    /// The same headers decoded (names + values), when the protocol decodes them all, as the
    /// owned h2 and h3 clients do: every response head, trailer and interim head that came, a
    /// request's success or not (0 where only succeeded requests' heads are known).
    pub header_decoded_received: u64,
    /// UDP datagrams sent (h3 only).
    pub datagrams_sent: u64,
    /// UDP datagrams received (h3 only).
    pub datagrams_received: u64,
}

/// What the QUIC stack reports about one connection (h3 only).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuicStats {
    /// UDP datagrams sent.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// UDP payload bytes sent.
    pub udp_bytes_sent: u64,
    /// UDP payload bytes received.
    pub udp_bytes_received: u64,
    /// Packets the stack declared lost.
    pub packets_lost: u64,
    /// Packets (or frames) retransmitted.
    pub retransmits: u64,
    /// Smoothed RTT at the end.
    pub smoothed_rtt: std::time::Duration,
    /// Minimum RTT seen (when the stack exposes it; else the smoothed RTT).
    pub min_rtt: std::time::Duration,
    /// Congestion window at the end, bytes.
    pub cwnd: u64,
    /// Requests sent as 0-RTT early data that the server accepted.
    pub early_requests: u64,
    /// Requests sent as 0-RTT early data that the server refused (they go again, after the
    /// handshake).
    pub early_rejected: u64,
}

/// One open connection. `send` takes `&self` so up to `-m` sends may run at once on it.
/// Futures need not be `Send`: each worker runs its connections on one thread.
pub trait Connection: 'static {
    /// Sends one request and reads the whole response. `start` is when the engine started the
    /// send (it has read the clock already): the base of the time to first byte.
    fn send(
        &self,
        req: &RequestSpec,
        start: Instant,
    ) -> impl Future<Output = Result<ResponseInfo, SendError>>;
    /// Whether new requests may still be sent here; false after GOAWAY, close, or an error.
    fn accepts_requests(&self) -> bool;
    /// Why the connection stopped accepting requests ([`CloseCause::Open`] while it accepts).
    fn close_cause(&self) -> CloseCause;
    /// Wire byte counters so far.
    fn wire(&self) -> WireBytes;
    /// Closes the connection from our side (end of run).
    fn close(&self);
    /// The run is over: the requests in flight are about to be dropped, and the connection
    /// with them, so nothing need be said per request (h2 sends no RST_STREAM for them).
    fn quiesce(&self) {}
    /// QUIC-level statistics; `None` for TCP protocols.
    fn quic_stats(&self) -> Option<QuicStats> {
        None
    }
    /// The error code of the server's GOAWAY when it was not NO_ERROR (h2; h3's GOAWAY has no
    /// code): such a close is the server failing, not a keep-alive limit.
    fn goaway_error(&self) -> Option<u64> {
        None
    }
    /// Whether the server has closed the connection, looked at now (h1: a peek for its FIN,
    /// which an idle connection does not read): `httpvs trace`, and a connection still open at
    /// the end of a run. `false` where nothing can tell, or the protocol saw it already.
    fn peer_finished(&self) -> bool {
        false
    }
    /// What the server did that broke the protocol, and what we answered, when it did (h2:
    /// "we answered GOAWAY FRAME_SIZE_ERROR to its 7-byte PING frame on stream 0").
    fn protocol_breach(&self) -> Option<String> {
        None
    }
    /// Why it closed, beyond its [`CloseCause`], when an h1 connection saw it between
    /// requests (`None` otherwise, and for other protocols).
    fn close_detail(&self) -> Option<CloseDetail> {
        None
    }
    /// On a fresh connection about to be closed (the engine's probe): the server's limit on
    /// concurrent request streams when it is at most `want`, for protocols that learn it only by
    /// trying (h3: quinn does not expose the peer's transport parameters). `None` when unknown
    /// or above `want`. It may spend streams, so never on a connection that carries requests.
    fn stream_limit(&self, _want: u32) -> Option<u32> {
        None
    }
}

/// A protocol: how to open a [`Connection`] to a target.
pub trait Protocol: 'static {
    /// The connection type this protocol opens.
    type Conn: Connection;
    /// Opens one connection, timing its phases.
    fn connect(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> impl Future<Output = Result<(Self::Conn, ConnectInfo), ErrorKind>>;
    /// What the last failed connect saw beyond its [`ErrorKind`] (h3: quinn's close reason, the
    /// peer's words included), for the one line a failed first connection prints.
    fn failure_detail(&self) -> Option<String> {
        None
    }
    /// Lets the connections closed at the run's end tell their peer before the worker's runtime
    /// stops. TCP's FINs leave with the close; h3's CONNECTION_CLOSEs leave from the endpoint's
    /// task, which has to run for them.
    fn wind_down(&self) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}
