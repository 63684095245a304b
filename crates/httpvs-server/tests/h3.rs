//! HTTP/3 with a quinn + h3 client: `/`, `size`, `status`, 204/304 and HEAD without a body, GOAWAY after N requests, and a client
//! that vanishes mid-response.

mod support;

use bytes::{Buf, Bytes};
use httpvs_server::body::FIXED_BODY;
use httpvs_server::{Limits, RunningServer};
use std::sync::Arc;
use std::time::Duration;

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

struct Client {
    endpoint: quinn::Endpoint,
    send: SendRequest,
    port: u16,
}

async fn connect(server: &RunningServer) -> Client {
    let (endpoint, conn) = quic(server).await;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .unwrap();
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    Client {
        endpoint,
        send,
        port: server.h3_addr().unwrap().port(),
    }
}

/// A QUIC connection to the server's h3 port (ALPN h3), for a client that writes its own bytes.
async fn quic(server: &RunningServer) -> (quinn::Endpoint, quinn::Connection) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from(server.cert_der()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let addr = server.h3_addr().unwrap();
    let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
    (endpoint, conn)
}

/// Waits up to 10 s for the server to close a connection as idle; returns how many it did.
async fn idle_closes(server: &RunningServer) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.totals().rejected.idle_closed == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.totals().rejected.idle_closed
}

/// A client that stalls a request, in its head, its body or its reading of the answer, does not
/// hold the connection open: the request is dropped after the idle timeout, and the idle
/// connection closed. Each kept its connection (and its `--max-connections` place) for good,
/// as a request in progress, where HTTP/1.1 and h2 close such a connection on time.
/// Also, no server task panics on the way: asking a stalled upload to stop while h3-quinn's
/// read of it was pending unwrapped `None` inside h3-quinn.
#[tokio::test]
async fn a_stalled_h3_request_does_not_hold_its_connection() {
    static PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        previous(info);
    }));
    let limits = || Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    // Half a HEADERS frame: type 0x01, a length of 64, then 3 bytes of it.
    let server = support::server(limits());
    let (_endpoint, conn) = quic(&server).await;
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    send.write_all(&[0x01, 0x40, 0x40, 0, 0, 0xd1])
        .await
        .unwrap();
    assert_eq!(idle_closes(&server).await, 1, "a stalled head");

    // A body that stops: 3 of its 10 bytes.
    let server = support::server(limits());
    let client = connect(&server).await;
    let mut stream = body_begun(&client, "/echo").await;
    assert!(
        stream.recv_response().await.is_err(),
        "cancelled, not answered"
    );
    assert_eq!(idle_closes(&server).await, 1, "a stalled body");

    // An answer never read: 16 MiB against quinn's 1.25 MB stream window.
    let server = support::server(limits());
    let client = connect(&server).await;
    let uri = format!("https://localhost:{}/?size=16m", client.port);
    let mut stream = client
        .send
        .clone()
        .send_request(http::Request::get(uri).body(()).unwrap())
        .await
        .unwrap();
    stream.finish().await.unwrap();
    let _ = stream.recv_response().await.unwrap();
    assert_eq!(idle_closes(&server).await, 1, "an answer never read");
    assert_eq!(PANICS.load(std::sync::atomic::Ordering::Relaxed), 0);
}

/// A POST of `target` whose body announces 10 bytes and sends 3 of them.
async fn body_begun(
    client: &Client,
    target: &str,
) -> h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes> {
    let uri = format!("https://localhost:{}{target}", client.port);
    let request = http::Request::post(uri)
        .header("content-length", "10")
        .body(())
        .unwrap();
    let mut stream = client.send.clone().send_request(request).await.unwrap();
    stream.send_data(Bytes::from_static(b"abc")).await.unwrap();
    stream
}

/// GETs `target`; returns status and body, or the error text.
async fn get(client: &mut Client, target: &str) -> Result<(u16, Vec<u8>), String> {
    let (status, _, body) = request(client, http::Method::GET, target).await?;
    Ok((status, body))
}

/// Sends `method target`; returns status, headers and body, or the error text.
async fn request(
    client: &mut Client,
    method: http::Method,
    target: &str,
) -> Result<(u16, http::HeaderMap, Vec<u8>), String> {
    let uri = format!("https://localhost:{}{target}", client.port);
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .unwrap();
    let mut stream = client
        .send
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    stream.finish().await.map_err(|e| e.to_string())?;
    let response = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            body.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    Ok((response.status().as_u16(), response.headers().clone(), body))
}

