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

/// A server on `[::1]` that answers each request with a head and part of its body, then
/// aborts the connection (`SO_LINGER` 0: a reset).
fn start_resetting_server() -> SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().map_while(Result::ok) {
            let mut head = Vec::new();
            let mut buf = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
                std::thread::sleep(std::time::Duration::from_millis(20));
                let _ = socket2::SockRef::from(&conn).set_linger(Some(std::time::Duration::ZERO));
            }
        }
    });
    addr
}

/// The forwarder between the link and `[::1]` passed a server's reset on as a clean FIN: a
/// client behind the link read "closed mid-body" where it would read "reset" without it.
#[test]
fn a_reset_crosses_the_ipv6_loopback_forwarder_as_a_reset() {
    if !httpvs_testkit::require_root() || httpvs_testkit::require_peer("nft").is_none() {
        return;
    }
    let url = format!("http://{}/", start_resetting_server());
    let dir = scratch_dir("netem-ipv6-reset");
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "--net", "delay 5ms", "-n", "1", "-c", "1"])
        .args(["--no-progress", "-o", report.to_str().unwrap(), &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(report["requests"]["failed"], 1, "{report:#}");
    assert_eq!(report["errors"][0]["kind"], "reset", "{report:#}");
}

/// A closed UDP port behind the forwarder is refused, as without emulation: the forwarder
/// bound every UDP port a client sent to, so h3 waited out its connect timeout (10 s).
#[test]
fn a_closed_udp_port_on_ipv6_loopback_is_refused_at_once() {
    if !httpvs_testkit::require_root() || httpvs_testkit::require_peer("nft").is_none() {
        return;
    }
    let closed = std::net::UdpSocket::bind((Ipv6Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("https://{closed}/");
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "--net", "delay 5ms", "-p", "h3", "-k", "-n", "1"])
        .args(["--connect-timeout", "5s", "--no-progress", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("connection refused on UDP"), "{stderr}");
}

/// The forwarder between the link and `[::1]` keeps each datagram's ECN bits: it sent them on
/// without, so QUIC's ECN validation failed, no packet was ECN-capable any more, and a link's
/// `ecn` dropped them as plain loss (`ecn_marked` 0 both ways).
#[test]
fn ecn_marks_cross_the_ipv6_loopback_forwarder() {
    if !httpvs_testkit::require_root() || httpvs_testkit::require_peer("nft").is_none() {
        return;
    }
    let config = ServeConfig {
        http: None,
        https: None,
        h3: Some(SocketAddr::from((Ipv6Addr::LOCALHOST, 0))),
        ..ServeConfig::loopback_ephemeral()
    };
    let server = httpvs_server::start(config).expect("server on [::1]");
    let url = format!("https://{}/?size=100k", server.h3_addr().unwrap());
    let dir = scratch_dir("netem-ipv6-ecn");
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "--net", "delay 5ms loss 5% ecn", "-p", "h3", "-k"])
        .args(["-c", "1", "-n", "40", "--no-progress"])
        .args(["-o", report.to_str().unwrap(), &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    for way in ["up", "down"] {
        let marked = report["network"][way]["ecn_marked"].as_u64().unwrap();
        assert!(marked > 0, "{way}: {:#}", report["network"]);
    }
}

/// A server that stops mid-run behind the `[::1]` forwarder is found gone, as without
/// emulation: the forwarder kept its UDP socket bound for good once a client had sent there,
/// so h3's probe of the port was never refused and the requests in flight waited out the run.
/// TCP: the first connect after the server stopped is reset, the ones after refused.
#[test]
fn a_server_stopped_mid_run_behind_the_ipv6_forwarder_is_refused() {
    if !httpvs_testkit::require_root() || httpvs_testkit::require_peer("nft").is_none() {
        return;
    }
    let (mut serve, _stdout, banner) =
        support::spawn_serve(&["--http", "[::1]:0", "--https", "off", "--h3", "[::1]:0"]);
    let port = |scheme: &str| {
        banner
            .split(&format!("{scheme}://[::1]:"))
            .nth(1)
            .and_then(|r| r.split('/').next())
            .expect("a [::1] line")
            .to_owned()
    };
    let h3 = format!("https://[::1]:{}/", port("https"));
    let h1 = format!("http://[::1]:{}/", port("http"));
    let dir = scratch_dir("netem-ipv6-stopped");
    let spawn = |url: &str, protocol: &str, name: &str| {
        let report = dir.join(name);
        let child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
            .args([
                "load",
                "--net",
                "delay 2ms",
                "-p",
                protocol,
                "-k",
                "-z",
                "4s",
            ])
            .args(["-c", "2", "-t", "1", "--no-progress", "-o"])
            .arg(&report)
            .arg(url)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        (child, report)
    };
    let (h3_load, h3_report) = spawn(&h3, "h3", "h3.json");
    let (h1_load, h1_report) = spawn(&h1, "h1", "h1.json");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    serve.kill().unwrap();
    let _ = serve.wait();
    for (load, report) in [(h3_load, h3_report), (h1_load, h1_report)] {
        let out = load.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap())
            .unwrap_or_else(|e| panic!("{e}: {stderr}"));
        let errors = report["errors"].to_string();
        assert!(errors.contains("\"refused\""), "{errors}");
        assert!(
            report["connections"]["failed_to_open"]
                .as_u64()
                .unwrap_or(0)
                > 0,
            "{report:#}"
        );
    }
}
