//! The calling thread during a run: merges the workers' intervals once a second into an
//! [`IntervalSnapshot`] for the observer, and keeps the per-second series for the report.

use super::worker::WorkerMsg;
use crate::report::SeriesPoint;
use crate::stats::{IntervalSnapshot, IntervalStats, LatencyHistogram, Observer};
use std::collections::BTreeMap;
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
/// Each worker interval carries the second it belongs to, and each second is shown once its
/// end (plus [`GRACE`] for late workers) has passed, from what arrived for it: a worker that
/// ends just after a second hands over that second and the next one apart, and they stay apart.
/// An interval that arrives after its second was shown joins the next one.
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
    let mut shown = Shown {
        totals: Totals::new(),
        series: Series::new(measure_start),
        last: origin,
        observer,
    };
    let mut pending: BTreeMap<u64, IntervalStats> = BTreeMap::new();
    let mut finished = 0usize;
    let mut tick = 1u64;
    let boundary = |t: u64| origin + Duration::from_secs(t);
    let on_time = |t: u64| deadline.is_none_or(|d| boundary(t) < d);
    while finished < workers {
        let msg = if on_time(tick) {
            let due = boundary(tick) + GRACE;
            match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => {
                    let stats = pending.remove(&tick).unwrap_or_default();
                    shown.show(&stats, boundary(tick));
                    tick += 1;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            }
        };
        match msg {
            WorkerMsg::Interval { tick: at, stats } => {
                pending.entry(at.max(tick)).or_default().merge(&stats);
            }
            WorkerMsg::Finished => finished += 1,
        }
    }
    // Every worker ended: the whole seconds not yet shown, then the last partial one, up to
    // the deadline, even empty (a stall); without one, if it holds anything.
    let now = Instant::now();
    let end = deadline.map_or(now, |d| d.min(now));
    while on_time(tick) && boundary(tick) <= end {
        let stats = pending.remove(&tick).unwrap_or_default();
        shown.show(&stats, boundary(tick));
        tick += 1;
    }
    let mut rest = IntervalStats::default();
    for stats in pending.values() {
        rest.merge(stats);
    }
    let holds = rest.requests.started + rest.requests.succeeded + rest.requests.failed;
    if deadline.is_some() || holds > 0 {
        shown.show(&rest, end.max(shown.last));
    }
    shown.observer.on_finish();
    shown.series.finish()
}

/// Ends the series where the measured part ends (`end_s` after its start). Its last point may
/// end sooner: an open-model `-n` run spans n / rate (as its rate is divided), though its
/// workers finish once the last send, due at (n - 1) / rate, is answered. The last point
/// keeps its requests over the longer stretch (`--rate 3 -n 1` is one point of 3 req/s at
/// 0.33 s, not 1,600 req/s at 0.6 ms).
pub fn end_series_at(series: &mut [SeriesPoint], end_s: f64) {
    let before = match series {
        [.., before, _] => before.t_s,
        _ => 0.0,
    };
    if let Some(last) = series.last_mut() {
        // Or later: the coordinator's last look comes after the last response, which ended
        // the measured part (a 44.1 ms run's series ended at 45.8 ms).
        if last.t_s != end_s && end_s > before {
            let completed = last.requests_per_s * (last.t_s - before);
            last.t_s = end_s;
            last.requests_per_s = completed / (end_s - before);
        }
    }
}

/// What has been shown: the observer's running totals and the series.
struct Shown<'a> {
    totals: Totals,
    series: Series,
    /// Where the last shown interval ended.
    last: Instant,
    observer: &'a mut dyn Observer,
}

impl Shown<'_> {
    /// Shows the interval from the last one's end to `to`.
    fn show(&mut self, stats: &IntervalStats, to: Instant) {
        let measure_start = self.series.measure_start;
        let snap = snapshot(&mut self.totals, stats, self.last, to, measure_start);
        self.observer.on_interval(&snap);
        if !snap.warmup {
            let conns = self.totals.connections_opened;
            self.series.push(stats, self.last, to, conns);
        }
        self.last = to;
    }
}

/// One point of the series being built: its stats and the stretch they cover.
struct Pending {
    stats: IntervalStats,
    from: Instant,
    to: Instant,
    connections_opened: u64,
}

