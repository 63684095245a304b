//! The validated description of one load run: target, protocol, shape, schedule, request and limits.
//!
//! The CLI builds a [`LoadConfig`] from flags; `httpvs compare` builds one in code with
//! [`LoadConfig::new`] and the builder methods. [`LoadConfig::validate`] is the single place
//! where values are checked, so both paths reject the same things with the same words.
//!
//! An emulated network is not part of the config: sockets live in the network namespace of
//! the thread that makes them, and worker threads inherit their starter's, so a caller puts a
//! whole run behind a link by calling [`crate::run`] inside the link's client namespace
//! (`httpvs load --net` and `compare` do that with `httpvs_netem::Link::run_in_client_ns`).
//! The load generator itself needs no knowledge of netem.

use crate::protocol::ProtocolKind;
use bytes::Bytes;
use std::path::PathBuf;
use std::time::Duration;

/// Which protocol to use: fixed, or `auto` (ALPN for https, h1 for http).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolChoice {
    /// ALPN (h2, then http/1.1) for https URLs; HTTP/1.1 for http URLs.
    Auto,
    /// Exactly this protocol.
    Fixed(ProtocolKind),
}

impl ProtocolChoice {
    /// Parses the value of `-p`: h1, h2c, h2, h3 or auto.
    pub fn parse(s: &str) -> Option<ProtocolChoice> {
        Some(match s.to_ascii_lowercase().as_str() {
            "auto" => ProtocolChoice::Auto,
            "h1" | "http1" | "http/1.1" => ProtocolChoice::Fixed(ProtocolKind::H1),
            "h2c" => ProtocolChoice::Fixed(ProtocolKind::H2c),
            "h2" | "http2" | "http/2" => ProtocolChoice::Fixed(ProtocolKind::H2),
            "h3" | "http3" | "http/3" => ProtocolChoice::Fixed(ProtocolKind::H3),
            _ => return None,
        })
    }

    /// The name users type after `-p`.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolChoice::Auto => "auto",
            ProtocolChoice::Fixed(kind) => kind.name(),
        }
    }
}

/// When the measured part of a run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopAfter {
    /// After this many requests have been started (and have finished).
    Requests(u64),
    /// After this long; requests still in flight then are "cut off at the end".
    Duration(Duration),
}

/// TLS client options for https targets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsOptions {
    /// `-k`: accept any server certificate.
    pub insecure: bool,
    /// `--cacert`: trust this PEM bundle (in addition to nothing else).
    pub cacert: Option<PathBuf>,
    /// `--cert`, `--key`: the certificate to show a server that asks for one (mutual TLS).
    pub client_identity: Option<std::sync::Arc<crate::protocol::tls::ClientIdentity>>,
}

