//! `--window` and `--connection-window` as a user types them: sizes like `16k` reach the wire
//! (the report's JSON, schema-valid, and `httpvs trace`'s SETTINGS and WINDOW_UPDATEs show
//! them), and a bad value or a protocol without windows is one line and exit 2.

use httpvs_server::{RunningServer, ServeConfig};
use httpvs_testkit::schema::{assert_valid, LOAD_REPORT};
use serde_json::Value;
use std::process::{Command, Output};

fn httpvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .output()
        .expect("httpvs runs")
}

fn one_line_exit_2(args: &[&str]) -> String {
    let out = httpvs(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr:?}");
    assert!(stderr.starts_with("httpvs: "), "{stderr:?}");
    stderr
}

fn server() -> RunningServer {
    httpvs_server::start(ServeConfig::loopback_ephemeral()).expect("server starts")
}

#[test]
fn bad_windows_are_one_line_and_exit_2() {
    let h2c = ["load", "-p", "h2c", "http://127.0.0.1:1/"];
    let cases: &[(&[&str], &str)] = &[
        (&["--window", "0"], "--window 0: a receive window is 1 to"),
        // A size typed with a unit is shown as typed, with its bytes.
        (&["--window", "2g"], "--window 2g (2147483648 bytes): "),
        (&["--window", "2147483648"], "--window 2147483648: "),
        (
            &["--window", "lots"],
            "--window: `lots` is not a byte count",
        ),
        (&["--window", "-1"], "--window: `-1` is not a byte count"),
        (
            &["--connection-window", "16k"],
            "--connection-window 16k (16384 bytes) is below 65535 bytes",
        ),
        (&["--connection-window", "0"], "--connection-window 0: "),
    ];
    for (extra, expected) in cases {
        let args: Vec<&str> = h2c.iter().chain(extra.iter()).copied().collect();
        let line = one_line_exit_2(&args);
        assert!(line.contains(expected), "{args:?}: {line}");
    }
    // HTTP/1.1 has no window: -p h1, --h1, and -p auto on http:// all say so.
    for args in [
        &["load", "-p", "h1", "--window", "64k", "http://127.0.0.1:1/"][..],
        &["load", "--h1", "--window", "64k", "http://127.0.0.1:1/"],
        &["load", "--connection-window", "1m", "http://127.0.0.1:1/"],
        &[
            "trace",
            "-p",
            "h1",
            "--window",
            "64k",
            "http://127.0.0.1:1/",
        ],
    ] {
        let line = one_line_exit_2(args);
        assert!(line.contains("no flow-control window"), "{args:?}: {line}");
    }
    one_line_exit_2(&["trace", "-p", "h2c", "--window", "x", "http://127.0.0.1:1/"]);
    let line = one_line_exit_2(&[
        "trace",
        "-p",
        "h2c",
        "--window",
        "3g",
        "http://127.0.0.1:1/",
    ]);
    assert!(line.contains("--window 3g (3221225472 bytes): "), "{line}");
    let line = one_line_exit_2(&["trace", "-p", "h1", "-w", "16", "http://127.0.0.1:1/"]);
    assert!(line.contains("-w needs -p h2c"), "{line}");
    // h2load's -w/-W take bits: 1 to 30, and not with the size flag of the same window.
    for (extra, expected) in [
        (&["-w", "31"][..], "-w 31: use 1 to 30"),
        (&["-W", "0"], "-W 0: use 1 to 30"),
        (
            &["-w", "16", "--window", "1k"],
            "-w and --window both set the stream window",
        ),
        (&["-W", "15"], "is below 65535 bytes"),
    ] {
        let args: Vec<&str> = h2c.iter().chain(extra.iter()).copied().collect();
        let line = one_line_exit_2(&args);
        assert!(line.contains(expected), "{args:?}: {line}");
    }
}

/// h2load's spellings: `-w 16 -W 20` advertise 2^16-1 and 2^20-1 bytes.
#[test]
fn h2loads_window_bits_are_taken() {
    let s = server();
    let url = format!("http://{}/?size=256k", s.http_addr().unwrap());
    let out = httpvs(&[
        "load",
        "-p",
        "h2c",
        "-w",
        "16",
        "-W",
        "20",
        "-n",
        "4",
        "-c",
        "1",
        "--json",
        "--no-progress",
        &url,
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["shape"]["windows"]["stream_bytes"], 65_535);
    assert_eq!(report["shape"]["windows"]["connection_bytes"], 1_048_575);
    assert_eq!(report["wire"]["body_received"], 4 << 18);
}

#[test]
fn load_with_small_windows_reports_them() {
    let s = server();
    let h2c = format!("http://{}/?size=1m", s.http_addr().unwrap());
    let out = httpvs(&[
        "load",
        "-p",
        "h2c",
        "--window",
        "16k",
        "--connection-window",
        "64k",
        "-c",
        "2",
        "-m",
        "2",
        "-n",
        "8",
        "--json",
        "--no-progress",
        &h2c,
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_valid(LOAD_REPORT, &report, "load --window");
    assert_eq!(report["requests"]["succeeded"], 8);
    assert_eq!(report["wire"]["body_received"], 8 << 20);
    let windows = &report["shape"]["windows"];
    assert_eq!(windows["stream_bytes"], 16 << 10, "{windows}");
    assert_eq!(windows["connection_bytes"], 64 << 10, "{windows}");

    let h3 = format!("https://127.0.0.1:{}/?size=1m", s.h3_addr().unwrap().port());
    let out = httpvs(&[
        "load",
        "-p",
        "h3",
        "-k",
        "--window",
        "16k",
        "-c",
        "1",
        "-m",
        "2",
        "-n",
        "4",
        "--no-progress",
        &h3,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("Windows:      receive 16KiB per stream, no connection limit"),
        "{text}"
    );
    assert!(text.contains("4 succeeded"), "{text}");
}

#[test]
fn trace_shows_the_advertised_window_and_its_updates() {
    let s = server();
    let url = format!("http://{}/?size=64k", s.http_addr().unwrap());
    let out = httpvs(&["trace", "-p", "h2c", "--window", "16k", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let settings = text
        .lines()
        .find(|l| l.contains("SETTINGS_INITIAL_WINDOW_SIZE"))
        .unwrap_or_else(|| panic!("no SETTINGS_INITIAL_WINDOW_SIZE in\n{text}"));
    assert!(settings.contains("16384"), "{settings}");
    // 64 KiB through a 16 KiB window: the client sends stream WINDOW_UPDATEs as it reads.
    let updates = text
        .lines()
        .filter(|l| l.contains("send WINDOW_UPDATE") && l.contains("stream_id=1>"))
        .count();
    assert!(updates >= 3, "{updates} stream WINDOW_UPDATEs in\n{text}");
}
