//! `httpvs_load::run` against a real nginx (own config, 127.0.0.1, free ports, one process):
//! h1, h2c and h2 succeed, and nginx's keepalive_requests limit turns into counted connection
//! churn with retries, never failures.

use httpvs_load::protocol::ProtocolKind;
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice, Report, TlsOptions};
use httpvs_testkit::nginx::{Nginx, NginxOptions};

fn run(config: &LoadConfig, nginx: &Nginx) -> Report {
    let r = httpvs_load::run(config, &mut Quiet).expect("run starts");
    assert!(r.requests.identity_holds, "{:?}", r.requests);
    assert_eq!(r.requests.failed, 0, "{:?}\n{}", r.errors, nginx.log());
    r
}

fn fixed(kind: ProtocolKind) -> ProtocolChoice {
    ProtocolChoice::Fixed(kind)
}

#[test]
fn h1_h2c_and_h2_against_nginx_succeed() {
    let Some(n) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let h1 = LoadConfig::new(&format!("http://{}/", n.h1_addr()))
        .unwrap()
        .shape(4, 1)
        .threads(2)
        .requests(2000);
    let r = run(&h1, &n);
    assert_eq!(r.requests.succeeded, 2000);
    assert_eq!(r.protocol.negotiated, "h1");

    let h2c = LoadConfig::new(&format!("http://{}/", n.h2c_addr()))
        .unwrap()
        .protocol(fixed(ProtocolKind::H2c))
        .shape(2, 10)
        .threads(2)
        .requests(2000);
    let r = run(&h2c, &n);
    assert_eq!(r.requests.succeeded, 2000);
    assert_eq!(r.protocol.negotiated, "h2c");
    let savings = r.wire.header_savings.expect("HPACK savings are measured");
    assert!(savings > 0.3, "{savings}");

    let tls = TlsOptions {
        insecure: false,
        cacert: Some(n.cert_path()),
        client_identity: None,
    };
    let h2 = LoadConfig::new(&format!("https://127.0.0.1:{}/", n.tls_addr().port()))
        .unwrap()
        .shape(2, 10)
        .threads(2)
        .requests(2000)
        .tls(tls);
    let r = run(&h2, &n);
    assert_eq!(r.requests.succeeded, 2000);
    assert_eq!(r.protocol.negotiated, "h2", "auto picks h2 by ALPN");
    assert_eq!(r.protocol.alpn.as_deref(), Some("h2"));
    assert_eq!(r.phases.handshake.count, 2);
}

#[test]
fn nginx_keepalive_requests_churn_is_retried_and_explained() {
    let Some(n) = Nginx::start_if_installed(NginxOptions {
        keepalive_requests: 100,
        ..NginxOptions::default()
    }) else {
        return;
    };
    let c = LoadConfig::new(&format!("http://{}/", n.h2c_addr()))
        .unwrap()
        .protocol(fixed(ProtocolKind::H2c))
        .shape(4, 50)
        .threads(2)
        .requests(20_000);
    let r = run(&c, &n);
    assert_eq!(r.requests.succeeded, 20_000);
    let opened = r.connections.opened;
    assert!((195..=210).contains(&opened), "{:?}", r.connections);
    assert!(
        r.connections.closed_by_server.goaway >= 190,
        "{:?}",
        r.connections
    );
    assert!(r.requests.retried.goaway > 0, "{:?}", r.requests.retried);
    let d = r.connections.diagnosis.expect("churn is explained");
    assert!(d.contains("about every 100 requests"), "{d}");
    assert!(d.contains("keepalive_requests"), "{d}");

    let h1 = LoadConfig::new(&format!("http://{}/", n.h1_addr()))
        .unwrap()
        .shape(2, 1)
        .threads(1)
        .requests(2000);
    let r = run(&h1, &n);
    assert!(
        (20..=22).contains(&r.connections.opened),
        "{:?}",
        r.connections
    );
    assert!(r.connections.closed_by_server.connection_close >= 19);
}
