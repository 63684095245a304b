//! Runs one traced exchange: N requests at once on one connection opened by the load
//! generator's own protocol code, with the trace taps switched on, then the summary.

use super::event::{Direction, EventKind};
use super::h1_stream::H1Wire;
use super::h2_frames::H2Wire;
use super::h3_streams::{self, H3Streams, NOT_VISIBLE};
use super::recorder::Recorder;
use super::summary::summarize;
use super::tls_version::TlsVersionLog;
use super::Trace;
use crate::config::{ProtocolChoice, TlsOptions};
use crate::engine::setup::{resolve_target, LoadError};
use crate::error::ErrorKind;
use crate::protocol::h1::Http1;
use crate::protocol::h2::Http2;
use crate::protocol::h3::{H3Options, Http3};
use crate::protocol::probe::probe_alpn;
use crate::protocol::tls::{client_config, ALPN_H2, ALPN_H3, ALPN_HTTP11};
use crate::protocol::wire::PlaintextTaps;
use crate::protocol::{
    ConnectInfo, ConnectOptions, Connection, Protocol, ProtocolKind, RequestSpec, RetryReason,
    SendError, Target, WireBytes,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
}

/// Runs the trace. Setup problems (DNS, TLS files) are errors; connection and request
/// failures are events in the returned trace, with [`Trace::failure`] set.
pub fn run(config: &TraceConfig) -> Result<Trace, LoadError> {
    let target = resolve_target(&config.url)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::Worker(e.to_string()))?;
    runtime.block_on(trace(config, &target))
}

