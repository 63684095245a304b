//! `-p auto` resolution by ALPN, and h2's refusal of a TLS server that does not choose h2.

mod protocol_support;

use httpvs_load::protocol::h2::Http2;
use httpvs_load::protocol::probe::probe_alpn;
use httpvs_load::protocol::tls::client_config;
use httpvs_load::protocol::{Protocol, ProtocolKind};
use httpvs_load::ErrorKind;
use httpvs_testkit::nginx::{Nginx, NginxOptions};
use httpvs_testkit::require_peer;
use protocol_support::{options, target, tls_server_with_alpn};

fn insecure_options() -> httpvs_load::protocol::ConnectOptions {
    let mut opts = options(1, None);
    opts.tls = Some(client_config(true, None, &[]).unwrap());
    opts
}

#[tokio::test(flavor = "current_thread")]
async fn nginx_over_tls_resolves_to_h2() {
    let Some(bin) = require_peer("nginx") else {
        return;
    };
    let nginx = Nginx::start(&bin, &NginxOptions::default()).unwrap();
    let opts = options(1, Some(&nginx.cert_path()));
    let kind = probe_alpn(&target("https", nginx.tls_addr()), &opts).await;
    assert_eq!(kind, Ok(ProtocolKind::H2));
}

#[tokio::test(flavor = "current_thread")]
async fn http11_only_servers_resolve_to_h1_and_refuse_h2() {
    let addr = tls_server_with_alpn(&[b"http/1.1"]).await;
    let target = target("https", addr);
    let opts = insecure_options();
    assert_eq!(probe_alpn(&target, &opts).await, Ok(ProtocolKind::H1));
    let h2 = Http2::default().connect(&target, &opts).await;
    assert_eq!(h2.err(), Some(ErrorKind::Tls));
    // A server that ignores ALPN completes the handshake: the detail says it chose none (it
    // said nothing, and the line read as a failed handshake).
    let target = protocol_support::target("https", tls_server_with_alpn(&[]).await);
    let h2 = Http2::default().connect(&target, &opts).await;
    assert_eq!(h2.err(), Some(ErrorKind::Tls));
    let note = httpvs_load::protocol::tcp::take_connect_note().unwrap_or_default();
    assert!(
        note.contains("the server chose no ALPN protocol, not h2"),
        "{note}"
    );
}

/// A server that picks h2 by ALPN and hangs up after the handshake: the note says the TLS
/// handshake succeeded, where the first connection's line guessed "https:// to a cleartext
/// port, or http:// to a TLS one?".
#[tokio::test(flavor = "current_thread")]
async fn a_hang_up_after_a_tls_handshake_is_not_taken_for_a_cleartext_port() {
    let target = target("https", tls_server_with_alpn(&[b"h2"]).await);
    let h2 = Http2::default().connect(&target, &insecure_options()).await;
    let kind = h2.err().expect("no SETTINGS came");
    assert!(
        matches!(kind, ErrorKind::ConnectionClosed | ErrorKind::Reset),
        "{kind:?}"
    );
    let note = httpvs_load::protocol::tcp::take_connect_note().unwrap_or_default();
    assert!(
        note.starts_with("the TLS handshake succeeded (ALPN h2), then the server"),
        "{note}"
    );
    let line = httpvs_load::LoadError::first_connection(
        target.addr,
        kind,
        std::time::Duration::from_secs(1),
    )
    .with_detail(Some(note))
    .to_string();
    assert!(line.contains("before its HTTP/2 SETTINGS"), "{line}");
    assert!(!line.contains("cleartext port"), "{line}");
}

#[tokio::test(flavor = "current_thread")]
async fn servers_ignoring_alpn_resolve_to_h1() {
    let addr = tls_server_with_alpn(&[]).await;
    let kind = probe_alpn(&target("https", addr), &insecure_options()).await;
    assert_eq!(kind, Ok(ProtocolKind::H1));
}

#[tokio::test(flavor = "current_thread")]
async fn cleartext_targets_resolve_to_h1_without_connecting() {
    let addr = "127.0.0.1:9".parse().unwrap();
    let kind = probe_alpn(&target("http", addr), &options(1, None)).await;
    assert_eq!(kind, Ok(ProtocolKind::H1));
}

#[tokio::test(flavor = "current_thread")]
async fn stalled_handshakes_are_connect_timeouts() {
    let addr = protocol_support::silent_server().await;
    let mut opts = insecure_options();
    opts.connect_timeout = std::time::Duration::from_millis(200);
    // TLS: the ClientHello is never answered.
    let tls = Http2::default()
        .connect(&target("https", addr), &opts)
        .await;
    assert_eq!(tls.err(), Some(ErrorKind::ConnectTimeout));
    // h2c: the server's SETTINGS never come.
    let h2c = Http2::default().connect(&target("http", addr), &opts).await;
    assert_eq!(h2c.err(), Some(ErrorKind::ConnectTimeout));
    let probe = probe_alpn(&target("https", addr), &opts).await;
    assert_eq!(probe, Err(ErrorKind::ConnectTimeout));
}

/// A server that takes none of the protocols offered (here no h2) refuses with an ALPN alert:
/// the line says so, with or without -k, and blames neither the certificate nor SNI (it
/// suggested --cacert or -k, which change nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_alpn_says_so_and_not_the_certificate() {
    let addr = tls_server_with_alpn(&[b"http/1.1"]).await;
    let run = |insecure: bool| {
        let config = httpvs_load::LoadConfig::new(&format!("https://{addr}/"))
            .unwrap()
            .protocol(httpvs_load::ProtocolChoice::Fixed(ProtocolKind::H2))
            .shape(1, 1)
            .threads(1)
            .requests(2)
            .tls(httpvs_load::TlsOptions {
                insecure,
                cacert: None,
                client_identity: None,
            });
        tokio::task::spawn_blocking(move || {
            httpvs_load::run(&config, &mut httpvs_load::stats::Quiet)
                .err()
                .map(|e| e.to_string())
        })
    };
    for insecure in [true, false] {
        let line = run(insecure).await.unwrap().expect("the handshake fails");
        assert!(line.contains("NoApplicationProtocol"), "{line}");
        assert!(
            line.contains("the server takes none of the protocols offered by ALPN"),
            "{line}"
        );
        for blame in ["--cacert", "-k", "SNI"] {
            assert!(!line.contains(blame), "{line}");
        }
    }
}
