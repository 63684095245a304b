//! Everything one worker records: the run totals and the current one-second interval.
//!
//! A worker owns its `WorkerStats` outright (no locks): it records each outcome with a few
//! counter bumps and histogram increments, and hands the interval part over once a second.
//! What the interval and the totals both count (requests by outcome, latency, body bytes,
//! connections opened) is recorded once, in the interval, and added to the totals when the
//! interval is handed over ([`WorkerRecorder::take_interval`]): a request costs one latency
//! record, not two.
//!
//! An interval ends on the run's whole seconds, not when the worker's ticker runs (which can be
//! late by a timer tick or a busy loop turn): an outcome timed at or past the interval's end
//! closes it first ([`WorkerRecorder::start_clock`]), so a request sent at 1.000 s that
//! ended at 1.0003 s counts in the second second, whenever the ticker comes.

use super::counters::{
    ConnectionCounts, ErrorCounts, QuicTotals, RequestCounts, RetryCounts, StatusCounts,
    WarmupOverrun, WireTotals,
};
use super::histogram::LatencyHistogram;
use crate::error::ErrorKind;
use crate::protocol::{ConnectInfo, ResponseInfo, RetryReason};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A send is "late" when it left this long after its intended time (open model).
pub const LATE_AFTER: Duration = Duration::from_millis(1);

/// The run totals of one worker, merged across workers at the end.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    /// Requests by outcome.
    pub requests: RequestCounts,
    /// Resends on a new connection.
    pub retries: RetryCounts,
    /// Warm-up requests that ended after it, or never.
    pub warmup_overrun: WarmupOverrun,
    /// Latency: from the intended send time (open model) or the dispatch (closed model).
    pub latency: LatencyHistogram,
    /// Open model: latency from the actual send, as tools without correction report it.
    /// Empty in the closed model, whose report does not show it.
    pub latency_uncorrected: LatencyHistogram,
    /// Send start to the first response byte.
    pub ttfb: LatencyHistogram,
    /// First response byte to the last.
    pub body: LatencyHistogram,
    /// TCP connect per connection.
    pub tcp_connect: LatencyHistogram,
    /// TLS or QUIC handshake per connection.
    pub handshake: LatencyHistogram,
    /// TLS handshakes over TCP that resumed a session.
    pub handshakes_resumed: u64,
    /// h2: the wait for the server's SETTINGS per connection.
    pub settings: LatencyHistogram,
    /// Open model: how long after its intended time each request was dispatched.
    pub send_lag: LatencyHistogram,
    /// Open model: sends later than [`LATE_AFTER`].
    pub late_sends: u64,
    /// Open model: warm-up sends released (see `WorkerSchedule::warmup_released`).
    pub warmup_released: u64,
    /// Open model: when the last measured send went, from the start of the measured part.
    pub last_send: Duration,
    /// Open model: when this worker's next send was due, from the schedule's origin, had the
    /// run gone on (its oldest unsent; the earliest over workers once merged).
    pub next_due: Option<Duration>,
    /// Responses by status.
    pub status: StatusCounts,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Connection lifecycle counts.
    pub connections: ConnectionCounts,
    /// Bytes on the wire and decoded.
    pub wire: WireTotals,
    /// QUIC statistics, when the protocol is h3.
    pub quic: QuicTotals,
}

/// What one worker saw during one interval (about a second).
#[derive(Debug, Clone, Default)]
pub struct IntervalStats {
    /// Requests by outcome in this interval.
    pub requests: RequestCounts,
    /// Latency of requests completed in this interval.
    pub latency: LatencyHistogram,
    /// Connections opened in this interval.
    pub connections_opened: u64,
    /// Response body bytes in this interval.
    pub body_bytes: u64,
}

impl IntervalStats {
    /// Adds another interval (another worker's, or a late one).
    pub fn merge(&mut self, o: &IntervalStats) {
        self.requests.merge(&o.requests);
        self.latency.merge(&o.latency);
        self.connections_opened += o.connections_opened;
        self.body_bytes += o.body_bytes;
    }

    /// Takes the interval's contents out, leaving it empty (one histogram clone per second).
    pub fn take(&mut self) -> IntervalStats {
        let out = self.clone();
        self.requests = RequestCounts::default();
        self.latency.reset();
        self.connections_opened = 0;
        self.body_bytes = 0;
        out
    }
}

