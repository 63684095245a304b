//! The socket wrapper every connection reads and writes through: replays bytes already read (the
//! h2c preface probe), counts I/O so an idle or stalled connection can be found without a clock
//! read per operation, and shares the socket with the connection task so it can close gently
//! (`linger`) after the protocol layer is done with it.

use crate::io_util::Prefix;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Per-connection state shared by its I/O, its requests and its idle watch.
#[derive(Debug, Default)]
pub struct ConnState {
    io_ops: AtomicU64,
    delaying: AtomicU32,
    requests: AtomicU64,
    /// The TCP socket, for [`ConnState::delay_while_there`] to see the client leave.
    socket: Option<Arc<TcpStream>>,
    /// Told when a delayed HTTP/1.1 request's client has gone: its connection then ends.
    gone: tokio::sync::Notify,
}

impl ConnState {
    /// The state of a connection on `socket`.
    pub fn on(socket: Arc<TcpStream>) -> ConnState {
        ConnState {
            socket: Some(socket),
            ..ConnState::default()
        }
    }

    /// Waits `delay` as [`ConnState::delay`] does, unless the client resets the connection
    /// first: then returns `false` and tells [`ConnState::client_gone`]. For HTTP/1.1, which
    /// reads nothing while it answers: a client that reset a `?delay=600s` kept its
    /// connection, and its place under `--max-connections`, for the whole delay. (h2 and h3
    /// read on, and a stream's reset drops its delay.) A FIN is not a leave: a client that
    /// shuts its writing side after its request still gets its answer. Bytes behind the
    /// request (pipelining) end the watch: nothing more can be learnt without reading them,
    /// which is hyper's to do.
    pub async fn delay_while_there(&self, delay: Duration) -> bool {
        let Some(socket) = &self.socket else {
            self.delay(delay).await;
            return true;
        };
        let gone = async {
            let mut byte = [0u8; 1];
            if socket.peek(&mut byte).await.is_ok() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = self.delay(delay) => true,
            () = gone => {
                self.gone.notify_one();
                false
            }
        }
    }

    /// Resolves once a delayed request found its client gone.
    pub async fn client_gone(&self) {
        self.gone.notified().await
    }

    /// Counts a request on this connection and returns its 1-based number.
    pub fn next_request(&self) -> u64 {
        self.requests.fetch_add(1, Relaxed) + 1
    }

    /// Waits `delay` while marking the connection busy, so the idle watch leaves it open. A wait
    /// dropped early (its stream was reset) unmarks it too.
    pub async fn delay(&self, delay: Duration) {
        struct Busy<'a>(&'a AtomicU32);
        impl Drop for Busy<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Relaxed);
            }
        }
        self.delaying.fetch_add(1, Relaxed);
        let _busy = Busy(&self.delaying);
        crate::precise_sleep::sleep(delay).await;
    }

    /// Resolves once the connection has had no I/O and no pending delay for `timeout`
    /// (checked in quarter steps, so it fires between 1x and 1.25x the timeout).
    pub async fn idle(&self, timeout: Duration) {
        quiet_for(
            timeout,
            || self.io_ops.load(Relaxed),
            || self.delaying.load(Relaxed) > 0,
        )
        .await;
    }

    fn touch(&self) {
        // A plain load+store: only this connection's task writes it, the watch only reads.
        self.io_ops
            .store(self.io_ops.load(Relaxed).wrapping_add(1), Relaxed);
    }
}

