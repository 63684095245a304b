//! A sans-IO reader of one HTTP/3 response (RFC 9114 §4.1) on a request stream: frames in as
//! chunks of any size, out the status, decoded header bytes and body bytes.
//!
//! DATA payloads are counted and skipped, never copied; a HEADERS payload is decoded in place when
//! the chunk holds it whole, and gathered only when it spans chunks. Interim (1xx) heads are
//! skipped; a HEADERS frame after the final head is the trailers.

use super::frames::{
    PartialVarint, FRAME_DATA, FRAME_GOAWAY, FRAME_HEADERS, FRAME_PUSH_PROMISE, FRAME_SETTINGS,
};
use super::qpack::{decode_field_section, DecodedSection, QpackError, MAX_FIELD_SECTION};
use crate::protocol::last_read::LastRead;

/// H3_FRAME_UNEXPECTED.
pub const H3_FRAME_UNEXPECTED: u64 = 0x105;
/// H3_FRAME_ERROR.
pub const H3_FRAME_ERROR: u64 = 0x106;
/// H3_EXCESSIVE_LOAD.
pub const H3_EXCESSIVE_LOAD: u64 = 0x107;
/// H3_ID_ERROR.
pub const H3_ID_ERROR: u64 = 0x108;
/// H3_MESSAGE_ERROR.
pub const H3_MESSAGE_ERROR: u64 = 0x10e;

/// A response that breaks HTTP/3: the code to close (connection) or reset (stream) with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseViolation {
    /// An error of the whole connection (RFC 9114 §8): the connection must close with it.
    Connection(u64),
    /// A malformed message: only this request fails (H3_MESSAGE_ERROR).
    Message,
}

impl From<QpackError> for ResponseViolation {
    fn from(_: QpackError) -> Self {
        ResponseViolation::Connection(super::qpack::QPACK_DECOMPRESSION_FAILED)
    }
}

/// The final response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// Decoded regular header bytes (names + values).
    pub field_bytes: u64,
    /// The head's `content-length`, when it has one.
    pub content_length: Option<u64>,
}

/// Where the reader is in the stream.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Reading a frame type varint.
    FrameType,
    /// Reading a frame length varint.
    FrameLength { ty: u64 },
    /// Gathering a HEADERS payload of `len` bytes (in `spill` when it spans chunks).
    Headers { len: usize },
    /// Counting (DATA) or skipping (unknown frames) payload bytes.
    Payload { data: bool, remaining: u64 },
}

/// Reads one response as its stream's chunks arrive.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    varint: PartialVarint,
    /// A HEADERS payload split across chunks.
    spill: Vec<u8>,
    head: Option<ResponseHead>,
    trailers: bool,
    /// QPACK-encoded bytes of every HEADERS payload (interim, final and trailers).
    encoded_header_bytes: u64,
    /// The same decoded (names + values), for every section that decoded.
    decoded_header_bytes: u64,
    body_bytes: u64,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader {
            state: State::FrameType,
            varint: PartialVarint::default(),
            spill: Vec::new(),
            head: None,
            trailers: false,
            encoded_header_bytes: 0,
            decoded_header_bytes: 0,
            body_bytes: 0,
        }
    }
}

/// Huffman scratch space for field sections, reused across responses, and the last section
/// decoded: a server answering the same request sends the same bytes, so a repeat costs a
/// compare instead of a decode.
#[derive(Debug, Default)]
pub struct DecodeScratch {
    names: Vec<u8>,
    values: Vec<u8>,
    last: LastRead<(), DecodedSection>,
}

impl DecodeScratch {
    /// Decodes `block`, or answers from the memo when it repeats the last block decoded.
    fn decode(&mut self, block: &[u8]) -> Result<DecodedSection, QpackError> {
        if let Some(section) = self.last.get(block, ()) {
            return Ok(section);
        }
        let section = decode_field_section(block, &mut self.names, &mut self.values)?;
        self.last.keep(block, (), section, MEMO_BLOCK_LIMIT);
        Ok(section)
    }
}

