//! Sockets of the host's own network namespace, made on request by the process that stayed there
//! and handed over a unix socketpair (SCM_RIGHTS). A socket keeps the namespace it was made in,
//! so the forwarder inside our user namespace can connect to the host's loopback with it.

use crate::sys::check;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// What kind of socket to make on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SocketKind {
    /// TCP over IPv4.
    TcpV4,
    /// UDP over IPv4.
    UdpV4,
    /// TCP over IPv6.
    TcpV6,
    /// UDP over IPv6.
    UdpV6,
    /// A blocking NETLINK_SOCK_DIAG socket, to ask which TCP ports listen.
    ListenerDiag,
}

impl SocketKind {
    fn code(self) -> u8 {
        match self {
            SocketKind::TcpV4 => 1,
            SocketKind::UdpV4 => 2,
            SocketKind::TcpV6 => 3,
            SocketKind::UdpV6 => 4,
            SocketKind::ListenerDiag => 5,
        }
    }

    fn from_code(code: u8) -> Option<SocketKind> {
        [
            SocketKind::TcpV4,
            SocketKind::UdpV4,
            SocketKind::TcpV6,
            SocketKind::UdpV6,
            SocketKind::ListenerDiag,
        ]
        .into_iter()
        .find(|k| k.code() == code)
    }

    /// A fresh non-blocking, close-on-exec socket of this kind in the caller's namespace.
    fn make(self) -> io::Result<OwnedFd> {
        let nonblocking = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let (domain, kind, protocol) = match self {
            SocketKind::TcpV4 => (libc::AF_INET, libc::SOCK_STREAM | nonblocking, 0),
            SocketKind::UdpV4 => (libc::AF_INET, libc::SOCK_DGRAM | nonblocking, 0),
            SocketKind::TcpV6 => (libc::AF_INET6, libc::SOCK_STREAM | nonblocking, 0),
            SocketKind::UdpV6 => (libc::AF_INET6, libc::SOCK_DGRAM | nonblocking, 0),
            SocketKind::ListenerDiag => (
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            ),
        };
        // SAFETY: plain socket creation; the fd is owned below.
        let raw = check(unsafe { libc::socket(domain, kind, protocol) })?;
        // SAFETY: fresh fd owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }
}

/// Where host sockets come from: the helper left in the host's namespace (rootless), or, when
/// this process is in the host's namespace itself (root), the calling thread.
#[derive(Debug)]
pub struct HostSockets {
    channel: Option<Mutex<OwnedFd>>,
}

/// Sockets made directly by the calling thread, for a process in the host's namespace.
pub static DIRECT: HostSockets = HostSockets { channel: None };

impl HostSockets {
    /// Wraps our end of the socketpair to the helper.
    pub fn new(channel: OwnedFd) -> HostSockets {
        HostSockets {
            channel: Some(Mutex::new(channel)),
        }
    }

    /// A new socket of `kind` in the host's namespace (non-blocking, not yet bound or connected).
    pub fn open(&self, kind: SocketKind) -> io::Result<OwnedFd> {
        let Some(channel) = &self.channel else {
            return kind.make();
        };
        // One request and its answer at a time: the answer carries no request id.
        let channel = channel.lock().unwrap_or_else(|e| e.into_inner());
        let fd = channel.as_raw_fd();
        // SAFETY: sending one byte from a valid buffer.
        let sent = unsafe { libc::send(fd, [kind.code()].as_ptr().cast(), 1, libc::MSG_NOSIGNAL) };
        if sent != 1 {
            return Err(io::Error::last_os_error());
        }
        let (errno, received) = receive_answer(fd)?;
        match (errno, received) {
            (0, Some(socket)) => Ok(socket),
            (0, None) => Err(io::Error::other("the host side sent no socket")),
            (errno, _) => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// Answers requests on `channel` until the other end closes it (our user-namespace child exited).
pub fn serve(channel: &OwnedFd) {
    let fd = channel.as_raw_fd();
    let mut request = [0u8; 1];
    loop {
        // SAFETY: receiving at most one byte into `request`.
        let n = unsafe { libc::recv(fd, request.as_mut_ptr().cast(), 1, 0) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return;
        }
        let made = SocketKind::from_code(request[0])
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
            .and_then(SocketKind::make);
        let sent = match made {
            Ok(socket) => send_answer(fd, 0, Some(socket.as_raw_fd())),
            Err(e) => send_answer(fd, e.raw_os_error().unwrap_or(libc::EIO), None),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Room for one fd in a control message (CMSG_SPACE(sizeof(int)), 8-aligned).
#[repr(C, align(8))]
struct OneFdControl([u8; 24]);

/// Sends `errno` (0: fine) and, when given, the fd.
fn send_answer(channel: RawFd, errno: i32, socket: Option<RawFd>) -> io::Result<()> {
    let payload = errno.to_ne_bytes();
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut control = OneFdControl([0; 24]);
    // SAFETY: msghdr is plain data; zeroed is a valid start.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(socket) = socket {
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure size computations.
        let (space, len) = unsafe { (libc::CMSG_SPACE(4), libc::CMSG_LEN(4)) };
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = space as usize;
        // SAFETY: the control buffer holds one cmsghdr plus an int, as `space` says.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = len as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), socket);
        }
    }
    // SAFETY: `msg` points at buffers that outlive the call.
    check(unsafe { libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) } as libc::c_int)?;
    Ok(())
}

/// Receives one answer: the errno and the fd, if one came.
fn receive_answer(channel: RawFd) -> io::Result<(i32, Option<OwnedFd>)> {
    let mut payload = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    let mut control = OneFdControl([0; 24]);
    // SAFETY: msghdr is plain data; zeroed is a valid start.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    let n = loop {
        // SAFETY: `msg` points at buffers that outlive the call.
        let n = unsafe { libc::recvmsg(channel, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break check(n as libc::c_int)?;
    };
    if n != 4 {
        return Err(io::Error::other(
            "the host side of the rootless layout is gone",
        ));
    }
    // SAFETY: walking the control messages recvmsg filled in.
    let socket = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_SOCKET
            && (*cmsg).cmsg_type == libc::SCM_RIGHTS
        {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
            Some(OwnedFd::from_raw_fd(raw))
        } else {
            None
        }
    };
    Ok((i32::from_ne_bytes(payload), socket))
}

/// A connected pair of SOCK_SEQPACKET unix sockets (message boundaries kept), close-on-exec.
pub fn channel_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    // SAFETY: socketpair fills two fds, owned below.
    check(unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) })?;
    // SAFETY: fresh fds owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_cross_the_channel() {
        let (ours, theirs) = channel_pair().unwrap();
        let server = std::thread::spawn(move || serve(&theirs));
        let sockets = HostSockets::new(ours);
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::from(sockets.open(SocketKind::UdpV4).unwrap());
        udp.send_to(b"hi", receiver.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(receiver.recv(&mut buf).unwrap(), 2);
        let tcp = sockets.open(SocketKind::TcpV6).unwrap();
        assert_ne!(tcp.as_raw_fd(), udp.as_raw_fd());
        drop(sockets);
        server.join().unwrap();
    }
}
