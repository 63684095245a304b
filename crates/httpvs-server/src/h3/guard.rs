//! A bound on the HTTP/3 frames a client can make the server hold: the h3 crate buffers every
//! frame but DATA whole before it looks at it (its `max_field_section_size` is checked on the
//! complete HEADERS), so a 20 MiB HEADERS frame cost 20 MiB a stream, 400 MB for 16. This wraps
//! h3-quinn's connection and, on each request stream, reads the frame headers as the bytes go by:
//! a frame other than DATA that announces more than the bound is refused before its payload is
//! held (both ways, H3_EXCESSIVE_LOAD). The client's control stream is bounded the same way.

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use httpvs_h2wire::varint::PartialVarint;
use std::task::{ready, Context, Poll};

/// H3_EXCESSIVE_LOAD (RFC 9114 §8.1): what a stream that announced an oversized frame gets.
pub const H3_EXCESSIVE_LOAD: u64 = 0x107;

/// HTTP/3 frame type DATA: its payload streams through the h3 crate, so it is not bounded here.
const FRAME_DATA: u64 = 0x00;
/// The unidirectional stream type of a control stream.
const CONTROL_STREAM: u64 = 0x00;

/// h3-quinn's connection with [`FrameBound`] on every request stream it accepts.
pub struct Guarded {
    inner: h3_quinn::Connection,
    /// The largest payload a frame other than DATA may announce.
    max_frame: u64,
}

impl Guarded {
    /// `quic` with frames other than DATA bounded to `max_frame` payload bytes.
    pub fn new(quic: quinn::Connection, max_frame: u64) -> Guarded {
        Guarded {
            inner: h3_quinn::Connection::new(quic),
            max_frame,
        }
    }
}

impl<B: Buf> quic::Connection<B> for Guarded {
    type RecvStream = GuardedRecv;
    type OpenStreams = GuardedOpener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        let stream = ready!(quic::Connection::<B>::poll_accept_recv(&mut self.inner, cx))?;
        let id = quic::RecvStream::recv_id(&stream);
        Poll::Ready(Ok(GuardedRecv {
            inner: stream,
            guard: RecvGuard::new(id, FrameBound::uni(self.max_frame)),
        }))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let stream = ready!(quic::Connection::<B>::poll_accept_bidi(&mut self.inner, cx))?;
        Poll::Ready(Ok(GuardedBidi::new(stream, self.max_frame)))
    }

    fn opener(&self) -> Self::OpenStreams {
        GuardedOpener {
            inner: quic::Connection::<B>::opener(&self.inner),
            max_frame: self.max_frame,
        }
    }
}

/// Both the connection and its opener open streams; the bidirectional ones they open (the
/// server opens none) are bounded as the accepted ones are.
macro_rules! open_streams {
    ($ty:ty) => {
        impl<B: Buf> quic::OpenStreams<B> for $ty {
            type SendStream = h3_quinn::SendStream<B>;
            type BidiStream = GuardedBidi<B>;

            fn poll_open_bidi(
                &mut self,
                cx: &mut Context<'_>,
            ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
                let stream = ready!(quic::OpenStreams::<B>::poll_open_bidi(&mut self.inner, cx))?;
                Poll::Ready(Ok(GuardedBidi::new(stream, self.max_frame)))
            }

            fn poll_open_send(
                &mut self,
                cx: &mut Context<'_>,
            ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
                quic::OpenStreams::<B>::poll_open_send(&mut self.inner, cx)
            }

            fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
                quic::OpenStreams::<B>::close(&mut self.inner, code, reason);
            }
        }
    };
}

open_streams!(Guarded);
open_streams!(GuardedOpener);

/// h3-quinn's stream opener, for [`Guarded`].
pub struct GuardedOpener {
    inner: h3_quinn::OpenStreams,
    max_frame: u64,
}

/// A request stream whose received frames are bounded (by its [`RecvGuard`]).
pub struct GuardedBidi<B: Buf> {
    inner: h3_quinn::BidiStream<B>,
    guard: RecvGuard,
}

impl<B: Buf> GuardedBidi<B> {
    fn new(inner: h3_quinn::BidiStream<B>, max_frame: u64) -> GuardedBidi<B> {
        GuardedBidi {
            guard: RecvGuard::new(
                quic::SendStream::<B>::send_id(&inner),
                FrameBound::new(max_frame),
            ),
            inner,
        }
    }
}

impl<B: Buf> quic::BidiStream<B> for GuardedBidi<B> {
    type SendStream = h3_quinn::SendStream<B>;
    type RecvStream = GuardedRecv;

