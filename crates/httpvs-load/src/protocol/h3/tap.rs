//! A pass-through layer between h3 and h3-quinn that watches HTTP/3 frame headers go by.
//!
//! h3 keeps the GOAWAY stream id and the QPACK-encoded header sizes to itself. This layer wraps
//! h3-quinn's connection and streams (it implements h3's public `quic` traits by delegation) and
//! feeds what they carry to [`FrameScanner`]s, recording into a shared [`TapCounters`]:
//! request HEADERS sent, response HEADERS received, and the server's GOAWAY id.

use super::frames::{read_frame_header, FrameEvent, FrameScanner, FRAME_DATA, FRAME_HEADERS};
use super::qpack::MAX_FIELD_SECTION;
use super::response::H3_EXCESSIVE_LOAD;
use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Opt-in observer of what the tap sees (`httpvs trace`); the load path leaves it unset.
pub trait H3TapObserver: Send + Sync {
    /// The QUIC connection HTTP/3 is about to run on.
    fn quic_connected(&self, conn: &quinn::Connection);
    /// A request stream was opened.
    fn stream_opened(&self, stream: u64);
    /// A frame header (or a GOAWAY id) went by on `stream`; `sent` is client to server.
    fn frame(&self, stream: u64, sent: bool, event: FrameEvent);
    /// One side of `stream` finished (our FIN sent, or the peer's FIN read).
    fn stream_finished(&self, stream: u64, sent: bool);
}

/// What the tap saw on one connection; shared with the connection handle.
pub struct TapCounters {
    /// QPACK-encoded request header bytes sent (HEADERS frame payloads).
    pub header_sent: AtomicU64,
    /// QPACK-encoded response header bytes received (HEADERS frame payloads, trailers included).
    pub header_received: AtomicU64,
    /// The lowest GOAWAY stream id received; `u64::MAX` while none.
    goaway: AtomicU64,
    /// `httpvs trace` only.
    pub observer: Option<Arc<dyn H3TapObserver>>,
    /// The QUIC connection, to close when the server announces a frame too large to hold.
    quic: std::sync::OnceLock<quinn::Connection>,
    /// The tap closed the connection for such a frame (H3_EXCESSIVE_LOAD).
    excessive: std::sync::atomic::AtomicBool,
    /// Request streams whose FIN was read, with how their response ended, not yet taken by
    /// [`TapCounters::take_fin`]; a stream's entry goes when it is dropped, so at most the
    /// streams open are kept (and never more than [`FINS_KEPT`], the oldest dropped).
    fins: std::sync::Mutex<std::collections::VecDeque<(u64, ResponseEnd)>>,
}

/// Request-stream FINs kept for [`TapCounters::take_fin`].
const FINS_KEPT: usize = 1024;

/// How a response stream ended, as the tap saw its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseEnd {
    /// DATA payload bytes that came (not announced).
    pub data_bytes: u64,
    /// The FIN came inside a frame, which it cut short.
    pub cut: bool,
}

impl Default for TapCounters {
    fn default() -> Self {
        TapCounters {
            header_sent: AtomicU64::new(0),
            header_received: AtomicU64::new(0),
            goaway: AtomicU64::new(u64::MAX),
            observer: None,
            quic: std::sync::OnceLock::new(),
            excessive: std::sync::atomic::AtomicBool::new(false),
            fins: std::sync::Mutex::new(std::collections::VecDeque::new()),
        }
    }
}

impl std::fmt::Debug for TapCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapCounters")
            .field("header_sent", &self.header_sent)
            .field("header_received", &self.header_received)
            .field("goaway", &self.goaway)
            .finish_non_exhaustive()
    }
}

impl TapCounters {
    /// Zeroed counters whose frames also go to `observer`.
    pub fn observed(observer: Option<Arc<dyn H3TapObserver>>) -> Self {
        TapCounters {
            observer,
            ..TapCounters::default()
        }
    }

    /// Shows a received chunk of `stream` to the observer, if any (`None`: its FIN).
    fn observe_received(
        &self,
        stream: StreamId,
        chunk: Option<&Bytes>,
        scanner: &mut FrameScanner,
    ) {
        let id = stream.into_inner();
        match (chunk, &self.observer) {
            (Some(bytes), Some(observer)) => scanner.feed(bytes, |e| {
                self.record(e, &self.header_received);
                observer.frame(id, false, e);
            }),
            (Some(bytes), None) => scanner.feed(bytes, |e| self.record(e, &self.header_received)),
            (None, Some(observer)) => observer.stream_finished(id, false),
            (None, None) => {}
        }
    }

