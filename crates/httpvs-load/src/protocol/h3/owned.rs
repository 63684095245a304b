//! The owned HTTP/3 client connection (RFC 9114) straight over quinn streams: each request is one
//! bidirectional stream carrying a head encoded once per distinct request, the body and FIN; the
//! response is read chunk by chunk through [`ResponseReader`], with no task or channel per request.
//!
//! Around the requests: our control stream (SETTINGS, with a QPACK table capacity of 0 so the
//! server's field sections need no decoder state), and one background task per connection that
//! accepts the server's unidirectional streams, reads GOAWAY ids from its control stream, drains
//! the QPACK streams, and re-opens our control stream if the server refuses 0-RTT.

use super::classify::{self, StreamFailure, H3_NO_ERROR};
use super::frames::{
    FrameEvent, FrameScanner, FRAME_DATA, FRAME_HEADERS, FRAME_MAX_PUSH_ID, FRAME_PUSH_PROMISE,
    FRAME_SETTINGS, STREAM_TYPE_CONTROL,
};
use super::reference::STATUS_FIELD_BYTES;
use super::request_head::HeadCache;
use super::response::{
    DecodeScratch, ResponseReader, ResponseViolation, H3_FRAME_UNEXPECTED, H3_MESSAGE_ERROR,
};
use crate::error::ErrorKind;
use crate::protocol::{
    CloseCause, CloseDetail, Connection, QuicStats, RequestSpec, ResponseInfo, SendError, WireBytes,
};
use bytes::Bytes;
use futures_util::FutureExt;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Our control stream's first bytes: its type, then an empty SETTINGS frame (every setting at
/// its default: no dynamic QPACK table, no blocked streams, no field section limit).
const CONTROL_PREFACE: [u8; 3] = [STREAM_TYPE_CONTROL as u8, FRAME_SETTINGS as u8, 0];

/// Chunks taken from quinn per read: a response that came in a few STREAM frames is read, FIN
/// included, in one call.
const READ_CHUNKS: usize = 4;

/// A reserved HTTP/3 frame (type 0x21 = 0x1f * 0 + 0x21, no payload; RFC 9114 7.2.8: a
/// receiver ignores it), written on our control stream when a request waits for stream
/// credit: the packet carries our pending ACK of the server's responses, which is what frees
/// their streams on the server (quinn frees a stream once its response is acknowledged), where
/// quinn alone would wait up to its 25 ms ACK delay with nothing else to send (QUIC's
/// STREAMS_BLOCKED, which would carry it, quinn does not send).
const NUDGE: [u8; 2] = [0x21, 0];

/// H3_STREAM_CREATION_ERROR: the server opened a second control stream.
const H3_STREAM_CREATION_ERROR: u64 = 0x103;
/// H3_CLOSED_CRITICAL_STREAM: the server's control stream ended.
const H3_CLOSED_CRITICAL_STREAM: u64 = 0x104;
/// H3_ID_ERROR: a GOAWAY id that names no request stream or rises above an earlier one.
const H3_ID_ERROR: u64 = 0x108;
/// H3_MISSING_SETTINGS: the control stream did not start with SETTINGS.
const H3_MISSING_SETTINGS: u64 = 0x10a;

/// What the connection's background task and the request streams share.
#[derive(Debug)]
struct ConnState {
    /// The lowest GOAWAY stream id received; `u64::MAX` while none.
    goaway: AtomicU64,
    /// Woken when a GOAWAY arrives: requests on streams at or past its id end at once.
    goaway_seen: tokio::sync::Notify,
    /// How the connection ended, once it did (as its background task or a request saw it).
    ended: OnceLock<ErrorKind>,
    /// We closed it (end of run).
    closed_locally: AtomicBool,
    /// The server's control stream has been identified (a second one is an error).
    control_stream_seen: AtomicBool,
    /// Still in 0-RTT: the handshake has not confirmed yet.
    early: AtomicBool,
    /// 0-RTT was attempted and the server refused it.
    early_rejected: AtomicBool,
    /// A request waits for stream credit: the background task writes [`NUDGE`] (several
    /// waits before it runs write once).
    nudge: tokio::sync::Notify,
    /// Requests under way now.
    in_flight: AtomicU32,
    /// Whether none was under way when the server first said it was ending the connection
    /// (its first GOAWAY, or its close): an idle timeout's close, not one after a request.
    idle_at_end: OnceLock<bool>,
}

