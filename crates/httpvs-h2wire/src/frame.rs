//! HTTP/2 frames (RFC 9113 §4, §6): type and flag codes, the 9-byte header, SETTINGS
//! identifiers, error codes, and encoders that append one frame to an output buffer.

/// The client connection preface, which precedes the client's first frame.
pub const CLIENT_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Empty CONTINUATION frames (not ending the block) one header block may carry before the
/// reader ends the connection with ENHANCE_YOUR_CALM, on both ends. Bytes are bounded by a head
/// limit; empty frames are not, and a stream of them would hold the connection (the flood of
/// CVE-2024-27316, which nghttp2 caps at 8 frames of any size).
pub const MAX_EMPTY_CONTINUATIONS: u32 = 16;

/// Frame type codes (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY.
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flag bits (RFC 9113 §6).
pub mod flag {
    /// END_STREAM (DATA, HEADERS).
    pub const END_STREAM: u8 = 0x1;
    /// ACK (SETTINGS, PING).
    pub const ACK: u8 = 0x1;
    /// END_HEADERS (HEADERS, CONTINUATION, PUSH_PROMISE).
    pub const END_HEADERS: u8 = 0x4;
    /// PADDED (DATA, HEADERS, PUSH_PROMISE).
    pub const PADDED: u8 = 0x8;
    /// PRIORITY (HEADERS).
    pub const PRIORITY: u8 = 0x20;
}

/// A parsed 9-byte frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length.
    pub length: u32,
    /// Frame type (see [`kind`]).
    pub kind: u8,
    /// Flags (see [`flag`]).
    pub flags: u8,
    /// Stream identifier (reserved bit cleared).
    pub stream_id: u32,
}

impl FrameHeader {
    /// Parses the 9 header bytes.
    pub fn parse(b: &[u8; 9]) -> FrameHeader {
        FrameHeader {
            length: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream_id: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    /// Whether `bit` is set in the flags.
    pub fn has(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }
}

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
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes (RFC 9113 §7).
pub mod code {
    /// NO_ERROR.
    pub const NO_ERROR: u32 = 0x0;
    /// PROTOCOL_ERROR.
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// INTERNAL_ERROR.
    pub const INTERNAL_ERROR: u32 = 0x2;
    /// FLOW_CONTROL_ERROR.
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    /// STREAM_CLOSED.
    pub const STREAM_CLOSED: u32 = 0x5;
    /// FRAME_SIZE_ERROR.
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    /// REFUSED_STREAM.
    pub const REFUSED_STREAM: u32 = 0x7;
    /// CANCEL.
    pub const CANCEL: u32 = 0x8;
    /// COMPRESSION_ERROR.
    pub const COMPRESSION_ERROR: u32 = 0x9;
    /// ENHANCE_YOUR_CALM.
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// A frame header.
pub fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = (len as u32).to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// The connection preface and our SETTINGS, then a connection WINDOW_UPDATE to `window`.
pub fn client_preface(out: &mut Vec<u8>, settings: &[(u16, u32)], window: u32) {
    out.extend_from_slice(CLIENT_PREFACE);
    self::settings(out, settings);
    if window > 65_535 {
        window_update(out, 0, window - 65_535);
    }
}

/// A SETTINGS frame (without ACK) carrying `settings`.
pub fn settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    head(out, settings.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// PING without ACK.
pub fn ping(out: &mut Vec<u8>, payload: [u8; 8]) {
    head(out, 8, kind::PING, 0, 0);
    out.extend_from_slice(&payload);
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
