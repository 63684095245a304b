//! HTTP/3 as far as the stack lets a client see it: the load generator's h3 tap reports stream
//! opens, frame headers (type and length: QPACK-encoded size for HEADERS) and FINs, and quinn
//! the connection's close. Frame payloads, QPACK field values and QUIC packets are not shown.
//!
//! Also what the runner needs to treat h3 like h2: which request opened which stream (so a
//! request still waiting for a stream when a GOAWAY arrives is never sent), the GOAWAY id as it
//! arrives, and a clean close that is known to have left.

use super::event::{Direction, EventKind};
use super::recorder::Recorder;
use crate::protocol::h3::{FrameEvent, H3TapObserver};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What `httpvs trace -p h3` cannot show, said once at the top of the trace.
pub const NOT_VISIBLE: &str =
    "h3: QUIC packets, ACKs, flow control, our control/QPACK streams and \
SETTINGS values are inside quinn/h3 and not shown; header field values are QPACK-encoded and \
not decoded (sizes only); HEADERS/DATA frames are shown by type and length";

/// What `--body` can show for h3, said once when it is given.
pub const BODY_NOT_VISIBLE: &str = "h3 --body: the request body is shown with its DATA frame; \
response DATA payloads stay inside the h3 client, so only their lengths are shown";

/// H3_NO_ERROR (RFC 9114 §8.1): the code of a clean close.
pub const H3_NO_ERROR: u32 = 0x100;

tokio::task_local! {
    /// The request whose send future is being polled: h3 opens a request stream inside that
    /// poll, so the tap's `stream_opened` call can say which request the stream carries.
    static REQUEST: u32;
}

/// Runs `send` as request `n`: streams it opens are attributed to `n`.
pub async fn as_request<F: std::future::Future>(n: u32, send: F) -> F::Output {
    REQUEST.scope(n, send).await
}

/// Records one traced HTTP/3 connection.
#[derive(Debug)]
pub struct H3Streams {
    recorder: Recorder,
    /// `--body`: the request body, shown with the DATA frame that carries it.
    request_body: Option<String>,
    quic: Mutex<Option<quinn::Connection>>,
    /// Which request opened which stream.
    opened: Mutex<HashMap<u32, u64>>,
    /// The lowest GOAWAY id received (RFC 9114 §5.2: a later one may only lower it).
    goaway: tokio::sync::watch::Sender<Option<u64>>,
    /// A GOAWAY frame's header (stream, sent, length) whose id has not come yet: shown with
    /// the id as one event, as h2's GOAWAY is (it showed as two GOAWAYs).
    goaway_header: Mutex<Option<(u64, bool, u64)>>,
}

impl H3Streams {
    /// An observer recording into `recorder`; `request_body` is shown with sent DATA frames.
    pub fn new(recorder: Recorder, request_body: Option<String>) -> H3Streams {
        H3Streams {
            recorder,
            request_body,
            quic: Mutex::new(None),
            opened: Mutex::new(HashMap::new()),
            goaway: tokio::sync::watch::Sender::new(None),
            goaway_header: Mutex::new(None),
        }
    }

    /// The QUIC connection, once h3 started on it.
    pub fn quic(&self) -> Option<quinn::Connection> {
        self.quic.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The stream request `n` opened, if it opened one.
    pub fn stream_of(&self, n: u32) -> Option<u64> {
        self.opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&n)
            .copied()
    }

    /// The server's GOAWAY id, once one arrived.
    pub fn goaway_id(&self) -> Option<u64> {
        *self.goaway.borrow()
    }

    /// Resolves with the GOAWAY id once the server sent one (at once if it already did).
    pub async fn goaway(&self) -> u64 {
        let mut rx = self.goaway.subscribe();
        let id = rx.wait_for(Option::is_some).await.ok().and_then(|id| *id);
        match id {
            Some(id) => id,
            // The sender lives as long as `self`: never reached.
            None => std::future::pending().await,
        }
    }
}

fn dir(sent: bool) -> Direction {
    if sent {
        Direction::Send
    } else {
        Direction::Recv
    }
}

impl H3TapObserver for H3Streams {
    fn quic_connected(&self, conn: &quinn::Connection) {
        *self.quic.lock().unwrap_or_else(|p| p.into_inner()) = Some(conn.clone());
    }

    fn stream_opened(&self, stream: u64) {
        if let Ok(n) = REQUEST.try_with(|n| *n) {
            self.opened
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(n, stream);
        }
        self.recorder
            .record(Direction::Local, EventKind::H3StreamOpened { stream });
    }

