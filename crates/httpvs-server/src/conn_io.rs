//! The socket wrapper every connection reads and writes through: replays bytes already read (the
//! h2c preface probe) and counts I/O so an idle or stalled connection can be found without a clock
//! read per operation.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Per-connection state shared by its I/O, its requests and its idle watch.
#[derive(Debug, Default)]
pub struct ConnState {
    io_ops: AtomicU64,
    delaying: AtomicU32,
    requests: AtomicU64,
}

impl ConnState {
    /// Counts a request on this connection and returns its 1-based number.
    pub fn next_request(&self) -> u64 {
        self.requests.fetch_add(1, Relaxed) + 1
    }

    /// Waits `delay` while marking the connection busy, so the idle watch leaves it open.
    pub async fn delay(&self, delay: Duration) {
        self.delaying.fetch_add(1, Relaxed);
        tokio::time::sleep(delay).await;
        self.delaying.fetch_sub(1, Relaxed);
    }

    /// Resolves once the connection has had no I/O and no pending delay for `timeout`
    /// (checked in quarter steps, so it fires between 1x and 1.25x the timeout).
    pub async fn idle(&self, timeout: Duration) {
        const STEPS: u32 = 4;
        let tick = (timeout / STEPS).max(Duration::from_millis(1));
        let mut seen = self.io_ops.load(Relaxed);
        let mut quiet = 0;
        loop {
            tokio::time::sleep(tick).await;
            let now = self.io_ops.load(Relaxed);
            if now != seen || self.delaying.load(Relaxed) > 0 {
                seen = now;
                quiet = 0;
            } else {
                quiet += 1;
                if quiet >= STEPS {
                    return;
                }
            }
        }
    }

    fn touch(&self) {
        // A plain load+store: only this connection's task writes it, the watch only reads.
        self.io_ops
            .store(self.io_ops.load(Relaxed).wrapping_add(1), Relaxed);
    }
}

/// A socket with replayed prefix bytes and I/O counting.
pub struct ConnIo<S> {
    inner: S,
    prefix: [u8; 24],
    prefix_pos: usize,
    prefix_len: usize,
    state: std::sync::Arc<ConnState>,
}

impl<S> ConnIo<S> {
    /// Wraps `inner`; `prefix` (at most 24 bytes) is read before anything from the socket.
    pub fn new(inner: S, prefix: &[u8], state: std::sync::Arc<ConnState>) -> ConnIo<S> {
        let mut buf = [0u8; 24];
        let n = prefix.len().min(24);
        buf[..n].copy_from_slice(&prefix[..n]);
        ConnIo {
            inner,
            prefix: buf,
            prefix_pos: 0,
            prefix_len: n,
            state,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ConnIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix_pos < this.prefix_len {
            let rest = &this.prefix[this.prefix_pos..this.prefix_len];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.prefix_pos += n;
            return Poll::Ready(Ok(()));
        }
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if result.is_ready() {
            this.state.touch();
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ConnIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        if result.is_ready() {
            this.state.touch();
        }
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if result.is_ready() {
            this.state.touch();
        }
        result
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