#[tokio::test]
async fn h3_serves_root_size_and_status() {
    let server = support::server(Limits::default());
    let mut client = connect(&server).await;
    assert_eq!(
        get(&mut client, "/").await.unwrap(),
        (200, FIXED_BODY.to_vec())
    );
    for (query, size) in [("size=1k", 1024), ("size=64k", 65536), ("size=1m", 1 << 20)] {
        let (status, body) = get(&mut client, &format!("/x?{query}")).await.unwrap();
        assert_eq!((status, body.len()), (200, size), "{query}");
    }
    assert_eq!(get(&mut client, "/?status=503").await.unwrap().0, 503);
    let (status, body) = get(&mut client, "/?size=bad").await.unwrap();
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("`size`"));
    client.endpoint.close(0u32.into(), b"done");
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!((totals.connections.h3, totals.requests.h3), (1, 6));
}

/// RFC 9110: 204 and 304 have no content and no Content-Length; HEAD gets the length, no body.
#[tokio::test]
async fn h3_no_content_statuses_and_head_carry_no_body() {
    let server = support::server(Limits::default());
    let mut client = connect(&server).await;
    for (target, status) in [("/?status=204", 204), ("/?status=304&size=5", 304)] {
        let (code, headers, body) = request(&mut client, http::Method::GET, target)
            .await
            .unwrap();
        assert_eq!((code, body.len()), (status, 0), "{target}");
        assert!(
            !headers.contains_key("content-length"),
            "{target}: {headers:?}"
        );
    }
    for (target, len) in [("/", "18"), ("/?size=100", "100")] {
        let (code, headers, body) = request(&mut client, http::Method::HEAD, target)
            .await
            .unwrap();
        assert_eq!((code, body.len()), (200, 0), "HEAD {target}");
        assert_eq!(headers["content-length"], len, "HEAD {target}");
        let date = headers["date"].to_str().unwrap();
        assert!(date.len() == 29 && date.ends_with(" GMT"), "{date}");
    }
}

/// An `:authority` with userinfo (which the h3 crate's own parse lets through) makes a request
/// malformed (RFC 9114 §4.1.2): its stream is reset with H3_MESSAGE_ERROR, and the connection
/// goes on serving.
#[tokio::test]
async fn an_authority_with_userinfo_is_a_message_error() {
    let server = support::server(Limits::default());
    let mut client = connect(&server).await;
    let uri = format!("https://user@localhost:{}/", client.port);
    let request = http::Request::get(uri).body(()).unwrap();
    let mut stream = client.send.send_request(request).await.unwrap();
    let _ = stream.finish().await;
    let error = stream.recv_response().await.expect_err("a reset stream");
    assert!(
        format!("{error:?}").contains("H3_MESSAGE_ERROR"),
        "{error:?}"
    );
    assert_eq!(get(&mut client, "/").await.unwrap().0, 200);
    client.endpoint.close(0u32.into(), b"done");
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.requests.h3, 1, "{totals:?}");
}