impl ConnState {
    /// Closes the connection with H3 error `code` for the server's fault: its requests fail
    /// with that code, and it counts as closed by us, as h2's is.
    fn close_for_violation(&self, quic: &quinn::Connection, code: u64) {
        let _ = self.ended.set(ErrorKind::H3(code));
        self.closed_locally.store(true, Ordering::Release);
        quic.close(quinn::VarInt::from_u64(code).unwrap_or_default(), b"");
    }

    /// The server is ending the connection (GOAWAY, or its close): notes whether it was idle.
    /// Not after our own close, which ends it too.
    fn server_ending(&self) {
        if self.closed_locally.load(Ordering::Acquire) {
            return;
        }
        let _ = self
            .idle_at_end
            .set(self.in_flight.load(Ordering::Acquire) == 0);
    }

    fn goaway_id(&self) -> Option<u64> {
        match self.goaway.load(Ordering::Acquire) {
            u64::MAX => None,
            id => Some(id),
        }
    }

    /// Resolves once a GOAWAY names stream `id` or an earlier one: the server will not
    /// process it (RFC 9114 §5.2), so its request may go again elsewhere at once, as h2's do.
    /// It waited for its response until --timeout, and failed as a request timeout.
    async fn turned_away(&self, id: u64) {
        loop {
            let notified = self.goaway_seen.notified();
            tokio::pin!(notified);
            // Registered before the check, so a GOAWAY between the two still wakes it.
            notified.as_mut().enable();
            if self.goaway_id().is_some_and(|goaway| id >= goaway) {
                return;
            }
            notified.await;
        }
    }
}

/// An open HTTP/3 connection on the owned client.
pub struct OwnedConnection {
    quic: quinn::Connection,
    state: Arc<ConnState>,
    heads: RefCell<HeadCache>,
    scratch: RefCell<DecodeScratch>,
    header_sent: Cell<u64>,
    header_received: Cell<u64>,
    /// The same decoded, for every section that decoded.
    header_decoded_received: Cell<u64>,
    early_requests: Cell<u64>,
    background: tokio::task::AbortHandle,
}

impl OwnedConnection {
    /// Starts HTTP/3 on an established (or 0-RTT) QUIC connection: opens our control stream and
    /// spawns the task that watches the server's streams.
    ///
    /// `zero_rtt` is quinn's acceptance future when the connection is still in 0-RTT.
    pub async fn establish(
        quic: quinn::Connection,
        zero_rtt: Option<quinn::ZeroRttAccepted>,
    ) -> Result<Self, ErrorKind> {
        let control = open_control_stream(&quic).await?;
        let state = Arc::new(ConnState {
            goaway: AtomicU64::new(u64::MAX),
            goaway_seen: tokio::sync::Notify::new(),
            ended: OnceLock::new(),
            closed_locally: AtomicBool::new(false),
            control_stream_seen: AtomicBool::new(false),
            early: AtomicBool::new(zero_rtt.is_some()),
            early_rejected: AtomicBool::new(false),
            nudge: tokio::sync::Notify::new(),
            in_flight: AtomicU32::new(0),
            idle_at_end: OnceLock::new(),
        });
        let background = tokio::spawn(watch_connection(
            quic.clone(),
            state.clone(),
            control,
            zero_rtt,
        ))
        .abort_handle();
        Ok(OwnedConnection {
            quic,
            state,
            heads: RefCell::new(HeadCache::default()),
            scratch: RefCell::new(DecodeScratch::default()),
            header_sent: Cell::new(0),
            header_received: Cell::new(0),
            header_decoded_received: Cell::new(0),
            early_requests: Cell::new(0),
            background,
        })
    }

