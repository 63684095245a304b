//! The rootless layout's bridge to the host's loopback. Our namespace stands in for the host at
//! the far end of the link; a client's first packet to `127.0.0.1:PORT` (a TCP SYN, any UDP
//! datagram) makes the relay bind a listener on that address in our namespace before the packet
//! is delivered, unless something of ours already serves it there (the embedded server). The
//! listener's connections and datagrams are then carried to the host's `127.0.0.1:PORT` over
//! sockets the host-side process made. The impairment stays on the link; the hop from our
//! namespace to the host is plain loopback.

mod tcp;
mod udp;

use super::host_sockets::HostSockets;
use crate::relay::PacketWatch;
use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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
    Tcp(std::net::TcpListener),
    Udp(std::net::UdpSocket),
}

/// Binds listeners as the relay sees new loopback destinations and hands them to its thread.
#[derive(Debug)]
pub struct LoopbackForward {
    /// Destinations already handled (forwarded, or served in our namespace by someone else).
    seen: Mutex<HashSet<(Transport, SocketAddr)>>,
    bound: UnboundedSender<Bound>,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Tcp(_) => "tcp",
            Bound::Udp(_) => "udp",
        })
    }
}

static FORWARD: Mutex<Option<Arc<LoopbackForward>>> = Mutex::new(None);

/// The process's forwarder, started on first use (one thread, for every link of the process).
pub fn shared(host: &'static HostSockets) -> io::Result<Arc<LoopbackForward>> {
    let mut slot = FORWARD.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(forward) = slot.as_ref() {
        return Ok(forward.clone());
    }
    let (sender, receiver) = unbounded_channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("netem-forward".into())
        .spawn(move || runtime.block_on(serve(receiver, host)))?;
    let forward = Arc::new(LoopbackForward {
        seen: Mutex::new(HashSet::new()),
        bound: sender,
    });
    *slot = Some(forward.clone());
    Ok(forward)
}

impl LoopbackForward {
    /// Makes sure `destination` in our namespace answers: binds a forwarding listener there
    /// unless it is already served (then the bind fails with "address in use" and it is left alone).
    fn ensure(&self, transport: Transport, destination: SocketAddr) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.insert((transport, destination)) {
            return;
        }
        let bound = match transport {
            Transport::Tcp => std::net::TcpListener::bind(destination).map(Bound::Tcp),
            Transport::Udp => std::net::UdpSocket::bind(destination).map(Bound::Udp),
        };
        // On failure (address in use: served here already) the packet goes to whoever serves it.
        if let Ok(bound) = bound {
            let _ = self.bound.send(bound);
        }
    }
}

impl PacketWatch for LoopbackForward {
    fn client_packet(&self, packet: &[u8]) {
        if let Some((transport, destination)) = loopback_destination(packet) {
            self.ensure(transport, destination);
        }
    }
}

/// The loopback destination a packet opens: a TCP SYN or a UDP datagram to 127.0.0.0/8.
fn loopback_destination(packet: &[u8]) -> Option<(Transport, SocketAddr)> {
    let version = packet.first()? >> 4;
    if version != 4 {
        return None;
    }
    let header_len = usize::from(packet[0] & 0x0f) * 4;
    let protocol = *packet.get(9)?;
    let dst: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
    let dst = Ipv4Addr::from(dst);
    if !dst.is_loopback() {
        return None;
    }
    let l4 = packet.get(header_len..)?;
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
    Some((transport, SocketAddr::new(IpAddr::V4(dst), port)))
}

/// The forwarder's thread: serves each listener the relay binds.
async fn serve(mut bound: UnboundedReceiver<Bound>, host: &'static HostSockets) {
    while let Some(listener) = bound.recv().await {
        match listener {
            Bound::Tcp(listener) => {
                tokio::spawn(tcp::serve(listener, host));
            }
            Bound::Udp(socket) => {
                tokio::spawn(udp::serve(socket, host));
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
    }
}
