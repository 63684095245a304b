//! The TCP transport under h1, h2c and h2: connect within a deadline with TCP_NODELAY, an
//! optional TLS layer, per-phase timings, and the mapping from I/O errors to [`ErrorKind`].

use super::tls::{server_name, AlpnConfigs};
use super::wire::{BoxedTap, ByteCount, CountingIo, PlaintextTaps, TapIo, WireCounter};
use super::{ConnectInfo, ConnectOptions, Target};
use crate::error::ErrorKind;
use rustls::ClientConfig;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A connected byte stream: plain TCP or TLS over TCP, counted below TLS.
#[derive(Debug)]
pub enum Transport {
    /// Cleartext TCP.
    Plain(CountingIo<TcpStream>),
    /// TLS over TCP (boxed: the TLS state is large).
    Tls(Box<TlsStream<CountingIo<TcpStream>>>),
    /// Either of the above with its plaintext shown to a tap (`httpvs trace` only).
    Tapped(Box<TapIo<Transport, BoxedTap>>),
}

impl Transport {
    /// The ALPN protocol the server chose (TLS only).
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(tls) => tls.get_ref().1.alpn_protocol(),
            Transport::Tapped(t) => t.get_ref().alpn(),
        }
    }

    /// The socket of a plain (not TLS, not traced) transport, for socket options set
    /// while it runs; it stays open as long as the transport.
    pub fn plain_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        match self {
            Transport::Plain(s) => Some(s.get_ref().as_raw_fd()),
            Transport::Tls(_) | Transport::Tapped(_) => None,
        }
    }

    /// This transport with its plaintext shown to a tap from `taps`, when tracing.
    pub fn tapped(self, taps: Option<&PlaintextTaps>) -> Transport {
        match taps {
            Some(taps) => Transport::Tapped(Box::new(TapIo::new(self, taps.make()))),
            None => self,
        }
    }
}

