//! Closed pipes and sockets: a peer that hangs up is a write error, never a signal that kills httpvs.

mod support;

use std::process::{Command, Stdio};
use support::spawn_serve;

fn httpvs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
}

/// A client that closes right after the TLS handshake must not kill `httpvs serve` (it did while
/// SIGPIPE was reset to its default: the server's next write raised it).
#[test]
fn serve_survives_clients_that_hang_up_after_the_tls_handshake() {
    let args = ["--http", "off", "--h3", "off", "--https", "127.0.0.1:0"];
    let (mut server, _stdout, banner) = spawn_serve(&[&args[..], &["--threads", "1"]].concat());
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("https://"))
        .unwrap()
        .to_owned();
    for _ in 0..2 {
        let out = httpvs()
            .args([
                "load",
                "-p",
                "h1",
                "-k",
                "-n",
                "200",
                "-c",
                "2",
                "--no-progress",
                &url,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(server.try_wait().unwrap().is_none(), "the server died");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

/// `httpvs ... | head -1` ends quietly with success, as any Unix filter does.
#[test]
fn a_closed_stdout_is_a_quiet_success() {
    // The reader is gone before the child starts, so its very first write fails with EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = httpvs()
        .args(["compare", "--print-plan"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}

/// A closed stderr (`2>&1 | head -1` once `head` is gone) drops the lines that go there; it
/// does not panic. `eprintln!` did, with exit 101, and `compare` then wrote none of its files.
#[test]
fn a_closed_stderr_drops_its_lines_and_the_command_goes_on() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    // Nothing listens on port 9: the one-line error goes to the closed stderr.
    let out = httpvs()
        .args(["load", "http://127.0.0.1:9/", "-n", "1", "--no-progress"])
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// A one-thread `httpvs serve` with only its cleartext listener, and its `http://` URL.
fn serve_plain() -> (std::process::Child, String) {
    let (server, _stdout, banner) =
        spawn_serve(&["--https", "off", "--h3", "off", "--threads", "1"]);
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    (server, url)
}

/// Runs `httpvs load URL ARGS -o REPORT --log-file -` with its stdout a pipe whose reader is
/// already gone; checks that it ends quietly with success, and returns the report.
fn load_logging_to_a_closed_stdout(url: &str, args: &[&str], report: &std::path::Path) -> String {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = httpvs()
        .args(["load", url, "--no-progress"])
        .args(args)
        .arg("-o")
        .arg(report)
        .args(["--log-file", "-"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
    let text = std::fs::read_to_string(report).unwrap();
    let _ = std::fs::remove_file(report);
    text
}

fn says_epipe(json: &serde_json::Value) -> bool {
    json["request_log"]["error"]
        .as_str()
        .is_some_and(|e| e.contains("EPIPE"))
}

/// `httpvs load -o r.json --log-file - | head -1` ends quietly with success, as the report on
/// stdout does, and the report in `-o` still says where the rows stop (it said on stderr that
/// writing failed, and exited 1).
#[test]
fn a_request_log_on_a_closed_stdout_is_a_quiet_success() {
    let (mut server, url) = serve_plain();
    let report = std::env::temp_dir().join(format!("httpvs-pipe-{}.json", std::process::id()));
    let text = load_logging_to_a_closed_stdout(&url, &["-n", "200", "-c", "1"], &report);
    server.kill().unwrap();
    server.wait().unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["requests"]["succeeded"], 200);
    assert_eq!(json["request_log"]["rows"], 0);
    assert!(says_epipe(&json), "{json}");
}

/// `httpvs load -z 20s -o r.txt --log-file - | head -1` ends once head is gone, not 20 s later:
/// the rows were what the run was for. The report says why it ended early, the accounting still
/// holds, and the exit is a quiet success (it ran the whole `-z` and exited 0 before).
#[test]
fn a_request_log_whose_reader_is_gone_ends_the_run() {
    let (mut server, url) = serve_plain();
    let base = std::env::temp_dir().join(format!("httpvs-pipe-end-{}", std::process::id()));
    let run = ["-z", "20s", "-c", "2"];
    let json = load_logging_to_a_closed_stdout(&url, &run, &base.with_extension("json"));
    let text = load_logging_to_a_closed_stdout(&url, &run, &base.with_extension("txt"));
    server.kill().unwrap();
    server.wait().unwrap();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["interrupted"], true, "{json}");
    assert!(json["duration_s"].as_f64().unwrap() < 20.0, "{json}");
    assert_eq!(json["requests"]["identity_holds"], true, "{json}");
    assert!(
        json["requests"]["succeeded"].as_u64().unwrap() > 0,
        "{json}"
    );
    assert!(says_epipe(&json), "{json}");
    assert!(
        text.contains("(ended when the --log-file reader closed the pipe"),
        "{text}"
    );
}

/// A stdout that fails otherwise than by a closed pipe (a full disk under `> report.txt`) is
/// one line and exit 1: `load` lost its report and exited 0, and `--print-plan` or
/// `netem --profiles` panicked with a backtrace (101).
#[test]
fn a_full_stdout_is_one_line_and_a_failure() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let runs: [&[&str]; 6] = [
        &["load", "-n", "1", "-c", "1", &url],
        &["trace", &url],
        &["compare", "--print-plan"],
        &["netem", "--profiles"],
        &["--version"],
        &["load", "--help"],
    ];
    for args in runs {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = httpvs()
            .args(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.ends_with(
                "httpvs: cannot write to stdout: No space left on device (os error 28)\n"
            ),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
