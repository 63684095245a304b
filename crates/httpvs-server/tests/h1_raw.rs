//! HTTP/1.1 on a raw socket, where a stray body byte or a missing check shows: answers without a
//! body (HEAD, 204, 304) keep a pipelined connection in step, and a request without Host is 400.

mod support;

use httpvs_server::Limits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `requests` on one connection and reads until the server closes it (bounded).
fn exchange(server: &httpvs_server::RunningServer, requests: &str) -> String {
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(requests.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The responses in `text`, split at each status line.
fn responses(text: &str) -> Vec<&str> {
    text.split("HTTP/1.").skip(1).collect()
}

#[test]
fn head_204_and_304_answers_have_no_body_and_keep_the_pipeline_in_step() {
    let server = support::server(Limits::default());
    let text = exchange(
        &server,
        "HEAD /?size=100 HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /?status=204&size=10 HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /?status=304 HTTP/1.1\r\nHost: x\r\n\r\n\
         GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let answers = responses(&text);
    assert_eq!(answers.len(), 4, "{text}");
    assert!(answers[0].starts_with("1 200"), "{text}");
    assert!(answers[0].contains("content-length: 100\r\n"), "{text}");
    assert!(answers[0].ends_with("\r\n\r\n"), "HEAD with a body: {text}");
    for (answer, status) in [(answers[1], "1 204"), (answers[2], "1 304")] {
        assert!(answer.starts_with(status), "{text}");
        assert!(!answer.contains("content-length"), "{text}");
        assert!(answer.ends_with("\r\n\r\n"), "{status} with a body: {text}");
    }
    assert!(
        answers[3].ends_with("\r\n\r\nhello from httpvs\n"),
        "{text}"
    );
}

#[test]
fn an_http_1_1_request_without_exactly_one_host_gets_400() {
    let server = support::server(Limits::default());
    for request in [
        "GET / HTTP/1.1\r\n\r\n",
        "GET /?size=5 HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
    ] {
        let text = exchange(&server, request);
        assert_eq!(text.split(' ').nth(1), Some("400"), "{request:?}: {text}");
        assert!(text.contains("Host"), "{request:?}: {text}");
        assert_eq!(responses(&text).len(), 1, "{request:?}: {text}");
    }
    // HTTP/1.0 may leave Host out.
    let text = exchange(&server, "GET / HTTP/1.0\r\n\r\n");
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    let totals = server.totals();
    assert_eq!(totals.rejected.bad_requests, 4, "{totals:?}");
    assert_eq!(totals.requests.h1, 5, "{totals:?}");
}

/// RFC 9112 §3.2: a Host whose value is not `host[:port]` is 400 as a missing one is, on
/// HTTP/1.0 too; the connection closes after it.
#[test]
fn a_host_that_is_not_a_valid_authority_gets_400() {
    let server = support::server(Limits::default());
    let bad = [
        "a b", "user@x", "x/y", "", ":80", "x:8o", "[::1", "x\\y", "x,y\"",
    ];
    for host in bad {
        let request =
            format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let text = exchange(&server, &request);
        assert_eq!(text.split(' ').nth(1), Some("400"), "{host:?}: {text}");
        assert_eq!(responses(&text).len(), 1, "{host:?}: {text}");
    }
    let text = exchange(&server, "GET / HTTP/1.0\r\nHost: a@b\r\n\r\n");
    assert!(text.starts_with("HTTP/1.0 400"), "{text}");
    for host in ["x", "127.0.0.1:8080", "[::1]:80", "EXAMPLE.com", "a-b_c~d"] {
        let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let text = exchange(&server, &request);
        assert!(text.starts_with("HTTP/1.1 200"), "{host:?}: {text}");
    }
    let totals = server.totals();
    assert_eq!(
        totals.rejected.bad_requests,
        bad.len() as u64 + 1,
        "{totals:?}"
    );
}

/// A request target that does not begin with `/` gets 400 (RFC 9112 §3.2), whatever follows:
/// `noslash` was read as an authority and answered 200, `noslash?size=5` got 400.
#[test]
fn a_target_without_its_slash_gets_400() {
    let server = support::server(Limits::default());
    for target in ["noslash", "noslash?size=5"] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let text = exchange(&server, &request);
        assert!(text.starts_with("HTTP/1.1 400"), "{target}: {text}");
    }
    for target in ["/x", "http://x/a", "*"] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let text = exchange(&server, &request);
        assert!(text.starts_with("HTTP/1.1 200"), "{target}: {text}");
    }
}

/// A request target over 64 KiB (under a head limit that lets it be read) gets hyper's own 414,
/// counted as a 414, not a 431.
#[test]
fn hyper_s_414_is_counted_as_a_414() {
    let server = support::server(Limits {
        max_header_bytes: 128 * 1024,
        ..Limits::default()
    });
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let text = exchange(&server, &long);
    assert!(text.starts_with("HTTP/1.1 414"), "{text}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.totals().rejected.uris_too_long == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = server.totals();
    assert_eq!(
        (
            t.rejected.uris_too_long,
            t.rejected.headers_too_large,
            t.requests.h1
        ),
        (1, 0, 1),
        "{t:?}"
    );
}

/// Heads hyper cannot parse get its own 400 or 431, and the totals count them.
#[test]
fn heads_hyper_rejects_are_counted() {
    let server = support::server(Limits {
        max_header_bytes: 1024,
        ..Limits::default()
    });
    let text = exchange(
        &server,
        "GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    // Past hyper's buffer (max_header_bytes + 8 KiB): hyper answers before the server sees it.
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let text = exchange(&server, &big);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // hyper sends its FIN before its connection future ends with the error that is counted.
    let counted = |t: &httpvs_server::ServerTotals| {
        t.rejected.headers_too_large > 0 && t.rejected.bad_requests > 0
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !counted(&server.totals()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let totals = server.totals();
    assert_eq!(
        (
            totals.rejected.bad_requests,
            totals.rejected.headers_too_large,
            totals.requests.h1
        ),
        (1, 1, 2),
        "{totals:?}"
    );
}

/// A malformed chunked body, or one the client's FIN cuts short, gets 400 and a close, counted
/// as a bad request: it used to get 200 with whatever had arrived echoed back.
#[test]
fn a_broken_request_body_gets_400_not_an_answer_built_on_part_of_it() {
    let server = support::server(Limits::default());
    let chunked = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for body in ["zz\r\nabc\r\n0\r\n\r\n", "3\r\nabcX\r\n0\r\n\r\n"] {
        let text = exchange(&server, &format!("{chunked}{body}"));
        assert!(text.starts_with("HTTP/1.1 400"), "{body:?}: {text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    }
    // Content-Length 10, 3 bytes, then the client's FIN.
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(!text.starts_with("HTTP/1.1 200"), "{text}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.totals().rejected.bad_requests < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let totals = server.totals();
    assert_eq!(totals.rejected.bad_requests, 3, "{totals:?}");
}

/// An HTTP/1.0 keep-alive request whose answer closes the connection (`close=1`, the last of
/// `--max-requests-per-conn`, a 400) reads `Connection: close` alone: hyper added `keep-alive`
/// to it (`close, keep-alive`). One that stays open keeps its `keep-alive`.
#[test]
fn an_http10_keepalive_request_closed_after_its_answer_reads_close_alone() {
    let server = support::server(Limits {
        max_requests_per_conn: Some(2),
        ..Limits::default()
    });
    let ka = "Connection: keep-alive\r\n";
    for request in [
        format!("GET /?close=1 HTTP/1.0\r\n{ka}\r\n"),
        format!("GET / HTTP/1.0\r\nHost: a@b\r\n{ka}\r\n"),
    ] {
        let text = exchange(&server, &request);
        assert!(text.starts_with("HTTP/1.0 "), "{text}");
        assert!(text.contains("connection: close\r\n"), "{text}");
        assert!(!text.contains("keep-alive"), "{text}");
    }
    let text = exchange(
        &server,
        &format!("GET / HTTP/1.0\r\n{ka}\r\nGET / HTTP/1.0\r\n{ka}\r\n"),
    );
    let answers = responses(&text);
    assert_eq!(answers.len(), 2, "{text}");
    assert!(answers[0].contains("connection: keep-alive\r\n"), "{text}");
    assert!(answers[1].contains("connection: close\r\n"), "{text}");
    assert!(!answers[1].contains("keep-alive"), "{text}");
}
