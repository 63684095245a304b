//! curl against the real server over HTTP/1.1, h2c prior knowledge and h2 over TLS: bodies, sizes,
//! delays, statuses, headers, echo, probability lists, and the 400/431/413 limits.

mod support;

use httpvs_server::body::FIXED_BODY;
use httpvs_server::{H2Engine, Limits, RunningServer};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How curl reaches the server in one protocol.
struct Mode {
    name: &'static str,
    base: String,
    args: Vec<String>,
    version: &'static str,
}

fn modes(server: &RunningServer, dir: &Path) -> Vec<Mode> {
    let ca = support::write_ca(server, dir);
    let tls_port = server.https_addr().unwrap().port();
    vec![
        Mode {
            name: "h1",
            base: support::http_base(server),
            args: vec!["--http1.1".into()],
            version: "1.1",
        },
        Mode {
            name: "h2c",
            base: support::http_base(server),
            args: vec!["--http2-prior-knowledge".into()],
            version: "2",
        },
        Mode {
            name: "h2",
            base: support::https_base(server),
            args: vec![
                "--http2".into(),
                "--cacert".into(),
                ca.display().to_string(),
                "--resolve".into(),
                format!("localhost:{tls_port}:127.0.0.1"),
            ],
            version: "2",
        },
        Mode {
            name: "h1+tls",
            base: support::https_base(server),
            args: vec![
                "--http1.1".into(),
                "-k".into(),
                "--resolve".into(),
                format!("localhost:{tls_port}:127.0.0.1"),
            ],
            version: "1.1",
        },
    ]
}

/// Runs curl in `mode` on `path_and_query` with `extra` args; returns (status, version, headers, body).
fn fetch(curl: &Path, mode: &Mode, target: &str, extra: &[&str]) -> (u16, String, String, Vec<u8>) {
    let dir = support::temp_dir(&format!("curl-{}-{}", mode.name, rand_suffix()));
    let body_path = dir.join("body");
    let head_path = dir.join("head");
    let url = format!("{}{}", mode.base, target);
    let mut args: Vec<&str> = mode.args.iter().map(|s| s.as_str()).collect();
    args.extend_from_slice(extra);
    let (body_s, head_s) = (
        body_path.display().to_string(),
        head_path.display().to_string(),
    );
    args.extend_from_slice(&[
        "-o",
        &body_s,
        "-D",
        &head_s,
        "-w",
        "%{http_code} %{http_version}",
        &url,
    ]);
    let out = support::curl_ok(curl, &args);
    let (code, version) = out.split_once(' ').unwrap();
    let body = std::fs::read(&body_path).unwrap_or_default();
    let head = std::fs::read_to_string(&head_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (
        code.parse().unwrap(),
        version.to_owned(),
        head.to_ascii_lowercase(),
        body,
    )
}

fn rand_suffix() -> u32 {
    rand::random()
}

fn curl_or_skip() -> Option<PathBuf> {
    httpvs_testkit::require_peer("curl")
}

#[test]
fn every_protocol_serves_sizes_statuses_headers_and_echo() {
    let Some(curl) = curl_or_skip() else { return };
    let server = support::server(Limits::default());
    let dir = support::temp_dir("curl-basics");
    for mode in modes(&server, &dir) {
        let m = mode.name;
        let (code, version, _, body) = fetch(&curl, &mode, "/", &[]);
        assert_eq!(
            (code, version.as_str(), body.as_slice()),
            (200, mode.version, FIXED_BODY),
            "{m}"
        );
        for (query, size) in [
            ("size=1k", 1024),
            ("size=64k", 65536),
            ("size=1m", 1 << 20),
            ("size=0", 0),
        ] {
            let (code, _, head, body) = fetch(&curl, &mode, &format!("/any/path?{query}"), &[]);
            assert_eq!((code, body.len()), (200, size), "{m} {query}");
            assert!(
                head.contains(&format!("content-length: {size}")),
                "{m} {head}"
            );
        }
        let (code, _, head, _) = fetch(&curl, &mode, "/?status=503&header=x-test:hello", &[]);
        assert_eq!(code, 503, "{m}");
        assert!(head.contains("x-test: hello"), "{m}: {head}");
        for target in ["/", "/?size=10", "/?delay=1ms"] {
            let (_, _, head, _) = fetch(&curl, &mode, target, &[]);
            assert!(head.contains(" gmt\r\n"), "{m} {target}: no date in {head}");
            assert_eq!(head.matches("date: ").count(), 1, "{m} {target}: {head}");
        }
        let (_, _, head, _) = fetch(&curl, &mode, "/?header=date:set", &[]);
        assert!(head.contains("date: set\r\n"), "{m}: {head}");
        assert_eq!(head.matches("date: ").count(), 1, "{m}: {head}");
        let (code, _, _, body) = fetch(&curl, &mode, "/echo", &["--data-binary", "echo me back"]);
        assert_eq!((code, body.as_slice()), (200, &b"echo me back"[..]), "{m}");
        let (code, _, _, body) = fetch(&curl, &mode, "/?status=abc", &[]);
        let text = String::from_utf8_lossy(&body);
        assert_eq!(code, 400, "{m}");
        assert!(
            text.contains("`status`") && text.contains("abc"),
            "{m}: {text}"
        );
    }
    let totals = server.shutdown(Duration::from_secs(1));
    assert!(totals.requests.h1 > 0 && totals.requests.h2c > 0 && totals.requests.h2 > 0);
    assert!(totals.requests.h1_tls > 0);
}

/// A body larger than the h2 receive window (1 MiB) comes back whole: flow control is released as read.
#[test]
fn echo_returns_a_3_mib_body_on_every_protocol() {
    let Some(curl) = curl_or_skip() else { return };
    let server = support::server(Limits::default());
    let dir = support::temp_dir("curl-echo-big");
    let body: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let file = dir.join("upload");
    std::fs::write(&file, &body).unwrap();
    let at_file = format!("@{}", file.display());
    for mode in modes(&server, &dir) {
        let (code, _, _, echoed) = fetch(&curl, &mode, "/echo", &["--data-binary", &at_file]);
        assert_eq!(code, 200, "{}", mode.name);
        assert!(echoed == body, "{}: {} bytes back", mode.name, echoed.len());
    }
}

#[test]
fn delays_hold_the_response_at_least_that_long() {
    let Some(curl) = curl_or_skip() else { return };
    let server = support::server(Limits::default());
    let dir = support::temp_dir("curl-delay");
    for mode in modes(&server, &dir) {
        let started = Instant::now();
        let (code, ..) = fetch(&curl, &mode, "/?delay=200ms", &[]);
        assert_eq!(code, 200);
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "{}",
            mode.name
        );
    }
}

