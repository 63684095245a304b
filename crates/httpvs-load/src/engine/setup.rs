//! Before the first request: resolve the target, build the request, and name setup failures.
//!
//! A [`LoadError`] means the run could not start (bad config, DNS, nothing listening, TLS
//! refused on the very first connection). Failures once the run is going are counted instead.

use crate::config::{ConfigError, LoadConfig};
use crate::connect_to::ConnectTo;
use crate::error::ErrorKind;
use crate::protocol::{RequestSpec, Target};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The stop flag was set (Ctrl-C) while the first connection was still being made.
    #[error("interrupted before the run started (while connecting to check the target)")]
    Interrupted,
    /// The host did not resolve.
    #[error("cannot resolve {host}: {why}")]
    Dns {
        /// The host name.
        host: String,
        /// The resolver's words.
        why: String,
    },
    /// Nothing listens at the target.
    #[error("connection refused: {addr} — is the server running?")]
    Refused {
        /// The address tried.
        addr: SocketAddr,
    },
    /// The server allows no concurrent streams (its first SETTINGS_MAX_CONCURRENT_STREAMS is
    /// 0; RFC 9113 lets a server raise it later, which no server seen here does): no request
    /// could be sent.
    #[error(
        "{addr} allows no concurrent streams (its stream limit is 0): no request can be sent on its connections"
    )]
    NoStreams {
        /// The address tried.
        addr: SocketAddr,
    },
    /// Nothing listens on the target's UDP port (HTTP/3).
    #[error(
        "connection refused on UDP: {addr} — is the server running with HTTP/3 on that port? \
         (a TCP-only server refuses QUIC)"
    )]
    RefusedUdp {
        /// The address tried.
        addr: SocketAddr,
    },
    /// The first connection did not complete in time.
    #[error("{}", connect_timeout_line(*addr, *timeout, detail, Some("--connect-timeout")))]
    ConnectTimeout {
        /// The address tried.
        addr: SocketAddr,
        /// The connect timeout.
        timeout: Duration,
        /// The step the connection was waiting for when the timeout came (TCP connected, but
        /// TLS or HTTP/2's SETTINGS did not follow), or empty when TCP itself did not connect.
        detail: String,
    },
    /// The first connection's TLS handshake failed.
    #[error("TLS handshake with {addr} failed{detail}{}{}", tls_hint(*insecure, detail), sni_hint(*no_sni, detail))]
    Tls {
        /// The address tried.
        addr: SocketAddr,
        /// `: ` and what the stack saw (the peer's alert or close reason), or empty.
        detail: String,
        /// `-k` was given: any certificate is accepted, so the cause lies elsewhere.
        insecure: bool,
        /// The URL names an IP address, so the handshake carried no server name (SNI).
        no_sni: bool,
    },
    /// The first connection failed for another classified reason.
    #[error("first connection to {addr} failed: {kind}{}", detail.as_ref().map_or_else(|| first_connection_hint(*kind).to_owned(), |d| format!(": {d}")))]
    FirstConnection {
        /// The address tried.
        addr: SocketAddr,
        /// Why.
        kind: ErrorKind,
        /// What the stack saw, when it knows better than the usual cause of `kind`.
        detail: Option<String>,
    },
    /// The TLS client configuration could not be built (e.g. an unreadable `--cacert`).
    #[error("{0}")]
    TlsConfig(String),
    /// The protocol is not available in this build.
    #[error("protocol {0} is not available yet")]
    Unsupported(&'static str),
    /// A worker thread or runtime could not start.
    #[error("cannot start worker: {0}")]
    Worker(String),
}

/// The line for a first connection the connect timeout cut: "no connection" only when TCP
/// itself did not connect; `flag` names the timeout's flag, for a command that has one.
pub fn connect_timeout_line(
    addr: SocketAddr,
    timeout: Duration,
    detail: &str,
    flag: Option<&str>,
) -> String {
    let flag = flag.map_or_else(String::new, |f| format!(" ({f})"));
    if detail.starts_with(crate::protocol::h3::IDLE_ENDED_HANDSHAKE) {
        // Not the connect timeout: naming it and its value sent users to raise it, in vain.
        return format!("connection to {addr} not ready: {detail}");
    }
    if detail.is_empty() {
        format!("no connection to {addr} within {timeout:?}{flag}")
    } else {
        format!("connection to {addr} not ready within {timeout:?}{flag}: {detail}")
    }
}

/// rustls's name for the alert a server sends when it takes none of the ALPN protocols offered.
const NO_ALPN_ALERT: &str = "NoApplicationProtocol";

