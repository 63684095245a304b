//! `httpvs load --net` against a server bound to `[::1]`: the run crosses the emulated link
//! (root layout; the rootless one is in netem_rootless.rs), and a non-loopback IPv6 target is
//! refused in one line naming what is reached.

mod support;

use httpvs_server::ServeConfig;
use serde_json::Value;
use std::net::{Ipv6Addr, SocketAddr};
use std::process::Command;
use support::scratch_dir;

#[test]
fn load_net_reaches_a_server_on_ipv6_loopback() {
    if !httpvs_testkit::require_root() || httpvs_testkit::require_peer("nft").is_none() {
        return;
    }
    let config = ServeConfig {
        http: Some(SocketAddr::from((Ipv6Addr::LOCALHOST, 0))),
        https: None,
        h3: None,
        ..ServeConfig::loopback_ephemeral()
    };
    let server = httpvs_server::start(config).expect("server on [::1]");
    let url = format!("http://{}/", server.http_addr().unwrap());
    let dir = scratch_dir("netem-ipv6");
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "--net", "delay 5ms", "-n", "100", "-c", "2"])
        .args(["--no-progress", "-o", report.to_str().unwrap(), &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    assert_eq!(report["requests"]["succeeded"], 100, "{report:#}");
    assert!(report["network"]["up"]["packets_out"].as_u64().unwrap() > 100);
}

#[test]
fn a_non_loopback_ipv6_target_is_one_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args([
            "load",
            "--net",
            "wan",
            "-n",
            "1",
            "http://[2001:db8::1]:8080/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("127.0.0.0/8 and [::1]"), "{stderr}");
}
