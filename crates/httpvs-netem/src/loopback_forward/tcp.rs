//! TCP from the link to the host's loopback: each accepted connection is spliced to a new
//! connection to the same address on the host. A refused host connection resets the client's.

use crate::rootless::host_sockets::{HostSockets, SocketKind};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts on `listener` (bound in our namespace) and splices each connection to the host.
pub async fn serve(listener: std::net::TcpListener, host: &'static HostSockets) {
    let Ok(target) = listener.local_addr().map(super::host_target) else {
        return;
    };
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
    {
        Ok(listener) => listener,
        Err(_) => return,
    };
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(splice(client, target, host));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

/// Connects to `target` on the host and copies both ways until both sides are done.
async fn splice(mut client: TcpStream, target: SocketAddr, host: &'static HostSockets) {
    let mut server = match connect_on_host(target, host).await {
        Ok(server) => server,
        Err(_) => {
            // The closest a splice can come to "connection refused": a reset, not a clean close.
            let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
            return;
        }
    };
    // Bytes leave as soon as they arrive, so the server's own segmentation crosses the link.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

async fn connect_on_host(target: SocketAddr, host: &HostSockets) -> std::io::Result<TcpStream> {
    let kind = if target.is_ipv4() {
        SocketKind::TcpV4
    } else {
        SocketKind::TcpV6
    };
    let socket = std::net::TcpStream::from(host.open(kind)?);
    TcpSocket::from_std_stream(socket).connect(target).await
}
