//! An HTTP/2 frame tap: follows the plaintext byte stream in each direction, frame by frame
//! (9-byte self-delimiting headers, RFC 9113 §4.1), without taking part in the protocol.
//!
//! It serves the header accounting of the load generator and, later, the frame trace: an
//! observer sees every frame header and may ask for the whole payload of the frames it cares
//! about (SETTINGS, GOAWAY, HEADERS to decode). Payloads it does not ask for are skipped.

use crate::protocol::wire::WireTap;

pub use httpvs_h2wire::frame::{flag, kind, CLIENT_PREFACE};

/// Which way a frame travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server.
    Sent,
    /// Server to client.
    Received,
}

pub use httpvs_h2wire::frame::FrameHeader;

/// Receives the frames a [`FrameTap`] finds.
pub trait FrameObserver {
    /// A frame header was read; return true to get the whole payload in [`Self::on_payload`].
    fn on_header(&mut self, dir: Direction, header: &FrameHeader) -> bool;
    /// The complete payload of a frame whose header asked for it.
    fn on_payload(&mut self, dir: Direction, header: &FrameHeader, payload: &[u8]) {
        let _ = (dir, header, payload);
    }
    /// The last byte of a frame whose header did not ask for its payload went by.
    fn on_skipped(&mut self, dir: Direction, header: &FrameHeader) {
        let _ = (dir, header);
    }
}

/// Follows one direction of an HTTP/2 byte stream.
#[derive(Debug)]
pub struct FrameTap {
    dir: Direction,
    preface_left: usize,
    head: [u8; 9],
    head_len: usize,
    current: Option<FrameHeader>,
    payload_left: usize,
    collect: bool,
    payload: Vec<u8>,
}

impl FrameTap {
    /// A tap for `dir`; the client-to-server direction first skips the connection preface.
    pub fn new(dir: Direction) -> FrameTap {
        FrameTap {
            dir,
            preface_left: match dir {
                Direction::Sent => CLIENT_PREFACE.len(),
                Direction::Received => 0,
            },
            head: [0; 9],
            head_len: 0,
            current: None,
            payload_left: 0,
            collect: false,
            payload: Vec::new(),
        }
    }

    /// Follows `bytes`, the next bytes of this direction, reporting frames to `observer`.
    pub fn feed<O: FrameObserver>(&mut self, mut bytes: &[u8], observer: &mut O) {
        if self.preface_left > 0 {
            let skip = self.preface_left.min(bytes.len());
            self.preface_left -= skip;
            bytes = &bytes[skip..];
        }
        while !bytes.is_empty() {
            match self.current {
                None => {
                    let take = (9 - self.head_len).min(bytes.len());
                    self.head[self.head_len..self.head_len + take].copy_from_slice(&bytes[..take]);
                    self.head_len += take;
                    bytes = &bytes[take..];
                    if self.head_len == 9 {
                        self.start_frame(observer);
                    }
                }
                Some(header) => {
                    let take = self.payload_left.min(bytes.len());
                    if self.collect {
                        self.payload.extend_from_slice(&bytes[..take]);
                    }
                    self.payload_left -= take;
                    bytes = &bytes[take..];
                    if self.payload_left == 0 {
                        self.end_frame(header, observer);
                    }
                }
            }
        }
    }

    /// Where the stream stopped, if inside a frame: the header (`None` when it stopped
    /// inside the 9 header bytes) and how many of its bytes came.
    pub fn cut_off(&self) -> Option<(Option<FrameHeader>, usize)> {
        match self.current {
            Some(header) => Some((Some(header), header.length as usize - self.payload_left)),
            None if self.head_len > 0 => Some((None, self.head_len)),
            None => None,
        }
    }

    fn start_frame<O: FrameObserver>(&mut self, observer: &mut O) {
        let header = FrameHeader::parse(&self.head);
        self.head_len = 0;
        self.collect = observer.on_header(self.dir, &header);
        self.payload_left = header.length as usize;
        self.current = Some(header);
        if self.payload_left == 0 {
            self.end_frame(header, observer);
        }
    }

    fn end_frame<O: FrameObserver>(&mut self, header: FrameHeader, observer: &mut O) {
        if self.collect {
            observer.on_payload(self.dir, &header, &self.payload);
            self.payload.clear();
            // A one-off large payload (a big HEADERS block) should not pin its buffer.
            self.payload.shrink_to(1024);
        } else {
            observer.on_skipped(self.dir, &header);
        }
        self.collect = false;
        self.current = None;
    }
}

