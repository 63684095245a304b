//! The real [`CellDriver`]: one repeat of one cell is one `httpvs_load::run` against the target.

use crate::from_report;
use crate::plan::Payload;
use crate::results::RunResult;
use crate::runner::{CellDriver, CellSpec};
use crate::variant::{Listener, Variant};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice, TlsOptions};
use httpvs_netem::{DirectionCounters, Impairment, Link, LinkConfig, LinkCounters};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
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
    /// Where connections go instead of the URL's host and port (`--connect-to`).
    pub connect_to: Option<httpvs_load::connect_to::ConnectTo>,
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

/// Runs cells with `httpvs_load`, behind an emulated link for conditions that need one.
pub struct LoadDriver {
    /// The target.
    pub endpoints: Endpoints,
    /// Client CPUs (empty: unpinned).
    pub client_cpus: Vec<usize>,
    /// Client worker threads.
    pub threads: usize,
    /// Per-request timeout.
    pub timeout: Option<Duration>,
    /// The link of the condition that ran last (kept across its cells, replaced on the next).
    pub link: Option<(String, Option<Link>)>,
    /// Set by Ctrl-C: the load run in progress ends at once (compare then drops its cell).
    pub stop: Arc<AtomicBool>,
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
        config.connect_to = self.endpoints.connect_to.clone();
        config.warmup = spec.warmup;
        config.keepalive = spec.variant.keepalive();
        // Every connection opens before the warm-up: on a lossy link a lost SYN or handshake
        // waits out a 1 s retransmit, which would otherwise eat the warm-up and the measured
        // part and leave the row short of connections (and too thin for a verdict).
        config.preconnect = true;
        config.timeout = self.timeout.or(config.timeout);
        config.cpus = (!self.client_cpus.is_empty()).then(|| self.client_cpus.clone());
        apply_payload(&mut config, spec.payload)?;
        Ok(config)
    }

    /// The link a condition needs: None for a clean one; one link per condition, reused by its cells.
    fn link_for(&mut self, condition: &crate::plan::Condition) -> Result<Option<&Link>, String> {
        let current = self.link.as_ref().map(|(name, _)| name.as_str());
        if current != Some(condition.name.as_str()) {
            // Drop the previous link (its namespaces and devices) before making the next.
            self.link = None;
            let link = if condition.is_clean() {
                None
            } else {
                let parse = |t: &str| Impairment::parse(t).map_err(|e| e.to_string());
                let config = LinkConfig::new(parse(condition.up())?, parse(condition.down())?);
                Some(Link::start(config).map_err(|e| e.to_string())?)
            };
            self.link = Some((condition.name.clone(), link));
        }
        Ok(self.link.as_ref().and_then(|(_, link)| link.as_ref()))
    }
}

/// The counters of one cell: the link's counters after it, less those before. `held` is what
/// the link held as the cell ended and `held_at_start` as it began, so that per direction
/// `packets_out + held - held_at_start = packets_in + duplicated - lost - queue_drops`.
fn counters_between(before: LinkCounters, after: LinkCounters) -> serde_json::Value {
    let dir = |b: DirectionCounters, a: DirectionCounters| {
        serde_json::json!({
            "packets_in": a.packets_in - b.packets_in,
            "packets_out": a.packets_out - b.packets_out,
            "bytes_out": a.bytes_out - b.bytes_out,
            "lost": a.lost - b.lost,
            "duplicated": a.duplicated - b.duplicated,
            "corrupted": a.corrupted - b.corrupted,
            "reordered": a.reordered - b.reordered,
            "queue_drops": a.queue_drops - b.queue_drops,
            "late": a.late - b.late,
            "rejected": a.rejected - b.rejected,
            "held": a.held,
            "held_at_start": b.held,
        })
    };
    serde_json::json!({ "up": dir(before.up, after.up), "down": dir(before.down, after.down) })
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

/// The longest wait for a link to empty after a cell: a delay link empties in its delay; a
/// rate-limited queue that stays full longer is what `held` then shows.
const LINK_DRAIN: Duration = Duration::from_secs(1);

impl CellDriver for LoadDriver {
    fn run(&mut self, spec: &CellSpec<'_>) -> Result<RunResult, String> {
        let config = self.config(spec)?;
        let stop = self.stop.clone();
        let link = self.link_for(spec.condition)?;
        let (report, link) = match link {
            None => (httpvs_load::run_until(&config, &mut Quiet, stop), None),
            Some(link) => {
                // Threads inherit the namespace of the thread that starts them, so every
                // worker's sockets live behind the link.
                let before = link.counters();
                let stopped = stop.clone();
                let report = link
                    .run_in_client_ns(move || httpvs_load::run_until(&config, &mut Quiet, stop))
                    .map_err(|e| e.to_string())?;
                // The cell's teardown (its FINs, the last ACKs) goes out before its counters
                // are read: it counts here, not in the next cell, whose measurement it would
                // cross, and `held` reads what the link could not deliver, not a closing burst.
                link.drain(LINK_DRAIN, &stopped);
                // A link that stopped forwarding measured itself, not the protocol.
                if let Some(why) = link.relay_failure() {
                    return Err(format!("the emulated link's relay stopped ({why})"));
                }
                (report, Some(counters_between(before, link.counters())))
            }
        };
        let report = report.map_err(load_error_line)?;
        let mut summary = from_report::measurement(&report);
        summary.link_packets_lost = link.as_ref().map(|l| {
            let lost = |d: &str| l[d]["lost"].as_u64().unwrap_or(0);
            lost("up") + lost("down")
        });
        let report = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        Ok(RunResult {
            summary,
            report,
            link,
        })
    }
}

/// A load run's error as compare says it: load's connect-timeout line names its
/// `--connect-timeout`, which compare does not have.
pub(crate) fn load_error_line(e: httpvs_load::LoadError) -> String {
    match e {
        httpvs_load::LoadError::ConnectTimeout {
            addr,
            timeout,
            detail,
        } => httpvs_load::engine::connect_timeout_line(addr, timeout, &detail, None),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell's counters add up with what the link held at its start and end.
    #[test]
    fn a_cells_counters_carry_what_the_link_held() {
        let before = DirectionCounters {
            packets_in: 100,
            packets_out: 90,
            held: 10,
            ..DirectionCounters::default()
        };
        let after = DirectionCounters {
            packets_in: 1361,
            packets_out: 1252,
            lost: 27,
            held: 82,
            ..DirectionCounters::default()
        };
        let both = |d| LinkCounters { up: d, down: d };
        let c = counters_between(both(before), both(after));
        let n = |k: &str| c["up"][k].as_i64().unwrap();
        assert_eq!(
            n("packets_out") + n("held") - n("held_at_start"),
            n("packets_in") + n("duplicated") - n("lost") - n("queue_drops")
        );
    }
}
