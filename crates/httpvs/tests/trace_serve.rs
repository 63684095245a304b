//! `httpvs trace` through the binary against the in-process reference server: h2c
//! multiplexing (SETTINGS both ways, two HEADERS out before the first response), GOAWAY with
//! the right last-stream-id under a request limit, h1 heads, h3 on one QUIC connection, the
//! JSON-lines shape, failures as events plus one line and exit 1, a summary whose counts add
//! up (answered + failed + not sent = requests) when the server stops early or refuses, and
//! `-d` implying POST unless `-X` says otherwise.

use httpvs_server::{Limits, RunningServer, ServeConfig};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// No trace here may take longer; a hung client is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

fn serve(limits: Limits) -> RunningServer {
    let config = ServeConfig {
        limits,
        ..ServeConfig::loopback_ephemeral()
    };
    httpvs_server::start(config).expect("server starts")
}

/// Starts `httpvs trace ARGS` with its output piped.
fn spawn_trace(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("trace")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("httpvs runs")
}

/// Runs `httpvs trace ARGS`, killed past the deadline.
fn trace(args: &[&str]) -> Output {
    let mut child = spawn_trace(args);
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("httpvs trace did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

/// The JSON events of a `--json` trace; every line must parse and carry t_ms, dir and type.
fn events(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert!(v["t_ms"].is_number(), "no t_ms: {line}");
            assert!(
                matches!(v["dir"].as_str(), Some("send" | "recv" | "local")),
                "bad dir: {line}"
            );
            assert!(v["type"].is_string(), "no type: {line}");
            v
        })
        .collect()
}

fn of_type<'a>(events: &'a [Value], ty: &str, dir: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == ty && e["dir"] == dir)
        .collect()
}

fn summary(events: &[Value]) -> &Value {
    let last = events.last().expect("events");
    assert_eq!(last["type"], "summary");
    last
}

