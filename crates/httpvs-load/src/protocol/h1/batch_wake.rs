//! Pipelined responses read a write batch at a time: `SO_RCVLOWAT` keeps the kernel from
//! waking the reader until the responses to a whole batch of requests can be in the socket.
//!
//! Servers such as h2o write each pipelined response with its own syscall, and a client faster
//! than its server then wakes, reads and ACKs once per response, and writes one request per
//! wake: pipelining saved almost no syscalls (measured: 0.5 `sendto` and 0.6 `recvfrom` per
//! request at `-m 16`). With the mark at the batch's bytes, one wake, one read and one ACK
//! serve the batch, and the sends it completes leave together in one write.
//!
//! The mark assumes each response is at least as large as the ones before, so it is only used
//! on plain TCP (TLS records and rustls' own buffer make socket bytes unpredictable), only once
//! every response so far was the same size and framed by Content-Length (or bodiless), and at
//! most 16 KiB each. The first response of another size or framing turns it off for the
//! connection. FIN and RST wake the reader whatever the mark, and a fallback timer lowers the
//! mark to one byte if a batch has not arrived after [`FALLBACK`] (a smaller response than any
//! before, or a slow server), so a wrong guess costs a late read, never a hang.
//!
//! Cost to measurements: a response is read when the rest of its write batch has arrived, so
//! its latency includes the server's time for the requests behind it in that batch (the batch
//! left together; a pipelining server answers them in order, back to back).

use crate::protocol::tcp::set_recv_lowat;
use bytes::BytesMut;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::RawFd;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::{Instant, Sleep};

/// How long a raised mark may hold a read back before it drops to one byte.
pub const FALLBACK: Duration = Duration::from_millis(50);
/// Responses larger than this are not batched: a few of them fill a read anyway.
const MAX_RESPONSE: usize = 16 * 1024;
/// The highest mark: no read asks for more than this at once.
const MAX_MARK: usize = 64 * 1024;

/// The `SO_RCVLOWAT` state of one pipelined plain-TCP connection.
pub struct BatchWake {
    fd: RawFd,
    /// The mark the socket has now (1 is the kernel's default).
    mark: usize,
    /// The size every response so far had, head and body.
    size: Option<usize>,
    off: bool,
    /// Made on first use; re-armed at each wait that holds the read back.
    fallback: Option<Pin<Box<Sleep>>>,
}

impl BatchWake {
    /// Batched wakes for the socket `fd`, which must stay open as long as this lives (the
    /// read side that owns both keeps the socket).
    pub fn new(fd: RawFd) -> Self {
        BatchWake {
            fd,
            mark: 1,
            size: None,
            off: false,
            fallback: None,
        }
    }

    /// A whole response of `bytes` (head and body) was read.
    pub fn response_seen(&mut self, bytes: usize) {
        match self.size {
            _ if self.off => {}
            None if bytes <= MAX_RESPONSE => self.size = Some(bytes),
            Some(size) if size == bytes => {}
            _ => self.turn_off(),
        }
    }

    /// A response whose size the mark cannot predict (chunked, close-delimited, interim):
    /// plain reads from now on.
    pub fn turn_off(&mut self) {
        self.set(1);
        self.off = true;
    }

    /// Before waiting for the head of a response: `due` responses of its write batch are
    /// still to be read (it included), and `buffered` bytes of them are already in the buffer.
    pub fn before_head_wait(&mut self, due: u64, buffered: usize) {
        let Some(size) = self.size.filter(|_| !self.off) else {
            return;
        };
        let due = usize::try_from(due).unwrap_or(usize::MAX);
        let bytes = due.saturating_mul(size).saturating_sub(buffered);
        self.set(bytes.clamp(1, MAX_MARK));
    }

    /// Before waiting for more of a body: the mark was for whole responses, so drop it.
    pub fn before_body_wait(&mut self) {
        self.set(1);
    }

    /// Bytes the next read should have room for (the mark, so one read takes the batch).
    pub fn read_size(&self) -> usize {
        self.mark
    }

    /// Reads into `buf` from `io`; while the read waits under a raised mark, the fallback
    /// timer runs, and lowers the mark when it fires.
    pub async fn read<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        buf: &mut BytesMut,
    ) -> io::Result<usize> {
        if self.mark <= 1 {
            return io.read_buf(buf).await;
        }
        let mut read = pin!(io.read_buf(buf));
        let mut armed = false;
        poll_fn(|cx| {
            if let Poll::Ready(done) = read.as_mut().poll(cx) {
                return Poll::Ready(done);
            }
            self.poll_fallback(cx, &mut armed);
            Poll::Pending
        })
        .await
    }

    fn poll_fallback(&mut self, cx: &mut Context<'_>, armed: &mut bool) {
        if self.mark <= 1 {
            return;
        }
        let timer = self
            .fallback
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(FALLBACK)));
        if !*armed {
            timer.as_mut().reset(Instant::now() + FALLBACK);
            *armed = true;
        }
        if timer.as_mut().poll(cx).is_ready() {
            // Lowering the mark makes the kernel re-check the queue and wake the read if
            // anything is there.
            self.set(1);
        }
    }

    fn set(&mut self, mark: usize) {
        if mark == self.mark || self.off {
            return;
        }
        match set_recv_lowat(self.fd, mark) {
            Ok(()) => self.mark = mark,
            // Cannot happen on an open TCP socket; if it does, stop trying.
            Err(_) => self.off = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn lowat(fd: RawFd) -> i32 {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: fd is an open socket; value and len outlive the call.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        value
    }

    async fn pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), async {
            listener.accept().await.unwrap().0
        });
        (client.unwrap(), server)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn mark_follows_the_batch_and_turns_off_on_a_new_size() {
        let (client, _server) = pair().await;
        let fd = client.as_raw_fd();
        let mut wake = BatchWake::new(fd);
        wake.before_head_wait(16, 0);
        assert_eq!(lowat(fd), 1, "no size seen yet");
        wake.response_seen(200);
        wake.before_head_wait(16, 50);
        assert_eq!((lowat(fd), wake.read_size()), (16 * 200 - 50, 3150));
        wake.before_body_wait();
        assert_eq!(lowat(fd), 1);
        wake.response_seen(200);
        wake.before_head_wait(1000, 0);
        assert_eq!(lowat(fd), MAX_MARK as i32);
        wake.response_seen(199);
        assert_eq!(lowat(fd), 1, "another size turns it off");
        wake.before_head_wait(4, 0);
        assert_eq!(lowat(fd), 1);
    }

    /// A batch smaller than the mark expects (a smaller response) is still read, after the
    /// fallback (a real 50 ms: the socket is real).
    #[tokio::test(flavor = "current_thread")]
    async fn a_short_batch_is_read_after_the_fallback() {
        use tokio::io::AsyncWriteExt;
        let (mut client, mut server) = pair().await;
        let mut wake = BatchWake::new(client.as_raw_fd());
        wake.response_seen(100);
        wake.before_head_wait(2, 0);
        server.write_all(&[b'x'; 150]).await.unwrap();
        let mut buf = BytesMut::with_capacity(wake.read_size());
        let n = wake.read(&mut client, &mut buf).await.unwrap();
        assert_eq!((n, lowat(client.as_raw_fd())), (150, 1));
        // With the whole batch there, the read needs no fallback.
        wake.before_head_wait(2, 0);
        server.write_all(&[b'y'; 200]).await.unwrap();
        buf.clear();
        let n = wake.read(&mut client, &mut buf).await.unwrap();
        assert_eq!(n, 200);
    }
}