    /// Turns a stream failure into a retry or a classified failure.
    fn failure(&self, failure: StreamFailure, stream_id: Option<u64>) -> SendError {
        // Requests on a connection we closed because the server broke HTTP/3 fail with that
        // error, as h2's do, not as a plain close (quinn reports them LocallyClosed).
        let failure = match failure {
            StreamFailure::Connection(ErrorKind::ConnectionClosed)
            | StreamFailure::Stream(ErrorKind::ConnectionClosed)
                if self.state.closed_locally.load(Ordering::Acquire) =>
            {
                match self.state.ended.get() {
                    Some(kind @ ErrorKind::H3(_)) => StreamFailure::Connection(*kind),
                    _ => failure,
                }
            }
            other => other,
        };
        let beyond_goaway = match (self.state.goaway_id(), stream_id) {
            (Some(goaway), Some(id)) => id >= goaway,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let early_rejected = self.state.early_rejected.load(Ordering::Acquire);
        classify::send_error(failure, beyond_goaway, early_rejected)
    }

    /// A response that broke the protocol: a connection error closes the connection with its
    /// code (RFC 9114 §8), a malformed message fails only its request.
    fn violation(&self, violation: ResponseViolation, recv: &mut quinn::RecvStream) -> SendError {
        match violation {
            ResponseViolation::Connection(code) => {
                self.state.close_for_violation(&self.quic, code);
                SendError::Failed(ErrorKind::H3(code))
            }
            ResponseViolation::Message => {
                let _ = recv.stop(quinn::VarInt::from_u32(H3_MESSAGE_ERROR as u32));
                SendError::Failed(ErrorKind::H3(H3_MESSAGE_ERROR))
            }
        }
    }

    /// Writes the head (and body) and finishes our side of the stream.
    ///
    /// Takes the stream: dropping it finishes it (quinn's drop calls `finish`), which saves the
    /// connection lock that an explicit `finish` and a later drop would each take.
    async fn write_request(
        &self,
        mut send: quinn::SendStream,
        req: &RequestSpec,
        id: u64,
    ) -> Result<(), SendError> {
        let head = self.heads.borrow_mut().head(req);
        self.header_sent
            .set(self.header_sent.get() + head.field_section_len);
        let written = if req.body.is_empty() {
            send.write_chunk(head.bytes).await
        } else {
            send.write_all_chunks(&mut [head.bytes, req.body.clone()])
                .await
        };
        match written {
            Ok(()) => Ok(()),
            // The server may answer before reading the whole body, then stop our sending side
            // (RFC 9114 §4.1 asks for H3_NO_ERROR; a server that just drops the stream sends
            // whatever its QUIC stack does, quinn 0): the response may still come whole, and a
            // complete response must not be discarded. The read says how the stream ended.
            Err(quinn::WriteError::Stopped(code))
                if code.into_inner() != classify::H3_REQUEST_REJECTED
                    && self.state.goaway_id().is_none() =>
            {
                Ok(())
            }
            Err(e) => Err(self.failure(classify::write_failure(&e), Some(id))),
        }
    }

    /// Reads the response to its FIN.
    async fn read_response(
        &self,
        recv: &mut quinn::RecvStream,
        id: u64,
        start: Instant,
        head_request: bool,
    ) -> Result<ResponseInfo, SendError> {
        let mut reader = ResponseReader::default();
        let read = self.read_frames(recv, &mut reader, id, start).await;
        // Counted whether or not the response completes: these bytes did cross the wire.
        self.header_received
            .set(self.header_received.get() + reader.encoded_header_bytes());
        self.header_decoded_received
            .set(self.header_decoded_received.get() + reader.decoded_header_bytes());
        let ttfb = read?;
        let head = reader.finish().map_err(|v| self.violation(v, recv))?;
        // A body that is not the length its head announced makes the response malformed (a
        // short one read as a success).
        let body = reader.body_bytes();
        let status = head.status;
        if let Some(kind) =
            crate::protocol::body_length_error(head.content_length, body, head_request, status)
        {
            return Err(SendError::Failed(kind));
        }
        Ok(ResponseInfo {
            status: head.status,
            ttfb: ttfb.unwrap_or_else(|| start.elapsed()),
            header_bytes: head.field_bytes + STATUS_FIELD_BYTES,
            body_bytes: reader.body_bytes(),
            close_requested: false,
            done_at: None,
        })
    }

    /// Feeds the stream's chunks to `reader` until FIN; returns the time to the final head.
    ///
    /// `read_chunks` rather than `read_chunk`: when the chunks in hand end at the FIN, quinn
    /// says so in the same call, so a response that arrived whole takes one locked read, not a
    /// second one to learn the stream ended.
    async fn read_frames(
        &self,
        recv: &mut quinn::RecvStream,
        reader: &mut ResponseReader,
        id: u64,
        start: Instant,
    ) -> Result<Option<Duration>, SendError> {
        let mut ttfb = None;
        let mut chunks: [Bytes; READ_CHUNKS] = Default::default();
        loop {
            match recv.read_chunks(&mut chunks).await {
                Ok(Some(n)) => {
                    for chunk in &mut chunks[..n] {
                        let chunk = std::mem::take(chunk);
                        let fed = reader.feed(&chunk, &mut self.scratch.borrow_mut());
                        fed.map_err(|v| self.violation(v, recv))?;
                    }
                    if ttfb.is_none() && reader.head().is_some() {
                        ttfb = Some(start.elapsed());
                    }
                }
                Ok(None) => return Ok(ttfb),
                Err(e) => return Err(self.failure(classify::read_failure(&e), Some(id))),
            }
        }
    }
}

/// A request's receiving side while its send is under way: dropped unsettled (its send was
/// dropped: `--timeout`, the run's end), it asks the server to stop with H3_REQUEST_CANCELLED,
/// as RFC 9114 §4.1.1 has a client cancel, where quinn's own drop would send code 0, which is
/// no HTTP/3 code. Settled, it adds nothing: quinn's drop stops what was not read to its end.
struct CancelOnDrop<'a> {
    recv: &'a mut quinn::RecvStream,
    settled: bool,
    /// Counts the request out of [`ConnState::in_flight`].
    state: &'a ConnState,
    quic: &'a quinn::Connection,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        // A request the connection's end failed was under way when it ended, whether or not
        // the background task has seen the end yet.
        if !self.settled && self.quic.close_reason().is_some() {
            self.state.server_ending();
        }
        self.state.in_flight.fetch_sub(1, Ordering::AcqRel);
        if !self.settled {
            let code = quinn::VarInt::from_u64(classify::H3_REQUEST_CANCELLED)
                .unwrap_or(quinn::VarInt::from_u32(0));
            let _ = self.recv.stop(code);
        }
    }
}

