//! The core without sockets: frames in, outcomes and frames out.

use super::super::frame_tap::{flag, kind, Direction, FrameHeader, FrameObserver, FrameTap};
use super::{ConnCore, ConnError};
use crate::error::ErrorKind;
use crate::protocol::hpack::encoder;
use crate::protocol::window::H2Windows;
use crate::protocol::wire::WireCounter;
use crate::protocol::{CloseCause, RequestSpec, RetryReason, SendError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

fn req() -> RequestSpec {
    RequestSpec {
        method: http::Method::GET,
        uri: "http://127.0.0.1:1/".parse().unwrap(),
        headers: vec![],
        body: bytes::Bytes::new(),
    }
}

pub(super) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> (FrameHeader, Vec<u8>) {
    let header = FrameHeader {
        length: payload.len() as u32,
        kind,
        flags,
        stream_id: stream,
    };
    (header, payload.to_vec())
}

/// A core past the server's SETTINGS (MAX_CONCURRENT_STREAMS 2), with its output cleared.
fn ready_core() -> ConnCore {
    let mut core = ConnCore::new(WireCounter::new_shared(), H2Windows::default());
    feed(&mut core, frame(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 2])).unwrap();
    core.out.clear();
    core
}

pub(super) fn feed(
    core: &mut ConnCore,
    (h, payload): (FrameHeader, Vec<u8>),
) -> Result<(), ConnError> {
    core.on_frame(&h, &payload, Instant::now())
}

pub(super) fn open(core: &mut ConnCore) -> Poll<Result<usize, SendError>> {
    core.poll_open(
        &req(),
        Instant::now(),
        &mut Context::from_waker(Waker::noop()),
    )
}

pub(super) fn outcome(
    core: &mut ConnCore,
    slot: usize,
) -> Poll<Result<crate::protocol::ResponseInfo, SendError>> {
    core.poll_outcome(slot, &mut Context::from_waker(Waker::noop()))
}

pub(super) fn status_block(status: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    encoder::literal(b":status", status.as_bytes(), 4, 0, &mut block);
    for (n, v) in extra {
        encoder::literal(n.as_bytes(), v.as_bytes(), 6, 0x40, &mut block);
    }
    block
}

#[derive(Default)]
struct Sent(Vec<FrameHeader>);

impl FrameObserver for Sent {
    fn on_header(&mut self, _: Direction, header: &FrameHeader) -> bool {
        self.0.push(*header);
        false
    }
}

fn sent_kinds(out: &[u8]) -> Vec<u8> {
    let mut sent = Sent::default();
    FrameTap::new(Direction::Received).feed(out, &mut sent);
    sent.0.iter().map(|h| h.kind).collect()
}

#[test]
fn a_response_split_over_continuation_with_padding_and_trailers_completes() {
    let mut core = ready_core();
    let Poll::Ready(Ok(slot)) = open(&mut core) else {
        panic!()
    };
    let block = status_block("200", &[("server", "x"), ("x-long", &"v".repeat(40))]);
    let (a, b) = block.split_at(5);
    let mut padded = vec![3];
    padded.extend_from_slice(a);
    padded.extend_from_slice(&[0, 0, 0]);
    feed(&mut core, frame(kind::HEADERS, flag::PADDED, 1, &padded)).unwrap();
    feed(
        &mut core,
        frame(kind::CONTINUATION, flag::END_HEADERS, 1, b),
    )
    .unwrap();
    feed(
        &mut core,
        frame(kind::DATA, flag::PADDED, 1, &[2, 1, 2, 3, 0, 0]),
    )
    .unwrap();
    assert!(outcome(&mut core, slot).is_pending());
    let mut trailers = Vec::new();
    encoder::literal(b"x-trailer", b"1", 6, 0x40, &mut trailers);
    feed(
        &mut core,
        frame(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
            &trailers,
        ),
    )
    .unwrap();
    let Poll::Ready(Ok(info)) = outcome(&mut core, slot) else {
        panic!()
    };
    assert_eq!((info.status, info.body_bytes), (200, 3));
    assert_eq!(info.header_bytes, (7 + 3 + 6 + 1 + 6 + 40) + (9 + 1));
}

