//! Exact `--max-requests-per-conn` for HTTP/2. The h2 crate's GOAWAY names the highest stream it has
//! *read*, and it reads every frame already in the socket before we see the Nth request; so this
//! reader lets through the frames of the first N client streams, then holds back frames of later
//! streams until the final GOAWAY is out (h2 sends it when the PING ACK of its graceful shutdown
//! arrives). The client then gets exactly N responses, and GOAWAY's last-stream-id is the Nth stream.

use bytes::{Buf, BytesMut};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const PING: u8 = 0x6;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;
/// Held-back bytes beyond this close the connection: a client may not park unbounded data here.
const MAX_HELD: usize = 1 << 20;
/// The largest frame the server takes: SETTINGS_MAX_FRAME_SIZE's initial value (RFC 9113
/// §6.5.2), which the hyper engine leaves as it is.
const MAX_FRAME: usize = 16_384;
/// The payload of the PING the h2 crate's graceful shutdown sends (`h2::frame::Ping::SHUTDOWN`,
/// not public): only its ACK ends the hold. Were it ever to change, the hold would simply never
/// end, and the frames held (of streams past the GOAWAY, which h2 would not serve) stay unread.
const SHUTDOWN_PING: [u8; 8] = [0x0b, 0x7b, 0xa2, 0xf0, 0x8b, 0x9b, 0xfe, 0x54];

/// Set once N client streams have been let through; the connection then starts its GOAWAY.
#[derive(Debug, Default)]
pub struct GateSignal(AtomicBool);

impl GateSignal {
    /// Whether the Nth stream has been let through.
    pub fn is_triggered(&self) -> bool {
        self.0.load(Relaxed)
    }
}

/// Where a frame header sits in the byte stream.
#[derive(Debug, Clone, Copy)]
struct FrameHead {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

fn parse_head(b: &[u8]) -> FrameHead {
    FrameHead {
        len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
        kind: b[3],
        flags: b[4],
        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
    }
}

/// The sans-I/O core: bytes in, bytes the h2 reader may see out.
#[derive(Debug)]
pub struct FrameGate {
    limit: u64,
    opened: u64,
    highest: u32,
    /// Preface bytes still to skip.
    preface_left: usize,
    /// Bytes let through straight, not yet framed (while counting).
    pending: BytesMut,
    phase: Phase,
    /// Bytes the reader may take now.
    ready: BytesMut,
    /// Of `ready`, the first bytes to hand out in one read before releasing `deferred` (PING ACK end).
    release_after: Option<usize>,
    /// Frames of streams past the Nth, in arrival order.
    deferred: BytesMut,
    /// Whether `deferred` holds a header block (HPACK order then matters).
    deferred_headers: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Counting,
    Holding { last_allowed: u32 },
    Open,
}

/// Why the gate refuses more input.
#[derive(Debug)]
pub struct TooMuchHeld;

impl FrameGate {
    /// A gate letting `limit` client streams through.
    pub fn new(limit: u64) -> FrameGate {
        FrameGate {
            limit: limit.max(1),
            opened: 0,
            highest: 0,
            preface_left: PREFACE_LEN,
            pending: BytesMut::new(),
            phase: Phase::Counting,
            ready: BytesMut::new(),
            release_after: None,
            deferred: BytesMut::new(),
            deferred_headers: false,
        }
    }

    /// Whether the Nth stream has gone through.
    pub fn triggered(&self) -> bool {
        self.phase != Phase::Counting
    }

    /// Feeds bytes read from the socket.
    pub fn push(&mut self, mut data: &[u8]) -> Result<(), TooMuchHeld> {
        if self.preface_left > 0 {
            let n = self.preface_left.min(data.len());
            self.ready.extend_from_slice(&data[..n]);
            self.preface_left -= n;
            data = &data[n..];
        }
        self.pending.extend_from_slice(data);
        while self.pending.len() >= FRAME_HEADER_LEN && self.phase != Phase::Open {
            let head = parse_head(&self.pending);
            if head.len > MAX_FRAME {
                // A frame too large for the server: h2 answers its header with GOAWAY
                // FRAME_SIZE_ERROR, so it goes straight through (held here, it waited for 16
                // MiB, and the client for an answer). Frames held are dropped unread: the
                // connection ends at this one, and they were past the limit.
                self.deferred.clear();
                self.deferred_headers = false;
                self.release_after = None;
                self.phase = Phase::Open;
                break;
            }
            let total = FRAME_HEADER_LEN + head.len;
            if self.pending.len() < total {
                break;
            }
            let frame = self.pending.split_to(total);
            self.route(head, &frame);
        }
        if self.phase == Phase::Open {
            let rest = self.pending.split();
            self.ready.extend_from_slice(&rest);
        }
        if self.pending.len() + self.deferred.len() > MAX_HELD {
            return Err(TooMuchHeld);
        }
        Ok(())
    }

