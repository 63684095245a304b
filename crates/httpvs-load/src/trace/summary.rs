//! The trace's last line: what became of the requests (answered, by status; failed once sent;
//! never sent), streams opened, the most requests in flight at once (as the wire showed them),
//! bytes each way, and what header compression saved.

use super::event::{Direction, EventKind, H2Detail, TraceEvent};
use crate::protocol::h2::frame_tap::kind;
use crate::protocol::{ProtocolKind, WireBytes};
use std::collections::{BTreeMap, HashSet};

/// The numbers of one trace. `requests == succeeded + failed + not_sent` always.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// Requests asked for.
    pub requests: u32,
    /// Whether the connection (with its TLS or QUIC handshake) was established.
    pub connected: bool,
    /// Requests that got a complete response, whatever its status.
    pub succeeded: u32,
    /// Complete responses by status.
    pub statuses: BTreeMap<u16, u32>,
    /// Requests that went on the wire (a head written, a stream opened) but got no complete
    /// response.
    pub failed: u32,
    /// Requests that never went on the wire (no connection, a GOAWAY first, the connection
    /// closed before their turn).
    pub not_sent: u32,
    /// Request streams opened on the wire (h1: request heads written).
    pub streams_opened: u32,
    /// Most requests on the wire at once: opened and not yet answered in full.
    pub max_in_flight: u32,
    /// Bytes written to the socket (TLS records or UDP payloads included).
    pub bytes_sent: u64,
    /// Bytes read from the socket.
    pub bytes_received: u64,
    /// Encoded header bytes (HPACK / QPACK / h1 heads), both ways.
    pub header_encoded: u64,
    /// Decoded header bytes (names + values) of the same blocks; `None` where not visible.
    pub header_decoded: Option<u64>,
}

impl Summary {
    /// Header compression savings in percent, when both sizes are known.
    pub fn header_savings_percent(&self) -> Option<f64> {
        let decoded = self.header_decoded?;
        (decoded > 0).then(|| 100.0 * (1.0 - self.header_encoded as f64 / decoded as f64))
    }
}

/// Computes the summary from the events and the connection's byte counters.
pub fn summarize(
    protocol: ProtocolKind,
    requests: u32,
    events: &[TraceEvent],
    wire: WireBytes,
) -> Summary {
    let mut tally = Tally::default();
    for event in events {
        tally.add(event);
    }
    tally.finish(protocol, requests, wire)
}

/// The summary's counts, taken one event at a time: the recorder keeps one over every event,
/// those it drops from a long trace included, so the last line counts what happened, not what
/// is shown (a 1,000-request trace read 591 answered and 401 not sent).
#[derive(Debug, Clone)]
pub struct Tally {
    s: Summary,
    h2_streams: HashSet<u32>,
    in_flight: u32,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            s: Summary {
                header_decoded: Some(0),
                ..Summary::default()
            },
            h2_streams: HashSet::new(),
            in_flight: 0,
        }
    }
}

impl Tally {
    /// Counts one event (in time order, for the most in flight at once).
    pub fn add(&mut self, event: &TraceEvent) {
        let s = &mut self.s;
        let opened = match &event.kind {
            EventKind::H2Frame(f) => {
                if let H2Detail::Headers(block) = &f.detail {
                    s.header_encoded += block.encoded;
                    s.header_decoded = s.header_decoded.map(|d| d + block.decoded);
                }
                // A request stream opens with the client's first HEADERS on a new id.
                event.dir == Direction::Send
                    && f.frame_type == kind::HEADERS
                    && self.h2_streams.insert(f.stream)
            }
            EventKind::H1Head(head) => {
                s.header_encoded += head.size;
                s.header_decoded = s.header_decoded.map(|d| d + head.size);
                event.dir == Direction::Send
            }
            EventKind::H3Frame {
                frame_type: 0x1,
                length,
                ..
            } => {
                s.header_encoded += length;
                false
            }
            EventKind::H3StreamOpened { .. } => true,
            EventKind::TcpConnected { .. } | EventKind::QuicHandshake { .. } => {
                s.connected = true;
                false
            }
            // Recorded only when the connection could not be opened: TCP may have connected
            // before its TLS handshake or preface failed, but no connection was established.
            EventKind::Error { .. } => {
                s.connected = false;
                false
            }
            EventKind::Response { status, .. } => {
                s.succeeded += 1;
                *s.statuses.entry(*status).or_default() += 1;
                self.in_flight = self.in_flight.saturating_sub(1);
                false
            }
            EventKind::RequestFailed { .. } => {
                self.in_flight = self.in_flight.saturating_sub(1);
                false
            }
            _ => false,
        };
        if opened {
            s.streams_opened += 1;
            self.in_flight += 1;
            s.max_in_flight = s.max_in_flight.max(self.in_flight);
        }
    }