/// After the final head only trailers may come (RFC 9113 §8.1): a second head that does not
/// end the stream, or trailers with a :status, make the response malformed (both passed as
/// 200 before).
#[test]
fn a_second_head_or_trailers_with_a_status_are_malformed() {
    let end = flag::END_HEADERS | flag::END_STREAM;
    for (second_flags, second) in [
        (flag::END_HEADERS, status_block("200", &[])),
        (end, status_block("200", &[])),
    ] {
        let mut core = ready_core();
        let Poll::Ready(Ok(slot)) = open(&mut core) else {
            panic!()
        };
        let head = status_block("200", &[]);
        feed(&mut core, frame(kind::HEADERS, flag::END_HEADERS, 1, &head)).unwrap();
        core.out.clear();
        feed(&mut core, frame(kind::HEADERS, second_flags, 1, &second)).unwrap();
        assert_eq!(
            error_of(&mut core, slot),
            Some(SendError::Failed(ErrorKind::Protocol))
        );
        assert_eq!(sent_kinds(&core.out), [kind::RST_STREAM]);
    }
}

/// A body that is not the length its head announced makes the response malformed (RFC 9113
/// §8.1.1), as nghttp2 takes it: short is a truncated body, long a protocol error, and a bad
/// value a protocol error. A 204 and a HEAD response announce a length they do not carry. A
/// short body read as a success.
#[test]
fn a_body_unlike_its_content_length_fails_its_request() {
    let head_req = RequestSpec {
        method: http::Method::HEAD,
        ..req()
    };
    type Case = (
        &'static str,
        &'static str,
        &'static [u8],
        bool,
        Result<(), ErrorKind>,
    );
    let cases: [Case; 6] = [
        ("200", "10", b"ok", false, Err(ErrorKind::TruncatedBody)),
        ("200", "1", b"ok", false, Err(ErrorKind::Protocol)),
        ("200", "2", b"ok", false, Ok(())),
        ("200", "2x", b"ok", false, Err(ErrorKind::Protocol)),
        ("204", "10", b"", false, Ok(())),
        ("200", "10", b"", true, Ok(())),
    ];
    for (status, length, body, head, want) in cases {
        let mut core = ready_core();
        let request = if head { head_req.clone() } else { req() };
        let opened = core.poll_open(
            &request,
            Instant::now(),
            &mut Context::from_waker(Waker::noop()),
        );
        let Poll::Ready(Ok(slot)) = opened else {
            panic!()
        };
        let block = status_block(status, &[("content-length", length)]);
        let (flags, data) = match body.is_empty() {
            true => (flag::END_HEADERS | flag::END_STREAM, false),
            false => (flag::END_HEADERS, true),
        };
        feed(&mut core, frame(kind::HEADERS, flags, 1, &block)).unwrap();
        if data {
            feed(&mut core, frame(kind::DATA, flag::END_STREAM, 1, body)).unwrap();
        }
        let got = match outcome(&mut core, slot) {
            Poll::Ready(Ok(_)) => Ok(()),
            Poll::Ready(Err(SendError::Failed(kind))) => Err(kind),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            got,
            want,
            "{status} content-length {length}, {} body bytes",
            body.len()
        );
    }
}

/// A FIN after a stream's head and before its END_STREAM cuts the body short, as h1 counts
/// it; a stream whose head had not come yet lost its connection (connection_closed). Both
/// read connection_closed before.
#[test]
fn a_fin_mid_body_is_a_truncated_body() {
    let mut core = ready_core();
    let Poll::Ready(Ok(answered)) = open(&mut core) else {
        panic!()
    };
    let Poll::Ready(Ok(waiting)) = open(&mut core) else {
        panic!()
    };
    let block = status_block("200", &[]);
    feed(
        &mut core,
        frame(kind::HEADERS, flag::END_HEADERS, 1, &block),
    )
    .unwrap();
    feed(&mut core, frame(kind::DATA, 0, 1, b"part")).unwrap();
    core.end(CloseCause::Fin, None);
    assert_eq!(
        error_of(&mut core, answered),
        Some(SendError::Failed(ErrorKind::TruncatedBody))
    );
    assert_eq!(
        error_of(&mut core, waiting),
        Some(SendError::Failed(ErrorKind::ConnectionClosed))
    );
}

