//! The sans-IO core of the owned HTTP/2 client: frames in, frames out, stream outcomes.
//!
//! The driver task feeds it whole frames read from the socket and writes what it queues in
//! `out`; request futures open streams and collect outcomes through it. It owns connection and
//! stream flow control, the server's SETTINGS, PING, GOAWAY and RST_STREAM, the HPACK decoder
//! and the per-connection request head blocks. It never blocks and never touches a socket.

use super::frame_tap::{flag, kind, FrameHeader};
use super::frame_write::{self as write, code, setting};
use super::head_blocks::HeadBlocks;
use super::streams::{StreamTable, NO_LENGTH};
use crate::error::ErrorKind;
use crate::protocol::hpack::decoder::DEFAULT_TABLE_SIZE;
use crate::protocol::hpack::Decoder;
use crate::protocol::last_read::LastRead;
use crate::protocol::window::H2Windows;
use crate::protocol::wire::WireCounter;
use crate::protocol::{CloseCause, RetryReason, SendError};
use httpvs_h2wire::frame::MAX_EMPTY_CONTINUATIONS;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

mod requests;

/// The largest frame we accept: SETTINGS_MAX_FRAME_SIZE's initial value, which we keep.
pub const MAX_FRAME: usize = 16_384;

/// The highest client stream id.
const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// The most answers to the server's own frames (PING and SETTINGS acknowledgements, window
/// updates) that may wait unsent: a server that sends PINGs or SETTINGS faster than it reads
/// the answers (a flood, or one that never reads) is told ENHANCE_YOUR_CALM, as nghttp2 and
/// the h2 crate do, rather than the answers piling up in memory.
const MAX_ANSWER_BACKLOG: usize = 64 * 1024;

/// The most request frames (HEADERS, DATA, RST_STREAM) that may wait unsent: the driver takes
/// `out` only once its last write went out whole, so while a server reads nothing new streams
/// and bodies wait here (their requests time out) instead of piling up in memory (a server
/// that stopped reading grew a client by 1.7 MB/s as timed-out streams made room for more).
pub(crate) const MAX_OUT_BACKLOG: usize = 256 * 1024;

/// A WINDOW_UPDATE frame's size on the wire.
const WINDOW_UPDATE_BYTES: usize = 13;

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnEnd {
    /// Who ended it.
    pub cause: CloseCause,
    /// The error it ended with, if any.
    pub error: Option<ErrorKind>,
}

/// A connection error found in the server's frames: we send GOAWAY with `code` and stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnError(pub u32);

/// A header block split over CONTINUATION frames.
#[derive(Debug)]
struct PendingBlock {
    stream: u32,
    end_stream: bool,
    /// Empty CONTINUATION frames so far (see [`MAX_EMPTY_CONTINUATIONS`], the server's too).
    empties: u32,
}

/// What a response's header block said: its `:status`, decoded size, `content-length`
/// ([`NO_LENGTH`] for none) and whether it broke a rule.
#[derive(Debug, Clone, Copy)]
struct BlockReading {
    status: Option<u16>,
    size: u64,
    length: u64,
    malformed: bool,
}

/// Header blocks longer than this are not kept (see `ConnCore::memo`).
const MEMO_MAX: usize = 128;