/// Opens our control stream and sends SETTINGS on it.
async fn open_control_stream(quic: &quinn::Connection) -> Result<quinn::SendStream, ErrorKind> {
    let mut control = quic
        .open_uni()
        .await
        .map_err(|e| classify::connection_failure(&e))?;
    control
        .write_all(&CONTROL_PREFACE)
        .await
        .map_err(|e| match classify::write_failure(&e) {
            StreamFailure::Connection(kind) | StreamFailure::Stream(kind) => kind,
            _ => ErrorKind::Handshake,
        })?;
    Ok(control)
}

/// The connection's background task: holds our control stream open (closing it is a connection
/// error), accepts the server's unidirectional streams, and follows 0-RTT's fate.
async fn watch_connection(
    quic: quinn::Connection,
    state: Arc<ConnState>,
    control: quinn::SendStream,
    zero_rtt: Option<quinn::ZeroRttAccepted>,
) {
    // Shared by the 0-RTT branch (which may open it again) and the nudges.
    let control = tokio::sync::Mutex::new(control);
    let early = async {
        let accepted = match zero_rtt {
            Some(accepted) => accepted.await,
            None => return std::future::pending().await,
        };
        state.early_rejected.store(!accepted, Ordering::Release);
        state.early.store(false, Ordering::Release);
        if accepted {
            return std::future::pending().await;
        }
        // Streams opened in refused 0-RTT are gone, ours included: open the control stream again.
        match open_control_stream(&quic).await {
            Ok(reopened) => *control.lock().await = reopened,
            Err(_) => std::future::pending().await,
        }
        std::future::pending::<()>().await
    };
    let accept = async {
        loop {
            match quic.accept_uni().await {
                Ok(stream) => {
                    tokio::spawn(read_server_stream(stream, quic.clone(), state.clone()));
                }
                Err(e) => {
                    state.server_ending();
                    let _ = state.ended.set(classify::connection_failure(&e));
                    return;
                }
            }
        }
    };
    tokio::select! {
        () = early => {}
        () = accept => {}
        () = nudge(&state, &control) => {}
    }
}