/// Everything one run needs, checked by [`LoadConfig::validate`].
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The target URL (http or https, with an authority).
    pub url: http::Uri,
    /// Further request URLs on `url`'s origin: each worker sends `url`, then these in turn,
    /// and round again (`httpvs load URL URL...`, `-i FILE`), as h2load cycles its URIs.
    pub more_urls: Vec<http::Uri>,
    /// `-p`: the protocol, or auto.
    pub protocol: ProtocolChoice,
    /// `-c`: connections, spread over the workers.
    pub connections: u32,
    /// `-m`: concurrent streams per connection (h2/h3), or the h1 pipelining depth.
    pub streams: u32,
    /// `-t`: worker threads (never more than connections).
    pub threads: usize,
    /// `-n` or `-z`.
    pub stop: StopAfter,
    /// `--warmup`: load that runs first and is not counted.
    pub warmup: Duration,
    /// `-X`.
    pub method: http::Method,
    /// `-H`, in order.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// `-d` or `--data-file`.
    pub body: Bytes,
    /// `--no-keepalive` clears this: one request per connection.
    pub keepalive: bool,
    /// `--timeout`: bound on one request (send to last body byte); `None` waits forever.
    pub timeout: Option<Duration>,
    /// `--connect-timeout`: bound on TCP connect plus the TLS/QUIC handshake.
    pub connect_timeout: Duration,
    /// `-k`, `--cacert`.
    pub tls: TlsOptions,
    /// `--rate`: the open model at this many requests per second in total; `None` is the closed model.
    pub rate: Option<f64>,
    /// Pin worker thread i to `cpus[i % len]` (compare keeps the server and load apart).
    pub cpus: Option<Vec<usize>>,
    /// `--0rtt`: h3 sends requests as 0-RTT early data when a session ticket allows it.
    pub zero_rtt: bool,
    /// `--window`, `--connection-window`: the h2/h3 receive windows (unset: the protocol's).
    pub windows: crate::protocol::window::ReceiveWindows,
    /// `--alt-svc`: `-p auto` on https follows an `h3` Alt-Svc advertisement of the origin.
    pub alt_svc: bool,
    /// Closed model: open every connection before the clock starts, as the open model always
    /// does (keep-alive only). A lossy link's lost handshakes then delay the start instead of
    /// eating the warm-up and the measured part (`httpvs compare` sets it).
    pub preconnect: bool,
    /// Percentiles the report lists besides p50, p75, p90, p95, p99, p99.9 and p99.99
    /// (`--percentiles`, as Fortio's `-p`; and those `--fail-on` rules name).
    pub percentiles: Vec<f64>,
    /// `--connect-to`: where connections go instead of the URL's host and port (its name still
    /// goes into Host, `:authority` and SNI).
    pub connect_to: Option<crate::connect_to::ConnectTo>,
    /// `--log-file`: one row per measured request, as h2load's (`stats::request_log`).
    pub request_log: Option<std::sync::Arc<crate::stats::RequestLog>>,
    /// `--hgrm`: the report carries the latency's percentile spectrum
    /// (`Report::latency_spectrum`), as wrk2's `--latency` prints it.
    pub spectrum: bool,
}

/// Why a configuration cannot run; the CLI prints it as one line and exits 2.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse or lacks a host.
    #[error("invalid URL {}: {why}", shown_url(.url))]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A value is out of range or two values contradict each other.
    #[error("{0}")]
    Invalid(String),
}

/// A URL quoted for an error line: whole up to 200 characters, else its first 100 and its
/// length (a 200,000-byte path from `-i` filled the one line).
pub fn shown_url(url: &str) -> String {
    if url.chars().count() <= 200 {
        return format!("{url:?}");
    }
    let head: String = url.chars().take(100).collect();
    format!("{head:?}… ({} bytes)", url.len())
}

#[cfg(test)]
mod shown_url_tests {
    use super::shown_url;

    /// A long URL is cut in an error line, its length said.
    #[test]
    fn long_urls_are_cut() {
        assert_eq!(shown_url("/a"), "\"/a\"");
        let long = format!("/{}", "a".repeat(200_000));
        let shown = shown_url(&long);
        assert!(shown.ends_with("… (200001 bytes)"), "{shown}");
        assert!(shown.len() < 200, "{shown}");
    }
}

