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
        warmup_finished: r.from_warmup.finished,
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
        per_second: succeeded_per_second(&report.series),
        per_second_at: report.series.iter().map(|p| p.t_s).collect(),
        quic_packets_lost: report.quic.as_ref().map(|q| q.packets_lost),
        link_packets_lost: None,
    }
}

/// Successful requests per second in each of the series' intervals: the series counts the
/// failed with the succeeded (as the live line and load's `Per second:` say), and the chart
/// beside a table of succeeded req/s plotted 81.7 req/s for a row of 0.
fn succeeded_per_second(series: &[httpvs_load::report::SeriesPoint]) -> Vec<f64> {
    let mut start = 0.0;
    series
        .iter()
        .map(|p| {
            let secs = p.t_s - start;
            start = p.t_s;
            let failed = if secs > 0.0 {
                p.failed as f64 / secs
            } else {
                0.0
            };
            (p.requests_per_s - failed).max(0.0)
        })
        .collect()
}

/// CDF points (ms, fraction ≤): the report's log-spaced buckets (ratio 1.25) and its
/// percentiles, so the chart passes through the table's p50 and p99 (from the buckets alone a
/// cell at 5 ms had 4 points, and the line crossed 0.5 up to a bucket's width from p50).
fn cdf(dist: &Distribution) -> Vec<(f64, f64)> {
    let total: u64 = dist.buckets.iter().map(|b| b.count).sum();
    if total == 0 {
        return Vec::new();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let mut points = vec![(ms(dist.min_us), 0.0)];
    let mut seen = 0;
    for b in &dist.buckets {
        seen += b.count;
        points.push((
            ms(b.le_us.min(dist.max_us.max(1))),
            seen as f64 / total as f64,
        ));
    }
    points.extend(dist.percentiles.iter().map(|p| (ms(p.us), p.p / 100.0)));
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // A bucket's top and a percentile one HDR step apart may disagree by a hair: the line
    // never falls.
    let mut most: f64 = 0.0;
    for point in &mut points {
        most = most.max(point.1);
        point.1 = most;
    }
    points.dedup();
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use httpvs_load::report::{Bucket, Percentile};

    /// The chart's line passes through the table's percentiles, rises only, and ends at 1.
    #[test]
    fn the_cdf_passes_through_the_percentiles() {
        let dist = Distribution {
            count: 100,
            min_us: 5_089,
            mean_us: 5_300.0,
            stdev_us: 100.0,
            max_us: 9_052,
            percentiles: vec![
                Percentile { p: 50.0, us: 5_170 },
                Percentile { p: 99.0, us: 7_400 },
            ],
            buckets: vec![
                Bucket {
                    le_us: 6_017,
                    count: 97,
                },
                Bucket {
                    le_us: 7_522,
                    count: 2,
                },
                Bucket {
                    le_us: 9_052,
                    count: 1,
                },
            ],
        };
        let points = cdf(&dist);
        assert!(points.contains(&(5.17, 0.5)), "{points:?}");
        assert!(points.contains(&(7.4, 0.99)), "{points:?}");
        assert!(points
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(points.last(), Some(&(9.052, 1.0)));
    }

    /// The chart's rate is of the succeeded, as the table's: failures are taken out per
    /// interval (a row of 0 req/s plotted 81.7).
    #[test]
    fn the_per_second_rate_counts_the_succeeded_only() {
        let point = |t_s: f64, requests_per_s: f64, failed: u64| httpvs_load::report::SeriesPoint {
            t_s,
            requests_per_s,
            failed,
            p50_us: 0,
            p99_us: 0,
            connections_opened: 1,
        };
        // 0.5 s with 40 completed of which 40 failed, then 1 s with 100 of which 10 failed.
        let series = [point(0.5, 80.0, 40), point(1.5, 100.0, 10)];
        assert_eq!(succeeded_per_second(&series), vec![0.0, 90.0]);
    }
}
