//! Differential test of the two HTTP/2 engines: the same request mix (fast path, sizes beyond the
//! windows, statuses, extra headers, echo, HEAD, bad queries, 431, 413, delays) sent through the
//! h2 crate's client to a server on each engine gives the same statuses, header sets (each with a
//! `date`) and bodies.

mod support;

use bytes::Bytes;
use httpvs_server::{H2Engine, Limits, RunningServer};
use std::time::Duration;

/// One request of the mix: method, path, extra header, body.
type Case = (
    &'static str,
    &'static str,
    Option<(&'static str, String)>,
    Bytes,
);

fn mix() -> Vec<Case> {
    let get = |path| ("GET", path, None, Bytes::new());
    vec![
        get("/"),
        get("/any/path?size=1k"),
        get("/?size=3m"),
        get("/?size=0"),
        get("/?status=503&header=x-test:hello"),
        get("/?status=204"),
        get("/?status=abc"),
        get("/?delay=20ms&size=10"),
        ("HEAD", "/?size=5k", None, Bytes::new()),
        ("POST", "/echo", None, Bytes::from_static(b"echo me back")),
        ("POST", "/echo", None, Bytes::from(vec![b'e'; 1500])),
        ("POST", "/?size=7", None, Bytes::from(vec![b'x'; 100])),
        ("GET", "/", Some(("x-big", "a".repeat(5000))), Bytes::new()),
    ]
}

/// (status, sorted headers, body) of every case.
type Outcome = (u16, Vec<(String, String)>, Vec<u8>);

async fn fetch_all(server: &RunningServer) -> Vec<Outcome> {
    let tcp = tokio::net::TcpStream::connect(server.http_addr().unwrap())
        .await
        .unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(conn);
    let mut outcomes = Vec::new();
    for (method, path, header, body) in mix() {
        let mut client = client.clone().ready().await.unwrap();
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("http://127.0.0.1{path}"));
        if let Some((name, value)) = &header {
            req = req.header(*name, value.as_str());
        }
        let end = body.is_empty();
        let (response, mut send) = client.send_request(req.body(()).unwrap(), end).unwrap();
        if !end {
            send.send_data(body, true).unwrap();
        }
        let response = response.await.unwrap();
        let status = response.status().as_u16();
        let mut headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(n, v)| {
                // The servers ran in different seconds: the date is checked for its shape only.
                let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                match n.as_str() {
                    "date" if value.len() == 29 && value.ends_with(" GMT") => {
                        (n.to_string(), "<date>".into())
                    }
                    _ => (n.to_string(), value),
                }
            })
            .collect();
        headers.sort();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        outcomes.push((status, headers, bytes));
    }
    outcomes
}

#[test]
fn both_engines_answer_the_same_mix_alike() {
    let limits = Limits {
        max_header_bytes: 4096,
        max_body_bytes: 1000,
        ..Limits::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut results = Vec::new();
    for engine in [H2Engine::Hyper, H2Engine::Owned] {
        let server = support::server_on(limits.clone(), engine);
        let outcomes = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), fetch_all(&server))
                .await
                .expect("the mix finishes")
        });
        server.shutdown(Duration::from_secs(1));
        results.push(outcomes);
    }
    let statuses: Vec<u16> = results[0].iter().map(|o| o.0).collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 503, 204, 400, 200, 200, 200, 413, 200, 431]
    );
    let no_body = |i: usize| {
        let (_, headers, body) = &results[0][i];
        body.is_empty() && headers.iter().all(|(n, _)| n != "content-length")
    };
    assert!(no_body(5), "204: {:?}", results[0][5]);
    for outcome in results.iter().flatten() {
        let date = ("date".to_owned(), "<date>".to_owned());
        assert!(outcome.1.contains(&date), "no date: {outcome:?}");
    }
    assert!(results[0][8].2.is_empty(), "HEAD: {:?}", results[0][8]);
    for (case, (hyper, owned)) in mix().iter().zip(results[0].iter().zip(&results[1])) {
        assert_eq!(hyper.0, owned.0, "status of {case:?}");
        assert_eq!(hyper.1, owned.1, "headers of {case:?}");
        assert!(hyper.2 == owned.2, "body of {case:?}");
    }
}

