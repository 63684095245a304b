//! Builds the [`Report`] from the merged worker statistics and the facts of the run.

use super::diagnosis::churn_diagnosis;
use super::model::*;
use crate::config::{LoadConfig, StopAfter};
use crate::protocol::{ProtocolKind, Target};
use crate::schedule;
use crate::stats::worker::LATE_AFTER;
use crate::stats::{LatencyHistogram, WorkerStats};
use std::time::Duration;

/// Percentiles every distribution lists.
pub const PERCENTILES: [f64; 7] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];
/// Ratio between successive histogram bucket bounds.
const BUCKET_RATIO: f64 = 1.25;

/// Facts of the run that the statistics do not hold.
pub struct RunFacts<'a> {
    /// The configuration run.
    pub config: &'a LoadConfig,
    /// The protocol spoken.
    pub kind: ProtocolKind,
    /// ALPN the server chose.
    pub alpn: Option<Vec<u8>>,
    /// The resolved target.
    pub target: &'a Target,
    /// Streams per connection as run.
    pub streams: u32,
    /// Worker threads.
    pub threads: usize,
    /// Length of the measured part.
    pub duration: Duration,
    /// The run was stopped early (interrupt).
    pub interrupted: bool,
    /// Per-second series.
    pub series: Vec<SeriesPoint>,
    /// Connections opened and closed before the run (not in `opened`).
    pub probes: u64,
}

/// The report of a run.
pub fn build_report(facts: RunFacts<'_>, stats: &WorkerStats) -> Report {
    let config = facts.config;
    let secs = facts.duration.as_secs_f64().max(1e-9);
    let r = &stats.requests;
    let completed = r.succeeded + r.failed;
    let open = config.is_open_model();
    let listed = listed_percentiles(&config.percentiles);
    Report {
        schema_version: SCHEMA_VERSION,
        tool: format!("httpvs {}", env!("CARGO_PKG_VERSION")),
        target: TargetInfo {
            url: config.url.to_string(),
            more_urls: config.more_urls.iter().map(|u| u.to_string()).collect(),
            address: facts.target.addr.to_string(),
            connect_to: config.connect_to.as_ref().map(ToString::to_string),
        },
        protocol: ProtocolInfo {
            requested: config.protocol.name().to_string(),
            negotiated: facts.kind.name().to_string(),
            alpn: facts
                .alpn
                .as_ref()
                .map(|a| String::from_utf8_lossy(a).into_owned()),
            alt_svc: None,
        },
        shape: shape(config, &facts, stats),
        // 0 for a run interrupted in its warm-up (`secs` only keeps rates finite).
        duration_s: facts.duration.as_secs_f64(),
        interrupted: facts.interrupted,
        requests: Requests {
            started: r.started,
            succeeded: r.succeeded,
            failed: r.failed,
            cut_off: r.cut_off,
            identity_holds: r.identity_holds(),
            retried: Retried {
                goaway: stats.retries.goaway,
                refused: stats.retries.refused,
                connection_closed: stats.retries.connection_closed,
                behind_timeout: stats.retries.behind_timeout,
                total: stats.retries.total(),
            },
            from_warmup: FromWarmup {
                finished: stats.warmup_overrun.finished,
                cut_off: stats.warmup_overrun.cut_off,
            },
        },
        throughput: Throughput {
            requests_per_s: completed as f64 / secs,
            succeeded_per_s: r.succeeded as f64 / secs,
            bytes_received_per_s: stats.wire.wire.received as f64 / secs,
            bytes_sent_per_s: stats.wire.wire.sent as f64 / secs,
        },
        latency: distribution_at(&stats.latency, &listed),
        latency_rows: histogram_rows(&stats.latency),
        latency_uncorrected: open.then(|| distribution_at(&stats.latency_uncorrected, &listed)),
        latency_spectrum: config.spectrum.then(|| spectrum(&stats.latency)),
        schedule: open.then(|| {
            let (unsent, unsent_oldest_us) = unsent(
                config,
                r.started,
                facts.interrupted.then_some(facts.duration),
                stats.next_due,
            );
            ScheduleLag {
                late_sends: stats.late_sends,
                late_threshold_us: LATE_AFTER.as_micros() as u64,
                lag: distribution(&stats.send_lag),
                unsent,
                unsent_oldest_us,
                warmup_dropped: warmup_dropped(config, &facts, stats.warmup_released),
                last_send_s: stats.last_send.as_secs_f64(),
            }
        }),
        phases: Phases {
            dns_us: facts.target.dns.as_micros() as u64,
            tcp_connect: distribution(&stats.tcp_connect),
            handshake: distribution(&stats.handshake),
            // QUIC's handshakes are not told apart: the count is TLS over TCP's.
            handshakes_resumed: (!stats.handshake.is_empty() && facts.kind != ProtocolKind::H3)
                .then_some(stats.handshakes_resumed),
            settings: distribution(&stats.settings),
            ttfb: distribution(&stats.ttfb),
            body: distribution(&stats.body),
        },
        status_codes: stats
            .status
            .seen()
            .into_iter()
            .map(|(code, count)| StatusRow { code, count })
            .collect(),
        errors: stats
            .errors
            .by_kind
            .iter()
            .map(|(k, &count)| ErrorRow {
                kind: k.name(),
                count,
            })
            .collect(),
        wire: wire(stats, r.succeeded, facts.kind),
        connections: connections(config, stats, facts.probes, facts.kind),
        quic: quic(config, stats),
        network: None,
        request_log: config.request_log.as_ref().map(|log| {
            let outcome = log.outcome();
            RequestLogInfo {
                file: outcome.file,
                rows: outcome.rows,
                error: outcome.error,
            }
        }),
        series: facts.series,
        thresholds: Vec::new(),
    }
}

