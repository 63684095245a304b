//! Maps quinn and h3 failures to one [`ErrorKind`] each: H3 codes by name, QUIC transport codes,
//! idle timeout, TLS and handshake failures, version negotiation.

use crate::error::{ErrorKind, QUIC_CONNECTION_REFUSED};
use crate::protocol::{RetryReason, SendError};
use h3::error::{ConnectionError, LocalError, StreamError};
use h3::quic::ConnectionErrorIncoming;

/// H3_NO_ERROR: a graceful close.
pub const H3_NO_ERROR: u64 = 0x100;
/// H3_REQUEST_REJECTED: the server did not process the request; safe to retry.
pub const H3_REQUEST_REJECTED: u64 = 0x10b;
/// H3_REQUEST_CANCELLED (RFC 9114 §8.1): a client gave up on a request's response.
pub const H3_REQUEST_CANCELLED: u64 = 0x10c;

/// QUIC transport codes 0x0100..=0x01ff carry a TLS alert (RFC 9001 §4.8).
fn is_crypto_error(code: u64) -> bool {
    (0x100..=0x1ff).contains(&code)
}

/// Classifies a failed QUIC handshake (before any HTTP/3 exchange).
pub fn handshake_failure(err: &quinn::ConnectionError) -> ErrorKind {
    match err {
        quinn::ConnectionError::TimedOut => ErrorKind::ConnectTimeout,
        quinn::ConnectionError::TransportError(e) if is_crypto_error(u64::from(e.code)) => {
            ErrorKind::Tls
        }
        quinn::ConnectionError::ConnectionClosed(c) if is_crypto_error(u64::from(c.error_code)) => {
            ErrorKind::Tls
        }
        // The server turned the connection away (its connection limit): said by its code, not
        // as a handshake that failed for no reason given.
        quinn::ConnectionError::ConnectionClosed(c)
            if u64::from(c.error_code) == QUIC_CONNECTION_REFUSED =>
        {
            ErrorKind::QuicTransport(QUIC_CONNECTION_REFUSED)
        }
        quinn::ConnectionError::ApplicationClosed(_)
        | quinn::ConnectionError::ConnectionClosed(_)
        | quinn::ConnectionError::TransportError(_)
        | quinn::ConnectionError::LocallyClosed
        | quinn::ConnectionError::CidsExhausted => ErrorKind::Handshake,
        other => connection_failure(other),
    }
}

/// Classifies how an established QUIC connection ended.
pub fn connection_failure(err: &quinn::ConnectionError) -> ErrorKind {
    match err {
        quinn::ConnectionError::VersionMismatch => ErrorKind::VersionNegotiation,
        quinn::ConnectionError::TransportError(e) => transport_code(u64::from(e.code)),
        quinn::ConnectionError::ConnectionClosed(c) => transport_code(u64::from(c.error_code)),
        quinn::ConnectionError::ApplicationClosed(c) => application_code(c.error_code.into()),
        quinn::ConnectionError::Reset => ErrorKind::Reset,
        quinn::ConnectionError::TimedOut => ErrorKind::IdleTimeout,
        quinn::ConnectionError::LocallyClosed => ErrorKind::ConnectionClosed,
        quinn::ConnectionError::CidsExhausted => ErrorKind::Io,
    }
}

/// A QUIC transport close code: NO_ERROR is a plain close, TLS alerts are TLS failures.
fn transport_code(code: u64) -> ErrorKind {
    match code {
        0 => ErrorKind::ConnectionClosed,
        c if is_crypto_error(c) => ErrorKind::Tls,
        c => ErrorKind::QuicTransport(c),
    }
}

/// An HTTP/3 application close code: H3_NO_ERROR is a plain close.
fn application_code(code: u64) -> ErrorKind {
    match code {
        H3_NO_ERROR => ErrorKind::ConnectionClosed,
        c => ErrorKind::H3(c),
    }
}

/// Classifies an h3 connection-level error, preferring quinn's own close reason when it has one.
pub fn h3_connection_failure(
    err: &ConnectionError,
    quic_reason: Option<&quinn::ConnectionError>,
) -> ErrorKind {
    match (err, quic_reason) {
        // We closed it locally because h3 detected a protocol error: the h3 code says which.
        (
            ConnectionError::Local {
                error: LocalError::Application { code, .. },
                ..
            },
            _,
        ) => application_code(code.value()),
        (ConnectionError::Local { .. }, _) => ErrorKind::ConnectionClosed,
        (_, Some(reason)) if *reason != quinn::ConnectionError::LocallyClosed => {
            connection_failure(reason)
        }
        (ConnectionError::Remote { 0: incoming, .. }, _) => incoming_failure(incoming),
        (ConnectionError::Timeout { .. }, _) => ErrorKind::IdleTimeout,
        _ => ErrorKind::ConnectionClosed,
    }
}

