//! UDP from the link to the host's loopback: one host socket per client address and port (a
//! QUIC connection, say), connected to the same address on the host; answers go back from the
//! address the client sent to. Flows idle for a minute are dropped; their number is bounded.
//! A refusal from the host (its server gone) closes the socket and its flows, so the client's
//! next datagram is refused too (or forwarded again, if a server is back).
//! Each datagram keeps its ECN bits both ways (read and set as quinn does, by `quinn-udp`): a
//! link's `ecn` marks reach the server, and the server's ECT reaches the link to be marked.

use super::Release;
use crate::rootless::host_sockets::{HostSockets, SocketKind};
use quinn_udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use std::collections::HashMap;
use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// A flow with no datagram either way for this long is dropped.
const IDLE: Duration = Duration::from_secs(60);
/// At most this many flows per forwarded port; datagrams of further flows are dropped.
const MAX_FLOWS: usize = 4096;
/// Large enough for any datagram, or for a batch the kernel coalesced (GRO, 64 KiB at most).
const BUFFER: usize = 65_536;

/// A UDP socket whose datagrams carry their ECN bits.
struct EcnSocket {
    io: UdpSocket,
    state: UdpSocketState,
}

impl EcnSocket {
    fn new(socket: std::net::UdpSocket) -> Option<EcnSocket> {
        socket.set_nonblocking(true).ok()?;
        let state = UdpSocketState::new((&socket).into()).ok()?;
        let io = UdpSocket::from_std(socket).ok()?;
        Some(EcnSocket { io, state })
    }

    /// Receives into `buf`: one datagram, or several of one sender of `stride` bytes each
    /// (the last one shorter) that the kernel coalesced.
    async fn recv(&self, buf: &mut [u8]) -> std::io::Result<RecvMeta> {
        let mut meta = [RecvMeta::default()];
        self.io
            .async_io(Interest::READABLE, || {
                let mut bufs = [IoSliceMut::new(buf)];
                self.state.recv((&self.io).into(), &mut bufs, &mut meta)
            })
            .await?;
        Ok(meta[0])
    }

    /// Sends each datagram of a received batch to `to` with the ECN bits it came with; whether
    /// a send met a refusal (on a connected socket, the ICMP an earlier datagram drew).
    async fn send_batch(&self, to: SocketAddr, batch: &[u8], meta: &RecvMeta) -> bool {
        let batch = &batch[..meta.len.min(batch.len())];
        if batch.is_empty() {
            // An empty datagram is one too (chunks of nothing are none): it went missing.
            return self.send(to, batch, meta.ecn).await;
        }
        let mut refused = false;
        for datagram in batch.chunks(meta.stride.max(1)) {
            refused |= self.send(to, datagram, meta.ecn).await;
        }
        refused
    }

    /// Sends one datagram (waiting for room: a fresh socket is not writable until the reactor
    /// has seen it, and a try would drop the first datagram, a QUIC Initial); whether it met a
    /// refusal. Other errors lose the datagram, as a full queue would.
    async fn send(&self, to: SocketAddr, datagram: &[u8], ecn: Option<EcnCodepoint>) -> bool {
        let transmit = Transmit {
            destination: to,
            ecn,
            contents: datagram,
            segment_size: None,
            src_ip: None,
        };
        let sent = self
            .io
            .async_io(Interest::WRITABLE, || {
                self.state.try_send((&self.io).into(), &transmit)
            })
            .await;
        matches!(sent, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
    }
}

type Flows = Arc<Mutex<HashMap<SocketAddr, Arc<Flow>>>>;

/// One client's flow: its socket on the host (connected to the target) and when the client
/// last sent.
struct Flow {
    host: EcnSocket,
    target: SocketAddr,
    opened: Instant,
    /// Milliseconds after `opened` of the client's last datagram.
    last_sent: AtomicU64,
}

impl Flow {
    /// Sends a client's datagrams on; whether the host refused them (its server gone).
    async fn send(&self, batch: &[u8], meta: &RecvMeta) -> bool {
        let now = self.opened.elapsed().as_millis() as u64;
        self.last_sent.store(now, Ordering::Relaxed);
        self.host.send_batch(self.target, batch, meta).await
    }

    fn idle(&self) -> bool {
        let last = Duration::from_millis(self.last_sent.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last) >= IDLE
    }
}

/// Relays datagrams arriving at `socket` (bound in our namespace) to the host and back.
pub async fn serve(socket: std::net::UdpSocket, host: &'static HostSockets, release: Release) {
    let Ok(target) = socket.local_addr().map(super::host_target) else {
        return;
    };
    let Some(local) = EcnSocket::new(socket).map(Arc::new) else {
        return;
    };
    let flows: Flows = Arc::default();
    let mut buf = vec![0u8; BUFFER];
    loop {
        let received = tokio::select! {
            received = local.recv(&mut buf) => received,
            () = release.wait() => break,
        };
        let Ok(meta) = received else {
            continue;
        };
        let client = meta.addr;
        let flow = flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&client)
            .cloned();
        let flow = match flow {
            Some(flow) => flow,
            None => match open_flow(&flows, &local, client, target, host, &release).await {
                Some(flow) => flow,
                None => continue,
            },
        };
        if flow.send(&buf, &meta).await {
            release.refused();
            break;
        }
    }
    // Every flow's task has its own handle on the socket: they end on the same signal (at
    // their next await, each of which watches it), and the socket closes with the last. Only
    // then is the destination forgotten: bound still, the next datagram would find the port
    // taken and leave it to a socket no task reads, for good.
    flows.lock().unwrap_or_else(|e| e.into_inner()).clear();
    while Arc::strong_count(&local) > 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(local);
    release.forget();
}

/// A new flow for `client`: a host socket connected to `target`, and a task carrying answers back.
async fn open_flow(
    flows: &Flows,
    local: &Arc<EcnSocket>,
    client: SocketAddr,
    target: SocketAddr,
    host: &HostSockets,
    release: &Release,
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
    socket.connect(target).ok()?;
    let flow = Arc::new(Flow {
        host: EcnSocket::new(socket)?,
        target,
        opened: Instant::now(),
        last_sent: AtomicU64::new(0),
    });
    flows
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(client, flow.clone());
    tokio::spawn(answers(
        flow.clone(),
        local.clone(),
        client,
        flows.clone(),
        release.clone(),
    ));
    Some(flow)
}

/// Carries the host's answers back to `client` until the flow is idle both ways, then drops
/// it; or until the host refuses (its server gone), which ends the destination's every flow.
async fn answers(
    flow: Arc<Flow>,
    local: Arc<EcnSocket>,
    client: SocketAddr,
    flows: Flows,
    release: Release,
) {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let received = tokio::select! {
            received = tokio::time::timeout(IDLE, flow.host.recv(&mut buf)) => received,
            () = release.wait() => return,
        };
        match received {
            Ok(Ok(meta)) => {
                // A client gone is no reason to stop: it only loses its answers. A send that
                // waits for room ends with the destination too, so its socket can close.
                tokio::select! {
                    _ = local.send_batch(client, &buf, &meta) => {}
                    () = release.wait() => return,
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                release.refused();
                return;
            }
            // Another ICMP error from the host ends nothing: QUIC retries.
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