fn shape(config: &LoadConfig, facts: &RunFacts<'_>, stats: &WorkerStats) -> Shape {
    Shape {
        model: if config.is_open_model() {
            "open"
        } else {
            "closed"
        }
        .to_string(),
        connections: config.connections,
        streams_requested: config.streams,
        streams: facts.streams,
        // h3 learns the limit only from the probe (`Connection::stream_limit`); a cap on `-m`
        // says what it found.
        server_max_streams: stats
            .connections
            .server_max_streams
            .or((facts.streams < config.streams).then_some(facts.streams)),
        threads: facts.threads,
        rate: config.rate,
        requests: match config.stop {
            StopAfter::Requests(n) => Some(n),
            StopAfter::Duration(_) => None,
        },
        duration_s: match config.stop {
            StopAfter::Duration(d) => Some(d.as_secs_f64()),
            StopAfter::Requests(_) => None,
        },
        warmup_s: config.warmup.as_secs_f64(),
        keepalive: config.keepalive,
        method: config.method.to_string(),
        request_body_bytes: config.body.len() as u64,
        windows: config
            .windows
            .advertised(facts.kind)
            .filter(|_| !config.windows.is_default())
            .map(|(stream_bytes, connection_bytes)| Windows {
                stream_bytes,
                connection_bytes,
            }),
    }
}

/// The distribution of no samples, as a run reports an empty histogram (and a report read back
/// without a field that was added later gets).
/// Steps of the text histogram between the min and the max.
const HISTOGRAM_ROWS: i32 = 12;

/// The text histogram's rows (see `Report::latency_rows`): bounds min·r^i for i = 0..=12, with
/// r = (max/min)^(1/12), rounded to whole µs and never repeated; each recorded value goes to
/// the first row whose bound holds it, so a narrow spread (a 50 ms delay) shows its shape where
/// power-of-two rows put it all in one.
pub fn histogram_rows(h: &LatencyHistogram) -> Vec<Bucket> {
    if h.is_empty() {
        return Vec::new();
    }
    let hdr = h.hdr();
    let (min, max) = (h.min_us().max(1), h.max_us().max(1));
    let ratio = (max as f64 / min as f64).powf(1.0 / f64::from(HISTOGRAM_ROWS));
    let mut rows: Vec<Bucket> = Vec::new();
    for i in 0..=HISTOGRAM_ROWS {
        let bound = if i == HISTOGRAM_ROWS {
            max
        } else {
            ((min as f64 * ratio.powi(i)).round() as u64).clamp(min, max)
        };
        if rows.last().is_none_or(|r| r.le_us < bound) {
            rows.push(Bucket {
                le_us: bound,
                count: 0,
            });
        }
    }
    for v in hdr.iter_recorded() {
        // A recorded bucket goes by its lowest equivalent value: the min's is the min itself.
        let value = hdr.lowest_equivalent(v.value_iterated_to());
        let at = rows
            .partition_point(|r| r.le_us < value)
            .min(rows.len() - 1);
        rows[at].count += v.count_at_value();
    }
    rows
}

