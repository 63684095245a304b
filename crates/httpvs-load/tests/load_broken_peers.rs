//! `httpvs_load::run` against broken peers (raw servers on 127.0.0.1, port 0): what the client
//! finds wrong is its own error, not the server closing, and it does not retry into a storm.

use httpvs_load::protocol::ProtocolKind;
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// An h2c server that answers the preface with SETTINGS, then, once a request's HEADERS came,
/// sends a frame header announcing 16 MiB (over the 16 KiB we allow): a FRAME_SIZE_ERROR.
/// Probe connections (no HEADERS) see a well-behaved peer. Serves until the test process ends.
fn oversize_frame_server() -> std::net::SocketAddr {
    serve_each(serve_oversize)
}

/// A raw server on 127.0.0.1:0 that runs `serve` on a thread per connection until the test
/// process ends.
fn serve_each(serve: impl Fn(TcpStream) + Clone + Send + 'static) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let serve = serve.clone();
            std::thread::spawn(move || serve(tcp));
        }
    });
    addr
}

/// A run of `kind` against `addr` on one worker thread, `connections` x `streams`.
fn one_thread(addr: std::net::SocketAddr, kind: ProtocolKind, shape: (u32, u32)) -> LoadConfig {
    LoadConfig::new(&format!("http://{addr}/"))
        .unwrap()
        .protocol(ProtocolChoice::Fixed(kind))
        .shape(shape.0, shape.1)
        .threads(1)
}

fn serve_oversize(mut tcp: TcpStream) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let settings = [0u8, 0, 0, 4, 0, 0, 0, 0, 0];
    if tcp.write_all(&settings).is_err() {
        return;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if saw_headers(&got) {
            break;
        }
    }
    // DATA on stream 1, length 0xFFFFFF.
    let _ = tcp.write_all(&[0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1]);
    // Hold the connection until the client closes it.
    while matches!(tcp.read(&mut buf), Ok(n) if n > 0) {}
}

/// Whether the client's bytes (preface, then frames) hold a HEADERS frame.
fn saw_headers(bytes: &[u8]) -> bool {
    let mut pos = 24;
    while bytes.len() >= pos + 9 {
        let len = usize::from(bytes[pos]) << 16
            | usize::from(bytes[pos + 1]) << 8
            | usize::from(bytes[pos + 2]);
        if bytes[pos + 3] == 1 {
            return true;
        }
        pos += 9 + len;
    }
    false
}

#[test]
fn an_h2_protocol_error_fails_its_requests_without_retries() {
    let addr = oversize_frame_server();
    let config = one_thread(addr, ProtocolKind::H2c, (1, 1)).requests(5);
    let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
    assert!(r.requests.identity_holds, "{:?}", r.requests);
    assert_eq!(r.requests.failed, 5, "{:?}", r.requests);
    assert_eq!(r.requests.retried.total, 0, "{:?}", r.requests.retried);
    assert!(
        r.errors
            .iter()
            .any(|e| e.kind == "protocol" && e.count == 5),
        "{:?}",
        r.errors
    );
    // One connection per request, each closed by us after the server's error.
    assert_eq!(r.connections.opened, 5, "{:?}", r.connections);
    assert_eq!(
        r.connections.closed_by_server.total, 0,
        "{:?}",
        r.connections
    );
    assert_eq!(r.connections.closed_locally, 5, "{:?}", r.connections);
}

/// What a flooding h2c server sends, over and over, once a request's HEADERS came: it never
/// reads again, so the answers the client owes pile up unsent.
#[derive(Clone, Copy, Debug)]
enum Flood {
    /// PING frames, each owed a PING ACK.
    Ping,
    /// SETTINGS frames, each owed a SETTINGS ACK.
    Settings,
    /// A HEADERS frame without END_HEADERS, then CONTINUATIONs without end.
    Continuation,
    /// The same with empty CONTINUATIONs: no bytes pile up, the block just never ends.
    EmptyContinuation,
}

fn flood_server(flood: Flood) -> std::net::SocketAddr {
    serve_each(move |tcp| serve_flood(tcp, flood))
}

