//! Receive windows in the core without sockets: what the preface advertises, WINDOW_UPDATEs
//! as a compliant server spends small windows, and a server that overruns them.

use super::super::frame_tap::{flag, kind, Direction, FrameHeader, FrameObserver, FrameTap};
use super::super::frame_write::{code, setting};
use super::tests::{feed, frame, open, outcome, status_block};
use super::{ConnCore, ConnError};
use crate::error::ErrorKind;
use crate::protocol::window::{H2Windows, H2_DEFAULT_WINDOW};
use crate::protocol::wire::WireCounter;
use crate::protocol::SendError;
use std::task::Poll;

/// The frames a core queued that a window test looks at.
#[derive(Default)]
struct Queued {
    /// SETTINGS_INITIAL_WINDOW_SIZE, if a SETTINGS frame carried it.
    initial_window: Option<u32>,
    /// WINDOW_UPDATEs: stream id and increment.
    updates: Vec<(u32, u32)>,
    /// RST_STREAMs: stream id and error code.
    resets: Vec<(u32, u32)>,
}

impl FrameObserver for Queued {
    fn on_header(&mut self, _: Direction, h: &FrameHeader) -> bool {
        matches!(
            h.kind,
            kind::SETTINGS | kind::WINDOW_UPDATE | kind::RST_STREAM
        )
    }

    fn on_payload(&mut self, _: Direction, h: &FrameHeader, payload: &[u8]) {
        let word = |p: &[u8]| u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
        match h.kind {
            kind::SETTINGS => {
                for s in payload.chunks_exact(6) {
                    if u16::from_be_bytes([s[0], s[1]]) == setting::INITIAL_WINDOW_SIZE {
                        self.initial_window = Some(word(&s[2..]));
                    }
                }
            }
            kind::WINDOW_UPDATE => self
                .updates
                .push((h.stream_id, word(payload) & 0x7fff_ffff)),
            _ => self.resets.push((h.stream_id, word(payload))),
        }
    }
}

/// What the core queued since the last call (its output is then cleared); `preface` when the
/// output starts with the connection preface.
fn take_queued(core: &mut ConnCore, preface: bool) -> Queued {
    let mut queued = Queued::default();
    let dir = if preface {
        Direction::Sent
    } else {
        Direction::Received
    };
    FrameTap::new(dir).feed(&core.out, &mut queued);
    core.out.clear();
    queued
}

/// A compliant server's windows towards the client, spent by DATA and refilled by updates.
struct ServerView {
    stream: i64,
    connection: i64,
}

/// Runs one response of `body` bytes, sent in DATA frames of at most `frame_max` bytes by a
/// server that never exceeds the windows the core advertised and sends again as soon as an
/// update lets it. Returns the body bytes the core counted and every WINDOW_UPDATE it sent.
fn transfer(windows: H2Windows, body: usize, frame_max: usize) -> (u64, Vec<(u32, u32)>) {
    let mut core = ConnCore::new(WireCounter::new_shared(), windows);
    let advertised = take_queued(&mut core, true);
    assert_eq!(advertised.initial_window, Some(windows.stream));
    let opening: u32 = advertised.updates.iter().map(|&(_, n)| n).sum();
    let mut server = ServerView {
        stream: i64::from(advertised.initial_window.unwrap_or(65_535)),
        connection: 65_535 + i64::from(opening),
    };
    feed(&mut core, frame(kind::SETTINGS, 0, 0, &[])).unwrap();
    let Poll::Ready(Ok(slot)) = open(&mut core) else {
        panic!("the stream opens")
    };
    let head = status_block("200", &[]);
    feed(&mut core, frame(kind::HEADERS, flag::END_HEADERS, 1, &head)).unwrap();
    take_queued(&mut core, false);
    let mut updates = Vec::new();
    let mut left = body;
    while left > 0 {
        let room = server.stream.min(server.connection).max(0) as usize;
        let n = left.min(frame_max).min(room);
        assert!(
            n > 0,
            "stalled: the server has no window and no update came ({updates:?})"
        );
        left -= n;
        let flags = if left == 0 { flag::END_STREAM } else { 0 };
        feed(&mut core, frame(kind::DATA, flags, 1, &vec![7; n])).unwrap();
        server.stream -= n as i64;
        server.connection -= n as i64;
        for (id, inc) in take_queued(&mut core, false).updates {
            match id {
                0 => server.connection += i64::from(inc),
                _ => server.stream += i64::from(inc),
            }
            updates.push((id, inc));
        }
    }
    let Poll::Ready(Ok(info)) = outcome(&mut core, slot) else {
        panic!("the response completes")
    };
    (info.body_bytes, updates)
}