#[test]
fn h2c_two_requests_multiplex_on_one_connection() {
    let server = serve(Limits::default());
    let url = format!(
        "http://{}/?delay=50ms&size=300",
        server.http_addr().expect("http")
    );
    let out = trace(&["-p", "h2c", "-m", "2", "--json", &url]);
    assert!(out.status.success(), "{out:?}");
    let events = events(&out);
    assert_eq!(of_type(&events, "tcp_connected", "local").len(), 1);
    let settings = |dir| {
        of_type(&events, "SETTINGS", dir)
            .into_iter()
            .filter(|e| e["flags"] == 0)
            .count()
    };
    assert_eq!(settings("send"), 1, "client SETTINGS");
    assert_eq!(settings("recv"), 1, "server SETTINGS");
    let sent = of_type(&events, "HEADERS", "send");
    let received = of_type(&events, "HEADERS", "recv");
    let streams = |frames: &[&Value]| -> Vec<u64> {
        frames
            .iter()
            .map(|f| f["stream"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(streams(&sent), [1, 3]);
    let mut answered = streams(&received);
    answered.sort_unstable();
    assert_eq!(answered, [1, 3]);
    let first_response = received[0]["t_ms"].as_f64().unwrap();
    for request in &sent {
        assert!(request["t_ms"].as_f64().unwrap() < first_response);
        assert_eq!(request["fields"][0][0], ":method");
    }
    assert_eq!(
        received[0]["fields"][0],
        serde_json::json!([":status", "200"])
    );
    let data: u64 = of_type(&events, "DATA", "recv")
        .iter()
        .map(|d| d["data_length"].as_u64().unwrap())
        .sum();
    assert_eq!(data, 600);
    let s = summary(&events);
    assert_eq!(s["protocol"], "h2c");
    assert_eq!(
        (s["streams_opened"].as_u64(), s["max_in_flight"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(s["succeeded"], 2);
    // The second request reuses the first one's dynamic table entries.
    assert!(sent[1]["encoded_bytes"].as_u64() < sent[0]["encoded_bytes"].as_u64());
    // So does the second response (the server's table), even if a second turned in between.
    assert!(received[1]["encoded_bytes"].as_u64() < received[0]["encoded_bytes"].as_u64());
    assert!(s["header_savings_percent"].as_f64().unwrap() > 0.0);
    // The summary's time is the last event's, rounded alike (it read 3.3812960000000003).
    assert_eq!(s["t_ms"], events[events.len() - 2]["t_ms"]);
}

#[test]
fn h2c_text_trace_is_greppable() {
    let server = serve(Limits::default());
    let url = format!("http://{}/", server.http_addr().expect("http"));
    let out = trace(&["-p", "h2c", &url]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ms] send SETTINGS frame <length="), "{text}");
    assert!(
        text.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):128]"),
        "{text}"
    );
    assert!(
        text.contains("send HEADERS frame <length=")
            && text.contains("flags=0x05 END_STREAM|END_HEADERS, stream_id=1>"),
        "{text}"
    );
    assert!(text.contains("               :status: 200"), "{text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("summary: protocol=h2c connections=1 streams=1"),
        "{last}"
    );
}

/// The hyper engine's graceful GOAWAY comes in two: 2^31-1 with a PING, then the real last
/// stream after the PING's ACK. --linger watches past the first (it used to stop there, so the
/// README's second GOAWAY never showed).
#[test]
fn linger_shows_a_second_goaway() {
    let config = ServeConfig {
        limits: Limits {
            max_requests_per_conn: Some(1),
            ..Limits::default()
        },
        h2_engine: httpvs_server::H2Engine::Hyper,
        ..ServeConfig::loopback_ephemeral()
    };
    let server = httpvs_server::start(config).expect("server starts");
    let url = format!("http://{}/", server.http_addr().expect("http"));
    let out = trace(&["-p", "h2c", "--linger", "1s", "--json", &url]);
    let events = events(&out);
    let lasts: Vec<&Value> = of_type(&events, "GOAWAY", "recv")
        .iter()
        .map(|g| &g["last_stream_id"])
        .collect();
    assert_eq!(lasts, [2147483647, 1], "{events:?}");
}

/// The server's close is an event, and it ends --linger: after an idle-timeout GOAWAY (h2c)
/// and on an idle h1 connection, which reads nothing between requests, the trace waited out
/// the whole linger and never showed the close.
#[test]
fn the_servers_close_is_shown_and_ends_the_linger() {
    let server = serve(Limits {
        idle_timeout: Duration::from_millis(200),
        ..Limits::default()
    });
    let url = format!("http://{}/", server.http_addr().expect("http"));
    // And after an h1 `Connection: close` (one request per connection), whose FIN it missed.
    let closing = serve(Limits {
        max_requests_per_conn: Some(1),
        ..Limits::default()
    });
    let closing_url = format!("http://{}/", closing.http_addr().expect("http"));
    // And over TLS, where the server's FIN comes without close_notify (rustls's UnexpectedEof,
    // which the tap took for no close at all).
    let tls_url = format!("https://{}/", server.https_addr().expect("https"));
    let cases = [
        ("h2c", &url),
        ("h1", &url),
        ("h1", &closing_url),
        ("h2", &tls_url),
    ];
    for (proto, url) in cases {
        let out = trace(&["-p", proto, "-k", "--linger", "20s", "--json", url]);
        assert!(out.status.success(), "{proto}: {out:?}");
        let events = events(&out);
        // The close is the last event on the wire: the linger stopped there, not 20 s later.
        let closed = of_type(&events, "peer_closed", "recv");
        assert_eq!(closed.len(), 1, "{proto}: {events:?}");
        let t_closed = closed[0]["t_ms"].as_f64().expect("t_ms");
        assert!(t_closed < 20_000.0, "{proto}: {events:?}");
        let later: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] != "summary" && e["t_ms"].as_f64() > Some(t_closed))
            .collect();
        assert!(later.is_empty(), "{proto}: {later:?}");
    }
}

#[test]
fn request_limit_shows_goaway_with_the_last_processed_stream() {
    let server = serve(Limits {
        max_requests_per_conn: Some(1),
        ..Limits::default()
    });
    let url = format!("http://{}/?delay=20ms", server.http_addr().expect("http"));
    let out = trace(&["-p", "h2c", "-m", "2", "--json", &url]);
    let events = events(&out);
    let goaways = of_type(&events, "GOAWAY", "recv");
    assert!(
        goaways
            .iter()
            .any(|g| g["last_stream_id"] == 1 && g["error"] == "NO_ERROR"),
        "{goaways:?}"
    );
    let failed = of_type(&events, "request_failed", "local");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("not processed"));
    // The refused request makes the trace fail: one line, exit 1.
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("httpvs: trace failed: 1 of 2 requests failed"),
        "{stderr}"
    );
}

