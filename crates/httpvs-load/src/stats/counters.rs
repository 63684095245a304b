//! Plain counters one worker keeps: requests, retries, status codes, errors, connections, wire and QUIC totals.

use crate::error::ErrorKind;
use crate::protocol::{CloseCause, QuicStats, RetryReason, WireBytes};
use std::collections::BTreeMap;

/// Requests by outcome. The identity `started = succeeded + failed + cut_off` holds at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Requests the schedule released (retries are not new requests).
    pub started: u64,
    /// Requests that got a complete response, whatever its status.
    pub succeeded: u64,
    /// Requests that got no complete response (counted by kind in [`ErrorCounts`]).
    pub failed: u64,
    /// Requests still in flight when the run ended.
    pub cut_off: u64,
}

impl RequestCounts {
    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &RequestCounts) {
        self.started += o.started;
        self.succeeded += o.succeeded;
        self.failed += o.failed;
        self.cut_off += o.cut_off;
    }

    /// Whether started = succeeded + failed + cut off.
    pub fn identity_holds(&self) -> bool {
        self.started == self.succeeded + self.failed + self.cut_off
    }
}

/// Requests released during the warm-up (so outside [`RequestCounts`]) that outlived it: they
/// ended during the measured part, or were still in flight when the run ended. A server slow
/// enough to hold every stream past the warm-up would otherwise leave a report of zeros.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WarmupOverrun {
    /// Ended (a response or a failure) after the measured part began.
    pub finished: u64,
    /// Still in flight when the run ended.
    pub cut_off: u64,
}

impl WarmupOverrun {
    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &WarmupOverrun) {
        self.finished += o.finished;
        self.cut_off += o.cut_off;
    }
}

/// Requests sent again on a new connection because the server never processed them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryCounts {
    /// Above a GOAWAY's last-stream-id.
    pub goaway: u64,
    /// REFUSED_STREAM / H3_REQUEST_REJECTED.
    pub refused: u64,
    /// h1 connection closed before the response began.
    pub connection_closed: u64,
    /// h1: pipelined behind a request that timed out, on the connection closed for it.
    pub behind_timeout: u64,
}

impl RetryCounts {
    /// Counts one retry.
    pub fn count(&mut self, reason: RetryReason) {
        match reason {
            RetryReason::Goaway(_) => self.goaway += 1,
            RetryReason::Refused | RetryReason::Rejected | RetryReason::EarlyRejected => {
                self.refused += 1
            }
            RetryReason::ConnectionClosed => self.connection_closed += 1,
            RetryReason::BehindTimeout => self.behind_timeout += 1,
        }
    }

    /// All retries.
    pub fn total(&self) -> u64 {
        self.goaway + self.refused + self.connection_closed + self.behind_timeout
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &RetryCounts) {
        self.goaway += o.goaway;
        self.refused += o.refused;
        self.connection_closed += o.connection_closed;
        self.behind_timeout += o.behind_timeout;
    }
}

/// Responses by status code (100..=999), in a table allocated once.
#[derive(Debug, Clone)]
pub struct StatusCounts {
    counts: Vec<u64>,
}

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts {
            counts: vec![0; 1000],
        }
    }
}

impl StatusCounts {
    /// Counts one response.
    pub fn count(&mut self, status: u16) {
        let i = usize::from(status).min(999);
        self.counts[i] += 1;
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &StatusCounts) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }

    /// (code, count) for every code seen, ascending.
    pub fn seen(&self) -> Vec<(u16, u64)> {
        (0u16..)
            .zip(&self.counts)
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code, n))
            .collect()
    }
}

/// Failed requests by error kind (a map that only allocates when a new kind first appears).
///
/// A peer picks the codes of RST_STREAM, GOAWAY and QUIC/HTTP/3 closes, so a hostile one could
/// make every failure a kind of its own; past [`MAX_ERROR_KINDS`] kinds a new coded kind is
/// counted under its family's `other` (`rst_stream(other)`), and memory stays flat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    /// Count per kind.
    pub by_kind: BTreeMap<ErrorKind, u64>,
}

/// Distinct error kinds kept apart before new coded ones share their family's `other`.
pub const MAX_ERROR_KINDS: usize = 64;

impl ErrorCounts {
    /// Counts one failure.
    pub fn count(&mut self, kind: ErrorKind) {
        self.add(kind, 1);
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &ErrorCounts) {
        for (k, n) in &o.by_kind {
            self.add(*k, *n);
        }
    }

    fn add(&mut self, kind: ErrorKind, n: u64) {
        let kind = if self.by_kind.len() >= MAX_ERROR_KINDS && !self.by_kind.contains_key(&kind) {
            kind.other_code()
        } else {
            kind
        };
        *self.by_kind.entry(kind).or_insert(0) += n;
    }
}

