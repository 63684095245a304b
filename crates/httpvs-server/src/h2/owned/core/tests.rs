//! The server core without sockets: frames in, events and frames out.

use super::*;
use crate::date::Stamp;
use httpvs_h2wire::hpack::encoder::request_blocks;

/// Some second's date, for the fixed answer.
const DATE: Stamp = Stamp {
    second: 0,
    text: *b"Thu, 01 Jan 1970 00:00:00 GMT",
};

fn core(accept_limit: Option<u64>) -> ServerCore {
    let mut core = ServerCore::new(CoreLimits {
        max_streams: 4,
        max_header_list: 16 * 1024,
        accept_limit,
        max_early_resets: 3,
    });
    core.out.clear();
    core
}

fn hello(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    write::client_preface(&mut out, settings, 65_535);
    out
}

fn block(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut fields: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":path", path.as_bytes()),
        (b":authority", b"localhost"),
    ];
    fields.extend(extra.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    request_blocks(&fields, false).first
}

fn get(out: &mut Vec<u8>, stream: u32, path: &str) {
    write::headers(out, stream, &block(path, &[]), true, 16_384);
}

#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Request(u32, String, bool),
    Data(u32, usize, bool),
    Reset(u32),
}

/// Feeds `input` as one read, collecting events; `Err` carries the connection error code.
fn feed(core: &mut ServerCore, input: &[u8]) -> (Vec<Seen>, Option<u32>) {
    feed_with(core, input, false)
}

/// Feeds `input` as one read and answers each `GET /` as it comes, as the shell does.
fn feed_answering(core: &mut ServerCore, input: &[u8]) -> (Vec<Seen>, Option<u32>) {
    feed_with(core, input, true)
}

fn feed_with(core: &mut ServerCore, input: &[u8], answer: bool) -> (Vec<Seen>, Option<u32>) {
    let mut seen = Vec::new();
    let mut consumed = 0;
    core.begin_batch();
    loop {
        match core.next_event(input, &mut consumed) {
            Ok(None) => return (seen, None),
            Err(ConnError(code)) => return (seen, Some(code)),
            Ok(Some(Event::Request {
                stream,
                head,
                end_stream,
            })) => {
                let path = String::from_utf8_lossy(&head.path).into_owned();
                if answer && path == "/" {
                    core.respond_fixed(stream, &DATE);
                }
                seen.push(Seen::Request(stream, path, end_stream));
            }
            Ok(Some(Event::Data {
                stream,
                data,
                end_stream,
            })) => seen.push(Seen::Data(stream, data.len(), end_stream)),
            Ok(Some(Event::Reset { stream })) => seen.push(Seen::Reset(stream)),
        }
    }
}

/// The frames in `out` as (kind, flags, stream, payload), and empties it.
fn frames(core: &mut ServerCore) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let out = std::mem::take(&mut core.out);
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= out.len() {
        let mut nine = [0u8; 9];
        nine.copy_from_slice(&out[at..at + 9]);
        let h = FrameHeader::parse(&nine);
        let end = at + 9 + h.length as usize;
        frames.push((h.kind, h.flags, h.stream_id, out[at + 9..end].to_vec()));
        at = end;
    }
    frames
}

#[test]
fn a_window_of_one_byte_sends_one_byte_then_the_rest_on_window_update() {
    let mut core = core(None);
    let mut input = hello(&[(setting::INITIAL_WINDOW_SIZE, 1)]);
    get(&mut input, 1, "/");
    let (seen, error) = feed(&mut core, &input);
    assert_eq!(
        (seen, error),
        (vec![Seen::Request(1, "/".into(), true)], None)
    );
    core.respond_fixed(1, &DATE);
    let sent = frames(&mut core);
    let data: Vec<usize> = sent
        .iter()
        .filter(|f| f.0 == kind::DATA)
        .map(|f| f.3.len())
        .collect();
    assert_eq!(data, [1], "{sent:?}");
    let mut update = Vec::new();
    write::window_update(&mut update, 1, 100);
    feed(&mut core, &update);
    core.pump();
    let rest = frames(&mut core);
    assert_eq!(rest.len(), 1);
    assert_eq!(
        (rest[0].0, rest[0].1, rest[0].3.len()),
        (kind::DATA, flag::END_STREAM, 17)
    );
    assert!(core.streams.is_empty(), "the stream is retired");
}

#[test]
fn continuation_assembles_a_block_and_interleaving_is_a_protocol_error() {
    let mut core = core(None);
    let mut input = hello(&[]);
    write::headers(&mut input, 1, &block("/split", &[]), true, 5);
    let (seen, error) = feed(&mut core, &input);
    assert_eq!(seen, [Seen::Request(1, "/split".into(), true)]);
    assert_eq!(error, None);

    let mut core = self::core(None);
    let mut input = hello(&[]);
    let b = block("/x", &[]);
    write::head(&mut input, 3, kind::HEADERS, flag::END_STREAM, 1);
    input.extend_from_slice(&b[..3]);
    let mut ping = Vec::new();
    write::ping(&mut ping, [0; 8]);
    input.extend_from_slice(&ping);
    assert_eq!(feed(&mut core, &input).1, Some(code::PROTOCOL_ERROR));
}

