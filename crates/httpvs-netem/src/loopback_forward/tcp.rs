//! TCP from the link to the host's loopback: each accepted connection is spliced to a new
//! connection to the same address on the host. A refused host connection resets the client's
//! and closes the listener (later connects are refused), and a reset on either end resets the
//! other.

use super::Release;
use crate::rootless::host_sockets::{HostSockets, SocketKind};
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A splice's copy buffer, each way: `tokio::io::copy_bidirectional`'s size.
const COPY_BUF: usize = 8 * 1024;

/// Accepts on `listener` (bound in our namespace) and splices each connection to the host.
pub async fn serve(listener: std::net::TcpListener, host: &'static HostSockets, release: Release) {
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
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    tokio::spawn(splice(client, target, host, release.clone()));
                }
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            },
            () = release.wait() => break,
        }
    }
    drop(listener);
    release.forget();
}

/// Connects to `target` on the host and copies both ways until both sides are done.
async fn splice(
    client: TcpStream,
    target: SocketAddr,
    host: &'static HostSockets,
    release: Release,
) {
    let server = match connect_on_host(target, host).await {
        Ok(server) => server,
        Err(e) => {
            // The closest a splice can come to "connection refused": a reset, not a clean close.
            let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                release.refused();
            }
            return;
        }
    };
    // Bytes leave as soon as they arrive, so the server's own segmentation crosses the link.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    let reset = {
        let mut up = pin!(pump(&mut client_in, &mut server_out, Side::Client));
        let mut down = pin!(pump(&mut server_in, &mut client_out, Side::Server));
        let (mut up_open, mut down_open) = (true, true);
        loop {
            let ended = tokio::select! {
                ended = &mut up, if up_open => {
                    up_open = false;
                    ended
                }
                ended = &mut down, if down_open => {
                    down_open = false;
                    ended
                }
                else => return,
            };
            if let Err(reset) = ended {
                break reset;
            }
        }
    };
    // One end was reset (an abort, `SO_LINGER` 0): the other is reset too, so its peer sees
    // the abort it would see without emulation, not a clean FIN. Its write half does not
    // shut down on its own (a FIN ahead of the reset): it closes with its read half.
    let (other_in, other_out) = match reset {
        Side::Client => (server_in, server_out),
        Side::Server => (client_in, client_out),
    };
    let _ = socket2::SockRef::from(other_out.as_ref()).set_linger(Some(Duration::ZERO));
    other_out.forget();
    drop(other_in);
}

/// One end of a splice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// Copies from `from` (the `side` end) to the other end until `from`'s FIN, which it passes
/// on; `Err` names the end that failed (reset), reading or writing.
async fn pump(from: &mut OwnedReadHalf, to: &mut OwnedWriteHalf, side: Side) -> Result<(), Side> {
    let mut buf = vec![0; COPY_BUF];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return Ok(());
            }
            Ok(n) => n,
            Err(_) => return Err(side),
        };
        if to.write_all(&buf[..n]).await.is_err() {
            return Err(side.other());
        }
    }
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