async fn trace(config: &TraceConfig, target: &Target) -> Result<Trace, LoadError> {
    let https = target.scheme.eq_ignore_ascii_case("https");
    let keylog = Arc::new(TlsVersionLog::default());
    let tls_for = |alpn: &[&[u8]]| -> Result<_, LoadError> {
        let base = client_config(config.tls.insecure, config.tls.cacert.as_deref(), alpn)
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
    let kind = match config.protocol {
        ProtocolChoice::Fixed(kind) => kind,
        ProtocolChoice::Auto if https => {
            options.tls = Some(tls_for(&[ALPN_H2, ALPN_HTTP11])?);
            // The probe's own handshake is not part of the trace: it only picks the protocol.
            probe_alpn(target, &options).await.map_err(|kind| {
                LoadError::first_connection(target.addr, kind, config.connect_timeout)
            })?
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
    let recorder = Recorder::start_now();
    let session = Session {
        config,
        target,
        options: &options,
        recorder: &recorder,
        keylog: &keylog,
        kind,
    };
    let outcome = match kind {
        ProtocolKind::H1 => {
            let wire = H1Wire::new(recorder.clone(), config.show_body);
            let tap = wire.clone();
            let protocol = Http1::with_trace(PlaintextTaps::new(move || Box::new(tap.clone())));
            let outcome = session.exchange(&protocol).await;
            wire.finish();
            outcome
        }
        ProtocolKind::H2 | ProtocolKind::H2c => {
            let (rec, body) = (recorder.clone(), config.show_body);
            let taps = PlaintextTaps::new(move || Box::new(H2Wire::new(rec.clone(), body)));
            session.exchange(&Http2::with_trace(taps)).await
        }
        ProtocolKind::H3 => {
            recorder.record(
                Direction::Local,
                EventKind::Note {
                    text: NOT_VISIBLE.into(),
                },
            );
            let streams = Arc::new(H3Streams::new(recorder.clone()));
            let protocol = Http3::new(target, H3Options::default())
                .map_err(|e| LoadError::Worker(e.to_string()))?
                .with_trace(streams.clone());
            let outcome = session.exchange(&protocol).await;
            if let Some(quic) = streams.quic() {
                // Our close (or the server's) arrives as quinn's close reason.
                if let Ok(reason) = tokio::time::timeout(config.linger, quic.closed()).await {
                    let (dir, event) = h3_streams::close_event(&reason);
                    recorder.record(dir, event);
                }
            }
            outcome
        }
    };
    let events = recorder.events();
    let summary = summarize(kind, config.requests, &events, outcome.wire);
    Ok(Trace {
        protocol: kind,
        events,
        summary,
        failure: outcome.failure,
    })
}

/// What one exchange left behind besides its events.
struct Outcome {
    wire: WireBytes,
    failure: Option<String>,
}

/// Everything one exchange needs.
struct Session<'a> {
    config: &'a TraceConfig,
    target: &'a Target,
    options: &'a ConnectOptions,
    recorder: &'a Recorder,
    keylog: &'a TlsVersionLog,
    kind: ProtocolKind,
}

impl Session<'_> {
    async fn exchange<P: Protocol>(&self, protocol: &P) -> Outcome {
        let offset = self.recorder.start().elapsed();
        let connected = protocol.connect(self.target, self.options).await;
        let (conn, info) = match connected {
            Ok(done) => done,
            Err(kind) => {
                let error = connect_failure(kind, self.target);
                self.recorder.record(
                    Direction::Local,
                    EventKind::Error {
                        error: error.clone(),
                    },
                );
                return Outcome {
                    wire: WireBytes::default(),
                    failure: Some(error),
                };
            }
        };
        self.record_phases(&info, offset);
        let sends = (1..=self.config.requests).map(|n| self.send_one(&conn, n));
        let failures: Vec<Option<String>> = futures_util::future::join_all(sends).await;
        let failed = failures.iter().flatten().count();
        let first = failures
            .iter()
            .enumerate()
            .find_map(|(i, f)| Some((i + 1, f.as_ref()?)));
        // Late frames (GOAWAY after the last response, a PING) belong to the picture too.
        let linger = tokio::time::sleep(self.config.linger);
        tokio::pin!(linger);
        while conn.close_cause() == crate::protocol::CloseCause::Open && !linger.is_elapsed() {
            tokio::select! {
                () = &mut linger => break,
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
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
        conn.close();
        drop(conn);
        Outcome {
            wire,
            failure: first.map(|(n, why)| {
                format!(
                    "{failed} of {} requests failed (request {n}: {why})",
                    self.config.requests
                )
            }),
        }
    }

    /// Sends request `n`; records its outcome. Returns why it failed, if it did.
    async fn send_one<C: Connection>(&self, conn: &C, n: u32) -> Option<String> {
        let sent = tokio::time::timeout(
            self.config.timeout,
            conn.send(&self.config.request, Instant::now()),
        )
        .await;
        let outcome = match sent {
            Ok(Ok(info)) => EventKind::Response {
                request: n,
                status: info.status,
                header_bytes: info.header_bytes,
                body_bytes: info.body_bytes,
            },
            Ok(Err(e)) => EventKind::RequestFailed {
                request: n,
                error: send_failure(e),
            },
            Err(_) => EventKind::RequestFailed {
                request: n,
                error: format!(
                    "request_timeout: no complete response within {:?}",
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
                offset + info.handshake,
                Direction::Local,
                EventKind::QuicHandshake { addr, alpn },
            );
            return;
        }
        self.recorder.record_at(
            offset + info.tcp_connect,
            Direction::Local,
            EventKind::TcpConnected { addr },
        );
        if self.options.tls.is_some() {
            self.recorder.record_at(
                offset + info.tcp_connect + info.handshake,
                Direction::Local,
                EventKind::TlsHandshake {
                    version: self.keylog.version(),
                    alpn,
                },
            );
        }
    }
}

fn connect_failure(kind: ErrorKind, target: &Target) -> String {
    match kind {
        ErrorKind::Refused => format!("refused: nothing listens at {}", target.addr),
        ErrorKind::Tls => format!(
            "tls: handshake with {} failed (certificate or ALPN); try --cacert FILE or -k",
            target.addr
        ),
        ErrorKind::ConnectTimeout => format!("connect_timeout: no connection to {}", target.addr),
        kind => format!("connect failed: {kind}"),
    }
}

fn send_failure(e: SendError) -> String {
    match e {
        SendError::Failed(kind) => kind.to_string(),
        SendError::Retry(reason) => {
            let why = match reason {
                RetryReason::Goaway => "above the GOAWAY's last stream id",
                RetryReason::Refused => "refused (REFUSED_STREAM / H3_REQUEST_REJECTED)",
                RetryReason::ConnectionClosed => "the connection closed before its response",
            };
            format!("not processed by the server: {why} (load retries such requests on a new connection)")
        }
    }
}
