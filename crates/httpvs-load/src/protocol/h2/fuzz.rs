//! Fuzzing entry for the owned HTTP/2 client core: a server's frames, as a hostile peer sends them.

use super::conn_core::{ConnCore, ConnError, MAX_FRAME};
use super::frame_tap::{kind, FrameHeader};
use super::frame_write::code;
use crate::protocol::window::H2Windows;
use crate::protocol::wire::WireCounter;
use crate::protocol::{CloseCause, RequestSpec};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Streams the core is asked to open over one input (some with a body, for flow control).
const REQUESTS: usize = 12;

/// Feeds `data` to a client core, as the driver does, after the server's empty SETTINGS:
/// whole frames in turn, with streams opened as earlier ones end. Then ends the connection.
/// Panics only if a stream is left without an outcome once the connection has ended.
pub fn client(data: &[u8]) {
    let requests = [request(b""), request(b"hello, body")];
    let mut core = ConnCore::new(WireCounter::new_shared(), H2Windows::default());
    let now = Instant::now();
    let settings = header(0, kind::SETTINGS, 0);
    if core.on_frame(&settings, &[], now).is_err() {
        return;
    }
    let mut cx = Context::from_waker(Waker::noop());
    let mut open = Vec::new();
    let mut opened = 0;
    let mut rest = data;
    loop {
        while opened < REQUESTS && open.len() < 3 {
            match core.poll_open(&requests[opened % 2], now, &mut cx) {
                Poll::Ready(Ok(slot)) => open.push(slot),
                Poll::Ready(Err(_)) | Poll::Pending => break,
            }
            opened += 1;
        }
        open.retain(|&slot| core.poll_outcome(slot, &mut cx).is_pending());
        core.take_out(&mut Vec::new());
        if core.ended() || rest.len() < 9 {
            break;
        }
        let mut nine = [0u8; 9];
        nine.copy_from_slice(&rest[..9]);
        let h = FrameHeader::parse(&nine);
        let len = h.length as usize;
        if len > MAX_FRAME {
            core.fail(ConnError(code::FRAME_SIZE_ERROR));
            break;
        }
        let Some(payload) = rest.get(9..9 + len) else {
            break;
        };
        rest = &rest[9 + len..];
        if let Err(error) = core.on_frame(&h, payload, now) {
            core.fail(error);
        }
    }
    core.end(CloseCause::Fin, None);
    for slot in open {
        assert!(
            core.poll_outcome(slot, &mut cx).is_ready(),
            "a stream has no outcome after the connection ended"
        );
    }
}

fn header(length: u32, kind: u8, stream_id: u32) -> FrameHeader {
    FrameHeader {
        length,
        kind,
        flags: 0,
        stream_id,
    }
}

fn request(body: &'static [u8]) -> RequestSpec {
    RequestSpec {
        method: http::Method::POST,
        uri: http::Uri::from_static("http://127.0.0.1:1/fuzz"),
        headers: vec![],
        body: bytes::Bytes::from_static(body),
    }
}
