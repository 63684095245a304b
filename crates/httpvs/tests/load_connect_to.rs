//! `--connect-to` as h2load and curl users type it: connections go to the given address while
//! the URL's name stays in Host, `:authority`, SNI and the certificate check.

mod support;

use httpvs_testkit::schema::{assert_valid, LOAD_REPORT};
use std::process::{Command, Output};
use support::head_recorder;

fn httpvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .output()
        .expect("httpvs runs")
}

/// h2 and h3 over TLS to `https://localhost:1/` (nothing listens there) reach the server at
/// its real ports, and the certificate is checked against `localhost`, the URL's name.
#[test]
fn tls_keeps_the_urls_name_and_goes_to_the_given_address() {
    let dir = support::scratch_dir("connect-to-tls");
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, server.ca_pem()).unwrap();
    let ca = ca.to_str().unwrap();
    let tcp = server.https_addr().unwrap().to_string();
    let udp = format!("127.0.0.1:{}", server.h3_addr().unwrap().port());
    for (proto, to) in [("h2", &tcp), ("h3", &udp)] {
        let out = httpvs(&[
            "load",
            "https://localhost:1/",
            "--connect-to",
            to,
            "-p",
            proto,
            "--cacert",
            ca,
            "-n",
            "50",
            "-c",
            "2",
            "--json",
            "--no-progress",
        ]);
        assert_eq!(out.status.code(), Some(0), "{proto}: {out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid(LOAD_REPORT, &json, "load --connect-to");
        assert_eq!(json["requests"]["succeeded"], 50, "{proto}");
        assert_eq!(json["target"]["address"], to.as_str(), "{proto}");
        assert_eq!(json["target"]["connect_to"], to.as_str(), "{proto}");
        assert_eq!(json["protocol"]["negotiated"], proto);
    }
    // The name is what TLS checks: a certificate for localhost does not pass for another name.
    let out = httpvs(&[
        "load",
        "https://not-localhost.test/",
        "--connect-to",
        &tcp,
        "--cacert",
        ca,
        "-n",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("certificate"), "{stderr}");
    // What to do about it: not --cacert, which this run gave.
    assert!(
        stderr.contains("the certificate is for another name"),
        "{stderr}"
    );
    assert!(!stderr.contains("--cacert FILE"), "{stderr}");
}

/// HTTP/1.1's Host names the URL's authority, port included, whatever address it went to;
/// curl's four-part form applies to its own host and port only; `trace` takes it too.
#[test]
fn host_is_the_urls_and_curls_form_is_checked() {
    let (addr, heads) = head_recorder();
    let out = httpvs(&[
        "load",
        "http://svc.test:8080/x",
        "--connect-to",
        &format!("svc.test:8080:127.0.0.1:{}", addr.port()),
        "-p",
        "h1",
        "-n",
        "3",
        "-c",
        "1",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!(
            "httpvs load http://svc.test:8080/x ({addr}, --connect-to svc.test:8080:127.0.0.1:{})",
            addr.port()
        )),
        "{text}"
    );
    let head = heads
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    assert!(head.starts_with("GET /x HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains("\r\nhost: svc.test:8080\r\n")
            || head.contains("\r\nHost: svc.test:8080\r\n"),
        "{head}"
    );

    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let h2c = server.http_addr().unwrap().to_string();
    let out = httpvs(&[
        "trace",
        "-p",
        "h2c",
        "http://svc.test/",
        "--connect-to",
        &h2c,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let trace = String::from_utf8_lossy(&out.stdout);
    assert!(
        trace.contains(&format!("TCP connected to {h2c}")),
        "{trace}"
    );
    assert!(trace.contains(":authority: svc.test\n"), "{trace}");

    // Bad or inapplicable rules: one line, exit 2, before any connection.
    for (rule, expected) in [
        (
            "other.test:8080:127.0.0.1:1",
            "is for other.test:8080, and the URL is svc.test:8080",
        ),
        ("127.0.0.1:0", "\"0\" is not a port"),
        ("::1", "IPv6 address goes in brackets"),
        ("a:b:c", "use HOST[:PORT]"),
    ] {
        for command in ["load", "trace"] {
            let out = httpvs(&[command, "http://svc.test:8080/", "--connect-to", rule]);
            assert_eq!(out.status.code(), Some(2), "{command} {rule}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains(expected), "{command} {rule}: {stderr}");
        }
    }
}
