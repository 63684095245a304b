//! Everything one worker records: the run totals and the current one-second interval.
//!
//! A worker owns its `WorkerStats` outright (no locks): it records each outcome with a few
//! counter bumps and histogram increments, and hands the interval part over once a second.

use super::counters::{
    ConnectionCounts, ErrorCounts, QuicTotals, RequestCounts, RetryCounts, StatusCounts, WireTotals,
};
use super::histogram::LatencyHistogram;
use crate::error::ErrorKind;
use crate::protocol::{ConnectInfo, ResponseInfo, RetryReason};
use std::time::Duration;

/// A send is "late" when it left this long after its intended time (open model).
pub const LATE_AFTER: Duration = Duration::from_millis(1);

/// The run totals of one worker, merged across workers at the end.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    /// Requests by outcome.
    pub requests: RequestCounts,
    /// Resends on a new connection.
    pub retries: RetryCounts,
    /// Latency: from the intended send time (open model) or the dispatch (closed model).
    pub latency: LatencyHistogram,
    /// Open model: latency from the actual send, as tools without correction report it.
    pub latency_uncorrected: LatencyHistogram,
    /// Send start to the first response byte.
    pub ttfb: LatencyHistogram,
    /// First response byte to the last.
    pub body: LatencyHistogram,
    /// TCP connect per connection.
    pub tcp_connect: LatencyHistogram,
    /// TLS or QUIC handshake per connection.
    pub handshake: LatencyHistogram,
    /// Open model: how long after its intended time each request was dispatched.
    pub send_lag: LatencyHistogram,
    /// Open model: sends later than [`LATE_AFTER`].
    pub late_sends: u64,
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
    /// From the first actual send (equals `latency` in the closed model).
    pub latency_uncorrected: Duration,
    /// Send start to the end of the response, as the protocol timed the last attempt.
    pub exchange: Duration,
}

/// The totals and the current interval of one worker.
#[derive(Debug, Default)]
pub struct WorkerRecorder {
    /// Run totals.
    pub total: WorkerStats,
    /// The interval being filled.
    pub interval: IntervalStats,
}

impl WorkerRecorder {
    /// A request left the schedule.
    pub fn started(&mut self) {
        self.total.requests.started += 1;
        self.interval.requests.started += 1;
    }

    /// A request got its whole response.
    pub fn succeeded(&mut self, t: RequestTimings, r: &ResponseInfo) {
        self.total.requests.succeeded += 1;
        self.interval.requests.succeeded += 1;
        self.total.latency.record(t.latency);
        self.total.latency_uncorrected.record(t.latency_uncorrected);
        self.interval.latency.record(t.latency);
        self.total.ttfb.record(r.ttfb);
        self.total.body.record(t.exchange.saturating_sub(r.ttfb));
        self.total.status.count(r.status);
        self.total.wire.header_decoded_received += r.header_bytes;
        self.total.wire.body_received += r.body_bytes;
        self.interval.body_bytes += r.body_bytes;
    }

    /// A request failed.
    pub fn failed(&mut self, kind: ErrorKind) {
        self.total.requests.failed += 1;
        self.interval.requests.failed += 1;
        self.total.errors.count(kind);
    }

    /// A request was still in flight when the run ended.
    pub fn cut_off(&mut self) {
        self.total.requests.cut_off += 1;
        self.interval.requests.cut_off += 1;
    }

    /// A request goes again on a new connection.
    pub fn retried(&mut self, reason: RetryReason) {
        self.total.retries.count(reason);
    }

    /// Open model: a request was dispatched `lag` after its intended time.
    pub fn send_lag(&mut self, lag: Duration) {
        self.total.send_lag.record(lag);
        if lag > LATE_AFTER {
            self.total.late_sends += 1;
        }
    }

    /// A connection opened.
    pub fn connection_opened(&mut self, info: &ConnectInfo) {
        self.total.connections.opened += 1;
        self.interval.connections_opened += 1;
        // Zero for QUIC, which has no TCP connect: its row would read 0µs.
        if !info.tcp_connect.is_zero() {
            self.total.tcp_connect.record(info.tcp_connect);
        }
        if !info.handshake.is_zero() {
            self.total.handshake.record(info.handshake);
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
        self.latency.merge(&o.latency);
        self.latency_uncorrected.merge(&o.latency_uncorrected);
        self.ttfb.merge(&o.ttfb);
        self.body.merge(&o.body);
        self.tcp_connect.merge(&o.tcp_connect);
        self.handshake.merge(&o.handshake);
        self.send_lag.merge(&o.send_lag);
        self.late_sends += o.late_sends;
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
        let mut r = WorkerRecorder::default();
        let t = RequestTimings {
            latency: Duration::from_micros(100),
            latency_uncorrected: Duration::from_micros(100),
            exchange: Duration::from_micros(90),
        };
        r.started();
        r.succeeded(t, &ok());
        r.started();
        r.failed(ErrorKind::Reset);
        let first = r.interval.take();
        assert_eq!(first.requests.succeeded, 1);
        assert_eq!(first.latency.len(), 1);
        r.started();
        r.cut_off();
        assert_eq!(r.interval.requests.cut_off, 1);
        assert!(r.interval.latency.is_empty());
        assert!(r.total.requests.identity_holds());
        assert_eq!(r.total.wire.body_received, 100);
    }
}
