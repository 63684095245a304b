//! The owned HTTP/2 engine's response heads use the dynamic table, seen at the frame level: on
//! one connection every head decodes in order with one HPACK decoder, a repeated head is a few
//! bytes, and a client's SETTINGS_HEADER_TABLE_SIZE (0 included, before or between responses)
//! is met with a size update at the start of the next head.

mod support;

use httpvs_h2wire::hpack::Decoder;
use httpvs_server::{H2Engine, Limits, RunningServer};
use std::time::Duration;
use support::raw_h2::{frame, get_headers, RawH2, HEADERS, SETTINGS};

/// SETTINGS_HEADER_TABLE_SIZE.
const HEADER_TABLE_SIZE: u16 = 0x1;

/// The owned engine, closing each connection after `requests` answers (so reads end early).
fn server(requests: u64) -> RunningServer {
    let limits = Limits {
        max_requests_per_conn: Some(requests),
        ..Limits::default()
    };
    support::server_on(limits, H2Engine::Owned)
}

fn table_size(size: u32) -> Vec<u8> {
    let mut payload = HEADER_TABLE_SIZE.to_be_bytes().to_vec();
    payload.extend_from_slice(&size.to_be_bytes());
    frame(SETTINGS, 0, 0, &payload)
}

/// One answered head: its stream, its block as sent, its fields as decoded.
struct Head {
    stream: u32,
    block: Vec<u8>,
    fields: Vec<(String, String)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `input` on a new connection and decodes every HEADERS block the server sends, in
/// order, with one decoder whose table limit is `decoder_limit`.
fn heads(server: &RunningServer, input: &[u8], decoder_limit: usize) -> Vec<Head> {
    let mut client = RawH2::connect(server.http_addr().unwrap());
    client.send(input);
    let frames = client.frames_until_closed(Duration::from_secs(10));
    let mut decoder = Decoder::new(decoder_limit);
    frames
        .into_iter()
        .filter(|f| f.kind == HEADERS)
        .map(|f| {
            assert_ne!(f.flags & 0x4, 0, "small heads fit one frame");
            let mut fields = Vec::new();
            decoder
                .decode(&f.payload, |n, v| {
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    fields.push((text(n), text(v)));
                })
                .expect("every head decodes in order");
            Head {
                stream: f.stream,
                block: f.payload,
                fields,
            }
        })
        .collect()
}

/// Whether two heads were encoded in the same second (a new date is a literal once).
fn same_second(a: &Head, b: &Head) -> bool {
    a.get("date").is_some() && a.get("date") == b.get("date")
}

#[test]
fn repeated_heads_on_one_connection_are_a_few_bytes_and_all_decode() {
    let paths = [
        "/",
        "/",
        "/?size=100",
        "/?size=100",
        "/?status=503&header=x-test:hello",
        "/?status=503&header=x-test:hello",
        "/",
        "/",
    ];
    let server = server(paths.len() as u64);
    let burst: Vec<u8> = (0u32..)
        .zip(paths)
        .flat_map(|(i, path)| get_headers(2 * i + 1, path))
        .collect();
    let heads = heads(&server, &burst, 4096);
    let streams: Vec<u32> = heads.iter().map(|h| h.stream).collect();
    assert_eq!(streams, [1, 3, 5, 7, 9, 11, 13, 15]);
    let statuses: Vec<&str> = heads.iter().filter_map(|h| h.get(":status")).collect();
    assert_eq!(
        statuses,
        ["200", "200", "200", "200", "503", "503", "200", "200"]
    );
    for (head, length) in heads.iter().zip(["18", "18", "100", "100"]) {
        assert_eq!(head.get("content-type"), Some("text/plain"));
        assert_eq!(head.get("content-length"), Some(length));
        assert_eq!(head.get("date").map(str::len), Some(29));
    }
    assert_eq!(heads[5].get("x-test"), Some("hello"));
    let sizes: Vec<usize> = heads.iter().map(|h| h.block.len()).collect();
    // The first head is literals (39 bytes for `GET /`); its repeat names four entries.
    assert!(sizes[0] >= 30, "{sizes:?}");
    for pair in heads.chunks(2) {
        if same_second(&pair[0], &pair[1]) {
            assert!(pair[1].block.len() <= 5, "{sizes:?}");
            assert!(pair[1].block.len() * 6 <= sizes[0], "{sizes:?}");
        }
    }
    // The second answer of another size shares content-type and date with the first.
    if same_second(&heads[0], &heads[2]) {
        assert!(sizes[2] < sizes[0] / 2, "{sizes:?}");
    }
}

#[test]
fn a_client_table_of_zero_gets_the_update_first_and_no_indexing() {
    let server = server(3);
    let mut input = table_size(0);
    for stream in [1, 3, 5] {
        input.extend(get_headers(stream, "/"));
    }
    // The client's table is 0 from its first SETTINGS: any reference to an entry would fail.
    let heads = heads(&server, &input, 0);
    assert_eq!(heads.len(), 3);
    assert_eq!(heads[0].block[0], 0x20, "size update to 0 first");
    for pair in heads.windows(2) {
        if same_second(&pair[0], &pair[1]) {
            assert_eq!(pair[1].block, heads[0].block[1..]);
        }
    }
    assert!(heads.iter().all(|h| h.get(":status") == Some("200")));
}

#[test]
fn a_table_size_change_between_answers_is_signalled_in_the_next_head() {
    let server = server(5);
    // Processed in order within one read: two answers fill the table, the SETTINGS empty it,
    // the third answer carries the update, the fourth and fifth refill it.
    let mut input = get_headers(1, "/");
    input.extend(get_headers(3, "/"));
    input.extend(table_size(0));
    input.extend(get_headers(5, "/"));
    input.extend(table_size(4096));
    input.extend(get_headers(7, "/"));
    input.extend(get_headers(9, "/"));
    let heads = heads(&server, &input, 4096);
    assert_eq!(heads.len(), 5);
    assert_eq!(heads[2].block[0], 0x20, "update to 0: {:?}", heads[2].block);
    // 4096 = 31 + 4065: 0x3f then 4065 in 7-bit groups.
    assert_eq!(heads[3].block[..3], [0x3f, 0xe1, 0x1f]);
    assert!(heads.iter().all(|h| h.get("content-length") == Some("18")));
    if same_second(&heads[3], &heads[4]) {
        assert_eq!(heads[4].block.len(), 4);
    }
}
