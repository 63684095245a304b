//! What to record: per-worker HDR histograms and counters, merged once a second and at the end.
//!
//! Nothing here knows when requests are sent (schedule) or how they are shown (report).

pub mod counters;
pub mod histogram;
pub mod request_log;
pub mod snapshot;
pub mod worker;

pub use histogram::LatencyHistogram;
pub use request_log::{RequestLog, RequestLogOutcome};
pub use snapshot::{IntervalSnapshot, Observer, Quiet, Recording};
pub use worker::{IntervalStats, RequestTimings, WorkerRecorder, WorkerStats};