/// What happened to connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionCounts {
    /// Connections opened successfully during measurement.
    pub opened: u64,
    /// Connection attempts that failed.
    pub failed_to_open: u64,
    /// Requests sent on a connection that had already carried one.
    pub reused_requests: u64,
    /// Server sent GOAWAY.
    pub closed_goaway: u64,
    /// Of those, GOAWAYs with an error code (not NO_ERROR): the server failing.
    pub closed_goaway_error: u64,
    /// Of the server's closes, those of idle connections (between requests: an idle timeout).
    pub closed_idle: u64,
    /// Of our closes, those after the server sent bytes no request asked for (h1).
    pub closed_unasked: u64,
    /// Server sent `Connection: close`.
    pub closed_connection_close: u64,
    /// Server closed the transport (FIN, or QUIC close without error).
    pub closed_fin: u64,
    /// Connection reset by the server, or an I/O error.
    pub closed_reset: u64,
    /// Closed by us (no keep-alive, end of run, or the server broke the protocol).
    pub closed_local: u64,
    /// Connections retired (the denominator of requests per connection).
    pub retired: u64,
    /// Fewest requests one connection carried.
    pub requests_min: u64,
    /// Most requests one connection carried.
    pub requests_max: u64,
    /// Requests carried by retired connections.
    pub requests_sum: u64,
    /// Requests carried by the connections the server closed (for "about every N requests").
    pub requests_sum_server_closed: u64,
    /// The lowest concurrent-stream limit a server announced.
    pub server_max_streams: Option<u32>,
}

impl ConnectionCounts {
    /// Counts a connection leaving service: why, and how many requests it carried.
    pub fn retire(&mut self, cause: CloseCause, requests: u64) {
        match cause {
            CloseCause::Goaway => self.closed_goaway += 1,
            CloseCause::ConnectionClose => self.closed_connection_close += 1,
            CloseCause::Fin => self.closed_fin += 1,
            CloseCause::Reset => self.closed_reset += 1,
            CloseCause::Local | CloseCause::Open => self.closed_local += 1,
        }
        if !matches!(cause, CloseCause::Local | CloseCause::Open) {
            self.requests_sum_server_closed += requests;
        }
        self.requests_min = if self.retired == 0 {
            requests
        } else {
            self.requests_min.min(requests)
        };
        self.requests_max = self.requests_max.max(requests);
        self.requests_sum += requests;
        self.retired += 1;
    }

    /// Connections the server ended (GOAWAY, close, FIN, reset).
    pub fn closed_by_server(&self) -> u64 {
        self.closed_goaway + self.closed_connection_close + self.closed_fin + self.closed_reset
    }

    /// Notes a server's stream limit, keeping the lowest.
    pub fn note_server_max_streams(&mut self, limit: Option<u32>) {
        if let Some(l) = limit {
            self.server_max_streams = Some(self.server_max_streams.map_or(l, |m| m.min(l)));
        }
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &ConnectionCounts) {
        self.opened += o.opened;
        self.failed_to_open += o.failed_to_open;
        self.reused_requests += o.reused_requests;
        self.closed_goaway += o.closed_goaway;
        self.closed_goaway_error += o.closed_goaway_error;
        self.closed_idle += o.closed_idle;
        self.closed_unasked += o.closed_unasked;
        self.closed_connection_close += o.closed_connection_close;
        self.closed_fin += o.closed_fin;
        self.closed_reset += o.closed_reset;
        self.closed_local += o.closed_local;
        if o.retired > 0 {
            self.requests_min = if self.retired == 0 {
                o.requests_min
            } else {
                self.requests_min.min(o.requests_min)
            };
        }
        self.requests_max = self.requests_max.max(o.requests_max);
        self.requests_sum += o.requests_sum;
        self.requests_sum_server_closed += o.requests_sum_server_closed;
        self.retired += o.retired;
        self.note_server_max_streams(o.server_max_streams);
    }
}

/// Wire bytes summed over connections, plus decoded header and body bytes from responses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireTotals {
    /// Sum of every connection's counters.
    pub wire: WireBytes,
    /// Decoded response header bytes (names + values).
    pub header_decoded_received: u64,
    /// Response body bytes.
    pub body_received: u64,
}

impl WireTotals {
    /// Adds one connection's counters.
    pub fn add_wire(&mut self, w: &WireBytes) {
        self.wire.sent += w.sent;
        self.wire.received += w.received;
        self.wire.header_sent += w.header_sent;
        self.wire.header_received += w.header_received;
        self.wire.header_decoded_received += w.header_decoded_received;
        self.wire.datagrams_sent += w.datagrams_sent;
        self.wire.datagrams_received += w.datagrams_received;
    }

    /// Adds another worker's totals.
    pub fn merge(&mut self, o: &WireTotals) {
        self.add_wire(&o.wire);
        self.header_decoded_received += o.header_decoded_received;
        self.body_received += o.body_received;
    }
}

/// QUIC statistics summed over connections (h3 only).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuicTotals {
    /// Connections that reported QUIC statistics.
    pub connections: u64,
    /// Sums of the per-connection counters.
    pub sum: QuicStats,
    /// Sum of smoothed RTTs in µs (divided by `connections` for the mean).
    pub smoothed_rtt_us_sum: u64,
    /// Lowest minimum RTT seen, µs.
    pub min_rtt_us: Option<u64>,
    /// Sum of final congestion windows (divided by `connections` for the mean).
    pub cwnd_sum: u64,
}