/// Everything one connection knows; shared by its driver and its request futures.
#[derive(Debug)]
pub struct ConnCore {
    /// Frames to write, in order.
    pub out: Vec<u8>,
    driver_waker: Option<Waker>,
    driver_woken: bool,
    streams: StreamTable,
    /// Request bodies still being sent (waiting for flow-control window), oldest first.
    bodies: Vec<PendingBody>,
    hpack: Decoder,
    /// The last response header block that left the HPACK table as it was, keyed by the table's
    /// generation, and what it said: a server answers the same request with the same block,
    /// every field indexed, while its table and fields stay the same (h2o until its `date`
    /// changes), and decoding it again with its checks was a quarter of a request's
    /// instructions at h2c.
    memo: LastRead<u64, BlockReading>,
    heads: HeadBlocks,
    next_stream_id: u32,
    settings_received: bool,
    /// The server sent a SETTINGS frame (valid or not): it speaks HTTP/2.
    peer_sent_settings: bool,
    /// The error code of our GOAWAY, when the server broke the protocol.
    failed_with: Option<u32>,
    /// The server's frame that broke it (`None` for a failure no one frame caused).
    failed_on: Option<FrameHeader>,
    /// A GOAWAY where the server's SETTINGS belonged, as (error code, debug data): it turned
    /// the connection away.
    preface_goaway: Option<Box<(u32, String)>>,
    /// MAX_CONCURRENT_STREAMS from the server's first SETTINGS.
    first_max_streams: Option<u32>,
    max_streams: usize,
    peer_initial_window: i64,
    peer_max_frame: usize,
    peer_table_size: usize,
    /// A table size update owed at the start of the next request block.
    table_update: Option<usize>,
    send_window: i64,
    /// The receive windows we advertised, which WINDOW_UPDATEs refill.
    windows: H2Windows,
    /// DATA bytes received since our last connection WINDOW_UPDATE.
    recv_unacked: u32,
    pending_block: Option<PendingBlock>,
    block_buf: Vec<u8>,
    /// Bytes of answers to the server's frames queued in `out` since the driver last took it.
    answer_backlog: usize,
    goaway: Option<(u32, u32)>,
    /// The first GOAWAY came while no request was in flight: the server ended an idle
    /// connection (its idle timeout), not one it was serving.
    goaway_idle: bool,
    end: Option<ConnEnd>,
    local_close: bool,
    /// The run is over ([`ConnCore::quiesce`]): streams dropped now are not cancelled.
    quiet: bool,
    capacity_waiters: Vec<Waker>,
    connect_waker: Option<Waker>,
    counter: Arc<WireCounter>,
}

impl ConnCore {
    /// A new connection whose preface, SETTINGS and window are queued in `out`: streams get
    /// `windows.stream` (SETTINGS_INITIAL_WINDOW_SIZE), the connection `windows.connection`
    /// (a WINDOW_UPDATE above its initial 65,535, when it is larger).
    pub fn new(counter: Arc<WireCounter>, windows: H2Windows) -> ConnCore {
        let mut out = Vec::with_capacity(256);
        // The largest header block read, said up front (a block under this list size encodes
        // smaller: an HPACK field costs less than the list's 32 bytes of overhead), so a
        // server that honours it answers within it rather than have its answer refused.
        let settings = [
            (setting::ENABLE_PUSH, 0),
            (setting::INITIAL_WINDOW_SIZE, windows.stream),
            (
                setting::MAX_HEADER_LIST_SIZE,
                crate::protocol::MAX_RESPONSE_HEAD as u32,
            ),
        ];
        write::preface(&mut out, &settings, windows.connection);
        ConnCore {
            out,
            driver_waker: None,
            driver_woken: false,
            streams: StreamTable::default(),
            bodies: Vec::new(),
            hpack: Decoder::default(),
            memo: LastRead::new(),
            heads: HeadBlocks::default(),
            next_stream_id: 1,
            settings_received: false,
            peer_sent_settings: false,
            failed_with: None,
            failed_on: None,
            preface_goaway: None,
            first_max_streams: None,
            max_streams: usize::MAX,
            peer_initial_window: 65_535,
            peer_max_frame: MAX_FRAME,
            peer_table_size: DEFAULT_TABLE_SIZE,
            table_update: None,
            send_window: 65_535,
            windows,
            recv_unacked: 0,
            pending_block: None,
            block_buf: Vec::new(),
            answer_backlog: 0,
            goaway: None,
            goaway_idle: false,
            end: None,
            local_close: false,
            quiet: false,
            capacity_waiters: Vec::new(),
            connect_waker: None,
            counter,
        }
    }

    /// Makes room for `streams` requests at once (the engine's `-m`), so the stream table is
    /// sized once instead of doubling past it.
    pub fn reserve_streams(&mut self, streams: usize) {
        self.streams.reserve(streams);
    }

    // ----- the driver's side -----

    /// Remembers the driver's waker; called each time the driver polls.
    pub fn set_driver_waker(&mut self, waker: &Waker) {
        self.driver_woken = false;
        match &mut self.driver_waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
    }

    fn wake_driver(&mut self) {
        if !self.driver_woken {
            if let Some(w) = &self.driver_waker {
                self.driver_woken = true;
                w.wake_by_ref();
            }
        }
    }