#[test]
fn close_1_ends_the_h1_connection() {
    let Some(curl) = curl_or_skip() else { return };
    let server = support::server(Limits::default());
    let dir = support::temp_dir("curl-close");
    let mode = &modes(&server, &dir)[0];
    let (_, _, head, _) = fetch(&curl, mode, "/?close=1", &[]);
    assert!(head.contains("connection: close"), "{head}");
}

/// 1,000 requests with `status=503:10,429:5` on one connection: curl over HTTP/1.1 and h2 over TLS.
/// (curl 7.88 cannot reuse an h2c prior-knowledge connection, so h2c uses h2load, below.)
#[test]
fn probability_lists_come_within_a_few_points_over_1000_requests() {
    let Some(curl) = curl_or_skip() else { return };
    let server = support::server(Limits::default());
    let dir = support::temp_dir("curl-probability");
    for mode in modes(&server, &dir).into_iter().filter(|m| m.name != "h2c") {
        let config = dir.join(format!("{}.curlrc", mode.name.replace('+', "")));
        let mut f = std::fs::File::create(&config).unwrap();
        for _ in 0..1000 {
            writeln!(
                f,
                "url = \"{}/?status=503:10,429:5\"\noutput = \"/dev/null\"",
                mode.base
            )
            .unwrap();
        }
        drop(f);
        let mut args: Vec<&str> = mode.args.iter().map(|s| s.as_str()).collect();
        let config_s = config.display().to_string();
        args.extend_from_slice(&["-K", &config_s, "-w", "%{http_code}\\n"]);
        let out = support::curl_ok(&curl, &args);
        let codes: Vec<&str> = out.lines().collect();
        assert_eq!(codes.len(), 1000);
        let pct = |c: &str| codes.iter().filter(|x| **x == c).count() as f64 / 10.0;
        assert_shares(mode.name, pct("503"), pct("429"), pct("200"));
    }
}

fn assert_shares(name: &str, p503: f64, p429: f64, p200: f64) {
    // Binomial over 1,000 draws: these bounds are 4 standard deviations or more.
    assert!((p503 - 10.0).abs() <= 4.0, "{name}: 503 at {p503}%");
    assert!((p429 - 5.0).abs() <= 3.0, "{name}: 429 at {p429}%");
    assert!((p200 - 85.0).abs() <= 5.0, "{name}: 200 at {p200}%");
}