/// Field sections RFC 9113 §8.2 and §8.3 make malformed fail their request with
/// PROTOCOL_ERROR, as nghttp2 (h2load) takes them; a plain head succeeds.
#[test]
fn malformed_field_sections_fail_their_request() {
    let cases: [(&[(&str, &str)], bool); 7] = [
        (
            &[("server", "x"), ("set-cookie", "a"), ("set-cookie", "b")],
            true,
        ),
        (&[("Server", "x")], false),
        (&[("connection", "keep-alive")], false),
        (&[("transfer-encoding", "chunked")], false),
        (&[("server", "x"), (":status", "200")], false),
        (&[(":status", "200")], false),
        (&[(":path", "/")], false),
    ];
    for (fields, ok) in cases {
        let mut core = ready_core();
        let Poll::Ready(Ok(slot)) = open(&mut core) else {
            panic!()
        };
        let mut block = status_block("200", &[]);
        for (n, v) in fields {
            encoder::literal(n.as_bytes(), v.as_bytes(), 4, 0, &mut block);
        }
        let flags = flag::END_HEADERS | flag::END_STREAM;
        feed(&mut core, frame(kind::HEADERS, flags, 1, &block)).unwrap();
        let got = match outcome(&mut core, slot) {
            Poll::Ready(Ok(_)) => true,
            Poll::Ready(Err(SendError::Failed(ErrorKind::Protocol))) => false,
            other => panic!("{fields:?}: {other:?}"),
        };
        assert_eq!(got, ok, "{fields:?}");
    }
}

/// A stream dropped mid-run (a request timeout) is cancelled with RST_STREAM; streams dropped
/// at the run's end, after `quiesce`, are not: their burst of cancels read to servers as a
/// rapid-reset attack, answered with GOAWAY ENHANCE_YOUR_CALM that the report blamed on them.
#[test]
fn streams_dropped_at_the_end_of_the_run_are_not_cancelled() {
    let mut core = ready_core();
    let Poll::Ready(Ok(timed_out)) = open(&mut core) else {
        panic!()
    };
    let Poll::Ready(Ok(cut_off)) = open(&mut core) else {
        panic!()
    };
    core.out.clear();
    core.abandon(timed_out);
    assert_eq!(sent_kinds(&core.out), [kind::RST_STREAM]);
    core.out.clear();
    core.quiesce();
    core.abandon(cut_off);
    assert!(core.out.is_empty(), "{:?}", sent_kinds(&core.out));
}

#[test]
fn the_stream_limit_holds_requests_until_one_finishes() {
    let mut core = ready_core();
    let Poll::Ready(Ok(first)) = open(&mut core) else {
        panic!()
    };
    let Poll::Ready(Ok(_)) = open(&mut core) else {
        panic!()
    };
    assert!(open(&mut core).is_pending());
    feed(&mut core, frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 7])).unwrap();
    assert_eq!(
        error_of(&mut core, first),
        Some(SendError::Retry(RetryReason::Refused))
    );
    assert!(open(&mut core).is_ready());
}

#[test]
fn goaway_retries_streams_above_the_last_id_and_fails_the_rest_at_the_end() {
    let mut core = ready_core();
    let Poll::Ready(Ok(s1)) = open(&mut core) else {
        panic!()
    };
    let Poll::Ready(Ok(s3)) = open(&mut core) else {
        panic!()
    };
    feed(
        &mut core,
        frame(kind::GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]),
    )
    .unwrap();
    assert_eq!(
        error_of(&mut core, s3),
        Some(SendError::Retry(RetryReason::Goaway(0)))
    );
    assert!(!core.accepts_requests());
    assert_eq!(core.close_cause(), CloseCause::Goaway);
    assert_eq!(
        open(&mut core),
        Poll::Ready(Err(SendError::Retry(RetryReason::Goaway(0))))
    );
    core.end(CloseCause::Fin, None);
    assert_eq!(
        error_of(&mut core, s1),
        Some(SendError::Failed(ErrorKind::Goaway(0)))
    );
}