/// Writes [`NUDGE`] on our control stream each time a request waits for stream credit.
async fn nudge(state: &ConnState, control: &tokio::sync::Mutex<quinn::SendStream>) {
    loop {
        state.nudge.notified().await;
        if control.lock().await.write_all(&NUDGE).await.is_err() {
            // The connection is ending; the accept branch sees why.
            return std::future::pending().await;
        }
    }
}

/// Reads one server-initiated unidirectional stream: GOAWAY ids from the control stream; the
/// QPACK encoder/decoder streams (and unknown types) are drained and ignored. A control stream
/// that breaks RFC 9114 closes the connection with the code the RFC names, counted as ours.
async fn read_server_stream(
    mut stream: quinn::RecvStream,
    quic: quinn::Connection,
    state: Arc<ConnState>,
) {
    let mut scanner = FrameScanner::uni_stream();
    let mut check = ControlCheck::default();
    let mut identified = false;
    loop {
        let violation = match stream.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => {
                // Only the control stream's frames are reported.
                let mut violation = None;
                scanner.feed(&chunk.bytes, |event| {
                    violation = violation.or_else(|| check.event(event, &state));
                });
                if !identified && scanner.is_control_stream() {
                    identified = true;
                    // RFC 9114 §6.2.1: one control stream per peer.
                    if state.control_stream_seen.swap(true, Ordering::AcqRel) {
                        violation = Some(H3_STREAM_CREATION_ERROR);
                    }
                }
                violation
            }
            Ok(None) | Err(quinn::ReadError::Reset(_)) if scanner.is_control_stream() => {
                Some(H3_CLOSED_CRITICAL_STREAM)
            }
            Ok(None) | Err(_) => return,
        };
        if let Some(code) = violation {
            state.close_for_violation(&quic, code);
            return;
        }
    }
}

/// What RFC 9114 asks of the server's control stream (§6.2.1, §7.2): SETTINGS first and once,
/// no frame of a request stream or of HTTP/2, GOAWAY ids that name a request stream and never
/// rise (§5.2).
#[derive(Debug, Default)]
struct ControlCheck {
    /// Frames seen so far.
    frames: u64,
}

impl ControlCheck {
    /// Checks one event of the control stream; records a valid GOAWAY. Returns the H3 code of
    /// the connection error the event is, if any.
    fn event(&mut self, event: FrameEvent, state: &ConnState) -> Option<u64> {
        match event {
            FrameEvent::Frame { ty, .. } => {
                self.frames += 1;
                match ty {
                    FRAME_SETTINGS if self.frames == 1 => None,
                    _ if self.frames == 1 => Some(H3_MISSING_SETTINGS),
                    // A second SETTINGS, a request stream's frames, MAX_PUSH_ID (a client's),
                    // and HTTP/2's frame types that HTTP/3 reserves (§7.2.8).
                    FRAME_SETTINGS | FRAME_DATA | FRAME_HEADERS | FRAME_PUSH_PROMISE
                    | FRAME_MAX_PUSH_ID | 0x02 | 0x06 | 0x08 | 0x09 => Some(H3_FRAME_UNEXPECTED),
                    _ => None,
                }
            }
            // A server's GOAWAY names a client-initiated bidirectional stream, and a later one
            // may not name a higher stream than an earlier one.
            FrameEvent::Goaway(id) if id % 4 != 0 => Some(H3_ID_ERROR),
            FrameEvent::Goaway(id) => {
                state.server_ending();
                let earlier = state.goaway.fetch_min(id, Ordering::AcqRel);
                state.goaway_seen.notify_waiters();
                (earlier != u64::MAX && id > earlier).then_some(H3_ID_ERROR)
            }
        }
    }
}

