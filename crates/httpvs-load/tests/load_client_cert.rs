//! Mutual TLS: a server that requires a client certificate (rustls's WebPKI client verifier
//! over a CA made here) answers a run that shows one (`TlsOptions::client_identity`, the CLI's
//! `--cert`/`--key`), and refuses one that shows none.

use httpvs_load::config::{ProtocolChoice, TlsOptions};
use httpvs_load::protocol::tls::ClientIdentity;
use httpvs_load::protocol::ProtocolKind;
use httpvs_load::stats::Quiet;
use httpvs_load::LoadConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

/// A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by the CA.
struct Pki {
    ca_pem: String,
    server: (CertificateDer<'static>, PrivateKeyDer<'static>),
    client: ClientIdentity,
    ca_der: CertificateDer<'static>,
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf = |names: Vec<String>, purpose| {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (cert.der().clone(), key)
    };
    let server = leaf(
        vec!["127.0.0.1".into()],
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = leaf(vec![], rcgen::ExtendedKeyUsagePurpose::ClientAuth);
    Pki {
        ca_pem: ca.pem(),
        server,
        client: ClientIdentity {
            chain: vec![client_cert],
            key: client_key,
        },
        ca_der: ca.der().clone(),
    }
}

/// An HTTP/1.1 server over TLS that requires a client certificate from the CA: it answers
/// every request on a connection with 200 "ok" until the client closes.
fn mtls_server(pki: &Pki) -> std::net::SocketAddr {
    let provider = httpvs_load::protocol::tls::provider();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![pki.server.0.clone()], pki.server.1.clone_key())
        .unwrap();
    // h2 offered too, for a refusal to reach h2's wait for SETTINGS (it serves HTTP/1.1 only).
    config.alpn_protocols = vec![b"http/1.1".to_vec(), b"h2".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten().take(50) {
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if tls.write_all(answer).and_then(|()| tls.flush()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

fn run(
    url: &str,
    ca: &std::path::Path,
    identity: Option<ClientIdentity>,
) -> Result<httpvs_load::Report, httpvs_load::LoadError> {
    run_on(ProtocolKind::H1, url, ca, identity)
}

fn run_on(
    kind: ProtocolKind,
    url: &str,
    ca: &std::path::Path,
    identity: Option<ClientIdentity>,
) -> Result<httpvs_load::Report, httpvs_load::LoadError> {
    let config = LoadConfig::new(url)
        .unwrap()
        .protocol(ProtocolChoice::Fixed(kind))
        .shape(1, 1)
        .threads(1)
        .requests(5)
        .tls(TlsOptions {
            insecure: false,
            cacert: Some(ca.to_path_buf()),
            client_identity: identity.map(Arc::new),
        });
    httpvs_load::run(&config, &mut Quiet)
}

#[test]
fn a_server_that_requires_a_client_certificate_answers_one_that_shows_it() {
    let pki = pki();
    let dir = std::env::temp_dir().join(format!("httpvs-mtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let url = format!("https://{}/", mtls_server(&pki));
    let shown = run(&url, &ca, Some(pki.client.clone())).expect("runs");
    assert_eq!(shown.requests.succeeded, 5, "{:?}", shown.errors);
    // Without one the server refuses (TLS 1.3: by an alert after the handshake): nothing
    // succeeds, and it is a TLS failure, not the server's bytes.
    let refused = run(&url, &ca, None);
    // On h2 the refusal comes while the first connection waits for SETTINGS: its line gives
    // the alert and what to do, where it read "the server's HTTP/2 SETTINGS did not come" with
    // advice about the server's certificate.
    let h2 = run_on(ProtocolKind::H2, &url, &ca, None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(h2.contains("CertificateRequired"), "{h2}");
    assert!(h2.contains("give it one with --cert and --key"), "{h2}");
    // On h1 the check before the run is the handshake alone, which completes: the run starts.
    let r = refused.expect("the run starts");
    assert_eq!(r.requests.succeeded, 0, "{r:?}");
    assert!(r.errors.iter().all(|e| e.kind == "tls"), "{:?}", r.errors);
    // The report says what such failures usually mean (compare's probe says it too).
    let text = httpvs_load::report::text::render(&r);
    assert!(text.contains("give it one with --cert and --key"), "{text}");
}
