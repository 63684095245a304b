//! `--window` / `--connection-window` end to end through `httpvs_load::run`: h2c, h2 and h3
//! against the real reference server (in-process, port 0) and h2c/h2 against nginx fetch 1 MiB
//! responses through a 16 KiB stream window with every byte counted, and the report (text and
//! schema-valid JSON) shows the windows.

use httpvs_load::protocol::window::ReceiveWindows;
use httpvs_load::protocol::ProtocolKind;
use httpvs_load::report::{text, to_json, Report, Windows};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice, TlsOptions};
use httpvs_server::{start, RunningServer, ServeConfig};
use httpvs_testkit::nginx::{Nginx, NginxOptions, BIG_BODY_LEN};
use httpvs_testkit::schema::{assert_valid, LOAD_REPORT};
use std::path::PathBuf;

const MIB: u64 = 1 << 20;
const SIXTEEN_K: u64 = 16 << 10;
/// HTTP/2's default window, h2load's: 2^30-1.
const H2_DEFAULT: u64 = (1 << 30) - 1;

fn windows(stream: Option<u64>, connection: Option<u64>) -> ReceiveWindows {
    ReceiveWindows { stream, connection }
}

/// `n` requests for `url` over `kind`, 2 connections x 2 streams, with `windows`.
fn config(url: &str, kind: ProtocolKind, n: u64, w: ReceiveWindows) -> LoadConfig {
    let mut c = LoadConfig::new(url)
        .unwrap()
        .protocol(ProtocolChoice::Fixed(kind))
        .shape(2, 2)
        .threads(1)
        .requests(n);
    c.windows = w;
    c
}

/// Runs `c`: every request succeeds with its whole body, and the report is schema-valid.
fn run(c: &LoadConfig, body: u64, context: &str) -> Report {
    let r = httpvs_load::run(c, &mut Quiet).expect("run starts");
    let n = match c.stop {
        httpvs_load::StopAfter::Requests(n) => n,
        httpvs_load::StopAfter::Duration(_) => unreachable!("-n runs only"),
    };
    assert!(r.requests.identity_holds, "{:?}", r.requests);
    assert_eq!(r.requests.succeeded, n, "{:?}\n{context}", r.errors);
    assert_eq!(r.wire.body_received, n * body, "{context}");
    let value: serde_json::Value = serde_json::from_str(&to_json(&r)).expect("JSON");
    assert_valid(LOAD_REPORT, &value, "a report with windows");
    r
}

fn server() -> RunningServer {
    start(ServeConfig::loopback_ephemeral()).expect("server starts on port 0")
}

fn ca_file(server: &RunningServer, name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("httpvs-win-{name}-{}.pem", std::process::id()));
    std::fs::write(&path, server.ca_pem()).expect("write CA");
    path
}

fn trusting(ca: PathBuf) -> TlsOptions {
    TlsOptions {
        insecure: false,
        cacert: Some(ca),
        client_identity: None,
    }
}

#[test]
fn h2c_with_a_16k_stream_window_fetches_1mib_responses() {
    let s = server();
    let url = format!("http://{}/?size=1m", s.http_addr().unwrap());
    let c = config(&url, ProtocolKind::H2c, 12, windows(Some(SIXTEEN_K), None));
    let r = run(&c, MIB, "h2c");
    let shown = Windows {
        stream_bytes: SIXTEEN_K,
        connection_bytes: Some(H2_DEFAULT),
    };
    assert_eq!(r.shape.windows, Some(shown));
    let rendered = text::render(&r);
    assert!(
        rendered.contains("Windows:      receive 16KiB per stream, 1GiB-1 per connection"),
        "{rendered}"
    );
    // Without the flags the report says nothing of windows, in text or JSON.
    let plain = config(&url, ProtocolKind::H2c, 2, ReceiveWindows::default());
    let r = run(&plain, MIB, "h2c, default windows");
    assert_eq!(r.shape.windows, None);
    assert!(!to_json(&r).contains("\"windows\""));
    assert!(!text::render(&r).contains("Windows:"));
}

