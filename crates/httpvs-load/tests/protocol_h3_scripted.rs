//! The owned HTTP/3 client against a scripted QUIC peer (quinn, in-process, port 0) that answers
//! each request stream with exact bytes or a reset: typed H3 errors for out-of-place frames,
//! malformed heads and dynamic QPACK references, a retry for H3_REQUEST_REJECTED, GOAWAY read
//! from the server's control stream, and a response written a byte at a time.

mod protocol_support;

use bytes::Bytes;
use httpvs_load::protocol::h3::{H3Options, Http3};
use httpvs_load::protocol::{
    CloseCause, ConnectOptions, Connection, Protocol, RequestSpec, RetryReason, SendError, Target,
};
use httpvs_load::ErrorKind;
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const TEST_TIMEOUT: Duration = Duration::from_secs(20);

/// What the scripted peer does with every request stream it accepts.
#[derive(Clone)]
enum Answer {
    /// Reads the request to its FIN, writes these bytes (in one-byte writes if `trickle`), FINs.
    Bytes { bytes: Vec<u8>, trickle: bool },
    /// Resets the stream with this code.
    Reset(u32),
}

/// `:status 200` (static index 25) and `content-length: 2` (name ref 4), then DATA "ok".
fn ok_response() -> Vec<u8> {
    let mut out = vec![0x01, 0x06, 0, 0, 0xc0 | 25, 0x54, 0x01, b'2'];
    out.extend_from_slice(&[0x00, 0x02, b'o', b'k']);
    out
}

/// The server's control stream: its type, an empty SETTINGS, then `frames`.
fn control_stream(frames: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0x00, 0x04, 0x00];
    bytes.extend_from_slice(frames);
    bytes
}

/// A GOAWAY frame naming stream `id` (a one-byte varint).
fn goaway(id: u8) -> [u8; 3] {
    [0x07, 0x01, id]
}

/// A QUIC server endpoint on 127.0.0.1:0 with a fresh certificate for localhost: the endpoint,
/// its address and the certificate.
fn peer_endpoint() -> (quinn::Endpoint, SocketAddr, CertificateDer<'static>) {
    let (tls, der) = protocol_support::h3_server_tls();
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS");
    let config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let endpoint =
        quinn::Endpoint::server(config, "127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = endpoint.local_addr().expect("local addr");
    (endpoint, addr, der)
}

/// A scripted HTTP/3 peer on 127.0.0.1:0; it first opens a unidirectional stream for each of
/// `uni` with those bytes, left open. Returns its address and its certificate.
fn scripted_peer(answer: Answer, uni: Vec<Vec<u8>>) -> (SocketAddr, CertificateDer<'static>) {
    let (endpoint, addr, der) = peer_endpoint();
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            let answer = answer.clone();
            let uni = uni.clone();
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                for bytes in &uni {
                    let Ok(mut stream) = conn.open_uni().await else {
                        return;
                    };
                    let _ = stream.write_all(bytes).await;
                    std::mem::forget(stream); // closing a control stream is a connection error
                }
                while let Ok((send, recv)) = conn.accept_bi().await {
                    tokio::spawn(answer_stream(send, recv, answer.clone()));
                }
            });
        }
    });
    (addr, der)
}

async fn answer_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream, answer: Answer) {
    match answer {
        Answer::Bytes { bytes, trickle } => {
            let _ = recv.read_to_end(1 << 20).await;
            if trickle {
                for byte in bytes {
                    let _ = send.write_all(&[byte]).await;
                    tokio::task::yield_now().await;
                }
            } else {
                let _ = send.write_all(&bytes).await;
            }
            let _ = send.finish();
            let _ = send.stopped().await;
        }
        Answer::Reset(code) => {
            let _ = send.reset(quinn::VarInt::from_u32(code));
            let _ = recv.stop(quinn::VarInt::from_u32(code));
        }
    }
}

/// The owned client's way to the peer at `addr` (trusting `cert`), with `streams` streams.
fn client_to(
    addr: SocketAddr,
    cert: CertificateDer<'static>,
    streams: u32,
) -> (Target, ConnectOptions) {
    let target = Target {
        scheme: "https".into(),
        host: "localhost".into(),
        port: addr.port(),
        addr,
        dns: Duration::ZERO,
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        tls: Some(Arc::new(tls)),
        streams,
        keepalive: true,
    };
    (target, options)
}

