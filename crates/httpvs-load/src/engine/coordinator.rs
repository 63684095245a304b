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
///
/// With a `deadline` (`-z`), the tick at or past it is not shown on time: the workers' last
/// intervals arrive when they finish, which can be well after the deadline (dropping thousands
/// of connections), so that stretch becomes the last point, ending at the deadline, whatever
/// it holds. A stall at the end is then a low point, not a missing one, and a slow teardown is
/// not an empty point followed by a spike.
pub fn coordinate(
    rx: Receiver<WorkerMsg>,
    workers: usize,
    (origin, measure_start, deadline): (Instant, Instant, Option<Instant>),
    observer: &mut dyn Observer,
) -> Vec<SeriesPoint> {
    let mut totals = Totals::new();
    let mut series = Vec::new();
    let mut pending = IntervalStats::default();
    let mut finished = 0usize;
    let mut tick = 1u64;
    let mut last_shown = origin;
    while finished < workers {
        if deadline.is_some_and(|d| origin + Duration::from_secs(tick) >= d) {
            match rx.recv() {
                Ok(WorkerMsg::Interval { stats, .. }) => pending.merge(&stats),
                Ok(WorkerMsg::Finished) => finished += 1,
                Err(_) => break,
            }
            continue;
        }
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
    // The last partial interval: up to the deadline, even empty (a stall); without one, if it
    // holds anything.
    let now = Instant::now();
    let end = deadline.map_or(now, |d| d.min(now));
    let holds = pending.requests.started + pending.requests.succeeded + pending.requests.failed;
    if deadline.is_some() || holds > 0 {
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

    /// A `-z` run's last point ends at the deadline however late the workers' last intervals
    /// arrive, and shows even when it is empty (a stall at the end is a zero, not a gap).
    #[test]
    fn the_last_point_ends_at_the_deadline_and_shows_a_stall() {
        for succeeded in [100, 0] {
            let origin = Instant::now() - Duration::from_secs(3);
            let deadline = origin + Duration::from_millis(2500);
            let (tx, rx) = std::sync::mpsc::channel();
            let mut stats = IntervalStats::default();
            stats.requests.succeeded = succeeded;
            tx.send(WorkerMsg::Interval { stats }).unwrap();
            tx.send(WorkerMsg::Finished).unwrap();
            let mut quiet = crate::stats::Quiet;
            let series = coordinate(rx, 1, (origin, origin, Some(deadline)), &mut quiet);
            let last = series.last().expect("a last point");
            assert!((last.t_s - 2.5).abs() < 1e-6, "{series:?}");
            let rate = succeeded as f64 / 2.5;
            assert!((last.requests_per_s - rate).abs() < 1e-6, "{series:?}");
        }
    }
}
