//! The trace's event model: what happened on the connection, when, and in which direction.
//!
//! Producers (the h1 byte tap, the h2 frame decoder, the h3 stream observer, the runner)
//! only build [`TraceEvent`]s; the text and JSON-lines printers only read them.

use std::time::Duration;

/// Which way an event went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    Send,
    /// Server to client.
    Recv,
    /// Neither: a local observation (connected, handshake done, a request's outcome).
    Local,
}

impl Direction {
    /// The word used in text and JSON: `send`, `recv` or `local`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Send => "send",
            Direction::Recv => "recv",
            Direction::Local => "local",
        }
    }
}

/// One event, timed from the start of the connection attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// Time since the connection attempt began.
    pub at: Duration,
    /// Direction.
    pub dir: Direction,
    /// What happened.
    pub kind: EventKind,
}

/// A header field as decoded (names and values shown lossily as UTF-8).
pub type Field = (String, String);

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// TCP connection established.
    TcpConnected {
        /// The server address.
        addr: std::net::SocketAddr,
    },
    /// TLS handshake finished.
    TlsHandshake {
        /// TLS version, as the key schedule showed it.
        version: Option<&'static str>,
        /// ALPN protocol the server chose.
        alpn: Option<String>,
    },
    /// QUIC handshake finished (h3).
    QuicHandshake {
        /// The server address.
        addr: std::net::SocketAddr,
        /// ALPN protocol the server chose.
        alpn: Option<String>,
    },
    /// An HTTP/2 frame.
    H2Frame(H2Frame),
    /// An HTTP/1.1 request or response head.
    H1Head(H1Head),
    /// An HTTP/1.1 message body, once complete.
    H1Body {
        /// Body bytes (chunk framing excluded).
        length: u64,
        /// How the length was known: `content-length`, `chunked` or `until-close`.
        framing: &'static str,
        /// The body text, with `--body`.
        text: Option<String>,
        /// The connection ended before the body did (`length` is what arrived).
        cut_off: bool,
        /// The server's close ended it (else we did: `--timeout`, Ctrl-C, a protocol error).
        closed_by_server: bool,
        /// The length the head announced (`content-length` framing).
        announced: Option<u64>,
        /// A chunked body's trailer fields, as they came.
        trailers: Vec<(String, String)>,
    },
    /// An HTTP/3 request stream opened.
    H3StreamOpened {
        /// QUIC stream id.
        stream: u64,
    },
    /// An HTTP/3 frame header seen on a stream.
    H3Frame {
        /// QUIC stream id.
        stream: u64,
        /// Frame type code.
        frame_type: u64,
        /// Payload length (QPACK-encoded size for HEADERS).
        length: u64,
        /// With `--body`: the request body a sent DATA frame carries.
        text: Option<String>,
    },
    /// An HTTP/3 GOAWAY's stream id.
    H3Goaway {
        /// QUIC stream id of the control stream.
        stream: u64,
        /// First request stream id the server will not process.
        id: u64,
        /// The frame's payload length, when its header came on the same stream.
        length: Option<u64>,
    },
    /// One side of an HTTP/3 stream finished (FIN).
    H3StreamFinished {
        /// QUIC stream id.
        stream: u64,
    },
    /// The QUIC connection closed.
    QuicClosed {
        /// Who closed it and how, in quinn's words.
        reason: String,
        /// The error code, when the close carried one.
        code: Option<u64>,
    },
    /// The server ended its side of a TCP connection (FIN, or TLS close_notify before it).
    PeerClosed,
    /// A request completed, as the protocol code reported it to the engine.
    Response {
        /// Request number (1-based, in send order).
        request: u32,
        /// HTTP status.
        status: u16,
        /// Decoded response header bytes (names + values).
        header_bytes: u64,
        /// Response body bytes.
        body_bytes: u64,
    },
    /// A request failed, as the protocol code reported it to the engine.
    RequestFailed {
        /// Request number (1-based).
        request: u32,
        /// The classified failure.
        error: String,
    },
    /// The connection could not be opened or broke.
    Error {
        /// The classified failure.
        error: String,
    },
    /// A remark about the trace itself (what cannot be seen, a decoding problem).
    Note {
        /// The remark.
        text: String,
    },
}

impl TraceEvent {
    /// A request's outcome, or the connection's error: what a trace must always show.
    pub fn is_outcome(&self) -> bool {
        matches!(
            self.kind,
            EventKind::Response { .. } | EventKind::RequestFailed { .. } | EventKind::Error { .. }
        )
    }
}

/// An HTTP/2 frame as read from the byte stream.
#[derive(Debug, Clone, PartialEq)]
pub struct H2Frame {
    /// Frame type code.
    pub frame_type: u8,
    /// Flags byte.
    pub flags: u8,
    /// Stream id.
    pub stream: u32,
    /// Payload length.
    pub length: u32,
    /// Type-specific fields.
    pub detail: H2Detail,
}

/// The fields of an HTTP/2 frame that matter.
#[derive(Debug, Clone, PartialEq)]
pub enum H2Detail {
    /// Nothing more to show (or not decoded).
    None,
    /// DATA: data bytes (padding excluded), and the text with `--body`.
    Data {
        /// Data bytes without padding.
        data_len: u64,
        /// The data with `--body`.
        text: Option<String>,
    },
    /// HEADERS, CONTINUATION or PUSH_PROMISE ending a header block.
    Headers(HeaderBlock),
    /// A HEADERS/PUSH_PROMISE/CONTINUATION frame whose block continues in CONTINUATION.
    HeaderFragment {
        /// Bytes of the block in this frame.
        fragment: u64,
    },
    /// PRIORITY (also the priority fields of a HEADERS frame are shown in its block).
    Priority(Priority),
    /// RST_STREAM.
    RstStream {
        /// Error code.
        code: u32,
    },
    /// SETTINGS: identifier and value pairs, in order.
    Settings(Vec<(u16, u32)>),
    /// PING payload.
    Ping([u8; 8]),
    /// GOAWAY.
    Goaway {
        /// Last stream id the sender may process.
        last_stream: u32,
        /// Error code.
        code: u32,
        /// Debug data, lossily as text.
        debug: String,
    },
    /// WINDOW_UPDATE increment.
    WindowUpdate(u32),
    /// A payload too short for its type.
    Malformed,
}

/// PRIORITY fields (RFC 9113 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// Exclusive flag.
    pub exclusive: bool,
    /// Stream dependency.
    pub depends_on: u32,
    /// Weight as sent (0..=255; the effective weight is one more).
    pub weight: u8,
}

/// A decoded header block.
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderBlock {
    /// Fields, pseudo-headers first.
    pub fields: Vec<Field>,
    /// HPACK-encoded size of the whole block (all its frames, padding excluded).
    pub encoded: u64,
    /// Decoded size: names plus values, as h2load counts it.
    pub decoded: u64,
    /// Priority fields carried by the HEADERS frame.
    pub priority: Option<Priority>,
    /// PUSH_PROMISE: the promised stream id.
    pub promised_stream: Option<u32>,
    /// Why decoding failed, if it did (later blocks on the connection cannot be decoded).
    pub error: Option<String>,
}

/// An HTTP/1.1 message head.
#[derive(Debug, Clone, PartialEq)]
pub struct H1Head {
    /// Request line or status line.
    pub start_line: String,
    /// Header fields in order.
    pub fields: Vec<Field>,
    /// Bytes of the head, start line through the blank line.
    pub size: u64,
    /// Responses: whether the connection stays open after this response.
    pub keeps_open: Option<bool>,
}
