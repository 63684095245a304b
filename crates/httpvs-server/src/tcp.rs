//! TCP listeners: accept, enforce `max_connections`, then tell HTTP/1.1 from h2c by the opening
//! bytes (cleartext, `opening.rs`) or by ALPN (TLS) and hand the connection to its protocol.

use crate::conn_io::{linger, ConnIo, ConnState};
use crate::opening::{answer_unsupported, probe, Opening, Replay};
use crate::totals::{Event, Proto};
use crate::worker::{ConnSlot, WorkerCtx};
use crate::{h1, h2};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

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

/// Reads what a connection opens with, within the handshake timeout; `None` when it closed or
/// went quiet first (counted as idle, though not in `connections`: no protocol is known yet).
async fn opening<I: tokio::io::AsyncRead + Unpin>(
    io: &mut I,
    ctx: &WorkerCtx,
) -> Option<(Opening, Vec<u8>)> {
    // A connection that has not opened with a request when the server stops (a browser's or
    // a port check's pre-connect) has nothing in flight: it closes at once rather than hold
    // the stop for the whole grace period.
    let mut shutdown = ctx.shutdown.clone();
    let probed = tokio::select! {
        probed = tokio::time::timeout(ctx.handshake_timeout(), probe(io)) => probed,
        () = crate::worker::stopping(&mut shutdown) => return None,
    };
    match probed {
        Ok(Ok(opened)) => Some(opened),
        Ok(Err(_)) => None,
        Err(_) => {
            ctx.counters.event(Event::IdleClosed);
            None
        }
    }
}

async fn serve_cleartext(mut stream: TcpStream, ctx: Arc<WorkerCtx>, _slot: ConnSlot) {
    let Some((kind, seen)) = opening(&mut stream, &ctx).await else {
        return;
    };
    let socket = Arc::new(stream);
    let state = Arc::new(ConnState::on(socket.clone()));
    match kind {
        Opening::H2 => {
            ctx.counters.connection(Proto::H2c);
            let io = ConnIo::new(socket.clone(), seen, state.clone());
            h2::serve(io, Proto::H2c, &ctx, state).await;
        }
        Opening::H1 => {
            ctx.counters.connection(Proto::H1);
            let io = ConnIo::new(socket.clone(), seen, state.clone());
            h1::serve(io, Proto::H1, &ctx, state).await;
        }
        Opening::Unsupported => {
            let mut io = ConnIo::new(socket.clone(), Vec::new(), state);
            unsupported_version(&mut io, Proto::H1, &ctx).await;
        }
        Opening::Neither => not_http(&seen, &ctx),
    }
    linger(&socket, ctx.limits.idle_timeout).await;
}

/// Answers 505 to a request line of a version past HTTP/1.x, counted as an HTTP/1.1 request.
async fn unsupported_version<W>(io: &mut W, proto: Proto, ctx: &WorkerCtx)
where
    W: tokio::io::AsyncWrite + Unpin,
{
    ctx.counters.connection(proto);
    ctx.counters.request(proto);
    ctx.counters.status(505);
    let _ = tokio::time::timeout(ctx.limits.idle_timeout, answer_unsupported(io)).await;
}

async fn serve_tls(stream: TcpStream, acceptor: TlsAcceptor, ctx: Arc<WorkerCtx>, _slot: ConnSlot) {
    let socket = Arc::new(stream);
    let state = Arc::new(ConnState::on(socket.clone()));
    let io = ConnIo::new(socket.clone(), Vec::new(), state.clone());
    // As for a cleartext opening: a handshake unfinished at the stop ends there.
    let mut shutdown = ctx.shutdown.clone();
    let handshake = async {
        // A connection closed before its first byte (a health check, a port scan) is no
        // failed handshake: the cleartext port counts nothing for it either.
        let mut first = [0u8; 1];
        if matches!(socket.peek(&mut first).await, Ok(0)) {
            return None;
        }
        Some(acceptor.accept(io).await)
    };
    let accepted = tokio::select! {
        accepted = tokio::time::timeout(ctx.handshake_timeout(), handshake) => accepted,
        () = crate::worker::stopping(&mut shutdown) => return,
    };
    let tls = match accepted {
        Ok(None) => return,
        Ok(Some(Ok(tls))) => tls,
        Ok(Some(Err(_))) => {
            ctx.counters.event(Event::TlsHandshakeFailed);
            return;
        }
        Err(_) => {
            ctx.counters.event(Event::IdleClosed);
            return;
        }
    };
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        ctx.counters.connection(Proto::H2);
        h2::serve(tls, Proto::H2, &ctx, state).await;
    } else {
        serve_tls_h1(tls, &ctx, state).await;
    }
    linger(&socket, ctx.limits.idle_timeout).await;
}

/// HTTP/1.1 over TLS, after the same look at the opening as the cleartext port's (505 for a
/// version past 1.x; an h2 preface without ALPN h2 is closed, as hyper would).
async fn serve_tls_h1<I>(mut tls: I, ctx: &Arc<WorkerCtx>, state: Arc<ConnState>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Some((kind, seen)) = opening(&mut tls, ctx).await else {
        return;
    };
    match kind {
        Opening::H1 => {
            ctx.counters.connection(Proto::H1Tls);
            h1::serve(Replay::new(tls, seen), Proto::H1Tls, ctx, state).await;
        }
        Opening::Unsupported => unsupported_version(&mut tls, Proto::H1Tls, ctx).await,
        Opening::H2 | Opening::Neither => not_http(&seen, ctx),
    }
}

/// Counts an opening closed without an answer; a connection closed before sending anything is
/// no failure (a port check, a client that gave up).
fn not_http(seen: &[u8], ctx: &WorkerCtx) {
    if !seen.is_empty() {
        ctx.counters.event(Event::NotHttp);
    }
}
