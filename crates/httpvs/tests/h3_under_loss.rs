//! Regression: HTTP/3 with 64 KiB responses through a lossy emulated link completes its work
//! and sends each response about once; through a jittered one it does not take reordering for
//! loss. With quinn on its default Cubic (while the kernel's TCP
//! ran BBR) it collapsed: ~8 req/s at 10 ms RTT and 5% loss, none at 30%, while h2 only slowed.
//! Needs root (netem builds TUN devices in namespaces); skipped otherwise unless CI requires it.

mod support;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::scratch_dir;

/// Requests in the run: at the collapsed rate they need ~40 s, far past [`RUN_DEADLINE`];
/// a healthy run needs about a second.
const REQUESTS: u64 = 400;
/// Response body size asked of the server.
const BODY: u64 = 64 * 1024;
/// The run is killed (and the test fails) if its requests are not all done by then.
const RUN_DEADLINE: Duration = Duration::from_secs(20);

#[test]
fn h3_64k_responses_all_complete_through_5_percent_loss() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let report = run_h3("h3-under-loss", "delay 5ms loss 5%");
    let at = |pointer: &str| number(&report, pointer);
    // The link really dropped packets, and h3 recovered them without resending whole responses.
    let lost = at("/network/up/lost") + at("/network/down/lost");
    assert!(
        lost > 0,
        "the link dropped nothing: {:#}",
        report["network"]
    );
    let per_response = at("/wire/received") / REQUESTS;
    assert!(
        per_response < 2 * BODY,
        "{per_response} bytes on the wire per {BODY}-byte response: {:#}",
        report["wire"]
    );
}

/// Jitter reorders packets (as the kernel's netem does) and drops none. With quinn's default
/// loss detection (3 packets, 9/8 RTT) both ends took the reordering for loss and resent
/// 2.8-3.7x every response's bytes (at a quarter of the rate); detecting loss by time with a
/// quarter RTT of slack, as the kernel's TCP does once it has seen reordering, resends ~5%.
#[test]
fn h3_does_not_take_jitter_for_loss() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let report = run_h3("h3-under-jitter", "delay 5ms 1ms");
    let at = |pointer: &str| number(&report, pointer);
    assert_eq!(at("/network/up/lost") + at("/network/down/lost"), 0);
    let per_response = at("/wire/received") / REQUESTS;
    assert!(
        per_response < BODY * 3 / 2,
        "{per_response} bytes on the wire per {BODY}-byte response through a link that lost \
         nothing: {:#}",
        report["wire"]
    );
}

/// `report` at `pointer`, a number.
fn number(report: &Value, pointer: &str) -> u64 {
    report
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing in {report:#}"))
}

/// [`REQUESTS`] h3 requests of [`BODY`] bytes each from `httpvs serve` through the link `spec`
/// (1 connection x 10 streams), killed past [`RUN_DEADLINE`]; all must succeed. The report.
fn run_h3(name: &str, spec: &str) -> Value {
    let server =
        httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).expect("server");
    let port = server.h3_addr().expect("h3 listener").port();
    let url = format!("https://127.0.0.1:{port}/?size={BODY}");
    let dir = scratch_dir(name);
    let report_path = dir.join("report.json");
    let requests = REQUESTS.to_string();
    let args = [
        "load",
        "--net",
        spec,
        "--net-seed",
        "5",
        "-p",
        "h3",
        "-k",
        "-t",
        "1",
        "-c",
        "1",
        "-m",
        "10",
        "-n",
        &requests,
        "--no-progress",
        "-o",
        report_path.to_str().expect("utf-8 path"),
        &url,
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("httpvs runs");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{REQUESTS} h3 requests of 64 KiB through \"{spec}\" were not done within {RUN_DEADLINE:?}: h3 collapsed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "httpvs load: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).expect("report written"))
            .expect("JSON report");
    assert_eq!(report["protocol"]["negotiated"], "h3", "{report:#}");
    assert_eq!(
        number(&report, "/requests/succeeded"),
        REQUESTS,
        "{:#}",
        report["requests"]
    );
    assert_eq!(
        number(&report, "/requests/failed"),
        0,
        "{:#}",
        report["requests"]
    );
    assert_eq!(number(&report, "/wire/body_received"), REQUESTS * BODY);
    report
}