#[tokio::test]
async fn an_idle_h3_connection_is_closed_and_counted() {
    let server = support::server(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut client = connect(&server).await;
    assert_eq!(get(&mut client, "/").await.unwrap().0, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.totals().rejected.idle_closed == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.totals().rejected.idle_closed, 1);
}

#[tokio::test]
async fn h3_sends_goaway_after_n_requests() {
    let server = support::server(Limits {
        max_requests_per_conn: Some(3),
        ..Limits::default()
    });
    let mut client = connect(&server).await;
    let mut ok = 0;
    for _ in 0..5 {
        match get(&mut client, "/").await {
            Ok((200, _)) => ok += 1,
            _ => break,
        }
        // Let the GOAWAY arrive before the next request, as a sequential client would see it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ok, 3);
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.requests.h3, 3);
    assert_eq!(totals.goaways_sent, 1);
}

#[tokio::test]
async fn a_client_vanishing_mid_response_leaves_the_server_serving() {
    let server = support::server(Limits::default());
    let client = connect(&server).await;
    let uri = format!("https://localhost:{}/?size=16m", client.port);
    let mut send = client.send.clone();
    let mut stream = send
        .send_request(http::Request::get(uri).body(()).unwrap())
        .await
        .unwrap();
    stream.finish().await.unwrap();
    let _ = stream.recv_response().await.unwrap();
    let _ = stream.recv_data().await;
    // Vanish: no CONNECTION_CLOSE reaches the server, the socket just goes away.
    drop(stream);
    drop(send);
    drop(client);
    let mut other = connect(&server).await;
    assert_eq!(get(&mut other, "/").await.unwrap().0, 200);
}

/// A request still being answered is not idleness: a `delay` longer than the idle timeout is
/// answered, and the connection idles out only after it.
#[tokio::test]
async fn a_delayed_h3_answer_outlives_the_idle_timeout() {
    let server = support::server(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut client = connect(&server).await;
    let answered = get(&mut client, "/?delay=1200ms").await;
    // Answered at all is the point: the idle close used to end the connection under it (its
    // count right after is not asserted: a slow machine may pass the idle timeout by then).
    assert_eq!(answered.map(|a| a.0), Ok(200));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.totals().rejected.idle_closed == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.totals().rejected.idle_closed, 1);
    assert!(get(&mut client, "/").await.is_err(), "closed after idling");
}

/// A client that vanishes while its request waits out a delay is still closed after the idle
/// timeout: what keeps a request's connection open must not keep a dead peer's.
#[test]
fn a_vanished_client_with_a_delayed_request_is_closed_as_idle() {
    let server = support::server(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    // The client's runtime is dropped after its request is sent: its tasks stop without a
    // CONNECTION_CLOSE, and its socket is gone.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client_rt.block_on(async {
        let client = connect(&server).await;
        let uri = format!("https://localhost:{}/?delay=30s", client.port);
        let mut send = client.send.clone();
        let mut stream = send
            .send_request(http::Request::get(uri).body(()).unwrap())
            .await
            .unwrap();
        stream.finish().await.unwrap();
        while server.totals().requests.h3 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        std::mem::forget((stream, send, client));
    });
    drop(client_rt);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.open_connections() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.open_connections(), 0);
    assert_eq!(server.totals().rejected.idle_closed, 1);
}

/// A request still in progress when the grace period ends: its client is told the server
/// stopped (CONNECTION_CLOSE, H3_NO_ERROR, "server stopped"); it used to hear nothing and wait
/// out its idle timeout, as QUIC has no FIN or RST to tell it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_past_the_grace_period_closes_h3_connections() {
    let server = support::server(Limits::default());
    let mut client = connect(&server).await;
    let pending = tokio::spawn(async move { get(&mut client, "/?delay=10s").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let totals = tokio::task::spawn_blocking(move || server.shutdown(Duration::from_millis(200)))
        .await
        .unwrap();
    assert_eq!(totals.failed.cut_off_at_stop, 1, "{totals:?}");
    // Bounded so a missing close fails here rather than hangs (the delay is 10 s).
    let outcome = tokio::time::timeout(Duration::from_secs(8), pending)
        .await
        .expect("the client heard the close before its request's delay ran out")
        .unwrap();
    let error = outcome.expect_err("no answer after the stop");
    assert!(error.contains("ApplicationClose: H3_NO_ERROR"), "{error}");
}

/// Sends 12 bodies of 60 KiB to `path` on one connection (budget 512 KiB), each `ended` or not,
/// and checks that eight fit (480 KiB) and the other four get 413.
async fn twelve_echoes_four_refused(path: &str, ended: bool) {
    let server = support::server(Limits {
        max_body_bytes: 64 * 1024,
        ..Limits::default()
    });
    let mut client = connect(&server).await;
    let mut streams = Vec::new();
    for _ in 0..12 {
        let uri = format!("https://localhost:{}{path}", client.port);
        let mut request = http::Request::post(uri);
        if ended {
            request = request.header("content-length", 60 * 1024);
        }
        let mut stream = client
            .send
            .send_request(request.body(()).unwrap())
            .await
            .unwrap();
        stream
            .send_data(Bytes::from(vec![b'x'; 60 * 1024]))
            .await
            .unwrap();
        if ended {
            stream.finish().await.unwrap();
        }
        streams.push(stream);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.totals().statuses.s4xx < 4 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = server.totals();
    assert_eq!(t.statuses.s4xx, 4, "{path}: {t:?}");
    assert_eq!(t.rejected.bodies_too_large, 4, "{path}: {t:?}");
    drop(streams);
}

/// `/echo` bodies still arriving on one connection hold at most eight bodies' worth together:
/// past it a stream gets 413 (a client opening 128 streams and never ending their bodies could
/// hold 1 GiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_bodies_held_on_an_h3_connection_are_bounded() {
    twelve_echoes_four_refused("/echo", false).await;
}

/// An echo holds its part of the budget until it has been sent, through a `?delay=` too: it
/// was given back once the body had come, so delayed echoes (here of 5 s) were held without
/// bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_echoes_on_an_h3_connection_hold_their_budget() {
    twelve_echoes_four_refused("/echo?delay=5s", true).await;
}