/// Timings of one completed request, measured by the engine.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimings {
    /// Total latency (corrected in the open model).
    pub latency: Duration,
    /// Open model: from the first actual send. `None` in the closed model, which measures
    /// from the dispatch and has no uncorrected figure to report.
    pub latency_uncorrected: Option<Duration>,
    /// Send start to the end of the response, as the protocol timed the last attempt.
    pub exchange: Duration,
}

/// The totals and the current interval of one worker.
///
/// `total` lacks what the current interval holds until [`take_interval`](Self::take_interval)
/// adds it; read the totals only after the last interval was taken.
#[derive(Debug, Default)]
pub struct WorkerRecorder {
    /// Run totals, up to the last interval taken.
    pub total: WorkerStats,
    /// The interval being filled.
    pub interval: IntervalStats,
    /// Responses whose body took no time (it came with the head, as small ones do): 0 µs in
    /// `total.body`, added in one step when the interval is handed over instead of one
    /// histogram record each.
    instant_bodies: u64,
    /// When the interval being filled ends: the run's next whole second. `None` before the
    /// run's clock starts (and in tests that hand intervals over by hand).
    interval_end: Option<Instant>,
    /// The second the interval being filled ends at (1 for the run's first second).
    tick: u64,
    /// Intervals that ended (an outcome came at or past their end) before the ticker took
    /// them, oldest first, with their seconds: one, or one a second the ticker is late.
    ended: VecDeque<(u64, IntervalStats)>,
}

impl WorkerRecorder {
    /// The run's clock started at `origin`: intervals end on its whole seconds from now on.
    pub fn start_clock(&mut self, origin: Instant) {
        self.interval_end = Some(origin + Duration::from_secs(1));
        self.tick = 1;
    }

    /// Something is recorded as of `at`: closes the interval first if `at` is past its end.
    #[inline]
    fn at(&mut self, at: Instant) {
        if self.interval_end.is_some_and(|end| at >= end) {
            self.close_until(at);
        }
    }

    #[cold]
    fn close_until(&mut self, at: Instant) {
        while let Some(end) = self.interval_end.filter(|end| at >= *end) {
            let closed = self.close_interval();
            self.ended.push_back((self.tick, closed));
            self.tick += 1;
            self.interval_end = Some(end + Duration::from_secs(1));
        }
    }

    /// A request left the schedule at `at`.
    pub fn started(&mut self, at: Instant) {
        self.at(at);
        self.interval.requests.started += 1;
    }

    /// A request got its whole response, the last byte at `at`.
    pub fn succeeded(&mut self, at: Instant, t: RequestTimings, r: &ResponseInfo) {
        self.at(at);
        self.interval.requests.succeeded += 1;
        self.interval.latency.record(t.latency);
        if let Some(uncorrected) = t.latency_uncorrected {
            self.total.latency_uncorrected.record(uncorrected);
        }
        self.total.ttfb.record(r.ttfb);
        let body = t.exchange.saturating_sub(r.ttfb);
        if body < Duration::from_micros(1) {
            self.instant_bodies += 1;
        } else {
            self.total.body.record(body);
        }
        self.total.status.count(r.status);
        self.total.wire.header_decoded_received += r.header_bytes;
        self.interval.body_bytes += r.body_bytes;
    }

    /// A request failed at `at`.
    pub fn failed(&mut self, at: Instant, kind: ErrorKind) {
        self.at(at);
        self.interval.requests.failed += 1;
        self.total.errors.count(kind);
    }

    /// A request was still in flight when the run ended (counted in the last interval).
    pub fn cut_off(&mut self) {
        self.interval.requests.cut_off += 1;
    }

    /// Hands over the ticker's interval with its second: the oldest that ended, else the
    /// one being filled, which ends now.
    pub fn take_interval(&mut self) -> (u64, IntervalStats) {
        if let Some(ended) = self.ended.pop_front() {
            return ended;
        }
        if let Some(end) = &mut self.interval_end {
            *end += Duration::from_secs(1);
        }
        let tick = self.tick;
        self.tick += 1;
        (tick, self.close_interval())
    }