    fn frame(&self, stream: u64, sent: bool, event: FrameEvent) {
        let kind = match event {
            FrameEvent::Frame { ty, len } => {
                self.flush_goaway_header(stream, sent);
                if ty == FRAME_GOAWAY {
                    *self.goaway_header.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some((stream, sent, len));
                    return;
                }
                EventKind::H3Frame {
                    stream,
                    frame_type: ty,
                    length: len,
                    // A request carries its whole body in one DATA frame.
                    text: (sent && ty == FRAME_DATA)
                        .then_some(self.request_body.as_deref())
                        .flatten()
                        .map(|body| {
                            let room = self.recorder.body_room(body.len());
                            String::from_utf8_lossy(&body.as_bytes()[..room]).into_owned()
                        }),
                }
            }
            FrameEvent::Goaway(id) => {
                self.goaway
                    .send_modify(|g| *g = Some(g.map_or(id, |g| g.min(id))));
                let header = self
                    .goaway_header
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                let length = header.filter(|h| h.0 == stream).map(|h| h.2);
                EventKind::H3Goaway { stream, id, length }
            }
        };
        self.recorder.record(dir(sent), kind);
    }

    fn stream_finished(&self, stream: u64, sent: bool) {
        self.flush_goaway_header(stream, sent);
        self.recorder
            .record(dir(sent), EventKind::H3StreamFinished { stream });
    }
}

impl H3Streams {
    /// Shows a GOAWAY frame header held for its id as a plain frame when the stream goes on
    /// without the id (a malformed GOAWAY): nothing the server sent goes unshown.
    fn flush_goaway_header(&self, stream: u64, sent: bool) {
        let mut held = self.goaway_header.lock().unwrap_or_else(|p| p.into_inner());
        let Some((s, was_sent, length)) = *held else {
            return;
        };
        if (s, was_sent) != (stream, sent) {
            return;
        }
        *held = None;
        drop(held);
        let kind = EventKind::H3Frame {
            stream,
            frame_type: FRAME_GOAWAY,
            length,
            text: None,
        };
        self.recorder.record(dir(sent), kind);
    }
}

/// The DATA frame type (RFC 9114 §7.2.1).
const FRAME_DATA: u64 = 0x0;

/// The GOAWAY frame type (RFC 9114 §7.2.6).
const FRAME_GOAWAY: u64 = 0x7;

/// How the trace's own close of an h3 connection went.
#[derive(Debug)]
pub enum CloseOutcome {
    /// Our CONNECTION_CLOSE (H3_NO_ERROR) left in a datagram.
    Sent,
    /// It did not leave within the bound.
    NotSent,
    /// The connection had already closed, so there was nothing to send.
    AlreadyClosed(quinn::ConnectionError),
}

/// Closes `quic` with H3_NO_ERROR and waits, at most `bound`, until the packet carrying the
/// CONNECTION_CLOSE has left, so the server sees a close rather than an idle timeout.
pub async fn close_cleanly(quic: &quinn::Connection, bound: Duration) -> CloseOutcome {
    if let Some(reason) = quic.close_reason() {
        return CloseOutcome::AlreadyClosed(reason);
    }
    // Once closed, quinn sends nothing but the close: the next datagram out carries it.
    let before = quic.stats().udp_tx.datagrams;
    quic.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
    let deadline = Instant::now() + bound;
    while quic.stats().udp_tx.datagrams == before {
        if Instant::now() >= deadline {
            return CloseOutcome::NotSent;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    CloseOutcome::Sent
}

/// The event for how the connection closed.
pub fn closed_event(outcome: &CloseOutcome, bound: Duration) -> (Direction, EventKind) {
    match outcome {
        CloseOutcome::Sent => (
            Direction::Send,
            EventKind::QuicClosed {
                reason: "closed by us with H3_NO_ERROR (0x100)".into(),
                code: Some(u64::from(H3_NO_ERROR)),
            },
        ),
        CloseOutcome::NotSent => (
            Direction::Local,
            EventKind::QuicClosed {
                reason: format!(
                    "closed by us with H3_NO_ERROR (0x100), but the CONNECTION_CLOSE did not \
                     leave within {bound:?}: the server will see an idle timeout"
                ),
                code: Some(u64::from(H3_NO_ERROR)),
            },
        ),
        CloseOutcome::AlreadyClosed(reason) => close_event(reason),
    }
}

/// The close event for a quinn connection error.
pub fn close_event(error: &quinn::ConnectionError) -> (Direction, EventKind) {
    use quinn::ConnectionError as E;
    let (dir, code) = match error {
        E::ApplicationClosed(c) => (Direction::Recv, Some(c.error_code.into_inner())),
        E::ConnectionClosed(c) => (Direction::Recv, Some(u64::from(c.error_code))),
        E::LocallyClosed => (Direction::Send, None),
        _ => (Direction::Local, None),
    };
    let reason = match error {
        E::ApplicationClosed(c) => format!(
            "closed by the server: {} ({})",
            crate::error::h3_code_name(c.error_code.into_inner()),
            String::from_utf8_lossy(&c.reason)
        ),
        // Before the trace's own close: the h3 client closed it (its code is not visible).
        E::LocallyClosed => "closed by the h3 client".to_string(),
        other => other.to_string(),
    };
    (dir, EventKind::QuicClosed { reason, code })
}