/// A GET of the peer's `/`.
fn get(addr: SocketAddr) -> RequestSpec {
    RequestSpec {
        method: http::Method::GET,
        uri: format!("https://localhost:{}/", addr.port())
            .parse()
            .expect("uri"),
        headers: Vec::new(),
        body: Bytes::new(),
    }
}

/// Connects the owned client to the peer and sends one GET.
async fn one_request(
    answer: Answer,
    goaway_id: Option<u8>,
) -> (Result<u16, SendError>, CloseCause) {
    let uni = goaway_id.map(|id| control_stream(&goaway(id)));
    let (addr, cert) = scripted_peer(answer, uni.into_iter().collect());
    let (target, options) = client_to(addr, cert, 4);
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let (conn, _) = h3.connect(&target, &options).await.expect("connects");
        if goaway_id.is_some() {
            while conn.accepts_requests() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let req = get(addr);
        let result = conn
            .send(&req, std::time::Instant::now())
            .await
            .map(|r| r.status);
        (result, conn.close_cause())
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded")
}

fn bytes(bytes: Vec<u8>) -> Answer {
    Answer::Bytes {
        bytes,
        trickle: false,
    }
}

#[tokio::test]
async fn a_response_written_a_byte_at_a_time_is_read_whole() {
    let answer = Answer::Bytes {
        bytes: ok_response(),
        trickle: true,
    };
    assert_eq!(one_request(answer, None).await.0, Ok(200));
}

/// The client closes the connection for the server's fault: a close of ours (counted "by us",
/// as h2's), not the server resetting it (the report read "closed with resets").
#[tokio::test]
async fn data_before_headers_is_h3_frame_unexpected_and_closes_the_connection() {
    let (result, cause) = one_request(bytes(vec![0x00, 0x02, b'o', b'k']), None).await;
    assert_eq!(result, Err(SendError::Failed(ErrorKind::H3(0x105))));
    assert_eq!(cause, CloseCause::Local);
}

#[tokio::test]
async fn a_head_without_status_is_h3_message_error_for_that_request_only() {
    // HEADERS with only `age: 0` (static index 2).
    let (result, cause) = one_request(bytes(vec![0x01, 0x03, 0, 0, 0xc0 | 2]), None).await;
    assert_eq!(result, Err(SendError::Failed(ErrorKind::H3(0x10e))));
    assert_eq!(cause, CloseCause::Open);
}

#[tokio::test]
async fn a_dynamic_table_reference_is_qpack_decompression_failed() {
    let (result, _) = one_request(bytes(vec![0x01, 0x03, 0x02, 0, 0x80]), None).await;
    assert_eq!(result, Err(SendError::Failed(ErrorKind::H3(0x200))));
}

#[tokio::test]
async fn a_stream_ending_before_the_head_is_a_message_error() {
    let (result, _) = one_request(bytes(Vec::new()), None).await;
    assert_eq!(result, Err(SendError::Failed(ErrorKind::H3(0x10e))));
}

#[tokio::test]
async fn request_rejected_is_retried_not_failed() {
    let (result, _) = one_request(Answer::Reset(0x10b), None).await;
    assert_eq!(result, Err(SendError::Retry(RetryReason::Rejected)));
}

#[tokio::test]
async fn another_reset_code_is_a_typed_h3_failure() {
    let (result, _) = one_request(Answer::Reset(0x10c), None).await;
    assert_eq!(result, Err(SendError::Failed(ErrorKind::H3(0x10c))));
}

/// H3_NO_ERROR where the response was due reads as the server sent it, as h2's
/// RST_STREAM(NO_ERROR) does; it was counted as `protocol`, a breach the server did not make.
#[tokio::test]
async fn a_reset_with_no_error_before_the_response_is_named_h3_no_error() {
    let (result, cause) = one_request(Answer::Reset(0x100), None).await;
    assert_eq!(result, Err(SendError::Failed(ErrorKind::H3(0x100))));
    assert_eq!(cause, CloseCause::Open);
}

#[tokio::test]
async fn goaway_on_the_control_stream_stops_new_requests() {
    // GOAWAY(0): the server will process no request stream; ours (id 0) is at the limit.
    let (result, cause) = one_request(Answer::Reset(0x10b), Some(0)).await;
    assert_eq!(result, Err(SendError::Retry(RetryReason::Goaway(0))));
    assert_eq!(cause, CloseCause::Goaway);
}

/// A peer that allows one request stream at a time and reports what arrives on the client's
/// control stream (its first unidirectional stream) through the returned receiver.
fn one_stream_peer() -> (
    SocketAddr,
    CertificateDer<'static>,
    tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let (tls, der) = protocol_support::h3_server_tls();
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS");
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(1u32.into());
    config.transport_config(Arc::new(transport));
    let endpoint =
        quinn::Endpoint::server(config, "127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = endpoint.local_addr().expect("local addr");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let Some(incoming) = endpoint.accept().await else {
            return;
        };
        let Ok(conn) = incoming.await else { return };
        let control = conn.clone();
        tokio::spawn(async move {
            let Ok(mut stream) = control.accept_uni().await else {
                return;
            };
            let mut buf = [0u8; 64];
            while let Ok(Some(n)) = stream.read(&mut buf).await {
                let _ = tx.send(buf[..n].to_vec());
            }
        });
        while let Ok((send, recv)) = conn.accept_bi().await {
            tokio::spawn(answer_stream(send, recv, bytes(ok_response())));
        }
        drop(endpoint);
    });
    (addr, der, rx)
}