/// Classifies what h3-quinn reported about the QUIC connection.
fn incoming_failure(incoming: &ConnectionErrorIncoming) -> ErrorKind {
    match incoming {
        ConnectionErrorIncoming::ApplicationClose { error_code } => application_code(*error_code),
        ConnectionErrorIncoming::Timeout => ErrorKind::IdleTimeout,
        ConnectionErrorIncoming::InternalError(_) => ErrorKind::H3(0x102),
        ConnectionErrorIncoming::Undefined(e) => e
            .downcast_ref::<quinn::ConnectionError>()
            .map_or(ErrorKind::Io, connection_failure),
    }
}

/// What a request stream's failure means before GOAWAY is taken into account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFailure {
    /// The server said it did not process the request (H3_REQUEST_REJECTED).
    Rejected,
    /// The connection was already closing (GOAWAY received) before the request was sent.
    NotSent,
    /// The server stopped reading the request body with H3_NO_ERROR (it may still answer).
    StoppedEarly,
    /// The connection ended; the kind says how.
    Connection(ErrorKind),
    /// The request stream failed on its own.
    Stream(ErrorKind),
    /// The server refused our 0-RTT data: the request was not processed.
    ZeroRttRejected,
}

/// Classifies an h3 request stream error.
pub fn stream_failure(
    err: &StreamError,
    quic_reason: Option<&quinn::ConnectionError>,
) -> StreamFailure {
    match err {
        StreamError::RemoteClosing { .. } => StreamFailure::NotSent,
        StreamError::RemoteTerminate { code, .. } => match code.value() {
            H3_REQUEST_REJECTED => StreamFailure::Rejected,
            H3_NO_ERROR => StreamFailure::StoppedEarly,
            c => StreamFailure::Stream(ErrorKind::H3(c)),
        },
        StreamError::StreamError { code, .. } => StreamFailure::Stream(ErrorKind::H3(code.value())),
        StreamError::ConnectionError { 0: e, .. } => {
            StreamFailure::Connection(h3_connection_failure(e, quic_reason))
        }
        StreamError::HeaderTooBig { .. } => StreamFailure::Stream(ErrorKind::Protocol),
        StreamError::Undefined { 0: e, .. } => StreamFailure::Stream(undefined_failure(e.as_ref())),
        _ => StreamFailure::Stream(ErrorKind::Protocol),
    }
}

/// Classifies a quinn read error on a request stream (the owned client).
pub fn read_failure(err: &quinn::ReadError) -> StreamFailure {
    match err {
        quinn::ReadError::Reset(code) => reset_failure(code.into_inner()),
        quinn::ReadError::ConnectionLost(e) => StreamFailure::Connection(connection_failure(e)),
        quinn::ReadError::ZeroRttRejected => StreamFailure::ZeroRttRejected,
        quinn::ReadError::ClosedStream | quinn::ReadError::IllegalOrderedRead => {
            StreamFailure::Stream(ErrorKind::Protocol)
        }
    }
}

/// Classifies a quinn write error on a request stream (the owned client).
pub fn write_failure(err: &quinn::WriteError) -> StreamFailure {
    match err {
        quinn::WriteError::Stopped(code) => reset_failure(code.into_inner()),
        quinn::WriteError::ConnectionLost(e) => StreamFailure::Connection(connection_failure(e)),
        quinn::WriteError::ZeroRttRejected => StreamFailure::ZeroRttRejected,
        quinn::WriteError::ClosedStream => StreamFailure::Stream(ErrorKind::Protocol),
    }
}

/// What a RESET_STREAM or STOP_SENDING code from the server means for the request.
fn reset_failure(code: u64) -> StreamFailure {
    match code {
        H3_REQUEST_REJECTED => StreamFailure::Rejected,
        H3_NO_ERROR => StreamFailure::StoppedEarly,
        c => StreamFailure::Stream(ErrorKind::H3(c)),
    }
}

