//! Shared setup for the protocol tests: targets, requests and options for a loopback peer.

#![allow(dead_code)] // Each test file uses a different subset.

use bytes::Bytes;
use httpvs_load::protocol::tls::client_config;
use httpvs_load::protocol::{ConnectOptions, RequestSpec, Target};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// A target for `scheme://127.0.0.1:PORT`.
pub fn target(scheme: &str, addr: SocketAddr) -> Target {
    Target {
        scheme: scheme.into(),
        host: addr.ip().to_string(),
        port: addr.port(),
        addr,
        dns: Duration::ZERO,
    }
}

/// A GET for `path` on `target`.
pub fn get(target: &Target, path: &str) -> RequestSpec {
    request(target, http::Method::GET, path, Bytes::new())
}

/// A request with `method` and `body` for `path` on `target`.
pub fn request(target: &Target, method: http::Method, path: &str, body: Bytes) -> RequestSpec {
    let uri = format!("{}://{}:{}{path}", target.scheme, target.host, target.port);
    RequestSpec {
        method,
        uri: uri.parse().expect("test URI"),
        headers: vec![],
        body,
    }
}

/// Options with `streams` per connection, keep-alive on, and TLS trusting `cacert` if given.
pub fn options(streams: u32, cacert: Option<&Path>) -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        tls: cacert.map(|ca| client_config(false, Some(ca), &[]).expect("CA file loads")),
        streams,
        keepalive: true,
    }
}

/// A TLS server on 127.0.0.1 that completes handshakes offering only `alpn`, then closes.
/// Returns its address; it serves until the test's runtime ends.
pub async fn tls_server_with_alpn(alpn: &[&[u8]]) -> SocketAddr {
    tls_scripted_server(alpn, None).await
}

/// As [`tls_server_with_alpn`]; with a `reply`, for every connection it reads one request
/// head, writes `reply`, and drops the TCP connection without close_notify (a server that
/// crashed mid-response), where without one it closes with close_notify.
pub async fn tls_scripted_server(alpn: &[&[u8]], reply: Option<&'static [u8]>) -> SocketAddr {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).expect("rcgen");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let mut config =
        rustls::ServerConfig::builder_with_provider(httpvs_load::protocol::tls::provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .expect("server config");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    use tokio::io::AsyncWriteExt;
                    let Some(reply) = reply else {
                        let _ = tls.shutdown().await;
                        return;
                    };
                    if !read_head(&mut tls).await {
                        return;
                    }
                    let _ = tls.write_all(reply).await;
                    let _ = tls.flush().await;
                    // Dropped: a FIN with no close_notify before it.
                }
            });
        }
    });
    addr
}

/// Reads one request head (through its blank line); `false` when the peer closed or failed
/// first.
async fn read_head(io: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match io.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// How a [`scripted_server`] ends each connection after writing its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Close normally (FIN).
    Fin,
    /// Abort with RST (SO_LINGER 0).
    Reset,
}

/// A raw TCP server on 127.0.0.1: for every connection it reads one request head, writes
/// `reply` verbatim, then ends the connection as `ending` says. For malformed-peer tests.
pub async fn scripted_server(reply: &'static [u8], ending: Ending) -> SocketAddr {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                if !read_head(&mut tcp).await {
                    return;
                }
                let _ = tcp.write_all(reply).await;
                if ending == Ending::Reset {
                    let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
                }
                drop(tcp);
            });
        }
    });
    addr
}

/// A TCP server on 127.0.0.1 that accepts connections and never sends a byte (a stalled
/// peer): handshakes against it can only time out. Serves until the runtime ends.
pub async fn silent_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    addr
}

/// A self-signed TLS 1.3 server config with ALPN h3, for a scripted QUIC peer, and its
/// certificate (for the client to trust).
pub fn h3_server_tls() -> (
    rustls::ServerConfig,
    rustls::pki_types::CertificateDer<'static>,
) {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
    let der = cert.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key)
        .expect("server cert");
    tls.alpn_protocols = vec![b"h3".to_vec()];
    (tls, der)
}
