//! HTTP/3 frame headers (RFC 9114 §7.1): varint and frame-header writers, and a sans-IO scanner
//! that finds HEADERS sizes and GOAWAY ids in a stream's bytes without buffering payloads.
//!
//! The owned client reads the server's control stream through a [`FrameScanner`] (GOAWAY ids).
//! The h3 crate exposes neither QPACK-encoded header sizes nor the GOAWAY stream id, so for the
//! reference client the tap in `tap.rs` feeds every received chunk through scanners too. A scanner
//! only decodes frame type and length varints (and a GOAWAY payload): a few byte reads per frame.

/// HTTP/3 frame type HEADERS.
pub const FRAME_HEADERS: u64 = 0x01;
/// HTTP/3 frame type GOAWAY.
pub const FRAME_GOAWAY: u64 = 0x07;
/// HTTP/3 frame type DATA.
pub const FRAME_DATA: u64 = 0x00;
/// HTTP/3 frame type SETTINGS.
pub const FRAME_SETTINGS: u64 = 0x04;
/// HTTP/3 frame type PUSH_PROMISE.
pub const FRAME_PUSH_PROMISE: u64 = 0x05;
/// HTTP/3 frame type MAX_PUSH_ID (client to server only).
pub const FRAME_MAX_PUSH_ID: u64 = 0x0d;
/// Unidirectional stream type of the control stream.
pub const STREAM_TYPE_CONTROL: u64 = 0x00;

/// Appends `value` as a QUIC variable-length integer (RFC 9000 §16); values must be < 2^62.
pub fn put_varint(out: &mut Vec<u8>, value: u64) {
    match value {
        0..=63 => out.push(value as u8),
        64..=16_383 => out.extend_from_slice(&((value as u16) | 0x4000).to_be_bytes()),
        16_384..=1_073_741_823 => {
            out.extend_from_slice(&((value as u32) | 0x8000_0000).to_be_bytes())
        }
        _ => out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Appends a frame header: type and payload length.
pub fn put_frame_header(out: &mut Vec<u8>, ty: u64, len: u64) {
    put_varint(out, ty);
    put_varint(out, len);
}

pub use httpvs_h2wire::varint::{read_varint, PartialVarint};

/// What the scanner found in the bytes fed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameEvent {
    /// A frame header: its type and payload length.
    Frame {
        /// Frame type.
        ty: u64,
        /// Payload length in bytes.
        len: u64,
    },
    /// A GOAWAY frame carrying this stream id.
    Goaway(u64),
}

/// Where the scanner is in the stream.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Reading the unidirectional stream type (uni streams only).
    StreamType,
    /// Reading a frame type.
    FrameType,
    /// Reading a frame length, after its type.
    FrameLength { ty: u64 },
    /// Reading a GOAWAY payload (one varint), `remaining` bytes of payload left.
    GoawayId { remaining: u64 },
    /// Skipping `remaining` payload bytes (of a DATA frame when `data`).
    Skip { remaining: u64, data: bool },
    /// Not a stream we scan (QPACK encoder/decoder, push, unknown): ignore everything.
    Ignore,
}

/// Scans the frame headers of one HTTP/3 stream as its bytes arrive in arbitrary chunks.
#[derive(Debug, Clone)]
pub struct FrameScanner {
    state: State,
    varint: PartialVarint,
    /// A GOAWAY's id counts on the control stream only: on a request stream the frame is an
    /// error of its own (H3_FRAME_UNEXPECTED), and its id no GOAWAY of the server's.
    control: bool,
    /// DATA payload bytes that went by (not announced: came).
    data_bytes: u64,
}

impl FrameScanner {
    /// A scanner for a request (bidirectional) stream: frames start at the first byte.
    pub fn request_stream() -> Self {
        FrameScanner {
            state: State::FrameType,
            varint: PartialVarint::default(),
            control: false,
            data_bytes: 0,
        }
    }

