//! When to send: hands out tickets (requests to send now, or at an intended time) and knows when to stop.
//!
//! Pure and clock-free: callers pass `now`, so the closed and open models are tested without
//! sockets or sleeps. It knows nothing of protocols, statistics or reports.

pub mod plan;

pub use plan::{split_evenly, RunPlan};

use std::time::{Duration, Instant};

/// One request released by the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// Open model: when it should be sent (latency is measured from here). Closed model: `None`.
    pub intended: Option<Instant>,
    /// Whether it counts (false during the warmup).
    pub measured: bool,
}

/// The arrival process of one worker.
#[derive(Debug, Clone)]
enum Arrivals {
    /// Closed model: a ticket whenever a stream is free; `remaining` measured tickets if `-n`.
    Closed { remaining: Option<u64> },
    /// Open model: global send k is at `origin + k / rate`. The sends go round the run's
    /// connections as lanes (send k is lane k mod `lanes`, as wrk2 gives each connection its
    /// share), and this worker owns the lanes of its connections, `own.0..own.1`: its share
    /// of the rate follows its connections, so a worker with fewer does not fall behind. A
    /// lane's sends go only on its own connection, as wrk2's do: a stalled connection's sends
    /// fall behind rather than slipping onto another connection the same thread holds, so the
    /// tail a run reports depends on `-c`, not on how many threads `-t` shares them over.
    Open {
        origin: Instant,
        rate: f64,
        /// The next send of each lane this worker owns (`own.0` first).
        next_k: Vec<u64>,
        lanes: u64,
        own: (u64, u64),
        /// First global index that counts (after the warmup).
        first_measured_k: u64,
        /// One past the last global index to send if `-n`.
        end_k: Option<u64>,
    },
}

/// The tickets of one worker.
#[derive(Debug, Clone)]
pub struct WorkerSchedule {
    arrivals: Arrivals,
    /// Open model: warm-up sends released (the rest of the warm-up's were dropped at its end).
    warmup_released: u64,
    measure_start: Instant,
    deadline: Option<Instant>,
}

impl WorkerSchedule {
    /// Closed model for one worker: `requests` measured tickets (if `-n`), none after `deadline`.
    pub fn closed(
        measure_start: Instant,
        requests: Option<u64>,
        deadline: Option<Instant>,
    ) -> WorkerSchedule {
        WorkerSchedule {
            arrivals: Arrivals::Closed {
                remaining: requests,
            },
            warmup_released: 0,
            measure_start,
            deadline,
        }
    }

    /// Open model for the worker that owns lanes `own.0..own.1` of `lanes` (the run's
    /// connections, numbered over the workers in order): `rate` requests/s in total from
    /// `origin` (the start of the warmup); `requests` measured sends in total if `-n`.
    pub fn open(
        origin: Instant,
        measure_start: Instant,
        rate: f64,
        (own, lanes): ((u64, u64), u64),
        requests: Option<u64>,
        deadline: Option<Instant>,
    ) -> WorkerSchedule {
        let warmup = measure_start.saturating_duration_since(origin);
        let first_measured_k = first_measured(warmup, rate);
        WorkerSchedule {
            arrivals: Arrivals::Open {
                origin,
                rate,
                next_k: (own.0..own.1.max(own.0)).collect(),
                lanes: lanes.max(1),
                own,
                first_measured_k,
                // `-n` near u64::MAX is as good as none (it wrapped to before the first measured send).
                end_k: requests.map(|n| first_measured_k.saturating_add(n)),
            },
            warmup_released: 0,
            measure_start,
            deadline,
        }
    }

    /// Open model: when the next send this worker would release is due, after the origin
    /// (`None` in the closed model, or when it has none left).
    pub fn next_due(&self) -> Option<Duration> {
        match &self.arrivals {
            Arrivals::Open {
                rate,
                next_k,
                end_k,
                ..
            } => {
                let oldest = *next_k.iter().min()?;
                has_next(oldest, *end_k)
                    .then(|| due_offset(oldest, *rate))
                    .flatten()
            }
            _ => None,
        }
    }

    /// Open model: how many of the warm-up's sends this worker released.
    pub fn warmup_released(&self) -> u64 {
        self.warmup_released
    }

    /// Whether sends follow a rate (`--rate`) rather than completions.
    pub fn is_open(&self) -> bool {
        matches!(self.arrivals, Arrivals::Open { .. })
    }

