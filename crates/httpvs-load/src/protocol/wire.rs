//! Bytes on the wire: an I/O wrapper that shows every byte read or written to a [`WireTap`],
//! and the per-connection [`WireCounter`] behind `Connection::wire()`.
//!
//! Under TLS the counting wrapper sits below TLS (so totals include TLS records), and a
//! protocol's frame tap sits above it (so it sees plaintext frames).

use super::WireBytes;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Sees the bytes of one connection as they cross an I/O boundary.
pub trait WireTap {
    /// `bytes` were written (accepted by the inner writer).
    fn sent(&mut self, bytes: &[u8]);
    /// `bytes` were read.
    fn received(&mut self, bytes: &[u8]);
    /// A read found the end of the stream (the peer's FIN, with or without TLS's close_notify).
    fn closed(&mut self) {}

    /// The most one read takes, when the tap's work per byte is heavy: tokio's task budget
    /// counts reads, not bytes, so a task's poll ends only after 128 reads, and with every
    /// 25-byte `100 Continue` of a 64 KiB read made an event, a trace's `--timeout` and Ctrl-C
    /// waited seconds behind a flood for the poll to end.
    fn read_limit(&self) -> Option<usize> {
        None
    }
}

/// A tap chosen at run time (`httpvs trace`).
pub struct BoxedTap(pub Box<dyn WireTap + Send>);

impl WireTap for BoxedTap {
    /// A trace records an event per frame or head: 4 KiB reads keep a poll of 128 of them
    /// to tens of milliseconds under any flood.
    fn read_limit(&self) -> Option<usize> {
        Some(4096)
    }

    fn sent(&mut self, bytes: &[u8]) {
        self.0.sent(bytes)
    }

    fn received(&mut self, bytes: &[u8]) {
        self.0.received(bytes)
    }

    fn closed(&mut self) {
        self.0.closed()
    }
}

impl std::fmt::Debug for BoxedTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedTap")
    }
}

/// Opt-in taps on the plaintext of each new connection (`httpvs trace`); protocols hold an
/// `Option` of it, so the load path, which leaves it unset, wraps nothing.
#[derive(Clone)]
pub struct PlaintextTaps(Arc<dyn Fn() -> Box<dyn WireTap + Send> + Send + Sync>);

impl PlaintextTaps {
    /// Taps made by `make`, once per connection.
    pub fn new(make: impl Fn() -> Box<dyn WireTap + Send> + Send + Sync + 'static) -> Self {
        PlaintextTaps(Arc::new(make))
    }

    /// A tap for one new connection.
    pub fn make(&self) -> BoxedTap {
        BoxedTap((self.0)())
    }
}

impl std::fmt::Debug for PlaintextTaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlaintextTaps")
    }
}

/// Byte counters of one connection, shared between the connection handle and its I/O.
///
/// Atomics rather than `Cell` so an h2 driver task may own the I/O. Each field has one writer
/// (the connection's worker thread), so an add is a plain load and store ([`add`]): a locked
/// read-modify-write costs ~20 cycles, and h1 made four per request.
#[derive(Debug, Default)]
pub struct WireCounter {
    sent: AtomicU64,
    received: AtomicU64,
    header_sent: AtomicU64,
    header_received: AtomicU64,
    header_decoded_received: AtomicU64,
}

impl WireCounter {
    /// A new zeroed counter, ready to share.
    pub fn new_shared() -> Arc<WireCounter> {
        Arc::new(WireCounter::default())
    }

    /// Adds encoded request header bytes (h1 head, HPACK block).
    pub fn add_header_sent(&self, n: u64) {
        add(&self.header_sent, n);
    }

    /// Adds bytes written to the socket past the counting wrapper (h1's direct writes).
    pub fn add_sent(&self, n: u64) {
        add(&self.sent, n);
    }

    /// Adds bytes read from the socket past the counting wrapper (h1's direct reads).
    pub fn add_received(&self, n: u64) {
        add(&self.received, n);
    }

