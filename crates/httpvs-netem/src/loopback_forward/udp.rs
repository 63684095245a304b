//! UDP from the link to the host's loopback: one host socket per client address and port (a
//! QUIC connection, say), connected to the same address on the host; answers go back from the
//! address the client sent to. Flows idle for a minute are dropped; their number is bounded.

use crate::rootless::host_sockets::{HostSockets, SocketKind};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;

/// A flow with no datagram either way for this long is dropped.
const IDLE: Duration = Duration::from_secs(60);
/// At most this many flows per forwarded port; datagrams of further flows are dropped.
const MAX_FLOWS: usize = 4096;
/// Large enough for any datagram.
const BUFFER: usize = 65_536;

type Flows = Arc<Mutex<HashMap<SocketAddr, Arc<Flow>>>>;

/// One client's flow: its socket on the host and when the client last sent.
struct Flow {
    host: UdpSocket,
    opened: Instant,
    /// Milliseconds after `opened` of the client's last datagram.
    last_sent: AtomicU64,
}

impl Flow {
    /// Sends a client's datagram on (waiting for room: a fresh socket is not writable until
    /// the reactor has seen it, and `try_send` would drop the first datagram, a QUIC Initial).
    async fn send(&self, datagram: &[u8]) {
        let now = self.opened.elapsed().as_millis() as u64;
        self.last_sent.store(now, Ordering::Relaxed);
        let _ = self.host.send(datagram).await;
    }

    fn idle(&self) -> bool {
        let last = Duration::from_millis(self.last_sent.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last) >= IDLE
    }
}

/// Relays datagrams arriving at `socket` (bound in our namespace) to the host and back.
pub async fn serve(socket: std::net::UdpSocket, host: &'static HostSockets) {
    let Ok(target) = socket.local_addr().map(super::host_target) else {
        return;
    };
    let local = match socket
        .set_nonblocking(true)
        .and_then(|()| UdpSocket::from_std(socket))
    {
        Ok(local) => Arc::new(local),
        Err(_) => return,
    };
    let flows: Flows = Arc::default();
    let mut buf = vec![0u8; BUFFER];
    loop {
        let Ok((n, client)) = local.recv_from(&mut buf).await else {
            continue;
        };
        let flow = flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&client)
            .cloned();
        let flow = match flow {
            Some(flow) => flow,
            None => match open_flow(&flows, &local, client, target, host).await {
                Some(flow) => flow,
                None => continue,
            },
        };
        flow.send(&buf[..n]).await;
    }
}

/// A new flow for `client`: a host socket connected to `target`, and a task carrying answers back.
async fn open_flow(
    flows: &Flows,
    local: &Arc<UdpSocket>,
    client: SocketAddr,
    target: SocketAddr,
    host: &HostSockets,
) -> Option<Arc<Flow>> {
    if flows.lock().unwrap_or_else(|e| e.into_inner()).len() >= MAX_FLOWS {
        return None;
    }
    let kind = if target.is_ipv4() {
        SocketKind::UdpV4
    } else {
        SocketKind::UdpV6
    };
    let socket = std::net::UdpSocket::from(host.open(kind).ok()?);
    let socket = UdpSocket::from_std(socket).ok()?;
    socket.connect(target).await.ok()?;
    let flow = Arc::new(Flow {
        host: socket,
        opened: Instant::now(),
        last_sent: AtomicU64::new(0),
    });
    flows
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(client, flow.clone());
    tokio::spawn(answers(flow.clone(), local.clone(), client, flows.clone()));
    Some(flow)
}

/// Carries the host's answers back to `client` until the flow is idle both ways, then drops it.
async fn answers(flow: Arc<Flow>, local: Arc<UdpSocket>, client: SocketAddr, flows: Flows) {
    let mut buf = vec![0u8; BUFFER];
    loop {
        match tokio::time::timeout(IDLE, flow.host.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                let _ = local.send_to(&buf[..n], client).await;
            }
            // An ICMP error from the host (nothing listening yet) ends nothing: QUIC retries.
            Ok(Err(_)) => {}
            Err(_) if flow.idle() => {
                flows
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&client);
                return;
            }
            Err(_) => {}
        }
    }
}