/// A request that waits for stream credit makes the client send a reserved HTTP/3 frame
/// (type 0x21, empty; RFC 9114 7.2.8) on its control stream: the packet carries the client's
/// ACK of the responses, which is what frees their streams on a quinn server. Without it the
/// client sent nothing and quinn held the ACK for its 25 ms delay: at the server's stream limit
/// h3 ran at the limit's worth of requests every 25 ms (632 req/s at 16 streams, 126k after).
#[tokio::test]
async fn a_request_waiting_for_stream_credit_sends_the_ack_at_once() {
    let (addr, cert, mut control) = one_stream_peer();
    let (target, options) = client_to(addr, cert, 2);
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let (conn, _) = h3.connect(&target, &options).await.expect("connects");
        let req = get(addr);
        let now = std::time::Instant::now();
        // Two at once on a one-stream limit: the second waits for credit.
        let (a, b) = tokio::join!(conn.send(&req, now), conn.send(&req, now));
        assert_eq!(a.map(|r| r.status), Ok(200));
        assert_eq!(b.map(|r| r.status), Ok(200));
        let mut seen = Vec::new();
        while !seen.ends_with(&[0x21, 0x00]) {
            seen.extend(control.recv().await.expect("control stream bytes"));
        }
        // The control stream's type and empty SETTINGS come first, then the reserved frame.
        assert_eq!(&seen[..3], &[0x00, 0x04, 0x00]);
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded");
}

/// Connects to a peer that opens `uni` streams and answers as `answer`, then sends GETs (each
/// after 5 ms, so the server's streams arrive) until one gets neither a 200 nor a refusal.
/// Returns that GET's result and the connection's close cause.
async fn after_server_streams(
    uni: Vec<Vec<u8>>,
    answer: Answer,
) -> (Result<u16, SendError>, CloseCause) {
    let (addr, cert) = scripted_peer(answer, uni);
    let (target, options) = client_to(addr, cert, 4);
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let (conn, _) = h3.connect(&target, &options).await.expect("connects");
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let result = conn
                .send(&get(addr), std::time::Instant::now())
                .await
                .map(|r| r.status);
            if result != Ok(200) && result != Err(SendError::Retry(RetryReason::Rejected)) {
                return (result, conn.close_cause());
            }
        }
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded")
}

/// A server's control stream that breaks RFC 9114 ends the connection with the code the RFC
/// names, closed by us, and requests on it fail with that code. These were accepted: a rising
/// GOAWAY id was ignored, a second control stream drained.
#[tokio::test]
async fn a_control_stream_that_breaks_http3_closes_the_connection_with_its_code() {
    let rising = [goaway(4), goaway(8)].concat();
    let cases: [(Vec<Vec<u8>>, u64); 6] = [
        // §5.2: a later GOAWAY may not name a higher stream.
        (vec![control_stream(&rising)], 0x108),
        // §5.2: a server's GOAWAY names a client-initiated bidirectional stream.
        (vec![control_stream(&goaway(2))], 0x108),
        // §6.2.1: one control stream per peer.
        (vec![control_stream(&[]), control_stream(&[])], 0x103),
        // §6.2.1: SETTINGS comes first.
        (vec![vec![0x00, 0x07, 0x01, 0x00]], 0x10a),
        // §7.2.4: SETTINGS comes once.
        (vec![control_stream(&[0x04, 0x00])], 0x105),
        // §7.2.1: DATA belongs on a request stream.
        (vec![control_stream(&[0x00, 0x01, b'x'])], 0x105),
    ];
    for (uni, code) in cases {
        let (result, cause) = after_server_streams(uni.clone(), bytes(ok_response())).await;
        assert_eq!(cause, CloseCause::Local, "{uni:02x?}");
        // A GOAWAY's stream limit comes first: a request past it was never sent, and is retried.
        if result != Err(SendError::Retry(RetryReason::Goaway(0))) {
            assert_eq!(
                result,
                Err(SendError::Failed(ErrorKind::H3(code))),
                "{uni:02x?}"
            );
        }
    }
}