#[test]
fn h1_trace_shows_heads_bodies_and_keep_alive() {
    let server = serve(Limits::default());
    let url = format!("http://{}/?size=42", server.http_addr().expect("http"));
    let out = trace(&["-p", "h1", "-m", "2", "--json", &url]);
    assert!(out.status.success(), "{out:?}");
    let events = events(&out);
    let requests = of_type(&events, "h1_head", "send");
    let responses = of_type(&events, "h1_head", "recv");
    assert_eq!((requests.len(), responses.len()), (2, 2));
    assert!(requests[0]["start_line"]
        .as_str()
        .unwrap()
        .starts_with("GET /?size=42 HTTP/1.1"));
    assert_eq!(responses[0]["start_line"], "HTTP/1.1 200 OK");
    assert_eq!(responses[0]["keeps_open"], true);
    let bodies = of_type(&events, "h1_body", "recv");
    assert!(bodies.iter().all(|b| b["length"] == 42), "{bodies:?}");
    assert_eq!(summary(&events)["max_in_flight"], 2);
}

fn write_ca(server: &RunningServer, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("trace-{name}"));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("ca.pem");
    std::fs::write(&path, server.ca_pem()).expect("write CA");
    path
}

#[test]
fn h2_over_tls_shows_the_handshake_and_alpn() {
    let server = serve(Limits::default());
    let ca = write_ca(&server, "h2");
    let port = server.https_addr().expect("https").port();
    let url = format!("https://localhost:{port}/");
    let out = trace(&["-p", "h2", "--cacert", ca.to_str().unwrap(), "--json", &url]);
    assert!(out.status.success(), "{out:?}");
    let events = events(&out);
    let tls = of_type(&events, "tls_handshake", "local");
    assert_eq!(tls.len(), 1);
    assert_eq!(tls[0]["alpn"], "h2");
    assert_eq!(tls[0]["tls_version"], "TLSv1.3");
    assert_eq!(of_type(&events, "HEADERS", "recv").len(), 1);
}

/// A HEAD's answer announces a length it does not carry: the h3 trace takes it, as h1, h2 and
/// the load path do (its content-length check read it as a truncated body).
#[test]
fn an_h3_head_answer_is_not_a_truncated_body() {
    let server = serve(Limits::default());
    let port = server.h3_addr().expect("h3").port();
    let url = format!("https://127.0.0.1:{port}/?size=100");
    let out = trace(&["-p", "h3", "-k", "-X", "HEAD", "--json", &url]);
    assert!(out.status.success(), "{out:?}");
    let events = events(&out);
    let answered = of_type(&events, "response", "local");
    assert_eq!(answered.len(), 1, "{events:?}");
    assert_eq!(answered[0]["status"], 200);
}

