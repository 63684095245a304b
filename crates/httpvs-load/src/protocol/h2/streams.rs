//! The streams of one owned HTTP/2 connection: slots reused from a free list and found by
//! stream id through a small map, so a request allocates nothing once the table has grown.
//!
//! A stream record is what one request in flight costs the connection, so it holds only what
//! every stream needs (about 100 bytes): a request body waits in the core's list of pending
//! bodies, and the response's figures become a `ResponseInfo` only when collected.

use crate::protocol::{ResponseInfo, SendError};
use httpvs_h2wire::stream_id::StreamIdMap;
use std::task::Waker;
use std::time::{Duration, Instant};

/// One request's stream.
#[derive(Debug)]
pub struct Stream {
    /// Stream id.
    pub id: u32,
    /// When its send started (for the time to first byte), then once the response is complete,
    /// when it completed: one field for both keeps the stream small.
    pub at: Instant,
    /// The outcome, once known (a success's figures are the fields below).
    pub outcome: Option<Result<(), SendError>>,
    /// Woken when the outcome is set.
    pub waker: Option<Waker>,
    /// Final status (0 until the final response head arrives).
    pub status: u16,
    /// Time to the final response head, ns (a u64, not a Duration's 16 bytes: a held stream
    /// costs what h2load's does, with the announced length below).
    pub ttfb_ns: u64,
    /// Decoded header bytes so far (head and trailers).
    pub header_bytes: u64,
    /// Response body bytes so far.
    pub body_bytes: u64,
    /// What the server lets us send on this stream.
    pub send_window: i64,
    /// DATA bytes received since our last stream WINDOW_UPDATE.
    pub recv_unacked: u32,
    /// The request was a HEAD: a response's content-length announces no body.
    pub head_request: bool,
    /// The body length the final head's content-length announced ([`NO_LENGTH`] when it
    /// announced none); checked when the stream ends (`protocol::body_length_error`).
    pub expected_body: u64,
}

/// [`Stream::expected_body`] when no length is to be checked.
pub const NO_LENGTH: u64 = u64::MAX;

impl Stream {
    /// The response's figures, for a stream that succeeded.
    pub fn response_info(&self) -> ResponseInfo {
        ResponseInfo {
            status: self.status,
            ttfb: Duration::from_nanos(self.ttfb_ns),
            header_bytes: self.header_bytes,
            body_bytes: self.body_bytes,
            close_requested: false,
            done_at: Some(self.at),
        }
    }
}

/// Slots for streams; a slot index stays valid until `free`.
#[derive(Debug, Default)]
pub struct StreamTable {
    slots: Vec<Option<Stream>>,
    free: Vec<usize>,
    by_id: StreamIdMap<usize>,
    /// Streams counted against the server's concurrency limit.
    open: usize,
}

impl StreamTable {
    /// Makes room for `streams` streams at once, so the table does not grow by doubling past
    /// what the connection will use (memory per stream in flight).
    pub fn reserve(&mut self, streams: usize) {
        self.slots
            .reserve_exact(streams.saturating_sub(self.slots.len()));
        self.free
            .reserve_exact(streams.saturating_sub(self.free.len()));
        self.by_id.reserve(streams.saturating_sub(self.by_id.len()));
    }

    /// Adds an open stream; returns its slot.
    pub fn insert(&mut self, stream: Stream) -> usize {
        let id = stream.id;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(stream);
                slot
            }
            None => {
                self.slots.push(Some(stream));
                self.slots.len() - 1
            }
        };
        self.by_id.insert(id, slot);
        self.open += 1;
        slot
    }

    /// Open streams (sent, outcome not yet known).
    pub fn open(&self) -> usize {
        self.open
    }

    /// The slot of open stream `id`.
    pub fn slot_of(&self, id: u32) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The stream in `slot`.
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Stream> {
        self.slots.get_mut(slot).and_then(Option::as_mut)
    }

    /// Sets the outcome of an open stream and wakes its sender; later frames for it are ignored.
    pub fn finish(&mut self, slot: usize, outcome: Result<(), SendError>) {
        let Some(stream) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if stream.outcome.is_some() {
            return;
        }
        stream.outcome = Some(outcome);
        self.by_id.remove(&stream.id);
        self.open -= 1;
        if let Some(waker) = stream.waker.take() {
            waker.wake();
        }
    }

    /// Slots of every open stream.
    pub fn open_slots(&self) -> Vec<usize> {
        self.by_id.values().copied().collect()
    }

    /// Releases a slot (its sender is done with it), returning its stream. A stream still open
    /// is closed first.
    pub fn free(&mut self, slot: usize) -> Option<Stream> {
        let stream = self.slots.get_mut(slot).and_then(Option::take)?;
        if self.by_id.get(&stream.id) == Some(&slot) {
            self.by_id.remove(&stream.id);
            self.open -= 1;
        }
        self.free.push(slot);
        Some(stream)
    }
}