/// Default number of connections (`-c`), as wrk's.
pub const DEFAULT_CONNECTIONS: u32 = 10;
/// Default run length when neither `-n` nor `-z` is given, as wrk's.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Default per-request timeout, as hey's.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// The most requests in flight at once (`-c` x `-m`): each costs its stream's state up front
/// (about 0.5 KB), so this is about 0.5 GB, ten times what `bench/run` holds.
pub const MAX_IN_FLIGHT: u64 = 1_000_000;
/// The most worker threads (`-t`).
pub const MAX_THREADS: usize = 4096;
/// Lowest `--rate`, requests/s: one request per 1000 s. Far lower rates put a schedule's
/// second send past what a clock can hold.
pub const MIN_RATE: f64 = 0.001;
/// Highest `--rate`, requests/s: a thousand times what one core sends. Far higher rates put the
/// schedule's send numbers past what a u64 or an f64's integers hold (a rate of 1e20 spun for
/// minutes counting the sends that never went out).
pub const MAX_RATE: f64 = 1e9;
/// The most percentiles `--percentiles` (and `--fail-on`) add to the report's list.
pub const MAX_PERCENTILES: usize = 32;
/// The lowest percentile a report lists (its label stays short).
pub const MIN_PERCENTILE: f64 = 0.001;
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl LoadConfig {
    /// A config for `url` with defaults: auto protocol, 10 connections, 1 stream, one thread per
    /// core, 10 s, GET, keep-alive, 20 s request timeout, 10 s connect timeout.
    pub fn new(url: &str) -> Result<LoadConfig, ConfigError> {
        let uri = parse_url(url)?;
        Ok(LoadConfig {
            url: uri,
            more_urls: Vec::new(),
            protocol: ProtocolChoice::Auto,
            connections: DEFAULT_CONNECTIONS,
            streams: 1,
            threads: default_threads(),
            stop: StopAfter::Duration(DEFAULT_DURATION),
            warmup: Duration::ZERO,
            method: http::Method::GET,
            headers: Vec::new(),
            body: Bytes::new(),
            keepalive: true,
            timeout: Some(DEFAULT_TIMEOUT),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            tls: TlsOptions::default(),
            rate: None,
            cpus: None,
            zero_rtt: false,
            windows: Default::default(),
            alt_svc: false,
            preconnect: false,
            percentiles: Vec::new(),
            request_log: None,
            connect_to: None,
            spectrum: false,
        })
    }

    /// Sets the protocol.
    pub fn protocol(mut self, protocol: ProtocolChoice) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sets connections and streams per connection.
    pub fn shape(mut self, connections: u32, streams: u32) -> Self {
        self.connections = connections;
        self.streams = streams;
        self
    }

    /// Sets the worker thread count.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Stops after `n` requests.
    pub fn requests(mut self, n: u64) -> Self {
        self.stop = StopAfter::Requests(n);
        self
    }

    /// Stops after `d`.
    pub fn duration(mut self, d: Duration) -> Self {
        self.stop = StopAfter::Duration(d);
        self
    }

    /// Sets the open-model rate (requests per second in total).
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Sets TLS options.
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = tls;
        self
    }

    /// Parses a further request URL (`more_urls`): a full URL on `url`'s origin, or a path
    /// (`/style.css`) taken on that origin.
    pub fn parse_more_url(&self, url: &str) -> Result<http::Uri, ConfigError> {
        let full = if url.starts_with('/') {
            let scheme = self.url.scheme_str().unwrap_or("http");
            let authority = self.url.authority().map_or("", |a| a.as_str());
            format!("{scheme}://{authority}{url}")
        } else {
            url.to_string()
        };
        let uri = parse_url(&full).map_err(|e| match e {
            ConfigError::InvalidUrl { why, .. } if why.starts_with("user:password@") => {
                ConfigError::InvalidUrl {
                    url: url.to_string(),
                    why: "user:password@ goes in the first URL only (or -a USER:PASS)".into(),
                }
            }
            ConfigError::InvalidUrl { why, .. } => ConfigError::InvalidUrl {
                url: url.to_string(),
                why,
            },
            other => other,
        })?;
        self.check_origin(&uri)?;
        Ok(uri)
    }

    /// Every URL of a run goes over the same connections: `uri` must be on `url`'s origin.
    fn check_origin(&self, uri: &http::Uri) -> Result<(), ConfigError> {
        if same_origin(&self.url, uri) {
            return Ok(());
        }
        Err(ConfigError::InvalidUrl {
            url: uri.to_string(),
            why: format!(
                "it is not on {}://{}: every URL of a run shares the first URL's scheme, host \
                 and port (its connections)",
                self.url.scheme_str().unwrap_or(""),
                self.url.authority().map_or("", |a| a.as_str())
            ),
        })
    }

    /// Checks every value; `run` calls this too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        parse_url(&self.url.to_string())?;
        for uri in &self.more_urls {
            parse_url(&uri.to_string())?;
            self.check_origin(uri)?;
        }
        if self.connections == 0 {
            return bad("--connections must be at least 1".into());
        }
        if self.streams == 0 {
            return bad("--streams must be at least 1".into());
        }
        if self.threads == 0 {
            return bad("--threads must be at least 1".into());
        }
        if self.threads > MAX_THREADS {
            return bad(format!(
                "--threads {} is more than {MAX_THREADS}",
                self.threads
            ));
        }
        let in_flight = u64::from(self.connections) * u64::from(self.streams);
        if in_flight > MAX_IN_FLIGHT {
            return bad(format!(
                "--connections x --streams is {in_flight}; at most {MAX_IN_FLIGHT} requests \
                 can be in flight (each costs memory up front)"
            ));
        }
        match self.stop {
            StopAfter::Requests(0) => return bad("--requests must be at least 1".into()),
            StopAfter::Duration(d) if d.is_zero() => {
                return bad("--duration must be longer than 0".into())
            }
            _ => {}
        }
        if let Some(rate) = self.rate {
            // Infinity is past the top, not "not positive".
            if rate.is_nan() || rate <= 0.0 {
                return bad(format!("--rate must be a positive number, not {rate}"));
            }
            // 1e308 or 1e-300 in full is hundreds of digits.
            let given = if (1e-6..1e15).contains(&rate) {
                rate.to_string()
            } else {
                format!("{rate:e}")
            };
            if rate < MIN_RATE {
                return bad(format!(
                    "--rate must be at least {MIN_RATE} (one request per 1000 s), not {given}"
                ));
            }
            if rate > MAX_RATE {
                return bad(format!(
                    "--rate must be at most 1000000000 (a thousand times what one core sends), not {given}"
                ));
            }
        }
        if let Some(p) = self
            .percentiles
            .iter()
            .find(|p| !(p.is_finite() && **p >= MIN_PERCENTILE && **p <= 100.0))
        {
            return bad(format!(
                "percentile {p:?} is not from {MIN_PERCENTILE} to 100 (--percentiles, --fail-on)"
            ));
        }
        let base = crate::report::build::PERCENTILES.len();
        let extra = crate::report::build::listed_percentiles(&self.percentiles).len() - base;
        if extra > MAX_PERCENTILES {
            return bad(format!(
                "--percentiles and --fail-on name {extra} percentiles besides the {base} always \
                 listed; at most {MAX_PERCENTILES}"
            ));
        }
        if self.connect_timeout.is_zero() {
            return bad("--connect-timeout must be longer than 0".into());
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return bad("--timeout must be longer than 0".into());
        }
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return bad("the CPU list is empty".into());
            }
        }
        let https = self.url.scheme_str() == Some("https");
        if self.alt_svc && !(self.protocol == ProtocolChoice::Auto && https) {
            return bad("--alt-svc needs -p auto and an https:// URL".into());
        }
        let may_use_h3 = self.protocol == ProtocolChoice::Fixed(ProtocolKind::H3) || self.alt_svc;
        if self.zero_rtt && !may_use_h3 {
            return bad("--0rtt needs -p h3 (or -p auto --alt-svc)".into());
        }
        self.windows
            .check(self.protocol, https)
            .map_err(ConfigError::Invalid)?;
        match self.protocol {
            ProtocolChoice::Fixed(ProtocolKind::H2) if !https => {
                bad("-p h2 needs an https:// URL (use -p h2c for cleartext HTTP/2)".into())
            }
            ProtocolChoice::Fixed(ProtocolKind::H3) if !https => {
                bad("-p h3 needs an https:// URL (HTTP/3 always runs over QUIC's TLS)".into())
            }
            ProtocolChoice::Fixed(ProtocolKind::H2c) if https => {
                bad("-p h2c needs an http:// URL (use -p h2 for HTTP/2 over TLS)".into())
            }
            _ => Ok(()),
        }
    }

    /// The effective worker count: never more workers than connections.
    pub fn worker_count(&self) -> usize {
        self.threads.clamp(1, self.connections.max(1) as usize)
    }

    /// Whether this is the open model (`--rate`).
    pub fn is_open_model(&self) -> bool {
        self.rate.is_some()
    }
}

