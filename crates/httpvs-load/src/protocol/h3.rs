//! HTTP/3 over QUIC (quinn): one UDP socket and quinn endpoint per worker thread, shared by
//! that worker's connections; each connection carries up to `-m` concurrent request streams.
//!
//! Two implementations of the HTTP/3 layer, chosen per [`Http3`] ([`H3Engine`]): the owned client
//! (`owned.rs`: requests straight on quinn streams, `request_head.rs` encodes each distinct head
//! once, `response.rs` reads responses, `qpack.rs` + `qpack_static.rs` the static-table QPACK),
//! which the load path runs; and the h3 crate (`reference.rs`, with `tap.rs` watching what h3
//! does not expose), kept as the correctness reference and for `httpvs trace`.
//! Shared: `connection.rs` (the engine-facing connection), `frames.rs` (frame headers, GOAWAY),
//! `classify.rs` (errors), `congestion.rs` (the congestion controller, as the kernel's TCP),
//! `alt_svc.rs` + `discovery.rs` (`-p auto --alt-svc`).

mod alt_svc;
mod classify;
mod congestion;
mod connection;
mod discovery;
mod frames;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod owned;
mod qpack;
mod qpack_static;
mod reference;
mod request_head;
mod response;
mod tap;

pub use alt_svc::{alt_svc_h3, h3_port_in};
pub use congestion::CongestionControl;
pub use connection::{H3Connection, H3Engine};
pub use discovery::discover_h3_port;
pub use frames::FrameEvent;
pub use tap::H3TapObserver;

use crate::error::ErrorKind;
use crate::protocol::window::ReceiveWindows;
use crate::protocol::{ConnectInfo, ConnectOptions, Protocol, Target};
use connection::Watched;
use quinn::crypto::rustls::{HandshakeData, QuicClientConfig};
use std::cell::{Cell, RefCell};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The ALPN token of HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";

/// UDP socket buffer size asked of the kernel: QUIC bursts a congestion window per socket.
const UDP_BUFFER_BYTES: usize = 4 << 20;

/// How long a handshake may go unanswered before we check for an ICMP port-unreachable.
const REFUSED_PROBE_AFTER: Duration = Duration::from_millis(250);

/// After a refusal, how long the next connect's probe waits for the ICMP before it starts a
/// QUIC handshake: a refused handshake's quinn state lingers in the endpoint (tens of KB each),
/// and an open model against a server gone down made thousands a second (500 MB at 20k/s).
const REFUSED_AGAIN_WAIT: Duration = Duration::from_millis(50);
/// The most a worker waits at its end for its closed connections to drain
/// ([`Http3::wind_down`]).
const WIND_DOWN: Duration = Duration::from_millis(100);

/// HTTP/3 choices beyond the common [`ConnectOptions`].
#[derive(Debug, Clone, Copy)]
pub struct H3Options {
    /// `--0rtt`: send requests as 0-RTT early data when a session ticket allows it.
    pub zero_rtt: bool,
    /// QUIC idle timeout; keep-alives go out at a third of it so idle connections live on.
    pub idle_timeout: Duration,
    /// Congestion controller of our sending side (requests, bodies, ACKs).
    pub congestion: CongestionControl,
    /// `--window`, `--connection-window`: quinn's receive windows; unset ones stay quinn's.
    pub windows: ReceiveWindows,
}

impl Default for H3Options {
    /// 0-RTT off, a 30 s idle timeout, the congestion control of this host's TCP, and quinn's
    /// receive windows.
    fn default() -> Self {
        H3Options {
            zero_rtt: false,
            idle_timeout: Duration::from_secs(30),
            congestion: CongestionControl::like_kernel_tcp(),
            windows: ReceiveWindows::default(),
        }
    }
}

/// Whether the worker's UDP socket batches datagrams in the kernel (quinn-udp's GSO/GRO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpOffload {
    /// Datagrams per send call (GSO); 1 means off.
    pub gso_segments: usize,
    /// Datagrams per receive call (GRO); 1 means off.
    pub gro_segments: usize,
}

/// Why a worker's HTTP/3 endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum H3SetupError {
    /// Binding or configuring the UDP socket failed.
    #[error("cannot set up the UDP socket for HTTP/3: {0}")]
    Socket(#[from] std::io::Error),
}

