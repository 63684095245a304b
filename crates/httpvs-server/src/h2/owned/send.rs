//! Responses of the owned HTTP/2 server: the head HPACK-encoded with the connection's dynamic
//! table (`response_head.rs`) just as it is queued, the body as DATA frames within both send
//! windows and the peer's frame size, and what does not fit yet kept on the stream until
//! WINDOW_UPDATE.

use super::core::ServerCore;
use crate::body::{Body, FIXED_BODY};
use crate::date::Stamp;
use httpvs_h2wire::frame as write;

/// Past this many queued bytes, bodies wait for the next turn (after a write).
pub const OUT_HIGH_WATER: usize = 256 * 1024;

impl ServerCore {
    /// Queues a response: `:status` and `fields` make its head; the body (dropped for HEAD)
    /// follows as window allows. A stream that is gone (reset) takes nothing, and its head is
    /// not encoded (the client's table would not follow).
    pub fn respond<'a>(
        &mut self,
        id: u32,
        status: u16,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        body: Body,
        head_only: bool,
    ) {
        if !self.may_answer(id) {
            return;
        }
        let end = head_only || body.is_empty();
        let block = self.heads.encode(status, fields);
        write::headers(&mut self.out, id, block, end, self.peer_max_frame);
        self.after_head(id, body, end);
    }

    /// The fixed answer to `GET /` (the hot path: no allocation, its head replayed from
    /// `ResponseHeads::fixed` while the second and the table stay).
    pub fn respond_fixed(&mut self, id: u32, date: &Stamp) {
        let len = FIXED_BODY.len() as i64;
        let Some(stream) = self.streams.get(&id).filter(|s| !s.send_closed) else {
            return;
        };
        let fits = self.send_window >= len && stream.send_window >= len;
        let block = self.heads.fixed(date);
        write::headers(&mut self.out, id, block, false, self.peer_max_frame);
        if !fits {
            return self.after_head(id, Body::fixed(), false);
        }
        write::data(&mut self.out, id, FIXED_BODY, true);
        self.send_window -= len;
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.send_window -= len;
            stream.send_closed = true;
        }
        self.retire_if_done(id);
    }

    /// Whether stream `id` is open and its answer not yet begun.
    fn may_answer(&self, id: u32) -> bool {
        self.streams.get(&id).is_some_and(|s| !s.send_closed)
    }

    /// The head of `id` is queued: close it (`end`) or queue the body.
    fn after_head(&mut self, id: u32, body: Body, end: bool) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if end {
            stream.send_closed = true;
            self.retire_if_done(id);
            return;
        }
        stream.body = Some(body);
        self.pump_stream(id);
    }

    /// Sends what the windows allow of every waiting body, until `out` is full enough.
    pub fn pump(&mut self) {
        let mut turns = self.blocked.len();
        while turns > 0 && self.out.len() < OUT_HIGH_WATER && self.send_window > 0 {
            turns -= 1;
            let Some(id) = self.blocked.pop_front() else {
                break;
            };
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.queued = false;
            }
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
        } else {
            stream.enqueue(id, &mut self.blocked);
        }
    }
}
