//! The read and write halves of one connection's transport, for a connection that never
//! leaves its worker thread: an `Rc<RefCell<_>>` where tokio's `split` takes a mutex (two
//! atomic operations) on every read, write and flush poll.

use crate::protocol::tcp::Transport;
use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One half of a transport; both halves reach the same stream. A poll borrows the stream
/// only for its own duration, and the halves are polled on one thread, never re-entrantly.
#[derive(Debug)]
pub struct IoHalf(Rc<RefCell<Transport>>);

/// The transport as a (read, write) pair of halves.
pub fn split(transport: Transport) -> (IoHalf, IoHalf) {
    let shared = Rc::new(RefCell::new(transport));
    (IoHalf(shared.clone()), IoHalf(shared))
}

impl AsyncRead for IoHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

impl AsyncWrite for IoHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.borrow().is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_shutdown(cx)
    }
}