/// The URL's port, or its scheme's default (443 for https, else 80).
pub fn port_or_default(url: &http::Uri) -> u16 {
    url.port_u16()
        .unwrap_or(if url.scheme_str() == Some("https") {
            443
        } else {
            80
        })
}

/// Whether two URLs share scheme, host and port (a missing port is the scheme's default).
fn same_origin(a: &http::Uri, b: &http::Uri) -> bool {
    let host = |u: &http::Uri| u.host().map(str::to_ascii_lowercase);
    a.scheme_str() == b.scheme_str()
        && host(a) == host(b)
        && port_or_default(a) == port_or_default(b)
}

/// The number of cores, the default for `-t`.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A port as RFC 3986 writes one (`*DIGIT`), 0 to 65535: Rust's own parse takes `+80` too.
pub fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Parses and checks a target URL: http or https, a host, an optional port and path.
pub fn parse_url(url: &str) -> Result<http::Uri, ConfigError> {
    let invalid = |why: &str| ConfigError::InvalidUrl {
        url: url.to_string(),
        why: why.to_string(),
    };
    // `http://` and `http:///` are a scheme with no host; the http crate's words for them
    // ("empty string", "invalid format") do not say so.
    let after_scheme = url.split_once("://").map(|(_, rest)| rest);
    if after_scheme.is_some_and(|rest| rest.is_empty() || rest.starts_with('/')) {
        return Err(invalid("it has no host"));
    }
    if after_scheme.is_none() {
        // `127.0.0.1:8080/` is no URI to the http crate ("invalid format"); without the slash
        // it is an authority. Either way what is missing is the scheme.
        return Err(invalid("it needs http:// or https://"));
    }
    if !url.is_ascii() {
        // The http crate's "invalid uri character" does not say which, nor the fix.
        return Err(invalid(
            "it is not ASCII: write a host in its punycode form (xn--...) and percent-encode the path",
        ));
    }
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| {
        if url.len() >= usize::from(u16::MAX) && e.to_string() == "uri too long" {
            // The http crate's bare "uri too long".
            invalid(&format!(
                "longer than the {} bytes a URL may have",
                u16::MAX - 1
            ))
        } else {
            invalid(&e.to_string())
        }
    })?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(invalid(&format!("scheme {other} is not http or https"))),
        None => return Err(invalid("it needs http:// or https://")),
    }
    match uri.host() {
        Some(h) if !h.is_empty() => {}
        _ => return Err(invalid("it has no host")),
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(invalid(
            "user:password@ is not taken here; send credentials with -H Authorization",
        ));
    }
    let authority = uri.authority().map_or("", |a| a.as_str());
    if let Some((_, after)) = authority.split_once(']') {
        if !after.is_empty() && !after.starts_with(':') {
            return Err(invalid(
                "what follows the ] of its IPv6 address is not a port",
            ));
        }
    }
    let mut port = None;
    if let Some(text) = port_text(&uri) {
        port = match parse_port(text) {
            // An empty port is the scheme's default (RFC 3986 §3.2.3), as curl takes it.
            _ if text.is_empty() => None,
            Some(0) => return Err(invalid("port 0 is not a target")),
            Some(n) => Some(n),
            None => return Err(invalid(&format!("port {text:?} is not from 1 to 65535"))),
        };
    }
    let host = canonical_host(uri.host().unwrap_or_default()).map_err(|why| invalid(&why))?;
    // The authority as it goes into Host, `:authority` and SNI: `127.1` is 127.0.0.1 and
    // `:019000` is port 19000, as curl sends them.
    let authority = match port {
        Some(port) => format!("{host}:{port}"),
        None => host,
    };
    let uri = if uri.authority().map(|a| a.as_str()) == Some(authority.as_str()) {
        uri
    } else {
        let mut parts = uri.into_parts();
        parts.authority = Some(
            authority
                .parse()
                .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?,
        );
        http::Uri::from_parts(parts).map_err(|e| invalid(&e.to_string()))?
    };
    // A query with no path (`http://host:port?a=b`) is the root's query, as curl sends it: the
    // request line read `GET ?a=b`, which servers answer 400.
    if let Some(query) = uri.path_and_query().filter(|p| p.as_str().starts_with('?')) {
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = format!("/{}", query.as_str()).parse().ok();
        return http::Uri::from_parts(parts).map_err(|e| invalid(&e.to_string()));
    }
    Ok(uri)
}