/// The per-second series. A stretch of measured time under [`MIN_POINT`] (the part of a
/// second after a warm-up, the last part after the final whole second, a whole run that
/// short) would be a spike or a dip in a chart; it joins its neighbour instead of standing
/// alone, so the points still hold every request: the last point is held back until the next
/// shows whether it must take a sliver in.
struct Series {
    measure_start: Instant,
    points: Vec<SeriesPoint>,
    /// The last two points, not yet pushed (the last may be a sliver for the one before).
    before: Option<Pending>,
    held: Option<Pending>,
    /// A leading sliver, waiting for the next point.
    carry: Option<Pending>,
}

impl Series {
    fn new(measure_start: Instant) -> Series {
        Series {
            measure_start,
            points: Vec::new(),
            before: None,
            held: None,
            carry: None,
        }
    }

    fn push(&mut self, stats: &IntervalStats, from: Instant, to: Instant, conns: u64) {
        let mut next = Pending {
            stats: stats.clone(),
            from: from.max(self.measure_start),
            to,
            connections_opened: conns,
        };
        if let Some(carry) = self.carry.take() {
            next.stats.merge(&carry.stats);
            next.from = carry.from;
        }
        if self.held.is_none() && next.to.saturating_duration_since(next.from) < MIN_POINT {
            self.carry = Some(next);
            return;
        }
        if let Some(before) = self.before.take() {
            self.points.push(self.point(&before));
        }
        self.before = self.held.replace(next);
    }

    /// The points, the held one last; a last point under [`MIN_POINT`] joins the one before.
    fn finish(mut self) -> Vec<SeriesPoint> {
        let mut tail: Vec<Pending> = [self.before.take(), self.held.take(), self.carry.take()]
            .into_iter()
            .flatten()
            .collect();
        // A last stretch under MIN_POINT joins the one before it, if there is one.
        let mut joined = false;
        if let [.., into, last] = tail.as_mut_slice() {
            if last.to.saturating_duration_since(last.from) < MIN_POINT {
                into.stats.merge(&last.stats);
                into.to = last.to;
                into.connections_opened = last.connections_opened;
                joined = true;
            }
        }
        if joined {
            tail.pop();
        }
        for p in &tail {
            self.points.push(self.point(p));
        }
        self.points
    }

    fn point(&self, p: &Pending) -> SeriesPoint {
        let completed = p.stats.requests.succeeded + p.stats.requests.failed;
        let secs = p.to.saturating_duration_since(p.from).as_secs_f64();
        SeriesPoint {
            t_s: p
                .to
                .saturating_duration_since(self.measure_start)
                .as_secs_f64(),
            requests_per_s: if secs > 0.0 {
                completed as f64 / secs
            } else {
                0.0
            },
            failed: p.stats.requests.failed,
            p50_us: p.stats.latency.percentile_us(50.0),
            p99_us: p.stats.latency.percentile_us(99.0),
            connections_opened: p.connections_opened,
        }
    }
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
        warmup_left: measure_start.saturating_duration_since(to),
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

    fn point(t_s: f64, requests_per_s: f64) -> SeriesPoint {
        SeriesPoint {
            t_s,
            requests_per_s,
            failed: 0,
            p50_us: 0,
            p99_us: 0,
            connections_opened: 1,
        }
    }

