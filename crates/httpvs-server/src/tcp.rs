//! TCP listeners: accept, enforce `max_connections`, then tell HTTP/1.1 from h2c by the preface
//! (cleartext) or by ALPN (TLS) and hand the connection to its protocol.

use crate::conn_io::{linger, ConnIo, ConnState};
use crate::totals::{Event, Proto};
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
    let probed = tokio::time::timeout(ctx.handshake_timeout(), probe(&mut stream)).await;
    let (kind, seen) = match probed {
        Ok(Ok(opened)) => opened,
        Ok(Err(_)) => return,
        // Counted as idle, though not in `connections` (no protocol is known yet).
        Err(_) => {
            ctx.counters.event(Event::IdleClosed);
            return;
        }
    };
    let socket = Arc::new(stream);
    let state = Arc::new(ConnState::default());
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
        Opening::Neither => {}
    }
    linger(&socket, ctx.limits.idle_timeout).await;
}

/// What a cleartext connection opens with.
#[derive(Debug, PartialEq, Eq)]
enum Opening {
    /// The HTTP/2 preface.
    H2,
    /// An HTTP/1.x request line (or one too long to judge; hyper answers 414/431 then).
    H1,
    /// Neither (like h2spec's invalid preface): closed without an answer, which is what an
    /// HTTP/2 client must see, and no HTTP/1 client sends.
    Neither,
}

/// Longest request line judged before handing over to hyper.
const MAX_PROBE: usize = 8 * 1024;

/// Reads until the opening is known; returns it and the bytes read, to be replayed.
async fn probe(stream: &mut TcpStream) -> std::io::Result<(Opening, Vec<u8>)> {
    let mut seen = Vec::with_capacity(1024);
    loop {
        if stream.read_buf(&mut seen).await? == 0 {
            return Ok((Opening::Neither, seen));
        }
        if let Some(kind) = classify(&seen) {
            return Ok((kind, seen));
        }
        if seen.len() >= MAX_PROBE {
            return Ok((Opening::H1, seen));
        }
        if seen.len() == seen.capacity() {
            seen.reserve(seen.len());
        }
    }
}

/// The opening of `seen`, or `None` while it could still be either.
fn classify(seen: &[u8]) -> Option<Opening> {
    let n = seen.len().min(PREFACE.len());
    if seen[..n] == PREFACE[..n] {
        return (n == PREFACE.len()).then_some(Opening::H2);
    }
    let line_end = seen.iter().position(|&b| b == b'\n')?;
    let line = seen[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&seen[..line_end]);
    let is_http1 = line.ends_with(b" HTTP/1.1") || line.ends_with(b" HTTP/1.0");
    Some(if is_http1 {
        Opening::H1
    } else {
        Opening::Neither
    })
}

async fn serve_tls(stream: TcpStream, acceptor: TlsAcceptor, ctx: Arc<WorkerCtx>, _slot: ConnSlot) {
    let socket = Arc::new(stream);
    let state = Arc::new(ConnState::default());
    let io = ConnIo::new(socket.clone(), Vec::new(), state.clone());
    let accepted = tokio::time::timeout(ctx.handshake_timeout(), acceptor.accept(io)).await;
    let tls = match accepted {
        Ok(Ok(tls)) => tls,
        Ok(Err(_)) => return,
        Err(_) => {
            ctx.counters.event(Event::IdleClosed);
            return;
        }
    };
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        ctx.counters.connection(Proto::H2);
        h2::serve(tls, Proto::H2, &ctx, state).await;
    } else {
        ctx.counters.connection(Proto::H1Tls);
        h1::serve(tls, Proto::H1Tls, &ctx, state).await;
    }
    linger(&socket, ctx.limits.idle_timeout).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings_are_told_apart() {
        assert_eq!(classify(PREFACE), Some(Opening::H2));
        assert_eq!(classify(b"PRI * HTTP/2"), None);
        assert_eq!(
            classify(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Some(Opening::H1)
        );
        assert_eq!(classify(b"GET / HTTP/1.0\n"), Some(Opening::H1));
        assert_eq!(classify(b"GET /long/path"), None);
        assert_eq!(
            classify(b"INVALID CONNECTION PREFACE\r\n\r\n"),
            Some(Opening::Neither)
        );
        assert_eq!(
            classify(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"),
            Some(Opening::Neither)
        );
    }
}
