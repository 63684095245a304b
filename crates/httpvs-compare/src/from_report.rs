//! Folds a load report into compare's [`Measurement`]: the figures tables, verdicts and charts read.

use crate::measurement::Measurement;
use httpvs_load::report::{Distribution, Report};

/// The summary of one load report.
pub fn measurement(report: &Report) -> Measurement {
    let r = &report.requests;
    let ms = |p: f64| {
        report
            .latency
            .percentile(p)
            .map_or(0.0, |us| us as f64 / 1000.0)
    };
    let wire = report.wire.sent + report.wire.received;
    Measurement {
        seconds: report.duration_s,
        requests_per_sec: report.throughput.succeeded_per_s,
        succeeded: r.succeeded,
        failed: r.failed,
        started: r.started,
        cut_off: r.cut_off,
        warmup_cut_off: r.from_warmup.cut_off,
        retried: r.retried.total,
        errors: report
            .errors
            .iter()
            .map(|e| (e.kind.clone(), e.count))
            .collect(),
        non_2xx: report
            .status_codes
            .iter()
            .filter(|s| !(200..300).contains(&s.code))
            .map(|s| (s.code, s.count))
            .collect(),
        streams_capped: (report.shape.streams < report.shape.streams_requested)
            .then_some(report.shape.streams),
        p50_ms: ms(50.0),
        p90_ms: ms(90.0),
        p99_ms: ms(99.0),
        wire_bytes_per_request: if r.succeeded > 0 {
            wire as f64 / r.succeeded as f64
        } else {
            0.0
        },
        connections_opened: report.connections.opened,
        connections_closed_by_server: report.connections.closed_by_server.total,
        connection_note: report.connections.diagnosis.clone(),
        client_cpu: None,
        latency_cdf: cdf(&report.latency),
        per_second: report.series.iter().map(|p| p.requests_per_s).collect(),
        per_second_at: report.series.iter().map(|p| p.t_s).collect(),
        quic_packets_lost: report.quic.as_ref().map(|q| q.packets_lost),
        link_packets_lost: None,
    }
}

/// CDF points (ms, fraction ≤) from the report's log-spaced buckets.
fn cdf(dist: &Distribution) -> Vec<(f64, f64)> {
    let total: u64 = dist.buckets.iter().map(|b| b.count).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut points = vec![(dist.min_us as f64 / 1000.0, 0.0)];
    let mut seen = 0;
    for b in &dist.buckets {
        seen += b.count;
        let x = (b.le_us.min(dist.max_us.max(1))) as f64 / 1000.0;
        points.push((x, seen as f64 / total as f64));
    }
    points
}
