//! Ctrl-C during `httpvs compare`: the finished cells are still printed and written (text, JSON,
//! HTML, each saying the run was interrupted), the exit code is 130, and nothing is left behind.

mod support;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::scratch_dir;

/// Six cells of about a second each (two repeats of 400 ms after 100 ms), a clean condition
/// first and then two emulated ones, so the interrupt lands while a link is up.
const PLAN: &str = r#"
name = "interrupt"
protocols = ["h1", "h2c"]
duration = "400ms"
warmup = "100ms"
repeats = 2
[shapes]
h1 = "2"
h2c = "1x2"
[[payloads]]
name = "small"
size = "100"
[[conditions]]
name = "clean"
[[conditions]]
name = "near"
netem = "delay 5ms"
[[conditions]]
name = "far"
netem = "delay 10ms"
"#;

/// Kills the child if the test ends early, so a failing assertion leaves no compare running.
struct Reaper(Option<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Kills the child if it has not ended within 90 s (a hang would block the reads below).
fn watchdog(pid: u32, done: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if done.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: signalling our own child, not yet reaped (so its pid is still its own).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    });
}

/// Reads `from` until `needle` has appeared (or the stream ends, or 60 s pass).
fn read_until(from: &mut impl Read, seen: &mut String, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut buf = [0u8; 512];
    while !seen.contains(needle) && Instant::now() < deadline {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

#[test]
fn ctrl_c_keeps_the_finished_cells_marks_the_report_and_leaves_nothing_behind() {
    let dir = scratch_dir("compare-interrupt");
    std::fs::write(dir.join("plan.toml"), PLAN).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args([
            "compare",
            "--plan",
            "plan.toml",
            "--json",
            "r.json",
            "--html",
            "r.html",
        ])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    watchdog(pid, done.clone());
    let mut reaper = Reaper(Some(child));
    let child = reaper.0.as_mut().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let mut progress = String::new();
    // The third cell (the first behind the link) has started: two cells are done.
    read_until(&mut stderr, &mut progress, "[  3/6]");
    assert!(progress.contains("[  3/6]"), "{progress}");
    // As root the link is on this host's view: wait until it is up, so its teardown is checked.
    let ours = format!("hv-{pid}-");
    if httpvs_testkit::require_root() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !links().contains(&ours) {
            assert!(Instant::now() < deadline, "the link never came up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    progress.push_str(&rest);
    let mut stdout = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut stdout);
    let status = child.wait().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    reaper.0 = None;
    assert_eq!(status.code(), Some(130), "{stdout}\n{progress}");

    // The cells whose progress line ended with a figure are the ones kept.
    let finished = progress.matches(" req/s, p99 ").count();
    assert!((2..6).contains(&finished), "{progress}");
    assert!(
        progress.contains("interrupted: this cell is dropped"),
        "{progress}"
    );
    let line = format!("interrupted (Ctrl-C, SIGTERM or SIGHUP): {finished} of 6 cells finished");
    assert!(stdout.contains(&line), "{stdout}");
    let clean = stdout
        .split("\n== ")
        .find(|t| t.starts_with("clean"))
        .unwrap_or_else(|| panic!("no clean table:\n{stdout}"));
    for proto in ["h1", "h2c"] {
        assert!(
            clean
                .lines()
                .any(|l| l.split_whitespace().next() == Some(proto)),
            "no {proto} row:\n{clean}"
        );
    }
    assert!(clean.contains("verdict clean: "), "{clean}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(json["setup"]["cells_planned"], 6);
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), finished, "only finished cells: {json}");
    for cell in cells {
        assert_eq!(cell["runs"].as_array().unwrap().len(), 2, "{cell}");
    }
    assert!(json["setup"]["dropped"].is_string(), "{}", json["setup"]);
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(html.contains("<p class=\"banner\">interrupted"));

    // Torn down: the link's devices, any nft table, the CA file of the embedded server.
    let links = links();
    assert!(
        !links.contains(&ours),
        "link left after the interrupt:\n{links}"
    );
    let tables = Command::new("nft").args(["list", "tables"]).output();
    let tables = tables.map_or(String::new(), |o| text(&o.stdout));
    assert!(!tables.contains("httpvs"), "nft table left:\n{tables}");
    let ca = std::env::temp_dir().join(format!("httpvs-compare-{pid}-ca.pem"));
    assert!(!ca.exists(), "{} left", ca.display());
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn links() -> String {
    let out = Command::new("ip").arg("link").output();
    out.map_or(String::new(), |o| text(&o.stdout))
}
