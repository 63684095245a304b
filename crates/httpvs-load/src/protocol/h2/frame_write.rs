//! Encoding the frames an HTTP/2 client sends (RFC 9113 §6), appended to an output buffer.

use super::frame_tap::{flag, kind, CLIENT_PREFACE};

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
}

/// Error codes (RFC 9113 §7).
pub mod code {
    /// NO_ERROR.
    pub const NO_ERROR: u32 = 0x0;
    /// PROTOCOL_ERROR.
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// FLOW_CONTROL_ERROR.
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    /// FRAME_SIZE_ERROR.
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    /// REFUSED_STREAM.
    pub const REFUSED_STREAM: u32 = 0x7;
    /// CANCEL.
    pub const CANCEL: u32 = 0x8;
    /// COMPRESSION_ERROR.
    pub const COMPRESSION_ERROR: u32 = 0x9;
}

/// A frame header.
pub fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = (len as u32).to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// The connection preface and our SETTINGS, then a connection WINDOW_UPDATE to `window`.
pub fn preface(out: &mut Vec<u8>, settings: &[(u16, u32)], window: u32) {
    out.extend_from_slice(CLIENT_PREFACE);
    head(out, settings.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
    if window > 65_535 {
        window_update(out, 0, window - 65_535);
    }
}

/// A header block as HEADERS plus CONTINUATION frames of at most `max_frame` bytes each.
pub fn headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame: usize) {
    let mut chunks = block.chunks(max_frame.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    let fits = first.len() == block.len();
    if fits {
        flags |= flag::END_HEADERS;
    }
    head(out, first.len(), kind::HEADERS, flags, stream);
    out.extend_from_slice(first);
    let mut rest = chunks.peekable();
    while let Some(chunk) = rest.next() {
        let last = rest.peek().is_none();
        let flags = if last { flag::END_HEADERS } else { 0 };
        head(out, chunk.len(), kind::CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// One DATA frame.
pub fn data(out: &mut Vec<u8>, stream: u32, bytes: &[u8], end_stream: bool) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    head(out, bytes.len(), kind::DATA, flags, stream);
    out.extend_from_slice(bytes);
}

/// SETTINGS with the ACK flag.
pub fn settings_ack(out: &mut Vec<u8>) {
    head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// WINDOW_UPDATE.
pub fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// PING with the ACK flag, echoing `payload`.
pub fn ping_ack(out: &mut Vec<u8>, payload: &[u8]) {
    head(out, payload.len(), kind::PING, flag::ACK, 0);
    out.extend_from_slice(payload);
}

/// RST_STREAM.
pub fn rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// GOAWAY.
pub fn goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::h2::frame_tap::{Direction, FrameHeader, FrameObserver, FrameTap};

    #[derive(Default)]
    struct Frames(Vec<FrameHeader>);

    impl FrameObserver for Frames {
        fn on_header(&mut self, _: Direction, header: &FrameHeader) -> bool {
            self.0.push(*header);
            false
        }
    }

    #[test]
    fn a_large_block_continues_and_the_tap_reads_it_back() {
        let mut out = Vec::new();
        preface(&mut out, &[(setting::ENABLE_PUSH, 0)], 1 << 20);
        headers(&mut out, 1, &[7; 40], true, 16);
        data(&mut out, 1, b"abc", true);
        let mut frames = Frames::default();
        FrameTap::new(Direction::Sent).feed(&out, &mut frames);
        let seen: Vec<(u8, u8, u32)> = frames
            .0
            .iter()
            .map(|h| (h.kind, h.flags, h.length))
            .collect();
        assert_eq!(
            seen,
            [
                (kind::SETTINGS, 0, 6),
                (kind::WINDOW_UPDATE, 0, 4),
                (kind::HEADERS, flag::END_STREAM, 16),
                (kind::CONTINUATION, 0, 16),
                (kind::CONTINUATION, flag::END_HEADERS, 8),
                (kind::DATA, flag::END_STREAM, 3),
            ]
        );
    }
}
