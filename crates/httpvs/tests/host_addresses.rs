//! A host name with several addresses, the first refusing: `load` and `trace` go on to the
//! next, as curl does, so `localhost` (127.0.0.1 and ::1) reaches a server that listens on
//! `[::1]` only. The name comes from a hosts file mounted over /etc/hosts in a private mount
//! namespace (`unshare -m`): root only, skipped otherwise unless CI requires it.

mod support;

use httpvs_server::{RunningServer, ServeConfig};
use std::process::{Command, Output};
use support::scratch_dir;

/// A server on `[::1]` only (cleartext and HTTP/3), or `None` where there is no IPv6 loopback.
fn serve_on_ipv6_only() -> Option<RunningServer> {
    let config = ServeConfig {
        http: Some("[::1]:0".parse().expect("address")),
        https: None,
        h3: Some("[::1]:0".parse().expect("address")),
        ..ServeConfig::loopback_ephemeral()
    };
    httpvs_server::start(config).ok()
}

/// Runs `httpvs ARGS` where `localhost` is 127.0.0.1 first, then ::1.
fn with_localhost_on_both(name: &str, args: &[&str]) -> Output {
    let hosts = scratch_dir(name).join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n::1 localhost\n").expect("hosts file");
    Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            r#"mount --bind "$0" /etc/hosts && exec "$@""#,
        ])
        .arg(&hosts)
        .arg(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .output()
        .expect("unshare runs")
}

#[test]
fn a_refusing_first_address_is_passed_over_for_the_next() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let Some(server) = serve_on_ipv6_only() else {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    };
    let http = format!(
        "http://localhost:{}/",
        server.http_addr().expect("http").port()
    );
    let h3 = format!(
        "https://localhost:{}/",
        server.h3_addr().expect("h3").port()
    );
    for (name, args) in [
        (
            "hosts-load",
            vec!["load", "-n", "5", "-c", "1", "--json", &http],
        ),
        ("hosts-trace", vec!["trace", &http]),
        ("hosts-trace-h3", vec!["trace", "-p", "h3", "-k", &h3]),
    ] {
        let out = with_localhost_on_both(name, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(
            stdout.contains("\"succeeded\": 5") || stdout.contains("answered=1 failed=0"),
            "{args:?}: {stdout}"
        );
        assert!(!stdout.contains("nothing listens"), "{args:?}: {stdout}");
    }
}