    fn split(self) -> (Self::SendStream, Self::RecvStream) {
        let (send, recv) = self.inner.split();
        let guard = self.guard;
        (send, GuardedRecv { inner: recv, guard })
    }
}

impl<B: Buf> quic::RecvStream for GuardedBidi<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Self::Buf>, StreamErrorIncoming>> {
        let polled = self.guard.poll_data(&mut self.inner, cx);
        if self.guard.bound.refused() {
            // Refused both ways: the client learns at once, not from a stream that goes quiet.
            quic::SendStream::<B>::reset(&mut self.inner, H3_EXCESSIVE_LOAD);
        }
        polled
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.guard.stop_sending(&mut self.inner, error_code);
    }

    fn recv_id(&self) -> StreamId {
        self.guard.id
    }
}

impl<B: Buf> quic::SendStream<B> for GuardedBidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        quic::SendStream::<B>::poll_ready(&mut self.inner, cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        quic::SendStream::<B>::send_data(&mut self.inner, data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        quic::SendStream::<B>::poll_finish(&mut self.inner, cx)
    }

    fn reset(&mut self, reset_code: u64) {
        quic::SendStream::<B>::reset(&mut self.inner, reset_code);
    }

    fn send_id(&self) -> StreamId {
        quic::SendStream::<B>::send_id(&self.inner)
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for GuardedBidi<B> {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        quic::SendStreamUnframed::<B>::poll_send(&mut self.inner, cx, buf)
    }
}

/// A receiving stream bounded as [`GuardedBidi`]'s is: the half of a split one, or a
/// unidirectional stream of the client's (its control stream is bounded as request streams
/// are; the others pass as they are).
pub struct GuardedRecv {
    inner: h3_quinn::RecvStream,
    guard: RecvGuard,
}

impl quic::RecvStream for GuardedRecv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Self::Buf>, StreamErrorIncoming>> {
        self.guard.poll_data(&mut self.inner, cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.guard.stop_sending(&mut self.inner, error_code);
    }

    fn recv_id(&self) -> StreamId {
        self.guard.id
    }
}

/// What the guarded streams add to h3-quinn's receiving side: the frame bound, and no panic.
/// While a read is pending, h3-quinn's receive side has moved its quinn stream into the read,
/// and its `stop_sending` or `recv_id` would unwrap `None` (a client that stalls its upload,
/// then the server asks it to stop). The id is kept from the start, and a stop asked for while
/// a read is pending is left to the stream's drop.
struct RecvGuard {
    bound: FrameBound,
    id: StreamId,
    read_pending: bool,
}

impl RecvGuard {
    fn new(id: StreamId, bound: FrameBound) -> RecvGuard {
        RecvGuard {
            bound,
            id,
            read_pending: false,
        }
    }

    /// `inner`'s next read, checked against the bound; a refusal asks the client to stop.
    fn poll_data<R: quic::RecvStream<Buf = Bytes>>(
        &mut self,
        inner: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.read_pending = true;
        let data = ready!(inner.poll_data(cx));
        self.read_pending = false;
        let checked = self.bound.check(data);
        if checked.is_err() {
            inner.stop_sending(H3_EXCESSIVE_LOAD);
        }
        Poll::Ready(checked)
    }

    fn stop_sending<R: quic::RecvStream>(&mut self, inner: &mut R, error_code: u64) {
        if !self.read_pending {
            inner.stop_sending(error_code);
        }
    }
}

/// Reads a request stream's frame headers (type and length varints, RFC 9114 §7.1) as its bytes
/// pass, skipping payloads, and refuses a frame other than DATA announcing over `max_frame`.
#[derive(Debug, Clone, Copy)]
pub struct FrameBound {
    max_frame: u64,
    state: State,
    /// The varint being read, across the chunks it may span.
    varint: PartialVarint,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A unidirectional stream's type, before its frames.
    StreamType,
    /// Not a stream of frames bounded here (QPACK's, or a type the h3 crate refuses).
    Pass,
    FrameType,
    FrameLength {
        ty: u64,
    },
    Skip {
        remaining: u64,
    },
    Refused,
}

impl FrameBound {
    /// A bound of `max_frame` payload bytes for frames other than DATA.
    pub fn new(max_frame: u64) -> FrameBound {
        FrameBound {
            max_frame,
            state: State::FrameType,
            varint: PartialVarint::default(),
        }
    }

    /// The same bound on a unidirectional stream: on the control stream (type 0x00), whose
    /// frames the h3 crate reads as it reads a request's; other types pass.
    pub fn uni(max_frame: u64) -> FrameBound {
        FrameBound {
            state: State::StreamType,
            ..FrameBound::new(max_frame)
        }
    }

    /// Whether the stream announced a frame over the bound.
    fn refused(&self) -> bool {
        self.state == State::Refused
    }

    /// Passes a read through, or refuses it once the stream has announced an oversized frame.
    fn check(
        &mut self,
        data: Result<Option<Bytes>, StreamErrorIncoming>,
    ) -> Result<Option<Bytes>, StreamErrorIncoming> {
        let refused = || StreamErrorIncoming::StreamTerminated {
            error_code: H3_EXCESSIVE_LOAD,
        };
        if self.state == State::Refused {
            return Err(refused());
        }
        if let Ok(Some(bytes)) = &data {
            if !self.feed(bytes) {
                return Err(refused());
            }
        }
        data
    }

    /// Feeds the next bytes of the stream; false once a frame over the bound is announced.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            match self.state {
                State::Refused => return false,
                State::Pass => return true,
                State::Skip { remaining } => {
                    let step = remaining.min(bytes.len() as u64);
                    bytes = &bytes[step as usize..];
                    self.state = if step == remaining {
                        State::FrameType
                    } else {
                        State::Skip {
                            remaining: remaining - step,
                        }
                    };
                }
                State::StreamType | State::FrameType | State::FrameLength { .. } => {
                    let (value, used) = self.varint.push(bytes);
                    bytes = &bytes[used..];
                    if let Some(value) = value {
                        self.on_varint(value);
                    }
                }
            }
        }
        self.state != State::Refused
    }

    fn on_varint(&mut self, value: u64) {
        self.state = match self.state {
            State::StreamType if value == CONTROL_STREAM => State::FrameType,
            State::StreamType => State::Pass,
            State::FrameType => State::FrameLength { ty: value },
            State::FrameLength { ty } if ty != FRAME_DATA && value > self.max_frame => {
                State::Refused
            }
            State::FrameLength { .. } if value == 0 => State::FrameType,
            State::FrameLength { .. } => State::Skip { remaining: value },
            other => other,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame header: type and length as varints (one or two bytes here).
    fn header(ty: u8, len: u16) -> Vec<u8> {
        let mut out = vec![ty];
        if len < 64 {
            out.push(len as u8);
        } else {
            out.extend_from_slice(&(len | 0x4000).to_be_bytes());
        }
        out
    }

    #[test]
    fn frames_within_the_bound_pass_in_any_chunking() {
        let mut stream = header(0x01, 100);
        stream.extend(vec![0u8; 100]);
        stream.extend(header(0x00, 5000));
        stream.extend(vec![1u8; 5000]);
        stream.extend(header(0x21, 0));
        for size in [1, 3, 7, 4096] {
            let mut bound = FrameBound::new(100);
            assert!(
                stream.chunks(size).all(|c| bound.feed(c)),
                "chunks of {size}"
            );
        }
    }

    /// A HEADERS frame, or an unknown one (the h3 crate buffers both whole), over the bound is
    /// refused at its header, before its payload; DATA of any length passes.
    #[test]
    fn an_oversized_frame_other_than_data_is_refused_at_its_header() {
        let mut bound = FrameBound::new(100);
        assert!(!bound.feed(&header(0x01, 101)));
        assert!(!bound.feed(&[0]), "stays refused");
        let mut unknown = FrameBound::new(100);
        let mut stream = header(0x01, 2);
        stream.extend([0, 0]);
        stream.extend(header(0x21, 1000));
        assert!(!stream.chunks(1).all(|c| unknown.feed(c)));
        let mut data = FrameBound::new(100);
        assert!(data.feed(&header(0x00, 16_000)));
    }

    /// On the client's control stream every frame is bounded (the h3 crate holds an unknown
    /// one whole before it skips it); QPACK's streams pass.
    #[test]
    fn the_control_stream_is_bounded_and_other_uni_streams_pass() {
        let mut control = vec![0x00];
        control.extend(header(0x04, 0));
        control.extend(header(0x21, 1000));
        let mut bound = FrameBound::uni(100);
        assert!(!control.chunks(2).all(|c| bound.feed(c)));
        let mut encoder = vec![0x02];
        encoder.extend(vec![0xff; 5000]);
        let mut bound = FrameBound::uni(100);
        assert!(bound.feed(&encoder));
    }
}
