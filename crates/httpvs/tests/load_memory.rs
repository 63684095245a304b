//! What `httpvs load` holds per connection: a large request body is one shared copy for the
//! whole run, whatever the connections and pipelining.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;
use support::scratch_dir;

/// The peak RSS, KiB, of a running process (0 once it is gone).
fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        })
        .unwrap_or(0)
}

/// An 8 MB body over HTTP/1.1 on 8 connections, 2 deep: each connection copied it into its
/// write queue and kept that buffer and its spare (about 2 copies per connection and request
/// in flight: 266 MB at `-c 16`, where h2c held 20 MB).
#[test]
fn an_h1_request_body_is_not_copied_per_connection() {
    let dir = scratch_dir("load-memory-body");
    let body = dir.join("body.bin");
    std::fs::write(&body, vec![b'x'; 8 << 20]).unwrap();
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args([
            "load", "-p", "h1", "-c", "8", "-m", "2", "-t", "1", "-z", "1s",
        ])
        .args(["--no-progress", "--data-file", body.to_str().unwrap(), &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_kib(child.id()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains(" succeeded + 0 failed"), "{report}");
    // One copy of the body read from the file, one shared by every request, and the rest of
    // the client: well under 16 copies.
    assert!(peak < 60 * 1024, "peak RSS {peak} KiB");
}