    /// A scanner for a server-initiated unidirectional stream: only the control stream is scanned.
    pub fn uni_stream() -> Self {
        FrameScanner {
            state: State::StreamType,
            varint: PartialVarint::default(),
            control: true,
            data_bytes: 0,
        }
    }

    /// The DATA payload bytes that went by so far (of frames whole or not).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Whether the bytes so far stop inside a frame (its header or its payload): a stream
    /// ending there cut that frame short (H3_FRAME_ERROR, RFC 9114 §7.1).
    pub fn inside_a_frame(&self) -> bool {
        !matches!(self.state, State::FrameType) || self.varint.is_partial()
    }

    /// Whether this is the peer's control stream (its type byte has been read).
    pub fn is_control_stream(&self) -> bool {
        !matches!(self.state, State::StreamType | State::Ignore)
    }

    /// Feeds the next chunk of stream bytes, reporting each frame header (and GOAWAY id) found.
    pub fn feed(&mut self, mut input: &[u8], mut on_event: impl FnMut(FrameEvent)) {
        while !input.is_empty() {
            match self.state {
                State::Ignore => return,
                State::Skip { remaining, data } => {
                    let step = remaining.min(input.len() as u64);
                    input = &input[step as usize..];
                    if data {
                        self.data_bytes += step;
                    }
                    self.state = if step == remaining {
                        State::FrameType
                    } else {
                        State::Skip {
                            remaining: remaining - step,
                            data,
                        }
                    };
                }
                _ => {
                    let (value, used) = self.varint.push(input);
                    input = &input[used..];
                    if let Some(value) = value {
                        self.on_varint(value, used as u64, &mut on_event);
                    } else if let State::GoawayId { remaining } = self.state {
                        self.state = State::GoawayId {
                            remaining: remaining.saturating_sub(used as u64),
                        };
                    }
                }
            }
        }
    }

    /// Advances the state machine after a complete varint (`used` bytes of it in the last push).
    fn on_varint(&mut self, value: u64, used: u64, on_event: &mut impl FnMut(FrameEvent)) {
        self.state = match self.state {
            State::StreamType if value == STREAM_TYPE_CONTROL => State::FrameType,
            State::StreamType => State::Ignore,
            State::FrameType => State::FrameLength { ty: value },
            State::FrameLength { ty } => {
                on_event(FrameEvent::Frame { ty, len: value });
                match (ty, value) {
                    (_, 0) => State::FrameType,
                    (FRAME_GOAWAY, len) if self.control => State::GoawayId { remaining: len },
                    (ty, len) => State::Skip {
                        remaining: len,
                        data: ty == FRAME_DATA,
                    },
                }
            }
            State::GoawayId { remaining } => {
                on_event(FrameEvent::Goaway(value));
                // The varint's first bytes may have been counted in earlier pushes already.
                let left = remaining.saturating_sub(used);
                if left == 0 {
                    State::FrameType
                } else {
                    State::Skip {
                        remaining: left,
                        data: false,
                    }
                }
            }
            other => other,
        };
    }
}