/// The HTTP/3 protocol for one worker: its quinn endpoint and client configuration.
pub struct Http3 {
    endpoint: quinn::Endpoint,
    offload: UdpOffload,
    options: H3Options,
    transport: Arc<quinn::TransportConfig>,
    /// The quinn client config derived from the run's TLS config, built on first connect.
    client_config: RefCell<Option<(Arc<rustls::ClientConfig>, quinn::ClientConfig)>>,
    /// `httpvs trace` only: sees each connection's streams and frames.
    trace: Option<Arc<dyn H3TapObserver>>,
    /// Which HTTP/3 implementation new connections run.
    engine: H3Engine,
    /// quinn's words for the last failed handshake.
    last_failure: RefCell<Option<String>>,
    /// The last connect attempt was refused (ICMP port-unreachable): the next one probes for
    /// that at once instead of after [`REFUSED_PROBE_AFTER`], so a `-n` run against a server
    /// that went down fails its requests at the pace of TCP's refusals, not four a second.
    refused_last: Cell<bool>,
    /// What this worker's connection watches share: one probe a second at most between them.
    probes: Arc<ProbeGate>,
}

/// The reachability probes of one worker's connections: at most one a second between them,
/// its refusal seen by every watch. A probe per connection per silent second was a socket and
/// a datagram each (500 connections waiting on a slow answer made 500 a second), and behind
/// the emulator's loopback forwarder a flow each, held for a minute, until its table was full
/// and new connections went unanswered.
#[derive(Default)]
struct ProbeGate {
    state: std::sync::Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    /// When the last probe went out.
    last: Option<Instant>,
    /// When the last probe that was refused went out (its `last`).
    refused: Option<Instant>,
}

impl ProbeGate {
    /// Whether the server's port refuses, as the last probe (one in the last second) says:
    /// its refusal counts for every watch, and the watch whose turn it is probes. Only the
    /// latest probe's answer counts: a refusal before a restart is not the new server's.
    async fn refused(&self, addr: SocketAddr) -> bool {
        let now = Instant::now();
        let probed = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match state.last {
                Some(at) if now - at < WATCH_EVERY => Some(at),
                _ => {
                    state.last = Some(now);
                    None
                }
            }
        };
        if let Some(at) = probed {
            // Another watch's probe, maybe still waiting: its answer is this one's too (the
            // watches of connections opened together tick together, and the next tick of
            // those that only looked came a second later, often after the run).
            let answered = at + REFUSED_PROBE_AFTER + PROBE_SETUP;
            if now < answered {
                tokio::time::sleep_until(answered.into()).await;
            }
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            return state.refused == Some(at);
        }
        let refused = port_unreachable(addr, REFUSED_PROBE_AFTER).await;
        if refused {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.refused = Some(now);
        }
        refused
    }
}

/// Slack for a probe's socket, connect and send before its wait for the refusal starts.
const PROBE_SETUP: Duration = Duration::from_millis(10);

impl Http3 {
    /// QUIC connections the endpoint holds now: handshaking, open, or closing and draining.
    pub fn quic_connections(&self) -> usize {
        self.endpoint.open_connections()
    }

    /// Binds one UDP socket (wildcard address of `target`'s family, port 0) and its endpoint.
    ///
    /// Must be called inside the worker's tokio runtime: the endpoint's I/O task runs there.
    pub fn new(target: &Target, options: H3Options) -> Result<Self, H3SetupError> {
        let bind = if target.addr.is_ipv6() {
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
        };
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(bind),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        // Best effort: the kernel caps these at net.core.{r,w}mem_max.
        let _ = socket.set_recv_buffer_size(UDP_BUFFER_BYTES);
        let _ = socket.set_send_buffer_size(UDP_BUFFER_BYTES);
        socket.bind(&bind.into())?;
        let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
        let udp = runtime.wrap_udp_socket(socket.into())?;
        let offload = UdpOffload {
            gso_segments: udp.max_transmit_segments(),
            gro_segments: udp.max_receive_segments(),
        };
        let endpoint = quinn::Endpoint::new_with_abstract_socket(
            quinn::EndpointConfig::default(),
            None,
            udp,
            runtime,
        )?;
        Ok(Http3 {
            endpoint,
            offload,
            options,
            transport: Arc::new(transport_config(&options)),
            client_config: RefCell::new(None),
            trace: None,
            engine: H3Engine::Owned,
            last_failure: RefCell::new(None),
            refused_last: Cell::new(false),
            probes: Arc::default(),
        })
    }