/// A lower GOAWAY after a higher one (a graceful shutdown's two steps) is no error. The peer
/// refuses every request: it is retried as refused until the second GOAWAY puts it past the
/// limit.
#[tokio::test]
async fn a_falling_goaway_id_is_a_graceful_shutdown() {
    let falling = [goaway(8), goaway(0)].concat();
    let refuse = Answer::Reset(0x10b);
    let (result, cause) = after_server_streams(vec![control_stream(&falling)], refuse).await;
    assert_eq!(result, Err(SendError::Retry(RetryReason::Goaway(0))));
    assert_eq!(cause, CloseCause::Goaway);
}

/// A peer that reads each request and never answers it; once the first request has come, it
/// sends GOAWAY(`id`) on its control stream.
fn silent_peer_going_away(id: u8) -> (SocketAddr, CertificateDer<'static>) {
    let (endpoint, addr, der) = peer_endpoint();
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok(mut control) = conn.open_uni().await else {
                    return;
                };
                let _ = control.write_all(&control_stream(&[])).await;
                let mut held = Vec::new();
                let mut sent = false;
                while let Ok((send, mut recv)) = conn.accept_bi().await {
                    let _ = recv.read_to_end(1 << 20).await;
                    held.push(send);
                    if !sent {
                        let _ = control.write_all(&goaway(id)).await;
                        sent = true;
                    }
                }
                std::mem::forget(control); // closing a control stream is a connection error
            });
        }
    });
    (addr, der)
}

/// Requests on streams at or past a GOAWAY's id end at once as retries, as h2's do: the server
/// said it will not process them. They waited for an answer until --timeout and failed as
/// request timeouts (100 of 100 against a server that sent GOAWAY(0) and went quiet).
#[tokio::test]
async fn requests_a_goaway_turns_away_are_retried_at_once() {
    // GOAWAY(4): the first request (stream 0) will be processed, the second (4) will not.
    let (addr, cert) = silent_peer_going_away(4);
    let (target, options) = client_to(addr, cert, 4);
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let (conn, _) = h3.connect(&target, &options).await.expect("connects");
        let req = get(addr);
        let now = std::time::Instant::now;
        let first = conn.send(&req, now());
        tokio::pin!(first);
        // Polled once first, so it opens stream 0 and the second stream 4.
        assert!(futures_util::poll!(&mut first).is_pending());
        let second = conn.send(&req, now());
        // The second ends once the GOAWAY comes; the first (below the id) still waits.
        let second = tokio::select! {
            biased;
            second = second => second.map(|r| r.status),
            first = &mut first => panic!("the first request ended: {:?}", first.map(|r| r.status)),
        };
        assert_eq!(second, Err(SendError::Retry(RetryReason::Goaway(0))));
        assert!(
            tokio::time::timeout(Duration::from_millis(200), first)
                .await
                .is_err(),
            "the request below the GOAWAY id still waits for its answer"
        );
        conn.close_cause()
    };
    let cause = tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded: the turned-away request did not wait out the test");
    assert_eq!(cause, CloseCause::Goaway);
}

/// `:status 200` and `content-length: LENGTH` (one digit), then one DATA frame of `body`.
fn response_announcing(length: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0x01, 0x06, 0, 0, 0xc0 | 25, 0x54, 0x01, length];
    out.extend_from_slice(&[0x00, body.len() as u8]);
    out.extend_from_slice(body);
    out
}

