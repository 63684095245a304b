//! The calling thread during a run: merges the workers' intervals once a second into an
//! [`IntervalSnapshot`] for the observer, and keeps the per-second series for the report.

use super::worker::WorkerMsg;
use crate::report::SeriesPoint;
use crate::stats::{IntervalSnapshot, IntervalStats, LatencyHistogram, Observer};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The shortest measured time a series point may cover.
const MIN_POINT: Duration = Duration::from_millis(100);

/// How long after a tick the coordinator waits for late workers before showing it.
const GRACE: Duration = Duration::from_millis(50);

/// Running totals seen by the coordinator.
struct Totals {
    started: u64,
    completed: u64,
    failed: u64,
    connections_opened: u64,
    latency: LatencyHistogram,
}

impl Totals {
    fn new() -> Totals {
        Totals {
            started: 0,
            completed: 0,
            failed: 0,
            connections_opened: 0,
            latency: LatencyHistogram::new(),
        }
    }
}

/// Receives worker messages until every worker finished; returns the per-second series.
pub fn coordinate(
    rx: Receiver<WorkerMsg>,
    workers: usize,
    origin: Instant,
    measure_start: Instant,
    observer: &mut dyn Observer,
) -> Vec<SeriesPoint> {
    let mut totals = Totals::new();
    let mut series = Vec::new();
    let mut pending = IntervalStats::default();
    let mut finished = 0usize;
    let mut tick = 1u64;
    let mut last_shown = origin;
    while finished < workers {
        let due = origin + Duration::from_secs(tick) + GRACE;
        match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(WorkerMsg::Interval { stats, .. }) => pending.merge(&stats),
            Ok(WorkerMsg::Finished) => finished += 1,
            Err(RecvTimeoutError::Timeout) => {
                let end = origin + Duration::from_secs(tick);
                let snap = snapshot(&mut totals, &pending, last_shown, end, measure_start);
                observer.on_interval(&snap);
                // A sliver of measured time (a warm-up ending just before the tick) would be a
                // spike in the chart: as for the last partial interval, 100 ms at least.
                if !snap.warmup && snap.interval >= MIN_POINT {
                    series.push(SeriesPoint::from_snapshot(&snap));
                }
                pending = IntervalStats::default();
                last_shown = end;
                tick += 1;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // The last partial interval, if it holds anything.
    let end = Instant::now();
    if pending.requests.started + pending.requests.succeeded + pending.requests.failed > 0 {
        let snap = snapshot(&mut totals, &pending, last_shown, end, measure_start);
        observer.on_interval(&snap);
        if !snap.warmup && snap.interval >= MIN_POINT {
            series.push(SeriesPoint::from_snapshot(&snap));
        }
    }
    observer.on_finish();
    series
}

fn snapshot(
    totals: &mut Totals,
    iv: &IntervalStats,
    from: Instant,
    to: Instant,
    measure_start: Instant,
) -> IntervalSnapshot {
    totals.started += iv.requests.started;
    let completed = iv.requests.succeeded + iv.requests.failed;
    totals.completed += completed;
    totals.failed += iv.requests.failed;
    totals.connections_opened += iv.connections_opened;
    totals.latency.merge(&iv.latency);
    // Only measured requests are recorded: the interval that holds the warm-up's end is
    // measured from the measured part's start, or its rate would read low (a 250 ms warm-up:
    // three quarters of the first second's rate).
    let interval = to.saturating_duration_since(from.max(measure_start));
    let secs = interval.as_secs_f64();
    IntervalSnapshot {
        elapsed: to.saturating_duration_since(measure_start),
        interval,
        warmup: to <= measure_start,
        completed,
        requests_per_sec: if secs > 0.0 {
            completed as f64 / secs
        } else {
            0.0
        },
        failed: iv.requests.failed,
        p50_us: iv.latency.percentile_us(50.0),
        p99_us: iv.latency.percentile_us(99.0),
        total_started: totals.started,
        total_completed: totals.completed,
        total_failed: totals.failed,
        total_p50_us: totals.latency.percentile_us(50.0),
        total_p99_us: totals.latency.percentile_us(99.0),
        total_connections_opened: totals.connections_opened,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The second that holds the end of a 250 ms warm-up: its 750 measured requests came in
    /// 750 ms, a rate of 1,000/s, not 750/s.
    #[test]
    fn the_interval_holding_the_warmups_end_is_measured_from_its_end() {
        let origin = Instant::now();
        let measure_start = origin + Duration::from_millis(250);
        let mut totals = Totals::new();
        let mut iv = IntervalStats::default();
        iv.requests.succeeded = 750;
        let end = origin + Duration::from_secs(1);
        let snap = snapshot(&mut totals, &iv, origin, end, measure_start);
        assert!(!snap.warmup);
        assert_eq!(snap.interval, Duration::from_millis(750));
        assert!((snap.requests_per_sec - 1000.0).abs() < 1e-6, "{snap:?}");
        // A whole measured second is unchanged.
        let next = snapshot(
            &mut totals,
            &iv,
            end,
            end + Duration::from_secs(1),
            measure_start,
        );
        assert!((next.requests_per_sec - 750.0).abs() < 1e-6, "{next:?}");
    }
}