thread_local! {
    /// Why this thread's last connection attempt over TCP did not become ready: what rustls
    /// said about a failed handshake (an unknown issuer, an alert, no TLS on the port), or the
    /// step it was waiting for when the connect timeout came. The first connection's error
    /// line shows it, as h3's does.
    static CONNECT_NOTE: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };

    /// What rustls said of this thread's last TLS failure on an open connection.
    static LAST_TLS_ERROR: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };

    /// This thread's last connection attempt over TCP, once TCP connected: how long that took
    /// and its byte counter. A trace shows them for a connection whose later step (TLS, the
    /// h2 preface) failed, where only the attempt's error was left.
    static LAST_TCP: std::cell::RefCell<Option<(std::time::Duration, Arc<WireCounter>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Takes this thread's last TCP connection attempt that connected: (time to connect, bytes).
pub fn take_last_tcp() -> Option<(std::time::Duration, Arc<WireCounter>)> {
    LAST_TCP.with(|last| last.borrow_mut().take())
}

/// Takes why this thread's last connection attempt over TCP failed or stalled, if known.
pub fn take_connect_note() -> Option<String> {
    CONNECT_NOTE.with(|last| last.borrow_mut().take())
}

/// Notes the step this thread's connection attempt now waits for (`None` once it is ready).
pub(crate) fn note_connect_step(waiting_for: Option<&'static str>) {
    CONNECT_NOTE.with(|last| *last.borrow_mut() = waiting_for.map(str::to_owned));
}

/// Takes what rustls said of this thread's last TLS failure on an open connection (an alert
/// after the handshake), for `httpvs trace`'s line.
pub fn take_tls_error() -> Option<String> {
    LAST_TLS_ERROR.with(|last| last.borrow_mut().take())
}

/// How a connect note begins when the server spoke the protocol asked for but broke it (h2's
/// first SETTINGS out of range): the first connection's line then gives it instead of the
/// usual guess that the server speaks another protocol.
pub(crate) const SPOKE_THEN_BROKE: &str = "the server speaks HTTP/2, but ";

/// How a connect note begins when the server hung up after a TLS handshake that succeeded:
/// not a cleartext port, as a hang-up's usual hint guesses.
pub(crate) const AFTER_TLS: &str = "the TLS handshake succeeded (ALPN h2), then ";

/// Whether a failed first connection's note `detail` tells more than the usual hint for
/// `kind`: the server spoke HTTP/2 but broke it, or hung up after its TLS handshake.
pub(crate) fn rules_out_the_usual_cause(kind: ErrorKind, detail: &str) -> bool {
    match kind {
        ErrorKind::Protocol => detail.starts_with(SPOKE_THEN_BROKE),
        ErrorKind::ConnectionClosed | ErrorKind::Reset => detail.starts_with(AFTER_TLS),
        _ => false,
    }
}

/// Notes why this thread's connection attempt failed, in words found at the time.
pub(crate) fn note_connect_failure(why: String) {
    CONNECT_NOTE.with(|last| *last.borrow_mut() = Some(why));
}

/// Opens TCP to `target` (TCP_NODELAY set), then TLS with `tls` when given, all within
/// `connect_timeout`. Returns the stream and its phase timings; bytes go to `counter`.
pub async fn connect(
    target: &Target,
    tls: Option<Arc<ClientConfig>>,
    connect_timeout: std::time::Duration,
    counter: Arc<WireCounter>,
) -> Result<(Transport, ConnectInfo), ErrorKind> {
    let attempt = connect_unbounded(target, tls, counter);
    match tokio::time::timeout(connect_timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(ErrorKind::ConnectTimeout),
    }
}

async fn connect_unbounded(
    target: &Target,
    tls: Option<Arc<ClientConfig>>,
    counter: Arc<WireCounter>,
) -> Result<(Transport, ConnectInfo), ErrorKind> {
    let started = Instant::now();
    note_connect_step(None);
    LAST_TCP.with(|last| *last.borrow_mut() = None);
    let tcp = TcpStream::connect(target.addr)
        .await
        .map_err(|e| connect_error_kind(&e))?;
    LAST_TCP.with(|last| *last.borrow_mut() = Some((started.elapsed(), counter.clone())));
    // Small requests must leave at once; Nagle would hold pipelined/multiplexed writes.
    tcp.set_nodelay(true).map_err(|e| io_error_kind(&e))?;
    let mut info = ConnectInfo {
        tcp_connect: started.elapsed().into(),
        ..ConnectInfo::default()
    };
    let counted = TapIo::new(tcp, ByteCount(counter));
    let Some(config) = tls else {
        return Ok((Transport::Plain(counted), info));
    };
    let name = server_name(&target.host).ok_or(ErrorKind::Tls)?;
    let handshake_started = Instant::now();
    note_connect_step(Some("TCP connected, but the TLS handshake did not finish"));
    let stream = TlsConnector::from(config)
        .connect(name, counted)
        .await
        .map_err(|e| {
            let kind = handshake_error_kind(&e);
            let note =
                (kind == ErrorKind::Tls).then(|| crate::protocol::tls::plain_words(&e.to_string()));
            CONNECT_NOTE.with(|last| *last.borrow_mut() = note);
            kind
        })?;
    note_connect_step(None);
    info.handshake = handshake_started.elapsed().into();
    info.resumed = stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let transport = Transport::Tls(Box::new(stream));
    info.alpn = transport.alpn().map(Box::from);
    Ok((transport, info))
}

/// The TLS configuration for `target`: `None` for http, the run's configuration with `alpn`
/// for https (a missing configuration is a TLS error, not a silent downgrade).
pub fn tls_for(
    target: &Target,
    options: &ConnectOptions,
    configs: &AlpnConfigs,
    alpn: &[&[u8]],
) -> Result<Option<Arc<ClientConfig>>, ErrorKind> {
    if !target.scheme.eq_ignore_ascii_case("https") {
        return Ok(None);
    }
    let base = options.tls.as_ref().ok_or(ErrorKind::Tls)?;
    Ok(Some(configs.get(base, alpn)))
}

/// Sets `SO_RCVLOWAT` on the open socket `fd`: the kernel wakes its reader once `bytes` are
/// queued (or at FIN, RST or memory pressure). Linux only; elsewhere it reports `Unsupported`.
pub fn set_recv_lowat(fd: std::os::fd::RawFd, bytes: usize) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: the caller keeps `fd` open across the call; `value` lives across it and
        // the length given is its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (fd, bytes);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Writes what the socket `fd` takes of `bytes` now, without waiting: the count written, 0 if
/// its send buffer is full (or elsewhere than Linux). A write that bypasses tokio's readiness
/// is safe: a full buffer shows up in the next write through tokio, which then waits for room.
#[cfg(target_os = "linux")]
pub fn send_now(fd: std::os::fd::RawFd, bytes: &[u8]) -> io::Result<usize> {
    loop {
        // The raw syscall, not glibc's `send`: that one is a thread-cancellation point and
        // brackets the call with two cancel-state updates (about 60 instructions a request).
        // SAFETY: the caller keeps `fd` open across the call; `bytes` is valid for its length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendto,
                fd,
                bytes.as_ptr(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                std::ptr::null::<libc::sockaddr>(),
                0,
            )
        };
        if let Some(outcome) = send_outcome(n as isize) {
            return outcome;
        }
    }
}

