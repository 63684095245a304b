//! The sans-IO core of the owned HTTP/2 server connection: bytes in, events out, frames queued
//! in `out`. It owns the preface check, SETTINGS, PING, GOAWAY, RST_STREAM, both directions of
//! flow control, HPACK (decoding requests; responses through `response_head.rs`), stream states
//! and the errors RFC 9113 names for each misuse.
//! Responses are queued through `send.rs`; the I/O shell in `mod.rs` decides what to answer.

use super::head::RequestHead;
use super::response_head::ResponseHeads;
use crate::body::Body;
use crate::h2::reset_budget::ResetBudget;
use httpvs_h2wire::frame::{self as write, code, flag, kind, setting, FrameHeader};
use httpvs_h2wire::hpack::Decoder;
use httpvs_h2wire::stream_id::StreamIdMap;
use std::collections::VecDeque;

/// The largest frame we accept (SETTINGS_MAX_FRAME_SIZE's initial value, which we keep).
const MAX_FRAME: usize = 16_384;
/// Receive window per stream and for the connection (what the h2 crate path advertises).
pub const STREAM_WINDOW: u32 = 1 << 20;
const CONN_WINDOW: u32 = 4 << 20;
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// A header block larger than this (or than four times the advertised header-list size, when
/// that is more) ends the connection (ENHANCE_YOUR_CALM): a request somewhat over the list size
/// still gets its 431, and an unfinished block cannot hold a megabyte per connection.
const MIN_MAX_BLOCK: usize = 64 * 1024;
/// Closed stream ids remembered to tell "closed" (STREAM_CLOSED) from "never opened".
const CLOSED_MEMORY: usize = 64;
const PREFACE: &[u8] = write::CLIENT_PREFACE;

/// A connection error: GOAWAY with this code has been queued; write `out` and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnError(pub u32);

/// What the peer's frames mean to the shell.
#[derive(Debug)]
pub enum Event<'a> {
    /// A new request; `end_stream` when it has no body.
    Request {
        /// Stream id.
        stream: u32,
        /// Its head.
        head: &'a RequestHead,
        /// No body follows.
        end_stream: bool,
    },
    /// Request body bytes (possibly empty at the end).
    Data {
        /// Stream id.
        stream: u32,
        /// The bytes.
        data: &'a [u8],
        /// The body is complete.
        end_stream: bool,
    },
    /// The stream was reset (by the peer or for a protocol error): forget it.
    Reset {
        /// Stream id.
        stream: u32,
    },
}

/// One open stream.
#[derive(Debug)]
pub struct Stream {
    pub(super) recv_closed: bool,
    pub(super) send_closed: bool,
    pub(super) send_window: i64,
    pub(super) recv_unacked: u32,
    content_length: Option<u64>,
    received: u64,
    /// Response body waiting for window.
    pub(super) body: Option<Body>,
    /// In `ServerCore::blocked`: a flag rather than a search of the queue, which a flood of
    /// SETTINGS or WINDOW_UPDATE frames made cost streams x queue length a frame.
    pub(super) queued: bool,
}

impl Stream {
    /// Puts the stream in the queue of bodies waiting for window (`blocked`), once.
    pub(super) fn enqueue(&mut self, id: u32, blocked: &mut VecDeque<u32>) {
        if self.body.is_some() && !self.queued {
            self.queued = true;
            blocked.push_back(id);
        }
    }
}

/// A header block spread over CONTINUATION frames.
#[derive(Debug, Clone, Copy)]
struct Continuation {
    stream: u32,
    end_stream: bool,
}