/// `-H 'Host: …'` is the request's `:authority` over h3 as over h2 and in `load`: the h3 trace
/// sent nothing (`request 1 not sent: h3(H3_INTERNAL_ERROR)`), its client refusing a Host
/// unlike the URL's authority.
#[test]
fn an_h3_host_header_is_the_authority() {
    let server = serve(Limits::default());
    let port = server.h3_addr().expect("h3").port();
    let url = format!("https://127.0.0.1:{port}/");
    let out = trace(&["-p", "h3", "-k", "-H", "Host: other.example:7", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("request 1: status 200"), "{text}");
}

#[test]
fn h3_two_requests_on_one_quic_connection() {
    let server = serve(Limits::default());
    let ca = write_ca(&server, "h3");
    let port = server.h3_addr().expect("h3").port();
    let url = format!("https://localhost:{port}/?size=7");
    let out = trace(&[
        "-p",
        "h3",
        "-m",
        "2",
        "--cacert",
        ca.to_str().unwrap(),
        "--json",
        &url,
    ]);
    assert!(out.status.success(), "{out:?}");
    let events = events(&out);
    let handshakes = of_type(&events, "quic_handshake", "local");
    assert_eq!(handshakes.len(), 1);
    assert_eq!(handshakes[0]["alpn"], "h3");
    let opened = of_type(&events, "stream_opened", "local");
    assert_eq!(opened.len(), 2);
    let sent = of_type(&events, "HEADERS", "send");
    let received = of_type(&events, "HEADERS", "recv");
    assert_eq!((sent.len(), received.len()), (2, 2));
    assert!(sent
        .iter()
        .all(|h| h["proto"] == "h3" && h["length"].as_u64() > Some(0)));
    let data: u64 = of_type(&events, "DATA", "recv")
        .iter()
        .map(|d| d["length"].as_u64().unwrap())
        .sum();
    assert_eq!(data, 14);
    assert_eq!(of_type(&events, "response", "local").len(), 2);
    assert!(events
        .iter()
        .any(|e| e["type"] == "note" && e["text"].as_str().unwrap().contains("not shown")));
    let s = summary(&events);
    assert_eq!(
        (s["protocol"].as_str(), s["succeeded"].as_u64()),
        (Some("h3"), Some(2))
    );
    assert!(s["header_decoded_bytes"].is_null());
}

/// An h3 GOAWAY is one event, its frame header and id together, in text and in JSON, as h2's
/// is: it showed as two GOAWAY lines, the second looking like a second GOAWAY.
#[test]
fn an_h3_goaway_is_one_event() {
    let server = serve(Limits {
        max_requests_per_conn: Some(1),
        ..Limits::default()
    });
    let ca = write_ca(&server, "h3-goaway");
    let port = server.h3_addr().expect("h3").port();
    let url = format!("https://localhost:{port}/");
    let ca = ca.to_str().unwrap();
    let out = trace(&["-p", "h3", "-m", "2", "--cacert", ca, &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("h3 GOAWAY")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains(
            "recv h3 GOAWAY frame <length=1, stream_id=3> ; first unprocessed request stream id=4"
        ),
        "{text}"
    );
    let out = trace(&["-p", "h3", "-m", "2", "--cacert", ca, "--json", &url]);
    let events = events(&out);
    let goaways = of_type(&events, "GOAWAY", "recv");
    assert_eq!(goaways.len(), 1, "{goaways:?}");
    assert_eq!(
        (&goaways[0]["length"], &goaways[0]["goaway_id"]),
        (&Value::from(1), &Value::from(4)),
        "{goaways:?}"
    );
}

/// Runs `httpvs trace ARGS` and sends it SIGINT after `after`.
fn trace_interrupted(args: &[&str], after: Duration) -> Output {
    let child = spawn_trace(args);
    std::thread::sleep(after);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    child.wait_with_output().expect("output")
}

/// Ctrl-C while a trace waits (a response the server delays, a port that never answers) shows
/// what it saw until then, the waiting requests marked interrupted, and exits 130 with one
/// line: it died with nothing printed, everything it had seen lost.
#[test]
fn ctrl_c_shows_what_the_trace_saw() {
    let server = serve(Limits::default());
    let url = format!("http://{}/?delay=20s", server.http_addr().expect("http"));
    let out = trace_interrupted(&["-m", "2", &url], Duration::from_millis(1500));
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{text}{stderr}");
    assert!(text.contains("TCP connected to"), "{text}");
    assert_eq!(
        text.matches("send GET /?delay=20s HTTP/1.1").count(),
        2,
        "{text}"
    );
    assert_eq!(
        text.matches("FAILED: interrupted: Ctrl-C (or SIGTERM, SIGHUP) came before its response")
            .count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("requests=2 answered=0 failed=2 not_sent=0"),
        "{text}"
    );
    assert_eq!(
        stderr.trim(),
        "httpvs: trace interrupted: 0 of 2 requests answered"
    );
    // A port that accepts and never answers the h2c preface: still connecting.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", silent.local_addr().unwrap());
    let out = trace_interrupted(
        &["-p", "h2c", "--connect-timeout", "60s", "--json", &url],
        Duration::from_millis(1500),
    );
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let events = events(&out);
    let error = of_type(&events, "error", "local");
    assert_eq!(error.len(), 1, "{events:?}");
    assert_eq!(error[0]["error"], "interrupted while connecting (Ctrl-C)");
    assert_eq!(
        of_type(&events, "tcp_connected", "local").len(),
        1,
        "{events:?}"
    );
    assert_eq!(summary(&events)["not_sent"], 1);
}

/// Events print as they come, as `nghttp -v`'s do: the request shows while its response is
/// still due (they all printed when the exchange ended, so a slow server showed nothing), and
/// each prints once, those that came later with the rest at the end.
#[test]
fn events_print_as_they_come() {
    use std::io::BufRead;
    let server = serve(Limits::default());
    let addr = server.http_addr().expect("http");
    // The response is due in 30 s and the trace waits for it: the request printed at the end
    // would come after the answer, and the trace would exit 0, not 130 from the Ctrl-C below.
    let url = format!("http://{addr}/?delay=30s");
    for (args, sent) in [
        (
            vec!["-p", "h1", "--timeout", "0"],
            "send GET /?delay=30s HTTP/1.1",
        ),
        (vec!["-p", "h2c", "--timeout", "0", "--json"], "\"HEADERS\""),
    ] {
        let mut child = spawn_trace(&[args.as_slice(), &[url.as_str()]].concat());
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            let n = stdout.read_line(&mut line).expect("read");
            seen.push_str(&line);
            if n == 0 || (line.contains(sent) && line.contains("send")) {
                break;
            }
        }
        assert!(seen.contains(sent), "{seen}");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the request printed only once the trace was over: {seen}"
        );
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).expect("read");
        assert_eq!(
            child.wait().expect("wait").code(),
            Some(130),
            "{seen}{rest}"
        );
        let all = seen + &rest;
        let once = |what: &str| assert_eq!(all.matches(what).count(), 1, "{what}: {all}");
        once(sent);
        let json = args.contains(&"--json");
        once(if json {
            "tcp_connected"
        } else {
            "TCP connected to"
        });
        once("interrupted: Ctrl-C (or SIGTERM, SIGHUP) came before its response");
        once(if json {
            "\"type\":\"summary\""
        } else {
            "requests=1 answered=0 failed=1"
        });
    }
}