/// What a non-blocking send returned `n` means: the count sent, 0 when the socket had no
/// room, or the error; `None` to send again (interrupted).
#[cfg(target_os = "linux")]
#[inline]
fn send_outcome(n: isize) -> Option<io::Result<usize>> {
    if let Ok(n) = usize::try_from(n) {
        return Some(Ok(n));
    }
    let error = io::Error::last_os_error();
    match error.kind() {
        io::ErrorKind::Interrupted => None,
        io::ErrorKind::WouldBlock => Some(Ok(0)),
        _ => Some(Err(error)),
    }
}

/// Elsewhere than Linux every write goes through tokio.
#[cfg(not(target_os = "linux"))]
pub fn send_now(_fd: std::os::fd::RawFd, _bytes: &[u8]) -> io::Result<usize> {
    Ok(0)
}

/// [`send_now`] of several pieces in one `sendmsg` (a request whose large body is written
/// from the run's shared copy): how many bytes the socket took, 0 when it had no room.
#[cfg(target_os = "linux")]
pub fn send_vectored_now(fd: std::os::fd::RawFd, pieces: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is plain data; zeroed is an empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix; the kernel only reads through it.
    msg.msg_iov = pieces.as_ptr().cast_mut().cast();
    msg.msg_iovlen = pieces.len();
    loop {
        // SAFETY: the caller keeps `fd` open across the call; `msg` points at `pieces`, valid
        // for the call.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if let Some(outcome) = send_outcome(n) {
            return outcome;
        }
    }
}