/// A GOAWAY's error code goes with the retries it causes: when they run out, the request fails
/// as `goaway(INTERNAL_ERROR)`, not `goaway(NO_ERROR)` whatever the server said.
#[test]
fn streams_above_a_goaway_retry_with_its_code() {
    let mut core = ready_core();
    let Poll::Ready(Ok(_s1)) = open(&mut core) else {
        panic!()
    };
    let Poll::Ready(Ok(s3)) = open(&mut core) else {
        panic!()
    };
    feed(
        &mut core,
        frame(kind::GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 2]),
    )
    .unwrap();
    assert_eq!(
        error_of(&mut core, s3),
        Some(SendError::Retry(RetryReason::Goaway(2)))
    );
    // The connection's close is counted as a GOAWAY with an error code.
    assert_eq!(core.goaway_error(), Some(2));
    assert_eq!(
        open(&mut core),
        Poll::Ready(Err(SendError::Retry(RetryReason::Goaway(2))))
    );
}

/// Frames only a stream we opened may carry, on stream 0, on a server-initiated (even) stream or
/// on one not opened yet, and the window updates RFC 9113 §6.9 forbids, are connection errors
/// (a broken server used to pass for a healthy one).
#[test]
fn frames_on_streams_we_did_not_open_are_connection_errors() {
    for (kind, id, payload) in [
        (kind::DATA, 0, &[][..]),
        (kind::HEADERS, 0, &[0x88][..]),
        (kind::HEADERS, 2, &[0x88][..]),
        (kind::HEADERS, 5, &[0x88][..]),
        (kind::RST_STREAM, 0, &[0, 0, 0, 8][..]),
        (kind::RST_STREAM, 7, &[0, 0, 0, 8][..]),
        (kind::WINDOW_UPDATE, 0, &[0, 0, 0, 0][..]),
        (kind::WINDOW_UPDATE, 9, &[0, 0, 0, 1][..]),
        (kind::WINDOW_UPDATE, 0, &[0x7f, 0xff, 0xff, 0xff][..]),
    ] {
        let mut core = ready_core();
        let Poll::Ready(Ok(_)) = open(&mut core) else {
            panic!("a stream opens")
        };
        let flags = if kind == kind::HEADERS {
            flag::END_HEADERS
        } else {
            0
        };
        assert!(
            feed(&mut core, frame(kind, flags, id, payload)).is_err(),
            "frame type {kind} on stream {id}: {payload:?}"
        );
    }
    // A SETTINGS acknowledgement carries nothing.
    let mut core = ready_core();
    assert_eq!(
        feed(&mut core, frame(kind::SETTINGS, flag::ACK, 0, &[0; 6])),
        Err(ConnError(super::code::FRAME_SIZE_ERROR))
    );
    // A server may not enable push (RFC 9113 §6.5.2); GOAWAY and PING belong to the
    // connection (§6.8, §6.7): all PROTOCOL_ERROR (each was accepted, PING on a stream got
    // FRAME_SIZE_ERROR).
    for (kind, id, payload) in [
        (kind::SETTINGS, 0, &[0, 2, 0, 0, 0, 1][..]),
        (kind::SETTINGS, 0, &[0, 2, 0, 0, 0, 7][..]),
        (kind::GOAWAY, 1, &[0, 0, 0, 0, 0, 0, 0, 0][..]),
        (kind::PING, 1, &[0; 8][..]),
    ] {
        let mut core = ready_core();
        assert_eq!(
            feed(&mut core, frame(kind, 0, id, payload)),
            Err(ConnError(super::code::PROTOCOL_ERROR)),
            "frame type {kind} on stream {id}: {payload:?}"
        );
    }
    let mut core = ready_core();
    feed(&mut core, frame(kind::SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0])).unwrap();
    // A stream's window past 2^31-1 breaks that stream only.
    let mut core = ready_core();
    let Poll::Ready(Ok(slot)) = open(&mut core) else {
        panic!("a stream opens")
    };
    feed(
        &mut core,
        frame(kind::WINDOW_UPDATE, 0, 1, &[0x7f, 0xff, 0xff, 0xff]),
    )
    .unwrap();
    assert_eq!(
        error_of(&mut core, slot),
        Some(SendError::Failed(ErrorKind::Protocol))
    );
}