/// `-p auto` over https to a port that accepts and never speaks TLS: the ALPN probe's connect
/// timeout is the trace's one wait (a second connection over HTTP/1.1 waited it out again),
/// and Ctrl-C during the probe ends it there, with no connection opened after it.
#[test]
fn a_stalled_alpn_probe_is_waited_out_once_and_ctrl_c_stops_it() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://localhost:{}/", silent.local_addr().unwrap().port());
    let began = Instant::now();
    let out = trace(&["-k", "--connect-timeout", "1s", "--json", &url]);
    let took = began.elapsed();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let seen = events(&out);
    let error = of_type(&seen, "error", "local");
    assert_eq!(error.len(), 1, "{seen:?}");
    assert!(
        error[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the TLS handshake did not finish")),
        "{seen:?}"
    );
    assert!(of_type(&seen, "tcp_connected", "local").is_empty());
    assert!(took < Duration::from_millis(1900), "{took:?}");
    let out = trace_interrupted(&["-k", "--json", &url], Duration::from_millis(700));
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let events = events(&out);
    let error = of_type(&events, "error", "local");
    assert_eq!(error.len(), 1, "{events:?}");
    assert_eq!(error[0]["error"], "interrupted while connecting (Ctrl-C)");
    assert!(of_type(&events, "tcp_connected", "local").is_empty());
    assert_eq!(summary(&events)["connections"], 0);
}

/// A body the close delimits is shown before the response it completes, as a sized one is
/// (its body line came after the response, at the trace's end).
#[test]
fn a_body_delimited_by_the_close_comes_before_its_response() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        conn.write_all(b"HTTP/1.1 200 OK\r\n\r\nuntil the close")
            .unwrap();
    });
    let out = trace(&["--json", &url]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let events = events(&out);
    let at = |ty: &str| events.iter().position(|e| e["type"] == ty);
    let (body, response) = (at("h1_body"), at("response"));
    assert!(body.is_some() && body < response, "{events:?}");
    assert_eq!(events[body.unwrap()]["framing"], "until-close");
}