    /// Whether the connection has ended (the driver stops once `out` is written).
    pub fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// The connection ended (EOF, I/O error, our protocol error, or a local close): every open
    /// stream gets its outcome. Streams above a GOAWAY's last id were never processed.
    pub fn end(&mut self, cause: CloseCause, error: Option<ErrorKind>) {
        if self.end.is_some() {
            return;
        }
        self.end = Some(ConnEnd { cause, error });
        // The server's FIN after a stream's final head cut its body short, as h1 counts it.
        let fin =
            cause == CloseCause::Fin && matches!(error, None | Some(ErrorKind::ConnectionClosed));
        for slot in self.streams.open_slots() {
            let (id, head_came) = self
                .streams
                .get_mut(slot)
                .map_or((0, false), |s| (s.id, s.status != 0));
            let outcome = match self.goaway {
                Some((last, code)) if id > last => {
                    SendError::Retry(RetryReason::Goaway(u64::from(code)))
                }
                _ if fin && head_came => SendError::Failed(ErrorKind::TruncatedBody),
                Some((_, code)) => SendError::Failed(ErrorKind::Goaway(u64::from(code))),
                None => SendError::Failed(error.unwrap_or(ErrorKind::ConnectionClosed)),
            };
            self.streams.finish(slot, Err(outcome));
        }
        self.bodies.clear();
        self.wake_waiters();
    }

    /// Ends the connection for a protocol error of the server's, telling it with GOAWAY: we
    /// close it, so it counts as closed by us, not by the server.
    pub fn fail(&mut self, error: ConnError) {
        self.failed_with.get_or_insert(error.0);
        write::goaway(&mut self.out, 0, error.0);
        self.end(CloseCause::Local, Some(ErrorKind::Protocol));
    }

    /// A frame that only a stream we opened may carry (DATA, HEADERS, RST_STREAM): on stream 0,
    /// on an even (server-initiated, and push is off) stream or on one we have not opened yet,
    /// it is a connection error (RFC 9113 §5.1, §6.1, §6.2, §6.4).
    fn check_ours(&self, id: u32) -> Result<(), ConnError> {
        if id.is_multiple_of(2) || id >= self.next_stream_id {
            return Err(ConnError(code::PROTOCOL_ERROR));
        }
        Ok(())
    }

    /// [`ConnCore::fail`] for `frame`, the server's frame that broke the protocol.
    pub fn fail_on(&mut self, frame: &FrameHeader, error: ConnError) {
        let first = self.failed_with.is_none();
        self.fail(error);
        if first {
            self.failed_on = Some(*frame);
        }
    }

    /// Why a connection that never became usable failed, when the server spoke HTTP/2 but
    /// broke it (a SETTINGS value out of range, a bad frame) or turned it away with a GOAWAY:
    /// for the first connection's error line, which would otherwise guess the server does not
    /// speak h2c at all.
    pub fn broken_preface(&self) -> Option<String> {
        let spoke = crate::protocol::tcp::SPOKE_THEN_BROKE;
        if let Some(goaway) = &self.preface_goaway {
            let (code, debug) = &**goaway;
            return Some(format!(
                "{spoke}it sent GOAWAY {} (debug data {debug:?}) where its SETTINGS belonged: \
                 it turned the connection away",
                crate::error::h2_code_name(u64::from(*code))
            ));
        }
        let answered = self.protocol_breach()?;
        self.peer_sent_settings
            .then(|| format!("{spoke}its first frames broke the protocol ({answered})"))
    }

    /// What we answered the server's broken frame with, and which frame it was: "we answered
    /// GOAWAY FRAME_SIZE_ERROR to its 7-byte PING frame on stream 0".
    pub fn protocol_breach(&self) -> Option<String> {
        let code = crate::error::h2_code_name(u64::from(self.failed_with?));
        Some(match &self.failed_on {
            Some(f) => format!(
                "we answered GOAWAY {code} to its {}-byte {} frame on stream {}",
                f.length,
                crate::trace::names::h2_frame(f.kind),
                f.stream_id
            ),
            None => format!("we answered GOAWAY {code}"),
        })
    }