    /// Hands over everything not yet handed over, each with its second, the last (partial)
    /// one included: the coordinator places each in its own second.
    pub fn take_rest(&mut self) -> Vec<(u64, IntervalStats)> {
        let mut rest: Vec<_> = std::mem::take(&mut self.ended).into();
        let tick = self.tick;
        rest.push((tick, self.close_interval()));
        rest
    }

    /// Adds the interval being filled to the totals and starts an empty one.
    fn close_interval(&mut self) -> IntervalStats {
        let i = &self.interval;
        let t = &mut self.total;
        t.requests.merge(&i.requests);
        t.latency.merge(&i.latency);
        t.wire.body_received += i.body_bytes;
        t.connections.opened += i.connections_opened;
        t.body
            .record_zeros(std::mem::take(&mut self.instant_bodies));
        self.interval.take()
    }

    /// A request goes again on a new connection.
    pub fn retried(&mut self, reason: RetryReason) {
        self.total.retries.count(reason);
    }

    /// Open model: a request was dispatched `lag` after its intended time, `at` into the
    /// measured part.
    pub fn send_lag(&mut self, lag: Duration, at: Duration) {
        self.total.send_lag.record(lag);
        self.total.last_send = self.total.last_send.max(at);
        if lag > LATE_AFTER {
            self.total.late_sends += 1;
        }
    }

    /// A connection opened (now: once a connection, so the clock is read here).
    pub fn connection_opened(&mut self, info: &ConnectInfo) {
        if self.interval_end.is_some() {
            self.at(Instant::now());
        }
        self.interval.connections_opened += 1;
        // Zero for QUIC, which has no TCP connect: its row would read 0µs.
        if !info.tcp_connect.is_zero() {
            self.total.tcp_connect.record(info.tcp_connect.get());
        }
        if !info.handshake.is_zero() {
            self.total.handshake.record(info.handshake.get());
            self.total.handshakes_resumed += u64::from(info.resumed);
        }
        if !info.settings.is_zero() {
            self.total.settings.record(info.settings.get());
        }
        self.total
            .connections
            .note_server_max_streams(info.server_max_streams);
    }

    /// A connection attempt failed (the request it was for fails separately).
    pub fn connection_failed(&mut self) {
        self.total.connections.failed_to_open += 1;
    }
}