/// Elsewhere than Linux every write goes through tokio.
#[cfg(not(target_os = "linux"))]
pub fn send_vectored_now(
    _fd: std::os::fd::RawFd,
    _pieces: &[io::IoSlice<'_>],
) -> io::Result<usize> {
    Ok(0)
}

/// Reads what the non-blocking socket `fd` holds into `room`, without waiting: the count read
/// (0 at end of stream), or a `WouldBlock` error when nothing is there.
pub fn recv_now(
    fd: std::os::fd::RawFd,
    room: &mut [std::mem::MaybeUninit<u8>],
) -> io::Result<usize> {
    loop {
        // The raw syscall on Linux, as in `send_now`.
        // SAFETY: the caller keeps `fd` open across the call; the kernel writes at most
        // `room.len()` bytes into `room`, which is valid (if uninitialized) memory.
        #[cfg(target_os = "linux")]
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                fd,
                room.as_mut_ptr(),
                room.len(),
                0,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        };
        // SAFETY: as above.
        #[cfg(not(target_os = "linux"))]
        let n = unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), 0) };
        if let Ok(n) = usize::try_from(n) {
            return Ok(n);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Peeks at the first bytes waiting, up to `into.len()`, without waiting: `Ok(0)` when the peer
/// closed (FIN), `Ok(n)` when bytes are waiting, `WouldBlock` when nothing is.
pub fn peek_now(fd: std::os::fd::RawFd, into: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: the caller keeps `fd` open across the call; at most `into.len()` bytes into
        // `into`.
        let n = unsafe {
            libc::recv(
                fd,
                into.as_mut_ptr().cast(),
                into.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if let Ok(n) = usize::try_from(n) {
            return Ok(n);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Classifies a TCP connect failure. EADDRNOTAVAIL there is most often no free local port
/// (the note says what else it can be).
pub fn connect_error_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        io::ErrorKind::AddrNotAvailable => ErrorKind::LocalPorts,
        _ => io_error_kind(e),
    }
}

/// Classifies a TLS handshake failure: anything but a transport error is a TLS error.
pub fn handshake_error_kind(e: &io::Error) -> ErrorKind {
    match io_error_kind(e) {
        ErrorKind::Io | ErrorKind::Protocol => ErrorKind::Tls,
        kind => kind,
    }
}

/// Classifies an I/O error on an open connection.
pub fn io_error_kind(e: &io::Error) -> ErrorKind {
    if is_tls_error(e) {
        // The words are kept for the trace's line (an alert after the handshake: a client
        // certificate wanted); failures only, so no cost to a request that succeeds.
        LAST_TLS_ERROR.with(|last| {
            *last.borrow_mut() = Some(crate::protocol::tls::plain_words(&e.to_string()))
        });
        return ErrorKind::Tls;
    }
    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
        return ErrorKind::OpenFiles;
    }
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => ErrorKind::Reset,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe => ErrorKind::ConnectionClosed,
        io::ErrorKind::InvalidData => ErrorKind::Protocol,
        _ => ErrorKind::Io,
    }
}

fn is_tls_error(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Transport::Tapped(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Transport::Tapped(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Transport::Tapped(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
            Transport::Tapped(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Transport::Tapped(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Transport::Tapped(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EADDRNOTAVAIL on connect is the ephemeral range used up, not a generic `io`.
    #[test]
    fn no_free_local_port_is_its_own_kind() {
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(connect_error_kind(&e), ErrorKind::LocalPorts);
        assert_eq!(ErrorKind::LocalPorts.name(), "local_ports");
    }

    /// EMFILE or ENFILE (a new connection's socket, mid-run) is the open-file limit, with a
    /// note of its own, not a generic `io`.
    #[test]
    fn no_free_file_descriptor_is_its_own_kind() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            let e = io::Error::from_raw_os_error(errno);
            assert_eq!(connect_error_kind(&e), ErrorKind::OpenFiles);
            assert_eq!(io_error_kind(&e), ErrorKind::OpenFiles);
        }
        assert_eq!(ErrorKind::OpenFiles.name(), "open_files");
    }

    #[test]
    fn io_errors_map_to_kinds() {
        let kind = |k| io_error_kind(&io::Error::from(k));
        assert_eq!(kind(io::ErrorKind::ConnectionRefused), ErrorKind::Refused);
        assert_eq!(kind(io::ErrorKind::ConnectionReset), ErrorKind::Reset);
        assert_eq!(
            kind(io::ErrorKind::UnexpectedEof),
            ErrorKind::ConnectionClosed
        );
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::General("x".into()),
        );
        assert_eq!(io_error_kind(&tls), ErrorKind::Tls);
        assert_eq!(
            connect_error_kind(&io::Error::from(io::ErrorKind::TimedOut)),
            ErrorKind::ConnectTimeout
        );
    }
}