pub fn empty_distribution() -> Distribution {
    distribution(&LatencyHistogram::default())
}

/// The percentiles a run's report lists: the defaults and `--percentiles`, in order, once each.
pub fn listed_percentiles(extra: &[f64]) -> Vec<f64> {
    let mut all: Vec<f64> = PERCENTILES.iter().chain(extra).copied().collect();
    all.sort_by(f64::total_cmp);
    all.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    all
}

/// Summary, the default percentiles and buckets of one histogram.
pub fn distribution(h: &LatencyHistogram) -> Distribution {
    distribution_at(h, &PERCENTILES)
}

/// Percentile ticks per halving of the distance to 100%, as wrk2 and HdrHistogram print them.
const SPECTRUM_TICKS_PER_HALF: u32 = 5;

/// The percentile level after `level`: [`SPECTRUM_TICKS_PER_HALF`] ticks in each halving of the
/// distance to 100%.
fn next_spectrum_level(level: f64) -> f64 {
    let halvings = (100.0 / (100.0 - level)).log2() as u32;
    let ticks = u64::from(SPECTRUM_TICKS_PER_HALF) << (halvings + 1).min(60);
    let next = level + 100.0 / ticks as f64;
    // A step below the float's resolution would stand still: go to the end.
    if next > level {
        next
    } else {
        100.0
    }
}

/// `h` at HdrHistogram's percentile ticks (see [`Spectrum`]).
pub fn spectrum(h: &LatencyHistogram) -> Spectrum {
    let hdr = h.hdr();
    let total = h.len();
    let mut rows = Vec::new();
    // HdrHistogram's PercentileIterator, with its levels in percent as Java's: steps of 10,
    // 5, 2.5… add up exactly, where fractions of 1 (the crate's `iter_quantiles`) drift
    // (0.1 + 0.1 + 0.1 > 0.3) and a level that lands on a bucket's edge, 80 of 100 samples,
    // skipped to the next bucket up (20 ms for a p80 of 3.8 ms).
    let mut level = 0.0f64;
    let mut count = 0;
    // As the report's percentiles: never outside what was recorded (a bucket's top can lie
    // past the max).
    let clamp = |us: u64| us.clamp(h.min_us(), h.max_us());
    for v in hdr.iter_recorded() {
        count += v.count_at_value();
        let us = clamp(v.value_iterated_to());
        while 100.0 * count as f64 / total as f64 >= level {
            rows.push(SpectrumRow {
                us,
                quantile: level / 100.0,
                count,
            });
            level = next_spectrum_level(level);
            if count == total {
                // The last value gets one tick, then the 100% row below (as Java's).
                break;
            }
        }
    }
    if total > 0 {
        rows.push(SpectrumRow {
            us: h.max_us(),
            quantile: 1.0,
            count: total,
        });
    }
    Spectrum {
        rows,
        count: h.len(),
        mean_us: h.mean_us(),
        stdev_us: h.stdev_us(),
        max_us: h.max_us(),
        hdr_buckets: u32::from(hdr.buckets()),
        // 2^ceil(log2(2·10^sigfig)): the sub-buckets HDR needs for its precision (2048 at 3).
        hdr_sub_buckets: (2 * 10u32.pow(u32::from(hdr.sigfig()))).next_power_of_two(),
    }
}