/// The URL's host as it is sent: a bracketed IPv6 address checked (nothing after the `]` but a
/// port, and no zone id), and an IPv4 address in a short or numeric form (`127.1`,
/// `2130706433`, `0x7f.1`) written out as four decimal parts, as curl and browsers do; other
/// names as they are.
fn canonical_host(host: &str) -> Result<String, String> {
    if let Some(inside) = host.strip_prefix('[') {
        let inside = inside.strip_suffix(']').unwrap_or(inside);
        if inside.contains('%') {
            return Err(format!(
                "the zone id in [{inside}] is not supported: give the address without it"
            ));
        }
        return match inside.parse::<std::net::Ipv6Addr>() {
            Ok(_) => Ok(host.to_string()),
            Err(_) => Err(format!("[{inside}] is not an IPv6 address")),
        };
    }
    // A name whose last label is a number is an IPv4 address (WHATWG URL), or no host at all.
    let last = host
        .trim_end_matches('.')
        .rsplit('.')
        .next()
        .unwrap_or_default();
    if !numeric_label(last) {
        return Ok(host.to_string());
    }
    match ipv4_numbers(host.strip_suffix('.').unwrap_or(host)) {
        Some(addr) => Ok(addr.to_string()),
        None => Err(format!("{host} is not an IPv4 address")),
    }
}