    fn route(&mut self, head: FrameHead, frame: &[u8]) {
        match self.phase {
            Phase::Open => self.ready.extend_from_slice(frame),
            Phase::Counting => {
                self.ready.extend_from_slice(frame);
                let opens =
                    head.kind == HEADERS && head.stream % 2 == 1 && head.stream > self.highest;
                if opens {
                    self.highest = head.stream;
                    self.opened += 1;
                }
                let block_ends = head.kind == HEADERS || head.kind == CONTINUATION;
                let at_limit_stream = head.stream == self.highest && self.opened >= self.limit;
                if block_ends && head.flags & END_HEADERS != 0 && at_limit_stream {
                    self.phase = Phase::Holding {
                        last_allowed: self.highest,
                    };
                }
            }
            Phase::Holding { last_allowed } => {
                let header_block = head.kind == HEADERS || head.kind == CONTINUATION;
                if head.stream > last_allowed {
                    self.deferred_headers |= header_block;
                    self.deferred.extend_from_slice(frame);
                } else if header_block && self.deferred_headers {
                    // A header block of an earlier stream after a held one: HPACK needs the
                    // original order, so give up exactness and let everything through in order.
                    self.open_all();
                    self.ready.extend_from_slice(frame);
                } else {
                    self.ready.extend_from_slice(frame);
                    let ping_ack = head.kind == PING && head.flags & ACK != 0;
                    // A client's unasked ACK (or one to another PING) let streams past the
                    // limit through: 8 answered under a limit of 3.
                    if ping_ack && frame[FRAME_HEADER_LEN..] == SHUTDOWN_PING {
                        // h2 sends its final GOAWAY when it reads this ACK; release the rest after.
                        self.release_after = Some(self.ready.len());
                        self.phase = Phase::Open;
                    }
                }
            }
        }
    }

    fn open_all(&mut self) {
        let deferred = self.deferred.split();
        self.ready.extend_from_slice(&deferred);
        self.deferred_headers = false;
        self.phase = Phase::Open;
    }

    /// Copies out bytes the reader may see now; returns how many.
    pub fn take(&mut self, out: &mut [u8]) -> usize {
        let limit = self.release_after.unwrap_or(self.ready.len());
        let n = out.len().min(limit);
        out[..n].copy_from_slice(&self.ready[..n]);
        self.ready.advance(n);
        if let Some(at) = self.release_after.as_mut() {
            *at -= n;
            if *at == 0 {
                self.release_after = None;
                let rest = self.ready.split();
                let deferred = self.deferred.split();
                self.ready.extend_from_slice(&deferred);
                self.ready.extend_from_slice(&rest);
                self.deferred_headers = false;
            }
        }
        n
    }

    /// Whether bytes are waiting for the reader.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }
}

/// An I/O wrapper that runs reads through a `FrameGate`; writes pass untouched.
pub struct GatedIo<S> {
    inner: S,
    gate: FrameGate,
    signal: Arc<GateSignal>,
    scratch: Box<[u8]>,
    eof: bool,
}

impl<S> GatedIo<S> {
    /// Wraps `inner`, letting `limit` client streams through; `signal` reports the trigger.
    pub fn new(inner: S, limit: u64, signal: Arc<GateSignal>) -> GatedIo<S> {
        GatedIo {
            inner,
            gate: FrameGate::new(limit),
            signal,
            scratch: vec![0u8; 16 * 1024].into_boxed_slice(),
            eof: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for GatedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.gate.has_ready() {
                let n = this.gate.take(buf.initialize_unfilled());
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut scratch = ReadBuf::new(&mut this.scratch);
            std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut scratch))?;
            if scratch.filled().is_empty() {
                this.eof = true;
                continue;
            }
            this.gate.push(scratch.filled()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "too much data past GOAWAY")
            })?;
            if this.gate.triggered() {
                this.signal.0.store(true, Relaxed);
            }
        }
    }
}