    /// The next ticket for the worker's connection `lane` (counted from its first), or `None`
    /// when that connection is done (the closed model's tickets go to any: `lane` is not
    /// looked at). `now` ends the schedule at the deadline; in the closed model it also
    /// decides whether a ticket is measured.
    pub fn next(&mut self, now: Instant, lane: usize) -> Option<Ticket> {
        match &mut self.arrivals {
            Arrivals::Closed { remaining } => {
                if self.deadline.is_some_and(|d| now >= d) {
                    return None;
                }
                let measured = now >= self.measure_start;
                if measured {
                    if let Some(left) = remaining {
                        if *left == 0 {
                            return None;
                        }
                        *left -= 1;
                    }
                }
                Some(Ticket {
                    intended: None,
                    measured,
                })
            }
            Arrivals::Open {
                origin,
                rate,
                next_k,
                lanes,
                own,
                first_measured_k,
                end_k,
            } => {
                debug_assert!(lane < next_k.len(), "lane {lane} of {}", next_k.len());
                let next = next_k.get_mut(lane)?;
                let mut k = *next;
                if k < *first_measured_k && now >= self.measure_start {
                    // The warm-up is over and its sends still due never went out (the
                    // connection was busy or dead): they are dropped, not sent uncounted in
                    // the measured part ahead of its own sends, where they read as neither a
                    // request nor a failure (a dead connection's timeouts vanished).
                    let own_lane = own.0 + lane as u64;
                    k = first_own_at_or_after(*first_measured_k, (own_lane, own_lane + 1), *lanes);
                }
                if !has_next(k, *end_k) {
                    return None;
                }
                // Past what an Instant can hold is past any deadline: the schedule ends there.
                let at = due_offset(k, *rate).and_then(|after| origin.checked_add(after))?;
                // A schedule running behind would release its backlog after the deadline:
                // nothing is sent once the run's time is up.
                if self.deadline.is_some_and(|d| at >= d || now >= d) {
                    return None;
                }
                // The lane's next send is a round later.
                *next = k.saturating_add(*lanes);
                let measured = k >= *first_measured_k;
                self.warmup_released += u64::from(!measured);
                Some(Ticket {
                    intended: Some(at),
                    measured,
                })
            }
        }
    }
}

/// The first send at or after `k` on one of the lanes `own` (of `lanes`, round-robin).
fn first_own_at_or_after(k: u64, own: (u64, u64), lanes: u64) -> u64 {
    let (round, lane) = (k / lanes, k % lanes);
    if lane < own.0 {
        round * lanes + own.0
    } else if lane < own.1 {
        k
    } else {
        (round + 1) * lanes + own.0
    }
}

/// Whether open-model send `next_k` is to be released (a `-n` run has not reached its end).
fn has_next(next_k: u64, end_k: Option<u64>) -> bool {
    end_k.is_none_or(|end| next_k < end)
}

/// When open-model send `k` is due, after the schedule's origin (`None`: past any clock).
pub fn due_offset(k: u64, rate: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(k as f64 / rate).ok()
}

/// The first open-model send counted: the first due at or after a warm-up of `warmup`, by
/// [`due_offset`]'s rounding (a product like 0.07 × 100 = 7.000000000000001 must not push
/// send 7, due at 70 ms exactly, into the warm-up).
pub fn first_measured(warmup: Duration, rate: f64) -> u64 {
    sends_due_before(warmup, rate)
}