    /// Counts `bytes` of answer queued; an error once the server is owed more than
    /// [`MAX_ANSWER_BACKLOG`] unsent.
    fn answered(&mut self, bytes: usize) -> Result<(), ConnError> {
        self.answer_backlog += bytes;
        if self.answer_backlog > MAX_ANSWER_BACKLOG {
            return Err(ConnError(code::ENHANCE_YOUR_CALM));
        }
        Ok(())
    }

    /// Hands the queued frames to the driver (swapped with its emptied buffer): the answers
    /// in them are on their way.
    pub fn take_out(&mut self, into: &mut Vec<u8>) {
        let was_full = self.out.len() >= MAX_OUT_BACKLOG;
        std::mem::swap(into, &mut self.out);
        self.answer_backlog = 0;
        if was_full {
            // Room again: bodies held back go on, and requests waiting to open look again.
            self.push_bodies();
            self.wake_room_waiters();
        }
    }

    /// Wakes every request waiting for room: one that waited was dropped (a timeout), and its
    /// task's waker, still registered, would take a closing stream's wake-up from the others.
    pub fn wake_room_waiters(&mut self) {
        for w in self.capacity_waiters.drain(..) {
            w.wake();
        }
    }

    /// Registers a request waiting for room (a stream under the server's limit, or
    /// [`MAX_OUT_BACKLOG`]), once per task however often it is polled: a waiting request that
    /// times out leaves its waker behind, and repeats would pile up.
    fn wait_for_room(&mut self, cx: &std::task::Context<'_>) {
        if !self
            .capacity_waiters
            .iter()
            .any(|w| w.will_wake(cx.waker()))
        {
            self.capacity_waiters.push(cx.waker().clone());
        }
    }

    fn wake_waiters(&mut self) {
        for w in self.capacity_waiters.drain(..) {
            w.wake();
        }
        if let Some(w) = self.connect_waker.take() {
            w.wake();
        }
    }

    /// Handles one whole frame received at `now`.
    pub fn on_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ConnError> {
        if let Some(pending) = &self.pending_block {
            if h.kind != kind::CONTINUATION || h.stream_id != pending.stream {
                return Err(ConnError(code::PROTOCOL_ERROR));
            }
        }
        if !self.settings_received && h.kind != kind::SETTINGS {
            // The server's preface is a SETTINGS frame (RFC 9113 §3.4). A GOAWAY instead is a
            // refusal worth naming (an overloaded server's ENHANCE_YOUR_CALM).
            if h.kind == kind::GOAWAY && h.stream_id == 0 && payload.len() >= 8 {
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                let debug: String = String::from_utf8_lossy(&payload[8..])
                    .chars()
                    .take(200)
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                self.preface_goaway = Some(Box::new((code, debug)));
            }
            return Err(ConnError(code::PROTOCOL_ERROR));
        }
        if h.kind == kind::SETTINGS {
            // A SETTINGS frame first: the server speaks HTTP/2, whatever its values.
            self.peer_sent_settings = true;
        }
        match h.kind {
            kind::DATA => self.on_data(h, payload, now),
            kind::HEADERS => self.on_headers(h, payload, now),
            kind::CONTINUATION => self.on_continuation(h, payload, now),
            kind::SETTINGS => self.on_settings(h, payload),
            kind::PING => self.on_ping(h, payload),
            // GOAWAY belongs to the connection: on a stream it is a connection error (§6.8).
            kind::GOAWAY if h.stream_id != 0 => Err(ConnError(code::PROTOCOL_ERROR)),
            kind::GOAWAY => self.on_goaway(payload),
            kind::RST_STREAM => self.on_rst_stream(h, payload),
            kind::WINDOW_UPDATE => self.on_window_update(h, payload),
            kind::PUSH_PROMISE => Err(ConnError(code::PROTOCOL_ERROR)),
            // PRIORITY and unknown types are ignored (RFC 9113 §4.1, §5.3.2).
            _ => Ok(()),
        }
    }