#[test]
fn ping_is_answered_and_protocol_errors_are_connection_errors() {
    let mut core = ready_core();
    feed(&mut core, frame(kind::PING, 0, 0, &[1; 8])).unwrap();
    assert_eq!(sent_kinds(&core.out), [kind::PING]);
    assert_eq!(&core.out[9..], &[1; 8]);
    assert!(feed(&mut core, frame(kind::PUSH_PROMISE, 0, 1, &[0; 4])).is_err());
    assert!(feed(&mut core, frame(kind::PING, 0, 0, &[1; 3])).is_err());
    // A block that is not valid HPACK breaks the table for good.
    let Poll::Ready(Ok(_)) = open(&mut core) else {
        panic!("a stream opens")
    };
    core.out.clear();
    assert_eq!(
        feed(
            &mut core,
            frame(kind::HEADERS, flag::END_HEADERS, 1, &[0x80])
        ),
        Err(ConnError(super::code::COMPRESSION_ERROR))
    );
}

#[test]
fn the_first_frame_must_be_settings_and_settings_are_acked() {
    let mut core = ConnCore::new(WireCounter::new_shared(), H2Windows::default());
    assert!(feed(&mut core, frame(kind::PING, 0, 0, &[0; 8])).is_err());
    let mut core = ConnCore::new(WireCounter::new_shared(), H2Windows::default());
    core.out.clear();
    feed(&mut core, frame(kind::SETTINGS, 0, 0, &[])).unwrap();
    assert_eq!(sent_kinds(&core.out), [kind::SETTINGS]);
    assert_eq!(core.out[4], flag::ACK);
}

#[test]
fn a_request_body_waits_for_window_updates() {
    let mut core = ready_core();
    // The server allows 10 bytes per stream to start with.
    feed(&mut core, frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10])).unwrap();
    core.out.clear();
    let mut post = req();
    post.body = bytes::Bytes::from_static(b"0123456789abcdefghij");
    let cx = &mut Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(_)) = core.poll_open(&post, Instant::now(), cx) else {
        panic!()
    };
    assert_eq!(sent_kinds(&core.out), [kind::HEADERS, kind::DATA]);
    core.out.clear();
    feed(&mut core, frame(kind::WINDOW_UPDATE, 0, 1, &[0, 0, 0, 10])).unwrap();
    assert_eq!(sent_kinds(&core.out), [kind::DATA]);
    assert_eq!(core.out[4], flag::END_STREAM);
}

/// The error a stream ended with (`None`: pending or succeeded).
fn error_of(core: &mut ConnCore, slot: usize) -> Option<SendError> {
    match outcome(core, slot) {
        Poll::Ready(Err(e)) => Some(e),
        _ => None,
    }
}

/// Random frames from a hostile server never panic the core; a connection error ends it.
#[test]
fn random_frames_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(9113);
    for _ in 0..300 {
        let mut core = ready_core();
        for _ in 0..rng.random_range(0..4) {
            let _ = open(&mut core);
        }
        for _ in 0..rng.random_range(1..30) {
            let len = rng.random_range(0..40);
            let payload: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let kind = rng.random_range(0..11);
            let stream = rng.random_range(0..8);
            if let Err(error) = feed(&mut core, frame(kind, rng.random(), stream, &payload)) {
                core.fail(error);
                assert!(!core.accepts_requests());
                break;
            }
        }
    }
}

