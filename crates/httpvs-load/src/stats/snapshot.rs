//! The once-a-second view of a running load, and the [`Observer`] that receives it.

use std::time::Duration;

/// The state of the run after one more interval: what the live line and compare's time series read.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntervalSnapshot {
    /// Time since the measured part began (negative phases are reported as `warmup`).
    pub elapsed: Duration,
    /// Length of this interval.
    pub interval: Duration,
    /// Whether this interval was part of the warmup (not counted in the report).
    pub warmup: bool,
    /// In the warm-up, how much of it is left.
    pub warmup_left: Duration,
    /// Requests completed (succeeded + failed) in this interval.
    pub completed: u64,
    /// Requests completed per second in this interval.
    pub requests_per_sec: f64,
    /// Failures in this interval.
    pub failed: u64,
    /// Median latency of this interval, µs.
    pub p50_us: u64,
    /// 99th percentile latency of this interval, µs.
    pub p99_us: u64,
    /// Requests started so far (measured part).
    pub total_started: u64,
    /// Requests completed so far.
    pub total_completed: u64,
    /// Failures so far.
    pub total_failed: u64,
    /// Median latency so far, µs.
    pub total_p50_us: u64,
    /// 99th percentile latency so far, µs.
    pub total_p99_us: u64,
    /// Connections opened so far.
    pub total_connections_opened: u64,
}

/// Receives one snapshot per second while a run goes on (the live line, compare's series...).
pub trait Observer {
    /// Called once per interval, from the thread that called `run`.
    fn on_interval(&mut self, snapshot: &IntervalSnapshot);
    /// Called once when the load has stopped, before the report is built.
    fn on_finish(&mut self) {}
}

/// An observer that ignores everything.
pub struct Quiet;

impl Observer for Quiet {
    fn on_interval(&mut self, _snapshot: &IntervalSnapshot) {}
}

/// An observer that keeps every snapshot (bounded by run seconds; for tests and compare).
#[derive(Debug, Default)]
pub struct Recording {
    /// Snapshots received, in order.
    pub snapshots: Vec<IntervalSnapshot>,
}

impl Observer for Recording {
    fn on_interval(&mut self, snapshot: &IntervalSnapshot) {
        self.snapshots.push(snapshot.clone());
    }
}