    #[test]
    fn the_last_point_stretches_to_the_end_keeping_its_requests() {
        let mut s = vec![point(1.0, 100.0), point(2.0414, 105.0 / 1.0414)];
        end_series_at(&mut s, 2.05);
        assert_eq!(s[0], point(1.0, 100.0));
        assert_eq!(s[1].t_s, 2.05);
        assert!((s[1].requests_per_s - 100.0).abs() < 1e-9, "{:?}", s[1]);
        let mut one = vec![point(0.0006, 1.0 / 0.0006)];
        end_series_at(&mut one, 1.0 / 3.0);
        assert!((one[0].requests_per_s - 3.0).abs() < 1e-9, "{:?}", one[0]);
        // Shortened to the end when the last look came after it, keeping its requests; left
        // alone when it began after the end, and nothing to do in an empty series.
        let mut later = vec![point(2.0, 10.0)];
        end_series_at(&mut later, 1.6);
        assert_eq!(later[0].t_s, 1.6);
        assert!((later[0].requests_per_s - 12.5).abs() < 1e-9, "{later:?}");
        let mut past = vec![point(1.0, 10.0), point(2.0, 10.0)];
        end_series_at(&mut past, 0.9);
        assert_eq!(past, vec![point(1.0, 10.0), point(2.0, 10.0)]);
        end_series_at(&mut [], 1.0);
    }

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
            tx.send(WorkerMsg::Interval { tick: 3, stats }).unwrap();
            tx.send(WorkerMsg::Finished).unwrap();
            let mut quiet = crate::stats::Quiet;
            let series = coordinate(rx, 1, (origin, origin, Some(deadline)), &mut quiet);
            let last = series.last().expect("a last point");
            assert!((last.t_s - 2.5).abs() < 1e-6, "{series:?}");
            // Its second (the third) began at 2 s.
            let rate = succeeded as f64 / 0.5;
            assert!((last.requests_per_s - rate).abs() < 1e-6, "{series:?}");
        }
    }

    /// Completions a series holds: each point's rate over the stretch it covers.
    fn held(series: &[SeriesPoint]) -> f64 {
        let mut before = 0.0;
        let mut sum = 0.0;
        for p in series {
            sum += p.requests_per_s * (p.t_s - before);
            before = p.t_s;
        }
        sum
    }

    fn run(
        intervals: &[(u64, u64)],
        ago: Duration,
        warmup: Duration,
        deadline: Option<Duration>,
    ) -> Vec<SeriesPoint> {
        let origin = Instant::now() - ago;
        let (tx, rx) = std::sync::mpsc::channel();
        for &(tick, succeeded) in intervals {
            let mut stats = IntervalStats::default();
            stats.requests.started = succeeded;
            stats.requests.succeeded = succeeded;
            tx.send(WorkerMsg::Interval { tick, stats }).unwrap();
        }
        tx.send(WorkerMsg::Finished).unwrap();
        let mut quiet = crate::stats::Quiet;
        let times = (origin, origin + warmup, deadline.map(|d| origin + d));
        coordinate(rx, 1, times, &mut quiet)
    }

    /// A worker that ends 300 ms into second 2 hands over seconds 1 and 2 at once, before
    /// second 1 is due: they stay two points (the second's requests were counted in the first).
    #[test]
    fn seconds_handed_over_together_stay_apart() {
        let series = run(
            &[(1, 100), (2, 30)],
            Duration::from_millis(1300),
            Duration::ZERO,
            None,
        );
        assert_eq!(series.len(), 2, "{series:?}");
        assert!((series[0].t_s - 1.0).abs() < 1e-9, "{series:?}");
        assert!(
            (series[0].requests_per_s - 100.0).abs() < 1e-9,
            "{series:?}"
        );
        assert!((held(&series) - 130.0).abs() < 1e-6, "{series:?}");
    }

    /// Slivers under 100 ms join a neighbour rather than vanish: the last 50 ms joins the
    /// second before it, the 50 ms after a warm-up the second after it, and a run shorter
    /// than 100 ms is one point. Every request stays in the series.
    #[test]
    fn slivers_join_a_neighbour_and_the_series_holds_every_request() {
        let end = run(
            &[(1, 100), (2, 5)],
            Duration::from_millis(1050),
            Duration::ZERO,
            None,
        );
        assert_eq!(end.len(), 1, "{end:?}");
        assert!((held(&end) - 105.0).abs() < 1e-6, "{end:?}");
        let warm = Duration::from_millis(950);
        let start = run(
            &[(1, 5), (2, 100), (3, 0)],
            Duration::from_millis(3000),
            warm,
            Some(Duration::from_millis(2950)),
        );
        assert_eq!(start.len(), 2, "{start:?}");
        assert!((start[0].t_s - 1.05).abs() < 1e-9, "{start:?}");
        assert!((held(&start) - 105.0).abs() < 1e-6, "{start:?}");
        let short = run(&[(1, 40)], Duration::from_millis(30), Duration::ZERO, None);
        assert_eq!(short.len(), 1, "{short:?}");
        assert!((held(&short) - 40.0).abs() < 1e-6, "{short:?}");
    }
}
