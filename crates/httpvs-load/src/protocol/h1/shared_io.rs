//! The read and write halves of one connection's transport, for a connection that never
//! leaves its worker thread: an `Rc<RefCell<_>>` where tokio's `split` takes a mutex (two
//! atomic operations) on every read, write and flush poll.
//!
//! On plain TCP the read half can also read straight from the socket once tokio reports it
//! readable ([`IoHalf::poll_read_plain`]), past the read future, the transport's layers and
//! the counting wrapper.

use crate::protocol::tcp::{peek_now, recv_now, Transport};
use bytes::{BufMut, BytesMut};
use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// One half of a transport; both halves reach the same stream. A poll borrows the stream
/// only for its own duration, and the halves are polled on one thread, never re-entrantly.
#[derive(Debug)]
pub struct IoHalf(Rc<RefCell<Transport>>);

/// The transport as a (read, write) pair of halves.
pub fn split(transport: Transport) -> (IoHalf, IoHalf) {
    let shared = Rc::new(RefCell::new(transport));
    (IoHalf(shared.clone()), IoHalf(shared))
}

/// What an idle connection's server did since the last response ([`IoHalf::peer_spoke`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spoke {
    /// Nothing: the connection may carry the next request.
    Nothing,
    /// It closed or reset the connection, or said 408 ahead of closing it (an idle timeout).
    Closed,
    /// It sent bytes no request asked for (an extra response, stray bytes).
    Unasked,
}

impl IoHalf {
    /// Whether the transport is plain TCP (reads may use [`IoHalf::poll_read_plain`]).
    pub fn is_plain(&self) -> bool {
        matches!(*self.0.borrow(), Transport::Plain(_))
    }

    /// Plain TCP: reads into the spare room of `buf` (which must have some), counting the
    /// bytes; 0 at end of stream. A read that does not fill the room drained the socket, so it
    /// clears tokio's readiness as tokio's own read does, and the next read waits for an event
    /// instead of trying a read that would find nothing.
    ///
    /// `woken`: this read was polled before and is polled again because the socket became
    /// readable, so it reads at once; a first poll looks at readiness first, since a response
    /// is rarely there yet when its read starts. Either order is correct, only the cost
    /// differs (a look at readiness costs a budget check and, when not ready, the waiter lock).
    pub fn poll_read_plain(
        &self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
        woken: bool,
    ) -> Poll<io::Result<usize>> {
        let transport = self.0.borrow();
        let Transport::Plain(tap) = &*transport else {
            return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
        };
        let tcp = tap.get_ref();
        if !woken {
            ready!(tcp.poll_read_ready(cx))?;
        }
        loop {
            let room = buf.spare_capacity_mut();
            let len = room.len();
            let mut drained = None;
            let read = tcp.try_io(Interest::READABLE, || {
                let n = recv_now(tcp.as_raw_fd(), room)?;
                if n > 0 && n < len {
                    // Reported as WouldBlock only so that tokio clears the readiness.
                    drained = Some(n);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            // `drained` first: asking the error its kind is an out-of-line call, a request.
            let n = match (read, drained) {
                (Ok(n), _) => n,
                (Err(_), Some(n)) => n,
                // Nothing there (tokio knew, or the read found out and cleared the
                // readiness): wait for the socket, which registers this task's waker.
                (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(tcp.poll_read_ready(cx))?;
                    continue;
                }
                (Err(e), None) => return Poll::Ready(Err(e)),
            };
            // SAFETY: `recv` initialized the first `n` bytes of the spare room.
            unsafe { buf.advance_mut(n) };
            tap.tap().0.add_received(n as u64);
            return Poll::Ready(Ok(n));
        }
    }
}

impl IoHalf {
    /// Whether the server closed the socket, or on plain TCP sent something unasked: called
    /// while no response is due. A FIN or a reset means the connection is closing, and so does
    /// a 408 (a server's idle timeout, said before its FIN); other bytes were asked by no
    /// request. On TLS only a FIN counts: bytes may be TLS's own (a late session ticket), and a
    /// close_notify ahead of the FIN hides it (that send then fails and goes again, as before).
    /// Costs no syscall while nothing came since the last read drained the socket (tokio's
    /// readiness is clear); when it is set, one peek. On the trace's tapped transport too
    /// only a FIN counts (its `--linger` ends there): bytes are left for the tap to show.
    pub fn peer_spoke(&self) -> Spoke {
        let transport = self.0.borrow();
        let (tcp, plain) = match &*transport {
            Transport::Plain(tap) => (tap.get_ref(), true),
            Transport::Tls(tls) => (tls.get_ref().0.get_ref(), false),
            Transport::Tapped(tapped) => match tapped.get_ref() {
                Transport::Plain(tap) => (tap.get_ref(), false),
                Transport::Tls(tls) => (tls.get_ref().0.get_ref(), false),
                Transport::Tapped(_) => return Spoke::Nothing,
            },
        };
        let mut first = [0u8; 12];
        match tcp.try_io(Interest::READABLE, || peek_now(tcp.as_raw_fd(), &mut first)) {
            Ok(0) => Spoke::Closed,
            Ok(n) if plain => match &first[..n] {
                [b'H', b'T', b'T', b'P', b'/', b'1', b'.', _, b' ', b'4', b'0', b'8'] => {
                    Spoke::Closed
                }
                _ => Spoke::Unasked,
            },
            Ok(_) => Spoke::Nothing,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Spoke::Nothing,
            Err(_) => Spoke::Closed,
        }
    }

    /// Reads and drops what an idle plain connection's server sent unasked (an extra response,
    /// a 408 before its close), without waiting; returns how many bytes, so they count as
    /// received (totals are the socket's: a peek alone left them out). At most 1 MiB.
    pub fn discard_waiting(&self) -> u64 {
        let transport = self.0.borrow();
        let Transport::Plain(tap) = &*transport else {
            return 0;
        };
        let fd = tap.get_ref().as_raw_fd();
        let mut scratch = [0u8; 16 * 1024];
        let mut total = 0u64;
        for _ in 0..64 {
            // SAFETY: `fd` stays open while `transport` is borrowed; at most `scratch.len()`
            // bytes into `scratch`.
            let n = unsafe {
                libc::recv(
                    fd,
                    scratch.as_mut_ptr().cast(),
                    scratch.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match u64::try_from(n) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        total
    }
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
