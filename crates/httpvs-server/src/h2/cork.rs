//! Write batching for HTTP/2. The h2 crate flushes at the end of every poll, and each accepted
//! stream is one poll, so 32 requests read at once became 32 writes. While the connection task is
//! taking streams that are already read, this wrapper keeps h2's writes in memory ("corked"); when
//! no more are ready, the task uncorks and h2's next flush sends everything in one write.

use bytes::{Buf, BytesMut};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Past this many buffered bytes writes go out even while corked.
const MAX_CORKED: usize = 256 * 1024;

/// The switch the connection task holds.
#[derive(Debug, Default)]
pub struct Cork(AtomicBool);

impl Cork {
    /// Keep writes in memory.
    pub fn close(&self) {
        self.0.store(true, Relaxed);
    }

    /// Let writes (and what was kept) go to the socket at the next flush.
    pub fn open(&self) {
        self.0.store(false, Relaxed);
    }

    fn is_closed(&self) -> bool {
        self.0.load(Relaxed)
    }
}

/// An I/O wrapper whose writes wait in memory while its `Cork` is closed.
pub struct CorkedIo<S> {
    inner: S,
    cork: Arc<Cork>,
    pending: BytesMut,
}

impl<S> CorkedIo<S> {
    /// Wraps `inner`, controlled by `cork`.
    pub fn new(inner: S, cork: Arc<Cork>) -> CorkedIo<S> {
        CorkedIo {
            inner,
            cork,
            pending: BytesMut::new(),
        }
    }
}

impl<S: AsyncWrite + Unpin> CorkedIo<S> {
    /// Writes out what was kept.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CorkedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CorkedIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.len() >= MAX_CORKED {
            std::task::ready!(this.poll_drain(cx))?;
        }
        // Taken into memory either way; an open cork only means "try to send it now".
        this.pending.extend_from_slice(buf);
        if !this.cork.is_closed() {
            if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.cork.is_closed() && this.pending.len() < MAX_CORKED {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