/// Counts its wakes.
#[derive(Default)]
struct Wakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A request polled again and again at the stream limit waits once: a waker per poll piled up
/// while timed-out requests left theirs behind (70 MB in 30 s against a server that lowered
/// its limit to 1 and went silent).
#[test]
fn a_request_waiting_for_a_stream_is_registered_once() {
    let mut core = ready_core();
    assert!(open(&mut core).is_ready() && open(&mut core).is_ready());
    let wakes = std::sync::Arc::new(Wakes::default());
    let waker = Waker::from(wakes.clone());
    for _ in 0..1000 {
        let cx = &mut Context::from_waker(&waker);
        assert!(core.poll_open(&req(), Instant::now(), cx).is_pending());
    }
    assert_eq!(core.capacity_waiters.len(), 1);
    feed(&mut core, frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 7])).unwrap();
    assert_eq!(wakes.0.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// A waiting request that was dropped leaves its task's waker behind, where a closing stream
/// would wake it instead of a request still waiting; its drop wakes every waiter, and they
/// register afresh.
#[test]
fn a_dropped_waiter_hands_its_wake_up_to_the_others() {
    let mut core = ready_core();
    assert!(open(&mut core).is_ready() && open(&mut core).is_ready());
    let (gone, live) = (
        std::sync::Arc::new(Wakes::default()),
        std::sync::Arc::new(Wakes::default()),
    );
    for w in [&live, &gone] {
        let waker = Waker::from(w.clone());
        assert!(core
            .poll_open(&req(), Instant::now(), &mut Context::from_waker(&waker))
            .is_pending());
    }
    // `gone`'s request is dropped (SendRequest's drop calls this).
    core.wake_room_waiters();
    assert_eq!(live.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(core.capacity_waiters.is_empty());
}

/// While the frames queued for the server pass MAX_OUT_BACKLOG (a server that reads nothing,
/// so the driver cannot take them), no stream opens and no body grows the queue; once the
/// driver takes them, waiting requests are woken and bodies go on.
#[test]
fn requests_wait_while_the_server_reads_nothing() {
    let mut core = ConnCore::new(WireCounter::new_shared(), H2Windows::default());
    // No stream limit to speak of, and windows wide open.
    feed(
        &mut core,
        frame(kind::SETTINGS, 0, 0, &[0, 3, 0, 0x10, 0, 0]),
    )
    .unwrap();
    feed(
        &mut core,
        frame(kind::SETTINGS, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]),
    )
    .unwrap();
    feed(
        &mut core,
        frame(kind::WINDOW_UPDATE, 0, 0, &[0x7f, 0, 0, 0]),
    )
    .unwrap();
    core.out.clear();
    let mut post = req();
    post.body = bytes::Bytes::from(vec![b'x'; 100 * 1024]);
    let wakes = std::sync::Arc::new(Wakes::default());
    let waker = Waker::from(wakes.clone());
    let cx = &mut Context::from_waker(&waker);
    let mut opened = 0;
    while core.poll_open(&post, Instant::now(), cx).is_ready() {
        opened += 1;
        assert!(opened < 100, "{} bytes queued", core.out.len());
    }
    let queued = core.out.len();
    assert!(queued >= super::MAX_OUT_BACKLOG, "{queued}");
    assert!(queued < super::MAX_OUT_BACKLOG + 80 * 1024, "{queued}");
    // A body held back: the last stream's DATA stopped at the bound.
    assert!(!core.bodies.is_empty());
    let mut writing = Vec::new();
    core.take_out(&mut writing);
    assert_eq!(writing.len(), queued);
    assert_eq!(wakes.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(!core.out.is_empty(), "the held-back body goes on");
    assert!(core.poll_open(&post, Instant::now(), cx).is_ready());
}

/// Empty CONTINUATIONs are allowed up to the reference server's limit, then end the connection
/// with ENHANCE_YOUR_CALM: they grow no buffer, so the head limit never caught them.
#[test]
fn empty_continuations_past_the_limit_are_a_flood() {
    for (empties, ends) in [
        (httpvs_h2wire::frame::MAX_EMPTY_CONTINUATIONS, true),
        (17, false),
    ] {
        let mut core = ready_core();
        let Poll::Ready(Ok(slot)) = open(&mut core) else {
            panic!()
        };
        let block = status_block("200", &[]);
        feed(&mut core, frame(kind::HEADERS, flag::END_STREAM, 1, &block)).unwrap();
        let mut result = Ok(());
        for _ in 0..empties {
            result = result.and_then(|()| feed(&mut core, frame(kind::CONTINUATION, 0, 1, &[])));
        }
        if ends {
            result.unwrap();
            feed(
                &mut core,
                frame(kind::CONTINUATION, flag::END_HEADERS, 1, &[]),
            )
            .unwrap();
            assert!(matches!(outcome(&mut core, slot), Poll::Ready(Ok(_))));
        } else {
            assert_eq!(result, Err(ConnError(super::code::ENHANCE_YOUR_CALM)));
        }
    }
}

/// A breach names what we answered and the frame that broke the protocol; the first breach
/// is the one named. A trace's failed request read only "the server's bytes broke the
/// protocol".
#[test]
fn a_breach_names_our_answer_and_the_servers_frame() {
    let mut core = ready_core();
    assert_eq!(core.protocol_breach(), None);
    let (ping, payload) = frame(kind::PING, 0, 0, &[0; 7]);
    let error = feed(&mut core, (ping, payload)).expect_err("a 7-byte PING");
    core.fail_on(&ping, error);
    let (later, _) = frame(kind::DATA, 0, 1, &[0; 3]);
    core.fail_on(&later, ConnError(super::code::PROTOCOL_ERROR));
    assert_eq!(
        core.protocol_breach().as_deref(),
        Some("we answered GOAWAY FRAME_SIZE_ERROR to its 7-byte PING frame on stream 0")
    );
}

/// A header block read once is kept only while the HPACK table stays as it was: the same bytes
/// that named `content-length: 2` by index name `content-length: 5` once a new entry has taken
/// that index, and the response is judged by what they say now (a kept reading would have
/// passed a 2-byte body as whole).
#[test]
fn a_kept_header_block_is_read_again_once_the_table_changes() {
    let mut core = ready_core();
    let mut exchange = |block: &[u8], body: &[u8]| {
        let Poll::Ready(Ok(slot)) = open(&mut core) else {
            panic!("no stream")
        };
        let id = core.next_stream_id - 2;
        feed(
            &mut core,
            frame(kind::HEADERS, flag::END_HEADERS, id, block),
        )
        .unwrap();
        feed(&mut core, frame(kind::DATA, flag::END_STREAM, id, body)).unwrap();
        match outcome(&mut core, slot) {
            Poll::Ready(Ok(_)) => Ok(()),
            Poll::Ready(Err(SendError::Failed(kind))) => Err(kind),
            other => panic!("{other:?}"),
        }
    };
    // `content-length: 2` enters the table at index 62.
    assert_eq!(
        exchange(&status_block("200", &[("content-length", "2")]), b"ok"),
        Ok(())
    );
    // `:status: 200` not indexed, then index 62: changes nothing, so it is kept.
    let mut by_index = Vec::new();
    encoder::literal(b":status", b"200", 4, 0, &mut by_index);
    by_index.push(0x80 | 62);
    assert_eq!(exchange(&by_index, b"ok"), Ok(()));
    assert_eq!(
        exchange(&by_index, b"ok"),
        Ok(()),
        "read from what was kept"
    );
    // `content-length: 5` takes index 62: the same bytes now ask for five.
    assert_eq!(
        exchange(&status_block("200", &[("content-length", "5")]), b"hello"),
        Ok(())
    );
    assert_eq!(exchange(&by_index, b"ok"), Err(ErrorKind::TruncatedBody));
}
