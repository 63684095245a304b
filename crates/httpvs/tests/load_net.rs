//! `httpvs load --net SPEC` end to end through the binary, against the in-process reference
//! server: 50 ms each way reads back as +100 ms of TCP connect, HTTP/3 crosses a lossy link,
//! the report carries the link's counters, nothing is left behind, and bad specs are one line.

mod support;

use httpvs_server::{RunningServer, ServeConfig};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::scratch_dir;

/// No run here may take longer; a hung client is killed and the test fails.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

fn serve() -> RunningServer {
    httpvs_server::start(ServeConfig::loopback_ephemeral()).expect("server starts")
}

fn http_url(server: &RunningServer) -> String {
    format!("http://{}/", server.http_addr().expect("http listener"))
}

fn spawn_load(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("load")
        .args(args)
        .arg("--no-progress")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("httpvs runs")
}

/// Waits for the run, killing it past the deadline. The report goes to a file (`-o`), so the
/// pipes carry at most a line or a text report and never fill while we poll.
fn finish(mut child: Child) -> (u32, Output) {
    let pid = child.id();
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            panic!("httpvs load --net did not finish within {RUN_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (pid, child.wait_with_output().expect("output"))
}

/// Runs `httpvs load ARGS -o DIR/report.json`, checks it succeeded and left no device, and
/// returns the JSON report.
fn run_json(dir: &Path, args: &[&str]) -> Value {
    let path = dir.join("report.json");
    let path_arg = path.to_str().expect("utf-8 path");
    let mut all = args.to_vec();
    all.extend(["-o", path_arg]);
    let (pid, out) = finish(spawn_load(&all));
    assert!(
        out.status.success(),
        "httpvs load {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_device_of(pid);
    let text = std::fs::read_to_string(&path).expect("report written");
    serde_json::from_str(&text).expect("JSON report")
}

/// `ip link` holds no `hv-<pid>-` device of that (finished) process.
fn assert_no_device_of(pid: u32) {
    let ours = format!("hv-{pid}-");
    let links = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let sysfs_has = std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(&ours));
    assert!(
        !links.contains(&ours) && !sysfs_has,
        "a device of pid {pid} outlived it:\n{links}"
    );
}

fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing in {v:#}"))
}

/// The network section: both directions carried packets, and every counter the relay keeps is there.
fn assert_link_counters(report: &Value, spec: &str) {
    let net = &report["network"];
    assert_eq!(net["spec"], spec, "{net:#}");
    for dir in ["up", "down"] {
        let d = &net[dir];
        let packets_in = u64_at(d, "/packets_in");
        assert!(packets_in > 0, "{dir}: no packets crossed the link: {d:#}");
        // The counters' identity, with nothing held after the drain.
        assert_eq!(u64_at(d, "/held"), 0, "{dir}: {d:#}");
        assert_eq!(
            u64_at(d, "/packets_out"),
            packets_in + u64_at(d, "/duplicated") - u64_at(d, "/lost") - u64_at(d, "/queue_drops"),
            "{dir}: {d:#}"
        );
        for counter in ["corrupted", "reordered", "late", "rejected", "ecn_marked"] {
            u64_at(d, &format!("/{counter}"));
        }
    }
}

/// The median TCP connect time of a report, µs.
fn connect_p50(report: &Value) -> u64 {
    report["phases"]["tcp_connect"]["percentiles"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["p"] == 50.0))
        .and_then(|p| p["us"].as_u64())
        .expect("p50 of tcp connect")
}

/// The tests that build links run one at a time: each link's relay threads want a core, and a
/// busy machine only ever adds time to what the link measures.
static ONE_LINK_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_link_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_LINK_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a test that builds a link starts with: root (else `None`: the test is skipped), its turn
/// among such tests, and a server.
fn link_test() -> Option<(std::sync::MutexGuard<'static, ()>, RunningServer)> {
    if !httpvs_testkit::require_root() {
        return None;
    }
    let serial = one_link_at_a_time();
    Some((serial, serve()))
}

#[test]
fn delay_50ms_each_way_reads_back_as_100ms_of_tcp_connect() {
    let Some((_serial, server)) = link_test() else {
        return;
    };
    let url = http_url(&server);
    let dir = scratch_dir("load-net-delay");
    let args = [
        "--net",
        "delay 50ms",
        "-c",
        "4",
        "-t",
        "1",
        "-n",
        "40",
        &url,
    ];
    // A SYN and its SYN-ACK each wait 50 ms in the link; the relay adds tens of microseconds.
    // The link can never make it shorter. A loaded machine can make it longer (the client's
    // wake-up after the SYN-ACK is not the link's doing), so the best of three runs counts.
    let mut best: Option<(u64, Value)> = None;
    for _ in 0..3 {
        let report = run_json(&dir, &args);
        assert_eq!(u64_at(&report, "/requests/succeeded"), 40, "{report:#}");
        let connect = &report["phases"]["tcp_connect"];
        assert_eq!(u64_at(connect, "/count"), 4);
        assert!(
            u64_at(connect, "/min_us") >= 100_000,
            "a connect took less than the link's 100 ms round trip: {connect:#}"
        );
        let p50 = connect_p50(&report);
        if best.as_ref().is_none_or(|(b, _)| p50 < *b) {
            best = Some((p50, report));
        }
        if p50 < 101_000 {
            break;
        }
    }
    let (p50, report) = best.expect("one run");
    assert!(
        p50 < 101_500,
        "median TCP connect {p50} µs at best, expected 100 ms (+ <1.5 ms): {:#}",
        report["phases"]["tcp_connect"]
    );
    assert_link_counters(&report, "delay 50ms");
    assert_eq!(report["network"]["up"]["netem"], "delay 50ms");
    assert_eq!(u64_at(&report, "/network/up/lost"), 0);

    // The text report shows the link in its header and its counters per direction.
    let (pid, out) = finish(spawn_load(&[
        "--net",
        "lan",
        "--net-seed",
        "7",
        "-c",
        "1",
        "-n",
        "5",
        &url,
    ]));
    assert!(out.status.success(), "{out:?}");
    assert_no_device_of(pid);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Network:      emulated link --net \"lan\""),
        "{text}"
    );
    assert!(
        text.contains("\nNetwork      --net \"lan\", seed 7"),
        "{text}"
    );
    assert!(
        text.contains("\n  up ") && text.contains("\n  down "),
        "{text}"
    );
}

