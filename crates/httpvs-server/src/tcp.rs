//! TCP listeners: accept, enforce `max_connections`, then tell HTTP/1.1 from h2c by the preface
//! (cleartext) or by ALPN (TLS) and hand the connection to its protocol.

use crate::conn_io::{linger, ConnIo, ConnState};
use crate::totals::Proto;
use crate::worker::{ConnSlot, WorkerCtx};
use crate::{h1, h2};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// The HTTP/2 client connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Accepts connections until shutdown; `tls` makes this the TLS listener.
pub async fn accept_loop(listener: TcpListener, tls: Option<TlsAcceptor>, ctx: Arc<WorkerCtx>) {
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = crate::worker::stopping(&mut shutdown) => return,
        };
        let Some(slot) = ctx.admit() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        match tls.clone() {
            None => tokio::spawn(serve_cleartext(stream, ctx, slot)),
            Some(acceptor) => tokio::spawn(serve_tls(stream, acceptor, ctx, slot)),
        };
    }
}

async fn serve_cleartext(mut stream: TcpStream, ctx: Arc<WorkerCtx>, _slot: ConnSlot) {
    let mut probe = [0u8; 24];
    let probed = tokio::time::timeout(ctx.handshake_timeout(), async {
        let mut n = 0;
        loop {
            let read = stream.read(&mut probe[n..]).await?;
            n += read;
            if read == 0 || n == PREFACE.len() || probe[..n] != PREFACE[..n] {
                return Ok::<usize, std::io::Error>(n);
            }
        }
    })
    .await;
    let Ok(Ok(n)) = probed else { return };
    if n == 0 {
        return;
    }
    let socket = Arc::new(stream);
    let state = Arc::new(ConnState::default());
    let io = ConnIo::new(socket.clone(), &probe[..n], state.clone());
    if probe[..n] == PREFACE[..] {
        ctx.counters.connection(Proto::H2c);
        h2::serve(io, Proto::H2c, &ctx, state).await;
    } else {
        ctx.counters.connection(Proto::H1);
        h1::serve(io, Proto::H1, &ctx, state).await;
    }
    linger(&socket, ctx.limits.idle_timeout).await;
}

async fn serve_tls(stream: TcpStream, acceptor: TlsAcceptor, ctx: Arc<WorkerCtx>, _slot: ConnSlot) {
    let socket = Arc::new(stream);
    let state = Arc::new(ConnState::default());
    let io = ConnIo::new(socket.clone(), &[], state.clone());
    let accepted = tokio::time::timeout(ctx.handshake_timeout(), acceptor.accept(io)).await;
    let Ok(Ok(tls)) = accepted else { return };
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        ctx.counters.connection(Proto::H2);
        h2::serve(tls, Proto::H2, &ctx, state).await;
    } else {
        ctx.counters.connection(Proto::H1Tls);
        h1::serve(tls, Proto::H1Tls, &ctx, state).await;
    }
    linger(&socket, ctx.limits.idle_timeout).await;
}