    /// This protocol with its connections shown to `observer` (`httpvs trace`); the tap runs
    /// on the h3-crate reference, so traced connections use it.
    pub fn with_trace(mut self, observer: Arc<dyn H3TapObserver>) -> Self {
        self.trace = Some(observer);
        self.engine = H3Engine::Reference;
        self
    }

    /// This protocol with new connections on `engine` (the owned client by default).
    pub fn with_engine(mut self, engine: H3Engine) -> Self {
        self.engine = engine;
        self
    }

    /// Which HTTP/3 implementation new connections run.
    pub fn engine(&self) -> H3Engine {
        self.engine
    }

    /// The congestion controller of this worker's connections.
    pub fn congestion(&self) -> CongestionControl {
        self.options.congestion
    }

    /// Whether GSO/GRO are on for this worker's socket.
    pub fn offload(&self) -> UdpOffload {
        self.offload
    }

    /// The local address of this worker's UDP socket.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// The quinn client config for the run's TLS config: ALPN h3, early data when asked.
    fn quic_client_config(
        &self,
        options: &ConnectOptions,
    ) -> Result<quinn::ClientConfig, ErrorKind> {
        // h3 is https only; the CLI rejects http URLs before a run starts.
        let tls = options.tls.as_ref().ok_or(ErrorKind::Tls)?;
        let mut cache = self.client_config.borrow_mut();
        if let Some((key, config)) = cache.as_ref() {
            if Arc::ptr_eq(key, tls) {
                return Ok(config.clone());
            }
        }
        let mut rustls_config = (**tls).clone();
        rustls_config.alpn_protocols = vec![ALPN_H3.to_vec()];
        rustls_config.enable_early_data = self.options.zero_rtt;
        let quic =
            QuicClientConfig::try_from(Arc::new(rustls_config)).map_err(|_| ErrorKind::Tls)?;
        let mut config = quinn::ClientConfig::new(Arc::new(quic));
        config.transport_config(self.transport.clone());
        *cache = Some((tls.clone(), config.clone()));
        Ok(config)
    }

    /// Runs the QUIC handshake (or starts 0-RTT), bounded by the connect timeout.
    async fn handshake(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> Result<(quinn::Connection, Option<quinn::ZeroRttAccepted>), ErrorKind> {
        let config = self.quic_client_config(options)?;
        let connecting = self
            .endpoint
            .connect_with(config, target.addr, super::tls::bare_host(&target.host))
            .map_err(|e| match e {
                quinn::ConnectError::InvalidServerName(_) => ErrorKind::Tls,
                quinn::ConnectError::UnsupportedVersion => ErrorKind::VersionNegotiation,
                _ => ErrorKind::Io,
            })?;
        let connecting = if self.options.zero_rtt {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => return Ok((conn, Some(accepted))),
                Err(connecting) => connecting,
            }
        } else {
            connecting
        };
        let handshake = tokio::time::timeout(options.connect_timeout, connecting);
        let probe_after = if self.refused_last.get() {
            Duration::ZERO
        } else {
            REFUSED_PROBE_AFTER
        };
        let result = tokio::select! {
            done = handshake => match done {
                Ok(Ok(conn)) => Ok((conn, None)),
                Ok(Err(e)) => {
                    // In words, as over TCP: a certificate's dates as days, not UNIX seconds.
                    let mut said = crate::protocol::tls::plain_words(&e.to_string());
                    if matches!(e, quinn::ConnectionError::TimedOut) {
                        // QUIC's idle timer, not the connect timeout, ended it: the line names
                        // --connect-timeout, which raising would not help.
                        said = format!(
                            "{IDLE_ENDED_HANDSHAKE} ({:?}, and at least 3 of QUIC's probe \
                             timeouts) ended the handshake before the connect timeout did",
                            self.options.idle_timeout
                        );
                    }
                    *self.last_failure.borrow_mut() = Some(said);
                    Err(classify::handshake_failure(&e))
                }
                Err(_elapsed) => Err(ErrorKind::ConnectTimeout),
            },
            () = refused_after(target.addr, probe_after) => Err(ErrorKind::Refused),
        };
        self.refused_last
            .set(matches!(result, Err(ErrorKind::Refused)));
        result
    }
}

