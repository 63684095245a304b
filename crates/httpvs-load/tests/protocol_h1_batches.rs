//! Pipelined HTTP/1.1 read a write batch at a time (`SO_RCVLOWAT`, `h1/batch_wake.rs`): when
//! responses change size or framing mid-run, every response still arrives whole and in order,
//! against a server that writes each response separately, as h2o does.

mod protocol_support;

use futures_util::future::join_all;
use httpvs_load::protocol::h1::Http1;
use httpvs_load::protocol::{Connection, Protocol};
use protocol_support::{get, options, target};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The body the server sends for its `n`th response, and whether it is chunked: 48 of one
/// size, then smaller ones (the mark expects more bytes than come: the fallback reads them),
/// then chunked ones, then the first size again.
fn reply(n: usize) -> (usize, bool) {
    match n {
        0..48 => (100, false),
        48..64 => (10, false),
        64..72 => (30, true),
        _ => (100, false),
    }
}

fn response(n: usize) -> Vec<u8> {
    let (len, chunked) = reply(n);
    let body = vec![b'x'; len];
    let mut out = if chunked {
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{len:x}\r\n").into_bytes()
    } else {
        format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n").into_bytes()
    };
    out.extend_from_slice(&body);
    if chunked {
        out.extend_from_slice(b"\r\n0\r\n\r\n");
    }
    out
}

/// Serves one connection: one write per response, as each request head is complete.
async fn one_write_per_response_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let (mut pending, mut served) = (Vec::new(), 0);
        let mut buf = [0u8; 4096];
        loop {
            let n = sock.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            pending.extend_from_slice(&buf[..n]);
            while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                pending.drain(..end + 4);
                if sock.write_all(&response(served)).await.is_err() {
                    return;
                }
                served += 1;
            }
        }
    });
    addr
}

#[tokio::test(flavor = "current_thread")]
async fn responses_that_change_size_or_framing_arrive_whole() {
    let target = target("http", one_write_per_response_server().await);
    let depth = 8;
    let (conn, _) = Http1::default()
        .connect(&target, &options(depth, None))
        .await
        .unwrap();
    let req = get(&target, "/");
    let mut n = 0;
    for _ in 0..12 {
        let results =
            join_all((0..depth).map(|_| conn.send(&req, std::time::Instant::now()))).await;
        for result in results {
            let resp = result.unwrap();
            assert_eq!(resp.body_bytes, reply(n).0 as u64, "response {n}");
            n += 1;
        }
    }
    assert!(conn.accepts_requests());
}