    fn on_data(&mut self, h: &FrameHeader, payload: &[u8], now: Instant) -> Result<(), ConnError> {
        self.check_ours(h.stream_id)?;
        // The whole frame, padding included, counts against both windows (RFC 9113 §6.9.1).
        let len = payload.len() as u32;
        let data = unpadded(h, payload)?.len() as u64;
        if len > self.windows.connection.saturating_sub(self.recv_unacked) {
            // The server sent past the connection window we advertised.
            return Err(ConnError(code::FLOW_CONTROL_ERROR));
        }
        self.recv_unacked += len;
        if self.recv_unacked >= self.windows.connection_refill_at() {
            write::window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_unacked = 0;
            self.answered(WINDOW_UPDATE_BYTES)?;
            self.wake_driver();
        }
        let Some(slot) = self.streams.slot_of(h.stream_id) else {
            return Ok(());
        };
        let Some(stream) = self.streams.get_mut(slot) else {
            return Ok(());
        };
        if stream.status == 0 {
            // DATA before the response head: a malformed response (RFC 9113 §8.1.1).
            self.reset_stream(slot, code::PROTOCOL_ERROR, ErrorKind::Protocol);
            return Ok(());
        }
        if len > self.windows.stream.saturating_sub(stream.recv_unacked) {
            // Past the stream's window: that stream is broken, the connection is not.
            self.reset_stream(slot, code::FLOW_CONTROL_ERROR, ErrorKind::Protocol);
            return Ok(());
        }
        stream.body_bytes += data;
        stream.recv_unacked += len;
        if h.has(flag::END_STREAM) {
            self.complete(slot, now);
        } else if stream.recv_unacked >= self.windows.stream_refill_at() {
            let (id, n) = (stream.id, stream.recv_unacked);
            stream.recv_unacked = 0;
            write::window_update(&mut self.out, id, n);
            self.answered(WINDOW_UPDATE_BYTES)?;
            self.wake_driver();
        }
        Ok(())
    }