/// Transport settings for client connections.
fn transport_config(options: &H3Options) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(options.idle_timeout)
        .unwrap_or_else(|_| quinn::IdleTimeout::from(quinn::VarInt::from_u32(30_000)));
    transport.max_idle_timeout(Some(idle));
    transport.keep_alive_interval(Some(options.idle_timeout / 3));
    // The server may not open request streams towards a client (RFC 9114 §6.1).
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(0));
    transport.congestion_controller_factory(options.congestion.factory());
    // Streams go out in the order they were written, not round-robin: a request stream carries
    // one head (and maybe a body), so fair queuing only costs a priority-queue push per stream.
    transport.send_fairness(false);
    options.windows.apply_to_quic(&mut transport);
    // Loss detection by time with a quarter RTT of slack, as the kernel's TCP (RACK) once it
    // has seen reordering: quinn's 3-packet threshold took the reordering that jitter causes
    // for loss (h3 at a third of h2's rate over a 20 ms + 2 ms link); `httpvs serve` sets the
    // same (`httpvs_server::h3::transport`).
    transport.packet_threshold(u32::MAX);
    transport.time_threshold(1.25);
    transport
}

/// How a handshake that QUIC's idle timer ended is said (it fails as `connect_timeout`, but the
/// connect timeout's line would name the wrong limit).
pub const IDLE_ENDED_HANDSHAKE: &str = "QUIC's idle timeout";

/// H3_INTERNAL_ERROR (RFC 9114 §8.1): the code a connection closes with when its server is gone.
const H3_INTERNAL_ERROR: u32 = 0x102;

/// How often a connection's watch looks at its traffic.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Closes a connection whose server is gone. A killed QUIC server sends no CONNECTION_CLOSE,
/// and quinn's shared socket does not surface the ICMP port-unreachable its datagrams then
/// draw: the requests in flight would wait out the idle timeout (30 s) and a `-z` run would
/// end with no error at all. When a second passes in which nothing came back while this side
/// sent, or while a request waited, a connected probe asks the port (one a second at most for
/// all of a worker's connections: [`ProbeGate`]); if it refuses, the
/// connection closes, its requests fail as `unreachable` (the connection counts as reset), and
/// the slots' reconnects meet the refusal and count it. "While a request waited": a server
/// killed after acknowledging every packet leaves quinn nothing to resend, and its retries of
/// the rest back off to seconds apart; a connection watched only for sending was missed until
/// its next keep-alive, often past the run's end.
async fn watch_reachable(
    quic: quinn::Connection,
    addr: SocketAddr,
    watch: Arc<Watched>,
    probes: Arc<ProbeGate>,
) {
    let traffic = |quic: &quinn::Connection| {
        let stats = quic.stats();
        (stats.udp_tx.datagrams, stats.udp_rx.datagrams)
    };
    let mut last = traffic(&quic);
    loop {
        tokio::select! {
            _ = quic.closed() => return,
            () = tokio::time::sleep(WATCH_EVERY) => {}
        }
        let now = traffic(&quic);
        let waiting = watch.waiting.load(Ordering::Relaxed) > 0;
        let silent = now.1 == last.1 && (now.0 > last.0 || waiting);
        last = now;
        if silent && probes.refused(addr).await {
            watch.gone.store(true, Ordering::Release);
            quic.close(
                quinn::VarInt::from_u32(H3_INTERNAL_ERROR),
                b"server unreachable",
            );
            return;
        }
    }
}

/// Resolves when `addr` answers with ICMP port-unreachable after `delay`; never otherwise.
///
/// quinn's shared socket does not surface ICMP errors, so an unanswered handshake would only
/// end at the connect timeout. A connected probe socket sees ECONNREFUSED at once.
async fn refused_after(addr: SocketAddr, delay: Duration) {
    tokio::time::sleep(delay).await;
    if !port_unreachable(addr, REFUSED_PROBE_AFTER).await {
        std::future::pending::<()>().await;
    }
}