impl Connection for OwnedConnection {
    async fn send(&self, req: &RequestSpec, start: Instant) -> Result<ResponseInfo, SendError> {
        if self.state.early.load(Ordering::Acquire) {
            self.early_requests.set(self.early_requests.get() + 1);
        }
        let opened = match self.quic.open_bi().now_or_never() {
            Some(opened) => opened,
            None => {
                // Out of stream credit: send our ACK now, so the server frees streams.
                self.state.nudge.notify_one();
                self.quic.open_bi().await
            }
        };
        let (send, mut recv) = opened.map_err(|e| {
            let kind = classify::connection_failure(&e);
            self.failure(StreamFailure::Connection(kind), None)
        })?;
        let id = quinn::VarInt::from(send.id()).into_inner();
        self.state.in_flight.fetch_add(1, Ordering::AcqRel);
        let mut cancel = CancelOnDrop {
            recv: &mut recv,
            settled: false,
            state: &self.state,
            quic: &self.quic,
        };
        self.write_request(send, req, id).await?;
        let read = tokio::select! {
            biased;
            read = self.read_response(cancel.recv, id, start, req.method == http::Method::HEAD) => read,
            () = self.state.turned_away(id) => {
                // Left unsettled: the drop stops the stream, which the server will not answer.
                // An h3 GOAWAY carries no error code: NO_ERROR, as classify reads it.
                return Err(SendError::Retry(crate::protocol::RetryReason::Goaway(0)));
            }
        };
        cancel.settled = true;
        read
    }

    fn accepts_requests(&self) -> bool {
        self.state.goaway_id().is_none()
            && self.state.ended.get().is_none()
            && !self.state.closed_locally.load(Ordering::Acquire)
            && self.quic.close_reason().is_none()
    }

    /// Asked as the engine retires the connection, after our close: what the server did
    /// before it is in `idle_at_end`.
    fn close_detail(&self) -> Option<CloseDetail> {
        (self.state.idle_at_end.get() == Some(&true)).then_some(CloseDetail::Idle)
    }

    fn close_cause(&self) -> CloseCause {
        let closed_locally = self.state.closed_locally.load(Ordering::Acquire);
        // Closed by us because the server broke HTTP/3, even after its GOAWAY.
        if closed_locally && matches!(self.state.ended.get(), Some(ErrorKind::H3(_))) {
            return CloseCause::Local;
        }
        if self.state.goaway_id().is_some() {
            return CloseCause::Goaway;
        }
        if closed_locally {
            return CloseCause::Local;
        }
        let ended = self.state.ended.get().copied().or_else(|| {
            self.quic
                .close_reason()
                .map(|r| classify::connection_failure(&r))
        });
        super::connection::close_cause_of(ended)
    }

    fn wire(&self) -> WireBytes {
        let mut wire = super::connection::wire_of(
            &self.quic,
            self.header_sent.get(),
            self.header_received.get(),
        );
        wire.header_decoded_received = self.header_decoded_received.get();
        wire
    }

    fn close(&self) {
        // Ended by the server already, before the background task has seen it.
        if self.quic.close_reason().is_some() {
            self.state.server_ending();
        }
        self.state.closed_locally.store(true, Ordering::Release);
        self.quic
            .close(quinn::VarInt::from_u32(H3_NO_ERROR as u32), b"");
    }

    fn quic_stats(&self) -> Option<QuicStats> {
        Some(super::connection::quic_stats_of(
            &self.quic,
            self.early_requests.get(),
            self.state.early_rejected.load(Ordering::Acquire),
        ))
    }
}

impl Drop for OwnedConnection {
    fn drop(&mut self) {
        // Closing here sends CONNECTION_CLOSE at once rather than at the idle timeout.
        self.quic
            .close(quinn::VarInt::from_u32(H3_NO_ERROR as u32), b"");
        self.background.abort();
    }
}