    /// Adds encoded response header bytes.
    pub fn add_header_received(&self, n: u64) {
        add(&self.header_received, n);
    }

    /// Adds the decoded size (names + values) of a response header block.
    pub fn add_header_decoded_received(&self, n: u64) {
        add(&self.header_decoded_received, n);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> WireBytes {
        WireBytes {
            sent: self.sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            header_sent: self.header_sent.load(Ordering::Relaxed),
            header_received: self.header_received.load(Ordering::Relaxed),
            header_decoded_received: self.header_decoded_received.load(Ordering::Relaxed),
            ..WireBytes::default()
        }
    }
}

/// Adds `n` to a counter only one thread writes (readers may see it a little late).
fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Counts every byte into the shared counter.
#[derive(Debug, Clone)]
pub struct ByteCount(pub Arc<WireCounter>);

impl WireTap for ByteCount {
    fn sent(&mut self, bytes: &[u8]) {
        add(&self.0.sent, bytes.len() as u64);
    }

    fn received(&mut self, bytes: &[u8]) {
        add(&self.0.received, bytes.len() as u64);
    }
}

/// An I/O stream whose traffic is shown to a [`WireTap`].
#[derive(Debug)]
pub struct TapIo<S, T> {
    inner: S,
    tap: T,
}

impl<S, T> TapIo<S, T> {
    /// Wraps `inner`, showing its traffic to `tap`.
    pub fn new(inner: S, tap: T) -> Self {
        TapIo { inner, tap }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The tap.
    pub fn tap(&self) -> &T {
        &self.tap
    }
}

/// A stream counted into a [`WireCounter`].
pub type CountingIo<S> = TapIo<S, ByteCount>;

impl<S: AsyncRead + Unpin, T: WireTap + Unpin> AsyncRead for TapIo<S, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(limit) = this
            .tap
            .read_limit()
            .filter(|&limit| buf.remaining() > limit)
        {
            let mut part = buf.take(limit);
            let poll = Pin::new(&mut *this).poll_read(cx, &mut part);
            let n = part.filled().len();
            // SAFETY: the inner read initialized the first `n` bytes of `part`, which are the
            // first `n` unfilled bytes of `buf`.
            unsafe { buf.assume_init(n) };
            buf.advance(n);
            return poll;
        }
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) => {
                let fresh = &buf.filled()[before..];
                if !fresh.is_empty() {
                    this.tap.received(fresh);
                } else if buf.remaining() > 0 {
                    this.tap.closed();
                }
            }
            // Over TLS a FIN without close_notify is rustls's UnexpectedEof, not an end of
            // stream: the server closed all the same (trace missed the close of an h2 server
            // that sends none, and lingered on).
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => this.tap.closed(),
            _ => {}
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin, T: WireTap + Unpin> AsyncWrite for TapIo<S, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.tap.sent(&buf[..n]);
        }
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = poll {
            let mut left = n;
            for buf in bufs {
                if left == 0 {
                    break;
                }
                let take = left.min(buf.len());
                this.tap.sent(&buf[..take]);
                left -= take;
            }
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(flavor = "current_thread")]
    async fn counts_both_directions() {
        let (a, mut b) = tokio::io::duplex(64);
        let counter = WireCounter::new_shared();
        let mut io = TapIo::new(a, ByteCount(counter.clone()));
        io.write_all(b"hello").await.unwrap();
        let bufs = [IoSlice::new(b"ab"), IoSlice::new(b"cde")];
        let n = io.write_vectored(&bufs).await.unwrap();
        b.write_all(b"world!").await.unwrap();
        let mut got = [0u8; 6];
        io.read_exact(&mut got).await.unwrap();
        let wire = counter.snapshot();
        assert_eq!(wire.sent, 5 + n as u64);
        assert_eq!(wire.received, 6);
    }
}
