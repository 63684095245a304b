//! `httpvs load -p h3` end to end through the binary: against the in-process reference server
//! (report says h3 with a QUIC section; GOAWAY-after-N retried; server killed mid-run keeps the
//! accounting identity) and against a real caddy.

mod support;

use httpvs_server::{Limits, RunningServer, ServeConfig};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{scratch_dir, spawn_serve};

/// No run here may take longer; a hung client is killed and the test fails.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

fn serve(limits: Limits) -> RunningServer {
    let config = ServeConfig {
        http: None,
        https: None,
        limits,
        ..ServeConfig::loopback_ephemeral()
    };
    httpvs_server::start(config).expect("server starts")
}

/// `https://127.0.0.1:PORT/` for the server's HTTP/3 listener.
fn h3_url(server: &RunningServer) -> String {
    format!(
        "https://127.0.0.1:{}/",
        server.h3_addr().expect("h3").port()
    )
}

fn write_ca(server: &RunningServer, dir: &Path) -> PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, server.ca_pem()).expect("write CA");
    path
}

fn spawn_load(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("load")
        .args(args)
        .args(["--json", "--no-progress"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("httpvs runs")
}

/// Waits for the run (killing it past the deadline) and parses its JSON report.
fn report_of(mut child: Child) -> Value {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            panic!("httpvs load did not finish within {RUN_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); status {:?}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn assert_identity(report: &Value) {
    let r = &report["requests"];
    let started = r["started"].as_u64().expect("started");
    let sum = r["succeeded"].as_u64().unwrap_or(0)
        + r["failed"].as_u64().unwrap_or(0)
        + r["cut_off"].as_u64().unwrap_or(0);
    assert_eq!(started, sum, "accounting identity: {r}");
    assert_eq!(r["identity_holds"], Value::Bool(true));
}

fn assert_h3_with_quic_section(report: &Value) {
    assert_eq!(
        report["protocol"]["negotiated"], "h3",
        "{}",
        report["protocol"]
    );
    assert_eq!(report["protocol"]["alpn"], "h3");
    let quic = &report["quic"];
    assert!(quic["datagrams_sent"].as_u64().unwrap_or(0) > 0, "{quic}");
    assert!(
        quic["udp_bytes_received"].as_u64().unwrap_or(0) > 0,
        "{quic}"
    );
    assert!(report["wire"]["header_sent"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn load_h3_against_serve_reports_h3_and_quic() {
    let server = serve(Limits::default());
    let dir = scratch_dir("load-h3-serve");
    let ca = write_ca(&server, &dir);
    let url = format!(
        "https://localhost:{}/",
        server.h3_addr().expect("h3").port()
    );
    let ca = ca.to_string_lossy();
    let args = [
        "-p", "h3", "--cacert", &ca, "-n", "200", "-c", "2", "-m", "4", &url,
    ];
    let report = report_of(spawn_load(&args));
    assert_h3_with_quic_section(&report);
    assert_identity(&report);
    assert_eq!(report["requests"]["succeeded"], 200);
}

#[test]
fn load_h3_insecure_flag_accepts_the_self_signed_certificate() {
    let server = serve(Limits::default());
    let url = h3_url(&server);
    let args = ["-p", "h3", "-k", "-n", "200", "-c", "2", "-m", "4", &url];
    let report = report_of(spawn_load(&args));
    assert_h3_with_quic_section(&report);
    assert_eq!(report["requests"]["succeeded"], 200);
}

/// A server killed outright (SIGKILL: no CONNECTION_CLOSE) mid-run: the requests in flight fail
/// and the reconnects are refused, rather than all of it waiting out QUIC's 30 s idle timeout and
/// a run that reports no error at all.
#[test]
fn load_h3_against_a_killed_server_counts_the_loss() {
    let (mut serve, _stdout, banner) = spawn_serve(&H3_ONLY);
    let port = h3_port_of(&banner);
    let url = format!("https://127.0.0.1:{port}/");
    let child = spawn_load(&["-p", "h3", "-k", "-z", "4s", "-c", "4", "-m", "8", &url]);
    std::thread::sleep(Duration::from_millis(1200));
    serve.kill().expect("kill serve");
    let _ = serve.wait();
    let report = report_of(child);
    assert_identity(&report);
    let r = &report["requests"];
    assert!(r["failed"].as_u64().unwrap_or(0) > 0, "{r}");
    let errors = report["errors"].to_string();
    assert!(errors.contains("refused"), "{errors}");
    // The requests in flight when it died fail as the server being gone, and their
    // connections count as failed, not as closed cleanly by the server.
    assert!(errors.contains("\"unreachable\""), "{errors}");
    let closed = &report["connections"]["closed_by_server"];
    assert_eq!(closed["fin"].as_u64(), Some(0), "{closed}");
    // Every connection is found out, not only those quinn was still resending on: a server
    // killed after acknowledging all it had left quinn nothing to send, and 1 to 3 of the 4
    // were missed (their requests cut off at the end, the connections closed by us).
    let c = &report["connections"];
    assert_eq!(closed["reset"], c["opened"], "{c}");
    assert_eq!(c["closed_locally"].as_u64(), Some(0), "{c}");
    assert!(
        report["connections"]["failed_to_open"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{}",
        report["connections"]
    );
}

/// A server killed and started again on the same port: the probe finds the port answering, and
/// the new server knows nothing of the old connections (its stateless resets carry a new key),
/// so the idle timeout, seven tenths of `--timeout`, ends them and the run goes on against the
/// new server. It used to send request after request into the dead connections for 30 s.
#[test]
fn load_h3_moves_on_to_a_server_restarted_on_the_same_port() {
    let (mut first, _stdout, banner) = spawn_serve(&H3_ONLY);
    let port = h3_port_of(&banner);
    let url = format!("https://127.0.0.1:{port}/");
    let child = spawn_load(&[
        "-p",
        "h3",
        "-k",
        "-z",
        "10s",
        "--timeout",
        "2s",
        "-c",
        "2",
        "-m",
        "4",
        &url,
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    first.kill().expect("kill serve");
    let _ = first.wait();
    let mut args = H3_ONLY.to_vec();
    let at = args.iter().position(|a| *a == "0").expect("--h3 0");
    let addr = format!("127.0.0.1:{port}");
    args[at] = &addr;
    let (mut second, _stdout2, _) = spawn_serve(&args);
    let report = report_of(child);
    let _ = second.kill();
    let _ = second.wait();
    assert_identity(&report);
    let errors = report["errors"].to_string();
    assert!(errors.contains("idle_timeout"), "{errors}");
    // Only the 8 requests in flight are lost, once each: the idle timeout comes before the
    // request timeout. At the same instant, each timed out and its slot sent another into the
    // dead connection, which failed a moment later (16 failed for 8 lost).
    assert!(!errors.contains("request_timeout"), "{errors}");
    assert!(
        report["requests"]["failed"].as_u64().unwrap_or(0) <= 8,
        "{}",
        report["requests"]
    );
    // Our idle timer ended them: closed by us, not reset by the server.
    let c = &report["connections"];
    assert!(c["opened"].as_u64().unwrap_or(0) >= 4, "{c}");
    assert_eq!(c["closed_by_server"]["reset"].as_u64(), Some(0), "{c}");
    // The last whole seconds of the run were served by the new server.
    let series = report["series"].as_array().expect("series");
    let last = series
        .iter()
        .rev()
        .find(|s| s["t_s"].as_f64().is_some_and(|t| t.fract() == 0.0))
        .expect("a whole second");
    assert!(
        last["requests_per_s"].as_f64().unwrap_or(0.0) > 0.0,
        "{series:?}"
    );
}

/// `httpvs serve` with HTTP/3 alone on an ephemeral port, one thread.
const H3_ONLY: [&str; 8] = [
    "--http",
    "off",
    "--https",
    "off",
    "--h3",
    "0",
    "--threads",
    "1",
];

/// The port of the h3 listener in `httpvs serve`'s banner.
fn h3_port_of(banner: &str) -> String {
    banner
        .split("https://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("the h3 line")
        .to_owned()
}

/// The server's stream limit is learned by the probe and caps `-m`, as for h2: `-m 64` against
/// 16 streams runs 16 and says so (it used to queue 48 streams' worth of latency for credit).
#[test]
fn load_h3_caps_streams_at_the_servers_limit() {
    let server = serve(Limits {
        max_streams: 16,
        ..Limits::default()
    });
    let url = h3_url(&server);
    let args = ["-p", "h3", "-k", "-c", "1", "-m", "64", "-n", "200", &url];
    let report = report_of(spawn_load(&args));
    assert_eq!(report["requests"]["succeeded"], 200);
    let shape = &report["shape"];
    assert_eq!(shape["streams_requested"], 64, "{shape}");
    assert_eq!(shape["streams"], 16, "{shape}");
    assert_eq!(shape["server_max_streams"], 16, "{shape}");
    // Under the limit, nothing changes.
    let args = ["-p", "h3", "-k", "-c", "1", "-m", "8", "-n", "50", &url];
    let report = report_of(spawn_load(&args));
    assert_eq!(report["shape"]["streams"], 8);
    assert_eq!(report["requests"]["succeeded"], 50);
}

/// `--alt-svc` to an origin advertising an h3 port where nothing answers: as a browser, the run
/// falls back to TCP and says why, instead of ending on the h3 handshake's error.
#[test]
fn load_alt_svc_falls_back_to_tcp_when_the_advertised_h3_does_not_answer() {
    let server = httpvs_server::start(ServeConfig {
        http: None,
        h3: None,
        ..ServeConfig::loopback_ephemeral()
    })
    .expect("server starts");
    // A UDP port with nothing behind it: bound, then released.
    let dead = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
        .port();
    let url = format!(
        "https://127.0.0.1:{}/?header=alt-svc:h3%3D%22:{dead}%22",
        server.https_addr().expect("https").port()
    );
    let report = report_of(spawn_load(&["--alt-svc", "-k", "-n", "10", &url]));
    assert_eq!(report["protocol"]["negotiated"], "h2");
    assert_eq!(report["requests"]["succeeded"], 10);
    let alt_svc = report["protocol"]["alt_svc"].as_str().unwrap_or_default();
    assert!(
        alt_svc.starts_with(&format!("h3 on UDP port {dead} did not connect")),
        "{alt_svc}"
    );
}

/// A failed QUIC handshake's line carries quinn's reason (here the untrusted certificate),
/// not only the list of things it might have been.
#[test]
fn load_h3_handshake_failure_says_what_quinn_saw() {
    let server = serve(Limits::default());
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "-p", "h3", "-n", "2", &h3_url(&server)])
        .output()
        .expect("httpvs runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid peer certificate"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// `-p h3` to a port with TCP (TLS) but no UDP listener: one line that says UDP, not a bare
/// "connection refused" about a server that is plainly running.
#[test]
fn load_h3_to_a_tcp_only_port_says_udp() {
    let server = httpvs_server::start(ServeConfig {
        http: None,
        h3: None,
        ..ServeConfig::loopback_ephemeral()
    })
    .expect("server starts");
    let url = format!(
        "https://127.0.0.1:{}/",
        server.https_addr().expect("https").port()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "-p", "h3", "-k", "-n", "2", &url])
        .output()
        .expect("httpvs runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("connection refused on UDP"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// `--0rtt` against a server that takes no early data: the run works and the report says why
/// nothing went early.
#[test]
fn load_h3_0rtt_without_early_data_says_why() {
    let server = serve(Limits::default());
    let url = h3_url(&server);
    let mut args: Vec<&str> = "-p h3 --0rtt --no-keepalive -k -n 10 -c 1"
        .split(' ')
        .collect();
    args.push(&url);
    let report = report_of(spawn_load(&args));
    assert_eq!(report["requests"]["succeeded"], 10);
    assert_eq!(report["quic"]["early_requests"], 0);
    let note = report["quic"]["note"].as_str().unwrap_or_default();
    assert!(note.contains("httpvs serve does not"), "{note}");
}

/// An IPv6 literal: QUIC gets the host without its brackets (it once failed before sending a
/// packet, reported as a certificate problem).
#[test]
fn load_h3_to_an_ipv6_literal() {
    let config = ServeConfig {
        http: None,
        https: None,
        h3: Some("[::1]:0".parse().expect("address")),
        ..ServeConfig::loopback_ephemeral()
    };
    let Ok(server) = httpvs_server::start(config) else {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    };
    let url = format!("https://[::1]:{}/", server.h3_addr().expect("h3").port());
    let args = ["-p", "h3", "-k", "-n", "50", "-c", "1", "-m", "4", &url];
    let report = report_of(spawn_load(&args));
    assert_h3_with_quic_section(&report);
    assert_eq!(report["requests"]["succeeded"], 50);
}

#[test]
fn load_h3_goaway_after_n_is_retried_not_failed() {
    let limits = Limits {
        max_requests_per_conn: Some(10),
        ..Limits::default()
    };
    let server = serve(limits);
    let url = h3_url(&server);
    let args = ["-p", "h3", "-k", "-n", "300", "-c", "2", "-m", "8", &url];
    let report = report_of(spawn_load(&args));
    assert_identity(&report);
    let r = &report["requests"];
    assert_eq!(r["succeeded"], 300, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    assert!(r["retried"]["goaway"].as_u64().unwrap_or(0) > 0, "{r}");
    let closed = &report["connections"]["closed_by_server"];
    assert!(closed["goaway"].as_u64().unwrap_or(0) >= 29, "{closed}");
}

#[test]
fn load_h3_with_the_server_killed_mid_run_keeps_the_identity() {
    let server = serve(Limits::default());
    let url = format!(
        "https://127.0.0.1:{}/?delay=5ms",
        server.h3_addr().expect("h3").port()
    );
    let args = [
        "-p",
        "h3",
        "-k",
        "-z",
        "3s",
        "--timeout",
        "1s",
        "-c",
        "2",
        "-m",
        "4",
        &url,
    ];
    let child = spawn_load(&args);
    std::thread::sleep(Duration::from_millis(700));
    drop(server);
    let report = report_of(child);
    assert_identity(&report);
    let r = &report["requests"];
    assert!(r["succeeded"].as_u64().unwrap_or(0) > 0, "{r}");
    let lost = r["failed"].as_u64().unwrap_or(0) + r["cut_off"].as_u64().unwrap_or(0);
    assert!(lost > 0, "the kill cost no request: {r}");
}

#[test]
fn load_h3_against_caddy_negotiates_h3() {
    let Some(caddy) = httpvs_testkit::caddy::Caddy::start_if_installed() else {
        return;
    };
    let ca = caddy.root_ca_path();
    let ca = ca.to_string_lossy();
    let url = caddy.url();
    let args = [
        "-p", "h3", "--cacert", &ca, "-n", "100", "-c", "2", "-m", "4", &url,
    ];
    let report = report_of(spawn_load(&args));
    assert_h3_with_quic_section(&report);
    assert_identity(&report);
    assert_eq!(report["requests"]["succeeded"], 100, "{}", caddy.log());
}

#[test]
fn load_auto_with_alt_svc_follows_caddys_h3_advertisement() {
    let Some(caddy) = httpvs_testkit::caddy::Caddy::start_if_installed() else {
        return;
    };
    let url = caddy.url();
    let args = ["--alt-svc", "-k", "-n", "50", "-c", "2", "-m", "2", &url];
    let report = report_of(spawn_load(&args));
    assert_eq!(report["protocol"]["requested"], "auto");
    assert_h3_with_quic_section(&report);
    assert_eq!(report["requests"]["succeeded"], 50);
    let alt_svc = report["protocol"]["alt_svc"].as_str().unwrap_or_default();
    assert!(alt_svc.starts_with("h3 on UDP port "), "{alt_svc}");
}

/// `--alt-svc` against an origin that advertises no h3: the run stays on TCP and says why.
#[test]
fn load_auto_with_alt_svc_says_when_nothing_was_offered() {
    let server = httpvs_server::start(ServeConfig::loopback_ephemeral()).expect("server starts");
    let url = format!(
        "https://127.0.0.1:{}/",
        server.https_addr().expect("https").port()
    );
    let report = report_of(spawn_load(&["--alt-svc", "-k", "-n", "10", &url]));
    assert_eq!(report["protocol"]["negotiated"], "h2");
    assert_eq!(
        report["protocol"]["alt_svc"],
        "no same-host h3 alternative, so TCP"
    );
    assert_eq!(report["requests"]["succeeded"], 10);
}

#[test]
fn load_h3_0rtt_reports_early_requests_on_resumed_connections() {
    let Some(caddy) = httpvs_testkit::caddy::Caddy::start_if_installed() else {
        return;
    };
    let url = caddy.url();
    // A new connection per request: every one after the first can resume and send early.
    let args = [
        "-p",
        "h3",
        "--0rtt",
        "--no-keepalive",
        "-k",
        "-n",
        "20",
        "-c",
        "1",
        &url,
    ];
    let report = report_of(spawn_load(&args));
    assert_identity(&report);
    assert_eq!(report["requests"]["succeeded"], 20);
    let early = report["quic"]["early_requests"].as_u64().unwrap_or(0);
    assert!(early > 0 && early < 20, "early requests: {early}");
}

#[test]
fn zero_rtt_and_alt_svc_flags_are_checked() {
    for (args, words) in [
        (&["-p", "h2", "--0rtt"][..], "--0rtt needs -p h3"),
        (&["-p", "h3", "--alt-svc"][..], "--alt-svc needs -p auto"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
            .arg("load")
            .args(args)
            .arg("https://127.0.0.1:9/")
            .output()
            .expect("httpvs runs");
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(words), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

/// A handshake QUIC's idle timer ends (a port that takes datagrams and never answers, with a
/// `--timeout` shorter than `--connect-timeout`) names that timer, not `--connect-timeout`
/// and its value, which raising did not help.
#[test]
fn a_handshake_ended_by_quic_s_idle_timer_names_it() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/", silent.local_addr().unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args([
            "load",
            "-p",
            "h3",
            "-k",
            "--timeout",
            "2s",
            "--connect-timeout",
            "10s",
        ])
        .args(["-n", "1", "--no-progress", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("QUIC's idle timeout (1.4s"), "{stderr}");
    assert!(!stderr.contains("within 10s"), "{stderr}");
    drop(silent);
}