    /// The summary of the events counted, for `requests` asked and the connection's bytes.
    pub fn finish(self, protocol: ProtocolKind, requests: u32, wire: WireBytes) -> Summary {
        let mut s = self.s;
        s.requests = requests;
        s.bytes_sent = wire.sent;
        s.bytes_received = wire.received;
        // Each request opens at most one stream (writes one head), and an answered one did:
        // the requests that reached the wire are the streams opened, and the rest never left.
        let sent = s.streams_opened.max(s.succeeded).min(requests);
        s.failed = sent - s.succeeded.min(sent);
        s.not_sent = requests - sent;
        if protocol == ProtocolKind::H3 {
            // QPACK blocks are not decoded, so the decoded size of both directions is unknown.
            s.header_decoded = None;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::H1Head;
    use std::time::Duration;

    fn at(ms: u64, dir: Direction, kind: EventKind) -> TraceEvent {
        TraceEvent {
            at: Duration::from_millis(ms),
            dir,
            kind,
        }
    }

    fn head(size: u64) -> EventKind {
        EventKind::H1Head(H1Head {
            start_line: "GET / HTTP/1.1".into(),
            fields: vec![],
            size,
            keeps_open: None,
        })
    }

    fn response(n: u32) -> EventKind {
        EventKind::Response {
            request: n,
            status: 200,
            header_bytes: 10,
            body_bytes: 0,
        }
    }

    #[test]
    fn pipelined_requests_count_as_in_flight_together() {
        let events = [
            at(1, Direction::Send, head(40)),
            at(2, Direction::Send, head(40)),
            at(3, Direction::Local, response(1)),
            at(4, Direction::Send, head(40)),
            at(5, Direction::Local, response(2)),
            at(6, Direction::Local, response(3)),
        ];
        let s = summarize(ProtocolKind::H1, 3, &events, WireBytes::default());
        assert_eq!((s.streams_opened, s.max_in_flight, s.succeeded), (3, 2, 3));
        assert_eq!(s.header_encoded, 120);
        assert_eq!(s.header_savings_percent(), Some(0.0));
    }

    fn failed(n: u32) -> EventKind {
        EventKind::RequestFailed {
            request: n,
            error: "reset: the server reset the connection".into(),
        }
    }

    #[test]
    fn counts_add_up_when_the_connection_breaks_mid_way() {
        // Three asked, two heads written, one answered: one failed on the wire, one never left.
        let events = [
            at(
                0,
                Direction::Local,
                EventKind::TcpConnected {
                    addr: "127.0.0.1:1".parse().unwrap(),
                },
            ),
            at(1, Direction::Send, head(40)),
            at(2, Direction::Send, head(40)),
            at(3, Direction::Local, response(1)),
            at(4, Direction::Local, failed(2)),
            at(4, Direction::Local, failed(3)),
        ];
        let s = summarize(ProtocolKind::H1, 3, &events, WireBytes::default());
        assert!(s.connected);
        assert_eq!((s.succeeded, s.failed, s.not_sent), (1, 1, 1));
        assert_eq!(s.statuses.get(&200), Some(&1));
    }

    #[test]
    fn nothing_is_sent_without_a_connection() {
        let s = summarize(ProtocolKind::H2c, 4, &[], WireBytes::default());
        assert!(!s.connected);
        assert_eq!((s.succeeded, s.failed, s.not_sent), (0, 0, 4));
    }
}
