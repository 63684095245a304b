//! The totals count failures, not only answers: openings that are not HTTP, failed TLS and QUIC
//! handshakes, h2 protocol errors, refused streams, requests cut off at stop, and answers by
//! status class, on every protocol that can see them.

mod support;

use httpvs_server::{H2Engine, Limits, RunningServer, ServerTotals};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::raw_h2::{frame, get_headers, get_headers_with, RawH2, DATA};

/// Waits (bounded) until `done` holds for the totals, then returns them.
fn totals_when(server: &RunningServer, done: impl Fn(&ServerTotals) -> bool) -> ServerTotals {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done(&server.totals()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.totals()
}

/// Sends `bytes` on a new TCP connection and reads until the server closes it (bounded).
fn exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = conn.write_all(bytes);
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    out
}

#[test]
fn openings_that_are_not_http_and_failed_tls_handshakes_are_counted() {
    let server = support::server(Limits::default());
    let http = server.http_addr().unwrap();
    for opening in [
        &b"hello\r\n"[..],
        b"GET /\r\n",
        b"\x16\x03\x01\x00\x05hello\r\n",
    ] {
        assert!(exchange(http, opening).is_empty(), "{opening:?}");
    }
    // Connected and closed without a byte: no failure, on the TLS port too (a health check
    // there counted as a failed handshake).
    drop(TcpStream::connect(http).unwrap());
    let https = server.https_addr().unwrap();
    for _ in 0..3 {
        drop(TcpStream::connect(https).unwrap());
    }
    exchange(https, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let t = totals_when(&server, |t| {
        t.failed.not_http >= 3 && t.failed.tls_handshakes >= 1
    });
    assert_eq!(
        (t.failed.not_http, t.failed.tls_handshakes),
        (3, 1),
        "{t:?}"
    );
    assert_eq!(t.connections.total(), 0, "{t:?}");
}

/// A client that says ALPN h2 over TLS and then sends an HTTP/1.1 request never spoke HTTP/2:
/// the owned engine closes without a GOAWAY, and counts it as not HTTP, not as a GOAWAY sent.
#[test]
fn a_broken_h2_preface_is_not_counted_as_a_goaway() {
    let server = support::server(Limits::default());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from(server.cert_der()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(tls), name).unwrap();
    let mut tcp = TcpStream::connect(server.https_addr().unwrap()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut stream = rustls::Stream::new(&mut conn, &mut tcp);
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let t = totals_when(&server, |t| t.failed.not_http > 0);
    assert_eq!(t.failed.not_http, 1, "{t:?}");
    assert_eq!(t.goaways_sent, 0, "{t:?}");
    assert_eq!(t.failed.h2_protocol_errors, 0, "{t:?}");
}

#[test]
fn h2_protocol_errors_are_counted_on_both_engines() {
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let server = support::server_on(Limits::default(), engine);
        let mut client = RawH2::connect(server.http_addr().unwrap());
        // DATA on stream 0: a connection error (RFC 9113 §6.1).
        client.send(&frame(DATA, 0, 0, b"x"));
        let frames = client.frames_until_closed(Duration::from_secs(5));
        let goaway = frames.iter().find_map(|f| f.goaway());
        assert_eq!(goaway.map(|g| g.1), Some(1), "{engine:?}: PROTOCOL_ERROR");
        let t = totals_when(&server, |t| t.failed.h2_protocol_errors > 0);
        assert_eq!(t.failed.h2_protocol_errors, 1, "{engine:?}: {t:?}");
        assert_eq!(t.goaways_sent, 1, "{engine:?}: {t:?}");
        assert_eq!(t.rejected.rapid_reset_cutoffs, 0, "{engine:?}: {t:?}");
    }
}

#[test]
fn streams_over_max_streams_are_counted_as_refused() {
    let server = support::server(Limits {
        max_streams: 2,
        ..Limits::default()
    });
    let mut client = RawH2::connect(server.http_addr().unwrap());
    // Wait for the server's SETTINGS, as a client must before going past the default limit.
    let _ = client.frames_until_closed(Duration::from_millis(100));
    let burst: Vec<u8> = (0..3u32)
        .flat_map(|i| get_headers(2 * i + 1, "/?delay=300ms"))
        .collect();
    client.send(&burst);
    let frames = client.frames_until_closed(Duration::from_millis(800));
    let refused = frames
        .iter()
        .filter(|f| f.kind == 0x3 && f.payload == 7u32.to_be_bytes())
        .count();
    assert_eq!(refused, 1, "{frames:?}");
    let t = totals_when(&server, |t| t.failed.refused_streams > 0);
    assert_eq!(t.failed.refused_streams, 1, "{t:?}");
}

#[test]
fn requests_still_in_progress_when_the_grace_runs_out_are_counted() {
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let server = support::server_on(Limits::default(), engine);
        let addr = server.http_addr().unwrap();
        let mut h1 = TcpStream::connect(addr).unwrap();
        h1.write_all(b"GET /?delay=20s HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut h2 = RawH2::connect(addr);
        h2.send(&[get_headers(1, "/?delay=20s"), get_headers(3, "/?delay=20s")].concat());
        // A request answered before the stop is not cut off.
        h2.send(&get_headers(5, "/"));
        let t = totals_when(&server, |t| t.requests.h1 == 1 && t.requests.h2c == 3);
        assert_eq!((t.requests.h1, t.requests.h2c), (1, 3), "{engine:?}");
        let started = Instant::now();
        let t = server.shutdown(Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_secs(5), "{engine:?}");
        assert_eq!(t.failed.cut_off_at_stop, 3, "{engine:?}: {t:?}");
        assert_eq!(t.statuses.total(), 1, "{engine:?}: {t:?}");
    }
}

/// A stream answered 413 while its client still has a body to send stays open on our side
/// until the client ends it; answered, it is not cut off at the stop (it read "cut off at
/// stop 1" beside its 413).
#[test]
fn an_answered_stream_still_open_is_not_cut_off() {
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let server = support::server_on(Limits::default(), engine);
        let mut h2 = RawH2::connect(server.http_addr().unwrap());
        let mut headers = get_headers_with(1, "/echo", &[("content-length", b"900000000")]);
        headers[4] = 0x4; // END_HEADERS only: the body is still to come.
        h2.send(&headers);
        let t = totals_when(&server, |t| t.statuses.total() == 1);
        assert_eq!(t.statuses.total(), 1, "{engine:?}: {t:?}");
        let t = server.shutdown(Duration::from_millis(200));
        assert_eq!(t.failed.cut_off_at_stop, 0, "{engine:?}: {t:?}");
    }
}

