//! Classified request and connection failures: every failure is one `ErrorKind`, never a string.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a request or a connection attempt failed. Counted by kind in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "code")]
pub enum ErrorKind {
    /// The host name did not resolve.
    Dns,
    /// The TCP connection was refused (nothing listens there).
    Refused,
    /// The connection (TCP connect, TLS or QUIC handshake) did not complete within `--connect-timeout`.
    ConnectTimeout,
    /// The TLS handshake failed (certificate, ALPN, alert).
    Tls,
    /// The QUIC handshake failed for a reason other than TLS or a timeout.
    Handshake,
    /// The peer offered no QUIC version we speak.
    VersionNegotiation,
    /// The response did not complete within `--timeout`.
    RequestTimeout,
    /// The connection was reset (RST) by the peer.
    Reset,
    /// The peer closed the connection (FIN) while a response was outstanding.
    ConnectionClosed,
    /// The server sent GOAWAY with an error code and this request was lost with it.
    Goaway(u64),
    /// The HTTP/2 stream was reset with this RST_STREAM error code.
    StreamReset(u64),
    /// The HTTP/3 stream or connection ended with this H3 error code.
    H3(u64),
    /// The QUIC connection was closed with this transport error code.
    QuicTransport(u64),
    /// The QUIC connection idled out.
    IdleTimeout,
    /// The server's UDP port answered ICMP port-unreachable mid-connection: the QUIC server is
    /// gone (killed or restarted), and the connection was closed rather than left to idle out.
    Unreachable,
    /// The peer violated the protocol (bad frame, bad response head, bad chunking).
    Protocol,
    /// The body ended before its announced length.
    TruncatedBody,
    /// No free local port for a new connection (EADDRNOTAVAIL): the ephemeral port range is
    /// used up, most often by this client's closed connections waiting out TIME_WAIT.
    LocalPorts,
    /// No file descriptor for a new connection (EMFILE, ENFILE): this process's open-file limit
    /// (`ulimit -n`) or the system's was reached mid-run.
    OpenFiles,
    /// Any other local I/O error.
    Io,
}

/// The code of a family's `other` kind (`ErrorCounts` past its bound): no peer can send it, as
/// HTTP/2 codes are 32 bits and QUIC's 62.
pub const OTHER_CODE: u64 = u64::MAX;

impl ErrorKind {
    /// The kind under which this one is counted once the report holds too many: its family's
    /// `other` for a kind with a peer's code, itself for the rest (a fixed set).
    pub fn other_code(self) -> ErrorKind {
        match self {
            ErrorKind::Goaway(_) => ErrorKind::Goaway(OTHER_CODE),
            ErrorKind::StreamReset(_) => ErrorKind::StreamReset(OTHER_CODE),
            ErrorKind::H3(_) => ErrorKind::H3(OTHER_CODE),
            ErrorKind::QuicTransport(_) => ErrorKind::QuicTransport(OTHER_CODE),
            kind => kind,
        }
    }

    /// A short stable name, used as the key in text and JSON reports.
    pub fn name(&self) -> String {
        match self {
            ErrorKind::Dns => "dns".into(),
            ErrorKind::Refused => "refused".into(),
            ErrorKind::ConnectTimeout => "connect_timeout".into(),
            ErrorKind::Tls => "tls".into(),
            ErrorKind::Handshake => "handshake".into(),
            ErrorKind::VersionNegotiation => "version_negotiation".into(),
            ErrorKind::RequestTimeout => "request_timeout".into(),
            ErrorKind::Reset => "reset".into(),
            ErrorKind::ConnectionClosed => "connection_closed".into(),
            ErrorKind::Goaway(c) => format!("goaway({})", code_label(h2_code_name(*c), *c)),
            ErrorKind::StreamReset(c) => {
                format!("rst_stream({})", code_label(h2_code_name(*c), *c))
            }
            ErrorKind::H3(c) => format!("h3({})", code_label(h3_code_name(*c), *c)),
            ErrorKind::QuicTransport(OTHER_CODE) => "quic_transport(other)".into(),
            ErrorKind::QuicTransport(c) => {
                format!("quic_transport({})", code_label(quic_code_name(*c), *c))
            }
            ErrorKind::IdleTimeout => "idle_timeout".into(),
            ErrorKind::Unreachable => "unreachable".into(),
            ErrorKind::Protocol => "protocol".into(),
            ErrorKind::TruncatedBody => "truncated_body".into(),
            ErrorKind::LocalPorts => "local_ports".into(),
            ErrorKind::OpenFiles => "open_files".into(),
            ErrorKind::Io => "io".into(),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// An error code's name, or its number for a code with none (a peer's own, or quinn's 0 for a
/// dropped stream), so different unknown codes stay apart in the report.
fn code_label(name: &'static str, code: u64) -> std::borrow::Cow<'static, str> {
    if code == OTHER_CODE {
        "other".into()
    } else if name == "UNKNOWN" {
        format!("0x{code:x}").into()
    } else {
        name.into()
    }
}

/// QUIC's CONNECTION_REFUSED (RFC 9000 §20.1): the server will not take the connection.
pub const QUIC_CONNECTION_REFUSED: u64 = 0x2;

/// The RFC 9000 §20.1 name of a QUIC transport error code (the TLS alerts, 0x100-0x1ff, are
/// read as `tls` before they get here).
pub fn quic_code_name(code: u64) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "INTERNAL_ERROR",
        0x2 => "CONNECTION_REFUSED",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "STREAM_LIMIT_ERROR",
        0x5 => "STREAM_STATE_ERROR",
        0x6 => "FINAL_SIZE_ERROR",
        0x7 => "FRAME_ENCODING_ERROR",
        0x8 => "TRANSPORT_PARAMETER_ERROR",
        0x9 => "CONNECTION_ID_LIMIT_ERROR",
        0xa => "PROTOCOL_VIOLATION",
        0xb => "INVALID_TOKEN",
        0xc => "APPLICATION_ERROR",
        0xd => "CRYPTO_BUFFER_EXCEEDED",
        0xe => "KEY_UPDATE_ERROR",
        0xf => "AEAD_LIMIT_REACHED",
        0x10 => "NO_VIABLE_PATH",
        _ => "UNKNOWN",
    }
}

/// The RFC 9113 name of an HTTP/2 error code.
pub fn h2_code_name(code: u64) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "UNKNOWN",
    }
}

/// The RFC 9114 name of an HTTP/3 error code.
pub fn h3_code_name(code: u64) -> &'static str {
    match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        0x201 => "QPACK_ENCODER_STREAM_ERROR",
        0x202 => "QPACK_DECODER_STREAM_ERROR",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable() {
        assert_eq!(
            ErrorKind::StreamReset(7).name(),
            "rst_stream(REFUSED_STREAM)"
        );
        assert_eq!(ErrorKind::H3(0x10b).name(), "h3(H3_REQUEST_REJECTED)");
        assert_eq!(
            ErrorKind::QuicTransport(0xa).name(),
            "quic_transport(PROTOCOL_VIOLATION)"
        );
        assert_eq!(
            ErrorKind::QuicTransport(0x99).name(),
            "quic_transport(0x99)"
        );
        assert_eq!(ErrorKind::Refused.to_string(), "refused");
    }
}