    /// The stream id in the server's GOAWAY, once one arrived.
    pub fn goaway_id(&self) -> Option<u64> {
        match self.goaway.load(Ordering::Acquire) {
            u64::MAX => None,
            id => Some(id),
        }
    }

    /// Whether the tap closed the connection for a frame too large to hold.
    pub fn closed_for_excessive_load(&self) -> bool {
        self.excessive.load(Ordering::Acquire)
    }

    /// Once `stream`'s FIN has been read, how its response ended (taken: asked again, `None`).
    pub fn take_fin(&self, stream: u64) -> Option<ResponseEnd> {
        let mut fins = self.fins.lock().unwrap_or_else(|p| p.into_inner());
        let at = fins.iter().position(|&(id, _)| id == stream)?;
        fins.remove(at).map(|(_, end)| end)
    }

    fn fin_read(&self, stream: u64, end: ResponseEnd) {
        let mut fins = self.fins.lock().unwrap_or_else(|p| p.into_inner());
        if fins.len() == FINS_KEPT {
            fins.pop_front();
        }
        fins.push_back((stream, end));
    }

    fn record(&self, event: FrameEvent, headers: &AtomicU64) {
        match event {
            // h3 holds every frame but DATA whole before it reads it: one announced past a
            // field section's limit (a HEADERS of 2^62 bytes, an endless reserved frame or
            // SETTINGS) grew memory as fast as the server sent, 400 MB in a 25 s trace. The
            // connection ends with H3_EXCESSIVE_LOAD, as the owned client ends it for such a
            // HEADERS; the owned client skips a large unknown frame, which this client (for
            // `trace`, and the differential tests) cannot hold and so refuses.
            FrameEvent::Frame { ty, len } if ty != FRAME_DATA && len > MAX_FIELD_SECTION as u64 => {
                if let Some(quic) = self.quic.get() {
                    self.excessive.store(true, Ordering::Release);
                    let code = quinn::VarInt::from_u64(H3_EXCESSIVE_LOAD).unwrap_or_default();
                    quic.close(code, b"a frame too large to hold");
                }
            }
            FrameEvent::Frame { ty, len } if ty == FRAME_HEADERS => {
                headers.fetch_add(len, Ordering::Relaxed);
            }
            FrameEvent::Goaway(id) => {
                // A later GOAWAY may only lower the id (RFC 9114 §5.2); keep the lowest.
                self.goaway.fetch_min(id, Ordering::AcqRel);
            }
            FrameEvent::Frame { .. } => {}
        }
    }
}

/// h3-quinn's connection with a tap on the streams it hands to h3.
pub struct TappedConnection {
    inner: h3_quinn::Connection,
    counters: Arc<TapCounters>,
}

impl TappedConnection {
    /// Wraps a QUIC connection, recording into `counters`.
    pub fn new(conn: quinn::Connection, counters: Arc<TapCounters>) -> Self {
        let _ = counters.quic.set(conn.clone());
        TappedConnection {
            inner: h3_quinn::Connection::new(conn),
            counters,
        }
    }
}

impl quic::Connection<Bytes> for TappedConnection {
    type RecvStream = TappedRecv<h3_quinn::RecvStream>;
    type OpenStreams = TappedOpener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        let inner = std::task::ready!(quic::Connection::<Bytes>::poll_accept_recv(
            &mut self.inner,
            cx
        ))?;
        Poll::Ready(Ok(TappedRecv {
            inner,
            scanner: FrameScanner::uni_stream(),
            counters: self.counters.clone(),
        }))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let inner = std::task::ready!(quic::Connection::<Bytes>::poll_accept_bidi(
            &mut self.inner,
            cx
        ))?;
        Poll::Ready(Ok(TappedBidi::new(inner, self.counters.clone())))
    }

    fn opener(&self) -> Self::OpenStreams {
        TappedOpener {
            inner: quic::Connection::<Bytes>::opener(&self.inner),
            counters: self.counters.clone(),
        }
    }
}

