//! Listening sockets, bound in the caller's thread so "address in use" is reported by `start`:
//! one TCP socket per worker on the same port (SO_REUSEPORT lets the kernel spread connections),
//! and one UDP socket for QUIC.

use crate::error::ServeError;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;

/// Listen backlog: bursts of connects (h2load -c 1000) must not be dropped.
const BACKLOG: i32 = 4096;

/// Binds `count` TCP listeners on `addr` (the first fixes the port when `addr` has port 0).
///
/// With SO_REUSEPORT a second server on the same port would bind too and quietly take half the
/// connections, so the port is first claimed by a socket without it: that bind fails with
/// "address in use" if anything listens there, another httpvs included. The claim is released
/// just before the workers' sockets bind, which join no one else's group. (A second server
/// starting in the microseconds between the two could still join: narrow enough to accept.)
pub fn tcp(addr: SocketAddr, count: usize) -> Result<Vec<std::net::TcpListener>, ServeError> {
    if count <= 1 {
        return Ok(vec![tcp_one(addr, false, true)?]);
    }
    let claim = tcp_one(addr, false, false)?;
    let bound = claim
        .local_addr()
        .map_err(|source| bind_error(addr, "tcp", source))?;
    drop(claim);
    (0..count).map(|_| tcp_one(bound, true, true)).collect()
}

fn tcp_one(
    addr: SocketAddr,
    reuse_port: bool,
    listen: bool,
) -> Result<std::net::TcpListener, ServeError> {
    let err = |source| bind_error(addr, "tcp", source);
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    socket.set_reuse_address(true).map_err(err)?;
    if reuse_port {
        socket.set_reuse_port(true).map_err(err)?;
    }
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(err)?;
    }
    socket.set_nonblocking(true).map_err(err)?;
    socket.bind(&addr.into()).map_err(err)?;
    if listen {
        socket.listen(BACKLOG).map_err(err)?;
    }
    Ok(socket.into())
}

/// What the QUIC socket asks for in each direction, as the load generator's does: the
/// default (212,992 bytes) overflowed when 256 clients' Initials came at once (a quarter of
/// the handshakes waited out a 1 s probe timeout), and at 64 connections it dropped thousands
/// of packets a second on loopback.
const UDP_BUFFER_BYTES: usize = 4 << 20;

/// Binds the UDP socket for QUIC.
pub fn udp(addr: SocketAddr) -> Result<std::net::UdpSocket, ServeError> {
    let err = |source| bind_error(addr, "udp", source);
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(err)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(err)?;
    }
    grow_buffers(&socket);
    socket.bind(&addr.into()).map_err(err)?;
    Ok(socket.into())
}

/// Best effort: the kernel caps SO_RCVBUF/SO_SNDBUF at net.core.{r,w}mem_max; as root the
/// FORCE options pass the cap, as quic-go (caddy) does.
fn grow_buffers(socket: &Socket) {
    let _ = socket.set_recv_buffer_size(UDP_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(UDP_BUFFER_BYTES);
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // The kernel reports twice what it granted.
        let short = |got: std::io::Result<usize>| got.map_or(true, |n| n < UDP_BUFFER_BYTES);
        let force = |option: libc::c_int| {
            let value = UDP_BUFFER_BYTES as libc::c_int;
            // SAFETY: setsockopt on our own socket with an int option value of the right size.
            unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    option,
                    (&value as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        };
        if short(socket.recv_buffer_size()) {
            force(libc::SO_RCVBUFFORCE);
        }
        if short(socket.send_buffer_size()) {
            force(libc::SO_SNDBUFFORCE);
        }
    }
}

fn bind_error(addr: SocketAddr, proto: &'static str, source: std::io::Error) -> ServeError {
    ServeError::Bind {
        addr,
        proto,
        source,
    }
}