/// What to try after a failed handshake: with `-k` the certificate is not the cause (`trace`
/// says it too). A certificate for another name is not fixed by `--cacert`, which the line
/// suggested even to a run that gave it.
/// The alerts a server sends about the client's certificate (RFC 8446 §6.2), received: about
/// `--cert`, never about the server's own certificate, which this client judges itself.
const CLIENT_CERT_ALERTS: [&str; 6] = [
    "BadCertificate",
    "UnsupportedCertificate",
    "CertificateRevoked",
    "CertificateExpired",
    "CertificateUnknown",
    "UnknownCA",
];

pub(crate) fn tls_hint(insecure: bool, detail: &str) -> &'static str {
    if detail.contains(", not h2,") {
        // The handshake worked; the server chose another protocol, and the detail says so.
        ""
    } else if detail.contains(NO_ALPN_ALERT) {
        // Not the certificate (it blamed the certificate, or SNI): the server's answer to the
        // protocols offered.
        "; the server takes none of the protocols offered by ALPN (-p h1 offers http/1.1, \
         -p h2 h2, an https URL by default both): it serves another one"
    } else if detail.contains("ProtocolVersion") {
        "; the server takes none of the TLS versions this client offers (1.2 and 1.3): it \
         speaks only an older one"
    } else if detail.contains("alert: CertificateRequired") {
        "; the server wants a client certificate: give it one with --cert and --key"
    } else if CLIENT_CERT_ALERTS
        .iter()
        .any(|alert| detail.contains(&format!("alert: {alert}")))
    {
        // Alerts the server sends about the certificate it got: ours. --cacert and -k, about
        // the server's, cannot help (the line said they could).
        "; the server refused the client certificate (--cert): it does not trust its CA, it \
         is outside its dates, or it is not one for a client"
    } else if detail.contains("alert: HandshakeFailure") {
        "; the server refused the handshake: most often it shares no cipher suite or key \
         exchange group with this client (rustls offers TLS 1.2 and 1.3 AEAD suites only; a \
         server set up for CBC or RSA key exchange refuses them), else it wants a client \
         certificate or a server name"
    } else if detail.contains("InvalidContentType") {
        "; the answer was not TLS: that port speaks cleartext (http://, not https://?)"
    } else if detail.contains("certificate expired") || detail.contains("not valid yet") {
        "; the certificate is outside its validity dates (or this machine's clock is wrong): \
         --cacert does not change that, -k does"
    } else if !insecure && detail.contains("not valid for name") {
        "; the certificate is for another name: put a name it holds in the URL (and the \
         address in --connect-to), or -k"
    } else if insecure {
        " (ALPN, an alert, or no TLS on that port; -k already accepts any certificate)"
    } else {
        " (its certificate, ALPN, an alert, or no TLS on that port); for a certificate this \
         client does not trust: --cacert FILE holding the certificate the server presents or \
         the CA that signed it, or -k"
    }
}

/// Whether a URL's host is an IP address (`[::1]` too): a handshake to it carries no server
/// name (SNI).
pub(crate) fn names_ip(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok()
}

/// A server that picks its certificate by name (caddy, most virtual hosts) fails a handshake
/// that names none, with an alert that says little (`internal_error`, `unrecognized_name`).
/// Said only when the peer refused (an alert, TCP or QUIC), not for a certificate we refused.
pub(crate) fn sni_hint(no_sni: bool, detail: &str) -> &'static str {
    // The peer refused, not we: QUIC reports our own refusal of its certificate as a failed
    // cryptographic handshake too, with rustls's words after it.
    // Alerts that name another cause (a TLS version, a client certificate) are not about it.
    let other_cause = [
        "ProtocolVersion",
        "CertificateRequired",
        "InsufficientSecurity",
    ]
    .iter()
    .chain(&CLIENT_CERT_ALERTS)
    .any(|alert| detail.contains(alert));
    let refused = (detail.contains("alert") || detail.contains("cryptographic handshake failed"))
        && !detail.contains("invalid peer certificate")
        && !detail.contains(NO_ALPN_ALERT)
        && !other_cause;
    if no_sni && refused {
        "; the URL names an IP address, so the handshake carried no server name (SNI): a server \
         that picks its certificate by name refuses it; put the name in the URL and the address \
         in --connect-to"
    } else {
        ""
    }
}