/// Resolves once `activity` has not moved and `busy` has been false for `timeout`, checked in
/// quarter steps (so it fires between 1x and 1.25x the timeout): the idle watch of TCP and QUIC
/// connections alike.
pub async fn quiet_for(timeout: Duration, activity: impl Fn() -> u64, busy: impl Fn() -> bool) {
    const STEPS: u32 = 4;
    let tick = (timeout / STEPS).max(Duration::from_millis(1));
    let mut seen = activity();
    let mut quiet = 0;
    loop {
        tokio::time::sleep(tick).await;
        let now = activity();
        if now != seen || busy() {
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

/// A TCP socket with replayed prefix bytes and I/O counting.
pub struct ConnIo {
    socket: Arc<TcpStream>,
    prefix: Prefix,
    state: Arc<ConnState>,
}

impl ConnIo {
    /// Wraps `socket`; `prefix` is read before anything from the socket.
    pub fn new(socket: Arc<TcpStream>, prefix: Vec<u8>, state: Arc<ConnState>) -> ConnIo {
        ConnIo {
            socket,
            prefix: Prefix::new(prefix),
            state,
        }
    }
}

/// Most bytes a closing connection reads and drops.
const LINGER_BYTES: usize = 256 * 1024;
/// Longest a closing connection waits for the client's FIN.
const LINGER_TIME: Duration = Duration::from_secs(2);

/// Closes like nginx's lingering close: FIN first, then read and drop what the client had already
/// sent (pipelined requests, the rest of a refused body) until its FIN or a bound. Closing with
/// unread bytes sends RST, and an RST makes the client's kernel drop responses it has not read.
pub async fn linger(socket: &TcpStream, idle_timeout: Duration) {
    let _ = socket2::SockRef::from(socket).shutdown(std::net::Shutdown::Write);
    let _ = tokio::time::timeout(idle_timeout.min(LINGER_TIME), async {
        let mut buf = [0u8; 4096];
        let mut seen = 0;
        while seen < LINGER_BYTES {
            if socket.readable().await.is_err() {
                return;
            }
            match socket.try_read(&mut buf) {
                Ok(0) => return,
                Ok(n) => seen += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    })
    .await;
}

/// Marks the socket not ready for `interest` (try_io clears readiness when its closure would block).
fn clear_readiness(socket: &TcpStream, interest: Interest) {
    let _ = socket.try_io(interest, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.read_into(buf) {
            return Poll::Ready(Ok(()));
        }
        loop {
            ready!(this.socket.poll_read_ready(cx))?;
            let want = buf.remaining();
            match this
                .socket
                .try_io(Interest::READABLE, || recv_into(&this.socket, buf))
            {
                Ok(n) => {
                    if n > 0 && n < want {
                        // A short read drained the socket: drop readiness now, as tokio's own
                        // TcpStream does, instead of paying a read() that returns EAGAIN.
                        clear_readiness(&this.socket, Interest::READABLE);
                    }
                    this.state.touch();
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale; try_io cleared it, so poll again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// recv(2) into the unfilled part of `buf` without zeroing it first (hyper hands 8 KiB buffers,
/// and zeroing them cost 4% of server CPU); advances `buf` by what was read.
fn recv_into(socket: &TcpStream, buf: &mut ReadBuf<'_>) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: recv writes at most `dst.len()` bytes into `dst`; exactly `n` of them are then
    // marked initialized and filled.
    unsafe {
        let dst = buf.unfilled_mut();
        let n = libc::recv(socket.as_raw_fd(), dst.as_mut_ptr().cast(), dst.len(), 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        buf.assume_init(n);
        buf.advance(n);
        Ok(n)
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            ready!(this.socket.poll_write_ready(cx))?;
            match this.socket.try_write(buf) {
                Ok(n) => {
                    if n > 0 && n < buf.len() {
                        clear_readiness(&this.socket, Interest::WRITABLE);
                    }
                    this.state.touch();
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            ready!(this.socket.poll_write_ready(cx))?;
            match this.socket.try_write_vectored(bufs) {
                Ok(n) => {
                    let total: usize = bufs.iter().map(|b| b.len()).sum();
                    if n > 0 && n < total {
                        clear_readiness(&this.socket, Interest::WRITABLE);
                    }
                    this.state.touch();
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = socket2::SockRef::from(&*self.socket).shutdown(std::net::Shutdown::Write);
        Poll::Ready(Ok(()))
    }
}