fn serve_flood(mut tcp: TcpStream, flood: Flood) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = tcp.set_write_timeout(Some(Duration::from_secs(10)));
    if tcp.write_all(&[0u8, 0, 0, 4, 0, 0, 0, 0, 0]).is_err() {
        return;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !saw_headers(&got) {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let frame: Vec<u8> = match flood {
        Flood::Ping => [&[0u8, 0, 8, 6, 0, 0, 0, 0, 0][..], b"12345678"].concat(),
        Flood::Settings => vec![0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0xff, 0xff],
        Flood::Continuation | Flood::EmptyContinuation => {
            // HEADERS on stream 1 (:status 200, no END_HEADERS), then CONTINUATIONs of 4 KiB
            // or of nothing.
            if tcp.write_all(&[0, 0, 1, 1, 0, 0, 0, 0, 1, 0x88]).is_err() {
                return;
            }
            if matches!(flood, Flood::EmptyContinuation) {
                vec![0, 0, 0, 9, 0, 0, 0, 0, 1]
            } else {
                let mut f = vec![0, 0x10, 0, 9, 0, 0, 0, 0, 1];
                f.extend(std::iter::repeat_n(0x88, 4096));
                f
            }
        }
    };
    let burst = frame.repeat(256);
    // Until the client closes (a write fails) or 64 MiB went: bounded either way.
    for _ in 0..(64 << 20) / burst.len() {
        if tcp.write_all(&burst).is_err() {
            return;
        }
    }
}

/// A server that floods PINGs, SETTINGS or CONTINUATIONs and never reads our answers: the
/// connection ends with ENHANCE_YOUR_CALM and a protocol error, where the answers (or the
/// header block) used to pile up in memory, gigabytes in seconds, until the run's end. Empty
/// CONTINUATIONs held each request until `--timeout` (CVE-2024-27316's flood).
#[test]
fn an_h2_flood_ends_the_connection_instead_of_filling_memory() {
    for flood in [
        Flood::Ping,
        Flood::Settings,
        Flood::Continuation,
        Flood::EmptyContinuation,
    ] {
        let addr = flood_server(flood);
        let config = one_thread(addr, ProtocolKind::H2c, (1, 1)).requests(3);
        let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
        assert!(r.requests.identity_holds, "{flood:?}: {:?}", r.requests);
        assert_eq!(r.requests.failed, 3, "{flood:?}: {:?}", r.requests);
        assert!(
            r.errors.iter().all(|e| e.kind == "protocol"),
            "{flood:?}: {:?}",
            r.errors
        );
    }
}

/// An h2c server that answers each of up to 4 connections with one SETTINGS frame holding
/// `id = value`, then reads until the client closes.
fn one_setting_server(id: u16, value: u32) -> std::net::SocketAddr {
    let mut settings = vec![0, 0, 6, 4, 0, 0, 0, 0, 0];
    settings.extend_from_slice(&id.to_be_bytes());
    settings.extend_from_slice(&value.to_be_bytes());
    opening_server(settings)
}

/// An h2c server that answers each of up to 4 connections with `opening`, then reads until
/// the client closes.
fn opening_server(opening: Vec<u8>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for mut tcp in listener.incoming().flatten().take(4) {
            let _ = tcp.write_all(&opening);
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 1024];
            while matches!(tcp.read(&mut buf), Ok(n) if n > 0) {}
        }
    });
    addr
}

/// The one line of a one-request h2c run whose first connection to `addr` never became usable.
fn first_connection_error(addr: std::net::SocketAddr) -> String {
    let config = one_thread(addr, ProtocolKind::H2c, (1, 1)).requests(1);
    let err = httpvs_load::run(&config, &mut Quiet).expect_err("no usable connection");
    err.to_string()
}

/// A server whose SETTINGS carries a value out of range (MAX_FRAME_SIZE 1) speaks HTTP/2 but
/// breaks it: the first connection's error says so, where it used to guess the server had no
/// cleartext HTTP/2 at all.
#[test]
fn a_bad_settings_value_is_named_not_taken_for_another_protocol() {
    // MAX_FRAME_SIZE (5) = 1, below the 16,384 minimum.
    let line = first_connection_error(one_setting_server(5, 1));
    assert!(
        line.contains(
            "the server speaks HTTP/2, but its first frames broke the protocol (we answered \
             GOAWAY PROTOCOL_ERROR to its 6-byte SETTINGS frame on stream 0)"
        ),
        "{line}"
    );
    assert!(!line.contains("without cleartext HTTP/2"), "{line}");
}

/// A server that opens with GOAWAY where its SETTINGS belong turned the connection away: the
/// line names its code and debug data. It read "-p h2c to a server without cleartext HTTP/2?".
#[test]
fn a_goaway_in_place_of_settings_is_named_as_a_refusal() {
    // GOAWAY(last 0, ENHANCE_YOUR_CALM, "calm down"), then an empty SETTINGS.
    let mut opening = vec![0, 0, 17, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xb];
    opening.extend_from_slice(b"calm down");
    opening.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let line = first_connection_error(opening_server(opening));
    assert!(
        line.contains(
            "the server speaks HTTP/2, but it sent GOAWAY ENHANCE_YOUR_CALM (debug data \
             \"calm down\") where its SETTINGS belonged"
        ),
        "{line}"
    );
    assert!(!line.contains("without cleartext HTTP/2"), "{line}");
}