/// How many open-model sends are due before `limit` after the origin (sends 0 to n - 1), by
/// [`due_offset`]'s own rounding, so a count agrees exactly with what the schedule releases.
pub fn sends_due_before(limit: Duration, rate: f64) -> u64 {
    let due = |k: u64| due_offset(k, rate).unwrap_or(Duration::MAX);
    let mut n = (limit.as_secs_f64() * rate).ceil() as u64;
    while n > 0 && due(n - 1) >= limit {
        n -= 1;
    }
    while due(n) < limit {
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next ticket of whichever of the worker's connections is furthest behind, as a
    /// worker whose connections all keep up releases them.
    fn next_any(s: &mut WorkerSchedule, now: Instant) -> Option<Ticket> {
        let lane = match &s.arrivals {
            Arrivals::Open { next_k, .. } => (0..next_k.len()).min_by_key(|&i| next_k[i])?,
            Arrivals::Closed { .. } => 0,
        };
        s.next(now, lane)
    }

    /// A connection's sends are its own: one that fell behind (lane 0 took none for 50 ms)
    /// releases its backlog late, and the other's sends stay on their times, as wrk2's
    /// connections do, so the tail does not depend on how connections share threads.
    #[test]
    fn each_connection_keeps_its_own_sends() {
        let t0 = Instant::now();
        let mut s = WorkerSchedule::open(t0, t0, 100.0, ((0, 2), 2), Some(20), None);
        let at = |t: Option<Ticket>| t.and_then(|t| t.intended).map(|i| (i - t0).as_millis());
        let late = t0 + Duration::from_millis(50);
        assert_eq!(at(s.next(late, 1)), Some(10));
        assert_eq!(at(s.next(late, 1)), Some(30));
        // Lane 0's first three sends were due at 0, 20 and 40 ms: still its own, in order.
        assert_eq!(at(s.next(late, 0)), Some(0));
        assert_eq!(at(s.next(late, 0)), Some(20));
        assert_eq!(at(s.next(late, 0)), Some(40));
        assert_eq!(s.next_due(), Some(Duration::from_millis(50)));
        let lane1 = std::iter::from_fn(|| s.next(late, 1)).count();
        assert_eq!(lane1, 8);
        assert_eq!(s.next_due(), Some(Duration::from_millis(60)));
    }

    #[test]
    fn closed_counts_only_measured_tickets() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_secs(1);
        let mut s = WorkerSchedule::closed(start, Some(2), None);
        // Warmup tickets are free.
        for _ in 0..5 {
            assert_eq!(next_any(&mut s, t0).map(|t| t.measured), Some(false));
        }
        assert_eq!(next_any(&mut s, start).map(|t| t.measured), Some(true));
        assert_eq!(next_any(&mut s, start).map(|t| t.measured), Some(true));
        assert_eq!(next_any(&mut s, start), None);
    }

    #[test]
    fn closed_stops_at_deadline() {
        let t0 = Instant::now();
        let mut s = WorkerSchedule::closed(t0, None, Some(t0 + Duration::from_secs(1)));
        assert!(next_any(&mut s, t0).is_some());
        assert!(next_any(&mut s, t0 + Duration::from_secs(1)).is_none());
    }

    #[test]
    fn open_model_workers_interleave_into_an_even_global_rate() {
        let t0 = Instant::now();
        let rate = 100.0;
        let mut all = Vec::new();
        for w in 0..3 {
            let mut s = WorkerSchedule::open(t0, t0, rate, ((w, w + 1), 3), Some(10), None);
            while let Some(t) = next_any(&mut s, t0) {
                all.push(t.intended.unwrap());
            }
        }
        all.sort();
        assert_eq!(all.len(), 10);
        for pair in all.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap.abs_diff(Duration::from_millis(10)) < Duration::from_micros(2));
        }
    }

    #[test]
    fn open_model_warmup_sends_are_not_measured() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(50);
        let end = start + Duration::from_millis(100);
        let mut s = WorkerSchedule::open(t0, start, 100.0, ((0, 1), 1), None, Some(end));
        let tickets: Vec<Ticket> = std::iter::from_fn(|| next_any(&mut s, t0)).collect();
        assert_eq!(tickets.iter().filter(|t| !t.measured).count(), 5);
        assert_eq!(tickets.iter().filter(|t| t.measured).count(), 10);
    }

    /// `-n` near u64::MAX after a warm-up measures sends as if unbounded: the last send's
    /// number wrapped below the first measured one, and the run sent nothing and ended at once.
    #[test]
    fn a_huge_request_count_after_a_warmup_still_sends() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(500);
        let mut s = WorkerSchedule::open(t0, start, 10.0, ((0, 1), 1), Some(u64::MAX), None);
        let measured = std::iter::from_fn(|| next_any(&mut s, t0))
            .take(20)
            .filter(|t| t.measured)
            .count();
        assert_eq!(measured, 15);
    }

    /// The send due exactly at the warm-up's end is measured, even where warm-up × rate lands
    /// an ulp above a whole number (0.07 × 100 = 7.000000000000001 took send 7 into the
    /// warm-up, and a 1 s run at 100/s started 99).
    #[test]
    fn the_send_due_at_the_warmups_end_is_measured() {
        let t0 = Instant::now();
        for (warmup_ms, rate, first) in [(70, 100.0, 7), (17, 7000.0, 119), (60, 100.0, 6)] {
            let start = t0 + Duration::from_millis(warmup_ms);
            assert_eq!(
                first_measured(start - t0, rate),
                first,
                "{warmup_ms} ms at {rate}/s"
            );
            let end = start + Duration::from_secs(1);
            let mut s = WorkerSchedule::open(t0, start, rate, ((0, 1), 1), None, Some(end));
            let tickets: Vec<Ticket> = std::iter::from_fn(|| next_any(&mut s, t0)).collect();
            let measured = tickets.iter().filter(|t| t.measured).count();
            assert_eq!(measured as f64, rate, "{warmup_ms} ms at {rate}/s");
        }
    }

    /// Warm-up sends still due when the warm-up ends are dropped, not released into the
    /// measured part uncounted (a dead connection's timeouts vanished from the report, and a
    /// slow server's backlog took a third of the measured sends' places).
    #[test]
    fn warmup_sends_not_out_by_its_end_are_dropped() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_secs(1);
        let end = start + Duration::from_secs(1);
        for (own, lanes) in [((0, 1), 1), ((1, 3), 3), ((0, 1), 3), ((2, 3), 3)] {
            let mut s = WorkerSchedule::open(t0, start, 100.0, (own, lanes), None, Some(end));
            // Ten warm-up sends go out on time; then the worker is stuck until after the start.
            let early: Vec<Ticket> = (0..10).filter_map(|_| next_any(&mut s, t0)).collect();
            assert!(early.iter().all(|t| !t.measured));
            let late = next_any(&mut s, start + Duration::from_millis(5)).unwrap();
            assert!(late.measured, "{own:?} of {lanes}");
            let due = late.intended.unwrap() - t0;
            assert!(due >= Duration::from_secs(1), "{due:?}");
            assert!(due < Duration::from_millis(1000 + 10 * lanes), "{due:?}");
        }
        assert_eq!(first_own_at_or_after(100, (1, 3), 3), 100);
        assert_eq!(first_own_at_or_after(100, (0, 1), 3), 102);
        assert_eq!(first_own_at_or_after(100, (2, 3), 3), 101);
    }

    /// A worker's share of the rate follows its connections: with 3 connections on 2 workers,
    /// the worker with 2 sends two thirds (it sent half, and the one-connection worker fell
    /// behind while the others idled).
    #[test]
    fn open_model_shares_follow_connections() {
        let t0 = Instant::now();
        let plan = RunPlan::new(3, 2, None);
        let counts: Vec<usize> = (0..2)
            .map(|w| {
                let mut s =
                    WorkerSchedule::open(t0, t0, 100.0, (plan.lanes(w), 3), Some(300), None);
                std::iter::from_fn(|| next_any(&mut s, t0)).count()
            })
            .collect();
        assert_eq!(counts, vec![200, 100]);
    }

    /// Property: for any worker count, rate and -n, the workers' open-model tickets together
    /// are exactly the n measured sends at k / rate, each once.
    #[test]
    fn open_model_tickets_partition_the_global_schedule() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let t0 = Instant::now();
        for _ in 0..200 {
            let workers = rng.random_range(1..=8);
            let connections = rng.random_range(workers..=40) as u32;
            let rate = rng.random_range(1.0..50_000.0);
            let n = rng.random_range(1..500u64);
            let mut offsets: Vec<Duration> = Vec::new();
            let plan = RunPlan::new(connections, workers, None);
            for w in 0..workers {
                let own = plan.lanes(w);
                let lanes = u64::from(connections);
                let mut s = WorkerSchedule::open(t0, t0, rate, (own, lanes), Some(n), None);
                while let Some(t) = next_any(&mut s, t0) {
                    assert!(t.measured);
                    offsets.push(t.intended.unwrap() - t0);
                }
            }
            offsets.sort();
            assert_eq!(offsets.len() as u64, n, "workers {workers} rate {rate}");
            for (k, off) in offsets.iter().enumerate() {
                let want = Duration::from_secs_f64(k as f64 / rate);
                assert!(off.abs_diff(want) < Duration::from_micros(1), "{k}");
            }
        }
    }
}