crate::io_util::write_through_inner!(GatedIo);

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn drain(gate: &mut FrameGate) -> Vec<u8> {
        let mut out = vec![0u8; 1 << 16];
        let n = gate.take(&mut out);
        out.truncate(n);
        out
    }

    #[test]
    fn holds_streams_past_the_limit_until_ping_ack() {
        let mut gate = FrameGate::new(2);
        let mut input = vec![b'P'; PREFACE_LEN];
        let h1 = frame(HEADERS, END_HEADERS | 1, 1, b"a");
        let h3 = frame(HEADERS, END_HEADERS | 1, 3, b"b");
        let h5 = frame(HEADERS, END_HEADERS | 1, 5, b"c");
        let settings = frame(0x4, 0, 0, b"");
        for f in [&h1, &h3, &h5, &settings] {
            input.extend_from_slice(f);
        }
        gate.push(&input).unwrap();
        assert!(gate.triggered());
        let first = drain(&mut gate);
        let expected: Vec<u8> = [&input[..PREFACE_LEN], &h1, &h3, &settings].concat();
        assert_eq!(first, expected, "stream 5 is held back");
        // An ACK the server never asked for is let through, and holds nothing back.
        let unasked = frame(PING, ACK, 0, &[0; 8]);
        gate.push(&unasked).unwrap();
        assert_eq!(drain(&mut gate), unasked);
        assert_eq!(drain(&mut gate), b"", "stream 5 is still held");
        let ack = frame(PING, ACK, 0, &SHUTDOWN_PING);
        gate.push(&ack).unwrap();
        assert_eq!(drain(&mut gate), ack, "the ACK comes alone");
        assert_eq!(drain(&mut gate), h5, "then what was held");
    }

    #[test]
    fn a_frame_too_large_goes_straight_through() {
        let mut gate = FrameGate::new(1);
        let mut input = vec![b'P'; PREFACE_LEN];
        input.extend(frame(HEADERS, END_HEADERS | 1, 1, b"a"));
        let held = frame(HEADERS, END_HEADERS | 1, 3, b"b");
        input.extend_from_slice(&held);
        gate.push(&input).unwrap();
        drain(&mut gate);
        // A header claiming 16 MiB: h2 must see it now to refuse it.
        let huge = [0xff, 0xff, 0xff, 0x0, 0x0, 0, 0, 0, 1, b'x'];
        gate.push(&huge).unwrap();
        assert_eq!(drain(&mut gate), huge, "not held, and stream 3 dropped");
    }

    #[test]
    fn counts_across_split_reads_and_continuations() {
        let mut gate = FrameGate::new(1);
        let mut input = vec![b'P'; PREFACE_LEN];
        input.extend(frame(HEADERS, 0, 1, b"x"));
        input.extend(frame(CONTINUATION, END_HEADERS, 1, b"y"));
        for byte in &input {
            assert!(!gate.triggered());
            gate.push(std::slice::from_ref(byte)).unwrap();
        }
        assert!(gate.triggered());
        assert_eq!(drain(&mut gate), input);
    }

    #[test]
    fn trailers_and_data_of_allowed_streams_pass_while_holding() {
        let mut gate = FrameGate::new(1);
        let mut input = vec![b'P'; PREFACE_LEN];
        input.extend(frame(HEADERS, END_HEADERS, 1, b"x"));
        gate.push(&input).unwrap();
        drain(&mut gate);
        let data = frame(0x0, 1, 1, b"body");
        let later = frame(HEADERS, END_HEADERS | 1, 3, b"z");
        gate.push(&[later.clone(), data.clone()].concat()).unwrap();
        assert_eq!(drain(&mut gate), data);
        let trailer = frame(HEADERS, END_HEADERS | 1, 1, b"t");
        gate.push(&trailer).unwrap();
        assert_eq!(
            drain(&mut gate),
            [later, trailer].concat(),
            "HPACK order kept"
        );
    }
}
