//! HTTP/3 interop with a real caddy: QUIC handshake with certificate checks, ALPN h3, requests,
//! QPACK header accounting, QUIC statistics, 0-RTT and Alt-Svc; and handshake failures typed
//! against a closed port (refused) and a scripted peer that only offers another QUIC version.

use bytes::Bytes;
use httpvs_load::protocol::h3::{alt_svc_h3, H3Options, Http3};
use httpvs_load::protocol::{ConnectOptions, Connection, Protocol, RequestSpec, Target};
use httpvs_load::ErrorKind;
use httpvs_testkit::caddy::{Caddy, CADDY_BODY};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A TLS client config trusting only caddy's internal root CA.
fn tls_trusting(ca_pem: &std::path::Path) -> Arc<rustls::ClientConfig> {
    let pem = std::fs::read(ca_pem).expect("caddy root CA");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots.add(cert.expect("PEM")).expect("root cert");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

fn target(caddy: &Caddy) -> Target {
    target_at(caddy.addr())
}

/// An https target at a loopback `addr`.
fn target_at(addr: SocketAddr) -> Target {
    Target {
        scheme: "https".into(),
        host: "127.0.0.1".into(),
        port: addr.port(),
        addr,
        dns: Duration::ZERO,
    }
}

/// Connects one h3 connection to `addr` trusting no certificate, and checks that the handshake
/// fails as `want`, within `TEST_TIMEOUT`.
async fn assert_handshake_fails(addr: SocketAddr, connect_timeout: Duration, want: ErrorKind) {
    let target = target_at(addr);
    let options = ConnectOptions {
        connect_timeout,
        tls: Some(tls_trusting_nothing()),
        streams: 1,
        keepalive: true,
    };
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let err = h3.connect(&target, &options).await.err().expect("fails");
        assert_eq!(err, want);
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded");
}

fn get(url: &str) -> RequestSpec {
    RequestSpec {
        method: http::Method::GET,
        uri: url.parse().expect("uri"),
        headers: vec![(
            http::header::USER_AGENT,
            http::HeaderValue::from_static("httpvs-test"),
        )],
        body: Bytes::new(),
    }
}

#[tokio::test]
async fn h3_requests_to_caddy_negotiate_h3_and_succeed() {
    let Some(caddy) = Caddy::start_if_installed() else {
        return;
    };
    let target = target(&caddy);
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        tls: Some(tls_trusting(&caddy.root_ca_path())),
        streams: 4,
        keepalive: true,
    };
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let (conn, info) = h3.connect(&target, &options).await.expect("connects");
        assert_eq!(info.alpn.as_deref(), Some(&b"h3"[..]), "ALPN h3");
        assert!(!info.handshake.is_zero());
        assert!(info.tcp_connect.is_zero());

        // Four requests at once on one connection, then a 404.
        let req = get(&caddy.url());
        let sends = (0..4).map(|_| conn.send(&req, std::time::Instant::now()));
        for response in futures_util::future::join_all(sends).await {
            let response = response.expect("200 from caddy");
            assert_eq!(response.status, 200);
            assert_eq!(response.body_bytes, CADDY_BODY.len() as u64);
            assert!(response.header_bytes > 0);
        }
        let missing = conn
            .send(
                &get(&format!("{}status/404", caddy.url())),
                std::time::Instant::now(),
            )
            .await
            .expect("404 is a response");
        assert_eq!(missing.status, 404);

        assert!(conn.accepts_requests());
        let wire = conn.wire();
        assert!(wire.header_sent > 0 && wire.header_received > 0, "{wire:?}");
        assert!(wire.datagrams_sent > 0 && wire.sent > wire.header_sent);
        let quic = conn.quic_stats().expect("h3 has QUIC stats");
        assert_eq!(quic.udp_bytes_sent, wire.sent);
        assert!(quic.smoothed_rtt > Duration::ZERO && quic.cwnd > 0);
        assert_eq!(quic.early_requests, 0, "0-RTT is off by default");
        conn.close();
        assert!(!conn.accepts_requests());
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("timed out; caddy log:\n{}", caddy.log()));
}

#[tokio::test]
async fn h3_to_caddy_with_an_untrusted_certificate_is_a_tls_error() {
    let Some(caddy) = Caddy::start_if_installed() else {
        return;
    };
    assert_handshake_fails(caddy.addr(), Duration::from_secs(5), ErrorKind::Tls).await;
}