#[test]
fn h2c_waits_one_round_trip_for_settings_and_shows_it() {
    let Some((_serial, server)) = link_test() else {
        return;
    };
    let dir = scratch_dir("load-net-settings");
    let report = run_json(
        &dir,
        &[
            "--net",
            "delay 20ms",
            "-p",
            "h2c",
            "-c",
            "2",
            "-m",
            "4",
            "-t",
            "1",
            "-n",
            "40",
            &http_url(&server),
        ],
    );
    assert_eq!(u64_at(&report, "/requests/succeeded"), 40, "{report:#}");
    // The server can send SETTINGS only once it has accepted, after our ACK crossed the link:
    // SETTINGS arrive at least one 40 ms round trip after connect() returned. A late wake-up
    // of ours after the SYN-ACK shortens the wait as measured, so the bound leaves 5 ms.
    let settings = &report["phases"]["settings"];
    assert_eq!(u64_at(settings, "/count"), 2, "{settings:#}");
    assert!(
        u64_at(settings, "/min_us") >= 35_000,
        "a SETTINGS wait shorter than the link's round trip: {settings:#}"
    );
}

#[test]
fn h3_crosses_a_lossy_link() {
    let Some((_serial, server)) = link_test() else {
        return;
    };
    let h3 = format!(
        "https://127.0.0.1:{}/",
        server.h3_addr().expect("h3").port()
    );
    let dir = scratch_dir("load-net-h3");
    // A fixed seed fixes which packets the link drops; 2% of a few hundred packets each way.
    let spec = "delay 5ms loss 2%";
    let report = run_json(
        &dir,
        &[
            "--net",
            spec,
            "--net-seed",
            "11",
            "-p",
            "h3",
            "-k",
            "-c",
            "2",
            "-m",
            "8",
            "-t",
            "1",
            "-n",
            "400",
            &h3,
        ],
    );
    assert_eq!(report["protocol"]["negotiated"], "h3");
    assert_eq!(u64_at(&report, "/requests/succeeded"), 400, "{report:#}");
    assert!(report["quic"].is_object(), "QUIC section: {report:#}");
    assert!(u64_at(&report, "/quic/min_rtt_us") >= 10_000, "{report:#}");
    assert_link_counters(&report, spec);
    let lost = u64_at(&report, "/network/up/lost") + u64_at(&report, "/network/down/lost");
    assert!(
        lost > 0,
        "the link dropped nothing: {:#}",
        report["network"]
    );
}

#[test]
fn a_killed_run_leaves_no_device() {
    let Some((_serial, server)) = link_test() else {
        return;
    };
    let url = http_url(&server);
    let mut child = spawn_load(&["--net", "delay 20ms", "-c", "2", "-z", "20s", &url]);
    let device = format!("/sys/class/net/hv-{}-0", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new(&device).exists() {
        assert!(Instant::now() < deadline, "{device} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    let pid = child.id();
    let _ = child.wait();
    // The TUN device dies with its last file descriptor, which the kernel closes at exit.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&device).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_no_device_of(pid);
}

fn one_line_error(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr:?}");
    assert!(stderr.starts_with("httpvs: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn bad_net_flags_are_one_line_and_exit_2() {
    let load = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_httpvs"))
            .arg("load")
            .args(args)
            .output()
            .expect("httpvs runs")
    };
    // The server need not exist: flags are checked before any link or connection.
    let url = "http://127.0.0.1:9/";
    for (args, needle) in [
        (vec!["--net", "delay 50ms jitterbug 3", url], "`jitterbug`"),
        (vec!["--net", "delay 5ms | dleay 7ms", url], "`dleay`"),
        (vec!["--net", "delay fast", url], "`fast`"),
        (vec!["--net", "wna", url], "profile: lan, wan"),
        (vec!["--net", "wan", "http://192.0.2.1/"], "127.0.0.0/8"),
        (vec!["--net-seed", "3", url], "--net-seed needs --net"),
        // Both directions' own seeds win: --net-seed would be dropped unseen.
        (
            vec!["--net", "delay 5ms seed 7", "--net-seed", "8", url],
            "--net-seed 8 is not used",
        ),
    ] {
        let out = load(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let line = one_line_error(&out);
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

#[test]
fn without_root_the_link_says_why_in_one_line() {
    use std::os::unix::process::CommandExt;
    if !httpvs_testkit::require_root() {
        return;
    }
    // Drop to nobody to see what a user without root sees.
    let spawned = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "--net", "wan", "-n", "1", "http://127.0.0.1:9/"])
        .uid(65534)
        .gid(65534)
        .output();
    let out = match spawned {
        Ok(out) if out.status.code() != Some(126) => out,
        _ => {
            eprintln!("skipped: the test binary is not executable by nobody here");
            return;
        }
    };
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let line = one_line_error(&out);
    assert!(
        line.contains("--net: network emulation is not possible here") && line.contains("root"),
        "{line}"
    );
}
