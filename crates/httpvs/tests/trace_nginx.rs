//! `httpvs trace` against a real nginx: h2 over TLS (ALPN h2, nginx's SETTINGS and HPACK
//! blocks decoded) and HTTP/1.1 (response head with nginx's headers, body length, keep-alive).

use httpvs_testkit::nginx::{Nginx, NginxOptions, NGINX_BODY};
use serde_json::Value;
use std::process::{Command, Output};

fn trace(args: &[&str]) -> Output {
    // Bounded by the trace's own --timeout and --connect-timeout.
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("trace")
        .args(["--timeout", "10s", "--connect-timeout", "5s"])
        .args(args)
        .output()
        .expect("httpvs runs")
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn find<'a>(events: &'a [Value], ty: &str, dir: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == ty && e["dir"] == dir)
        .collect()
}

#[test]
fn h2_over_tls_against_nginx_negotiates_alpn_h2() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let url = format!("https://localhost:{}/", nginx.tls_addr().port());
    let cacert = nginx.cert_path();
    let out = trace(&[
        "-p",
        "h2",
        "-m",
        "2",
        "--cacert",
        cacert.to_str().unwrap(),
        "--json",
        &url,
    ]);
    assert!(out.status.success(), "{out:?}\n{}", nginx.log());
    let events = events(&out);
    let tls = find(&events, "tls_handshake", "local");
    assert_eq!(tls.len(), 1);
    assert_eq!(tls[0]["alpn"], "h2");
    let settings = find(&events, "SETTINGS", "recv");
    assert!(settings
        .iter()
        .any(|s| s["settings"]["SETTINGS_MAX_CONCURRENT_STREAMS"] == 128));
    let responses = find(&events, "HEADERS", "recv");
    assert_eq!(responses.len(), 2);
    let fields = responses[0]["fields"].as_array().unwrap();
    assert_eq!(fields[0], serde_json::json!([":status", "200"]));
    assert!(fields.iter().any(|f| f[0] == "server"), "{fields:?}");
    let summary = events.last().unwrap();
    assert_eq!(summary["succeeded"], 2);
    assert_eq!(summary["max_in_flight"], 2);
}

#[test]
fn h1_against_nginx_shows_the_response_head() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let url = format!("http://{}/", nginx.h1_addr());
    let out = trace(&["-p", "h1", &url]);
    assert!(out.status.success(), "{out:?}\n{}", nginx.log());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("recv HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("               Server: nginx"), "{text}");
    assert!(text.contains("; connection stays open"), "{text}");
    let body = format!("recv body: {} bytes (content-length)", NGINX_BODY.len());
    assert!(text.contains(&body), "{text}");
}

#[test]
fn h1_against_nginx_follows_a_close_and_a_chunked_body() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let out = trace(&[
        "-p",
        "h1",
        "--json",
        &format!("http://{}/close", nginx.h1_addr()),
    ]);
    assert!(out.status.success(), "{out:?}");
    let closing = events(&out);
    assert_eq!(find(&closing, "h1_head", "recv")[0]["keeps_open"], false);
    let out = trace(&[
        "-p",
        "h1",
        "--json",
        &format!("http://{}/chunked", nginx.h1_addr()),
    ]);
    let chunked = events(&out);
    let bodies = find(&chunked, "h1_body", "recv");
    assert_eq!(bodies[0]["framing"], "chunked");
    assert_eq!(bodies[0]["length"], httpvs_testkit::nginx::CHUNKED_BODY_LEN);
}