#[test]
fn caddy_advertises_h3_in_alt_svc_and_the_parser_finds_its_port() {
    let (Some(bin), Some(curl)) = (
        httpvs_testkit::require_peer("caddy"),
        httpvs_testkit::require_peer("curl"),
    ) else {
        return;
    };
    let caddy = Caddy::start(&bin).expect("caddy starts");
    // The discovery request goes over TCP (h2), as `-p auto --alt-svc` does it.
    let out = std::process::Command::new(curl)
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "--max-time",
            "10",
            "--cacert",
        ])
        .arg(caddy.root_ca_path())
        .arg(caddy.url())
        .output()
        .expect("curl runs");
    let head = String::from_utf8_lossy(&out.stdout);
    let mut headers = http::HeaderMap::new();
    for line in head.lines().skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(name.trim().as_bytes()),
                http::HeaderValue::from_str(value.trim()),
            ) {
                headers.append(n, v);
            }
        }
    }
    assert_eq!(alt_svc_h3(&headers), Some(caddy.port()), "head:\n{head}");
}

#[tokio::test]
async fn nothing_listening_is_refused_not_a_timeout() {
    let port = httpvs_testkit::caddy::free_tcp_and_udp_port().expect("port");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    assert_handshake_fails(addr, Duration::from_secs(10), ErrorKind::Refused).await;
}

/// Once a port refused, the next connects ask it again with a bare UDP probe before any QUIC
/// handshake: each refused handshake left quinn state behind, and an open model against a
/// server gone down made thousands a second (509 MB of RSS at 20,000 req/s, now 17 MB).
#[tokio::test]
async fn a_port_that_refused_is_probed_again_before_any_handshake() {
    let port = httpvs_testkit::caddy::free_tcp_and_udp_port().expect("port");
    let target = target_at(SocketAddr::from(([127, 0, 0, 1], port)));
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(10),
        tls: Some(tls_trusting_nothing()),
        streams: 1,
        keepalive: true,
    };
    let run = async {
        let h3 = Http3::new(&target, H3Options::default()).expect("endpoint");
        let first = h3.connect(&target, &options).await.err();
        assert_eq!(first, Some(ErrorKind::Refused));
        let held = h3.quic_connections();
        for _ in 0..20 {
            let again = h3.connect(&target, &options).await.err();
            assert_eq!(again, Some(ErrorKind::Refused));
        }
        assert!(h3.quic_connections() <= held, "{held}");
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded");
}

fn tls_trusting_nothing() -> Arc<rustls::ClientConfig> {
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth(),
    )
}

#[tokio::test]
async fn zero_rtt_sends_early_on_a_resumed_connection_when_asked() {
    let Some(caddy) = Caddy::start_if_installed() else {
        return;
    };
    let target = target(&caddy);
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        tls: Some(tls_trusting(&caddy.root_ca_path())),
        streams: 1,
        keepalive: true,
    };
    let zero_rtt = H3Options {
        zero_rtt: true,
        ..H3Options::default()
    };
    let run = async {
        let h3 = Http3::new(&target, zero_rtt).expect("endpoint");
        let req = get(&caddy.url());
        // The first connection does a full handshake and receives a session ticket.
        let (first, _) = h3.connect(&target, &options).await.expect("connects");
        first
            .send(&req, std::time::Instant::now())
            .await
            .expect("first response");
        assert_eq!(first.quic_stats().map(|q| q.early_requests), Some(0));
        first.close();
        let (second, _) = h3.connect(&target, &options).await.expect("resumes");
        let response = second
            .send(&req, std::time::Instant::now())
            .await
            .expect("early response");
        assert_eq!(response.status, 200);
        let early = second.quic_stats().map(|q| q.early_requests);
        assert_eq!(
            early,
            Some(1),
            "caddy accepts 0-RTT, so the request went early"
        );
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("bounded");
}

/// A scripted UDP peer that answers every QUIC Initial with a Version Negotiation packet
/// (RFC 9000 §17.2.1) offering only a version quinn does not speak.
fn version_negotiation_peer() -> std::net::SocketAddr {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let addr = socket.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let packet = &buf[..n];
            // Long header: flags, version (4), DCID len + DCID, SCID len + SCID.
            let Some(&dcid_len) = packet.get(5) else {
                continue;
            };
            let dcid = &packet[6..6 + dcid_len as usize];
            let scid_at = 6 + dcid_len as usize;
            let scid_len = packet[scid_at] as usize;
            let scid = &packet[scid_at + 1..scid_at + 1 + scid_len];
            let mut reply = vec![0xc0, 0, 0, 0, 0];
            reply.push(scid.len() as u8);
            reply.extend_from_slice(scid);
            reply.push(dcid.len() as u8);
            reply.extend_from_slice(dcid);
            reply.extend_from_slice(&[0x0a, 0x1a, 0x2a, 0x3a]);
            let _ = socket.send_to(&reply, from);
        }
    });
    addr
}

#[tokio::test]
async fn a_server_without_our_quic_version_is_version_negotiation() {
    let addr = version_negotiation_peer();
    assert_handshake_fails(addr, Duration::from_secs(5), ErrorKind::VersionNegotiation).await;
}