/// What usually causes a first connection to fail this way (`trace` says it too).
pub(crate) fn first_connection_hint(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ConnectionClosed | ErrorKind::Reset => {
            " (the server hung up before the first request: https:// to a cleartext port, or \
             http:// to a TLS one?)"
        }
        ErrorKind::Protocol => {
            " (the server's first bytes were not the protocol asked for: -p h2c to a server \
             without cleartext HTTP/2?)"
        }
        ErrorKind::QuicTransport(crate::error::QUIC_CONNECTION_REFUSED) => {
            " (the server turned the connection away: at its connection limit?)"
        }
        _ => "",
    }
}

impl LoadError {
    /// Whether the first connection failed (refused, timed out, TLS or another connect
    /// failure): the target does not speak the protocol there, as opposed to a bad setup.
    pub fn is_first_connection(&self) -> bool {
        matches!(
            self,
            LoadError::Refused { .. }
                | LoadError::RefusedUdp { .. }
                | LoadError::ConnectTimeout { .. }
                | LoadError::Tls { .. }
                | LoadError::FirstConnection { .. }
                | LoadError::NoStreams { .. }
        )
    }

    /// Adds what the stack saw to a failed first connection's error (`detail`, if any).
    pub fn with_detail(self, detail: Option<String>) -> LoadError {
        match (self, detail) {
            (
                LoadError::Tls {
                    addr,
                    insecure,
                    no_sni,
                    ..
                },
                Some(d),
            ) => LoadError::Tls {
                addr,
                detail: format!(": {d}"),
                insecure,
                no_sni,
            },
            (LoadError::ConnectTimeout { addr, timeout, .. }, Some(detail)) => {
                LoadError::ConnectTimeout {
                    addr,
                    timeout,
                    detail,
                }
            }
            // Only a detail that rules the usual cause out says more than the hint: the server
            // spoke the protocol but broke it, or hung up after a TLS handshake that succeeded
            // (other kinds' notes name the step they waited at).
            (LoadError::FirstConnection { addr, kind, .. }, Some(d))
                if crate::protocol::tcp::rules_out_the_usual_cause(kind, &d) =>
            {
                LoadError::FirstConnection {
                    addr,
                    kind,
                    detail: Some(d),
                }
            }
            (other, _) => other,
        }
    }

    /// Marks a failed handshake as made under `-k` (`insecure`), so its hint does not
    /// suggest `-k`.
    pub fn given_insecure(self, insecure: bool) -> LoadError {
        match self {
            LoadError::Tls {
                addr,
                detail,
                no_sni,
                ..
            } => LoadError::Tls {
                addr,
                detail,
                insecure,
                no_sni,
            },
            other => other,
        }
    }

    /// Marks a failed handshake whose URL names an IP address (no SNI went out), so its line
    /// says what that costs.
    pub fn given_url(self, url: &http::Uri) -> LoadError {
        match self {
            LoadError::Tls {
                addr,
                detail,
                insecure,
                ..
            } => LoadError::Tls {
                addr,
                detail,
                insecure,
                no_sni: url.host().is_some_and(names_ip),
            },
            other => other,
        }
    }

    /// The setup error for a failed first connection.
    pub fn first_connection(addr: SocketAddr, kind: ErrorKind, timeout: Duration) -> LoadError {
        match kind {
            ErrorKind::Refused => LoadError::Refused { addr },
            ErrorKind::ConnectTimeout => LoadError::ConnectTimeout {
                addr,
                timeout,
                detail: String::new(),
            },
            ErrorKind::Tls => LoadError::Tls {
                addr,
                detail: String::new(),
                insecure: false,
                no_sni: false,
            },
            kind => LoadError::FirstConnection {
                addr,
                kind,
                detail: None,
            },
        }
    }

    /// Whether Ctrl-C ended the set-up (the CLI exits 130, as for an interrupted run).
    pub fn is_interrupted(&self) -> bool {
        matches!(self, LoadError::Interrupted)
    }

    /// Whether the user's input is at fault (the CLI exits 2 for these).
    pub fn is_usage(&self) -> bool {
        matches!(self, LoadError::Config(_) | LoadError::TlsConfig(_))
    }
}

/// Resolves the URL's host once, timing the lookup; IPv4 is preferred, as servers in tests
/// usually bind 127.0.0.1 while "localhost" also resolves to ::1.
pub fn resolve_target(
    url: &http::Uri,
    connect_to: Option<&ConnectTo>,
) -> Result<Target, LoadError> {
    resolve_targets(url, connect_to).map(|mut all| all.swap_remove(0))
}