/// A server allowing 0 concurrent streams: no request could ever go out, so the run is refused
/// before it starts, saying why; it used to time out request after request with no word.
#[test]
fn a_server_allowing_no_streams_is_refused_up_front() {
    // MAX_CONCURRENT_STREAMS (3) = 0.
    let addr = one_setting_server(3, 0);
    let config = one_thread(addr, ProtocolKind::H2c, (1, 4)).requests(10);
    let err = httpvs_load::run(&config, &mut Quiet).expect_err("no stream to send on");
    assert!(
        err.to_string().contains("allows no concurrent streams"),
        "{err}"
    );
}

/// An h2c server that answers each connection's first request (200, no body), then sends
/// GOAWAY(last stream 1, INTERNAL_ERROR) and holds the connection until the client closes it:
/// a server failing, not one at its keep-alive limit.
fn goaway_error_server() -> std::net::SocketAddr {
    serve_each(serve_then_goaway_error)
}

fn serve_then_goaway_error(mut tcp: TcpStream) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    if tcp.write_all(&[0u8, 0, 0, 4, 0, 0, 0, 0, 0]).is_err() {
        return;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !saw_headers(&got) {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    // HEADERS on stream 1, END_STREAM | END_HEADERS, ":status 200" (static index 8).
    let answer = [0u8, 0, 1, 1, 5, 0, 0, 0, 1, 0x88];
    // GOAWAY: last stream 1, INTERNAL_ERROR (2).
    let goaway = [0u8, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2];
    if tcp.write_all(&[&answer[..], &goaway[..]].concat()).is_err() {
        return;
    }
    while matches!(tcp.read(&mut buf), Ok(n) if n > 0) {}
}

/// GOAWAYs that carry an error code are counted apart in the report, as well as in the churn
/// note: `closed_by_server.goaway_error`, and the text line says so.
#[test]
fn goaways_with_an_error_code_are_counted_apart() {
    let addr = goaway_error_server();
    let config = one_thread(addr, ProtocolKind::H2c, (1, 1)).requests(6);
    let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
    assert!(r.requests.identity_holds, "{:?}", r.requests);
    assert_eq!(r.requests.succeeded, 6, "{:?}", r.requests);
    let closed = &r.connections.closed_by_server;
    assert!(closed.goaway >= 5, "{:?}", r.connections);
    assert_eq!(closed.goaway_error, closed.goaway, "{:?}", r.connections);
    let text = httpvs_load::report::text::render(&r);
    assert!(
        text.contains(&format!("GOAWAY {} all with an error code", closed.goaway)),
        "{text}"
    );
}

/// An HTTP/1.1 server that reads each request head and answers it `answers` times in one
/// write (then `stray` 20 ms later, if any: well before the next request at 10/s), never
/// closing a connection itself.
fn serve_extra(mut tcp: TcpStream, answers: usize, stray: &'static [u8]) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            got.drain(..end + 4);
            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".repeat(answers);
            if tcp.write_all(&reply).is_err() {
                return;
            }
            if !stray.is_empty() {
                std::thread::sleep(Duration::from_millis(20));
                if tcp.write_all(stray).is_err() {
                    return;
                }
            }
        }
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Two responses to each request, or stray bytes after each: read as the next request's
/// answer, they paired every later response with the wrong request (latency 3 µs) and the
/// note blamed an idle timeout. Each such connection is closed by us and counted apart, the
/// requests succeed, and the note names the bytes.
#[test]
fn h1_bytes_no_request_asked_for_close_the_connection() {
    for (answers, stray, rate) in [
        (2, &b""[..], None),
        (1, &b"junk junk\r\n"[..], Some(10.0)),
        (
            1,
            &b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"[..],
            Some(10.0),
        ),
    ] {
        let addr = serve_each(move |tcp| serve_extra(tcp, answers, stray));
        let mut config = one_thread(addr, ProtocolKind::H1, (1, 1)).requests(10);
        config.rate = rate;
        let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
        let what = format!("{answers} answers, stray {stray:?}: {:?}", r.connections);
        assert_eq!(r.requests.succeeded, 10, "{what}");
        assert!(r.connections.closed_unasked >= 9, "{what}");
        assert_eq!(r.connections.closed_by_server.total, 0, "{what}");
        let note = r.connections.diagnosis.as_deref().unwrap_or("");
        assert!(
            note.contains("bytes no request asked for"),
            "{what}: {note}"
        );
        // The stray bytes were received too (a peek found them, and they went uncounted).
        let answers_bytes = 10 * 40 * answers as u64;
        let strays = r.connections.closed_unasked * stray.len() as u64;
        assert!(
            r.wire.received >= answers_bytes + strays,
            "{what}: {:?}",
            r.wire
        );
    }
}

/// An h1 server that answers every request with `100 Continue` heads, without end and without
/// pause, until the client goes.
fn serve_endless_interim(mut tcp: TcpStream) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = [0u8; 4096];
    if !matches!(tcp.read(&mut buf), Ok(n) if n > 0) {
        return;
    }
    let heads = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(1000);
    while tcp.write_all(&heads).is_ok() {}
}