/// A frame: 9-byte header and payload.
fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn a_peer_that_stops_reading_is_closed_by_the_idle_timeout_on_both_engines() {
    for engine in [H2Engine::Hyper, H2Engine::Owned] {
        let limits = Limits {
            idle_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let server = support::server_on(limits, engine);
        let mut client = support::raw_h2::RawH2::connect(server.http_addr().unwrap());
        // Windows wide open, then a large body that is never read: the server's write blocks.
        let mut hello = raw_frame(0x4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]);
        hello.extend(raw_frame(0x8, 0, 0, &0x7fff_0000u32.to_be_bytes()));
        hello.extend(support::raw_h2::get_headers(1, "/?size=200m"));
        client.send(&hello);
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while server.open_connections() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(server.open_connections(), 0, "{engine:?}");
        drop(client);
    }
}

/// That `stream` was reset with PROTOCOL_ERROR, as a malformed request is.
fn assert_reset_as_malformed(frames: &[support::raw_h2::Frame], stream: u32, what: &str) {
    let rst = frames
        .iter()
        .find(|f| f.kind == support::raw_h2::RST_STREAM && f.stream == stream);
    assert_eq!(
        rst.map(|f| f.payload.as_slice()),
        Some(&1u32.to_be_bytes()[..]),
        "{what}: {frames:?}"
    );
}

/// RFC 9113 §8.1.1: an `:authority` or `host` that is not `host[:port]` (a space, userinfo, an
/// empty host, a path) makes the request malformed: RST_STREAM(PROTOCOL_ERROR), on both engines.
#[test]
fn an_invalid_authority_or_host_resets_the_stream_on_both_engines() {
    use support::raw_h2::{get_headers, get_headers_with, RawH2, HEADERS};
    let cases: [(&str, &[u8]); 5] = [
        (":authority", b"a b"),
        (":authority", b"user@localhost"),
        (":authority", b":8080"),
        ("host", b""),
        ("host", b"localhost/x"),
    ];
    for engine in [H2Engine::Hyper, H2Engine::Owned] {
        let server = support::server_on(Limits::default(), engine);
        let mut client = RawH2::connect(server.http_addr().unwrap());
        for (i, &(name, value)) in (0u32..).zip(&cases) {
            client.send(&get_headers_with(2 * i + 1, "/", &[(name, value)]));
        }
        let good = 2 * cases.len() as u32 + 1;
        client.send(&get_headers(good, "/"));
        let frames = client.frames_until_closed(Duration::from_millis(500));
        for (i, case) in (0u32..).zip(&cases) {
            let stream = 2 * i + 1;
            assert_reset_as_malformed(&frames, stream, &format!("{engine:?} {case:?}"));
            assert!(
                !frames
                    .iter()
                    .any(|f| f.kind == HEADERS && f.stream == stream),
                "{engine:?} {case:?} was answered"
            );
        }
        assert!(
            frames.iter().any(|f| f.kind == HEADERS && f.stream == good),
            "{engine:?}"
        );
        assert_eq!(server.totals().requests.h2c, 1, "{engine:?}");
    }
}

/// RFC 9113 §8.3.1: a `:path` that does not begin with `/` makes the request malformed, on both
/// engines: `noslash` was answered 200 and `noslash?size=5` 400.
#[test]
fn a_path_without_its_slash_resets_the_stream_on_both_engines() {
    use support::raw_h2::{get_headers, RawH2, HEADERS};
    let paths = ["noslash", "noslash?size=5"];
    for engine in [H2Engine::Hyper, H2Engine::Owned] {
        let server = support::server_on(Limits::default(), engine);
        let mut client = RawH2::connect(server.http_addr().unwrap());
        for (i, path) in (0u32..).zip(paths) {
            client.send(&get_headers(2 * i + 1, path));
        }
        client.send(&get_headers(5, "/"));
        let frames = client.frames_until_closed(Duration::from_millis(500));
        for (i, path) in (0u32..).zip(paths) {
            assert_reset_as_malformed(&frames, 2 * i + 1, &format!("{engine:?} {path}"));
        }
        assert!(
            frames.iter().any(|f| f.kind == HEADERS && f.stream == 5),
            "{engine:?}"
        );
    }
}