/// Summary, the percentiles `listed` and buckets of one histogram.
pub fn distribution_at(h: &LatencyHistogram, listed: &[f64]) -> Distribution {
    let hdr = h.hdr();
    if h.is_empty() {
        return Distribution {
            count: 0,
            min_us: 0,
            mean_us: 0.0,
            stdev_us: 0.0,
            max_us: 0,
            percentiles: listed.iter().map(|&p| Percentile { p, us: 0 }).collect(),
            buckets: Vec::new(),
        };
    }
    let buckets = hdr
        .iter_log(1, BUCKET_RATIO)
        .filter(|v| v.count_since_last_iteration() > 0)
        .map(|v| Bucket {
            le_us: v.value_iterated_to(),
            count: v.count_since_last_iteration(),
        })
        .collect();
    Distribution {
        count: hdr.len(),
        min_us: h.min_us(),
        mean_us: h.mean_us(),
        stdev_us: h.stdev_us(),
        max_us: h.max_us(),
        percentiles: listed
            .iter()
            .map(|&p| Percentile {
                p,
                us: h.percentile_us(p),
            })
            .collect(),
        buckets,
    }
}

fn wire(stats: &WorkerStats, succeeded: u64, kind: ProtocolKind) -> Wire {
    let w = &stats.wire;
    // HTTP/1.1 compresses no header: decoded is what came on the wire. h2 and h3 decode every
    // head that came, as the encoded count counts it; per succeeded request (the reference
    // clients' only figure) it fell short by the heads of responses cut off or failed after
    // their head, and skewed the savings.
    let decoded = if kind == ProtocolKind::H1 {
        w.wire.header_received
    } else if w.wire.header_decoded_received > 0 {
        w.wire.header_decoded_received
    } else {
        w.header_decoded_received
    };
    // Per succeeded request, as compare and h2load's per-request figures: a refused connect
    // moves no bytes and would only dilute them.
    let per = |n: u64| {
        if succeeded == 0 {
            0.0
        } else {
            n as f64 / succeeded as f64
        }
    };
    let header_savings = (decoded > 0 && w.wire.header_received > 0)
        .then(|| 1.0 - w.wire.header_received as f64 / decoded as f64);
    Wire {
        sent: w.wire.sent,
        received: w.wire.received,
        sent_per_request: per(w.wire.sent),
        received_per_request: per(w.wire.received),
        header_sent: w.wire.header_sent,
        header_received: w.wire.header_received,
        header_decoded_received: decoded,
        body_received: w.body_received,
        header_savings,
    }
}

fn connections(
    config: &LoadConfig,
    stats: &WorkerStats,
    probes: u64,
    kind: ProtocolKind,
) -> Connections {
    let c = &stats.connections;
    Connections {
        opened: c.opened,
        failed_to_open: c.failed_to_open,
        reused_requests: c.reused_requests,
        closed_by_server: ClosedByServer {
            goaway: c.closed_goaway,
            goaway_error: c.closed_goaway_error,
            connection_close: c.closed_connection_close,
            fin: c.closed_fin,
            reset: c.closed_reset,
            total: c.closed_by_server(),
        },
        closed_locally: c.closed_local,
        closed_unasked: c.closed_unasked,
        requests_per_connection: PerConnection {
            min: c.requests_min,
            mean: if c.retired == 0 {
                0.0
            } else {
                c.requests_sum as f64 / c.retired as f64
            },
            max: c.requests_max,
        },
        diagnosis: churn_diagnosis(config, stats, kind),
        probes,
    }
}

/// Warm-up sends that never went out: all of the warm-up's were due before the measured part
/// began, and those not released by then were dropped (none in a run interrupted in its
/// warm-up, whose duration is 0).
fn warmup_dropped(config: &LoadConfig, facts: &RunFacts<'_>, released: u64) -> u64 {
    match config.rate {
        Some(rate) if !(facts.interrupted && facts.duration.is_zero()) => {
            schedule::first_measured(config.warmup, rate).saturating_sub(released)
        }
        _ => 0,
    }
}

