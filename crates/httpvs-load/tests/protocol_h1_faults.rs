//! HTTP/1.1 against misbehaving peers (a scripted raw TCP server): resets, truncated bodies,
//! malformed heads and chunking each map to their own error kind.

mod protocol_support;

use httpvs_load::protocol::h1::Http1;
use httpvs_load::protocol::{CloseCause, Connection, Protocol, SendError};
use httpvs_load::ErrorKind;
use protocol_support::{get, options, scripted_server, target, Ending};

/// Connects to a scripted server replying `reply`, sends one GET, returns the outcome.
async fn one_exchange(
    reply: &'static [u8],
    ending: Ending,
) -> (
    Result<httpvs_load::protocol::ResponseInfo, SendError>,
    CloseCause,
) {
    let target = target("http", scripted_server(reply, ending).await);
    let (conn, _) = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    let result = conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await;
    (result, conn.close_cause())
}

#[tokio::test(flavor = "current_thread")]
async fn reset_before_a_response_is_a_reset() {
    let (result, cause) = one_exchange(b"", Ending::Reset).await;
    assert_eq!(result.err(), Some(SendError::Failed(ErrorKind::Reset)));
    assert_eq!(cause, CloseCause::Reset);
}

#[tokio::test(flavor = "current_thread")]
async fn eof_inside_a_sized_body_truncates_it() {
    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(
        result.err(),
        Some(SendError::Failed(ErrorKind::TruncatedBody))
    );
    assert_eq!(cause, CloseCause::Fin);
}

/// One GET over TLS to a server that answers `reply` and then drops the TCP connection without
/// close_notify.
async fn tls_exchange(
    reply: &'static [u8],
) -> Result<httpvs_load::protocol::ResponseInfo, SendError> {
    let addr = protocol_support::tls_scripted_server(&[b"http/1.1"], Some(reply)).await;
    let target = target("https", addr);
    let mut opts = options(1, None);
    opts.tls = Some(
        httpvs_load::protocol::tls::client_config(true, None, &[b"http/1.1".as_slice()]).unwrap(),
    );
    let (conn, _) = Http1::default().connect(&target, &opts).await.unwrap();
    conn.send(&get(&target, "/"), std::time::Instant::now())
        .await
}

/// Over TLS, a FIN with no close_notify inside a sized body (a server that crashed) truncates
/// it as a plain FIN does (rustls's UnexpectedEof read as connection_closed).
#[tokio::test(flavor = "current_thread")]
async fn a_tls_fin_without_close_notify_inside_a_body_truncates_it() {
    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
    let result = tls_exchange(reply).await;
    assert_eq!(
        result.err(),
        Some(SendError::Failed(ErrorKind::TruncatedBody))
    );
}

/// Over TLS, a FIN with no close_notify ends a body the close delimits, as it does for curl:
/// every such response failed as connection_closed.
#[tokio::test(flavor = "current_thread")]
async fn a_tls_fin_without_close_notify_ends_a_body_delimited_by_the_close() {
    let reply = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe whole body";
    let info = tls_exchange(reply).await.expect("answered");
    assert_eq!((info.status, info.body_bytes), (200, 14));
}