impl quic::OpenStreams<Bytes> for TappedConnection {
    type BidiStream = TappedBidi;
    type SendStream = h3_quinn::SendStream<Bytes>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        let inner = std::task::ready!(self.inner.poll_open_bidi(cx))?;
        Poll::Ready(Ok(TappedBidi::new(inner, self.counters.clone())))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.inner.poll_open_send(cx)
    }

    fn close(&mut self, code: Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.inner, code, reason)
    }
}

/// Opens request streams for `SendRequest` clones, each with a tap.
pub struct TappedOpener {
    inner: h3_quinn::OpenStreams,
    counters: Arc<TapCounters>,
}

impl Clone for TappedOpener {
    fn clone(&self) -> Self {
        TappedOpener {
            inner: self.inner.clone(),
            counters: self.counters.clone(),
        }
    }
}

impl quic::OpenStreams<Bytes> for TappedOpener {
    type BidiStream = TappedBidi;
    type SendStream = h3_quinn::SendStream<Bytes>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        let inner = std::task::ready!(self.inner.poll_open_bidi(cx))?;
        Poll::Ready(Ok(TappedBidi::new(inner, self.counters.clone())))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.inner.poll_open_send(cx)
    }

    fn close(&mut self, code: Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.inner, code, reason)
    }
}

/// A receive stream whose bytes pass through a frame scanner.
pub struct TappedRecv<S> {
    inner: S,
    scanner: FrameScanner,
    counters: Arc<TapCounters>,
}

impl<S: quic::RecvStream<Buf = Bytes>> quic::RecvStream for TappedRecv<S> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let chunk = std::task::ready!(self.inner.poll_data(cx))?;
        let id = self.inner.recv_id();
        self.counters
            .observe_received(id, chunk.as_ref(), &mut self.scanner);
        Poll::Ready(Ok(chunk))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

/// A request stream: sends are measured frame by frame, receives pass through a scanner.
pub struct TappedBidi {
    inner: h3_quinn::BidiStream<Bytes>,
    scanner: FrameScanner,
    counters: Arc<TapCounters>,
}

impl Drop for TappedBidi {
    /// A FIN no response read took (its head failed) goes with its stream.
    fn drop(&mut self) {
        let id = quic::RecvStream::recv_id(&self.inner).into_inner();
        let _ = self.counters.take_fin(id);
    }
}

impl TappedBidi {
    fn new(inner: h3_quinn::BidiStream<Bytes>, counters: Arc<TapCounters>) -> Self {
        if let Some(observer) = &counters.observer {
            observer.stream_opened(quic::SendStream::<Bytes>::send_id(&inner).into_inner());
        }
        TappedBidi {
            inner,
            scanner: FrameScanner::request_stream(),
            counters,
        }
    }
}

impl quic::RecvStream for TappedBidi {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let chunk = std::task::ready!(self.inner.poll_data(cx))?;
        let id = self.inner.recv_id();
        self.counters
            .observe_received(id, chunk.as_ref(), &mut self.scanner);
        if chunk.is_none() {
            let end = ResponseEnd {
                data_bytes: self.scanner.data_bytes(),
                cut: self.scanner.inside_a_frame(),
            };
            self.counters.fin_read(id.into_inner(), end);
        }
        Poll::Ready(Ok(chunk))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl quic::SendStream<Bytes> for TappedBidi {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        let frame: WriteBuf<Bytes> = data.into();
        // Each write on a request stream is one frame whose encoded header is the first chunk.
        let header = read_frame_header(frame.chunk());
        if let Some((FRAME_HEADERS, len)) = header {
            self.counters.header_sent.fetch_add(len, Ordering::Relaxed);
        }
        if let (Some((ty, len)), Some(observer)) = (header, &self.counters.observer) {
            observer.frame(
                self.inner.send_id().into_inner(),
                true,
                FrameEvent::Frame { ty, len },
            );
        }
        self.inner.send_data(frame)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        let poll = self.inner.poll_finish(cx);
        if let (Poll::Ready(Ok(())), Some(observer)) = (&poll, &self.counters.observer) {
            observer.stream_finished(self.inner.send_id().into_inner(), true);
        }
        poll
    }

    fn reset(&mut self, reset_code: u64) {
        self.inner.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.inner.send_id()
    }
}
