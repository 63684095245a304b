//! Runs one traced exchange: N requests at once on one connection opened by the load
//! generator's own protocol code, with the trace taps switched on, then the summary.

use super::event::{Direction, EventKind, TraceEvent};
use super::failure;
use super::h1_stream::H1Wire;
use super::h2_frames::H2Wire;
use super::h3_streams::{self, H3Streams, BODY_NOT_VISIBLE, NOT_VISIBLE};
use super::recorder::Recorder;
use super::tls_version::TlsVersionLog;
use super::Trace;
use crate::config::{ProtocolChoice, TlsOptions};
use crate::engine::setup::{on_each_address, LoadError};
use crate::protocol::h1::Http1;
use crate::protocol::h2::Http2;
use crate::protocol::h3::{H3Options, Http3};
use crate::protocol::probe::probe_alpn;
use crate::protocol::tls::{client_config_for, ALPN_H2, ALPN_H3, ALPN_HTTP11};
use crate::protocol::window::ReceiveWindows;
use crate::protocol::wire::PlaintextTaps;
use crate::protocol::{
    ConnectInfo, ConnectOptions, Connection, Protocol, ProtocolKind, RequestSpec, RetryReason,
    SendError, Target, WireBytes,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the trace waits for its h3 CONNECTION_CLOSE to leave before it exits.
const CLOSE_BOUND: Duration = Duration::from_secs(1);

/// What to trace, validated by the CLI.
#[derive(Debug, Clone)]
pub struct TraceConfig {
    /// Target URL.
    pub url: http::Uri,
    /// `-p`.
    pub protocol: ProtocolChoice,
    /// `-m`: requests sent at once on the one connection.
    pub requests: u32,
    /// The request (method, URI, headers, body).
    pub request: RequestSpec,
    /// `-k`, `--cacert`.
    pub tls: TlsOptions,
    /// Bound on TCP connect plus the TLS/QUIC handshake.
    pub connect_timeout: Duration,
    /// Bound on the requests, from the first send to the last response byte.
    pub timeout: Duration,
    /// `--body`: show bodies as text.
    pub show_body: bool,
    /// How long to keep watching after the last response (late GOAWAY, PING, close).
    pub linger: Duration,
    /// `--window`, `--connection-window`: h2's SETTINGS and first WINDOW_UPDATE show them.
    pub windows: ReceiveWindows,
    /// `--connect-to`: where the connection goes instead of the URL's host and port.
    pub connect_to: Option<crate::connect_to::ConnectTo>,
    /// Set by Ctrl-C: the exchange stops where it is, and the trace shows what it saw.
    pub stop: Arc<AtomicBool>,
}

/// What a connection Ctrl-C cut off reads as.
const INTERRUPTED_CONNECTING: &str = "interrupted while connecting (Ctrl-C)";

/// What a request cut off by Ctrl-C reads as.
const INTERRUPTED: &str = "interrupted: Ctrl-C (or SIGTERM, SIGHUP) came before its response";

/// Resolves once `stop` is set (checked every 10 ms: a trace is not a hot path). Outside
/// tokio's task budget: a flood being read beside it spends the budget, and its timer would
/// then say Pending however late.
async fn stopped(stop: &AtomicBool) {
    tokio::task::unconstrained(async {
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// How often a live trace hands its new events to the printer.
const LIVE_TICK: Duration = Duration::from_millis(20);

/// Runs the trace. Setup problems (DNS, TLS files) are errors; connection and request
/// failures are events in the returned trace, with [`Trace::failure`] set.
pub fn run(config: &TraceConfig) -> Result<Trace, LoadError> {
    run_live(config, None)
}

/// [`run`], handing events to `live` as they come (as `nghttp -v` prints them), from the
/// connection's first event on; what a failure or the end changes comes with the trace, whose
/// [`Trace::shown_live`] says how many of its events went out already. `live` returns false to
/// stop (its output is gone).
pub fn run_live(
    config: &TraceConfig,
    mut live: Option<&mut dyn FnMut(&TraceEvent) -> bool>,
) -> Result<Trace, LoadError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::Worker(e.to_string()))?;
    let mut hand_out = |recorder: &Recorder| {
        let Some(sink) = live.as_mut() else { return };
        for event in recorder.take_live() {
            if !sink(&event) {
                live = None;
                return;
            }
        }
    };
    // As `load` does (and curl): when the host has several addresses and one refuses the
    // connection, the next is traced. Nothing of a refused attempt has printed (live printing
    // starts once connected).
    let traced = on_each_address(
        &config.url,
        config.connect_to.as_ref(),
        |target| {
            let recorder = std::cell::OnceCell::new();
            runtime.block_on(async {
                let traced = trace(config, &target, &recorder);
                tokio::pin!(traced);
                loop {
                    tokio::select! {
                        traced = &mut traced => break traced,
                        () = tokio::time::sleep(LIVE_TICK) => {
                            if let Some(recorder) = recorder.get() {
                                hand_out(recorder);
                            }
                        }
                    }
                }
            })
        },
        |outcome| matches!(outcome, Ok((_, true))),
    );
    traced
        .map(|(trace, _)| trace)
        .map_err(|e| e.given_insecure(config.tls.insecure).given_url(&config.url))
}

async fn trace(
    config: &TraceConfig,
    target: &Target,
    live: &std::cell::OnceCell<Recorder>,
) -> Result<(Trace, bool), LoadError> {
    let https = target.scheme.eq_ignore_ascii_case("https");
    let keylog = Arc::new(TlsVersionLog::default());
    let tls_for = |alpn: &[&[u8]]| -> Result<_, LoadError> {
        let base = client_config_for(&config.tls, alpn)
            .map_err(|e| LoadError::TlsConfig(e.to_string()))?;
        let mut with_log = rustls::ClientConfig::clone(&base);
        with_log.key_log = keylog.clone();
        Ok(Arc::new(with_log))
    };
    let mut options = ConnectOptions {
        connect_timeout: config.connect_timeout,
        tls: None,
        streams: config.requests.max(1),
        keepalive: true,
    };
    // When the probe that picks the protocol fails (refused, TLS), the trace goes on over
    // HTTP/1.1 so that its own connection shows the failure as events, as with `-p h1`; not
    // after a connect timeout, which a second connection would only wait out again, nor after
    // Ctrl-C.
    let mut probe_failed = None;
    let mut probe_ended = None;
    let kind = match config.protocol {
        ProtocolChoice::Fixed(kind) => kind,
        ProtocolChoice::Auto if https => {
            options.tls = Some(tls_for(&[ALPN_H2, ALPN_HTTP11])?);
            // The probe's own handshake is not part of the trace: it only picks the protocol.
            let began = Instant::now();
            let probed = tokio::select! {
                probed = probe_alpn(target, &options) => Some(probed),
                () = stopped(&config.stop) => None,
            };
            match probed {
                Some(Ok(kind)) => kind,
                Some(Err(kind)) => {
                    // The step the probe stalled at (TCP connected, no TLS answer), if any.
                    let stalled = crate::protocol::tcp::take_connect_note();
                    probe_failed = Some((kind, began.elapsed()));
                    if kind == crate::ErrorKind::ConnectTimeout {
                        let attempt = failure::Attempt {
                            quic: false,
                            insecure: config.tls.insecure,
                        };
                        let cause = stalled.as_deref();
                        probe_ended = Some(failure::connect_failure(kind, target, cause, attempt));
                    }
                    ProtocolKind::H1
                }
                None => {
                    probe_ended = Some(INTERRUPTED_CONNECTING.to_string());
                    ProtocolKind::H1
                }
            }
        }
        ProtocolChoice::Auto => ProtocolKind::H1,
    };
    if https {
        let alpn: &[&[u8]] = match kind {
            ProtocolKind::H1 => &[ALPN_HTTP11],
            ProtocolKind::H2 | ProtocolKind::H2c => &[ALPN_H2],
            ProtocolKind::H3 => &[ALPN_H3],
        };
        options.tls = Some(tls_for(alpn)?);
    }
    let recorder = live.get_or_init(Recorder::start_now).clone();
    if let Some((kind, took)) = probe_failed {
        let then = match probe_ended {
            Some(_) => "",
            None => ": tracing HTTP/1.1",
        };
        let text = format!(
            "the check of which protocol the server speaks (ALPN) failed ({}, after {:.1} ms){then}",
            kind.name(),
            took.as_secs_f64() * 1e3
        );
        recorder.record(Direction::Local, EventKind::Note { text });
    }
    let mut session = Session {
        config,
        request: config.request.clone(),
        target,
        options: &options,
        recorder: &recorder,
        keylog: &keylog,
        kind,
        h3: None,
        goaway_refused: std::sync::atomic::AtomicU32::new(0),
    };
    let outcome = match (probe_ended, kind) {
        (Some(error), _) => {
            recorder.record(
                Direction::Local,
                EventKind::Error {
                    error: error.clone(),
                },
            );
            Outcome {
                wire: WireBytes::default(),
                connect_failure: Some(error),
                first_failure: None,
                refused: false,
            }
        }
        (None, ProtocolKind::H1) => {
            let wire = H1Wire::new(recorder.clone(), config.show_body);
            let tap = wire.clone();
            let protocol = Http1::with_trace(PlaintextTaps::new(move || Box::new(tap.clone())));
            let outcome = session.exchange(&protocol).await;
            // A close by the server ended the body already (the tap's `closed`): one still
            // open here was ended by us.
            wire.finish(false);
            outcome
        }
        (None, ProtocolKind::H2 | ProtocolKind::H2c) => {
            let (rec, body) = (recorder.clone(), config.show_body);
            let taps = PlaintextTaps::new(move || Box::new(H2Wire::new(rec.clone(), body)));
            let protocol = Http2::with_trace(taps).with_windows(config.windows);
            session.exchange(&protocol).await
        }
        (None, ProtocolKind::H3) => {
            let note = |text: &str| {
                let text = text.into();
                recorder.record(Direction::Local, EventKind::Note { text });
            };
            note(NOT_VISIBLE);
            if config.show_body {
                note(BODY_NOT_VISIBLE);
            }
            let body = &config.request.body;
            let shown = (config.show_body && !body.is_empty())
                .then(|| String::from_utf8_lossy(body).into_owned());
            let streams = Arc::new(H3Streams::new(recorder.clone(), shown));
            let options = H3Options {
                windows: config.windows,
                ..H3Options::default()
            };
            let protocol = Http3::new(target, options)
                .map_err(|e| LoadError::Worker(e.to_string()))?
                .with_trace(streams.clone());
            session.request = with_content_length(&config.request);
            session.h3 = Some(streams);
            session.exchange(&protocol).await
        }
    };
    let mut events = recorder.events();
    let summary = recorder.summary(kind, config.requests, &events, outcome.wire);
    failure::mark_not_sent(&mut events, config.requests, summary.failed);
    let interrupted = config.stop.load(Ordering::Relaxed);
    let failure = outcome.connect_failure.or_else(|| {
        let (n, why) = outcome.first_failure?;
        let (failed, not_sent) = (summary.failed, summary.not_sent);
        let counts = match (failed, not_sent) {
            (_, 0) => format!("{failed} of {} requests failed", config.requests),
            (0, _) => format!("{not_sent} of {} requests not sent", config.requests),
            _ => format!(
                "{failed} of {} requests failed and {not_sent} not sent",
                config.requests
            ),
        };
        Some(format!("{counts} (request {n}: {why})"))
    });
    let trace = Trace {
        protocol: kind,
        events,
        summary,
        failure,
        interrupted,
        shown_live: recorder.shown_live(),
    };
    Ok((trace, outcome.refused))
}

/// The request as the load path's h3 client sends it: with a body, a content-length (as h1
/// and h2 send one; the h3 crate's client, which the trace runs, adds none).
fn with_content_length(request: &RequestSpec) -> RequestSpec {
    let mut request = request.clone();
    let has = request
        .headers
        .iter()
        .any(|(name, _)| name == http::header::CONTENT_LENGTH);
    if !request.body.is_empty() && !has {
        request.headers.push((
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(request.body.len()),
        ));
    }
    request
}

/// What one exchange left behind besides its events.
struct Outcome {
    wire: WireBytes,
    /// Why the connection could not be opened.
    connect_failure: Option<String>,
    /// The first request that failed, and why.
    first_failure: Option<(u32, String)>,
    /// The connection was refused (the host's next address may answer).
    refused: bool,
}

/// Everything one exchange needs.
struct Session<'a> {
    config: &'a TraceConfig,
    /// The request sent `-m` times.
    request: RequestSpec,
    target: &'a Target,
    options: &'a ConnectOptions,
    recorder: &'a Recorder,
    keylog: &'a TlsVersionLog,
    kind: ProtocolKind,
    /// h3 only: the stream observer (GOAWAY, which request opened which stream, the close).
    h3: Option<Arc<H3Streams>>,
    /// h2: requests a GOAWAY turned away so far; the first ones take the streams opened above
    /// its last id (sent, unprocessed), the rest were not sent.
    goaway_refused: std::sync::atomic::AtomicU32,
}

impl Session<'_> {
    async fn exchange<P: Protocol>(&self, protocol: &P) -> Outcome {
        let offset = self.recorder.start().elapsed();
        let connected = tokio::select! {
            connected = protocol.connect(self.target, self.options) => Some(connected),
            () = stopped(&self.config.stop) => None,
        };
        let refused = matches!(connected, Some(Err(crate::ErrorKind::Refused)));
        let (conn, info) = match connected {
            Some(Ok(done)) => done,
            failed => {
                let error = match failed {
                    Some(Err(kind)) => {
                        let attempt = failure::Attempt {
                            quic: self.kind == ProtocolKind::H3,
                            insecure: self.config.tls.insecure,
                        };
                        let cause = protocol.failure_detail();
                        failure::connect_failure(kind, self.target, cause.as_deref(), attempt)
                    }
                    _ => INTERRUPTED_CONNECTING.to_string(),
                };
                // TCP may have connected before a later step failed: show that, and the bytes
                // that went both ways (the preface sent, a server's other protocol read).
                let tcp = match self.kind {
                    ProtocolKind::H3 => None,
                    _ => crate::protocol::tcp::take_last_tcp(),
                };
                let wire = tcp
                    .as_ref()
                    .map_or_else(WireBytes::default, |(_, c)| c.snapshot());
                if let Some((at, _)) = tcp {
                    let addr = self.target.addr;
                    self.recorder.record_at(
                        offset + at,
                        Direction::Local,
                        EventKind::TcpConnected { addr },
                    );
                }
                self.recorder.record(
                    Direction::Local,
                    EventKind::Error {
                        error: error.clone(),
                    },
                );
                return Outcome {
                    wire,
                    connect_failure: Some(error),
                    first_failure: None,
                    refused,
                };
            }
        };
        self.record_phases(&info, offset);
        // Every event from here on is stamped as it is recorded: they can print as they come.
        self.recorder.open_live();
        let sends = (1..=self.config.requests).map(|n| self.send_one(&conn, n));
        let failures: Vec<Option<String>> = futures_util::future::join_all(sends).await;
        let first_failure = (1..).zip(failures).find_map(|(n, f)| Some((n, f?)));
        // Late frames (GOAWAY after the last response, a PING) belong to the picture too; a
        // first GOAWAY does not end the picture (a graceful shutdown sends a second with the
        // real last stream after a PING), only the connection's end or --linger does.
        let linger = tokio::time::sleep(self.config.linger);
        tokio::pin!(linger);
        // An h1 `Connection: close`, like a GOAWAY, is followed by the server's close: watched.
        let lingers = |cause| {
            use crate::protocol::CloseCause;
            matches!(
                cause,
                CloseCause::Open | CloseCause::Goaway | CloseCause::ConnectionClose
            )
        };
        // The server's FIN ends it too: after a GOAWAY the cause stays Goaway, and nothing can
        // come after the close.
        loop {
            // An idle h1 connection reads nothing: asking whether it still takes requests
            // peeks for the server's FIN (an idle timeout), which ends the wait.
            let _ = conn.accepts_requests();
            // After `Connection: close` the h1 connection takes no request, so that peek
            // stops; the server's FIN that follows is looked for all the same.
            let finished = conn.peer_finished();
            if !lingers(conn.close_cause())
                || finished
                || self.recorder.peer_closed()
                || linger.is_elapsed()
            {
                break;
            }
            tokio::select! {
                () = &mut linger => break,
                () = stopped(&self.config.stop) => break,
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
        let fin_seen =
            conn.close_cause() == crate::protocol::CloseCause::Fin || conn.peer_finished();
        if self.kind == ProtocolKind::H1 && fin_seen && !self.recorder.peer_closed() {
            // Found by that peek, which the tap does not see.
            self.recorder.record(Direction::Recv, EventKind::PeerClosed);
        }
        let wire = conn.wire();
        if let Some(q) = conn.quic_stats() {
            let text = format!(
                "QUIC stats: {} datagrams sent, {} received, {} packets lost, rtt {:.3}ms \
                 (min {:.3}ms), cwnd {} bytes",
                q.datagrams_sent,
                q.datagrams_received,
                q.packets_lost,
                q.smoothed_rtt.as_secs_f64() * 1000.0,
                q.min_rtt.as_secs_f64() * 1000.0,
                q.cwnd
            );
            self.recorder
                .record(Direction::Local, EventKind::Note { text });
        }
        if let Some(quic) = self.h3.as_ref().and_then(|h3| h3.quic()) {
            // Before the runtime (and quinn's driver with it) goes away.
            let outcome = h3_streams::close_cleanly(&quic, CLOSE_BOUND).await;
            let (dir, event) = h3_streams::closed_event(&outcome, CLOSE_BOUND);
            self.recorder.record(dir, event);
        }
        conn.close();
        drop(conn);
        Outcome {
            wire,
            connect_failure: None,
            first_failure,
            refused: false,
        }
    }

    /// Sends request `n`; records its outcome. Returns why it failed, if it did.
    async fn send_one<C: Connection>(&self, conn: &C, n: u32) -> Option<String> {
        let sent = tokio::select! {
            sent = tokio::time::timeout(self.config.timeout, self.send(conn, n)) => sent,
            () = stopped(&self.config.stop) => Ok(Err(INTERRUPTED.to_string())),
        };
        // A request behind one the interrupt cut off fails with it (its connection retired):
        // the interrupt is why, not the server.
        let sent = match sent {
            Ok(Ok(info)) => Ok(Ok(info)),
            _ if self.config.stop.load(Ordering::Relaxed) => Ok(Err(INTERRUPTED.to_string())),
            failed => failed,
        };
        let outcome = match sent {
            Ok(Ok(info)) => EventKind::Response {
                request: n,
                status: info.status,
                header_bytes: info.header_bytes,
                body_bytes: info.body_bytes,
            },
            Ok(Err(error)) => EventKind::RequestFailed { request: n, error },
            Err(_) => EventKind::RequestFailed {
                request: n,
                error: format!(
                    "request_timeout: no complete response within {:?} (--timeout)",
                    self.config.timeout
                ),
            },
        };
        let failed = match &outcome {
            EventKind::RequestFailed { error, .. } => Some(error.clone()),
            _ => None,
        };
        self.recorder.record(Direction::Local, outcome);
        failed
    }

    /// Sends request `n` and reads its response; a failure is one line with its cause.
    async fn send<C: Connection>(
        &self,
        conn: &C,
        n: u32,
    ) -> Result<crate::protocol::ResponseInfo, String> {
        let Some(h3) = &self.h3 else {
            let result = conn.send(&self.request, Instant::now()).await;
            return result.map_err(|e| {
                let events = self.recorder.events();
                if matches!(e, SendError::Retry(RetryReason::Goaway(_))) {
                    if let Some((last, above)) = failure::h2_opened_above_goaway(&events) {
                        let refused = &self.goaway_refused;
                        if refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= above {
                            return failure::not_sent_after_goaway(&format!(
                                "last stream id {last}"
                            ));
                        }
                    }
                }
                // A breach we answered is why the connection ended; else the server's words.
                let cause = match e {
                    SendError::Failed(crate::ErrorKind::Protocol) => conn.protocol_breach(),
                    SendError::Failed(crate::ErrorKind::Tls) => {
                        crate::protocol::tcp::take_tls_error()
                    }
                    _ => None,
                };
                let cause = cause.or_else(|| failure::h2_cause(&events));
                failure::send_failure(e, cause.as_deref())
            });
        };
        // As h2 does: a request whose stream has not opened when the server's GOAWAY arrives
        // is never sent (h3 would open it once the server grants a stream, past the GOAWAY).
        let send = h3_streams::as_request(n, conn.send(&self.request, Instant::now()));
        tokio::pin!(send);
        let result = tokio::select! {
            biased;
            id = h3.goaway() => {
                if h3.stream_of(n).is_none() {
                    return Err(failure::not_sent_after_goaway(&format!(
                        "first unprocessed stream id {id}"
                    )));
                }
                send.await
            }
            result = &mut send => result,
        };
        result.map_err(|e| {
            if matches!(e, SendError::Retry(RetryReason::Goaway(_))) {
                // h3's GOAWAY names the first stream it will not process, not the last it will.
                return "not processed by the server: its stream is at or past the GOAWAY's stream \
                        id (load retries such requests on a new connection)"
                    .to_string();
            }
            failure::send_failure(e, failure::quic_cause(h3.quic().as_ref()).as_deref())
        })
    }

    /// TCP connected and TLS/QUIC handshake done, at the times connect measured.
    /// `offset`: when connect began, on the trace's clock.
    fn record_phases(&self, info: &ConnectInfo, offset: Duration) {
        let alpn = info
            .alpn
            .as_ref()
            .map(|a| String::from_utf8_lossy(a).into_owned());
        let addr = self.target.addr;
        if self.kind == ProtocolKind::H3 {
            self.recorder.record_at(
                offset + info.handshake.get(),
                Direction::Local,
                EventKind::QuicHandshake { addr, alpn },
            );
            return;
        }
        self.recorder.record_at(
            offset + info.tcp_connect.get(),
            Direction::Local,
            EventKind::TcpConnected { addr },
        );
        if self.options.tls.is_some() {
            self.recorder.record_at(
                offset + info.tcp_connect.get() + info.handshake.get(),
                Direction::Local,
                EventKind::TlsHandshake {
                    version: self.keylog.version(),
                    alpn,
                },
            );
        }
    }
}