/// Sends an open-model run had due by its end that it never started, and how long before the
/// end the oldest was due. The count uses the schedule's own arithmetic (`schedule::due_offset`):
/// send k is due at k / rate from the origin, measured from the warm-up's end, and sent only
/// before the deadline. A `-n` run sends all of its requests, however late. An interrupted run
/// (`interrupted_after` its measured part began) counts the sends due before the interrupt,
/// up to a `-n` run's last.
/// The oldest is the earliest of the workers' next sends (`next_due`): workers fall behind by
/// different amounts, and unsent ÷ rate is only their average.
fn unsent(
    config: &LoadConfig,
    started: u64,
    interrupted_after: Option<Duration>,
    next_due: Option<Duration>,
) -> (u64, u64) {
    let Some(rate) = config.rate else {
        return (0, 0);
    };
    let first = schedule::first_measured(config.warmup, rate);
    // The measured part's length, and the last send it may make: a `-n` run that was not
    // interrupted made all of its sends.
    let (measured, last) = match (config.stop, interrupted_after) {
        (StopAfter::Duration(d), at) => (at.map_or(d, |at| at.min(d)), u64::MAX),
        (StopAfter::Requests(n), Some(at)) => (at, first.saturating_add(n)),
        (StopAfter::Requests(_), None) => return (0, 0),
    };
    let limit = config.warmup.saturating_add(measured);
    let end = schedule::sends_due_before(limit, rate).min(last);
    let unsent = end.saturating_sub(first).saturating_sub(started);
    if unsent == 0 {
        return (0, 0);
    }
    let even = schedule::due_offset(first + started, rate).unwrap_or(limit);
    // A worker still in the warm-up's sends is behind by the measured part, no more.
    let first_due = schedule::due_offset(first, rate).unwrap_or(limit);
    let due = next_due
        .filter(|due| *due < limit)
        .map_or(even, |due| due.max(first_due));
    let oldest = limit.saturating_sub(due);
    (unsent, oldest.as_micros() as u64)
}

fn quic(config: &LoadConfig, stats: &WorkerStats) -> Option<Quic> {
    let q = &stats.quic;
    (q.connections > 0).then(|| Quic {
        connections: q.connections,
        datagrams_sent: q.sum.datagrams_sent,
        datagrams_received: q.sum.datagrams_received,
        udp_bytes_sent: q.sum.udp_bytes_sent,
        udp_bytes_received: q.sum.udp_bytes_received,
        packets_lost: q.sum.packets_lost,
        retransmits: q.sum.retransmits,
        mean_smoothed_rtt_us: q.smoothed_rtt_us_sum / q.connections,
        min_rtt_us: q.min_rtt_us.unwrap_or(0),
        mean_cwnd_bytes: q.cwnd_sum / q.connections,
        early_requests: q.sum.early_requests,
        early_rejected: q.sum.early_rejected,
        note: (config.zero_rtt && q.sum.early_requests == 0 && q.sum.early_rejected == 0)
            .then(|| zero_rtt_note(config.keepalive)),
    })
}