/// Sends one byte from a connected UDP socket and waits up to `wait` for ECONNREFUSED.
/// QUIC servers drop datagrams this short (RFC 9000 §14.1), so a live server ignores it.
async fn port_unreachable(addr: SocketAddr, wait: Duration) -> bool {
    let local = if addr.is_ipv6() {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
    };
    let Ok(probe) = tokio::net::UdpSocket::bind(local).await else {
        return false;
    };
    if probe.connect(addr).await.is_err() || probe.send(&[0]).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(wait, probe.recv(&mut buf)).await,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

impl Protocol for Http3 {
    type Conn = H3Connection;

    fn failure_detail(&self) -> Option<String> {
        self.last_failure.borrow().clone()
    }

    /// Waits until the endpoint's connections have drained (3 PTOs after their close, about
    /// 80 ms on loopback), or [`WIND_DOWN`] at most: long enough for every CONNECTION_CLOSE to
    /// leave. The worker used to stop at once, and of 300 connections closed at a run's end
    /// about 20 closes got out; the server held the rest until its idle timeout (and counted
    /// a GOAWAY to each at its stop).
    async fn wind_down(&self) {
        let _ = tokio::time::timeout(WIND_DOWN, self.endpoint.wait_idle()).await;
    }

    async fn connect(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> Result<(H3Connection, ConnectInfo), ErrorKind> {
        if self.refused_last.get() && port_unreachable(target.addr, REFUSED_AGAIN_WAIT).await {
            // Still refused: no QUIC state is made for it.
            return Err(ErrorKind::Refused);
        }
        let start = Instant::now();
        let (quic, zero_rtt) = self.handshake(target, options).await?;
        let handshake = start.elapsed();
        let alpn = quic
            .handshake_data()
            .and_then(|data| data.downcast::<HandshakeData>().ok())
            .and_then(|data| data.protocol);
        let watched = quic.clone();
        let conn = match self.engine {
            H3Engine::Owned => H3Connection::establish(quic, zero_rtt).await?,
            H3Engine::Reference => {
                H3Connection::establish_reference(quic, zero_rtt, self.trace.clone()).await?
            }
        };
        // Only once the connection exists: the watch holds a handle, and it is the connection's
        // close (the slot's, the probe's, its Drop) that ends the watch.
        tokio::spawn(watch_reachable(
            watched,
            target.addr,
            conn.watched(),
            self.probes.clone(),
        ));
        let info = ConnectInfo {
            tcp_connect: super::PhaseTime::ZERO,
            handshake: handshake.into(),
            // quinn does not say whether a handshake resumed (only whether 0-RTT was taken).
            resumed: false,
            // Requests go out without waiting for the server's SETTINGS.
            settings: super::PhaseTime::ZERO,
            alpn: alpn.map(Vec::into_boxed_slice),
            // quinn does not expose the peer's initial_max_streams_bidi transport parameter;
            // opening a stream beyond it simply waits for MAX_STREAMS.
            server_max_streams: None,
        };
        Ok((conn, info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watches of a worker's connections probe once a second between them, and a refusal
    /// counts for all: 500 connections waiting on a slow answer made 500 probes a second.
    #[test]
    fn a_worker_s_watches_share_one_probe_a_second() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // A live port that ignores the probes' single bytes, as a QUIC server does.
            let live = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let gate = ProbeGate::default();
            for _ in 0..10 {
                assert!(!gate.refused(live.local_addr().unwrap()).await);
            }
            let mut buf = [0u8; 8];
            live.recv(&mut buf).await.unwrap();
            let more = tokio::time::timeout(Duration::from_millis(100), live.recv(&mut buf));
            assert!(more.await.is_err(), "one probe, not ten");
            // A closed port: refused, and the next watch in the second reads that too (its
            // turn to probe has not come).
            let closed = std::net::UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            let gate = ProbeGate::default();
            assert!(gate.refused(closed).await);
            assert!(gate.refused(closed).await);
            // A server back on the port: the next probe's answer counts, not the refusal
            // before it (a watch reading that closed a live connection as unreachable).
            if let Ok(_back) = tokio::net::UdpSocket::bind(closed).await {
                tokio::time::sleep(WATCH_EVERY).await;
                assert!(!gate.refused(closed).await);
                assert!(!gate.refused(closed).await);
            }
        });
    }
}
