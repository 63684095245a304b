//! The real [`CellDriver`]: one repeat of one cell is one `httpvs_load::run` against the target.

use crate::from_report;
use crate::plan::Payload;
use crate::results::RunResult;
use crate::runner::{CellDriver, CellSpec};
use crate::variant::{Listener, Variant};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, NetProfile, ProtocolChoice, TlsOptions};
use std::time::Duration;

/// Where each listener of the target is, and how to trust it.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// `http://host:port` for h1 and h2c.
    pub http: Option<String>,
    /// `https://host:port` for h1 and h2 over TLS.
    pub https: Option<String>,
    /// `https://host:port` whose UDP port serves HTTP/3.
    pub h3: Option<String>,
    /// Certificate trust for https and h3.
    pub tls: TlsOptions,
}

impl Endpoints {
    /// The base URL a protocol uses, if the target has that listener.
    pub fn base(&self, variant: Variant) -> Option<&str> {
        match variant.listener() {
            Listener::Http => self.http.as_deref(),
            Listener::Https => self.https.as_deref(),
            Listener::H3 => self.h3.as_deref(),
        }
    }
}

/// Runs cells with `httpvs_load`.
pub struct LoadDriver {
    /// The target.
    pub endpoints: Endpoints,
    /// Client CPUs (empty: unpinned).
    pub client_cpus: Vec<usize>,
    /// Client worker threads.
    pub threads: usize,
    /// Per-request timeout.
    pub timeout: Option<Duration>,
}

impl LoadDriver {
    /// The load config of one repeat of a cell.
    pub fn config(&self, spec: &CellSpec<'_>) -> Result<LoadConfig, String> {
        let base = self
            .endpoints
            .base(spec.variant)
            .ok_or_else(|| format!("the target has no listener for {}", spec.variant))?;
        let url = format!("{base}{}", spec.payload.path_and_query());
        let mut config = LoadConfig::new(&url)
            .map_err(|e| e.to_string())?
            .protocol(ProtocolChoice::Fixed(spec.variant.kind()))
            .shape(spec.shape.connections, spec.shape.streams)
            .threads(self.threads.max(1))
            .duration(spec.duration)
            .tls(self.endpoints.tls.clone());
        config.warmup = spec.warmup;
        config.keepalive = spec.variant.keepalive();
        config.timeout = self.timeout.or(config.timeout);
        config.cpus = (!self.client_cpus.is_empty()).then(|| self.client_cpus.clone());
        apply_payload(&mut config, spec.payload)?;
        if !spec.condition.is_clean() {
            config.net = Some(NetProfile {
                spec: net_spec(spec.condition.up(), spec.condition.down()),
            });
        }
        Ok(config)
    }
}

/// The link description handed to the load generator: both directions, or each.
fn net_spec(up: &str, down: &str) -> String {
    if up == down {
        up.to_string()
    } else {
        format!("up: {up}; down: {down}")
    }
}

fn apply_payload(config: &mut LoadConfig, payload: &Payload) -> Result<(), String> {
    config.method = payload
        .method
        .parse()
        .map_err(|_| format!("'{}' is not an HTTP method", payload.method))?;
    if let Some(size) = payload.body {
        config.body = bytes::Bytes::from(vec![b'x'; size.0 as usize]);
    }
    for h in &payload.headers {
        let (name, value) = h.split_once(':').unwrap_or((h, ""));
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("'{h}' is not a header"))?;
        let value = http::HeaderValue::from_str(value.trim())
            .map_err(|_| format!("'{h}' is not a header"))?;
        config.headers.push((name, value));
    }
    Ok(())
}

impl CellDriver for LoadDriver {
    fn run(&mut self, spec: &CellSpec<'_>) -> Result<RunResult, String> {
        let config = self.config(spec)?;
        let report = httpvs_load::run(&config, &mut Quiet).map_err(|e| e.to_string())?;
        let summary = from_report::measurement(&report);
        let report = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        Ok(RunResult {
            summary,
            report,
            link: None,
        })
    }
}