#[test]
fn refused_connection_is_an_event_then_one_line_and_exit_1() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let out = trace(&["-p", "h2c", "--json", &format!("http://{addr}/")]);
    assert_eq!(out.status.code(), Some(1));
    let events = events(&out);
    let errors = of_type(&events, "error", "local");
    assert_eq!(errors.len(), 1);
    assert!(errors[0]["error"].as_str().unwrap().starts_with("refused"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // No connection, so nothing was sent.
    let s = summary(&events);
    assert_eq!(s["connections"], 0);
    assert_eq!(
        (
            s["succeeded"].as_u64(),
            s["failed"].as_u64(),
            s["not_sent"].as_u64()
        ),
        (Some(0), Some(0), Some(1))
    );
}

/// The counts of a summary: (succeeded, failed, not_sent), which must add up to `requests`.
fn counts(s: &Value) -> (u64, u64, u64) {
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("no {k}: {s}"));
    let counts = (n("succeeded"), n("failed"), n("not_sent"));
    assert_eq!(counts.0 + counts.1 + counts.2, n("requests"), "{s}");
    counts
}

#[test]
fn requests_the_server_never_let_us_send_are_counted_as_not_sent() {
    // One stream at a time and one request per connection: requests 2 and 3 wait for a
    // stream, then the GOAWAY ends them before their HEADERS leave.
    let server = serve(Limits {
        max_streams: 1,
        max_requests_per_conn: Some(1),
        ..Limits::default()
    });
    let url = format!("http://{}/?status=503", server.http_addr().expect("http"));
    let out = trace(&["-p", "h2c", "-m", "3", "--json", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let events = events(&out);
    let s = summary(&events);
    assert_eq!(counts(s), (1, 0, 2));
    assert_eq!(s["statuses"], serde_json::json!({"503": 1}));
    assert_eq!(s["streams_opened"], 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("httpvs: trace failed: 2 of 3 requests not sent"),
        "{stderr}"
    );
    let text = trace(&["-p", "h2c", "-m", "3", &url]);
    let text = String::from_utf8_lossy(&text.stdout);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.contains(" requests=3 answered=1 failed=0 not_sent=2 statuses=503:1 "),
        "{last}"
    );
    // Their lines agree with the summary: not sent, not FAILED above the GOAWAY's last stream.
    for n in [2, 3] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("request {n} ")))
            .unwrap_or_else(|| panic!("no line for request {n}:\n{text}"));
        assert!(
            line.contains(&format!("request {n} not sent: the server's GOAWAY")),
            "{line}"
        );
    }
}