#[test]
fn goaway_after_n_names_the_nth_stream_and_ignores_later_ones() {
    let mut core = core(Some(2));
    let mut input = hello(&[]);
    for id in [1, 3, 5, 7] {
        get(&mut input, id, "/");
    }
    let (seen, _) = feed(&mut core, &input);
    assert_eq!(
        seen,
        [
            Seen::Request(1, "/".into(), true),
            Seen::Request(3, "/".into(), true)
        ]
    );
    let goaway = frames(&mut core)
        .into_iter()
        .find(|f| f.0 == kind::GOAWAY)
        .expect("GOAWAY");
    assert_eq!(&goaway.3[..4], &3u32.to_be_bytes());
    assert!(core.take_goaway_sent());
    core.respond_fixed(1, &DATE);
    assert!(!core.is_finished());
    core.respond_fixed(3, &DATE);
    assert!(core.is_finished());
}

#[test]
fn resets_of_streams_opened_in_the_same_read_end_with_enhance_your_calm() {
    let mut core = core(None);
    let mut input = hello(&[]);
    for id in (1..20).step_by(2) {
        get(&mut input, id, "/?delay=1s");
        write::rst_stream(&mut input, id, code::CANCEL);
    }
    let (_, error) = feed(&mut core, &input);
    assert_eq!(error, Some(code::ENHANCE_YOUR_CALM));
    assert!(core.rapid_reset);
}

/// CVE-2023-44487 spread out: one open-and-reset per read never trips a per-read count.
#[test]
fn one_open_and_reset_per_read_still_ends_with_enhance_your_calm() {
    let mut core = core(None);
    assert_eq!(feed(&mut core, &hello(&[])).1, None);
    for (n, id) in (1..).step_by(2).take(4).enumerate() {
        let mut input = Vec::new();
        get(&mut input, id, "/");
        write::rst_stream(&mut input, id, code::CANCEL);
        let (_, error) = feed_answering(&mut core, &input);
        // The budget is 3: the fourth read's reset is one too many.
        let expected = (n == 3).then_some(code::ENHANCE_YOUR_CALM);
        assert_eq!(error, expected, "read {n}");
    }
    assert!(core.rapid_reset);
}

#[test]
fn answered_streams_earn_resets_back_and_resets_in_a_later_read_are_free() {
    let mut core = core(None);
    assert_eq!(feed(&mut core, &hello(&[])).1, None);
    for round in 0..50u32 {
        let id = 1 + 6 * round;
        // One answered request, and one answered but reset in the read that opened it.
        let mut input = Vec::new();
        get(&mut input, id, "/");
        get(&mut input, id + 2, "/");
        write::rst_stream(&mut input, id + 2, code::CANCEL);
        assert_eq!(feed_answering(&mut core, &input).1, None, "round {round}");
        // A request given up in a later read (a client's timeout), as a load run's end does.
        let mut input = Vec::new();
        get(&mut input, id + 4, "/?delay=1s");
        assert_eq!(feed_answering(&mut core, &input).1, None, "round {round}");
        let mut input = Vec::new();
        write::rst_stream(&mut input, id + 4, code::CANCEL);
        let (seen, error) = feed_answering(&mut core, &input);
        assert_eq!(
            (seen, error),
            (vec![Seen::Reset(id + 4)], None),
            "round {round}"
        );
    }
    assert!(!core.rapid_reset);
}

#[test]
fn a_malformed_head_resets_its_stream_and_hpack_stays_in_step() {
    let mut core = core(None);
    let mut input = hello(&[]);
    write::headers(
        &mut input,
        1,
        &block("/", &[("connection", "close")]),
        true,
        16_384,
    );
    get(&mut input, 3, "/ok");
    let (seen, error) = feed(&mut core, &input);
    assert_eq!(error, None);
    assert_eq!(seen, [Seen::Request(3, "/ok".into(), true)]);
    let rst = frames(&mut core)
        .into_iter()
        .find(|f| f.0 == kind::RST_STREAM)
        .expect("RST_STREAM");
    assert_eq!(
        (rst.2, rst.3.as_slice()),
        (1, &code::PROTOCOL_ERROR.to_be_bytes()[..])
    );
}

#[test]
fn request_bodies_come_as_data_events_and_content_length_is_checked() {
    let mut core = core(None);
    let mut input = hello(&[]);
    let b = block("/echo", &[("content-length", "5")]);
    write::headers(&mut input, 1, &b, false, 16_384);
    write::data(&mut input, 1, b"abc", false);
    write::data(&mut input, 1, b"de", true);
    write::headers(&mut input, 3, &b, false, 16_384);
    write::data(&mut input, 3, b"abc", true);
    let (seen, error) = feed(&mut core, &input);
    assert_eq!(error, None);
    assert_eq!(
        seen,
        [
            Seen::Request(1, "/echo".into(), false),
            Seen::Data(1, 3, false),
            Seen::Data(1, 2, true),
            Seen::Request(3, "/echo".into(), false),
            Seen::Reset(3),
        ]
    );
}

#[test]
fn random_frames_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(9113);
    for _ in 0..2000 {
        let mut core = core(Some(3));
        let mut input = hello(&[]);
        for _ in 0..rng.random_range(1..8) {
            let len = rng.random_range(0..40usize);
            let kind = rng.random_range(0..11u8);
            let flags: u8 = rng.random();
            let stream = rng.random_range(0..8u32);
            write::head(&mut input, len, kind, flags, stream);
            input.extend((0..len).map(|_| rng.random::<u8>()));
        }
        let _ = feed(&mut core, &input);
        core.pump();
    }
}