#[test]
fn the_preface_advertises_the_windows() {
    let mut core = ConnCore::new(WireCounter::new_shared(), H2Windows::default());
    let q = take_queued(&mut core, true);
    assert_eq!(q.initial_window, Some(H2_DEFAULT_WINDOW));
    assert_eq!(q.updates, [(0, H2_DEFAULT_WINDOW - 65_535)]);
    // A connection window of exactly 65,535 needs no update at all.
    let windows = H2Windows {
        stream: 16 << 10,
        connection: 65_535,
    };
    let mut core = ConnCore::new(WireCounter::new_shared(), windows);
    let q = take_queued(&mut core, true);
    assert_eq!(q.initial_window, Some(16 << 10));
    assert!(q.updates.is_empty(), "{:?}", q.updates);
}

#[test]
fn a_16k_stream_window_refills_and_a_1mib_response_completes() {
    let windows = H2Windows {
        stream: 16 << 10,
        ..H2Windows::default()
    };
    for frame_max in [16_384, 5_000, 1_000] {
        let (body, updates) = transfer(windows, 1 << 20, frame_max);
        assert_eq!(body, 1 << 20, "frames of {frame_max}");
        let stream: Vec<u32> = updates
            .iter()
            .filter(|&&(id, _)| id == 1)
            .map(|&(_, n)| n)
            .collect();
        // Each update gives back at least half the window, and never more than was received.
        assert!(stream.iter().all(|&n| n >= 8 << 10), "{stream:?}");
        let given: u64 = stream.iter().map(|&n| u64::from(n)).sum();
        assert!(
            given <= 1 << 20 && given > (1 << 20) - (32 << 10),
            "{given}"
        );
        assert!(stream.len() >= 32, "{} updates", stream.len());
        // The connection window (1 GiB) needs none for 1 MiB.
        assert!(updates.iter().all(|&(id, _)| id == 1), "{updates:?}");
    }
}

#[test]
fn a_64k_connection_window_refills_and_a_1mib_response_completes() {
    let windows = H2Windows {
        connection: 65_535,
        ..H2Windows::default()
    };
    let (body, updates) = transfer(windows, 1 << 20, 16_384);
    assert_eq!(body, 1 << 20);
    assert!(updates.iter().all(|&(id, n)| id == 0 && n >= 32_767));
    assert!(updates.len() >= 16, "{updates:?}");
    // A one-byte window still moves, one byte at a time, with no increment of 0.
    let one = H2Windows {
        stream: 1,
        connection: 65_535,
    };
    let (body, updates) = transfer(one, 100, 16_384);
    assert_eq!(body, 100);
    assert_eq!(updates.iter().filter(|&&(id, _)| id == 1).count(), 99);
    assert!(updates.iter().all(|&(_, n)| n > 0));
}

#[test]
fn a_server_past_a_window_breaks_the_stream_or_the_connection() {
    let windows = H2Windows {
        stream: 1_000,
        connection: 65_535,
    };
    let mut core = ConnCore::new(WireCounter::new_shared(), windows);
    feed(&mut core, frame(kind::SETTINGS, 0, 0, &[])).unwrap();
    let Poll::Ready(Ok(slot)) = open(&mut core) else {
        panic!()
    };
    let head = status_block("200", &[]);
    feed(&mut core, frame(kind::HEADERS, flag::END_HEADERS, 1, &head)).unwrap();
    take_queued(&mut core, true);
    feed(&mut core, frame(kind::DATA, 0, 1, &[0; 1_001])).unwrap();
    assert!(matches!(
        outcome(&mut core, slot),
        Poll::Ready(Err(SendError::Failed(ErrorKind::Protocol)))
    ));
    let q = take_queued(&mut core, false);
    assert_eq!(q.resets, [(1, code::FLOW_CONTROL_ERROR)]);
    // Past the connection's window (65,535 less what stream 1 took) ends the connection.
    let Poll::Ready(Ok(_)) = open(&mut core) else {
        panic!()
    };
    assert_eq!(
        feed(&mut core, frame(kind::DATA, 0, 3, &[0; 65_000])),
        Err(ConnError(code::FLOW_CONTROL_ERROR))
    );
}