#[test]
fn answers_are_counted_by_status_class_on_every_engine() {
    let targets = [
        "/",
        "/?size=10",
        "/?status=301",
        "/?status=404",
        "/?size=bad",
        "/?status=503",
    ];
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let server = support::server_on(Limits::default(), engine);
        let addr = server.http_addr().unwrap();
        for target in targets {
            let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            assert!(!exchange(addr, request.as_bytes()).is_empty(), "{target}");
        }
        exchange(addr, b"GET / HTTP/2.0\r\n\r\n");
        let mut h2 = RawH2::connect(addr);
        let streams: Vec<u8> = targets
            .iter()
            .enumerate()
            .flat_map(|(i, t)| get_headers(2 * i as u32 + 1, t))
            .collect();
        h2.send(&streams);
        let want = 2 * targets.len() as u64 + 1;
        let t = totals_when(&server, |t| t.statuses.total() >= want);
        let s = t.statuses;
        assert_eq!(
            (s.s2xx, s.s3xx, s.s4xx, s.s5xx),
            (4, 2, 4, 3),
            "{engine:?}: {t:?}"
        );
    }
}

#[test]
fn a_failed_quic_handshake_is_counted() {
    let server = support::server(Limits::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
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
        // No ALPN in common: the server ends the handshake.
        tls.alpn_protocols = vec![b"not-h3".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
        let connecting = endpoint
            .connect(server.h3_addr().unwrap(), "localhost")
            .unwrap();
        let done = tokio::time::timeout(Duration::from_secs(5), connecting).await;
        assert!(matches!(done, Ok(Err(_))), "the handshake fails");
    });
    let t = totals_when(&server, |t| t.failed.quic_handshakes > 0);
    assert_eq!(t.failed.quic_handshakes, 1, "{t:?}");
    assert_eq!(t.connections.h3, 0, "{t:?}");
}