    fn on_headers(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ConnError> {
        self.check_ours(h.stream_id)?;
        let mut block = unpadded(h, payload)?;
        if h.has(flag::PRIORITY) {
            block = block.get(5..).ok_or(ConnError(code::PROTOCOL_ERROR))?;
        }
        self.counter.add_header_received(block.len() as u64);
        let end_stream = h.has(flag::END_STREAM);
        if h.has(flag::END_HEADERS) {
            return self.on_block(h.stream_id, block, end_stream, now);
        }
        self.block_buf.clear();
        self.block_buf.extend_from_slice(block);
        self.pending_block = Some(PendingBlock {
            stream: h.stream_id,
            end_stream,
            empties: 0,
        });
        Ok(())
    }

    fn on_continuation(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ConnError> {
        let Some(mut pending) = self.pending_block.take() else {
            return Err(ConnError(code::PROTOCOL_ERROR));
        };
        self.counter.add_header_received(payload.len() as u64);
        // A block past a response head's limit is a CONTINUATION flood, not a head.
        if self.block_buf.len() + payload.len() > crate::protocol::MAX_RESPONSE_HEAD {
            return Err(ConnError(code::ENHANCE_YOUR_CALM));
        }
        self.block_buf.extend_from_slice(payload);
        if !h.has(flag::END_HEADERS) {
            pending.empties += u32::from(payload.is_empty());
            if pending.empties > MAX_EMPTY_CONTINUATIONS {
                return Err(ConnError(code::ENHANCE_YOUR_CALM));
            }
            self.pending_block = Some(pending);
            return Ok(());
        }
        let block = std::mem::take(&mut self.block_buf);
        let result = self.on_block(pending.stream, &block, pending.end_stream, now);
        self.block_buf = block;
        result
    }

    /// A complete header block: always decoded (the table depends on it), then applied to its
    /// stream if we still wait for it.
    fn on_block(
        &mut self,
        id: u32,
        block: &[u8],
        end_stream: bool,
        now: Instant,
    ) -> Result<(), ConnError> {
        let generation = self.hpack.generation();
        let reading = match self.memo.get(block, generation) {
            Some(reading) => reading,
            None => {
                let reading = self.read_block(block)?;
                // Only a block that changed nothing reads the same next time.
                if self.hpack.generation() == generation {
                    self.memo.keep(block, generation, reading, MEMO_MAX);
                }
                reading
            }
        };
        let BlockReading {
            status,
            size,
            length,
            malformed,
        } = reading;
        // Every block decoded counts, as every block's encoded bytes do (header savings).
        self.counter.add_header_decoded_received(size);
        let Some(slot) = self.streams.slot_of(id) else {
            return Ok(());
        };
        let Some(stream) = self.streams.get_mut(slot) else {
            return Ok(());
        };
        if stream.status == 0 {
            match status {
                // Interim (1xx) heads come before the final one and are not counted.
                Some(s) if (100..200).contains(&s) && !end_stream => return Ok(()),
                Some(s) if !malformed && s >= 200 => {
                    stream.status = s;
                    let ttfb = now.saturating_duration_since(stream.at).as_nanos();
                    stream.ttfb_ns = u64::try_from(ttfb).unwrap_or(u64::MAX);
                    stream.header_bytes += size;
                    stream.expected_body = length;
                }
                _ => {
                    self.reset_stream(slot, code::PROTOCOL_ERROR, ErrorKind::Protocol);
                    return Ok(());
                }
            }
        } else if !end_stream || status.is_some() || malformed {
            // After the final head only trailers may come: they end the stream and carry no
            // :status (RFC 9113 §8.1); anything else makes the response malformed.
            self.reset_stream(slot, code::PROTOCOL_ERROR, ErrorKind::Protocol);
            return Ok(());
        } else {
            // Trailers.
            stream.header_bytes += size;
        }
        if end_stream {
            self.complete(slot, now);
        }
        Ok(())
    }

    /// Decodes a response header block and judges it: one `:status` before every regular
    /// field and no other pseudo-header (RFC 9113 §8.3, §8.3.2), names the decoder allows,
    /// and `content-length` values that are lengths and agree (§8.1.1).
    fn read_block(&mut self, block: &[u8]) -> Result<BlockReading, ConnError> {
        let mut status: Option<u16> = None;
        let mut size = 0u64;
        let mut malformed = false;
        let mut length = NO_LENGTH;
        let mut regular_seen = false;
        // Regular names are judged by the decoder (lowercase, not connection-specific), each
        // table entry once, as it entered.
        let names_ok = self
            .hpack
            .decode_checked(block, |name, value| {
                size += (name.len() + value.len()) as u64;
                if name.first() == Some(&b':') {
                    malformed |= regular_seen || name != b":status" || status.is_some();
                    status = parse_status(value);
                    malformed |= status.is_none();
                    return;
                }
                regular_seen = true;
                // Once malformed, not parsed again: a block of 1-byte references to one large
                // table entry would have every copy scanned.
                if name == b"content-length" && !malformed {
                    match crate::protocol::parse_content_length(value) {
                        Some(n) if length == NO_LENGTH || length == n => length = n,
                        _ => malformed = true,
                    }
                }
            })
            .map_err(|_| ConnError(code::COMPRESSION_ERROR))?;
        Ok(BlockReading {
            status,
            size,
            length,
            malformed: malformed || !names_ok,
        })
    }

    fn on_settings(&mut self, h: &FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id != 0 {
            return Err(ConnError(code::PROTOCOL_ERROR));
        }
        if h.has(flag::ACK) {
            // An acknowledgement carries nothing (RFC 9113 §6.5).
            if !payload.is_empty() {
                return Err(ConnError(code::FRAME_SIZE_ERROR));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError(code::FRAME_SIZE_ERROR));
        }
        for s in payload.chunks_exact(6) {
            let value = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            self.apply_setting(u16::from_be_bytes([s[0], s[1]]), value)?;
        }
        write::settings_ack(&mut self.out);
        self.answered(9)?;
        if !self.settings_received {
            self.settings_received = true;
            self.first_max_streams =
                (self.max_streams != usize::MAX).then_some(self.max_streams as u32);
        }
        self.wake_waiters();
        self.push_bodies();
        self.wake_driver();
        Ok(())
    }

    fn apply_setting(&mut self, id: u16, value: u32) -> Result<(), ConnError> {
        match id {
            setting::HEADER_TABLE_SIZE => {
                let size = (value as usize).min(DEFAULT_TABLE_SIZE);
                if size < self.peer_table_size {
                    self.table_update = Some(size);
                    self.heads.table_shrunk(size);
                }
                self.peer_table_size = size;
            }
            // A server may not enable push, nor send a value other than 0 or 1 (RFC 9113
            // §6.5.2): a connection error (it was accepted).
            setting::ENABLE_PUSH if value != 0 => return Err(ConnError(code::PROTOCOL_ERROR)),
            setting::MAX_CONCURRENT_STREAMS => self.max_streams = value as usize,
            setting::INITIAL_WINDOW_SIZE => {
                if value > MAX_STREAM_ID {
                    return Err(ConnError(code::FLOW_CONTROL_ERROR));
                }
                let delta = i64::from(value) - self.peer_initial_window;
                self.peer_initial_window = i64::from(value);
                for slot in self.streams.open_slots() {
                    if let Some(stream) = self.streams.get_mut(slot) {
                        stream.send_window += delta;
                    }
                }
            }
            setting::MAX_FRAME_SIZE => {
                if !(16_384..=16_777_215).contains(&value) {
                    return Err(ConnError(code::PROTOCOL_ERROR));
                }
                self.peer_max_frame = value as usize;
            }
            _ => {}
        }
        Ok(())
    }

    fn on_ping(&mut self, h: &FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        // On a stream: PROTOCOL_ERROR; a length other than 8: FRAME_SIZE_ERROR (RFC 9113 §6.7).
        if h.stream_id != 0 {
            return Err(ConnError(code::PROTOCOL_ERROR));
        }
        if payload.len() != 8 {
            return Err(ConnError(code::FRAME_SIZE_ERROR));
        }
        if !h.has(flag::ACK) {
            write::ping_ack(&mut self.out, payload);
            self.answered(17)?;
            self.wake_driver();
        }
        Ok(())
    }

    fn on_goaway(&mut self, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() < 8 {
            return Err(ConnError(code::FRAME_SIZE_ERROR));
        }
        let last =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_STREAM_ID;
        let error = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
        if self.goaway.is_none() {
            self.goaway_idle = self.streams.open() == 0;
        }
        // A later GOAWAY may only lower the last stream id.
        let last = self.goaway.map_or(last, |(seen, _)| seen.min(last));
        self.goaway = Some((last, error));
        for slot in self.streams.open_slots() {
            if self.streams.get_mut(slot).is_some_and(|s| s.id > last) {
                self.streams.finish(
                    slot,
                    Err(SendError::Retry(RetryReason::Goaway(u64::from(error)))),
                );
            }
        }
        self.wake_waiters();
        Ok(())
    }

    fn on_rst_stream(&mut self, h: &FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() != 4 {
            return Err(ConnError(code::FRAME_SIZE_ERROR));
        }
        self.check_ours(h.stream_id)?;
        let error = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
        if let Some(slot) = self.streams.slot_of(h.stream_id) {
            let outcome = if error == code::REFUSED_STREAM {
                SendError::Retry(RetryReason::Refused)
            } else {
                SendError::Failed(ErrorKind::StreamReset(u64::from(error)))
            };
            self.streams.finish(slot, Err(outcome));
            self.stream_closed();
        }
        Ok(())
    }

    fn on_window_update(&mut self, h: &FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() != 4 {
            return Err(ConnError(code::FRAME_SIZE_ERROR));
        }
        let increment = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_STREAM_ID,
        );
        // RFC 9113 §6.9: an increment of 0 is a PROTOCOL_ERROR and a window past 2^31-1 a
        // FLOW_CONTROL_ERROR, of the connection or of the stream the frame names.
        let max = i64::from(MAX_STREAM_ID);
        if h.stream_id == 0 {
            if increment == 0 {
                return Err(ConnError(code::PROTOCOL_ERROR));
            }
            if self.send_window + increment > max {
                return Err(ConnError(code::FLOW_CONTROL_ERROR));
            }
            self.send_window += increment;
        } else {
            self.check_ours(h.stream_id)?;
            if let Some(slot) = self.streams.slot_of(h.stream_id) {
                let window = self.streams.get_mut(slot).map(|s| s.send_window);
                match window {
                    Some(_) if increment == 0 => {
                        self.reset_stream(slot, code::PROTOCOL_ERROR, ErrorKind::Protocol);
                    }
                    Some(w) if w + increment > max => {
                        self.reset_stream(slot, code::FLOW_CONTROL_ERROR, ErrorKind::Protocol);
                    }
                    Some(_) => {
                        if let Some(stream) = self.streams.get_mut(slot) {
                            stream.send_window += increment;
                        }
                    }
                    None => {}
                }
            }
        }
        self.push_bodies();
        Ok(())
    }

    /// The response of the stream in `slot` is complete, at `now`.
    fn complete(&mut self, slot: usize, now: Instant) {
        let Some(stream) = self.streams.get_mut(slot) else {
            return;
        };
        stream.at = now;
        let id = stream.id;
        // A body that is not the length its head announced makes the response malformed (a
        // short one read as a success).
        let announced = (stream.expected_body != NO_LENGTH).then_some(stream.expected_body);
        let mismatch = crate::protocol::body_length_error(
            announced,
            stream.body_bytes,
            stream.head_request,
            stream.status,
        );
        if let Some(pending) = self
            .bodies
            .iter()
            .position(|b| b.slot == slot && b.id == id)
        {
            // The server answered before taking the whole body: stop sending it.
            self.bodies.remove(pending);
            write::rst_stream(&mut self.out, id, code::CANCEL);
            self.wake_driver();
        }
        match mismatch {
            Some(kind) => self.streams.finish(slot, Err(SendError::Failed(kind))),
            None => self.streams.finish(slot, Ok(())),
        }
        self.stream_closed();
    }

    /// Resets a stream on our side and fails its request with `kind`.
    fn reset_stream(&mut self, slot: usize, error: u32, kind: ErrorKind) {
        if let Some(stream) = self.streams.get_mut(slot) {
            write::rst_stream(&mut self.out, stream.id, error);
            self.streams.finish(slot, Err(SendError::Failed(kind)));
            self.stream_closed();
            self.wake_driver();
        }
    }

    fn stream_closed(&mut self) {
        if let Some(w) = self.capacity_waiters.pop() {
            w.wake();
        }
    }

    /// Sends as much of the waiting request bodies as the windows allow.
    fn push_bodies(&mut self) {
        let mut wrote = false;
        let mut i = 0;
        while i < self.bodies.len() {
            let pending = &mut self.bodies[i];
            // A slot is reused once freed: the id tells whether it is still this body's stream.
            let stream = self.streams.get_mut(pending.slot);
            let Some(stream) = stream.filter(|s| s.id == pending.id && s.outcome.is_none()) else {
                self.bodies.remove(i);
                continue;
            };
            while pending.sent < pending.body.len() {
                if self.out.len() >= MAX_OUT_BACKLOG {
                    break; // `take_out` pushes again once the driver has room
                }
                let left = pending.body.len() - pending.sent;
                let window = self.send_window.min(stream.send_window).max(0) as usize;
                let n = left.min(window).min(self.peer_max_frame);
                if n == 0 {
                    break;
                }
                let chunk = &pending.body[pending.sent..pending.sent + n];
                write::data(&mut self.out, stream.id, chunk, n == left);
                pending.sent += n;
                stream.send_window -= n as i64;
                self.send_window -= n as i64;
                wrote = true;
            }
            if pending.sent < pending.body.len() {
                i += 1;
            } else {
                self.bodies.remove(i);
            }
        }
        if wrote {
            self.wake_driver();
        }
    }
}

/// A request body being sent on stream `id` (in `slot`), `sent` bytes so far.
#[derive(Debug)]
struct PendingBody {
    slot: usize,
    id: u32,
    body: bytes::Bytes,
    sent: usize,
}

/// The payload of a DATA or HEADERS frame without its padding (RFC 9113 §6.1).
fn unpadded<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<&'a [u8], ConnError> {
    if !h.has(flag::PADDED) {
        return Ok(payload);
    }
    let pad = usize::from(*payload.first().ok_or(ConnError(code::PROTOCOL_ERROR))?);
    if pad + 1 > payload.len() {
        return Err(ConnError(code::PROTOCOL_ERROR));
    }
    Ok(&payload[1..payload.len() - pad])
}

/// A `:status` value: exactly three digits.
fn parse_status(value: &[u8]) -> Option<u16> {
    match value {
        [a, b, c] if value.iter().all(u8::is_ascii_digit) => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;