/// A HEADERS frame announcing far more than the field-section limit is refused at its frame
/// header (H3_EXCESSIVE_LOAD both ways), before its payload is held: the h3 crate buffered such
/// a frame whole (20 MiB a stream, 400 MB for 16) before checking the limit. The connection
/// goes on serving.
#[tokio::test]
async fn an_oversized_h3_headers_frame_is_refused_unread() {
    let server = support::server(Limits::default());
    let (_endpoint, conn) = quic(&server).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    // HEADERS with a 20 MiB length (a 4-byte varint), then the first of its bytes.
    let mut frame = vec![0x01];
    frame.extend_from_slice(&((20u32 << 20) | 0x8000_0000).to_be_bytes());
    frame.extend_from_slice(&[0; 1000]);
    let _ = send.write_all(&frame).await;
    let read = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20)).await;
    let code = match read.expect("answered in time") {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => code.into_inner(),
        other => panic!("not reset: {other:?}"),
    };
    assert_eq!(code, 0x107, "H3_EXCESSIVE_LOAD");
    // The same connection answers the next request: HEADERS of GET https://localhost/ in
    // static-table QPACK (:method GET 17, :scheme https 23, :path / 1, :authority literal).
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let mut head = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23, 0xc0 | 1, 0x50, 9];
    head.extend_from_slice(b"localhost");
    let mut frame = vec![0x01, head.len() as u8];
    frame.extend(head);
    send.write_all(&frame).await.unwrap();
    send.finish().unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20))
        .await
        .expect("answered in time")
        .expect("answered");
    // HEADERS first, its field section starting (after its length varint and the two prefix
    // bytes) with :status 200, static index 25.
    let length_bytes = 1usize << (answer[1] >> 6);
    let status = answer[1 + length_bytes + 2];
    assert_eq!((answer[0], status), (0x01, 0xc0 | 25), "{answer:02x?}");
}

/// A client that breaks RFC 9114 on its control stream (a second SETTINGS) has its connection
/// closed with H3_FRAME_UNEXPECTED, and the totals count it under `failed`: such closes were
/// counted nowhere.
#[tokio::test]
async fn an_h3_protocol_error_is_counted() {
    let server = support::server(Limits::default());
    let (_endpoint, conn) = quic(&server).await;
    let mut control = conn.open_uni().await.unwrap();
    // Stream type 0x00 (control), then SETTINGS (0x04) with no settings, twice.
    control
        .write_all(&[0x00, 0x04, 0x00, 0x04, 0x00])
        .await
        .unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("closed in time");
    match reason {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code.into_inner(), 0x105, "H3_FRAME_UNEXPECTED")
        }
        other => panic!("not closed by the application: {other:?}"),
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.totals().failed.h3_protocol_errors == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let totals = server.totals();
    assert_eq!(totals.failed.h3_protocol_errors, 1, "{totals}");
    assert!(
        totals.to_string().contains("h3-protocol-error 1,"),
        "{totals}"
    );
}

/// A field section over the limit but within the frame bound is read and answered 431, as on
/// h1 and h2.
#[tokio::test]
async fn h3_headers_over_the_limit_get_431() {
    let server = support::server(Limits::default());
    let client = connect(&server).await;
    let uri = format!("https://localhost:{}/", client.port);
    let request = http::Request::get(uri)
        .header("x-big", "a".repeat(20_000))
        .body(())
        .unwrap();
    let mut stream = client.send.clone().send_request(request).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.status(), 431);
}

/// A request the client resets mid-body ends there, its stream freed for the next request
/// (the reset is no longer read as the body's end, which went on to the `?delay=`).
#[tokio::test]
async fn a_request_reset_mid_body_frees_its_stream() {
    let server = support::server(Limits {
        max_streams: 1,
        ..Limits::default()
    });
    let mut client = connect(&server).await;
    let mut stream = body_begun(&client, "/?delay=600s").await;
    stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    let next = tokio::time::timeout(Duration::from_secs(10), get(&mut client, "/")).await;
    assert!(
        matches!(next, Ok(Ok((200, _)))),
        "the one stream is free again: {next:?}"
    );
}
