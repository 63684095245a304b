//! The built-in protocols: resolves `-p auto`, builds the TLS configuration and picks the factory.

use super::factory::ProtocolFactory;
use super::setup::{on_each_address, LoadError};
use super::{run_with_protocol, stop_requested};
use crate::config::{LoadConfig, ProtocolChoice};
use crate::protocol::h1::Http1;
use crate::protocol::h2::Http2;
use crate::protocol::h3::{discover_h3_port, H3Options, Http3};
use crate::protocol::probe::probe_alpn;
use crate::protocol::tls::{client_config_for, ALPN_H2, ALPN_H3, ALPN_HTTP11};
use crate::protocol::window::ReceiveWindows;
use crate::protocol::{ConnectOptions, ProtocolKind, Target};
use crate::report::Report;
use crate::stats::Observer;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Runs `config` with the protocol it names (or that `auto` resolves to). When the host has
/// several addresses and the first refuses the first connection, the next is tried, as curl
/// does: `localhost` reaches a server that listens on `[::1]` only.
pub fn run_builtin(
    config: &LoadConfig,
    observer: &mut dyn Observer,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    config.validate()?;
    on_each_address(
        &config.url,
        config.connect_to.as_ref(),
        |target| run_on(config, target, observer, stop.clone()),
        |outcome| {
            matches!(
                outcome,
                Err(LoadError::Refused { .. } | LoadError::RefusedUdp { .. })
            )
        },
    )
}

/// Runs `config` against one resolved address.
fn run_on(
    config: &LoadConfig,
    target: Target,
    observer: &mut dyn Observer,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    let https = target.scheme.eq_ignore_ascii_case("https");
    // Connections opened here to choose the protocol, reported next to the engine's own probe.
    let mut probes = 0;
    let mut alt_svc = None;
    let kind = match config.protocol {
        ProtocolChoice::Fixed(kind) => kind,
        ProtocolChoice::Auto if https && config.alt_svc => {
            probes += 1;
            match alt_svc_probe(config, &target, &stop)? {
                // The origin (URL, :authority) stays; only the UDP port comes from Alt-Svc.
                Some(port) => {
                    let mut h3_target = target.clone();
                    h3_target.addr.set_port(port);
                    let h3 = run_kind(config, &h3_target, ProtocolKind::H3, observer, &stop);
                    match h3 {
                        Err(e) if e.is_first_connection() => {
                            // As a browser does: the advertised h3 does not answer, so TCP.
                            probes += 1;
                            alt_svc = Some(format!(
                                "h3 on UDP port {port} did not connect ({e}), so TCP"
                            ));
                            alpn_probe(config, &target, &stop)?
                        }
                        other => {
                            let found = format!("h3 on UDP port {port}");
                            return other.map(|r| with_choice(r, probes, Some(found)));
                        }
                    }
                }
                None => {
                    probes += 1;
                    alt_svc = Some("no same-host h3 alternative, so TCP".to_string());
                    alpn_probe(config, &target, &stop)?
                }
            }
        }
        ProtocolChoice::Auto if https => {
            probes += 1;
            alpn_probe(config, &target, &stop)?
        }
        ProtocolChoice::Auto => ProtocolKind::H1,
    };
    run_kind(config, &target, kind, observer, &stop).map(|r| with_choice(r, probes, alt_svc))
}

/// The report with how its protocol was chosen: the probes that chose it and what Alt-Svc said.
fn with_choice(mut report: Report, probes: u64, alt_svc: Option<String>) -> Report {
    report.connections.probes += probes;
    report.protocol.alt_svc = alt_svc;
    report
}

/// Runs `config` over `kind` against `target`.
fn run_kind(
    config: &LoadConfig,
    target: &Target,
    kind: ProtocolKind,
    observer: &mut dyn Observer,
    stop: &Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    let https = target.scheme.eq_ignore_ascii_case("https");
    let tls = if https {
        Some(tls_config(config, alpn_for(kind))?)
    } else {
        None
    };
    let stop = stop.clone();
    match kind {
        ProtocolKind::H1 => run_with_protocol(config, target, Http1Factory, tls, observer, stop),
        ProtocolKind::H3 => {
            let factory = Http3Factory {
                options: H3Options {
                    zero_rtt: config.zero_rtt,
                    windows: config.windows,
                    idle_timeout: h3_idle_timeout(config.timeout),
                    ..H3Options::default()
                },
            };
            run_with_protocol(config, target, factory, tls, observer, stop)
        }
        ProtocolKind::H2 | ProtocolKind::H2c => {
            let factory = Http2Factory {
                kind,
                windows: config.windows,
            };
            run_with_protocol(config, target, factory, tls, observer, stop)
        }
    }
}

