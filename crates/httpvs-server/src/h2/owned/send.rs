//! Responses of the owned HTTP/2 server: the head HPACK-encoded without the dynamic table (so the
//! peer's table size never matters), the body as DATA frames within both send windows and the
//! peer's frame size, and what does not fit yet kept on the stream until WINDOW_UPDATE.

use super::core::ServerCore;
use crate::body::{Body, FIXED_BODY};
use httpvs_h2wire::frame as write;
use httpvs_h2wire::hpack::encoder;

/// Past this many queued bytes, bodies wait for the next turn (after a write).
pub const OUT_HIGH_WATER: usize = 256 * 1024;

/// Static-table indexes of `:status` values (RFC 7541 Appendix A).
fn status_index(status: u16) -> Option<usize> {
    Some(match status {
        200 => 8,
        204 => 9,
        206 => 10,
        304 => 11,
        400 => 12,
        404 => 13,
        500 => 14,
        _ => return None,
    })
}

/// Encodes the header block of `GET /`'s fixed answer (200, text/plain, content-length 18,
/// `date`) into `block`, reusing its capacity.
pub fn fixed_block(date: &[u8], block: &mut Vec<u8>) {
    block.clear();
    encode_head(
        200,
        [
            (&b"content-type"[..], &b"text/plain"[..]),
            (b"content-length", FIXED_LEN.as_bytes()),
            (b"date", date),
        ]
        .into_iter(),
        block,
    );
}

const FIXED_LEN: &str = "18";

/// Encodes `:status` and `fields` as one header block.
pub fn encode_head<'a>(
    status: u16,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut Vec<u8>,
) {
    match status_index(status) {
        Some(index) => encoder::integer(index, 7, 0x80, out),
        None => encoder::literal(b":status", status.to_string().as_bytes(), 4, 0x00, out),
    }
    for (name, value) in fields {
        encoder::literal(name, value, 4, 0x00, out);
    }
}

impl ServerCore {
    /// Queues a response: `block` is its encoded head; the body (dropped for HEAD) follows as
    /// window allows. A stream that is gone (reset) takes nothing.
    pub fn respond(&mut self, id: u32, block: &[u8], body: Body, head_only: bool) {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if stream.send_closed {
            return;
        }
        let end = head_only || body.is_empty();
        write::headers(&mut self.out, id, block, end, max_frame);
        if end {
            stream.send_closed = true;
            self.retire_if_done(id);
            return;
        }
        stream.body = Some(body);
        self.pump_stream(id);
    }

    /// The fixed answer to `GET /` (the hot path: no allocation, one head block reused).
    pub fn respond_fixed(&mut self, id: u32, block: &[u8]) {
        let len = FIXED_BODY.len() as i64;
        let fits = self.send_window >= len
            && self
                .streams
                .get(&id)
                .is_some_and(|s| s.send_window >= len && !s.send_closed);
        if !fits {
            return self.respond(id, block, Body::fixed(), false);
        }
        write::headers(&mut self.out, id, block, false, self.peer_max_frame);
        write::data(&mut self.out, id, FIXED_BODY, true);
        self.send_window -= len;
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.send_window -= len;
            stream.send_closed = true;
        }
        self.retire_if_done(id);
    }

    /// Sends what the windows allow of every waiting body, until `out` is full enough.
    pub fn pump(&mut self) {
        let mut turns = self.blocked.len();
        while turns > 0 && self.out.len() < OUT_HIGH_WATER && self.send_window > 0 {
            turns -= 1;
            let Some(id) = self.blocked.pop_front() else {
                break;
            };
            self.pump_stream(id);
        }
    }

    /// Whether a body could be sent now (windows open, room in `out`).
    pub fn wants_pump(&self) -> bool {
        !self.blocked.is_empty() && self.send_window > 0 && self.out.len() < OUT_HIGH_WATER
    }

    fn pump_stream(&mut self, id: u32) {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let Some(body) = stream.body.as_mut() else {
            return;
        };
        while !body.is_empty() && self.out.len() < OUT_HIGH_WATER {
            let window = self.send_window.min(stream.send_window);
            if window <= 0 {
                break;
            }
            let max = (window as usize).min(max_frame);
            let Some(chunk) = body.next_chunk(max) else {
                break;
            };
            let end = body.is_empty();
            write::data(&mut self.out, id, &chunk, end);
            self.send_window -= chunk.len() as i64;
            stream.send_window -= chunk.len() as i64;
        }
        if body.is_empty() {
            stream.body = None;
            stream.send_closed = true;
            self.retire_if_done(id);
        } else if !self.blocked.contains(&id) {
            self.blocked.push_back(id);
        }
    }
}