#[tokio::test(flavor = "current_thread")]
async fn eof_inside_a_chunked_body_truncates_it() {
    let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel";
    let (result, _) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(
        result.err(),
        Some(SendError::Failed(ErrorKind::TruncatedBody))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn malformed_heads_and_chunks_are_protocol_errors() {
    // We close the connection on the server's protocol error: it is not the server's close.
    let (result, cause) = one_exchange(b"HTTP/1.1 OK 200\r\n\r\n", Ending::Fin).await;
    assert_eq!(result.err(), Some(SendError::Failed(ErrorKind::Protocol)));
    assert_eq!(cause, CloseCause::Local);
    let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(result.err(), Some(SendError::Failed(ErrorKind::Protocol)));
    assert_eq!(cause, CloseCause::Local);
}

#[tokio::test(flavor = "current_thread")]
async fn a_head_that_never_ends_is_a_protocol_error_not_unbounded_memory() {
    // 200 KiB of one header line and no end: read up to the 64 KiB cap, then refused.
    let mut reply = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    reply.resize(200 * 1024, b'a');
    let reply: &'static [u8] = Box::leak(reply.into_boxed_slice());
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(result.err(), Some(SendError::Failed(ErrorKind::Protocol)));
    assert_eq!(cause, CloseCause::Local);
}

#[tokio::test(flavor = "current_thread")]
async fn close_delimited_bodies_end_at_eof() {
    let reply = b"HTTP/1.1 200 OK\r\n\r\nbody until the end";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    let resp = result.unwrap();
    assert_eq!(resp.body_bytes, 18);
    assert!(resp.close_requested);
    // The server never said `Connection: close`: its FIN ended the body.
    assert_eq!(cause, CloseCause::Fin);
    let reply = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody until the end";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(result.unwrap().body_bytes, 18);
    assert_eq!(cause, CloseCause::ConnectionClose);
}

#[tokio::test(flavor = "current_thread")]
async fn interim_responses_are_skipped() {
    let reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(result.unwrap().status, 204);
    assert_eq!(cause, CloseCause::Open);
}

/// A 101 is a final answer after which the connection speaks another protocol: it counts
/// with its status and the connection is not reused (the next request used to be read from
/// the other protocol's bytes and fail as a protocol error).
#[tokio::test(flavor = "current_thread")]
async fn switching_protocols_ends_the_connection() {
    let reply = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n\x00\x01garbage";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    assert_eq!(result.unwrap().status, 101);
    assert_eq!(cause, CloseCause::Local);
}

/// `Transfer-Encoding` beside a `Content-Length` is framing RFC 9112 §6.3 calls a smuggling
/// risk: the body is read by its chunks (the length is ignored), the request succeeds, and we
/// close the connection rather than read the next response from where its framing says.
#[tokio::test(flavor = "current_thread")]
async fn chunked_beside_a_length_is_read_then_the_connection_closed() {
    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let (result, cause) = one_exchange(reply, Ending::Fin).await;
    let info = result.unwrap();
    assert_eq!((info.status, info.body_bytes), (200, 5));
    assert_eq!(cause, CloseCause::Local);
}

/// The completion time the connection reports (the engine's latency end): the read that
/// brought the head when the body came with it, and no time at all (the engine reads its
/// clock) when the body came later, so a slow body is never measured as fast.
#[tokio::test(flavor = "current_thread")]
async fn completion_time_covers_a_body_that_comes_later() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        // First request: the whole response at once.
        let _ = sock.read(&mut buf).await.unwrap();
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwhol")
            .await
            .unwrap();
        // Second: the head now, the body 100 ms later.
        let _ = sock.read(&mut buf).await.unwrap();
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        sock.write_all(b"late").await.unwrap();
        let _ = sock.read(&mut buf).await;
    });
    let target = target("http", addr);
    let (conn, _) = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    let start = Instant::now();
    let whole = conn.send(&get(&target, "/"), start).await.unwrap();
    let done = whole
        .done_at
        .expect("a whole response has its completion time");
    assert!(done >= start && done - start == whole.ttfb, "{whole:?}");
    let start = Instant::now();
    let split = conn.send(&get(&target, "/"), start).await.unwrap();
    assert_eq!(split.body_bytes, 4);
    assert!(split.ttfb < Duration::from_millis(100), "{split:?}");
    assert!(split.done_at.is_none(), "{split:?}");
    conn.close();
    drop(conn);
    server.await.unwrap();
}

/// A request dropped by its timeout after its response head came still counts the head's
/// bytes (header bytes read 0 while the wire's received bytes held them).
#[tokio::test(flavor = "current_thread")]
async fn a_head_that_came_counts_when_its_request_times_out() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = tcp.read(&mut buf).await;
        let _ = tcp.write_all(&[HEAD, b"ab"].concat()).await;
        // The body's other 8 bytes never come; the connection stays open.
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    });
    let target = target("http", addr);
    let (conn, _) = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    let request = get(&target, "/");
    let send = conn.send(&request, std::time::Instant::now());
    let timed_out = tokio::time::timeout(std::time::Duration::from_millis(300), send).await;
    assert!(timed_out.is_err());
    assert_eq!(conn.wire().header_received, HEAD.len() as u64);
}

/// A field folded over two lines (obs-fold) is taken, as RFC 9112 §5.2 asks of a user agent
/// and curl does: every such response failed as `protocol`.
#[tokio::test(flavor = "current_thread")]
async fn a_folded_field_is_taken() {
    let reply = b"HTTP/1.1 200 OK\r\nX-A: a\r\n  continued\r\nContent-Length: 2\r\n\r\nok";
    let (result, _) = one_exchange(reply, Ending::Fin).await;
    let info = result.unwrap();
    assert_eq!((info.status, info.body_bytes), (200, 2));
}
