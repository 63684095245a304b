//! HTTP/3 as far as the stack lets a client see it: the load generator's h3 tap reports stream
//! opens, frame headers (type and length: QPACK-encoded size for HEADERS) and FINs, and quinn
//! the connection's close. Frame payloads, QPACK field values and QUIC packets are not shown.

use super::event::{Direction, EventKind};
use super::recorder::Recorder;
use crate::protocol::h3::{FrameEvent, H3TapObserver};
use std::sync::Mutex;

/// What `httpvs trace -p h3` cannot show, said once at the top of the trace.
pub const NOT_VISIBLE: &str =
    "h3: QUIC packets, ACKs, flow control, our control/QPACK streams and \
SETTINGS values are inside quinn/h3 and not shown; header field values are QPACK-encoded and \
not decoded (sizes only); HEADERS/DATA frames are shown by type and length";

/// Records one traced HTTP/3 connection.
#[derive(Debug)]
pub struct H3Streams {
    recorder: Recorder,
    quic: Mutex<Option<quinn::Connection>>,
}

impl H3Streams {
    /// An observer recording into `recorder`.
    pub fn new(recorder: Recorder) -> H3Streams {
        H3Streams {
            recorder,
            quic: Mutex::new(None),
        }
    }

    /// The QUIC connection, once h3 started on it.
    pub fn quic(&self) -> Option<quinn::Connection> {
        self.quic.lock().unwrap_or_else(|p| p.into_inner()).clone()
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
        self.recorder
            .record(Direction::Local, EventKind::H3StreamOpened { stream });
    }

    fn frame(&self, stream: u64, sent: bool, event: FrameEvent) {
        let kind = match event {
            FrameEvent::Frame { ty, len } => EventKind::H3Frame {
                stream,
                frame_type: ty,
                length: len,
            },
            FrameEvent::Goaway(id) => EventKind::H3Goaway { stream, id },
        };
        self.recorder.record(dir(sent), kind);
    }

    fn stream_finished(&self, stream: u64, sent: bool) {
        self.recorder
            .record(dir(sent), EventKind::H3StreamFinished { stream });
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
        // H3Connection::close always uses H3_NO_ERROR.
        E::LocallyClosed => "closed by us with H3_NO_ERROR (0x100)".to_string(),
        other => other.to_string(),
    };
    (dir, EventKind::QuicClosed { reason, code })
}