/// Why `--0rtt` sent nothing early; the keep-alive clause only where keep-alive is on (it read
/// so beside `--no-keepalive`).
fn zero_rtt_note(keepalive: bool) -> String {
    let base = "--0rtt sent no early data: 0-RTT needs a connection that resumes a session \
                with a server that accepts early data (httpvs serve does not; caddy does)";
    match keepalive {
        true => format!(
            "{base}, and with keep-alive only the first connections open (--no-keepalive opens \
             one per request)"
        ),
        false => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    /// The note names --no-keepalive only to a run that keeps connections alive.
    #[test]
    fn the_zero_rtt_note_suggests_no_keepalive_only_with_keepalive() {
        assert!(super::zero_rtt_note(true).contains("--no-keepalive opens one per request"));
        assert!(!super::zero_rtt_note(false).contains("keep-alive"));
    }

    use super::*;

    /// A report written before the SETTINGS phase existed reads back with the same empty
    /// distribution a run without h2 connections reports.
    #[test]
    fn phases_without_settings_read_back_as_empty() {
        let empty = empty_distribution();
        let phases = Phases {
            dns_us: 5,
            tcp_connect: empty.clone(),
            handshake: empty.clone(),
            handshakes_resumed: None,
            settings: empty.clone(),
            ttfb: empty.clone(),
            body: empty.clone(),
        };
        let mut json = serde_json::to_value(&phases).unwrap();
        json.as_object_mut().unwrap().remove("settings");
        let back: Phases = serde_json::from_value(json).unwrap();
        assert_eq!(back, phases);
        assert_eq!(back.settings.percentiles.len(), PERCENTILES.len());
    }

    /// The text histogram's rows: a narrow spread (50-52 ms) gets nearly even steps with its
    /// shape in them, a wide one (10 µs to 1 s) logarithmic steps; bounds run from the min to the
    /// max, and every sample is in a row whose bound holds it.
    #[test]
    fn histogram_rows_span_min_to_max_in_even_ratio_steps() {
        let mut narrow = LatencyHistogram::default();
        for i in 0..2000u64 {
            narrow.record(std::time::Duration::from_micros(50_000 + i));
        }
        let rows = histogram_rows(&narrow);
        assert_eq!(rows.len(), 13, "{rows:?}");
        assert_eq!(rows.first().unwrap().le_us, narrow.min_us());
        assert_eq!(rows.last().unwrap().le_us, narrow.max_us());
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 2000);
        assert!(rows[1..].iter().all(|r| r.count > 100), "{rows:?}");
        let mut wide = LatencyHistogram::default();
        wide.record(std::time::Duration::from_micros(10));
        wide.record(std::time::Duration::from_secs(1));
        let rows = histogram_rows(&wide);
        assert_eq!(rows.len(), 13, "{rows:?}");
        assert_eq!((rows[0].le_us, rows[0].count), (10, 1));
        assert_eq!(rows[1].le_us, 26, "(10^5)^(1/12) = 2.6: {rows:?}");
        assert_eq!(rows[12].count, 1);
        assert!(rows[1..12].iter().all(|r| r.count == 0));
        assert!(histogram_rows(&LatencyHistogram::default()).is_empty());
    }

    /// An open `-z` run at 200/s for 4 s that started 466 of its 800 sends: 334 never went
    /// out, the oldest due 1.67 s before the end. Closed and `-n` runs have none; one
    /// interrupted after 1 s counts the 200 due by then.
    #[test]
    fn unsent_counts_the_sends_due_by_the_end_that_never_went() {
        let open = LoadConfig::new("http://127.0.0.1:1/")
            .unwrap()
            .rate(200.0)
            .duration(std::time::Duration::from_secs(4));
        assert_eq!(unsent(&open, 466, None, None), (334, 1_670_000));
        // The workers fell behind unevenly: one's next send was due at 0.61 s, 3.39 s before
        // the end, though unsent ÷ rate is 1.67 s.
        let lagging = Some(std::time::Duration::from_millis(610));
        assert_eq!(unsent(&open, 466, None, lagging), (334, 3_390_000));
        assert_eq!(unsent(&open, 800, None, None), (0, 0));
        let second = Some(std::time::Duration::from_secs(1));
        assert_eq!(unsent(&open, 466, second, None), (0, 0));
        assert_eq!(unsent(&open, 150, second, None), (50, 250_000));
        let n = open.clone().requests(800);
        assert_eq!(unsent(&n, 466, None, None), (0, 0));
        // An interrupted -n run counts the sends due by then, up to its -n.
        assert_eq!(unsent(&n, 150, second, None), (50, 250_000));
        let ten = Some(std::time::Duration::from_secs(10));
        assert_eq!(unsent(&n, 466, ten, None).0, 334);
        // A warm-up of 1/3 s: sends 67 (at 0.335 s) through 866 (4.33 s) are measured.
        let mut warm = open.clone();
        warm.warmup = std::time::Duration::from_secs_f64(1.0 / 3.0);
        assert_eq!(unsent(&warm, 800, None, None), (0, 0));
        assert_eq!(unsent(&warm, 799, None, None).0, 1);
        let closed = LoadConfig::new("http://127.0.0.1:1/")
            .unwrap()
            .duration(std::time::Duration::from_secs(4));
        assert_eq!(unsent(&closed, 466, None, None), (0, 0));
    }
}