/// A body that is not the length its head announced fails its request (RFC 9114 §4.1.2), as
/// on HTTP/1.1 and h2: short is a truncated body, long a protocol error. A short one read as
/// a success.
#[tokio::test]
async fn a_body_unlike_its_content_length_fails_its_request() {
    for (length, body, want) in [
        (
            b'5',
            &b"ok"[..],
            Err(SendError::Failed(ErrorKind::TruncatedBody)),
        ),
        (b'1', b"ok", Err(SendError::Failed(ErrorKind::Protocol))),
        (b'2', b"ok", Ok(200)),
    ] {
        let (result, _) = one_request(bytes(response_announcing(length, body)), None).await;
        assert_eq!(result, want, "content-length {}", length as char);
    }
}

/// One GET on `engine` (the owned client or the reference one `httpvs trace` runs) against a
/// peer answering `answer`: the status and body length, or the failure.
async fn one_request_on(
    engine: httpvs_load::protocol::h3::H3Engine,
    answer: Answer,
) -> Result<(u16, u64), SendError> {
    let (addr, cert) = scripted_peer(answer, Vec::new());
    let (target, options) = client_to(addr, cert, 4);
    let run = async {
        let h3 = Http3::new(&target, H3Options::default())
            .expect("endpoint")
            .with_engine(engine);
        let (conn, _) = h3.connect(&target, &options).await.expect("connects");
        conn.send(&get(addr), std::time::Instant::now())
            .await
            .map(|r| (r.status, r.body_bytes))
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded")
}

/// What the owned client reads, the reference client (the h3 crate, which `trace` runs) reads
/// too: a 100 before the 200 (it reported 100), a body after an empty DATA frame (it read 0
/// bytes), and a body unlike its content-length (it took it).
#[tokio::test]
async fn both_clients_read_interim_heads_empty_data_and_lengths_alike() {
    use httpvs_load::protocol::h3::H3Engine;
    // :status 100 (static index 63: the 6-bit prefix full, then 0), then the 200.
    let mut interim = vec![0x01, 0x04, 0, 0, 0xff, 0x00];
    interim.extend(ok_response());
    // The head announcing 2 bytes, an empty DATA frame, then DATA "ok".
    let mut empty_first = vec![0x01, 0x06, 0, 0, 0xc0 | 25, 0x54, 0x01, b'2', 0x00, 0x00];
    empty_first.extend_from_slice(&[0x00, 0x02, b'o', b'k']);
    let cases = [
        (interim, Ok((200, 2))),
        (empty_first, Ok((200, 2))),
        (
            response_announcing(b'5', b"ok"),
            Err(SendError::Failed(ErrorKind::TruncatedBody)),
        ),
        (
            response_announcing(b'1', b"ok"),
            Err(SendError::Failed(ErrorKind::Protocol)),
        ),
    ];
    for engine in [H3Engine::Owned, H3Engine::Reference] {
        for (answer, want) in &cases {
            let got = one_request_on(engine, bytes(answer.clone())).await;
            assert_eq!(&got, want, "{engine:?}: {answer:?}");
        }
    }
    // A DATA frame announcing 5 bytes of which 2 come before the FIN, a byte at a time: the
    // frame is cut short (H3_FRAME_ERROR); the reference client read it as 5 bytes, whole.
    let mut cut = vec![0x01, 0x06, 0, 0, 0xc0 | 25, 0x54, 0x01, b'5'];
    cut.extend_from_slice(&[0x00, 0x05, b'o', b'k']);
    for engine in [H3Engine::Owned, H3Engine::Reference] {
        let answer = Answer::Bytes {
            bytes: cut.clone(),
            trickle: true,
        };
        let got = one_request_on(engine, answer).await;
        assert_eq!(
            got,
            Err(SendError::Failed(ErrorKind::H3(0x106))),
            "{engine:?}"
        );
    }
}

/// A HEADERS frame announced past a field section's limit ends the connection with
/// H3_EXCESSIVE_LOAD on both clients: the h3 crate held such a frame whole, growing as fast
/// as the server sent (400 MB in a 25 s trace).
#[tokio::test]
async fn a_frame_too_large_to_hold_is_excessive_load_on_both_clients() {
    use httpvs_load::protocol::h3::H3Engine;
    // HEADERS announcing 2^29 bytes (a 4-byte varint), then some of them.
    let mut huge = vec![0x01, 0xa0, 0, 0, 0];
    huge.extend_from_slice(&[0u8; 4096]);
    for engine in [H3Engine::Owned, H3Engine::Reference] {
        let got = one_request_on(engine, bytes(huge.clone())).await;
        assert_eq!(
            got,
            Err(SendError::Failed(ErrorKind::H3(0x107))),
            "{engine:?}"
        );
    }
}