#[test]
fn h2_with_small_stream_and_connection_windows_fetches_1mib_responses() {
    let s = server();
    let ca = ca_file(&s, "h2");
    let url = format!(
        "https://127.0.0.1:{}/?size=1m",
        s.https_addr().unwrap().port()
    );
    let w = windows(Some(SIXTEEN_K), Some(65_535));
    let c = config(&url, ProtocolKind::H2, 12, w).tls(trusting(ca.clone()));
    let r = run(&c, MIB, "h2");
    let _ = std::fs::remove_file(ca);
    assert_eq!(r.protocol.negotiated, "h2");
    assert_eq!(
        r.shape.windows,
        Some(Windows {
            stream_bytes: SIXTEEN_K,
            connection_bytes: Some(65_535),
        })
    );
}

#[test]
fn h3_with_a_16k_stream_window_fetches_1mib_responses() {
    let s = server();
    let url = format!("https://127.0.0.1:{}/?size=1m", s.h3_addr().unwrap().port());
    let insecure = TlsOptions {
        insecure: true,
        cacert: None,
        client_identity: None,
    };
    let c = config(&url, ProtocolKind::H3, 8, windows(Some(SIXTEEN_K), None)).tls(insecure);
    let r = run(&c, MIB, "h3");
    // quinn keeps its unlimited connection window: the report leaves the field out.
    let shown = Windows {
        stream_bytes: SIXTEEN_K,
        connection_bytes: None,
    };
    assert_eq!(r.shape.windows, Some(shown));
    assert!(text::render(&r).contains("receive 16KiB per stream, no connection limit"));
    // On h3 a connection window below h2's 65,535 is allowed, and still moves 1 MiB.
    let mut tiny = c.clone();
    tiny.windows = windows(None, Some(SIXTEEN_K));
    tiny.stop = httpvs_load::StopAfter::Requests(4);
    let r = run(&tiny, MIB, "h3, 16 KiB connection window");
    assert_eq!(
        r.shape.windows.and_then(|w| w.connection_bytes),
        Some(SIXTEEN_K)
    );
}

#[test]
fn windows_are_refused_where_they_cannot_apply() {
    let invalid = |c: &LoadConfig| c.validate().unwrap_err().to_string();
    let h1 = config(
        "http://127.0.0.1:1/",
        ProtocolKind::H1,
        1,
        windows(Some(SIXTEEN_K), None),
    );
    assert!(invalid(&h1).contains("HTTP/1.1 has no flow-control window"));
    let mut auto = h1.clone();
    auto.protocol = ProtocolChoice::Auto;
    assert!(invalid(&auto).contains("-p auto on an http:// URL"));
    let h2c = config(
        "http://127.0.0.1:1/",
        ProtocolKind::H2c,
        1,
        windows(None, Some(SIXTEEN_K)),
    );
    assert!(invalid(&h2c).contains("below 65535"));
    let zero = config(
        "http://127.0.0.1:1/",
        ProtocolKind::H2c,
        1,
        windows(Some(0), None),
    );
    assert!(invalid(&zero).starts_with("--window 0: "));
}

#[test]
fn h2c_and_h2_with_a_16k_stream_window_fetch_nginx_big_file() {
    let Some(n) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let w = windows(Some(SIXTEEN_K), Some(65_535));
    let h2c = config(
        &format!("http://{}/big", n.h2c_addr()),
        ProtocolKind::H2c,
        8,
        w,
    );
    run(&h2c, BIG_BODY_LEN as u64, &n.log());
    let tls = trusting(n.cert_path());
    let h2 = config(
        &format!("https://127.0.0.1:{}/big", n.tls_addr().port()),
        ProtocolKind::H2,
        8,
        w,
    )
    .tls(tls);
    run(&h2, BIG_BODY_LEN as u64, &n.log());
}
