//! `httpvs load --log-file`: one row per request, as h2load's log, that agrees with the report.

use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

fn httpvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("load")
        .args(args)
        .output()
        .expect("httpvs runs")
}

fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("httpvs-log-{}-{name}", std::process::id()))
}

/// One row, its seven columns read.
#[derive(Debug)]
struct Row {
    start: u64,
    status: i64,
    duration: u64,
    intended: u64,
    connection: u64,
    url: usize,
    error: String,
    sent: u64,
}

fn rows(path: &std::path::Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| {
            let c: Vec<&str> = line.split('\t').collect();
            assert_eq!(c.len(), 8, "{line:?}");
            Row {
                start: c[0].parse().unwrap(),
                status: c[1].parse().unwrap(),
                duration: c[2].parse().unwrap(),
                intended: c[3].parse().unwrap(),
                connection: c[4].parse().unwrap(),
                url: c[5].parse().unwrap(),
                error: c[6].to_string(),
                sent: c[7].parse().unwrap(),
            }
        })
        .collect()
}

/// Every measured request that ended has its row, with its URL's status (or -1 and the
/// failure's kind), on every TCP protocol; the report's row count and statuses agree with it.
#[test]
fn every_request_has_a_row_that_agrees_with_the_report() {
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let plain = format!("http://{}/", server.http_addr().unwrap());
    let tls = format!("https://{}/", server.https_addr().unwrap());
    for (base, proto) in [(&plain, "h1"), (&plain, "h2c"), (&tls, "h2")] {
        let log = temp(&format!("{proto}.tsv"));
        let before = epoch_us();
        let out = httpvs(&[
            base,
            "/?status=503",
            "/?delay=200ms",
            "-p",
            proto,
            "-k",
            "--timeout",
            "20ms",
            "-n",
            "60",
            "-c",
            "2",
            "-t",
            "2",
            "--json",
            "--no-progress",
            "--log-file",
            log.to_str().unwrap(),
        ]);
        let after = epoch_us();
        assert_eq!(out.status.code(), Some(0), "{proto}: {out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = rows(&log);
        let ended = json["requests"]["succeeded"].as_u64().unwrap()
            + json["requests"]["failed"].as_u64().unwrap();
        assert_eq!(rows.len() as u64, ended, "{proto}");
        assert_eq!(ended, 60, "{proto}");
        assert_eq!(json["request_log"]["rows"], 60, "{proto}");
        assert_eq!(json["request_log"]["file"], log.to_str().unwrap());
        assert!(json["request_log"].get("error").is_none());
        let mut per_url = [0; 3];
        for row in &rows {
            per_url[row.url] += 1;
            assert!(
                row.start >= before && row.start + row.duration <= after,
                "{row:?}"
            );
            // The closed model: due when sent.
            assert_eq!(row.intended, row.start, "{row:?}");
            assert!(row.connection >= 1, "{row:?}");
            assert!(row.sent <= row.duration, "{row:?}");
            match row.url {
                0 => assert_eq!((row.status, row.error.as_str()), (200, "-"), "{row:?}"),
                1 => assert_eq!((row.status, row.error.as_str()), (503, "-"), "{row:?}"),
                _ => {
                    assert_eq!(row.status, -1, "{row:?}");
                    assert_eq!(row.error, "request_timeout", "{row:?}");
                    assert!(row.duration >= 20_000, "{row:?}");
                }
            }
        }
        assert_eq!(per_url, [20, 20, 20], "{proto}: the URLs in turn");
        // A connection's first request waited for its set-up before it went out.
        assert!(rows.iter().any(|r| r.sent > 0), "{proto}: {rows:?}");
        let statuses = json["status_codes"].as_array().unwrap();
        let count = |code: u64| {
            statuses
                .iter()
                .find(|s| s["code"] == code)
                .map_or(0, |s| s["count"].as_u64().unwrap())
        };
        assert_eq!((count(200), count(503)), (20, 20), "{proto}");
        let _ = std::fs::remove_file(&log);
    }
}

/// The open model logs each request's intended time: the corrected latency is start +
/// duration - intended, and the intended times are the schedule's even spacing.
#[test]
fn the_open_model_logs_intended_times() {
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let log = temp("open.tsv");
    let out = httpvs(&[
        &url,
        "--rate",
        "200",
        "-n",
        "100",
        "-c",
        "4",
        "-t",
        "1",
        "--no-progress",
        "--log-file",
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Request log  100 rows in"), "{text}");
    let mut rows = rows(&log);
    assert_eq!(rows.len(), 100);
    for row in &rows {
        // The pacing timer releases a send up to 1 ms early, never later than it can help.
        assert!(row.start + 1_000 >= row.intended, "{row:?}");
        assert_eq!(row.status, 200);
        // Every connection was open before the clock started (as wrk2's are).
        assert_eq!(row.sent, 0, "{row:?}");
    }
    rows.sort_by_key(|r| r.intended);
    let span = rows[99].intended - rows[0].intended;
    // The schedule itself: 99 gaps of 5 ms (µs rounding aside).
    assert!((494_998..=495_002).contains(&span), "{span}");
    let _ = std::fs::remove_file(&log);
}

/// A log that cannot be written is one line and exit 2 before any load; one that fails
/// mid-run (a full disk) keeps the run's report, says how far the log got, and exits 1.
#[test]
fn a_log_that_cannot_be_written_is_said() {
    let out = httpvs(&[
        "http://127.0.0.1:9/",
        "--log-file",
        "/nonexistent/dir/x.tsv",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--log-file: cannot write"), "{stderr}");
    let same = temp("same.json");
    let same = same.to_str().unwrap();
    // The same file under two names, neither existing yet, is still the same file; and so is
    // stdout, where the report goes without -o.
    let dotted = format!(
        "{}/./{}",
        std::env::temp_dir().display(),
        temp("same.json").file_name().unwrap().to_str().unwrap()
    );
    let out = httpvs(&["http://127.0.0.1:9/", "--log-file", &dotted, "-o", same]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is the -o file"),
        "{out:?}"
    );
    let _ = std::fs::remove_file(same);
    let out = httpvs(&["http://127.0.0.1:9/", "--log-file", "/dev/stdout"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is stdout"),
        "{out:?}"
    );
    // `-` is named as typed, not as the /dev/stdout it stands for.
    let out = httpvs(&["http://127.0.0.1:9/", "--log-file", "-"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--log-file - is stdout"),
        "{out:?}"
    );

    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "-n",
        "3000",
        "-c",
        "2",
        "--no-progress",
        "--log-file",
        "/dev/full",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3,000 succeeded"), "{text}");
    assert!(
        text.contains("Request log  0 rows in /dev/full, then writing failed"),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--log-file: writing failed after 0 rows"),
        "{stderr}"
    );
}

/// `--log-file -` with the report in `-o` adds its rows to stdout where the stream stands:
/// what the shell wrote there before stays (it was emptied, and the rows written from byte 0).
#[test]
fn log_rows_on_stdout_follow_what_was_there() {
    use std::io::{Seek, SeekFrom, Write};
    let server =
        httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).expect("serve");
    let url = format!("http://{}/", server.http_addr().expect("http"));
    let out_path = temp("stdout-shared.txt");
    let report = temp("stdout-shared.json");
    let mut shared = std::fs::File::create(&out_path).expect("create");
    shared.write_all(b"before-line\n").expect("write");
    shared.seek(SeekFrom::End(0)).expect("seek");
    let status = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", &url, "--log-file", "-", "-o"])
        .arg(&report)
        .args(["-n", "3", "-c", "1", "--no-progress"])
        .stdout(std::process::Stdio::from(shared))
        .status()
        .expect("runs");
    assert!(status.success());
    let text = std::fs::read_to_string(&out_path).expect("read");
    assert!(text.starts_with("before-line\n"), "{text}");
    let rows = text.lines().skip(1).filter(|l| l.contains('\t')).count();
    assert_eq!(rows, 3, "{text}");
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(report);
}

/// A FIFO nobody reads waits in its open, as any writer's does; Ctrl-C ends that wait. With the
/// run's own handler installed first, the open was restarted after each Ctrl-C, and only
/// SIGKILL ended it.
#[test]
fn ctrl_c_ends_the_wait_for_a_log_fifo_s_reader() {
    let fifo = temp("unread.fifo");
    let _ = std::fs::remove_file(&fifo);
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path only.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", "-n", "1", "--no-progress", "http://127.0.0.1:9/"])
        .arg("--log-file")
        .arg(&fifo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&fifo);
    let status = status.expect("one Ctrl-C ends the wait for a reader");
    assert!(!status.success(), "{status:?}");
}

/// `-o FIFO` with a reader: the reader gets the whole report. The output check opened the FIFO
/// and closed it at once, which handed the reader its end before anything was written.
#[test]
fn a_report_to_a_fifo_reaches_its_reader_whole() {
    use std::io::Read;
    let fifo = temp("report.fifo");
    let _ = std::fs::remove_file(&fifo);
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path only.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::fs::File::open(reader_path).and_then(|mut f| f.read_to_string(&mut text));
        text
    });
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    // Bounded: had the reader been handed its end early, the report's own open would wait for
    // a reader that never comes.
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args([
            "load",
            "-n",
            "5",
            "-c",
            "1",
            "--no-progress",
            "--json",
            "-o",
        ])
        .arg(&fifo)
        .arg(&url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let finished = child.try_wait().unwrap();
    if finished.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        // Let the reader, if it still waits in its open, see a writer come and go (without
        // waiting, if it is gone).
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    let _ = std::fs::remove_file(&fifo);
    let text = reader.join().unwrap();
    assert!(
        finished.is_some_and(|s| s.success()),
        "{finished:?}: {text:?}"
    );
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["requests"]["succeeded"], 5);
}

/// Against a server that answers one request a connection, pipelined requests turned away are
/// answered on the next connections, not starved: the stream whose request had succeeded wrote
/// first on each new connection, and the first three requests ended on connections 398-400 of
/// 400 (their latency the whole run).
#[test]
fn requests_turned_away_by_a_one_request_server_are_not_starved() {
    let server = httpvs_server::start(httpvs_server::ServeConfig {
        limits: httpvs_server::Limits {
            max_requests_per_conn: Some(1),
            ..httpvs_server::Limits::default()
        },
        ..httpvs_server::ServeConfig::loopback_ephemeral()
    })
    .unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let log = temp("one-request-server");
    let out = httpvs(&[
        &url,
        "-p",
        "h1",
        "-n",
        "200",
        "-c",
        "1",
        "-t",
        "1",
        "-m",
        "4",
        "--log-file",
        log.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows = rows(&log);
    let _ = std::fs::remove_file(&log);
    assert_eq!(rows.len(), 200);
    rows.sort_by_key(|r| r.start);
    // The first four dispatched end on the first few connections (each carries one).
    for row in &rows[..4] {
        assert!(row.connection <= 8, "{row:?}");
    }
}
