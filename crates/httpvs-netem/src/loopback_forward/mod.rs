//! A bridge from the link's far end to the host's loopback, where the kernel cannot route:
//! - rootless, our namespace stands in for the host, so `127.0.0.1:PORT` must be carried on to
//!   the host's, over sockets the helper in the host's namespace made;
//! - for `[::1]:PORT` (rootless or not), packets arrive for the link's server-end address,
//!   since ::1 cannot cross a device (see `ipv6_loopback`), and are carried on to `[::1]:PORT`.
//!
//! A client's first packet to such a destination (a TCP SYN, any UDP datagram) makes the relay
//! bind a listener on it before the packet is delivered, unless something already serves it
//! there (the embedded server, a server bound to `[::]`). The impairment stays on the link; the
//! hop from the listener to the server is plain loopback.

mod listening;
mod tcp;
mod udp;

use crate::ipv6_loopback::is_link_server_end;
use crate::relay::PacketWatch;
use crate::rootless::host_sockets::{HostSockets, SocketKind};
use listening::ListenerProbe;
use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// The transport of a forwarded port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// TCP: a listener, each connection spliced to a new host connection.
    Tcp,
    /// UDP: one host socket per client address and port.
    Udp,
}

/// A listener just bound in our namespace, for the forwarder's thread to serve.
enum Bound {
    Tcp(std::net::TcpListener, Release),
    Udp(std::net::UdpSocket, Release),
}

/// Destinations already handled (forwarded, or served in our namespace by someone else).
type Seen = Arc<Mutex<HashSet<(Transport, SocketAddr)>>>;

/// How a forwarded destination ends once its server is gone (a host connection or datagram
/// refused): its listener closes and the destination is forgotten, so the next SYN or datagram
/// is refused as it would be without emulation, or forwarded again if a server is back. Kept
/// for good, a stopped server's port answered a connect and reset it, and a datagram never.
#[derive(Clone)]
pub(super) struct Release {
    seen: Seen,
    key: (Transport, SocketAddr),
    refused: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Release {
    /// The host refused: every task of this destination is to end.
    pub(super) fn refused(&self) {
        self.refused.send_replace(true);
    }

    /// Resolves once the host refused.
    pub(super) async fn wait(&self) {
        let _ = self.refused.subscribe().wait_for(|refused| *refused).await;
    }

    /// Forgets the destination; only once its listener is closed (bound still, it would be
    /// taken for someone else's at the next SYN).
    pub(super) fn forget(&self) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

/// Binds listeners as the relay sees new loopback destinations and hands them to its thread.
#[derive(Debug)]
pub struct LoopbackForward {
    /// Whether IPv4 destinations are carried (rootless) or left to the kernel (root).
    ipv4: bool,
    /// Destinations already handled (forwarded, or served in our namespace by someone else).
    seen: Seen,
    /// Asks the host which TCP ports listen.
    host_listeners: ListenerProbe,
    bound: UnboundedSender<Bound>,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Tcp(..) => "tcp",
            Bound::Udp(..) => "udp",
        })
    }
}

static FORWARD: Mutex<Option<Arc<LoopbackForward>>> = Mutex::new(None);

/// The process's forwarder, started on first use (one thread, for every link of the process).
/// With [`DIRECT`](crate::rootless::host_sockets::DIRECT) the thread makes its sockets in the namespace of the thread
/// that first calls this, which must then be the host's.
pub fn shared(host: &'static HostSockets) -> io::Result<Arc<LoopbackForward>> {
    let mut slot = FORWARD.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(forward) = slot.as_ref() {
        return Ok(forward.clone());
    }
    let host_listeners = ListenerProbe::new(host.open(SocketKind::ListenerDiag)?);
    let (sender, receiver) = unbounded_channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("netem-forward".into())
        .spawn(move || runtime.block_on(serve(receiver, host)))?;
    let forward = Arc::new(LoopbackForward {
        ipv4: crate::rootless::is_inside(),
        seen: Seen::default(),
        host_listeners,
        bound: sender,
    });
    *slot = Some(forward.clone());
    Ok(forward)
}

impl LoopbackForward {
    /// Makes sure `destination` in our namespace answers: binds a forwarding listener there,
    /// unless it is already served (the bind fails with "address in use": left alone) or
    /// nothing on the host listens at the target (the client's SYN or datagram is then refused,
    /// as without emulation, and the next one asks again).
    fn ensure(&self, transport: Transport, destination: SocketAddr) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&(transport, destination)) {
            return;
        }
        let release = Release {
            seen: self.seen.clone(),
            key: (transport, destination),
            refused: Arc::new(tokio::sync::watch::Sender::new(false)),
        };
        let bound = match transport {
            Transport::Tcp => {
                std::net::TcpListener::bind(destination).map(|l| Bound::Tcp(l, release))
            }
            Transport::Udp => {
                std::net::UdpSocket::bind(destination).map(|u| Bound::Udp(u, release))
            }
        };
        let bound = match bound {
            Ok(bound) => bound,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                seen.insert((transport, destination));
                return;
            }
            Err(_) => return,
        };
        let target = host_target(destination);
        let served = match transport {
            Transport::Tcp => self.host_listeners.accepts(target),
            Transport::Udp => self.host_listeners.accepts_datagrams(target),
        };
        if !served {
            // Dropping the socket: the SYN or datagram meets no one and is refused (an ICMP
            // port unreachable, which QUIC clients take at once).
            return;
        }
        seen.insert((transport, destination));
        let _ = self.bound.send(bound);
    }
}