/// The QUIC idle timeout for a run whose requests may wait `request_timeout`: a server silent
/// for seven tenths of it (keep-alives go out at a third of that, so a live one answers) is
/// gone, and its connection ends then rather than after 30 s. UDP has no RST: a restarted
/// server cannot tell us (its stateless-reset key is new), so until then every request sent on
/// the dead connection would time out in turn. Shorter than the request timeout, keep-alive
/// included (an unanswered keep-alive restarts the idle timer: 7/10 + 7/30 < 1), for any
/// `--timeout` of 1.43 s or more (below, the 1 s floor reaches it): at the same
/// instant, the requests timed out first and their slots sent new ones on the connection about
/// to end, each lost request read twice (a timeout, then an idle timeout 0.3 ms later). 1 s at
/// least, 30 s at most (quinn's floor is 3 PTOs).
fn h3_idle_timeout(request_timeout: Option<Duration>) -> Duration {
    request_timeout.map_or(H3_IDLE_MAX, |t| {
        (t * 7 / 10).clamp(Duration::from_secs(1), H3_IDLE_MAX)
    })
}

/// The idle timeout when requests may wait longer, or forever.
const H3_IDLE_MAX: Duration = Duration::from_secs(30);

fn alpn_for(kind: ProtocolKind) -> &'static [&'static [u8]] {
    match kind {
        ProtocolKind::H1 => &[ALPN_HTTP11],
        ProtocolKind::H2 | ProtocolKind::H2c => &[ALPN_H2],
        ProtocolKind::H3 => &[ALPN_H3],
    }
}

fn tls_config(config: &LoadConfig, alpn: &[&[u8]]) -> Result<Arc<rustls::ClientConfig>, LoadError> {
    client_config_for(&config.tls, alpn).map_err(|e| LoadError::TlsConfig(e.to_string()))
}

/// `-p auto` over TLS: one handshake offering h2 and http/1.1; the server's choice decides.
fn alpn_probe(
    config: &LoadConfig,
    target: &Target,
    stop: &AtomicBool,
) -> Result<ProtocolKind, LoadError> {
    let options = ConnectOptions {
        connect_timeout: config.connect_timeout,
        tls: Some(tls_config(config, &[ALPN_H2, ALPN_HTTP11])?),
        streams: 1,
        keepalive: true,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::Worker(e.to_string()))?;
    let timeout = config.connect_timeout;
    runtime
        .block_on(async {
            tokio::select! {
                chosen = tokio::time::timeout(timeout, probe_alpn(target, &options)) => {
                    Ok(chosen.unwrap_or(Err(crate::error::ErrorKind::ConnectTimeout)))
                }
                () = stop_requested(stop) => Err(LoadError::Interrupted),
            }
        })?
        .map_err(|kind| {
            LoadError::first_connection(target.addr, kind, timeout)
                .with_detail(crate::protocol::tcp::take_connect_note())
        })
}

/// `-p auto --alt-svc`: one HTTPS request over TCP; an `h3` Alt-Svc on the same host wins.
fn alt_svc_probe(
    config: &LoadConfig,
    target: &Target,
    stop: &AtomicBool,
) -> Result<Option<u16>, LoadError> {
    let tls = tls_config(config, &[ALPN_HTTP11])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::Worker(e.to_string()))?;
    let timeout = config.connect_timeout;
    runtime
        .block_on(async {
            tokio::select! {
                found = discover_h3_port(target, &config.url, &tls, timeout) => Ok(found),
                () = stop_requested(stop) => Err(LoadError::Interrupted),
            }
        })?
        .map_err(|kind| {
            LoadError::first_connection(target.addr, kind, timeout)
                .with_detail(crate::protocol::tcp::take_connect_note())
        })
}

/// HTTP/1.1 (over TCP, or TLS for https).
struct Http1Factory;

impl ProtocolFactory for Http1Factory {
    type Protocol = Http1;
    fn kind(&self) -> ProtocolKind {
        ProtocolKind::H1
    }
    fn make(&self, _target: &Target) -> Result<Http1, LoadError> {
        Ok(Http1::default())
    }
}

/// HTTP/3: one QUIC endpoint per worker thread.
struct Http3Factory {
    options: H3Options,
}

impl ProtocolFactory for Http3Factory {
    type Protocol = Http3;
    fn kind(&self) -> ProtocolKind {
        ProtocolKind::H3
    }
    fn make(&self, target: &Target) -> Result<Http3, LoadError> {
        Http3::new(target, self.options).map_err(|e| LoadError::Worker(e.to_string()))
    }
}

/// HTTP/2: h2c (prior knowledge) for http, h2 (ALPN) for https.
struct Http2Factory {
    kind: ProtocolKind,
    /// `--window`, `--connection-window`.
    windows: ReceiveWindows,
}

impl ProtocolFactory for Http2Factory {
    type Protocol = Http2;
    fn kind(&self) -> ProtocolKind {
        self.kind
    }
    fn make(&self, _target: &Target) -> Result<Http2, LoadError> {
        Ok(Http2::default().with_windows(self.windows))
    }
}