impl WorkerStats {
    /// Adds another worker's totals.
    pub fn merge(&mut self, o: &WorkerStats) {
        self.requests.merge(&o.requests);
        self.retries.merge(&o.retries);
        self.warmup_overrun.merge(&o.warmup_overrun);
        self.latency.merge(&o.latency);
        self.latency_uncorrected.merge(&o.latency_uncorrected);
        self.ttfb.merge(&o.ttfb);
        self.body.merge(&o.body);
        self.tcp_connect.merge(&o.tcp_connect);
        self.handshake.merge(&o.handshake);
        self.handshakes_resumed += o.handshakes_resumed;
        self.settings.merge(&o.settings);
        self.send_lag.merge(&o.send_lag);
        self.late_sends += o.late_sends;
        self.warmup_released += o.warmup_released;
        self.last_send = self.last_send.max(o.last_send);
        self.next_due = match (self.next_due, o.next_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.status.merge(&o.status);
        self.errors.merge(&o.errors);
        self.connections.merge(&o.connections);
        self.wire.merge(&o.wire);
        self.quic.merge(&o.quic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> ResponseInfo {
        ResponseInfo {
            status: 200,
            ttfb: Duration::from_micros(50),
            header_bytes: 20,
            body_bytes: 100,
            close_requested: false,
            done_at: None,
        }
    }

    #[test]
    fn interval_take_resets_and_totals_keep_counting() {
        let t0 = Instant::now();
        let mut r = WorkerRecorder::default();
        let t = RequestTimings {
            latency: Duration::from_micros(100),
            latency_uncorrected: None,
            exchange: Duration::from_micros(90),
        };
        r.started(t0);
        r.succeeded(t0, t, &ok());
        r.started(t0);
        r.failed(t0, ErrorKind::Reset);
        let (_, first) = r.take_interval();
        assert_eq!(first.requests.succeeded, 1);
        assert_eq!(first.latency.len(), 1);
        r.started(t0);
        r.cut_off();
        assert_eq!(r.interval.requests.cut_off, 1);
        assert!(r.interval.latency.is_empty());
        r.take_interval();
        assert!(r.total.requests.identity_holds());
        assert_eq!(r.total.requests.started, 3);
        assert_eq!(r.total.latency.len(), 1);
        assert_eq!(r.total.wire.body_received, 100);
        // Closed model: no uncorrected figure is recorded.
        assert!(r.total.latency_uncorrected.is_empty());
    }

    /// Property: however the outcomes fall across intervals, the totals after the last
    /// interval equal the sum of the intervals handed over, and the identity holds.
    #[test]
    fn totals_are_the_sum_of_the_intervals() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let t0 = Instant::now();
        for _ in 0..50 {
            let mut r = WorkerRecorder::default();
            let mut summed = IntervalStats::default();
            for _ in 0..rng.random_range(1..6) {
                for _ in 0..rng.random_range(0..40) {
                    r.started(t0);
                    match rng.random_range(0..3) {
                        0 => r.succeeded(
                            t0,
                            RequestTimings {
                                latency: Duration::from_micros(rng.random_range(1..10_000)),
                                latency_uncorrected: Some(Duration::from_micros(5)),
                                exchange: Duration::from_micros(rng.random_range(0..100)),
                            },
                            &ok(),
                        ),
                        1 => r.failed(t0, ErrorKind::Reset),
                        _ => r.cut_off(),
                    }
                }
                summed.merge(&r.take_interval().1);
            }
            let t = &r.total;
            assert!(t.requests.identity_holds());
            assert_eq!(t.requests.started, summed.requests.started);
            assert_eq!(t.requests.succeeded, summed.requests.succeeded);
            assert_eq!(t.latency.len(), summed.latency.len());
            assert_eq!(
                t.latency.percentile_us(99.0),
                summed.latency.percentile_us(99.0)
            );
            assert_eq!(t.latency_uncorrected.len(), t.requests.succeeded);
            assert_eq!(t.wire.body_received, summed.body_bytes);
            assert_eq!(t.body.len(), t.requests.succeeded);
        }
    }

    /// An interval ends on the run's second, not when the ticker takes it: an outcome past
    /// the end closes it, a late ticker takes the closed one, then the next, and seconds with
    /// nothing in them are empty intervals, not skipped ones.
    #[test]
    fn intervals_end_on_the_runs_seconds_however_late_the_ticker() {
        let origin = Instant::now();
        let ms = |n| origin + Duration::from_millis(n);
        let mut r = WorkerRecorder::default();
        r.start_clock(origin);
        r.started(ms(0));
        r.failed(ms(999), ErrorKind::Reset);
        // The ticker for second 1 is late: a request sent at 1.000 s ended first.
        r.started(ms(1000));
        r.failed(ms(1001), ErrorKind::Reset);
        let (tick, first) = r.take_interval();
        assert_eq!(tick, 1);
        assert_eq!((first.requests.started, first.requests.failed), (1, 1));
        // Second 2 holds the late request; nothing then until 3.5 s, so second 3 is empty.
        r.started(ms(3500));
        let (tick, second) = r.take_interval();
        assert_eq!(tick, 2);
        assert_eq!((second.requests.started, second.requests.failed), (1, 1));
        let (tick, third) = r.take_interval();
        assert_eq!((tick, third.requests.started), (3, 0));
        // The ticker on time (nothing past 4 s yet) takes the interval being filled.
        let (tick, fourth) = r.take_interval();
        assert_eq!((tick, fourth.requests.started), (4, 1));
        r.started(ms(4100));
        r.failed(ms(5200), ErrorKind::Reset);
        // The request sent at 3.5 s was in flight at the end.
        r.cut_off();
        // The rest keeps its seconds apart: 5 (ended) and 6 (partial).
        let rest = r.take_rest();
        let ticks: Vec<u64> = rest.iter().map(|(t, _)| *t).collect();
        assert_eq!(ticks, [5, 6]);
        assert_eq!(rest[0].1.requests.started, 1);
        assert_eq!(
            (rest[1].1.requests.failed, rest[1].1.requests.cut_off),
            (1, 1)
        );
        assert!(r.total.requests.identity_holds());
        assert_eq!(r.total.requests.started, 4);
    }
}