impl PacketWatch for LoopbackForward {
    fn client_packet(&self, packet: &[u8]) {
        if let Some((transport, destination)) = loopback_destination(packet) {
            if destination.is_ipv6() || self.ipv4 {
                self.ensure(transport, destination);
            }
        }
    }
}

/// The loopback destination a packet opens: a TCP SYN or a UDP datagram to 127.0.0.0/8, or to
/// a link's IPv6 server end (where the client's ::1 was rewritten to).
fn loopback_destination(packet: &[u8]) -> Option<(Transport, SocketAddr)> {
    let (protocol, dst, l4): (u8, IpAddr, &[u8]) = match packet.first()? >> 4 {
        4 => {
            let header_len = usize::from(packet[0] & 0x0f) * 4;
            let dst: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
            let dst = Ipv4Addr::from(dst);
            dst.is_loopback()
                .then_some((*packet.get(9)?, dst.into(), packet.get(header_len..)?))?
        }
        6 => {
            // Our clients send no extension headers: the transport header follows at once.
            let dst: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
            let dst = Ipv6Addr::from(dst);
            is_link_server_end(dst).then_some((*packet.get(6)?, dst.into(), packet.get(40..)?))?
        }
        _ => return None,
    };
    let port = u16::from_be_bytes([*l4.get(2)?, *l4.get(3)?]);
    let transport = match protocol {
        6 => {
            let flags = *l4.get(13)?;
            let syn_only = flags & 0x02 != 0 && flags & 0x10 == 0;
            syn_only.then_some(Transport::Tcp)?
        }
        17 => Transport::Udp,
        _ => return None,
    };
    Some((transport, SocketAddr::new(dst, port)))
}

/// Where a listener bound at `local` carries its traffic: the same IPv4 address on the host,
/// or the host's `[::1]` for a link's IPv6 server end.
pub fn host_target(local: SocketAddr) -> SocketAddr {
    match local {
        SocketAddr::V4(_) => local,
        SocketAddr::V6(_) => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), local.port()),
    }
}

/// The forwarder's thread: serves each listener the relay binds.
async fn serve(mut bound: UnboundedReceiver<Bound>, host: &'static HostSockets) {
    while let Some(listener) = bound.recv().await {
        match listener {
            Bound::Tcp(listener, release) => {
                tokio::spawn(tcp::serve(listener, host, release));
            }
            Bound::Udp(socket, release) => {
                tokio::spawn(udp::serve(socket, host, release));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(protocol: u8, dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, protocol, 0, 0, 198, 18, 0, 2];
        p.extend_from_slice(&dst);
        p.extend_from_slice(l4);
        p
    }

    fn tcp(port: u16, flags: u8) -> Vec<u8> {
        let mut h = vec![0xc0, 0x01];
        h.extend_from_slice(&port.to_be_bytes());
        h.extend_from_slice(&[0; 9]);
        h.push(flags);
        h.extend_from_slice(&[0; 6]);
        h
    }

    #[test]
    fn syns_and_datagrams_to_loopback_open_a_destination() {
        let at = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let syn = ipv4(6, [127, 0, 0, 1], &tcp(8080, 0x02));
        assert_eq!(loopback_destination(&syn), Some((Transport::Tcp, at(8080))));
        let ack = ipv4(6, [127, 0, 0, 1], &tcp(8080, 0x10));
        assert_eq!(loopback_destination(&ack), None, "only a SYN opens");
        let syn_ack = ipv4(6, [127, 0, 0, 1], &tcp(8080, 0x12));
        assert_eq!(loopback_destination(&syn_ack), None);
        let udp = ipv4(17, [127, 0, 0, 1], &[0xc0, 1, 0x01, 0xbb, 0, 8, 0, 0]);
        assert_eq!(loopback_destination(&udp), Some((Transport::Udp, at(443))));
        let far = ipv4(17, [10, 0, 0, 1], &[0xc0, 1, 0x01, 0xbb, 0, 8, 0, 0]);
        assert_eq!(loopback_destination(&far), None);
        assert_eq!(loopback_destination(&syn[..22]), None, "truncated");
        assert_eq!(loopback_destination(&[]), None);
        let server_end = "fd68:7676:c612:401::1".parse::<Ipv6Addr>().unwrap();
        let mut v6 = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
        v6.extend_from_slice(
            &"fd68:7676:c612:401::2"
                .parse::<Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        v6.extend_from_slice(&server_end.octets());
        v6.extend_from_slice(&tcp(8443, 0x02));
        let expected = SocketAddr::new(server_end.into(), 8443);
        assert_eq!(loopback_destination(&v6), Some((Transport::Tcp, expected)));
        assert_eq!(host_target(expected), "[::1]:8443".parse().unwrap());
        v6[24 + 15] = 7; // some other IPv6 address: not ours
        assert_eq!(loopback_destination(&v6), None);
    }
}