/// Both directions of one connection's frames, shown to one observer; plugs into `TapIo`.
#[derive(Debug)]
pub struct FrameTaps<O> {
    sent: FrameTap,
    received: FrameTap,
    /// The observer the frames go to.
    pub observer: O,
}

impl<O: FrameObserver> FrameTaps<O> {
    /// Taps for a client connection, starting before the preface.
    pub fn new(observer: O) -> Self {
        FrameTaps {
            sent: FrameTap::new(Direction::Sent),
            received: FrameTap::new(Direction::Received),
            observer,
        }
    }
}

impl<O: FrameObserver> WireTap for FrameTaps<O> {
    fn sent(&mut self, bytes: &[u8]) {
        self.sent.feed(bytes, &mut self.observer);
    }

    fn received(&mut self, bytes: &[u8]) {
        self.received.feed(bytes, &mut self.observer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Log {
        frames: Vec<(Direction, FrameHeader)>,
        payloads: Vec<Vec<u8>>,
    }

    impl FrameObserver for Log {
        fn on_header(&mut self, dir: Direction, header: &FrameHeader) -> bool {
            self.frames.push((dir, *header));
            header.kind == kind::GOAWAY
        }

        fn on_payload(&mut self, _: Direction, _: &FrameHeader, payload: &[u8]) {
            self.payloads.push(payload.to_vec());
        }
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn follows_frames_split_at_every_byte() {
        let mut wire = CLIENT_PREFACE.to_vec();
        wire.extend(frame(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]));
        wire.extend(frame(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
            b"abc",
        ));
        wire.extend(frame(kind::GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]));
        wire.extend(frame(kind::PING, flag::ACK, 0, &[0; 8]));
        let mut tap = FrameTap::new(Direction::Sent);
        let mut log = Log::default();
        for b in &wire {
            tap.feed(std::slice::from_ref(b), &mut log);
        }
        let kinds: Vec<u8> = log.frames.iter().map(|(_, h)| h.kind).collect();
        assert_eq!(
            kinds,
            [kind::SETTINGS, kind::HEADERS, kind::GOAWAY, kind::PING]
        );
        assert_eq!(log.frames[1].1.length, 3);
        assert_eq!(log.frames[1].1.stream_id, 1);
        assert!(log.frames[1].1.has(flag::END_HEADERS));
        assert_eq!(log.payloads, vec![vec![0, 0, 0, 1, 0, 0, 0, 0]]);
    }

    #[test]
    fn follows_frames_in_one_piece_and_clears_the_reserved_bit() {
        let mut wire = frame(kind::DATA, 0, 0x8000_0003, &[7; 20]);
        wire.extend(frame(kind::GOAWAY, 0, 0, &[0, 0, 0, 5, 0, 0, 0, 2]));
        let mut tap = FrameTap::new(Direction::Received);
        let mut log = Log::default();
        tap.feed(&wire, &mut log);
        assert_eq!(log.frames[0].1.stream_id, 3);
        assert_eq!(log.frames[0].0, Direction::Received);
        assert_eq!(log.payloads.len(), 1);
    }

    /// Random frame sequences, fed in random pieces, yield the same frames as in one piece.
    #[test]
    fn random_splits_find_the_same_frames() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for _ in 0..300 {
            let mut wire = Vec::new();
            for _ in 0..rng.random_range(1..8) {
                let len = rng.random_range(0..100usize);
                let kind = if rng.random_bool(0.2) {
                    kind::GOAWAY
                } else {
                    rng.random_range(0..10)
                };
                let payload: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                wire.extend(frame(kind, rng.random(), rng.random(), &payload));
            }
            let mut whole = Log::default();
            FrameTap::new(Direction::Received).feed(&wire, &mut whole);
            let mut pieces = Log::default();
            let mut tap = FrameTap::new(Direction::Received);
            let mut at = 0;
            while at < wire.len() {
                let step = rng.random_range(1..30).min(wire.len() - at);
                tap.feed(&wire[at..at + step], &mut pieces);
                at += step;
            }
            assert_eq!(whole.frames, pieces.frames);
            assert_eq!(whole.payloads, pieces.payloads);
        }
    }
}
