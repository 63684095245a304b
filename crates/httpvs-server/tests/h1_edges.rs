//! HTTP/1.1 edge cases nginx answers and the server used to close without a word, on the
//! cleartext port and over TLS: CONNECT gets 405 with Allow, a request line of an HTTP version
//! past 1.x gets 505, a newer HTTP/1.x minor version is answered as HTTP/1.1 (RFC 9112 §2.3),
//! and empty lines before a request line are skipped (RFC 9112 §2.2).

mod support;

use httpvs_server::{Limits, RunningServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Sends `bytes` on a new cleartext connection and reads until the server closes it (bounded).
fn exchange(server: &RunningServer, bytes: &str) -> String {
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(bytes.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The same over TLS with ALPN http/1.1.
fn exchange_tls(server: &RunningServer, bytes: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from(server.cert_der()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let tls = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = TcpStream::connect(server.https_addr().unwrap()).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut stream = rustls::StreamOwned::new(tls, sock);
    stream.write_all(bytes.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

type Exchange = fn(&RunningServer, &str) -> String;
const PORTS: [(&str, Exchange); 2] = [("cleartext", exchange), ("tls", exchange_tls)];

/// Waits until `done` holds for the server's totals (bounded), then returns them.
fn totals_when(
    server: &RunningServer,
    done: impl Fn(&httpvs_server::ServerTotals) -> bool,
) -> httpvs_server::ServerTotals {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done(&server.totals()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.totals()
}

#[test]
fn connect_gets_405_with_allow_and_a_close() {
    let server = support::server(Limits::default());
    for (port, exchange) in PORTS {
        let text = exchange(
            &server,
            "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        );
        assert!(text.starts_with("HTTP/1.1 405"), "{port}: {text}");
        let lower = text.to_ascii_lowercase();
        let allow = lower
            .lines()
            .find_map(|l| l.strip_prefix("allow: "))
            .unwrap_or_else(|| panic!("{port}: no Allow: {text}"));
        for method in ["get", "head", "post"] {
            assert!(allow.contains(method), "{port}: {allow}");
        }
        assert!(!allow.contains("connect"), "{port}: {allow}");
        assert!(lower.contains("connection: close"), "{port}: {text}");
    }
    let t = totals_when(&server, |t| t.requests.h1 + t.requests.h1_tls >= 2);
    assert_eq!((t.requests.h1, t.requests.h1_tls), (1, 1), "{t:?}");
}

#[test]
fn a_request_line_past_http_1_gets_505() {
    let server = support::server(Limits::default());
    for (port, exchange) in PORTS {
        for version in ["HTTP/2.0", "HTTP/3.0"] {
            let text = exchange(&server, &format!("GET / {version}\r\nHost: x\r\n\r\n"));
            assert!(text.starts_with("HTTP/1.1 505"), "{port} {version}: {text}");
            assert!(
                text.to_ascii_lowercase().contains("connection: close"),
                "{port} {version}: {text}"
            );
        }
    }
    let t = totals_when(&server, |t| t.requests.h1 + t.requests.h1_tls >= 4);
    assert_eq!((t.requests.h1, t.requests.h1_tls), (2, 2), "{t:?}");
    assert_eq!((t.connections.h1, t.connections.h1_tls), (2, 2), "{t:?}");
}

#[test]
fn a_newer_http_1_minor_version_is_answered_as_http_1_1() {
    let server = support::server(Limits::default());
    for (port, exchange) in PORTS {
        let text = exchange(
            &server,
            "GET /?size=3 HTTP/1.2\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(text.starts_with("HTTP/1.1 200"), "{port}: {text}");
    }
    let t = totals_when(&server, |t| t.requests.h1 + t.requests.h1_tls >= 2);
    assert_eq!((t.requests.h1, t.requests.h1_tls), (1, 1), "{t:?}");
}

/// What is still closed without an answer on the cleartext port: a broken h2c preface (what an
/// HTTP/2 client must see) and anything that is not an HTTP/1.x request line.
#[test]
fn a_broken_preface_and_non_http_are_still_closed_without_an_answer() {
    let server = support::server(Limits::default());
    for opening in [
        "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
        "INVALID CONNECTION PREFACE\r\n\r\n",
        "GET /\r\n",
    ] {
        assert_eq!(exchange(&server, opening), "", "{opening:?}");
    }
}

/// Bytes no request line starts with (NUL, a TLS ClientHello on the cleartext port) are closed
/// at once, not held until the idle timeout while the server waited for their line's end.
#[test]
fn an_opening_no_method_starts_with_is_closed_not_held() {
    let server = support::server(Limits::default());
    for opening in [
        &[0u8; 1000][..],
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ] {
        let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
        // Held, the read would end in this timeout (an error) rather than at the FIN.
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        conn.write_all(opening).unwrap();
        let mut out = Vec::new();
        let read = conn.read_to_end(&mut out);
        assert!(read.is_ok(), "{:?}: held open ({read:?})", &opening[..4]);
        assert!(out.is_empty(), "{out:?}");
    }
}

#[test]
fn empty_lines_before_a_request_line_are_skipped() {
    let server = support::server(Limits::default());
    let get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let closing = "GET /?size=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    for (port, exchange) in PORTS {
        for lead in ["\r\n", "\r\n\r\n", "\n"] {
            let text = exchange(&server, &format!("{lead}{get}{lead}{closing}"));
            assert_eq!(
                text.matches("HTTP/1.1 200").count(),
                2,
                "{port} {lead:?}: {text}"
            );
            let last = text.rsplit("\r\n\r\n").next().unwrap_or_default();
            assert_eq!(last.len(), 3, "{port} {lead:?}: {text}");
        }
    }
}

/// A client that shuts its writing side after its request (`shutdown(SHUT_WR)`) still gets
/// the answer, as from nginx: the server dropped the connection at that FIN, before a delayed
/// answer (every one of them) and before 11-17% of immediate ones.
#[test]
fn a_request_followed_by_a_half_close_is_answered() {
    let server = support::server(Limits::default());
    for path in ["/?delay=1ms", "/"] {
        for _ in 0..20 {
            let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
            conn.write_all(request.as_bytes()).unwrap();
            conn.shutdown(std::net::Shutdown::Write).unwrap();
            let mut out = Vec::new();
            let _ = conn.read_to_end(&mut out);
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with("HTTP/1.1 200"), "{path}: {text:?}");
        }
    }
}

/// A body over the limit gets 413 with `Connection: close`, since the rest of it is left
/// unread and the connection ends: the 413 to a chunked body came without it, then the close.
#[test]
fn a_body_over_the_limit_gets_413_with_a_close() {
    let server = support::server(Limits {
        max_body_bytes: 1024,
        ..Limits::default()
    });
    let chunk = "x".repeat(4096);
    let chunked = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n{chunk}\r\n0\r\n\r\n"
    );
    let sized = format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n{chunk}");
    for (name, request) in [("chunked", chunked), ("sized", sized)] {
        let text = exchange(&server, &request);
        assert!(text.starts_with("HTTP/1.1 413"), "{name}: {text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{name}: {text}"
        );
    }
}