/// One server connection's protocol state.
#[derive(Debug)]
pub struct ServerCore {
    /// Frames to write, in order.
    pub out: Vec<u8>,
    hpack: Decoder,
    head: RequestHead,
    /// Response heads, encoded with the dynamic table the client's decoder follows.
    pub(super) heads: ResponseHeads,
    pub(super) streams: StreamIdMap<Stream>,
    closed: VecDeque<u32>,
    max_streams: usize,
    last_opened: u32,
    accepted: u64,
    accept_limit: Option<u64>,
    /// GOAWAY sent naming this last stream; later streams are ignored.
    goaway_last: Option<u32>,
    goaway_unreported: bool,
    peer_goaway: bool,
    preface_left: usize,
    settings_seen: bool,
    pub(super) peer_initial_window: i64,
    pub(super) peer_max_frame: usize,
    pub(super) send_window: i64,
    recv_unacked: u32,
    continuation: Option<Continuation>,
    block: Vec<u8>,
    /// The largest header block taken (see [`MIN_MAX_BLOCK`]).
    max_block: usize,
    /// Empty CONTINUATIONs in the block being read.
    empty_continuations: u32,
    /// Streams whose response body waits for window or for room in `out`.
    pub(super) blocked: VecDeque<u32>,
    /// `last_opened` when the current read began: streams above it were opened in this read.
    batch_floor: u32,
    /// Rapid-reset guard: resets of streams opened in the read that resets them spend it.
    resets: ResetBudget,
    /// Streams answered since the current read began, earned back when the next one begins
    /// (their answers have been written by then).
    answered: usize,
    /// Set when ENHANCE_YOUR_CALM ended the connection.
    pub rapid_reset: bool,
    /// Set when the client's first bytes were not the h2 preface (closed without a GOAWAY:
    /// the peer is not speaking HTTP/2, as on TLS with ALPN h2 and an HTTP/1.1 request).
    pub bad_preface: bool,
    /// Streams refused with REFUSED_STREAM (over `max_streams`) not yet counted by the shell.
    pub refused_streams: u32,
}

/// What a new core needs from the server's limits.
#[derive(Debug, Clone, Copy)]
pub struct CoreLimits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub max_header_list: u32,
    /// Streams after which GOAWAY names the last one.
    pub accept_limit: Option<u64>,
    /// Streams opened and reset within one read, beyond those answered, before
    /// ENHANCE_YOUR_CALM (`reset_budget.rs`).
    pub max_early_resets: usize,
}

impl ServerCore {
    /// A connection whose SETTINGS and window update are queued in `out`.
    pub fn new(limits: CoreLimits) -> ServerCore {
        let mut out = Vec::with_capacity(16 * 1024);
        let settings = [
            (setting::MAX_CONCURRENT_STREAMS, limits.max_streams),
            (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW),
            (setting::MAX_HEADER_LIST_SIZE, limits.max_header_list),
        ];
        write::settings(&mut out, &settings);
        write::window_update(&mut out, 0, CONN_WINDOW - 65_535);
        ServerCore {
            out,
            hpack: Decoder::default(),
            head: RequestHead::storing_up_to(limits.max_header_list as usize),
            max_block: MIN_MAX_BLOCK.max(4 * limits.max_header_list as usize),
            empty_continuations: 0,
            heads: ResponseHeads::default(),
            streams: StreamIdMap::default(),
            closed: VecDeque::with_capacity(CLOSED_MEMORY),
            max_streams: limits.max_streams as usize,
            last_opened: 0,
            accepted: 0,
            accept_limit: limits.accept_limit,
            goaway_last: None,
            goaway_unreported: false,
            peer_goaway: false,
            preface_left: PREFACE.len(),
            settings_seen: false,
            peer_initial_window: 65_535,
            peer_max_frame: MAX_FRAME,
            send_window: 65_535,
            recv_unacked: 0,
            continuation: None,
            block: Vec::new(),
            blocked: VecDeque::new(),
            batch_floor: 0,
            resets: ResetBudget::new(limits.max_early_resets),
            answered: 0,
            rapid_reset: false,
            bad_preface: false,
            refused_streams: 0,
        }
    }

    /// Marks the start of a read's worth of frames (for rapid-reset counting).
    pub fn begin_batch(&mut self) {
        self.batch_floor = self.last_opened;
        self.resets.earn(std::mem::take(&mut self.answered));
    }

    /// Sends GOAWAY naming the last stream opened so far (shutdown, `close=1`); idempotent.
    pub fn go_away(&mut self) {
        if self.goaway_last.is_none() {
            self.goaway_last = Some(self.last_opened);
            self.goaway_unreported = true;
            write::goaway(&mut self.out, self.last_opened, code::NO_ERROR);
        }
    }

    /// Whether a GOAWAY went out since the last call (to count it once).
    pub fn take_goaway_sent(&mut self) -> bool {
        std::mem::take(&mut self.goaway_unreported)
    }

    /// Open streams whose answer has not all gone out: a stream answered (a 413 to a body
    /// still coming) stays open until the client ends its side, and is not cut off.
    pub fn unanswered_streams(&self) -> usize {
        self.streams.values().filter(|s| !s.send_closed).count()
    }