/// A field the owned engine cannot turn into a `HeaderValue` (a control byte, which RFC 9113
/// does not forbid) gets 400, counted with the other malformed requests.
#[test]
fn an_owned_engine_400_for_a_bad_field_is_counted() {
    let server = support::server_on(Limits::default(), H2Engine::Owned);
    let mut client = support::raw_h2::RawH2::connect(server.http_addr().unwrap());
    // :method GET, :scheme http, :path /x (off the fast path), then x-a: \x01 (literals, no
    // Huffman, no indexing).
    let block = [
        0x82, 0x86, 0x04, 2, b'/', b'x', 0x00, 3, b'x', b'-', b'a', 1, 0x01,
    ];
    client.send(&support::raw_h2::frame(0x1, 0x4 | 0x1, 1, &block));
    let frames = client.frames_until_closed(Duration::from_secs(1));
    let head = frames
        .iter()
        .find(|f| f.kind == 0x1 && f.stream == 1)
        .expect("an answer");
    assert_eq!(
        head.payload.first(),
        Some(&0x8c),
        "static-table :status 400"
    );
    let totals = server.totals();
    assert_eq!(totals.rejected.bad_requests, 1, "{totals:?}");
}

/// The owned engine's `GET /` fast path checks a request's fields as every other request's are
/// (RFC 9113 §8.2): a malformed field resets the stream, and a control byte that
/// `http::HeaderValue` refuses gets the slow path's 400, for `/` as for `/x`.
#[test]
fn the_owned_fast_path_checks_fields_as_the_slow_path_does() {
    use support::raw_h2::{get_headers_with, RawH2, HEADERS, RST_STREAM};
    const RESET: &str = "RST_STREAM(PROTOCOL_ERROR)";
    let cases: [(&str, &[u8], &str); 8] = [
        ("x-a", b" lead", RESET),
        ("x-a", b"trail\t", RESET),
        ("x-a", b"a\nb", RESET),
        ("X-Upper", b"1", RESET),
        ("connection", b"close", RESET),
        ("transfer-encoding", b"chunked", RESET),
        ("x-a", b"a\x01b", "400"),
        ("x-a", b"inner space\tand tab", "200"),
    ];
    let server = support::server_on(Limits::default(), H2Engine::Owned);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    let mut stream = 1;
    for (name, value, expected) in cases {
        for path in ["/", "/x"] {
            let fields: [(&str, &[u8]); 2] = [(":authority", b"localhost"), (name, value)];
            client.send(&get_headers_with(stream, path, &fields));
            let frames = client.frames_until_closed(Duration::from_millis(300));
            let outcome = frames
                .iter()
                .find_map(|f| match (f.kind, f.stream == stream) {
                    (RST_STREAM, true) if f.payload == 1u32.to_be_bytes() => Some(RESET),
                    (HEADERS, true) => match f.payload.first() {
                        Some(0x88) => Some("200"),
                        Some(0x8c) => Some("400"),
                        _ => Some("another status"),
                    },
                    _ => None,
                });
            assert_eq!(outcome, Some(expected), "{path} with {name}: {value:?}");
            stream += 2;
        }
    }
    let totals = server.totals();
    assert_eq!(totals.rejected.bad_requests, 2, "{totals:?}");
}

/// The owned engine's `GET /` head, encoded once per connection, is encoded again when the
/// second turns, so its `date` stays current on a long-lived connection. (The hyper engine adds a
/// fresh `date` to each answer, and the h2 crate indexes it, so its blocks cannot be compared.)
#[test]
fn the_date_of_get_slash_follows_the_clock_on_one_connection() {
    use support::raw_h2::{get_headers, RawH2, HEADERS};
    let engine = H2Engine::Owned;
    let server = support::server_on(Limits::default(), engine);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    let mut heads = Vec::new();
    for stream in [1, 3] {
        client.send(&get_headers(stream, "/"));
        let frames = client.frames_until_closed(Duration::from_millis(1100));
        let head = frames
            .into_iter()
            .find(|f| f.kind == HEADERS && f.stream == stream);
        heads.push(head.expect("an answer").payload);
    }
    assert_ne!(heads[0], heads[1], "{engine:?}: the date did not change");
}