/// One part of an IPv4 address as `inet_aton` reads it: decimal, octal with a leading 0, or
/// hexadecimal with 0x.
fn numeric_part(part: &str) -> Option<u64> {
    let lower = part.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        return match hex {
            "" => Some(0),
            // Digits only: Rust's parsers take a leading `+`, inet_aton does not.
            _ if hex.bytes().all(|b| b.is_ascii_hexdigit()) => u64::from_str_radix(hex, 16).ok(),
            _ => None,
        };
    }
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if part.len() > 1 && part.starts_with('0') {
        return u64::from_str_radix(&part[1..], 8).ok();
    }
    part.parse().ok()
}

/// Whether a host's last label reads as a number (then the host is an IPv4 address or
/// nothing): decimal digits, or 0x and hex digits.
fn numeric_label(label: &str) -> bool {
    let lower = label.to_ascii_lowercase();
    match lower.strip_prefix("0x") {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// An IPv4 address in one to four parts, the last filling the bytes the others leave (`127.1`
/// is 127.0.0.1, `2130706433` the same), or `None` when a part is not a number or too large.
fn ipv4_numbers(host: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<u64> = host
        .split('.')
        .map(numeric_part)
        .collect::<Option<Vec<u64>>>()?;
    let (last, leading) = parts.split_last()?;
    if parts.len() > 4 || leading.iter().any(|&p| p > 255) {
        return None;
    }
    let room = 8 * (4 - leading.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let mut value = *last;
    for (i, &part) in leading.iter().enumerate() {
        value |= part << (24 - 8 * i as u32);
    }
    u32::try_from(value).ok().map(std::net::Ipv4Addr::from)
}

/// The port as written in the URL, if it has one. `http::Uri` keeps an unparsable port (`:99999`,
/// `:abc`) in the authority but reports none, which would quietly mean the scheme's default port.
fn port_text(uri: &http::Uri) -> Option<&str> {
    let authority = uri.authority()?.as_str();
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    let after_host = &authority[host_end..];
    after_host.rfind(':').map(|i| &after_host[i + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each protocol's spelled-out names, as `http/1.1` was (`http/2` was refused).
    #[test]
    fn protocols_take_their_spelled_out_names() {
        for (names, kind) in [
            (["h1", "http1", "http/1.1"], ProtocolKind::H1),
            (["h2", "http2", "HTTP/2"], ProtocolKind::H2),
            (["h3", "http3", "http/3"], ProtocolKind::H3),
        ] {
            for name in names {
                assert_eq!(
                    ProtocolChoice::parse(name),
                    Some(ProtocolChoice::Fixed(kind))
                );
            }
        }
    }

    #[test]
    fn urls_are_checked() {
        assert!(parse_url("http://127.0.0.1:8080/x?y=1").is_ok());
        assert!(parse_url("https://localhost/").is_ok());
        assert!(parse_url("http://[::1]:8080/").is_ok());
        assert!(parse_url("http://[::1]/").is_ok());
        assert!(parse_url("http://h:65535/").is_ok());
        let e = parse_url("http://bücher.localhost/")
            .unwrap_err()
            .to_string();
        assert!(e.contains("punycode"), "{e}");
        // A query with no path is the root's (it went out as `GET ?a=b`).
        let rooted = parse_url("http://h:1?a=b").unwrap();
        assert_eq!(rooted.path_and_query().map(|p| p.as_str()), Some("/?a=b"));
        assert_eq!(rooted.to_string(), "http://h:1/?a=b");
        for bad in [
            "127.0.0.1:80",
            "ftp://x/",
            "http://",
            "not a url",
            "http://h:0/",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:65536/",
            "http://h:abc/",
            "http://h:+80/",
            "http://[::1]:+80/",
            "http://[::1]:70000/",
            "http://[::1]x:80/",
            "http://[127.0.0.1]:80/",
            "http://[::1%25lo]:80/",
            "http://1.2.3.4.5/",
            "http://256.1.1.1/",
            "http://1.2.65536/",
            "http://4294967296/",
            "http://1.2.3.08/",
            "http://99999999999999999999999/",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        // No scheme: said so, with a path too (it read "invalid format").
        for schemeless in ["127.0.0.1:8080", "127.0.0.1:8080/", "localhost/x", "h"] {
            let why = parse_url(schemeless).unwrap_err().to_string();
            assert!(
                why.contains("it needs http:// or https://"),
                "{schemeless}: {why}"
            );
        }
        // Written as sent, as curl sends them: an empty port is the default, a short or
        // numeric IPv4 address is four decimal parts, a port loses its leading zeros.
        for (given, sent) in [
            ("http://h:/x", "http://h/x"),
            ("http://127.1:8080/", "http://127.0.0.1:8080/"),
            ("https://2130706433/", "https://127.0.0.1/"),
            ("http://0x7f.0.0.01:019000/", "http://127.0.0.1:19000/"),
            ("http://127.0.0.1./", "http://127.0.0.1/"),
            ("http://[::1]:8080/", "http://[::1]:8080/"),
            ("http://host-1.example:80/a", "http://host-1.example:80/a"),
            ("http://a.1x/", "http://a.1x/"),
            // Not a number (inet_aton takes no sign): a name, left to the resolver.
            ("http://127.+1/", "http://127.+1/"),
        ] {
            let uri = parse_url(given).unwrap_or_else(|e| panic!("{given}: {e}"));
            assert_eq!(uri.to_string(), sent, "{given}");
        }
        let long = format!("http://h/{}", "a".repeat(70_000));
        let why = parse_url(&long).unwrap_err().to_string();
        assert!(
            why.contains("longer than the 65534 bytes a URL may have"),
            "{why}"
        );
        for hostless in ["http://", "http:///", "https:///x"] {
            let why = parse_url(hostless).unwrap_err().to_string();
            assert!(why.contains("it has no host"), "{hostless}: {why}");
        }
    }

    #[test]
    fn protocol_and_scheme_must_agree() {
        let c = LoadConfig::new("http://127.0.0.1:1/").unwrap();
        assert!(c
            .clone()
            .protocol(ProtocolChoice::Fixed(ProtocolKind::H2))
            .validate()
            .is_err());
        assert!(c
            .clone()
            .protocol(ProtocolChoice::Fixed(ProtocolKind::H2c))
            .validate()
            .is_ok());
        assert!(c.clone().shape(0, 1).validate().is_err());
        assert!(c.clone().shape(u32::MAX, 1).validate().is_err());
        assert!(c.clone().shape(1, u32::MAX).validate().is_err());
        assert!(c.clone().shape(1000, 1000).validate().is_ok());
        assert!(c.clone().threads(usize::MAX).validate().is_err());
        assert!(c.clone().rate(-1.0).validate().is_err());
        // Far below one request per 1000 s, a schedule's second send is past any clock.
        assert!(c.clone().rate(1e-19).validate().is_err());
        assert!(c.clone().rate(MIN_RATE).validate().is_ok());
        assert!(c.clone().rate(MAX_RATE).validate().is_ok());
        // A huge rate is quoted short (1e308 printed its 309 digits).
        let huge = c.clone().rate(1e308).validate().unwrap_err().to_string();
        assert!(huge.ends_with("not 1e308"), "{huge}");
        let tiny = c.clone().rate(1e-300).validate().unwrap_err().to_string();
        assert!(tiny.ends_with("not 1e-300"), "{tiny}");
        // Infinity is too large, not "not positive" (it read so).
        let inf = c
            .clone()
            .rate(f64::INFINITY)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(inf.contains("--rate must be at most"), "{inf}");
        assert!(c.clone().rate(f64::NAN).validate().is_err());
        assert_eq!(c.clone().shape(3, 1).threads(8).worker_count(), 3);
    }
}