/// Field sections longer than this are not kept for the memo (a copy per response would cost
/// more than it saves when they differ).
const MEMO_BLOCK_LIMIT: usize = 256;

impl ResponseReader {
    /// The final head, once read.
    pub fn head(&self) -> Option<ResponseHead> {
        self.head
    }

    /// Body bytes read so far (DATA payloads).
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// QPACK-encoded header bytes read so far.
    pub fn encoded_header_bytes(&self) -> u64 {
        self.encoded_header_bytes
    }

    /// Decoded header bytes (names + values, `:status` included) read so far.
    pub fn decoded_header_bytes(&self) -> u64 {
        self.decoded_header_bytes
    }

    /// Feeds the next chunk of the stream.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        scratch: &mut DecodeScratch,
    ) -> Result<(), ResponseViolation> {
        while !input.is_empty() {
            match self.state {
                State::FrameType | State::FrameLength { .. } => {
                    let (value, used) = self.varint.push(input);
                    input = &input[used..];
                    if let Some(value) = value {
                        self.on_varint(value)?;
                    }
                }
                State::Payload { data, remaining } => {
                    let step = remaining.min(input.len() as u64);
                    input = &input[step as usize..];
                    if data {
                        self.body_bytes += step;
                    }
                    self.state = match remaining - step {
                        0 => State::FrameType,
                        remaining => State::Payload { data, remaining },
                    };
                }
                State::Headers { len } => {
                    if self.spill.is_empty() && input.len() >= len {
                        let (block, rest) = input.split_at(len);
                        input = rest;
                        self.on_headers(block, scratch)?;
                    } else {
                        let take = (len - self.spill.len()).min(input.len());
                        self.spill.extend_from_slice(&input[..take]);
                        input = &input[take..];
                        if self.spill.len() == len {
                            let block = std::mem::take(&mut self.spill);
                            self.on_headers(&block, scratch)?;
                            self.spill = block;
                            self.spill.clear();
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The stream's FIN: the response is whole if the final head came and no frame is cut.
    pub fn finish(&self) -> Result<ResponseHead, ResponseViolation> {
        // A frame type varint begun but not finished leaves the state at FrameType.
        if !matches!(self.state, State::FrameType) || self.varint.is_partial() {
            return Err(ResponseViolation::Connection(H3_FRAME_ERROR));
        }
        self.head.ok_or(ResponseViolation::Message)
    }

    /// Moves on after a complete frame type or length.
    fn on_varint(&mut self, value: u64) -> Result<(), ResponseViolation> {
        self.state = match self.state {
            State::FrameType => State::FrameLength { ty: value },
            State::FrameLength { ty } => self.frame_started(ty, value)?,
            other => other,
        };
        Ok(())
    }

    /// Decides what a frame of type `ty` and payload `len` means on a request stream.
    fn frame_started(&mut self, ty: u64, len: u64) -> Result<State, ResponseViolation> {
        match ty {
            FRAME_HEADERS => {
                if self.trailers {
                    return Err(ResponseViolation::Connection(H3_FRAME_UNEXPECTED));
                }
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= MAX_FIELD_SECTION)
                    .ok_or(ResponseViolation::Connection(H3_EXCESSIVE_LOAD))?;
                self.encoded_header_bytes += len as u64;
                if len == 0 {
                    return Err(ResponseViolation::Connection(
                        super::qpack::QPACK_DECOMPRESSION_FAILED,
                    ));
                }
                Ok(State::Headers { len })
            }
            FRAME_DATA if self.head.is_none() || self.trailers => {
                Err(ResponseViolation::Connection(H3_FRAME_UNEXPECTED))
            }
            FRAME_DATA => Ok(self.payload(true, len)),
            // We never sent MAX_PUSH_ID, so no push id is valid.
            FRAME_PUSH_PROMISE => Err(ResponseViolation::Connection(H3_ID_ERROR)),
            // Control-stream frames and HTTP/2 frame types reserved by RFC 9114 §11.2.1.
            0x02 | 0x03 | FRAME_SETTINGS | 0x06 | FRAME_GOAWAY | 0x08 | 0x09 | 0x0d => {
                Err(ResponseViolation::Connection(H3_FRAME_UNEXPECTED))
            }
            // Unknown and reserved (grease) types are skipped (RFC 9114 §9).
            _ => Ok(self.payload(false, len)),
        }
    }

    fn payload(&self, data: bool, len: u64) -> State {
        if len == 0 {
            State::FrameType
        } else {
            State::Payload {
                data,
                remaining: len,
            }
        }
    }

    /// A whole HEADERS payload: an interim head, the final head, or the trailers.
    fn on_headers(
        &mut self,
        block: &[u8],
        scratch: &mut DecodeScratch,
    ) -> Result<(), ResponseViolation> {
        self.state = State::FrameType;
        let section = scratch.decode(block)?;
        self.decoded_header_bytes += section.field_bytes
            + if section.status.is_some() {
                super::reference::STATUS_FIELD_BYTES
            } else {
                0
            };
        if self.head.is_some() {
            // Trailers carry no pseudo-headers (RFC 9114 §4.3).
            if section.status.is_some() || section.malformed {
                return Err(ResponseViolation::Message);
            }
            self.trailers = true;
            return Ok(());
        }
        match section.status {
            Some(status) if !section.malformed && status != 101 => {
                if status >= 200 {
                    self.head = Some(ResponseHead {
                        status,
                        field_bytes: section.field_bytes,
                        content_length: section.content_length,
                    });
                }
                Ok(())
            }
            _ => Err(ResponseViolation::Message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::frames::put_frame_header;
    use super::super::qpack::put_int;
    use super::*;

    fn frame(ty: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_frame_header(&mut out, ty, payload.len() as u64);
        out.extend_from_slice(payload);
        out
    }

    /// A field section: :status by static index, then `content-length: N` (name ref 4).
    fn head(status_index: u8, extra: &[u8]) -> Vec<u8> {
        let mut block = vec![0, 0];
        put_int(&mut block, 0xc0, 6, u64::from(status_index));
        put_int(&mut block, 0b0101_0000, 4, 4);
        put_int(&mut block, 0, 7, extra.len() as u64);
        block.extend_from_slice(extra);
        block
    }

    /// A field section of :status alone (an interim head; an empty content-length would be
    /// malformed).
    fn status_only(status_index: u8) -> Vec<u8> {
        let mut block = vec![0, 0];
        put_int(&mut block, 0xc0, 6, u64::from(status_index));
        block
    }

    fn read_in_chunks(
        bytes: &[u8],
        chunk: usize,
    ) -> Result<(ResponseHead, u64), ResponseViolation> {
        let mut reader = ResponseReader::default();
        let mut scratch = DecodeScratch::default();
        for piece in bytes.chunks(chunk) {
            reader.feed(piece, &mut scratch)?;
        }
        reader.finish().map(|head| (head, reader.body_bytes()))
    }

    #[test]
    fn interim_head_data_grease_and_trailers_in_any_chunking() {
        let mut bytes = frame(FRAME_HEADERS, &status_only(63)); // 100 Continue
        bytes.extend(frame(FRAME_HEADERS, &head(25, b"70000"))); // 200
        bytes.extend(frame(0x21, &[9; 10])); // grease frame type
        bytes.extend(frame(FRAME_DATA, &[1; 70_000]));
        bytes.extend(frame(FRAME_DATA, &[]));
        bytes.extend(frame(FRAME_HEADERS, &[0, 0, 0xc0 | 2])); // trailer age: 0
        for chunk in [1, 2, 3, 7, 1000, 100_000] {
            let (head, body) = read_in_chunks(&bytes, chunk).expect("whole response");
            assert_eq!(head.status, 200, "chunk {chunk}");
            assert_eq!(head.field_bytes, ("content-length".len() + 5) as u64);
            assert_eq!(body, 70_000);
        }
    }

    #[test]
    fn truncated_or_headless_streams_fail() {
        let whole = frame(FRAME_HEADERS, &head(25, b"3"));
        let mut cut = whole.clone();
        cut.extend(frame(FRAME_DATA, b"abc"));
        cut.pop();
        assert_eq!(
            read_in_chunks(&cut, 4),
            Err(ResponseViolation::Connection(H3_FRAME_ERROR))
        );
        assert_eq!(read_in_chunks(&[], 4), Err(ResponseViolation::Message));
        let interim_only = frame(FRAME_HEADERS, &status_only(63));
        assert_eq!(
            read_in_chunks(&interim_only, 4),
            Err(ResponseViolation::Message)
        );
        assert_eq!(
            read_in_chunks(&[0x40], 4).map(|_| ()),
            Err(ResponseViolation::Connection(H3_FRAME_ERROR))
        );
    }

    #[test]
    fn frames_out_of_place_are_connection_errors() {
        let data_first = frame(FRAME_DATA, b"x");
        assert_eq!(
            read_in_chunks(&data_first, 1),
            Err(ResponseViolation::Connection(H3_FRAME_UNEXPECTED))
        );
        let mut settings = frame(FRAME_HEADERS, &head(25, b"0"));
        settings.extend(frame(FRAME_SETTINGS, &[]));
        assert_eq!(
            read_in_chunks(&settings, 100),
            Err(ResponseViolation::Connection(H3_FRAME_UNEXPECTED))
        );
        let push = frame(FRAME_PUSH_PROMISE, &[0, 0, 0]);
        assert_eq!(
            read_in_chunks(&push, 100),
            Err(ResponseViolation::Connection(H3_ID_ERROR))
        );
        let dynamic = frame(FRAME_HEADERS, &[1, 0, 0x80]);
        assert_eq!(
            read_in_chunks(&dynamic, 100),
            Err(ResponseViolation::Connection(0x200))
        );
    }

    #[test]
    fn a_repeated_head_is_answered_by_the_memo_and_a_new_one_decoded() {
        let mut scratch = DecodeScratch::default();
        let ok = frame(FRAME_HEADERS, &head(25, b"3"));
        let not_found = frame(FRAME_HEADERS, &head(27, b"12")); // :status 404
        for (bytes, status, field_bytes) in [
            (&ok, 200, 15),
            (&ok, 200, 15),
            (&not_found, 404, 16),
            (&ok, 200, 15),
        ] {
            let mut reader = ResponseReader::default();
            reader.feed(bytes, &mut scratch).expect("head");
            let got = reader.finish().expect("final head");
            assert_eq!((got.status, got.field_bytes), (status, field_bytes));
        }
        // A malformed section is reported again when it repeats.
        let late_status = frame(FRAME_HEADERS, &[0, 0, 0xc0 | 2, 0xc0 | 25]);
        for _ in 0..2 {
            let mut reader = ResponseReader::default();
            assert_eq!(
                reader.feed(&late_status, &mut scratch),
                Err(ResponseViolation::Message)
            );
        }
    }

    #[test]
    fn random_streams_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut scratch = DecodeScratch::default();
        for _ in 0..5_000 {
            let mut reader = ResponseReader::default();
            for _ in 0..4 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let chunk: Vec<u8> = (0..(seed % 16) as usize)
                    .map(|i| (seed >> ((i % 8) * 8)) as u8)
                    .collect();
                if reader.feed(&chunk, &mut scratch).is_err() {
                    break;
                }
            }
            let _ = reader.finish();
        }
    }
}