/// The same list over h2c, driven by h2load (its summary counts 4xx = 429 and 5xx = 503).
#[test]
fn probability_lists_hold_over_h2c_with_h2load() {
    let Some(h2load) = httpvs_testkit::require_peer("h2load") else {
        return;
    };
    let server = support::server(Limits::default());
    let url = format!("{}/?status=503:10,429:5", support::http_base(&server));
    let out = std::process::Command::new(h2load)
        .args(["-n", "1000", "-c", "1", "-m", "10", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("status codes:"))
        .expect("status line");
    // "status codes: 850 2xx, 0 3xx, 50 4xx, 100 5xx"
    let counts: Vec<f64> = line
        .trim_start_matches("status codes:")
        .split(',')
        .map(|part| {
            part.split_whitespace()
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap()
                / 10.0
        })
        .collect();
    assert_shares("h2c", counts[3], counts[2], counts[0]);
    assert_eq!(server.totals().requests.h2c, 1000);
}

#[test]
fn oversized_headers_get_431_and_bodies_get_413() {
    let Some(curl) = curl_or_skip() else { return };
    let server = support::server(Limits {
        max_header_bytes: 4096,
        max_body_bytes: 1000,
        ..Limits::default()
    });
    let dir = support::temp_dir("curl-limits");
    let big_header = format!("x-big: {}", "a".repeat(6000));
    let body_file = dir.join("body");
    std::fs::write(&body_file, vec![b'b'; 2000]).unwrap();
    let at_body = format!("@{}", body_file.display());
    for mode in modes(&server, &dir) {
        let m = mode.name;
        let (code, ..) = fetch(&curl, &mode, "/", &["-H", &big_header]);
        assert_eq!(code, 431, "{m}");
        let (code, ..) = fetch(&curl, &mode, "/echo", &["--data-binary", &at_body]);
        assert_eq!(code, 413, "{m} with content-length");
        let chunked = [
            "--data-binary",
            &at_body,
            "-H",
            "content-length:",
            "-H",
            "transfer-encoding: chunked",
        ];
        let args: &[&str] = if mode.version == "1.1" {
            &chunked
        } else {
            &chunked[..4]
        };
        let (code, ..) = fetch(&curl, &mode, "/echo", args);
        assert_eq!(code, 413, "{m} without content-length");
        let (code, _, _, body) = fetch(&curl, &mode, "/echo", &["--data-binary", "small"]);
        assert_eq!((code, body.as_slice()), (200, &b"small"[..]), "{m}");
    }
    let totals = server.shutdown(Duration::from_secs(1));
    assert!(totals.rejected.headers_too_large >= 2, "{totals:?}");
    assert!(totals.rejected.bodies_too_large >= 8, "{totals:?}");
}

/// Runs curl in `mode` with `extra` args; returns (status, lower-cased headers, body bytes read).
fn fetch_head(curl: &Path, mode: &Mode, target: &str, extra: &[&str]) -> (u16, String, u64) {
    let url = format!("{}{}", mode.base, target);
    let mut args: Vec<&str> = mode.args.iter().map(|s| s.as_str()).collect();
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "-o",
        "/dev/null",
        "-D",
        "-",
        "-w",
        "\n%{http_code} %{size_download}",
        &url,
    ]);
    let out = support::curl_ok(curl, &args);
    let (head, last) = out.rsplit_once('\n').unwrap();
    let (code, size) = last.split_once(' ').unwrap();
    (
        code.parse().unwrap(),
        head.to_ascii_lowercase(),
        size.parse().unwrap(),
    )
}

/// RFC 9110: 204 and 304 have no content and no Content-Length (a body made curl fail the h2
/// stream with PROTOCOL_ERROR), and a HEAD answer has no body though it may say its length.
#[test]
fn no_content_statuses_and_head_carry_no_body_on_every_protocol_and_engine() {
    let Some(curl) = curl_or_skip() else { return };
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let server = support::server_on(Limits::default(), engine);
        let dir = support::temp_dir(&format!("curl-no-content-{engine:?}"));
        for mode in modes(&server, &dir) {
            let m = format!("{} {engine:?}", mode.name);
            for (target, status) in [
                ("/?status=204", 204),
                ("/?status=304&size=5", 304),
                ("/echo?status=204", 204),
            ] {
                let (code, head, size) = fetch_head(&curl, &mode, target, &[]);
                assert_eq!((code, size), (status, 0), "{m} {target}");
                assert!(!head.contains("content-length"), "{m} {target}: {head}");
            }
            for (target, len) in [("/", 18), ("/?size=100", 100), ("/?size=1m", 1 << 20)] {
                let (code, head, size) = fetch_head(&curl, &mode, target, &["--head"]);
                assert_eq!((code, size), (200, 0), "{m} HEAD {target}");
                assert!(
                    head.contains(&format!("content-length: {len}")),
                    "{m} HEAD {target}: {head}"
                );
            }
        }
    }
}