impl QuicTotals {
    /// Adds one connection's statistics.
    pub fn add(&mut self, q: &QuicStats) {
        self.connections += 1;
        self.sum.datagrams_sent += q.datagrams_sent;
        self.sum.datagrams_received += q.datagrams_received;
        self.sum.udp_bytes_sent += q.udp_bytes_sent;
        self.sum.udp_bytes_received += q.udp_bytes_received;
        self.sum.packets_lost += q.packets_lost;
        self.sum.retransmits += q.retransmits;
        self.sum.early_requests += q.early_requests;
        self.sum.early_rejected += q.early_rejected;
        self.smoothed_rtt_us_sum += q.smoothed_rtt.as_micros() as u64;
        let min = q.min_rtt.as_micros() as u64;
        self.min_rtt_us = Some(self.min_rtt_us.map_or(min, |m| m.min(min)));
        self.cwnd_sum += q.cwnd;
    }

    /// Adds another worker's totals.
    pub fn merge(&mut self, o: &QuicTotals) {
        self.connections += o.connections;
        self.sum.datagrams_sent += o.sum.datagrams_sent;
        self.sum.datagrams_received += o.sum.datagrams_received;
        self.sum.udp_bytes_sent += o.sum.udp_bytes_sent;
        self.sum.udp_bytes_received += o.sum.udp_bytes_received;
        self.sum.packets_lost += o.sum.packets_lost;
        self.sum.retransmits += o.sum.retransmits;
        self.sum.early_requests += o.sum.early_requests;
        self.sum.early_rejected += o.sum.early_rejected;
        self.smoothed_rtt_us_sum += o.smoothed_rtt_us_sum;
        if let Some(m) = o.min_rtt_us {
            self.min_rtt_us = Some(self.min_rtt_us.map_or(m, |x| x.min(m)));
        }
        self.cwnd_sum += o.cwnd_sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that resets every stream with a code of its own (3.6M kinds in a 40 s run, RSS
    /// at 150 MB and climbing) fills at most MAX_ERROR_KINDS entries; later codes share
    /// `rst_stream(other)`, known ones keep counting apart, and merging stays bounded.
    #[test]
    fn error_kinds_a_peer_chooses_are_bounded() {
        let mut a = ErrorCounts::default();
        a.count(ErrorKind::Reset);
        for code in 0..10_000u64 {
            a.count(ErrorKind::StreamReset(code));
        }
        a.count(ErrorKind::Reset);
        a.count(ErrorKind::Protocol);
        assert_eq!(
            a.by_kind.len(),
            MAX_ERROR_KINDS + 2,
            "{:?}",
            a.by_kind.keys()
        );
        assert_eq!(a.by_kind[&ErrorKind::Reset], 2);
        assert_eq!(a.by_kind[&ErrorKind::Protocol], 1);
        let other = ErrorKind::StreamReset(crate::error::OTHER_CODE);
        assert_eq!(other.name(), "rst_stream(other)");
        assert_eq!(a.by_kind[&other], 10_000 - (MAX_ERROR_KINDS as u64 - 1));
        assert_eq!(a.by_kind.values().sum::<u64>(), 10_003);
        let mut b = ErrorCounts::default();
        for code in 20_000..20_100u64 {
            b.count(ErrorKind::Goaway(code));
            b.count(ErrorKind::QuicTransport(code));
        }
        a.merge(&b);
        assert!(
            a.by_kind.len() <= MAX_ERROR_KINDS + 5,
            "{}",
            a.by_kind.len()
        );
        assert_eq!(a.by_kind.values().sum::<u64>(), 10_203);
        assert_eq!(
            ErrorKind::Goaway(crate::error::OTHER_CODE).name(),
            "goaway(other)"
        );
        assert_eq!(
            ErrorKind::QuicTransport(crate::error::OTHER_CODE).name(),
            "quic_transport(other)"
        );
    }

    #[test]
    fn requests_per_connection_merge_keeps_min_mean_max() {
        let mut a = ConnectionCounts::default();
        a.retire(CloseCause::Goaway, 100);
        a.retire(CloseCause::Goaway, 40);
        let mut b = ConnectionCounts::default();
        b.retire(CloseCause::Local, 7);
        let empty = ConnectionCounts::default();
        a.merge(&empty);
        a.merge(&b);
        assert_eq!(
            (a.requests_min, a.requests_max, a.requests_sum),
            (7, 100, 147)
        );
        assert_eq!(a.retired, 3);
        assert_eq!(a.closed_by_server(), 2);
    }

    #[test]
    fn statuses_and_errors_count() {
        let mut s = StatusCounts::default();
        s.count(200);
        s.count(200);
        s.count(503);
        assert_eq!(s.seen(), vec![(200, 2), (503, 1)]);
        let mut e = ErrorCounts::default();
        e.count(ErrorKind::Reset);
        e.count(ErrorKind::StreamReset(7));
        e.count(ErrorKind::Reset);
        assert_eq!(e.by_kind[&ErrorKind::Reset], 2);
    }
}