/// Turns a request stream failure into a retry or a classified failure, given whether the stream
/// is at or above the server's GOAWAY id and whether the server refused our 0-RTT data.
pub fn send_error(failure: StreamFailure, beyond_goaway: bool, early_rejected: bool) -> SendError {
    match failure {
        StreamFailure::NotSent => SendError::Retry(RetryReason::Goaway(0)),
        // RFC 9114 §5.2: requests on streams at or above the GOAWAY id were not processed.
        _ if beyond_goaway => SendError::Retry(RetryReason::Goaway(0)),
        StreamFailure::Rejected => SendError::Retry(RetryReason::Rejected),
        // 0-RTT refused: the server discarded the early request unprocessed.
        StreamFailure::ZeroRttRejected => SendError::Retry(RetryReason::EarlyRejected),
        _ if early_rejected => SendError::Retry(RetryReason::EarlyRejected),
        // A reset with H3_NO_ERROR where the response was due: named as the server sent it, as
        // h2's RST_STREAM(NO_ERROR) is, not counted as a protocol breach.
        StreamFailure::StoppedEarly => SendError::Failed(ErrorKind::H3(H3_NO_ERROR)),
        StreamFailure::Connection(kind) | StreamFailure::Stream(kind) => SendError::Failed(kind),
    }
}

/// h3-quinn passes some quinn stream errors through untyped; recover what it can.
fn undefined_failure(err: &(dyn std::error::Error + 'static)) -> ErrorKind {
    if let Some(e) = err.downcast_ref::<quinn::ConnectionError>() {
        return connection_failure(e);
    }
    if let Some(quinn::ReadError::ConnectionLost(e)) = err.downcast_ref::<quinn::ReadError>() {
        return connection_failure(e);
    }
    if let Some(quinn::WriteError::ConnectionLost(e)) = err.downcast_ref::<quinn::WriteError>() {
        return connection_failure(e);
    }
    ErrorKind::Io
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_map_to_kinds() {
        assert_eq!(application_code(H3_NO_ERROR), ErrorKind::ConnectionClosed);
        assert_eq!(application_code(0x107), ErrorKind::H3(0x107));
        assert_eq!(transport_code(0), ErrorKind::ConnectionClosed);
        assert_eq!(transport_code(0x12a), ErrorKind::Tls);
        assert_eq!(transport_code(0x3), ErrorKind::QuicTransport(3));
    }

    /// A server at its connection limit refuses the handshake with CONNECTION_REFUSED: named,
    /// where it read as a bare `handshake`.
    #[test]
    fn a_refused_handshake_is_named() {
        let refused = quinn::ConnectionError::ConnectionClosed(quinn::ConnectionClose {
            error_code: quinn::TransportErrorCode::CONNECTION_REFUSED,
            frame_type: None,
            reason: bytes::Bytes::from_static(b"server refused"),
        });
        let kind = handshake_failure(&refused);
        assert_eq!(kind.name(), "quic_transport(CONNECTION_REFUSED)");
    }

    #[test]
    fn quinn_errors_map_to_kinds() {
        use quinn::ConnectionError as E;
        assert_eq!(
            connection_failure(&E::VersionMismatch),
            ErrorKind::VersionNegotiation
        );
        assert_eq!(connection_failure(&E::TimedOut), ErrorKind::IdleTimeout);
        assert_eq!(handshake_failure(&E::TimedOut), ErrorKind::ConnectTimeout);
        assert_eq!(connection_failure(&E::Reset), ErrorKind::Reset);
        assert_eq!(
            handshake_failure(&E::VersionMismatch),
            ErrorKind::VersionNegotiation
        );
    }

    /// H3_REQUEST_REJECTED and refused 0-RTT data are both retries, each under its own name:
    /// a refused early request was reported as H3_REQUEST_REJECTED, a code no server sent.
    #[test]
    fn rejected_requests_and_refused_early_data_are_told_apart() {
        assert_eq!(
            send_error(StreamFailure::Rejected, false, false),
            SendError::Retry(RetryReason::Rejected)
        );
        assert_eq!(
            send_error(StreamFailure::ZeroRttRejected, false, false),
            SendError::Retry(RetryReason::EarlyRejected)
        );
        assert_eq!(
            send_error(StreamFailure::StoppedEarly, false, true),
            SendError::Retry(RetryReason::EarlyRejected)
        );
        assert_eq!(
            send_error(StreamFailure::StoppedEarly, false, false),
            SendError::Failed(ErrorKind::H3(H3_NO_ERROR))
        );
        assert_eq!(ErrorKind::H3(H3_NO_ERROR).name(), "h3(H3_NO_ERROR)");
    }
}