/// Runs `attempt` on each of the URL's addresses in turn ([`resolve_targets`]) while it is
/// `refused`, as curl does: `localhost` reaches a server that listens on `[::1]` only. When every
/// address refuses, the first refusal is the outcome: it names the address users expect.
pub fn on_each_address<T>(
    url: &http::Uri,
    connect_to: Option<&ConnectTo>,
    mut attempt: impl FnMut(Target) -> Result<T, LoadError>,
    refused: impl Fn(&Result<T, LoadError>) -> bool,
) -> Result<T, LoadError> {
    let mut first_refusal = None;
    for target in resolve_targets(url, connect_to)? {
        let outcome = attempt(target);
        if !refused(&outcome) {
            return outcome;
        }
        first_refusal.get_or_insert(outcome);
    }
    first_refusal.unwrap_or_else(|| {
        Err(LoadError::Dns {
            host: url.host().unwrap_or_default().to_string(),
            why: "no address".into(),
        })
    })
}

/// Every address the URL's host resolves to, as targets in the order to try them: IPv4 first,
/// then the rest (a server on `[::1]` only is reached through `localhost` too). Never empty.
/// With `connect_to` the addresses are its host's and port's; the targets keep the URL's host
/// (for SNI, Host and `:authority`) and port.
pub fn resolve_targets(
    url: &http::Uri,
    connect_to: Option<&ConnectTo>,
) -> Result<Vec<Target>, LoadError> {
    let scheme = url.scheme_str().unwrap_or("http").to_string();
    let host = url.host().unwrap_or_default().to_string();
    let port = crate::config::port_or_default(url);
    let (dial_host, dial_port) = match connect_to {
        Some(rule) => rule
            .route(&host, port)
            .map_err(|why| LoadError::Config(ConfigError::Invalid(why)))?,
        None => (
            host.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(&host)
                .to_string(),
            port,
        ),
    };
    let started = Instant::now();
    let addrs: Vec<SocketAddr> = (dial_host.as_str(), dial_port)
        .to_socket_addrs()
        .map_err(|e| LoadError::Dns {
            host: dial_host.clone(),
            why: e.to_string(),
        })?
        .collect();
    let dns = started.elapsed();
    let mut ordered: Vec<SocketAddr> = addrs.iter().filter(|a| a.is_ipv4()).copied().collect();
    ordered.extend(addrs.iter().filter(|a| !a.is_ipv4()));
    ordered.dedup();
    if ordered.is_empty() {
        return Err(LoadError::Dns {
            host: dial_host,
            why: "no address".into(),
        });
    }
    Ok(ordered
        .into_iter()
        .map(|addr| Target {
            scheme: scheme.clone(),
            host: host.clone(),
            port,
            addr,
            dns,
        })
        .collect())
}

/// The requests every worker sends in turn: `url`'s, then one per further URL.
pub fn request_specs(config: &LoadConfig) -> Vec<RequestSpec> {
    std::iter::once(&config.url)
        .chain(&config.more_urls)
        .map(|url| request_spec(config, url))
        .collect()
}