/// Runs `config` on a thread and waits at most `bound` for its report: a run that outlives
/// its own bounds by that much is the failure under test, not a slow machine.
fn run_within(config: LoadConfig, bound: Duration) -> httpvs_load::Report {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(httpvs_load::run(&config, &mut Quiet).expect("run starts"));
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("the run did not end within {bound:?}"))
}

/// A connection that always has bytes to read spent tokio's task budget on every poll, and the
/// run's end and the request timeout, timers polled after it in the same task, never got any:
/// a server streaming `100 Continue` heads kept a 3 s run going for 27 s to over 2 minutes,
/// SIGTERM included, and a 1 s timeout fired after 4 to 10 s.
#[test]
fn a_server_that_never_stops_talking_cannot_hold_the_run() {
    let addr = serve_each(serve_endless_interim);
    let base = one_thread(addr, ProtocolKind::H1, (2, 1));
    // `-z`: the run ends at its end, with both requests cut off.
    let r = run_within(
        base.clone().duration(Duration::from_millis(500)),
        Duration::from_secs(30),
    );
    assert!(r.requests.identity_holds, "{:?}", r.requests);
    assert_eq!(r.requests.succeeded, 0, "{:?}", r.requests);
    // `--timeout`: each request times out, and the run goes on to its count.
    let mut config = base.requests(4);
    config.timeout = Some(Duration::from_millis(200));
    let r = run_within(config, Duration::from_secs(30));
    assert_eq!(r.requests.failed, 4, "{:?}", r.requests);
    assert_eq!(
        r.errors.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["request_timeout"],
        "{:?}",
        r.errors
    );
}

/// An h1 server that reads a request, then resets the connection (SO_LINGER 0) or, with
/// `answer`, answers it whole and closes as `Connection: close` asked.
fn serve_one_then(mut tcp: TcpStream, answer: bool) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = [0u8; 4096];
    if !matches!(tcp.read(&mut buf), Ok(n) if n > 0) {
        return;
    }
    if answer {
        let _ =
            tcp.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
    } else {
        let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
    }
}

/// `--no-keepalive` marked each connection closed by us as its request went out, so a server
/// that reset every one read "closed by the server 0 (... reset 0); by us 20" beside 20 reset
/// errors. The server's cut is its own; a close after a whole answer is the one we asked for.
#[test]
fn without_keepalive_the_servers_resets_are_the_servers() {
    for (answer, by_server, reset, by_us) in [(false, 10, 10, 0), (true, 0, 0, 10)] {
        let addr = serve_each(move |tcp| serve_one_then(tcp, answer));
        let mut config = one_thread(addr, ProtocolKind::H1, (1, 1)).requests(10);
        config.keepalive = false;
        let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
        let c = &r.connections;
        assert_eq!(
            r.requests.succeeded,
            if answer { 10 } else { 0 },
            "{:?}",
            r.requests
        );
        assert_eq!(
            c.closed_by_server.total, by_server,
            "answer {answer}: {c:?}"
        );
        assert_eq!(c.closed_by_server.reset, reset, "answer {answer}: {c:?}");
        assert_eq!(c.closed_locally, by_us, "answer {answer}: {c:?}");
    }
}

/// Answers every request with `head` (then closes), however broken it is.
fn serve_head(mut tcp: TcpStream, head: &'static [u8]) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = [0u8; 4096];
    if matches!(tcp.read(&mut buf), Ok(n) if n > 0) {
        let _ = tcp.write_all(head);
    }
}

/// A head the client refuses (a bad Content-Length, or over 64 KiB) was an HTTP answer all the
/// same: its bytes count as header bytes received, and the run is not taken for one whose
/// server never spoke HTTP ("http:// to a TLS port?", which made `load` exit 1).
#[test]
fn a_refused_h1_head_is_still_an_http_answer() {
    let big: &'static [u8] = Box::leak(
        [
            &b"HTTP/1.1 200 OK\r\n"[..],
            &b"X-Big: 0123456789abcdef\r\n".repeat(4000),
            b"Content-Length: 0\r\n\r\n",
        ]
        .concat()
        .into_boxed_slice(),
    );
    for head in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello"[..],
        big,
    ] {
        let addr = serve_each(move |tcp| serve_head(tcp, head));
        let config = one_thread(addr, ProtocolKind::H1, (1, 1)).requests(3);
        let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
        assert_eq!(r.requests.failed, 3, "{:?}", r.errors);
        assert_eq!(r.errors[0].kind, "protocol", "{:?}", r.errors);
        assert!(r.wire.header_received > 0, "{:?}", r.wire);
        assert!(!r.no_http_answer());
    }
}
