//! Whether a TCP listener (or a UDP socket) on the host accepts at an address, asked of the host's kernel by
//! sock_diag (listening sockets only, so it stays cheap on a host with many connections). The
//! forwarder asks before it binds: a client then gets "connection refused" for a closed port,
//! as it would without emulation, rather than a connection accepted and reset (which would also
//! defeat happy eyeballs: `localhost` tries ::1 first and must fail fast to fall back).

use crate::sys::check;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_DONE: u16 = 3;
const NLMSG_ERROR: u16 = 2;
const TCP_LISTEN: u32 = 10;
/// The state sock_diag gives a UDP socket with no peer (TCP_CLOSE).
const UDP_UNCONNECTED: u32 = 7;
/// nlmsghdr, then inet_diag_msg: family, state, timer, retrans, then inet_diag_sockid.
const SPORT_AT: usize = 16 + 4;
const SRC_AT: usize = 16 + 8;

/// A sock_diag netlink socket made in the host's namespace (it asks about that namespace).
#[derive(Debug)]
pub struct ListenerProbe {
    socket: Mutex<OwnedFd>,
}

impl ListenerProbe {
    /// Wraps a NETLINK_SOCK_DIAG socket.
    pub fn new(socket: OwnedFd) -> ListenerProbe {
        ListenerProbe {
            socket: Mutex::new(socket),
        }
    }

    /// Whether some TCP listener on the host accepts connections to `target` (bound to its
    /// address or to the unspecified one; for IPv4 also an IPv6 `[::]` one). On error, yes:
    /// forwarding then behaves as before the probe existed.
    pub fn accepts(&self, target: SocketAddr) -> bool {
        self.bound(target, libc::IPPROTO_TCP as u8, 1 << TCP_LISTEN)
    }

    /// Whether some UDP socket on the host takes datagrams to `target` from anyone (bound and
    /// not connected), as [`ListenerProbe::accepts`] asks of TCP.
    pub fn accepts_datagrams(&self, target: SocketAddr) -> bool {
        self.bound(target, libc::IPPROTO_UDP as u8, 1 << UDP_UNCONNECTED)
    }

    fn bound(&self, target: SocketAddr, protocol: u8, states: u32) -> bool {
        let families: &[u8] = match target.ip() {
            IpAddr::V4(_) => &[libc::AF_INET as u8, libc::AF_INET6 as u8],
            IpAddr::V6(_) => &[libc::AF_INET6 as u8],
        };
        let socket = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        families.iter().any(|family| {
            listeners(socket.as_raw_fd(), *family, protocol, states)
                .map_or(true, |found| found.iter().any(|l| serves(*l, target)))
        })
    }
}

/// Whether a listener bound at `listener` takes connections to `target`.
fn serves(listener: SocketAddr, target: SocketAddr) -> bool {
    listener.port() == target.port()
        && (listener.ip() == target.ip() || listener.ip().is_unspecified())
}

/// The local addresses of one family's sockets of `protocol` in `states` (a bit per state).
fn listeners(fd: i32, family: u8, protocol: u8, states: u32) -> io::Result<Vec<SocketAddr>> {
    let mut request = Vec::with_capacity(72);
    request.extend_from_slice(&72u32.to_ne_bytes());
    request.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    request.extend_from_slice(&flags.to_ne_bytes());
    request.extend_from_slice(&[0; 8]); // sequence, port id
    request.extend_from_slice(&[family, protocol, 0, 0]);
    request.extend_from_slice(&states.to_ne_bytes());
    request.resize(72, 0); // inet_diag_sockid: any
                           // SAFETY: sending our buffer to the kernel.
    check(unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) } as i32)?;
    let mut found = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: receiving into our buffer.
        let n = check(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) } as i32)?;
        if n == 0 {
            return Ok(found); // the kernel ended the dump without NLMSG_DONE
        }
        let mut at = 0;
        while at + 16 <= n as usize {
            let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap_or_default()) as usize;
            let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
            if kind == NLMSG_DONE {
                return Ok(found);
            }
            if kind == NLMSG_ERROR {
                // A kernel without this protocol's diag module says so here: not knowing,
                // the caller forwards, rather than take "no answer" for "nothing listens".
                let code = buf.get(at + 16..at + 20).and_then(|b| b.try_into().ok());
                return match code.map(i32::from_ne_bytes) {
                    Some(0) | None => Ok(found),
                    Some(code) => Err(io::Error::from_raw_os_error(-code)),
                };
            }
            if let Some(addr) = listener_of(buf.get(at..at + len).unwrap_or_default()) {
                found.push(addr);
            }
            if len < 16 {
                return Ok(found);
            }
            at += len.next_multiple_of(4);
        }
    }
}

/// The local address in one inet_diag_msg.
fn listener_of(message: &[u8]) -> Option<SocketAddr> {
    let family = *message.get(16)?;
    let port = u16::from_be_bytes([*message.get(SPORT_AT)?, *message.get(SPORT_AT + 1)?]);
    let ip: IpAddr = if family == libc::AF_INET as u8 {
        <[u8; 4]>::try_from(message.get(SRC_AT..SRC_AT + 4)?)
            .ok()?
            .into()
    } else {
        <[u8; 16]>::try_from(message.get(SRC_AT..SRC_AT + 16)?)
            .ok()?
            .into()
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe() -> ListenerProbe {
        // SAFETY: plain socket creation, owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        assert!(raw >= 0);
        // SAFETY: fresh fd.
        ListenerProbe::new(unsafe { std::os::fd::FromRawFd::from_raw_fd(raw) })
    }

    #[test]
    fn listeners_are_found_and_closed_ports_are_not() {
        let probe = probe();
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let v6 = std::net::TcpListener::bind("[::1]:0").unwrap();
        assert!(probe.accepts(v4.local_addr().unwrap()));
        assert!(probe.accepts(v6.local_addr().unwrap()));
        let closed = v4.local_addr().unwrap();
        drop(v4);
        assert!(!probe.accepts(closed));
        let elsewhere = SocketAddr::new(
            "127.0.0.2".parse().unwrap(),
            v6.local_addr().unwrap().port(),
        );
        assert!(!probe.accepts(elsewhere));
        // UDP: a bound socket takes datagrams; a closed port, or a connected socket, does not.
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
        assert!(probe.accepts_datagrams(udp.local_addr().unwrap()));
        assert!(probe.accepts_datagrams(udp6.local_addr().unwrap()));
        assert!(
            !probe.accepts(udp.local_addr().unwrap()),
            "not a TCP listener"
        );
        let connected = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        connected.connect(udp.local_addr().unwrap()).unwrap();
        assert!(!probe.accepts_datagrams(connected.local_addr().unwrap()));
        let closed = udp.local_addr().unwrap();
        drop(udp);
        assert!(!probe.accepts_datagrams(closed));
    }
}