/// The request for `url`, with the run's method, headers and body.
fn request_spec(config: &LoadConfig, url: &http::Uri) -> RequestSpec {
    let mut uri = url.clone();
    if uri.path_and_query().is_none() {
        // "http://host:port" means the root path.
        let mut parts = uri.into_parts();
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        uri = http::Uri::from_parts(parts).unwrap_or_else(|_| url.clone());
    }
    RequestSpec {
        method: config.method.clone(),
        uri,
        headers: config.headers.clone(),
        body: config.body.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// load names its flag; compare, which has none, does not.
    #[test]
    fn a_connect_timeout_line_names_the_flag_only_when_given() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let t = Duration::from_secs(10);
        assert_eq!(
            connect_timeout_line(addr, t, "", Some("--connect-timeout")),
            "no connection to 127.0.0.1:1 within 10s (--connect-timeout)"
        );
        assert_eq!(
            connect_timeout_line(addr, t, "TLS", None),
            "connection to 127.0.0.1:1 not ready within 10s: TLS"
        );
    }

    #[test]
    fn resolves_loopback_and_names_refusal() {
        let t = resolve_target(&"http://127.0.0.1:1/".parse().unwrap(), None).unwrap();
        assert_eq!(t.addr.port(), 1);
        let e = LoadError::first_connection(t.addr, ErrorKind::Refused, Duration::from_secs(1));
        assert_eq!(
            e.to_string(),
            "connection refused: 127.0.0.1:1 — is the server running?"
        );
    }

    /// A refused handshake to a URL naming an IP address says SNI may be why (caddy answers
    /// alert 80); a certificate we refused, or a URL naming a host, does not.
    #[test]
    fn a_refused_handshake_without_sni_says_so() {
        let addr: SocketAddr = "127.0.0.1:8443".parse().unwrap();
        let failed = |detail: &str, url: &str| {
            LoadError::first_connection(addr, ErrorKind::Tls, Duration::from_secs(1))
                .with_detail(Some(detail.to_string()))
                .given_insecure(true)
                .given_url(&url.parse().unwrap())
                .to_string()
        };
        let alert = "received fatal alert: InternalError";
        assert!(failed(alert, "https://127.0.0.1:8443/").contains("no server name (SNI)"));
        assert!(failed(alert, "https://[::1]:8443/").contains("(SNI)"));
        assert!(!failed(alert, "https://localhost:8443/").contains("SNI"));
        let ours = "invalid peer certificate: UnknownIssuer";
        assert!(!failed(ours, "https://127.0.0.1:8443/").contains("SNI"));
        // QUIC words our own refusal as a failed cryptographic handshake: still ours.
        let quic =
            "the cryptographic handshake failed: error 48: invalid peer certificate: UnknownIssuer";
        assert!(!failed(quic, "https://127.0.0.1:8443/").contains("SNI"));
        let peer = "the cryptographic handshake failed: error 80";
        assert!(failed(peer, "https://127.0.0.1:8443/").contains("SNI"));
    }

    /// Under -k the certificate is not what failed: the hint names the other causes and does
    /// not suggest -k; without it, --cacert or -k.
    #[test]
    fn a_failed_handshake_under_insecure_does_not_suggest_insecure() {
        let alert = "received fatal alert: InternalError";
        assert!(tls_hint(true, alert).contains("-k already accepts any certificate"));
        assert!(!tls_hint(true, alert).contains("--cacert"));
        assert!(tls_hint(false, alert).contains("--cacert FILE holding the certificate"));
    }

    /// Causes that are not the certificate's trust are named, not met with --cacert or -k:
    /// an old TLS version, no cipher suite in common, cleartext on the port, a certificate
    /// outside its dates (which --cacert cannot fix).
    #[test]
    fn handshakes_that_fail_for_another_cause_name_it() {
        for (detail, words) in [
            ("received fatal alert: ProtocolVersion", "an older one"),
            ("received fatal alert: HandshakeFailure", "no cipher suite"),
            (
                "received corrupt message of type InvalidContentType",
                "speaks cleartext",
            ),
            (
                "invalid peer certificate: certificate expired 3 days ago",
                "--cacert does not change that",
            ),
        ] {
            let hint = tls_hint(false, detail);
            assert!(hint.contains(words), "{detail}: {hint}");
            assert!(!hint.contains("--cacert FILE"), "{detail}: {hint}");
        }
    }

    #[test]
    fn unknown_hosts_are_dns_errors() {
        let e = resolve_target(&"http://no-such-host.invalid/".parse().unwrap(), None).unwrap_err();
        assert!(matches!(e, LoadError::Dns { .. }), "{e}");
    }

    /// An alert that names its own cause gets no hint about the server name: a TLS 1.1-only
    /// server's ProtocolVersion read as if it wanted SNI.
    #[test]
    fn the_sni_hint_stays_off_alerts_with_another_cause() {
        let hint = |detail: &str| sni_hint(true, detail);
        assert!(!hint(": received fatal alert: UnrecognisedName").is_empty());
        assert!(!hint(": received fatal alert: HandshakeFailure").is_empty());
        let others = [
            "ProtocolVersion",
            "CertificateRequired",
            "InsufficientSecurity",
        ];
        // A refusal of our client certificate (UnknownCA...) is not about SNI either.
        for other in others.iter().chain(&CLIENT_CERT_ALERTS) {
            assert_eq!(
                hint(&format!(": received fatal alert: {other}")),
                "",
                "{other}"
            );
        }
        assert_eq!(
            sni_hint(false, ": received fatal alert: UnrecognisedName"),
            ""
        );
    }

    /// Alerts about the client's certificate point at --cert and --key, never at --cacert or
    /// -k (about the server's certificate: the line said they would help).
    #[test]
    fn alerts_about_our_certificate_point_at_cert_and_key() {
        let wanted = tls_hint(false, ": received fatal alert: CertificateRequired");
        assert!(wanted.contains("--cert and --key"), "{wanted}");
        for alert in CLIENT_CERT_ALERTS {
            let hint = tls_hint(false, &format!(": received fatal alert: {alert}"));
            assert!(
                hint.contains("refused the client certificate"),
                "{alert}: {hint}"
            );
            assert!(!hint.contains("--cacert"), "{alert}: {hint}");
        }
    }
}
