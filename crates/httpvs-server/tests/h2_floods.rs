//! HTTP/2 clients that try to make the server hold memory: an HPACK bomb (one dynamic-table
//! entry named over and over), a flood of empty CONTINUATIONs, and echo bodies that never end.
//! The owned engine (the default) used to keep every decoded field, and every echo byte: a
//! 64 KiB block cost 250 MiB, 64 unended echoes 450 MiB.

mod support;

use bytes::Bytes;
use httpvs_server::{H2Engine, Limits};
use std::time::Duration;
use support::raw_h2::{frame, RawH2, DATA, HEADERS};

const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// This process's peak resident memory, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A request block for `GET /` that adds one 4,000-byte field to the dynamic table, then
/// names it `refs` times more with a one-byte index.
fn bomb_block(refs: usize) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x84, 0x41, 9];
    block.extend_from_slice(b"localhost");
    // Literal with incremental indexing, new name "x-b", value of 4,000 'A's (4000 = 127 +
    // 3873, 3873 = 0x21 + 30 * 128).
    block.extend_from_slice(&[0x40, 3, b'x', b'-', b'b', 0x7f, 0xa1, 0x1e]);
    block.extend(std::iter::repeat_n(b'A', 4000));
    block.extend(std::iter::repeat_n(0x80 | 62, refs));
    block
}

/// `block` as HEADERS and CONTINUATIONs of 16 KiB on stream 1.
fn split_block(block: &[u8]) -> Vec<u8> {
    let chunks: Vec<&[u8]> = block.chunks(16_384).collect();
    let mut out = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        let mut flags = if i == 0 { END_STREAM } else { 0 };
        if i + 1 == chunks.len() {
            flags |= END_HEADERS;
        }
        out.extend(frame(kind, flags, 1, chunk));
    }
    out
}

#[test]
fn an_hpack_bomb_gets_431_and_no_memory() {
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let server = support::server_on(Limits::default(), engine);
        let before = peak_kib();
        let mut client = RawH2::connect(server.http_addr().unwrap());
        // 40,000 references: 40 KiB on the wire, 160 MB decoded.
        client.send(&split_block(&bomb_block(40_000)));
        let frames = client.frames_until_closed(Duration::from_secs(2));
        let grew = peak_kib().saturating_sub(before);
        assert!(grew < 40 * 1024, "{engine:?}: peak grew by {grew} KiB");
        // Refused one way or the other: a 431 answer, or the connection ended.
        let answered = frames.iter().any(|f| f.kind == HEADERS && f.stream == 1);
        let ended = frames.iter().any(|f| f.goaway().is_some());
        assert!(answered || ended, "{engine:?}: {frames:?}");
        if answered {
            let t = server.totals();
            assert_eq!(t.statuses.s4xx, 1, "{engine:?}: {t:?}");
        }
    }
}

#[test]
fn a_flood_of_empty_continuations_is_cut_off() {
    let server = support::server_on(Limits::default(), H2Engine::Owned);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    let mut flood = frame(HEADERS, END_STREAM, 1, &[0x82, 0x86, 0x84]);
    for _ in 0..1000 {
        flood.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    client.send(&flood);
    let frames = client.frames_until_closed(Duration::from_secs(2));
    let goaway = frames.iter().find_map(|f| f.goaway());
    assert_eq!(goaway.map(|g| g.1), Some(ENHANCE_YOUR_CALM), "{frames:?}");
}

/// The head of `POST /echo` declaring `length` bytes of body.
fn echo_head(length: u32) -> Vec<u8> {
    // :method POST, :scheme http, :path /echo, then content-length (static name 28) literal.
    let mut head = vec![
        0x83, 0x86, 0x04, 5, b'/', b'e', b'c', b'h', b'o', 0x0f, 0x0d,
    ];
    let value = length.to_string();
    head.push(value.len() as u8);
    head.extend_from_slice(value.as_bytes());
    head
}

/// Echo bodies that never end are held up to eight times the body limit per connection; past
/// it the stream gets 413 like a body over the limit.
#[test]
fn echo_bodies_held_on_a_connection_are_bounded() {
    let limits = Limits {
        max_body_bytes: 256 * 1024,
        ..Limits::default()
    };
    let server = support::server_on(limits, H2Engine::Owned);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    let chunk = vec![b'x'; 16_384];
    for stream in (1..=23u32).step_by(2) {
        // 192 KiB each, under the 256 KiB body limit, never ended: 2.25 MiB in all.
        client.send(&frame(HEADERS, END_HEADERS, stream, &echo_head(192 * 1024)));
        for _ in 0..12 {
            client.send(&frame(DATA, 0, stream, &chunk));
        }
    }
    let _ = client.frames_until_closed(Duration::from_millis(800));
    let t = server.totals();
    // The budget of 2 MiB holds ten bodies; the eleventh and twelfth are refused with 413.
    assert_eq!(t.statuses.s4xx, 2, "{t:?}");
}

/// An echo holds its part of the budget until it has been sent (to the h2 crate's send buffer,
/// on the hyper engine), not only while its body arrives: a client that ended its bodies and
/// never opened its window to their echoes held 800 MB of 8 MiB echoes on one connection, where
/// the budget was 64 MiB. (The bodies are larger than the hyper engine's h2 send buffer of
/// 128 KiB, so none can be handed over whole.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoes_the_client_does_not_take_hold_their_budget() {
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let limits = Limits {
            max_body_bytes: 1024 * 1024,
            ..Limits::default()
        };
        let server = support::server_on(limits, engine);
        let tcp = tokio::net::TcpStream::connect(server.http_addr().unwrap())
            .await
            .unwrap();
        // A window of 0 on every stream: no echo can be sent back.
        let (client, conn) = h2::client::Builder::new()
            .initial_window_size(0)
            .handshake::<_, Bytes>(tcp)
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut answers = Vec::new();
        for _ in 0..12 {
            let request = http::Request::post("http://localhost/echo")
                .header("content-length", 768 * 1024)
                .body(())
                .unwrap();
            let mut client = client.clone().ready().await.unwrap();
            let (answer, mut body) = client.send_request(request, false).unwrap();
            body.send_data(Bytes::from(vec![b'x'; 768 * 1024]), true)
                .unwrap();
            answers.push(answer);
        }
        // Each response is kept: one dropped resets its stream, which frees its echo's part for
        // a body still arriving.
        let mut responses = Vec::new();
        for answer in answers {
            let answer = tokio::time::timeout(Duration::from_secs(10), answer).await;
            responses.push(answer.expect("a head in time").unwrap());
        }
        let mut statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
        statuses.sort();
        // Ten echoes of 768 KiB wait within the 8 MiB budget; the other two get 413.
        let mut expected = vec![200; 10];
        expected.extend([413, 413]);
        assert_eq!(statuses, expected, "{engine:?}");
    }
}
