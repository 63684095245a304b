//! `httpvs load` as a user runs it: bad input is one line and exit 2, an absent target one
//! line and exit 1, a real run prints the report (text or JSON) and `--fail-on` sets exit 1.

mod support;

use std::process::{Command, Output};
use support::{head_recorder, scratch_dir};

fn httpvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("load")
        .args(args)
        .output()
        .expect("httpvs runs")
}

/// httpvs started with `args`, its stdout and stderr piped (to be signalled, then read).
fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn one_line_error(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr:?}");
    assert!(stderr.starts_with("httpvs: "), "{stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr:?}");
    stderr
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let cases: &[&[&str]] = &[
        &["ftp://127.0.0.1/"],
        &["127.0.0.1:8080"],
        // A /path first: nothing to take it against.
        &["/index.html"],
        &["--rate", "inf", "http://127.0.0.1:1/"],
        &["--rate", "", "http://127.0.0.1:1/"],
        &["http://"],
        &["http://127.0.0.1:99999/"],
        &["http://127.0.0.1:abc/"],
        &["http://127.0.0.1:+80/"],
        &["http://127.0.0.1:1/", "-c", "4294967295"],
        &["http://127.0.0.1:1/", "-p", "h2c", "-m", "4294967295"],
        &["http://127.0.0.1:1/", "-o", "/nonexistent/dir/report.json"],
        &["http://127.0.0.1:1/", "-c", "0"],
        &["http://127.0.0.1:1/", "-m", "0"],
        &["http://127.0.0.1:1/", "-t", "0"],
        &["http://127.0.0.1:1/", "-n", "0"],
        &["http://127.0.0.1:1/", "-c", "many"],
        &["http://127.0.0.1:1/", "-n", "-5"],
        &["http://127.0.0.1:1/", "-c", "-1"],
        &["http://127.0.0.1:1/", "-n", "5", "-z", "1s"],
        &["http://127.0.0.1:1/", "-z", "ten"],
        &["http://127.0.0.1:1/", "-z", "0s"],
        &["http://127.0.0.1:1/", "--warmup", "x"],
        &["http://127.0.0.1:1/", "-p", "h4"],
        &["http://127.0.0.1:1/", "-p", "h2"],
        &["http://127.0.0.1:1/", "-p", "h3"],
        &["https://127.0.0.1:1/", "-p", "h2c"],
        &["http://127.0.0.1:1/", "-X", "GE T"],
        &["http://127.0.0.1:1/", "-H", "no-colon"],
        &["http://127.0.0.1:1/", "-H", ":path: /x"],
        &["http://127.0.0.1:1/", "-H", "Ünï: x"],
        &["http://127.0.0.1:1/", "-H", "bad name: v"],
        &["http://127.0.0.1:1/", "-H", "Host:"],
        // h2 and h3 could not carry it as :authority.
        &["http://127.0.0.1:1/", "-H", "Host: a b"],
        &["http://127.0.0.1:1/", "--data-file", "/no/such/file"],
        &["http://127.0.0.1:1/", "-d", "@/no/such/file"],
        // 0-RTT data can be replayed: only idempotent requests may go as early data.
        &["https://127.0.0.1:1/", "-p", "h3", "--0rtt", "-d", "x"],
        // A connection per request, and a header asking to keep it.
        &[
            "http://127.0.0.1:1/",
            "--no-keepalive",
            "-H",
            "Connection: keep-alive",
        ],
        // Peers' -d: wrk's duration, h2load's file or stdin. Each would be a 2-byte body.
        &["http://127.0.0.1:1/", "-d", "2s"],
        &[
            "http://127.0.0.1:1/",
            "-d",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        ],
        &["http://127.0.0.1:1/", "-d", "-"],
        // A length that disagrees with the body would fail every request the same way.
        &[
            "http://127.0.0.1:1/",
            "-d",
            "abc",
            "-H",
            "Content-Length: 5",
        ],
        &["http://127.0.0.1:1/", "-z", "-1s"],
        &["http://127.0.0.1:1/", "--percentiles", ""],
        &["http://127.0.0.1:1/", "--fail-on", "error-rate>1%%"],
        // A peer's flag, with what to use instead.
        &["http://127.0.0.1:1/", "-T", "5"],
        // A request's Transfer-Encoding must end in chunked, and never comes with a length.
        &[
            "http://127.0.0.1:1/",
            "-d",
            "x",
            "-H",
            "Transfer-Encoding: gzip",
        ],
        &[
            "http://127.0.0.1:1/",
            "-d",
            "x",
            "-H",
            "Transfer-Encoding: chunked",
            "-H",
            "Content-Length: 1",
        ],
        &["http://127.0.0.1:1/", "--fail-on", ""],
        &["http://127.0.0.1:1/", "--rate", "1e20"],
        &[
            "http://127.0.0.1:1/",
            "-d",
            "x",
            "--data-file",
            "/etc/hostname",
        ],
        &["http://127.0.0.1:1/", "--timeout", "soon"],
        &["http://127.0.0.1:1/", "--connect-timeout", "0"],
        &["https://127.0.0.1:1/", "--cacert", "/no/such/ca.pem"],
        // A client certificate needs its key, and both must read as a pair.
        &["https://127.0.0.1:1/", "--cert", "/etc/hostname"],
        &["https://127.0.0.1:1/", "--key", "/etc/hostname"],
        &[
            "https://127.0.0.1:1/",
            "--cert",
            "/etc/hostname",
            "--key",
            "/etc/hostname",
        ],
        &[
            "https://127.0.0.1:1/",
            "--cert",
            "/no/such.pem",
            "--key",
            "/no/such.key",
        ],
        &["http://127.0.0.1:1/", "--rate", "-5"],
        &["http://127.0.0.1:1/", "--rate", "fast"],
        &["http://127.0.0.1:1/", "--rate", "1e-19", "-n", "2"],
        &["http://127.0.0.1:1/", "--cpus", "3-1"],
        &["http://127.0.0.1:1/", "--cpus", "4095"],
        &["http://127.0.0.1:1/", "--fail-on", "p99"],
        &["http://127.0.0.1:1/", "--fail-on", "latency>1ms"],
        &["http://127.0.0.1:1/", "--no-such-flag"],
        &["http://127.0.0.1:1/", "--h1", "-p", "h2c"],
        &["http://127.0.0.1:1/", "-D", "ten"],
        &["127.0.0.1:8080/"],
    ];
    for args in cases {
        let out = httpvs(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        one_line_error(&out);
    }
    // A header in the right form with a wrong name says what is wrong, not "use Name: value".
    for (header, says) in [
        (":path: /x", "pseudo-headers come from the URL"),
        ("Ünï: x", "a header name is ASCII"),
        (": x", "no name before the colon"),
    ] {
        let err = one_line_error(&httpvs(&["http://127.0.0.1:1/", "-H", header]));
        assert!(err.contains(says), "{err}");
    }
    // A negative value is the flag's own error, naming it (it read "unexpected argument '-1'").
    for (flag, names) in [
        ("--window", "--window"),
        ("--connection-window", "--connection-window"),
        ("--percentiles", "--percentiles"),
    ] {
        let out = httpvs(&["http://127.0.0.1:1/", flag, "-1"]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
        let err = one_line_error(&out);
        assert!(
            err.contains(names) && !err.contains("unexpected argument"),
            "{err}"
        );
    }
}

#[test]
fn a_cacert_that_is_not_pem_is_exit_2() {
    let path = std::env::temp_dir().join(format!("httpvs-bad-ca-{}.pem", std::process::id()));
    let with_ca = |url: &str| {
        let out = httpvs(&[url, "--cacert", path.to_str().unwrap(), "-n", "1"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        one_line_error(&out)
    };
    std::fs::write(&path, "not a certificate").unwrap();
    with_ca("https://127.0.0.1:1/");
    // An http:// run never reads it, but a bad file is still bad input (it ran and exited 0);
    // a PEM cut short says which END line is missing (its bytes were a list of numbers).
    with_ca("http://127.0.0.1:1/");
    std::fs::write(&path, "-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap();
    let err = with_ca("http://127.0.0.1:1/");
    let _ = std::fs::remove_file(&path);
    assert!(
        err.contains("no \"-----END CERTIFICATE-----\" line"),
        "{err}"
    );
}

#[test]
fn an_absent_target_is_one_clear_line() {
    let out = httpvs(&["http://127.0.0.1:1/", "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    let line = one_line_error(&out);
    assert_eq!(
        line.trim_end(),
        "httpvs: connection refused: 127.0.0.1:1 — is the server running?"
    );
    let out = httpvs(&["http://no-such-host.invalid/", "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line_error(&out).contains("cannot resolve no-such-host.invalid"));
}

#[test]
fn a_run_prints_the_report_and_fail_on_sets_the_exit_code() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "200", "-c", "2", "-t", "1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Requests:     200 started = 200 succeeded + 0 failed + 0 cut off"),
        "{text}"
    );
    assert!(
        out.stderr.is_empty(),
        "no progress line when stderr is not a terminal"
    );

    let json_path = std::env::temp_dir().join(format!("httpvs-load-{}.json", std::process::id()));
    let out = httpvs(&[
        &url,
        "-n",
        "100",
        "-c",
        "1",
        "-o",
        json_path.to_str().unwrap(),
        "--fail-on",
        "rps<1000000000",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(one_line_error(&out).contains("--fail-on breached: rps<1000000000"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json_path);
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["requests"]["succeeded"], 100);
    assert_eq!(json["thresholds"][0]["breached"], true);
}

/// An untrusted certificate over TCP says what rustls saw, as h3's line does (it used to be the
/// same generic line for a certificate, an ALPN mismatch and a cleartext port).
#[test]
fn a_tls_failure_over_tcp_names_its_cause() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("https://{}/", server.https_addr().unwrap());
    for protocol in ["auto", "h1", "h2"] {
        let out = httpvs(&[&url, "-n", "2", "-c", "1", "-p", protocol]);
        assert_eq!(out.status.code(), Some(1), "{protocol}: {out:?}");
        let line = one_line_error(&out);
        assert!(
            line.contains("failed: invalid peer certificate: UnknownIssuer"),
            "{protocol}: {line}"
        );
    }
}

/// A listener that never answers: TCP connects (the kernel completes it in the backlog), so a
/// connect timeout says which step stalled instead of "no connection".
#[test]
fn a_connect_timeout_after_tcp_connected_names_the_step_that_stalled() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let cases = [
        (
            "https",
            "h1",
            "TCP connected, but the TLS handshake did not finish",
        ),
        (
            "https",
            "auto",
            "TCP connected, but the TLS handshake did not finish",
        ),
        (
            "https",
            "h2",
            "TCP connected, but the TLS handshake did not finish",
        ),
        (
            "http",
            "h2c",
            "connected, but the server's HTTP/2 SETTINGS did not come",
        ),
    ];
    for (scheme, protocol, step) in cases {
        let url = format!("{scheme}://{addr}/");
        let out = httpvs(&[
            &url,
            "-n",
            "1",
            "-c",
            "1",
            "-k",
            "-p",
            protocol,
            "--connect-timeout",
            "300ms",
        ]);
        assert_eq!(out.status.code(), Some(1), "{protocol}: {out:?}");
        let line = one_line_error(&out);
        assert!(
            line.contains("not ready within 300ms"),
            "{protocol}: {line}"
        );
        assert!(line.contains(step), "{protocol}: {line}");
    }
    drop(silent);
}

/// Several URLs (or /paths, from the arguments or `-i FILE`) are sent in turn on every
/// protocol's connections, as h2load cycles its URIs: 100 requests alternating between 100- and
/// 1000-byte bodies receive 55,000 body bytes.
#[test]
fn several_urls_are_sent_in_turn() {
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let base = format!("http://{}/", server.http_addr().unwrap());
    let list = std::env::temp_dir().join(format!("httpvs-urls-{}.txt", std::process::id()));
    std::fs::write(
        &list,
        format!("# two sizes\n\n{base}?size=100\n/?size=1000\n"),
    )
    .unwrap();
    let small = format!("{base}?size=100");
    // One connection each: the turn is per connection (below), so the split is exact.
    let cases: [&[&str]; 3] = [
        &[&small, "/?size=1000", "-p", "h1", "-c", "1"],
        &[&small, "/?size=1000", "-p", "h2c", "-c", "1", "-m", "4"],
        &["-i", list.to_str().unwrap(), "-p", "h1", "-c", "1"],
    ];
    for args in cases {
        let out = httpvs(&[args, &["-n", "100", "-t", "1", "--json", "--no-progress"]].concat());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["requests"]["succeeded"], 100, "{args:?}");
        assert_eq!(json["wire"]["body_received"], 55_000, "{args:?}");
        let more = json["target"]["more_urls"].as_array().unwrap();
        assert_eq!(more.len(), 1, "{args:?}");
        assert!(
            more[0].as_str().unwrap().ends_with("/?size=1000"),
            "{more:?}"
        );
    }
    // A list saved with a byte-order mark reads as without (its first line was refused).
    std::fs::write(&list, format!("\u{feff}{base}?size=100\n")).unwrap();
    let out = httpvs(&[&base, "-i", list.to_str().unwrap(), "-n", "2", "-c", "1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // A query with no path is the root's: it went out as `GET ?size=100`, answered 400.
    let bare = format!("http://{}?size=100", server.http_addr().unwrap());
    for protocol in ["h1", "h2c"] {
        let out = httpvs(&[&bare, "-p", protocol, "-n", "3", "-c", "1", "--json"]);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["wire"]["body_received"], 300, "{protocol}: {json}");
        assert_eq!(json["status_codes"][0]["code"], 200, "{protocol}: {json}");
    }
    let out = httpvs(&[&small, "/?size=1000", "-n", "4", "-c", "1", "--no-progress"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("URLs:         2 in turn: /?size=100, /?size=1000"),
        "{text}"
    );
    let _ = std::fs::remove_file(&list);
    // Another origin, or an unreadable list, is one line and exit 2.
    let other = format!("http://{}/", "127.0.0.2:1");
    for args in [
        vec![base.as_str(), other.as_str()],
        vec![base.as_str(), "-i", "/nonexistent/urls.txt"],
    ] {
        let out = httpvs(&[&args[..], &["-n", "1"]].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        one_line_error(&out);
    }
    // A bad line is named by its number.
    let bad = std::env::temp_dir().join(format!("httpvs-bad-urls-{}.txt", std::process::id()));
    std::fs::write(&bad, "/?size=1\n# a comment\nnot a url\n").unwrap();
    let out = httpvs(&[base.as_str(), "-i", bad.to_str().unwrap(), "-n", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        one_line_error(&out).contains(":3: invalid URL \"not a url\""),
        "{out:?}"
    );
    // So is a line that parses but cannot be loaded: a scheme, another origin.
    for (line, why) in [
        ("ftp://x/", "scheme ftp is not http or https"),
        ("http://127.0.0.2:1/", "it is not on"),
    ] {
        std::fs::write(&bad, format!("/?size=1\n{line}\n")).unwrap();
        let out = httpvs(&[base.as_str(), "-i", bad.to_str().unwrap(), "-n", "1"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = one_line_error(&out);
        assert!(
            err.contains(":2: invalid URL") && err.contains(why),
            "{err}"
        );
    }
    let _ = std::fs::remove_file(&bad);
}

/// The open model's uncorrected latency runs from the request's dispatch, its connection's
/// set-up included, as the closed model's latency does: with a new TLS connection per request,
/// no request's uncorrected latency is shorter than the quickest handshake. (It used to start
/// after the handshake, so its gap to the corrected figure was set-up, not omission.)
#[test]
fn open_model_uncorrected_latency_includes_the_connection_set_up() {
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let url = format!("https://{}/", server.https_addr().unwrap());
    let out = httpvs(&[
        &url,
        "-k",
        "-p",
        "h1",
        "--no-keepalive",
        "--rate",
        "200",
        "-n",
        "40",
        "-c",
        "4",
        "-t",
        "1",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let uncorrected = json["latency_uncorrected"]["min_us"].as_u64().unwrap();
    let handshake = json["phases"]["handshake"]["min_us"].as_u64().unwrap();
    let connect = json["phases"]["tcp_connect"]["min_us"].as_u64().unwrap();
    assert!(
        uncorrected >= handshake + connect.min(handshake),
        "uncorrected min {uncorrected}µs, handshake min {handshake}µs, connect min {connect}µs"
    );
}

/// An open-model `-z` run against a server that dies: each due send tries to connect and fails
/// (as Fortio and wrk2 count it), instead of waiting in a connect backoff that turned most of
/// the outage into unsent sends outside the error rate.
#[test]
fn open_model_outage_counts_as_errors_not_unsent() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let live = format!("http://{}/", server.http_addr().unwrap());
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        drop(server);
    });
    let out = httpvs(&[
        &live,
        "--rate",
        "500",
        "-z",
        "2s",
        "-c",
        "4",
        "-t",
        "1",
        "--json",
        "--no-progress",
    ]);
    stopper.join().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed = json["requests"]["failed"].as_u64().unwrap();
    let unsent = json["schedule"]["unsent"].as_u64().unwrap_or(0);
    assert!(
        failed > 300,
        "failed {failed}, unsent {unsent}: {}",
        json["requests"]
    );
    assert!(unsent < failed / 4, "failed {failed}, unsent {unsent}");
}

/// The open model opens every connection before the clock: the per-second series' count of
/// connections opened so far holds them all from its first point (it counted each at its first
/// request: 11, 21, ... at 10 req/s).
#[test]
fn open_model_series_counts_preopened_connections_from_the_start() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "--rate",
        "10",
        "-z",
        "2s",
        "-c",
        "50",
        "-t",
        "1",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let series = json["series"].as_array().unwrap();
    assert!(!series.is_empty());
    for point in series {
        assert_eq!(point["connections_opened"], 50, "{point}");
    }
    assert_eq!(json["connections"]["opened"], 50);
}

/// The per-second series splits on the run's seconds, not when a worker's ticker runs: at 4
/// req/s for 2 s the request sent at 1.000 s ends after it and counts in the second second
/// (the ticker, a millisecond late, read 5 then 3).
#[test]
fn per_second_series_splits_on_the_runs_seconds() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "--rate",
        "4",
        "-z",
        "2s",
        "-c",
        "2",
        "-t",
        "1",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rates: Vec<f64> = json["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requests_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [4.0, 4.0], "{}", json["series"]);
}

/// The series holds every completed request, however the run ends: each point's rate over the
/// stretch it covers sums to the report's succeeded + failed (a run under 100 ms had no point,
/// and a last stretch under 100 ms was dropped).
#[test]
fn the_series_holds_every_completed_request() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?delay=10ms", server.http_addr().unwrap());
    for shape in [
        &["-n", "100", "-c", "2", "-t", "1"][..],
        &["--rate", "100", "-z", "1050ms", "-t", "1"][..],
    ] {
        let mut args = vec![url.as_str(), "--json", "--no-progress"];
        args.extend_from_slice(shape);
        let out = httpvs(&args);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut before = 0.0;
        let mut held = 0.0;
        for p in json["series"].as_array().unwrap() {
            let t = p["t_s"].as_f64().unwrap();
            held += p["requests_per_s"].as_f64().unwrap() * (t - before);
            before = t;
        }
        let r = &json["requests"];
        let completed = r["succeeded"].as_u64().unwrap() + r["failed"].as_u64().unwrap();
        assert!(
            (held - completed as f64).abs() < 1e-6,
            "{shape:?}: series holds {held}, completed {completed}: {}",
            json["series"]
        );
    }
}

/// An open-model run in which nothing succeeded still says how many sends never went out
/// (the line was printed only beside latency figures).
#[test]
fn unsent_sends_are_said_when_nothing_succeeded() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?delay=5s", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "--rate",
        "50",
        "-z",
        "1s",
        "-c",
        "2",
        "-t",
        "1",
        "--no-progress",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("none: no request succeeded"), "{text}");
    assert!(
        text.contains("sends due by the end never went out"),
        "{text}"
    );
}

/// `--percentiles` adds to the listed percentiles (as Fortio's -p), and a `--fail-on` rule's
/// percentile is listed and judged itself (p98 was judged on the p99 above it).
#[test]
fn extra_percentiles_are_listed_and_judged() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "-n",
        "200",
        "-c",
        "2",
        "-t",
        "1",
        "--percentiles",
        "33,p99.999",
        "--fail-on",
        "p98>10s",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<f64> = json["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["p"].as_f64().unwrap())
        .collect();
    assert_eq!(
        listed,
        [33.0, 50.0, 75.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 99.999]
    );
    let p98_us = json["latency"]["percentiles"][5]["us"].as_f64().unwrap();
    let actual_ms = json["thresholds"][0]["actual"].as_f64().unwrap();
    assert!(
        (actual_ms * 1000.0 - p98_us).abs() < 1.0,
        "{actual_ms} ms vs p98 {p98_us} µs"
    );
    for bad in ["0", "101", "x", "pp50", "1e-300"] {
        let out = httpvs(&[&url, "-n", "1", "--percentiles", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        one_line_error(&out);
    }
}

/// Credentials as curl (user:password@ in the URL, %-escapes decoded) and hey/oha (-a) take
/// them become `Authorization: Basic`, and the URL's user part stays out of Host.
#[test]
fn credentials_become_basic_authorization() {
    for how in ["url", "flag"] {
        let (addr, heads) = head_recorder();
        let out = match how {
            "url" => httpvs(&[
                &format!("http://user:p%40ss@{addr}/"),
                "-n",
                "1",
                "-c",
                "1",
                "-p",
                "h1",
            ]),
            _ => httpvs(&[
                &format!("http://{addr}/"),
                "-a",
                "user:p@ss",
                "-n",
                "1",
                "-c",
                "1",
                "-p",
                "h1",
            ]),
        };
        assert_eq!(out.status.code(), Some(0), "{how}: {out:?}");
        let head = heads
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let lower = head.to_ascii_lowercase();
        // base64("user:p@ss")
        assert!(
            lower.contains("authorization: basic dxnlcjpwqhnz"),
            "{how}: {head}"
        );
        assert!(
            lower.contains(&format!("host: {addr}\r\n")),
            "{how}: {head}"
        );
    }
    let out = httpvs(&["http://u:p@127.0.0.1:1/", "-a", "x:y", "-n", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    one_line_error(&out);
    let out = httpvs(&["http://127.0.0.1:1/", "-a", "nocolon", "-n", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    one_line_error(&out);
}

/// http:// to a TLS port: TCP connects (the probe's only check), and every request then fails
/// as the server answers with a TLS alert or hangs up; the report says what that likely means.
#[test]
fn http_to_a_tls_port_is_explained() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.https_addr().unwrap());
    let out = httpvs(&[&url, "-n", "10", "-c", "1", "-p", "h1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 succeeded + 10 failed"), "{text}");
    assert!(
        text.contains("http:// to a TLS port? use https://"),
        "{text}"
    );
    // Nothing was measured: exit 1 with one line, as when the first connection fails (-p h2c).
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let line = one_line_error(&out);
    assert!(line.contains("http:// to a TLS port?"), "{line}");
    // A no-keep-alive h1 run pipelines nothing: its Shape line does not say it does.
    let plain = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &plain,
        "-n",
        "6",
        "-c",
        "2",
        "-m",
        "3",
        "--no-keepalive",
        "-t",
        "1",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 connections × 3 streams, 1 thread, 6 requests, no keep-alive: up to 6 one-request connections open at once"),
        "{text}"
    );
}

/// A client certificate that cannot be read says why, as serve's --cert does (it read only
/// "cannot read --cert FILE").
#[test]
fn an_unreadable_client_certificate_says_why() {
    let out = httpvs(&[
        "https://127.0.0.1:1/",
        "--cert",
        "/no/such/client.pem",
        "--key",
        "/no/such/client.key",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let line = one_line_error(&out);
    assert!(
        line.contains("cannot read --cert /no/such/client.pem: No such file or directory"),
        "{line}"
    );
}

/// A server whose heads are HTTP but whose chunked bodies are broken spoke HTTP: the note that
/// guesses a TLS port or a non-HTTP server (it came when every request failed) stays away.
#[test]
fn broken_bodies_after_real_heads_are_not_taken_for_another_protocol() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten().take(20) {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        }
    });
    let url = format!("http://{addr}/");
    let out = httpvs(&[&url, "-n", "3", "-c", "1", "-t", "1", "-p", "h1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 succeeded + 3 failed"), "{text}");
    assert!(!text.contains("TLS port"), "{text}");
}

/// HTTP/1.1 compresses no header: decoded is what came on the wire, also when a response that
/// arrived just after the end is cut off (its head was on the wire; the savings read -0.01%).
#[test]
fn http1_header_savings_are_zero_with_a_response_cut_off() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &url, "--rate", "1000000", "-z", "300ms", "-c", "1", "-t", "1", "-p", "h1", "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let wire = &json["wire"];
    // Usually one is cut off; none when the end found the stream between two requests (its
    // next send waiting on the pacing timer's next turn).
    assert!(
        json["requests"]["cut_off"].as_u64() <= Some(1),
        "{}",
        json["requests"]
    );
    assert_eq!(
        wire["header_decoded_received"], wire["header_received"],
        "{wire}"
    );
    assert!(
        wire["header_savings"].is_null() || wire["header_savings"] == 0.0,
        "{wire}"
    );
}

/// `user@` is a user with an empty password (as curl takes it), a bad %-escape is one line
/// that leaves the password out, and an input file is read only so far (not /dev/zero whole).
#[test]
fn odd_credentials_and_endless_url_lists() {
    let (addr, heads) = head_recorder();
    let out = httpvs(&[
        &format!("http://user@{addr}/"),
        "-n",
        "1",
        "-c",
        "1",
        "-p",
        "h1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let head = heads
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    // base64("user:")
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: basic dxnlcjo="),
        "{head}"
    );
    for url in [
        "http://u:secret%+1@127.0.0.1:1/",
        "http://u:secret%@127.0.0.1:1/",
    ] {
        let out = httpvs(&[url, "-n", "1"]);
        assert_eq!(out.status.code(), Some(2), "{url}: {out:?}");
        let line = one_line_error(&out);
        assert!(!line.contains("secret"), "{line}");
    }
    if std::path::Path::new("/dev/zero").exists() {
        let out = httpvs(&["-i", "/dev/zero", "-n", "1"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(one_line_error(&out).contains("longer than 64 MiB"));
    }
}

/// HTTP/1.1 has no streams: its Shape line says how deep it pipelines.
#[test]
fn the_h1_shape_says_pipelined_not_streams() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "40", "-c", "2", "-m", "4", "-t", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("closed model: 2 connections, each pipelined 4 deep, 1 thread"),
        "{text}"
    );
}

/// A latency rule over a run where nothing succeeded has no data: it is broken, not "0µs ok"
/// (a CI gate went green on a total outage).
#[test]
fn a_latency_rule_with_no_response_to_judge_is_breached() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?delay=2s", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "-n",
        "2",
        "-c",
        "1",
        "--timeout",
        "100ms",
        "--fail-on",
        "p99>1s",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 succeeded + 2 failed"), "{text}");
    assert!(
        text.contains("p99>1s                   no data (no request to judge it by)  BREACHED"),
        "{text}"
    );
}

#[test]
fn probe_connections_are_reported_apart_from_the_runs_own() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let probes = |args: &[&str]| -> (u64, u64) {
        let out = httpvs(&[args, &["-n", "40", "-c", "2", "-t", "1", "--json"]].concat());
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &json["connections"];
        (c["opened"].as_u64().unwrap(), c["probes"].as_u64().unwrap())
    };
    let http = format!("http://{}/", server.http_addr().unwrap());
    let https = format!("https://{}/", server.https_addr().unwrap());
    // The engine's own check of the target; over TLS, -p auto adds an ALPN handshake.
    assert_eq!(probes(&["-p", "h1", &http]), (2, 1));
    assert_eq!(probes(&["-k", &https]), (2, 2));
    let text = httpvs(&["-p", "h1", "-n", "10", "-c", "1", &http]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Connections  opened 1 (+1 probe before the run),"),
        "{text}"
    );
    // Over TLS every probe completes a handshake, so the server counts opened + probes.
    let totals = server.shutdown(std::time::Duration::from_secs(1));
    assert_eq!(totals.connections.h2, 2 + 2, "{:?}", totals.connections);
}

/// Ctrl-C (SIGINT), SIGTERM or SIGHUP (a closed terminal; it used to kill the run with no
/// report) mid-run: the report still comes, spans what ran, and says it was interrupted. So it
/// does when the stop comes twice at once, as `timeout` sends it (to the command, then to its
/// process group): that run used to die without a report, 7 in 20.
#[test]
fn an_interrupted_run_reports_what_ran_and_says_so() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    for signals in [
        &[libc::SIGINT][..],
        &[libc::SIGTERM],
        &[libc::SIGTERM, libc::SIGTERM],
        &[libc::SIGINT, libc::SIGINT],
        &[libc::SIGHUP],
    ] {
        let child = spawn(&[
            "load", &url, "-z", "20s", "-c", "2", "-t", "1", "--rate", "200", "--json",
        ]);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        for &signal in signals {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        }
        let out = child.wait_with_output().unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(json["interrupted"], true, "{json}");
        assert_eq!(out.status.code(), Some(130), "a partial run does not pass");
        let secs = json["duration_s"].as_f64().unwrap();
        assert!(secs < 10.0, "spans what ran, not the 20 s asked: {secs}");
        assert_eq!(json["requests"]["identity_holds"], true);
    }
}

/// A stop that takes the server down with it (a script's Ctrl-C reaches both; here SIGTERM to
/// the run, then SIGKILL to its server): the workers looked at the stop flag every 100 ms and
/// went on starting requests meanwhile, which the dead server refused, about 2,700 of them in a
/// run like this one, and the responses in flight failed. The signal now wakes the workers at
/// once: the requests in flight are cut off, and nothing fails.
#[test]
fn a_stop_that_takes_the_server_down_with_it_fails_nothing() {
    let (mut server, _stdout, banner) =
        support::spawn_serve(&["--https", "off", "--h3", "off", "--threads", "1"]);
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("serve names its listener")
        .to_string();
    let child = spawn(&[
        "load",
        &url,
        "-n",
        "100000000",
        "-c",
        "4",
        "-t",
        "1",
        "--json",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: signalling our own child processes.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    // The server dies moments later, as in a script: time for the run's thread to be scheduled
    // on a loaded machine, well inside the 100 ms the workers took to look.
    std::thread::sleep(std::time::Duration::from_millis(30));
    let _ = server.kill();
    let _ = server.wait();
    let out = child.wait_with_output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(json["interrupted"], true, "{json}");
    assert_eq!(json["requests"]["identity_holds"], true);
    assert_eq!(json["requests"]["failed"], 0, "{}", json["errors"]);
}

/// Ctrl-C in the warm-up: nothing was measured, and the report says so; the warm-up's
/// requests in flight did not "outlive it" (they read so, with a duration of 1e-9 s). In the
/// open model no schedule line is left over ("0 of 0 sends were late", percentiles of nothing).
#[test]
fn an_interrupt_in_the_warmup_says_nothing_was_measured() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?delay=5s", server.http_addr().unwrap());
    for model in [&[][..], &["--rate", "50"]] {
        let base = ["load", &url, "-c", "2", "--warmup", "20s", "-z", "1s"];
        let child = spawn(&[&base[..], model].concat());
        // Well inside the 20 s warm-up, and past the start (the probe) on a loaded machine.
        std::thread::sleep(std::time::Duration::from_millis(3000));
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(130), "{text}");
        assert!(
            text.contains("Duration:     0.00s (interrupted in the warm-up: nothing was measured)"),
            "{text}"
        );
        assert!(
            text.contains("From warm-up: 2 requests still in flight when it was interrupted"),
            "{text}"
        );
        assert!(!text.contains("sends were late"), "{text}");
    }
}

/// Ctrl-C while the first connection is still being made (a TLS port that accepts and never
/// answers) ends at once with 130 and one line, not after the connect timeout.
#[test]
fn an_interrupt_while_checking_the_target_ends_at_once() {
    // The kernel completes the TCP handshakes; nobody ever reads or answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/", silent.local_addr().unwrap());
    let child = spawn(&["load", &url, "-k", "-n", "5", "--connect-timeout", "60s"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted before the run started"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    drop(silent);
}

/// `-o -` is stdout, as `-i -` is stdin, and `--log-file -` puts the rows there when -o takes
/// the report; an output naming one of the run's inputs is refused before it could empty it.
#[test]
fn dash_is_stdout_and_inputs_are_never_outputs() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "2", "-c", "1", "-o", "-"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Requests:"));

    let dir = std::env::temp_dir().join(format!("httpvs-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.txt");
    let out = httpvs(&[
        &url,
        "-n",
        "2",
        "-c",
        "1",
        "-o",
        report.to_str().unwrap(),
        "--log-file",
        "-",
    ]);
    assert!(out.status.success(), "{out:?}");
    let rows = String::from_utf8_lossy(&out.stdout);
    assert_eq!(rows.lines().count(), 2, "{rows}");
    assert!(
        rows.lines()
            .all(|row| row.split('\t').nth(1) == Some("200")),
        "{rows}"
    );

    let urls = dir.join("urls.txt");
    std::fs::write(&urls, format!("{url}\n")).unwrap();
    let body = dir.join("body.txt");
    std::fs::write(&body, "x").unwrap();
    let (urls, body) = (urls.to_str().unwrap(), body.to_str().unwrap());
    for (args, words) in [
        (vec!["-i", urls, "-n", "1", "-o", urls], "-o"),
        (
            vec![&url, "-n", "1", "--data-file", body, "--log-file", body],
            "--log-file",
        ),
    ] {
        let out = httpvs(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            one_line_error(&out).contains(&format!("{words} ")),
            "{out:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(urls).unwrap(), format!("{url}\n"));
    assert_eq!(std::fs::read_to_string(body).unwrap(), "x");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--cacert` that is not a file says what it is instead; a pipe (`<(cmd)`, here a device)
/// says to save it to a file, since every client set-up reads it again.
#[test]
fn a_cacert_that_is_no_file_says_what_it_is() {
    for (path, words) in [
        ("/nonexistent.pem", "no such file"),
        ("/tmp", "a directory, not a PEM file"),
        ("/dev/null", "not a regular file"),
        (
            "/dev/null",
            "which a pipe or <(cmd) cannot be: save it to a file",
        ),
    ] {
        let out = httpvs(&["https://127.0.0.1:1/", "-n", "1", "--cacert", path]);
        assert_eq!(out.status.code(), Some(2), "{path}");
        let line = one_line_error(&out);
        assert!(
            line.contains(&format!("--cacert {path}: {words}"))
                || (line.contains(&format!("--cacert {path}: ")) && line.contains(words)),
            "{line}"
        );
    }
}

/// A run that fails before its report leaves an earlier file at -o as it was.
#[test]
fn a_failed_run_leaves_the_output_file_alone() {
    let path = std::env::temp_dir().join(format!("httpvs-keep-{}.json", std::process::id()));
    std::fs::write(&path, "earlier report").unwrap();
    let out = httpvs(&[
        "http://127.0.0.1:1/",
        "-n",
        "5",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "earlier report");
    let _ = std::fs::remove_file(&path);
}

/// "Succeeded" is a complete response of any status, so the Requests line says how many were
/// not 2xx; a run where nothing succeeded prints no table of zeros.
#[test]
fn the_report_says_what_succeeded_means() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?status=503", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "20", "-c", "2", "-t", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("20 succeeded (20 of them not 2xx)"), "{text}");

    let url = format!("http://{}/?delay=3s", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "2", "-c", "2", "-t", "1", "--timeout", "200ms"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 succeeded + 2 failed"), "{text}");
    assert!(
        text.contains("Latency      none: no request succeeded"),
        "{text}"
    );
    assert!(!text.contains("p99.9"), "{text}");
    // Throughput and --fail-on rps count what succeeded, not failures.
    assert!(
        text.contains("Throughput:   0.0 req/s succeeded ("),
        "{text}"
    );
    let args = [&url, "-n", "2", "-c", "2", "-t", "1", "--timeout", "200ms"];
    let out = httpvs(&[&args[..], &["--fail-on", "rps<1"]].concat());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// `-c` beyond the open-file limit (after raising the soft limit to the hard one) is one line
/// and exit 2, before any connection: not hundreds of connects failing as `io`.
#[test]
fn connections_beyond_the_open_file_limit_are_refused_up_front() {
    for (flags, words) in [
        ("-c 1000 -t 1", "-c 1000 needs about 1069 open files"),
        // Without keep-alive each of a connection's -m requests opens a connection of its own.
        (
            "-c 150 -m 4 --no-keepalive -t 1",
            "-c 150 x -m 4 with --no-keepalive needs about 669 open files",
        ),
        // Each worker holds 5 files: 40 workers could not all start, and the others
        // ran the whole load, whose report was then lost to that error.
        (
            "-c 60 -t 40",
            "-c 60 on 40 threads needs about 324 open files, and this process may open 256 \
             (ulimit -n): raise the limit or lower -c or -t",
        ),
    ] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 256 && exec {} load http://127.0.0.1:1/ {flags}",
                env!("CARGO_BIN_EXE_httpvs")
            ))
            .output()
            .expect("sh runs");
        assert_eq!(out.status.code(), Some(2), "{flags}");
        let line = one_line_error(&out);
        assert!(line.contains(words), "{line}");
    }
}

/// `-d` and `--data-file` mean POST unless `-X` names a method, as with curl and h2load; the
/// report's Shape line names the method and the body.
#[test]
fn a_body_means_post_unless_a_method_is_named() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/echo", server.http_addr().unwrap());
    for (extra, method) in [(&[][..], "POST"), (&["-X", "PUT"][..], "PUT")] {
        let mut args = vec![url.as_str(), "-n", "2", "-c", "1", "-d", "hello", "--json"];
        args.extend_from_slice(extra);
        let out = httpvs(&args);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(report["shape"]["method"], method);
        assert_eq!(report["shape"]["request_body_bytes"], 5);
    }
    let out = httpvs(&[&url, "-n", "2", "-c", "1", "-d", "hello"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 requests, POST with a 5B body"), "{text}");
    // curl's -d @FILE sends the file; --data gives a body -d would take for wrk's duration.
    let file = std::env::temp_dir().join(format!("httpvs-at-body-{}.json", std::process::id()));
    std::fs::write(&file, "{\"a\":1}").expect("write");
    let at_file = format!("@{}", file.display());
    for (flag, body, bytes) in [("-d", at_file.as_str(), 7), ("--data", "2s", 2)] {
        let out = httpvs(&[&url, "-n", "2", "-c", "1", flag, body, "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            report["shape"]["request_body_bytes"], bytes,
            "{flag} {body}"
        );
        assert_eq!(report["wire"]["body_received"], 2 * bytes, "{flag} {body}");
    }
    let _ = std::fs::remove_file(&file);
}

/// `-H "Transfer-Encoding: chunked"` frames the HTTP/1.1 body in chunks (it used to go out bare,
/// and every server answered 400 and closed); h2c leaves the header out, as HTTP/2 has none.
#[test]
fn a_chunked_transfer_encoding_frames_the_body() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/echo", server.http_addr().unwrap());
    for protocol in ["h1", "h2c"] {
        let out = httpvs(&[
            &url,
            "-p",
            protocol,
            "-n",
            "4",
            "-c",
            "1",
            "-d",
            "hello",
            "-H",
            "Transfer-Encoding: chunked",
            "--json",
        ]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(report["requests"]["succeeded"], 4, "{protocol}: {report}");
        assert_eq!(
            report["status_codes"],
            serde_json::json!([{"code": 200, "count": 4}]),
            "{protocol}"
        );
        // The echo answers with the body it got: the chunk framing was taken off.
        assert_eq!(report["wire"]["body_received"], 20, "{protocol}");
    }
}

/// h2load's and oha's spellings of the same flags work: --h1, -D, --warm-up-time,
/// --disable-keepalive.
#[test]
fn h2load_and_oha_spellings_work() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "--h1",
        "-D",
        "1",
        "--warm-up-time",
        "200ms",
        "-c",
        "1",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["protocol"]["requested"], "h1");
    assert_eq!(report["shape"]["duration_s"], 1.0);
    assert_eq!(report["shape"]["warmup_s"], 0.2);
    let out = httpvs(&[&url, "--disable-keepalive", "-n", "3", "-c", "1", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["shape"]["keepalive"], false);
    assert_eq!(report["connections"]["opened"], 3);
}

/// Each connection goes round the URLs, as h2load's clients do: with three connections and
/// three URLs each connection had one URL only (the turn was per worker thread).
#[test]
fn each_connection_goes_round_the_urls() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let base = format!("http://{}/", server.http_addr().unwrap());
    let log = std::env::temp_dir().join(format!("httpvs-turns-{}.tsv", std::process::id()));
    let log_path = log.to_str().unwrap();
    let out = httpvs(&[
        &base,
        "/a",
        "/b",
        "-c",
        "3",
        "-t",
        "1",
        "-n",
        "90",
        "--log-file",
        log_path,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let rows = std::fs::read_to_string(&log).unwrap();
    let mut by_connection: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    for row in rows.lines() {
        let f: Vec<&str> = row.split('\t').collect();
        let (start, conn, url) = (
            f[0].parse().unwrap(),
            f[4].parse().unwrap(),
            f[5].parse().unwrap(),
        );
        by_connection.entry(conn).or_default().push((start, url));
    }
    assert_eq!(by_connection.len(), 3, "{rows}");
    for (conn, mut sent) in by_connection {
        sent.sort();
        let urls: Vec<u64> = sent.iter().map(|s| s.1).collect();
        let expected: Vec<u64> = (0..urls.len() as u64).map(|i| i % 3).collect();
        assert_eq!(urls, expected, "connection {conn}");
    }
    let _ = std::fs::remove_file(&log);
}

/// `-n` below `-c` (h2load refuses it; the default -c 10 with -n 5 is common): the run goes on,
/// and the Shape line says that only -n of the connections ran.
#[test]
fn fewer_requests_than_connections_is_said() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "5"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("-n 5 is below -c x -m (10): only 5 of them ran"),
        "{text}"
    );
    assert!(text.contains("opened 5"), "{text}");
}

/// The open model says when it could not send at the rate asked (every stream busy).
#[test]
fn an_open_model_short_of_its_rate_says_so() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?delay=50ms", server.http_addr().unwrap());
    let out = httpvs(&[
        &url,
        "--rate",
        "200",
        "-z",
        "1s",
        "-c",
        "2",
        "-t",
        "1",
        "--fail-on",
        "unsent>0",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: asked for 200.0 req/s, sent "),
        "{text}"
    );
    // About 40 of the 200 due went out: the rest are named, and the rule trips.
    assert!(
        text.contains("sends due by the end never went out"),
        "{text}"
    );
    assert!(text.contains("unsent>0"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    // A -n run sends everything, late: the note still says the rate fell short.
    let out = httpvs(&[&url, "--rate", "200", "-n", "20", "-c", "2", "-t", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: asked for 200.0 req/s, sent "),
        "{text}"
    );
    // One stall early in a -n run that then catches up: every send went out by the schedule's
    // end, so no note (the rate was judged over the schedule plus the stall's lag, read 364/s).
    let list = std::env::temp_dir().join(format!("httpvs-stall-{}.txt", std::process::id()));
    let mut lines = vec!["/?delay=300ms".to_string()];
    lines.extend((1..400).map(|_| "/".to_string()));
    std::fs::write(&list, lines.join("\n")).unwrap();
    let base = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[
        &base,
        "-i",
        list.to_str().unwrap(),
        "--rate",
        "500",
        "-n",
        "400",
        "-c",
        "1",
        "-t",
        "1",
        "--json",
    ]);
    let _ = std::fs::remove_file(&list);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let last_send = json["schedule"]["last_send_s"].as_f64().unwrap();
    let lag_max_s = json["schedule"]["lag"]["max_us"].as_f64().unwrap() / 1e6;
    assert!(lag_max_s > 0.25, "the stall held sends back: {lag_max_s}s");
    // The 400th send is due at 0.798 s; how soon after it went depends on the machine.
    assert!(last_send >= 0.79, "the last send is reported: {last_send}s");
    // A -n run whose sends all went on time has no shortfall to speak of, however short its
    // schedule: one request at 1,000/s read "sent 946 req/s" from its few µs of lag.
    // (A busy machine can make that one send late by a few ms, and then the note is due.)
    let out = httpvs(&[&base, "--rate", "1000", "-n", "1", "-c", "1", "-t", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" of 1 sends were late"), "{text}");
    if text.contains("0 of 1 sends were late") {
        assert!(!text.contains("note: asked for"), "{text}");
    }
    // A -z run whose measured part has no send due kept its schedule: nothing to blame on the
    // server (it read "asked for 1.0 req/s, sent 0.0 req/s: every one of the streams was
    // waiting on the server").
    let out = httpvs(&[
        &base, "--rate", "1", "--warmup", "200ms", "-z", "500ms", "-c", "1", "-t", "1",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 started"), "{text}");
    assert!(!text.contains("note: asked for"), "{text}");
}

/// h2 and h3 count the decoded size of every response head that came, as the encoded size
/// counts its bytes: exact for `GET /` (81 bytes a head on both), and the heads of requests
/// that failed after their head came count too (they counted nothing, and the savings read
/// nothing with every request failed).
#[test]
fn decoded_header_bytes_count_every_head_that_came() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let h2c = format!("http://{}/", server.http_addr().unwrap());
    let h3 = format!("https://127.0.0.1:{}/", server.h3_addr().unwrap().port());
    for (url, proto) in [(&h2c, "h2c"), (&h3, "h3")] {
        let out = httpvs(&[
            url,
            "-p",
            proto,
            "-k",
            "-n",
            "200",
            "-c",
            "2",
            "--json",
            "--no-progress",
        ]);
        assert_eq!(out.status.code(), Some(0), "{proto}: {out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["wire"]["header_decoded_received"], 200 * 81, "{proto}");
    }
    // 16 GiB takes seconds even on a fast loopback, so the timeout always falls mid-body and
    // always after the head (256 MiB once came whole inside 100 ms). A 64 KiB stream window
    // keeps what the server has sent of a cancelled body small, so the next head, which
    // follows it on the connection, is not held behind it on a busy machine.
    let huge = format!("{h2c}?size=16g");
    let out = httpvs(&[
        &huge,
        "-p",
        "h2c",
        "-n",
        "3",
        "-c",
        "1",
        "--window",
        "64k",
        "--timeout",
        "500ms",
        "--json",
        "--no-progress",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["requests"]["failed"], 3, "{}", json["requests"]);
    let wire = &json["wire"];
    // content-length: 17179869184 makes each head 90 decoded bytes.
    assert_eq!(wire["header_decoded_received"], 3 * 90, "{wire}");
    assert!(
        wire["header_savings"].as_f64().is_some_and(|s| s > 0.5),
        "{wire}"
    );
}

/// A response cut off in its body still brought its head, and a 1xx head before a close came
/// too: their bytes count as header bytes received (they read 0, though the README says every
/// head that came counts).
#[test]
fn a_truncated_response_counts_its_head() {
    use std::io::{Read, Write};
    const HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    const INTERIM: &str = "HTTP/1.1 100 Continue\r\n\r\n";
    for (reply, head_bytes) in [
        (format!("{HEAD}{}", "x".repeat(500)), HEAD.len()),
        (INTERIM.to_string(), INTERIM.len()),
    ] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            // The probe connection first, then one per request (each ends cut off).
            for conn in listener.incoming().take(4) {
                let Ok(mut conn) = conn else { return };
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        let url = format!("http://{addr}/");
        let out = httpvs(&[&url, "-n", "3", "-c", "1", "-t", "1", "--json"]);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(json["requests"]["failed"], 3, "{json}");
        assert_eq!(
            json["wire"]["header_received"].as_u64(),
            Some(3 * head_bytes as u64),
            "{}",
            json["wire"]
        );
    }
}

/// Warm-up requests that finish in the measured part, and requests cut off at its end, move
/// bytes the per-request figures do not divide by: the report says how high they may read.
#[test]
fn per_request_bytes_say_when_other_requests_moved_bytes_too() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!(
        "http://{}/?delay=400ms&size=1k",
        server.http_addr().unwrap()
    );
    let out = httpvs(&[
        &url,
        "-p",
        "h2c",
        "-c",
        "1",
        "-m",
        "20",
        "--warmup",
        "200ms",
        "-z",
        "1s",
        "-t",
        "1",
        "--no-progress",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: the per-request bytes divide by the"),
        "{text}"
    );
}

/// An open-model run whose server freezes for its last stretch: the sends due then never go
/// out, so no latency figure holds their wait, and a latency rule that passes says so.
#[test]
fn a_passing_latency_rule_names_the_sends_that_never_went_out() {
    let (mut serve, _stdout, banner) = support::spawn_serve(&[
        "--http",
        "127.0.0.1:0",
        "--https",
        "off",
        "--h3",
        "off",
        "--threads",
        "1",
    ]);
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the http line")
        .to_string();
    let pid = serve.id() as i32;
    let freezer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1200));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
    });
    let out = httpvs(&[
        &url,
        "-p",
        "h2c",
        "--rate",
        "200",
        "-c",
        "2",
        "-m",
        "10",
        "-z",
        "2500ms",
        "-t",
        "1",
        "--fail-on",
        "p99>1s",
        "--no-progress",
    ]);
    freezer.join().unwrap();
    // SAFETY: as above; the server goes on only to be killed.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let _ = serve.kill();
    let _ = serve.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    let rule = text
        .lines()
        .find(|l| l.trim_start().starts_with("p99>1s"))
        .unwrap_or_else(|| panic!("no rule line:\n{text}"));
    assert!(rule.contains(" ok (but "), "{rule}");
    assert!(rule.contains("--fail-on unsent>0 judges them"), "{rule}");
}

/// `--version` names the binary whichever subcommand it follows (`httpvs load --version` said
/// `httpvs-load 0.1.0`).
#[test]
fn version_names_the_binary() {
    let want = format!("httpvs {}\n", env!("CARGO_PKG_VERSION"));
    for args in [
        &["--version"][..],
        &["load", "--version"],
        &["compare", "-V"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
            .args(args)
            .output()
            .expect("httpvs runs");
        assert!(out.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{args:?}");
    }
}

/// An open model whose connections never open: the shortfall note says so, rather than telling
/// the user to raise `-c` (it read "every one of the -c x -m streams was waiting on the server
/// (raise -c or -m if it can take more)" beside 20 connections that failed to open).
#[test]
fn an_open_model_short_of_connections_says_they_failed_to_open() {
    use socket2::{Domain, Socket, Type};
    // A backlog of 0 that nothing accepts: the kernel drops the SYNs past the first.
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let url = format!("http://{addr}/");
    let out = httpvs(&[
        &url,
        "--rate",
        "20",
        "-c",
        "4",
        "-z",
        "2s",
        "--timeout",
        "1s",
        "--connect-timeout",
        "300ms",
        "-t",
        "1",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("waiting on connections that did not open ("),
        "{text}"
    );
    assert!(!text.contains("raise -c or -m"), "{text}");
    drop(listener);
}

/// `-o`, `--log-file` and `--hgrm` refuse the file `-d @FILE` reads, as they refuse
/// `--data-file`'s: `-o body.json` beside `-d @body.json` replaced the body with the report.
/// A body starting with `-` is taken, as curl takes it (clap read `-1` as a flag).
#[test]
fn outputs_refuse_the_body_file_and_bodies_may_start_with_a_dash() {
    let dir = scratch_dir("load-body-at-file");
    let body = dir.join("body.json");
    std::fs::write(&body, "{\"a\":1}").unwrap();
    let at = format!("@{}", body.display());
    for flag in ["-o", "--log-file", "--hgrm"] {
        let out = httpvs(&[
            "-n",
            "1",
            "-d",
            &at,
            flag,
            body.to_str().unwrap(),
            "http://127.0.0.1:1/",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("is the -d @FILE file"), "{flag}: {stderr}");
        assert_eq!(std::fs::read_to_string(&body).unwrap(), "{\"a\":1}");
    }
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-n", "1", "-c", "1", "-d", "-1", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["requests"]["succeeded"], 1, "{report}");
}