/// Reads a frame header (type, payload length) from the start of `bytes`, if complete.
pub fn read_frame_header(bytes: &[u8]) -> Option<(u64, u64)> {
    let (ty, used) = read_varint(bytes)?;
    let (len, _) = read_varint(&bytes[used..])?;
    Some((ty, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(v: u64) -> Vec<u8> {
        match v {
            0..=63 => vec![v as u8],
            64..=16383 => ((v as u16) | 0x4000).to_be_bytes().to_vec(),
            16384..=1_073_741_823 => ((v as u32) | 0x8000_0000).to_be_bytes().to_vec(),
            _ => (v | 0xc000_0000_0000_0000).to_be_bytes().to_vec(),
        }
    }

    fn frame(ty: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = varint(ty);
        out.extend(varint(payload.len() as u64));
        out.extend_from_slice(payload);
        out
    }

    fn scan_in_chunks(scanner: &mut FrameScanner, bytes: &[u8], chunk: usize) -> Vec<FrameEvent> {
        let mut events = Vec::new();
        for piece in bytes.chunks(chunk) {
            scanner.feed(piece, |e| events.push(e));
        }
        events
    }

    #[test]
    fn request_stream_reports_headers_and_data_in_any_chunking() {
        let mut bytes = frame(FRAME_HEADERS, &[7; 300]);
        bytes.extend(frame(0x00, &[1; 70_000]));
        bytes.extend(frame(FRAME_HEADERS, &[2; 5]));
        for chunk in [1, 2, 3, 7, 64, 1000, 100_000] {
            let events = scan_in_chunks(&mut FrameScanner::request_stream(), &bytes, chunk);
            assert_eq!(
                events,
                vec![
                    FrameEvent::Frame { ty: 1, len: 300 },
                    FrameEvent::Frame { ty: 0, len: 70_000 },
                    FrameEvent::Frame { ty: 1, len: 5 },
                ],
                "chunk size {chunk}"
            );
        }
    }

    /// A GOAWAY on a request stream is not the server's GOAWAY: the trace took its id, and
    /// the request failed as "not processed" instead of H3_FRAME_UNEXPECTED.
    #[test]
    fn a_goaway_on_a_request_stream_reports_no_id() {
        let mut scanner = FrameScanner::request_stream();
        let mut events = Vec::new();
        scanner.feed(&[FRAME_GOAWAY as u8, 0x01, 0x04, 0x00, 0x00], |e| {
            events.push(e)
        });
        assert_eq!(
            events,
            [
                FrameEvent::Frame {
                    ty: FRAME_GOAWAY,
                    len: 1
                },
                FrameEvent::Frame {
                    ty: FRAME_DATA,
                    len: 0
                }
            ]
        );
    }

    #[test]
    fn control_stream_reports_goaway_id_in_any_chunking() {
        let mut bytes = varint(STREAM_TYPE_CONTROL);
        bytes.extend(frame(0x04, &[0x01, 0x40, 0x64])); // SETTINGS
        bytes.extend(frame(FRAME_GOAWAY, &varint(4_000_000)));
        bytes.extend(frame(FRAME_GOAWAY, &varint(8)));
        for chunk in [1, 2, 3, 5, 100] {
            let events = scan_in_chunks(&mut FrameScanner::uni_stream(), &bytes, chunk);
            let ids: Vec<u64> = events
                .iter()
                .filter_map(|e| match e {
                    FrameEvent::Goaway(id) => Some(*id),
                    _ => None,
                })
                .collect();
            assert_eq!(ids, vec![4_000_000, 8], "chunk size {chunk}");
        }
    }

    #[test]
    fn other_uni_streams_are_ignored() {
        let mut bytes = varint(0x02); // QPACK encoder stream
        bytes.extend(frame(FRAME_GOAWAY, &varint(4)));
        let events = scan_in_chunks(&mut FrameScanner::uni_stream(), &bytes, 1);
        assert!(events.is_empty());
    }

    #[test]
    fn goaway_with_padding_after_the_id_resumes_at_the_next_frame() {
        let mut payload = varint(12);
        payload.extend([0, 0, 0]);
        let mut bytes = varint(STREAM_TYPE_CONTROL);
        bytes.extend(frame(FRAME_GOAWAY, &payload));
        bytes.extend(frame(FRAME_GOAWAY, &varint(4)));
        let events = scan_in_chunks(&mut FrameScanner::uni_stream(), &bytes, 2);
        assert!(events.contains(&FrameEvent::Goaway(12)));
        assert!(events.contains(&FrameEvent::Goaway(4)));
    }

    #[test]
    fn frame_header_reads_from_a_buffer_head() {
        let bytes = frame(FRAME_HEADERS, &[0; 200]);
        assert_eq!(read_frame_header(&bytes), Some((1, 200)));
        assert_eq!(read_frame_header(&[0x41]), None);
        assert_eq!(read_varint(&[]), None);
    }
}