    /// Whether the connection has nothing left to do after a GOAWAY (ours or the peer's).
    pub fn is_finished(&self) -> bool {
        (self.goaway_last.is_some() || self.peer_goaway) && self.streams.is_empty()
    }

    /// The next event from `input` (whole frames are consumed from its front through
    /// `consumed`), `Ok(None)` when more bytes are needed.
    pub fn next_event<'a>(
        &'a mut self,
        input: &'a [u8],
        consumed: &mut usize,
    ) -> Result<Option<Event<'a>>, ConnError> {
        loop {
            let rest = &input[*consumed..];
            if self.preface_left > 0 {
                let at = PREFACE.len() - self.preface_left;
                let n = self.preface_left.min(rest.len());
                if rest[..n] != PREFACE[at..at + n] {
                    self.bad_preface = true;
                    return Err(ConnError(code::PROTOCOL_ERROR));
                }
                self.preface_left -= n;
                *consumed += n;
                if self.preface_left > 0 {
                    return Ok(None);
                }
                continue;
            }
            let Some(header_bytes) = rest.get(..9) else {
                return Ok(None);
            };
            let mut nine = [0u8; 9];
            nine.copy_from_slice(header_bytes);
            let head = FrameHeader::parse(&nine);
            let len = head.length as usize;
            if len > MAX_FRAME {
                return Err(self.fail(code::FRAME_SIZE_ERROR));
            }
            let Some(payload) = rest.get(9..9 + len) else {
                return Ok(None);
            };
            *consumed += 9 + len;
            if !self.settings_seen && head.kind != kind::SETTINGS {
                return Err(self.fail(code::PROTOCOL_ERROR));
            }
            // Borrow dance: decide with `&mut self`, then re-borrow for the event.
            match self.frame(head, payload)? {
                Step::None => continue,
                Step::Request { stream, end_stream } => {
                    return Ok(Some(Event::Request {
                        stream,
                        head: &self.head,
                        end_stream,
                    }))
                }
                Step::Data {
                    stream,
                    from,
                    to,
                    end_stream,
                } => {
                    return Ok(Some(Event::Data {
                        stream,
                        data: &input[*consumed - len + from..*consumed - len + to],
                        end_stream,
                    }))
                }
                Step::Reset(stream) => return Ok(Some(Event::Reset { stream })),
            }
        }
    }

    /// Queues GOAWAY with `code` and returns the error.
    pub(super) fn fail(&mut self, code: u32) -> ConnError {
        let last = self
            .goaway_last
            .unwrap_or(self.last_opened)
            .min(self.last_opened);
        write::goaway(&mut self.out, last, code);
        if code == code::ENHANCE_YOUR_CALM {
            self.rapid_reset = true;
        }
        ConnError(code)
    }

    /// Ends the connection with ENHANCE_YOUR_CALM for a flood that is not a rapid reset (a
    /// header block past its limit, empty CONTINUATIONs): a protocol error, not counted as a
    /// rapid reset.
    fn flood(&mut self) -> ConnError {
        let error = self.fail(code::ENHANCE_YOUR_CALM);
        self.rapid_reset = false;
        error
    }

    fn frame(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        if let Some(cont) = self.continuation {
            if head.kind != kind::CONTINUATION || head.stream_id != cont.stream {
                return Err(self.fail(code::PROTOCOL_ERROR));
            }
        }
        match head.kind {
            kind::DATA => self.data(head, payload),
            kind::HEADERS => self.headers(head, payload),
            kind::PRIORITY => self.priority(head, payload),
            kind::RST_STREAM => self.rst_stream(head, payload),
            kind::SETTINGS => self.settings(head, payload).map(|()| Step::None),
            kind::PUSH_PROMISE => Err(self.fail(code::PROTOCOL_ERROR)),
            kind::PING => self.ping(head, payload).map(|()| Step::None),
            kind::GOAWAY => {
                if head.stream_id != 0 {
                    return Err(self.fail(code::PROTOCOL_ERROR));
                }
                self.peer_goaway = true;
                Ok(Step::None)
            }
            kind::WINDOW_UPDATE => self.window_update(head, payload),
            kind::CONTINUATION => self.continuation(head, payload),
            _ => Ok(Step::None),
        }
    }

    /// Whether `id` is a client stream that was opened and is now closed (vs. never opened).
    fn state_of(&self, id: u32) -> StreamState {
        if self.streams.contains_key(&id) {
            StreamState::Open
        } else if id > self.last_opened {
            StreamState::Idle
        } else if self.closed.contains(&id) {
            StreamState::Closed
        } else {
            StreamState::Forgotten
        }
    }

    fn remember_closed(&mut self, id: u32) {
        if self.closed.len() == CLOSED_MEMORY {
            self.closed.pop_front();
        }
        self.closed.push_back(id);
    }

    /// Removes a stream whose both directions are done.
    pub(super) fn retire_if_done(&mut self, id: u32) {
        if self
            .streams
            .get(&id)
            .is_some_and(|s| s.recv_closed && s.send_closed)
        {
            self.streams.remove(&id);
            self.remember_closed(id);
            self.answered += 1;
        }
    }

    /// Resets a stream for a stream error.
    fn reset(&mut self, id: u32, error: u32) -> Step {
        write::rst_stream(&mut self.out, id, error);
        if self.streams.remove(&id).is_some() {
            self.remember_closed(id);
            return Step::Reset(id);
        }
        Step::None
    }

    fn data(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        let id = head.stream_id;
        if id == 0 {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        let (from, to) = unpad(head, payload).ok_or_else(|| self.fail(code::PROTOCOL_ERROR))?;
        // Past the window we granted: the client ignores flow control (RFC 9113 §6.9.1), and
        // what it sends past it would pile up here.
        if self.recv_unacked as usize + payload.len() > CONN_WINDOW as usize {
            return Err(self.fail(code::FLOW_CONTROL_ERROR));
        }
        self.consume_conn_window(payload.len());
        let end_stream = head.has(flag::END_STREAM);
        if self
            .goaway_last
            .is_some_and(|last| id > last && id <= self.last_opened)
        {
            return Ok(Step::None);
        }
        match self.state_of(id) {
            StreamState::Idle => return Err(self.fail(code::PROTOCOL_ERROR)),
            StreamState::Closed | StreamState::Forgotten => {
                return Ok(self.reset(id, code::STREAM_CLOSED))
            }
            StreamState::Open => {}
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(Step::None);
        };
        if stream.recv_closed {
            return Ok(self.reset(id, code::STREAM_CLOSED));
        }
        if stream.recv_unacked as usize + payload.len() > STREAM_WINDOW as usize {
            return Ok(self.reset(id, code::FLOW_CONTROL_ERROR));
        }
        stream.received += (to - from) as u64;
        let over = stream
            .content_length
            .is_some_and(|n| stream.received > n || (end_stream && stream.received != n));
        if over {
            return Ok(self.reset(id, code::PROTOCOL_ERROR));
        }
        if end_stream {
            stream.recv_closed = true;
        } else {
            stream.recv_unacked += payload.len() as u32;
            if stream.recv_unacked >= STREAM_WINDOW / 2 {
                write::window_update(&mut self.out, id, stream.recv_unacked);
                stream.recv_unacked = 0;
            }
        }
        self.retire_if_done(id);
        Ok(Step::Data {
            stream: id,
            from,
            to,
            end_stream,
        })
    }

    fn consume_conn_window(&mut self, n: usize) {
        self.recv_unacked += n as u32;
        if self.recv_unacked >= CONN_WINDOW / 4 {
            write::window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_unacked = 0;
        }
    }

    fn headers(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        let id = head.stream_id;
        if id == 0 || id.is_multiple_of(2) {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        let (mut from, to) = unpad(head, payload).ok_or_else(|| self.fail(code::PROTOCOL_ERROR))?;
        let mut self_dependent = false;
        if head.has(flag::PRIORITY) {
            if to - from < 5 {
                return Err(self.fail(code::FRAME_SIZE_ERROR));
            }
            let dep = u32::from_be_bytes([
                payload[from],
                payload[from + 1],
                payload[from + 2],
                payload[from + 3],
            ]);
            self_dependent = dep & 0x7fff_ffff == id;
            from += 5;
        }
        self.block.clear();
        self.empty_continuations = 0;
        self.block.extend_from_slice(&payload[from..to]);
        let cont = Continuation {
            stream: id,
            end_stream: head.has(flag::END_STREAM),
        };
        if self_dependent {
            // Still decoded (HPACK state), then the stream is refused.
            self.last_opened = self.last_opened.max(id);
            self.decode_block(true)?;
            return Ok(self.reset(id, code::PROTOCOL_ERROR));
        }
        if head.has(flag::END_HEADERS) {
            self.end_block(cont)
        } else {
            self.continuation = Some(cont);
            Ok(Step::None)
        }
    }

    fn continuation(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        let Some(cont) = self.continuation else {
            return Err(self.fail(code::PROTOCOL_ERROR));
        };
        if self.block.len() + payload.len() > self.max_block {
            return Err(self.flood());
        }
        if payload.is_empty() && !head.has(flag::END_HEADERS) {
            // Empty CONTINUATIONs carry nothing but keep the connection busy (and count as
            // activity, so it never idles out): a few are odd, many are a flood.
            self.empty_continuations += 1;
            if self.empty_continuations > write::MAX_EMPTY_CONTINUATIONS {
                return Err(self.flood());
            }
        }
        self.block.extend_from_slice(payload);
        if head.has(flag::END_HEADERS) {
            self.continuation = None;
            self.end_block(cont)
        } else {
            Ok(Step::None)
        }
    }

    /// Decodes the finished block into `self.head`.
    fn decode_block(&mut self, trailer: bool) -> Result<(), ConnError> {
        self.head.clear();
        let head = &mut self.head;
        let block = std::mem::take(&mut self.block);
        let decoded = self
            .hpack
            .decode(&block, |name, value| head.field(name, value, trailer));
        self.block = block;
        decoded.map_err(|_| self.fail(code::COMPRESSION_ERROR))
    }

    fn end_block(&mut self, cont: Continuation) -> Result<Step, ConnError> {
        let id = cont.stream;
        match self.state_of(id) {
            StreamState::Open => {
                self.decode_block(true)?;
                self.trailers(id, cont.end_stream)
            }
            StreamState::Closed => {
                self.decode_block(true)?;
                Err(self.fail(code::STREAM_CLOSED))
            }
            StreamState::Forgotten => {
                self.decode_block(true)?;
                Err(self.fail(code::PROTOCOL_ERROR))
            }
            StreamState::Idle => {
                self.decode_block(false)?;
                self.open(id, cont.end_stream)
            }
        }
    }

    fn trailers(&mut self, id: u32, end_stream: bool) -> Result<Step, ConnError> {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(Step::None);
        };
        if stream.recv_closed {
            return Err(self.fail(code::STREAM_CLOSED));
        }
        let short = stream.content_length.is_some_and(|n| n != stream.received);
        if !end_stream || self.head.malformed || short {
            return Ok(self.reset(id, code::PROTOCOL_ERROR));
        }
        stream.recv_closed = true;
        self.retire_if_done(id);
        Ok(Step::Data {
            stream: id,
            from: 0,
            to: 0,
            end_stream: true,
        })
    }

    fn open(&mut self, id: u32, end_stream: bool) -> Result<Step, ConnError> {
        self.last_opened = id;
        if self.goaway_last.is_some_and(|last| id > last) {
            return Ok(Step::None);
        }
        if !self.head.is_valid_request() {
            self.remember_closed(id);
            write::rst_stream(&mut self.out, id, code::PROTOCOL_ERROR);
            return Ok(Step::None);
        }
        if self.streams.len() >= self.max_streams {
            self.remember_closed(id);
            write::rst_stream(&mut self.out, id, code::REFUSED_STREAM);
            self.refused_streams += 1;
            return Ok(Step::None);
        }
        if end_stream && self.head.content_length.is_some_and(|n| n > 0) {
            self.remember_closed(id);
            write::rst_stream(&mut self.out, id, code::PROTOCOL_ERROR);
            return Ok(Step::None);
        }
        self.streams.insert(
            id,
            Stream {
                recv_closed: end_stream,
                send_closed: false,
                send_window: self.peer_initial_window,
                recv_unacked: 0,
                content_length: self.head.content_length,
                received: 0,
                body: None,
                queued: false,
            },
        );
        self.accepted += 1;
        if self.accept_limit.is_some_and(|n| self.accepted >= n) {
            self.go_away();
        }
        Ok(Step::Request {
            stream: id,
            end_stream,
        })
    }

    fn priority(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        if head.stream_id == 0 {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        if payload.len() != 5 {
            return Ok(self.reset(head.stream_id, code::FRAME_SIZE_ERROR));
        }
        let dep = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
        if dep & 0x7fff_ffff == head.stream_id {
            return Ok(self.reset(head.stream_id, code::PROTOCOL_ERROR));
        }
        Ok(Step::None)
    }

    fn rst_stream(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        let id = head.stream_id;
        if id == 0 {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        if payload.len() != 4 {
            return Err(self.fail(code::FRAME_SIZE_ERROR));
        }
        if self.state_of(id) == StreamState::Idle {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        if self.goaway_last.is_some_and(|last| id > last) {
            return Ok(Step::None);
        }
        if id > self.batch_floor {
            // Opened and reset before this read's answers left: the rapid-reset pattern. If it
            // was answered in this read, that answer earns nothing.
            self.answered = self.answered.saturating_sub(1);
            if !self.resets.spend() {
                return Err(self.fail(code::ENHANCE_YOUR_CALM));
            }
        }
        if self.streams.remove(&id).is_some() {
            self.remember_closed(id);
            return Ok(Step::Reset(id));
        }
        Ok(Step::None)
    }

    fn settings(&mut self, head: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream_id != 0 {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        if head.has(flag::ACK) {
            if !payload.is_empty() {
                return Err(self.fail(code::FRAME_SIZE_ERROR));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(self.fail(code::FRAME_SIZE_ERROR));
        }
        self.settings_seen = true;
        for entry in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([entry[0], entry[1]]);
            let value = u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]);
            match id {
                setting::HEADER_TABLE_SIZE => self.heads.set_peer_table_size(value),
                setting::ENABLE_PUSH if value > 1 => {
                    return Err(self.fail(code::PROTOCOL_ERROR));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > MAX_WINDOW {
                        return Err(self.fail(code::FLOW_CONTROL_ERROR));
                    }
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    for stream in self.streams.values_mut() {
                        stream.send_window += delta;
                        if stream.send_window > MAX_WINDOW {
                            return Err(self.fail(code::FLOW_CONTROL_ERROR));
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&value) {
                        return Err(self.fail(code::PROTOCOL_ERROR));
                    }
                    self.peer_max_frame = value as usize;
                }
                _ => {}
            }
        }
        write::settings_ack(&mut self.out);
        self.unblock_all();
        Ok(())
    }

    fn ping(&mut self, head: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream_id != 0 {
            return Err(self.fail(code::PROTOCOL_ERROR));
        }
        if payload.len() != 8 {
            return Err(self.fail(code::FRAME_SIZE_ERROR));
        }
        if !head.has(flag::ACK) {
            write::ping_ack(&mut self.out, payload);
        }
        Ok(())
    }

    fn window_update(&mut self, head: FrameHeader, payload: &[u8]) -> Result<Step, ConnError> {
        if payload.len() != 4 {
            return Err(self.fail(code::FRAME_SIZE_ERROR));
        }
        let increment = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff,
        );
        let id = head.stream_id;
        if id == 0 {
            if increment == 0 {
                return Err(self.fail(code::PROTOCOL_ERROR));
            }
            self.send_window += increment;
            if self.send_window > MAX_WINDOW {
                return Err(self.fail(code::FLOW_CONTROL_ERROR));
            }
            self.unblock_all();
            return Ok(Step::None);
        }
        match self.state_of(id) {
            StreamState::Idle => return Err(self.fail(code::PROTOCOL_ERROR)),
            StreamState::Open => {}
            _ => return Ok(Step::None),
        }
        if increment == 0 {
            return Ok(self.reset(id, code::PROTOCOL_ERROR));
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(Step::None);
        };
        stream.send_window += increment;
        if stream.send_window > MAX_WINDOW {
            return Ok(self.reset(id, code::FLOW_CONTROL_ERROR));
        }
        stream.enqueue(id, &mut self.blocked);
        Ok(Step::None)
    }

    fn unblock_all(&mut self) {
        for (&id, stream) in &mut self.streams {
            stream.enqueue(id, &mut self.blocked);
        }
    }
}

/// What one frame asks of the shell (an `Event` without borrows).
enum Step {
    None,
    Request {
        stream: u32,
        end_stream: bool,
    },
    Data {
        stream: u32,
        from: usize,
        to: usize,
        end_stream: bool,
    },
    Reset(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamState {
    Idle,
    Open,
    Closed,
    Forgotten,
}

/// The content range of a possibly padded DATA or HEADERS payload; `None` when the padding
/// is longer than the frame.
fn unpad(head: FrameHeader, payload: &[u8]) -> Option<(usize, usize)> {
    if !head.has(flag::PADDED) {
        return Some((0, payload.len()));
    }
    let pad = usize::from(*payload.first()?);
    let end = payload.len().checked_sub(pad)?;
    (end >= 1).then_some((1, end))
}

#[cfg(test)]
mod tests;