/// Two streams at a time, one request per connection: stream 3 went out above the GOAWAY's
/// last stream id (failed, unprocessed), and the third request never had a stream (not sent).
/// That line read FAILED, as the second's, while the summary said one failed and one not sent.
#[test]
fn a_request_line_agrees_with_the_summary_when_a_goaway_splits_sent_and_unsent() {
    let server = serve(Limits {
        max_streams: 2,
        max_requests_per_conn: Some(1),
        ..Limits::default()
    });
    let url = format!("http://{}/", server.http_addr().expect("http"));
    let out = trace(&["-p", "h2c", "-m", "3", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    assert!(last.contains(" answered=1 failed=1 not_sent=1 "), "{text}");
    let failed = text.lines().filter(|l| l.contains(" FAILED: ")).count();
    let not_sent = text.lines().filter(|l| l.contains(" not sent: ")).count();
    assert_eq!((failed, not_sent), (1, 1), "{text}");
}

#[test]
fn a_connection_closed_mid_way_counts_sent_and_unsent_requests() {
    // `close=1`: the first response says Connection: close; the pipelined others were sent
    // but never answered.
    let server = serve(Limits::default());
    let url = format!("http://{}/?close=1", server.http_addr().expect("http"));
    let out = trace(&["-p", "h1", "-m", "3", "--json", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let events = events(&out);
    assert_eq!(counts(summary(&events)), (1, 2, 0));
}

#[test]
fn data_implies_post_unless_a_method_is_given() {
    let server = serve(Limits::default());
    let url = format!("http://{}/", server.http_addr().expect("http"));
    for (args, line) in [
        (&["-d", "hello"][..], "POST / HTTP/1.1"),
        (&["-X", "PUT", "-d", "hello"], "PUT / HTTP/1.1"),
        (&["-X", "GET", "-d", "hello"], "GET / HTTP/1.1"),
        (&[], "GET / HTTP/1.1"),
    ] {
        let mut all = vec!["-p", "h1", "--json"];
        all.extend_from_slice(args);
        all.push(&url);
        let out = trace(&all);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let events = events(&out);
        let sent = of_type(&events, "h1_head", "send");
        assert_eq!(sent[0]["start_line"], line, "{args:?}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        &["-p", "h2c", "https://localhost/"][..],
        &["-p", "h3", "http://localhost/"],
        &["-p", "h2", "http://localhost/"],
        &["http://localhost:99999/"],
        &["-m", "0", "http://localhost/"],
        &["-p", "spdy", "http://localhost/"],
        // As for `load`: 0 would fail every connection unseen.
        &["--connect-timeout", "0", "http://localhost/"],
    ] {
        let out = trace(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// A failed connection's line says what the stack saw, as load's does: rustls's reason for an
/// untrusted certificate, and a UDP refusal for h3 to a port that serves TCP only.
#[test]
fn connect_failures_say_what_the_stack_saw() {
    let mut config = ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).expect("server starts");
    let url = format!("https://{}/", server.https_addr().expect("https"));
    let out = trace(&["-p", "h2", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid peer certificate: UnknownIssuer"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--cacert FILE holding the certificate the server presents"),
        "{stderr}"
    );
    let out = trace(&["-p", "h3", "-k", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nothing answers QUIC"), "{stderr}");
    // TCP connected, then the handshake failed: the trace shows the connection and the bytes
    // that moved (it read "connections=0 sent=0 B received=0 B" with no connected line).
    let out = trace(&["-p", "h2", "--json", &url]);
    let events = events(&out);
    assert_eq!(
        of_type(&events, "tcp_connected", "local").len(),
        1,
        "{events:?}"
    );
    let s = summary(&events);
    assert!(s["bytes_sent"].as_u64().unwrap_or(0) > 0, "{s}");
    assert!(s["bytes_received"].as_u64().unwrap_or(0) > 0, "{s}");
    // No connection was established, though TCP connected.
    assert_eq!(s["connections"], 0, "{s}");
    // With the default `-p auto` too: the check that picks the protocol failed, and the
    // trace's own connection shows the failure (it printed only the stderr line).
    let out = trace(&["--json", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let auto = self::events(&out);
    let notes = of_type(&auto, "note", "local");
    assert!(
        notes
            .iter()
            .any(|n| n["text"].as_str().unwrap_or("").contains("(tls, after ")),
        "{auto:?}"
    );
    let errors = of_type(&auto, "error", "local");
    assert_eq!(errors.len(), 1, "{auto:?}");
    assert!(errors[0]["error"].as_str().unwrap_or("").starts_with("tls"));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

/// `user:password@` in the URL is Basic authorization, as in `load` and curl; the password goes
/// into no error line.
#[test]
fn credentials_in_the_url_become_basic_authorization() {
    let s = serve(Limits::default());
    let addr = s.http_addr().unwrap();
    let out = trace(&[&format!("http://user:s%40cret@{addr}/")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    // base64("user:s@cret")
    assert!(
        stdout.contains("authorization: Basic dXNlcjpzQGNyZXQ="),
        "{stdout}"
    );
    assert!(
        !stdout.contains(&format!("user:s%40cret@{addr}")),
        "{stdout}"
    );

    // --timeout 0 waits forever, as for `load` (it used to fail at once).
    let out = trace(&["--timeout", "0", &format!("http://{addr}/")]);
    assert!(out.status.success(), "{out:?}");

    let out = trace(&["http://user:secret@127.0.0.1:1/"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains("secret"), "{stderr}");
}

/// http:// to a TLS port: the server's TLS alert is named as such, with the fix, as `load`'s
/// report names it (the trace said only "unparseable HTTP/1.1 head").
#[test]
fn http_to_a_tls_port_says_so() {
    let server = serve(Limits::default());
    let url = format!("http://{}/", server.https_addr().expect("https"));
    let out = trace(&[&url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "the server answered with a TLS record (http:// to a TLS port? use https://)"
        ),
        "{text}"
    );
}
