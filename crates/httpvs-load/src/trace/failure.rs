//! Why a connection or a request failed, in one line: the classified kind, what it means, and
//! the cause the connection showed (the QUIC close reason, the server's GOAWAY), when it did.

use super::event::{Direction, EventKind, H2Detail, TraceEvent};
use crate::engine::setup::{first_connection_hint, names_ip, sni_hint, tls_hint};
use crate::error::{h2_code_name, ErrorKind};
use crate::protocol::{RetryReason, SendError, Target};

/// How a connection was tried, for what its failure line suggests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attempt {
    /// Over QUIC (h3): a refusal is of UDP, where a TCP-only server answers nothing.
    pub quic: bool,
    /// `-k` was given: the certificate is not what failed.
    pub insecure: bool,
}

/// One line for a connection that could not be opened, with what the stack said (`cause`:
/// rustls's or quinn's reason) where it said something.
pub fn connect_failure(
    kind: ErrorKind,
    target: &Target,
    cause: Option<&str>,
    attempt: Attempt,
) -> String {
    let addr = target.addr;
    let line = match kind {
        ErrorKind::Refused if attempt.quic => {
            format!("refused: nothing answers QUIC at {addr} (UDP; a TCP-only server refuses QUIC)")
        }
        ErrorKind::Refused => format!("refused: nothing listens at {addr}"),
        // As load's line: what rustls said, then the hint.
        ErrorKind::Tls => {
            let said = cause.map_or(String::new(), |c| format!(": {}", one_line(c)));
            // An IP address in the URL sends no server name (SNI), as load's line says.
            return format!(
                "tls: handshake with {addr} failed{said}{}{}",
                tls_hint(attempt.insecure, cause.unwrap_or("")),
                sni_hint(names_ip(&target.host), cause.unwrap_or(""))
            );
        }
        // With a cause, TCP connected and a later step (TLS, h2's SETTINGS) stalled.
        ErrorKind::ConnectTimeout if cause.is_some() => {
            format!("connect_timeout: {addr} not ready within --connect-timeout")
        }
        ErrorKind::ConnectTimeout => format!("connect_timeout: no connection to {addr}"),
        ErrorKind::ConnectionClosed | ErrorKind::Reset | ErrorKind::Protocol => format!(
            "connect failed: {kind}: {}{}",
            meaning(kind),
            // The usual cause, unless the connection showed the server speaks the protocol.
            match cause {
                Some(c) if crate::protocol::tcp::rules_out_the_usual_cause(kind, c) => "",
                _ => first_connection_hint(kind),
            }
        ),
        kind => format!("connect failed: {kind}: {}", meaning(kind)),
    };
    with_cause(line, cause)
}

/// One line for a request that failed or was not processed.
pub fn send_failure(e: SendError, cause: Option<&str>) -> String {
    match e {
        SendError::Failed(kind) => with_cause(format!("{kind}: {}", meaning(kind)), cause),
        SendError::Retry(reason) => {
            let why = match reason {
                RetryReason::Goaway(_) => "above the GOAWAY's last stream id",
                RetryReason::Refused => "refused (REFUSED_STREAM)",
                RetryReason::Rejected => "rejected (H3_REQUEST_REJECTED)",
                RetryReason::EarlyRejected => "sent as 0-RTT early data, which the server refused",
                RetryReason::ConnectionClosed => "the connection closed before its response",
                RetryReason::BehindTimeout => {
                    "behind a request that timed out, whose connection was closed"
                }
            };
            format!(
                "not processed by the server: {why} (load retries such requests on a new \
                 connection)"
            )
        }
    }
}

/// How the line of a request that never went on the wire begins: the text trace prints it as
/// not sent, not FAILED, as the summary counts it.
pub const NOT_SENT: &str = "not sent: ";

/// One line for a request that never went on the wire because a GOAWAY came first: `id` as
/// the GOAWAY names it (h3: the first unprocessed stream; h2: the last processed one).
pub fn not_sent_after_goaway(id: &str) -> String {
    format!(
        "{NOT_SENT}the server's GOAWAY ({id}) came before its stream opened (load sends such \
         requests on a new connection)"
    )
}

/// Marks as not sent the failed requests that never went on the wire, as the summary counts
/// them (`failed`: the requests that went and failed): a request the connection's end caught
/// before its head was written read "FAILED" beside "not_sent=1". Requests go out in number
/// order, so the last ones are those never sent. Only when every request's outcome is among
/// `events` (a long trace drops some from the middle).
pub fn mark_not_sent(events: &mut [TraceEvent], requests: u32, failed: u32) {
    let outcome = |e: &TraceEvent| {
        matches!(
            e.kind,
            EventKind::Response { .. } | EventKind::RequestFailed { .. }
        )
    };
    if events.iter().filter(|e| outcome(e)).count() != requests as usize {
        return;
    }
    let mut unmarked: Vec<(u32, usize)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.kind {
            EventKind::RequestFailed { request, error } if !error.starts_with(NOT_SENT) => {
                Some((*request, i))
            }
            _ => None,
        })
        .collect();
    let excess = unmarked.len().saturating_sub(failed as usize);
    unmarked.sort_unstable();
    for &(_, i) in unmarked.iter().rev().take(excess) {
        if let EventKind::RequestFailed { error, .. } = &mut events[i].kind {
            *error = format!("{NOT_SENT}{error}");
        }
    }
}

/// What a failure kind means, in words.
fn meaning(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Dns => "the host name did not resolve",
        ErrorKind::Refused => "nothing listens there",
        ErrorKind::ConnectTimeout => "no connection within --connect-timeout",
        ErrorKind::Tls => "the TLS handshake failed (certificate, ALPN or an alert)",
        ErrorKind::Handshake => "the QUIC handshake failed",
        ErrorKind::VersionNegotiation => "the server speaks no QUIC version we do",
        ErrorKind::RequestTimeout => "no complete response within --timeout",
        ErrorKind::Reset => "the server reset the connection",
        ErrorKind::ConnectionClosed => "the server closed the connection",
        ErrorKind::Goaway(_) => "the server's GOAWAY with an error code ended this request",
        ErrorKind::StreamReset(_) => "the server reset the stream",
        ErrorKind::H3(_) => "the stream or connection ended with this HTTP/3 error",
        ErrorKind::QuicTransport(_) => "the QUIC connection closed with this transport error",
        ErrorKind::IdleTimeout => "the QUIC connection idled out",
        ErrorKind::Unreachable => "the server's UDP port stopped answering (ICMP port unreachable)",
        ErrorKind::Protocol => "the server's bytes broke the protocol",
        ErrorKind::TruncatedBody => {
            "the connection ended inside the body (short of its content-length, last chunk or END_STREAM)"
        }
        ErrorKind::LocalPorts => {
            "no free local port (the ephemeral range is used up, most often by connections in TIME_WAIT)"
        }
        ErrorKind::OpenFiles => "no file descriptor free (this process's open-file limit, ulimit -n, or the system's is reached)",
        ErrorKind::Io => "a local I/O error",
    }
}

fn with_cause(line: String, cause: Option<&str>) -> String {
    match cause {
        Some(cause) => format!("{line} ({})", one_line(cause)),
        None => line,
    }
}

/// Control characters (a peer's reason phrase may carry newlines) become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The cause an h3 connection shows: quinn's close reason, once it closed.
pub fn quic_cause(quic: Option<&quinn::Connection>) -> Option<String> {
    let reason = quic?.close_reason()?;
    Some(format!("QUIC connection: {reason}"))
}

/// For h2 requests the server's GOAWAY turned away: its last stream id, and how many streams
/// we opened above it (sent, left unprocessed). The requests turned away past that many never
/// had a stream: they were not sent, as the summary counts them.
pub fn h2_opened_above_goaway(events: &[TraceEvent]) -> Option<(u32, u32)> {
    let mut last_goaway = None;
    let mut opened = std::collections::BTreeSet::new();
    for e in events {
        let EventKind::H2Frame(f) = &e.kind else {
            continue;
        };
        match (&f.detail, e.dir) {
            (H2Detail::Goaway { last_stream, .. }, Direction::Recv) => {
                last_goaway = Some(*last_stream)
            }
            (_, Direction::Send) if f.frame_type == 0x1 => {
                opened.insert(f.stream);
            }
            _ => {}
        }
    }
    let last = last_goaway?;
    Some((last, opened.range(last + 1..).count() as u32))
}

/// The cause an h2 connection shows: the server's last GOAWAY with an error code, if any.
pub fn h2_cause(events: &[TraceEvent]) -> Option<String> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::H2Frame(f) if e.dir == Direction::Recv => match &f.detail {
            H2Detail::Goaway {
                last_stream,
                code,
                debug,
            } if *code != 0 => Some(format!(
                "the server's GOAWAY: last_stream_id={last_stream}, {}, debug {debug:?}",
                h2_code_name(u64::from(*code))
            )),
            _ => None,
        },
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed_at(request: u32, error: &str) -> TraceEvent {
        TraceEvent {
            at: std::time::Duration::from_millis(u64::from(request)),
            dir: Direction::Local,
            kind: EventKind::RequestFailed {
                request,
                error: error.into(),
            },
        }
    }

    #[test]
    fn failures_the_summary_counts_as_never_sent_read_not_sent() {
        // Three failed, one on the wire: requests 2 and 3 never left (their lines read FAILED
        // beside the summary's not_sent=2).
        let mut events = vec![
            failed_at(3, "protocol: x"),
            failed_at(1, "protocol: x"),
            failed_at(2, "protocol: x"),
        ];
        mark_not_sent(&mut events, 3, 1);
        let errors: Vec<&str> = events
            .iter()
            .map(|e| match &e.kind {
                EventKind::RequestFailed { error, .. } => error.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(
            errors,
            [
                "not sent: protocol: x",
                "protocol: x",
                "not sent: protocol: x"
            ]
        );
        // An outcome missing (a long trace's middle dropped): nothing is guessed.
        let mut events = vec![failed_at(1, "protocol: x")];
        mark_not_sent(&mut events, 2, 0);
        assert!(
            matches!(&events[0].kind, EventKind::RequestFailed { error, .. } if error == "protocol: x")
        );
    }

    #[test]
    fn a_failure_names_its_kind_meaning_and_cause_on_one_line() {
        let line = send_failure(
            SendError::Failed(ErrorKind::H3(0x105)),
            Some("closed by peer:\nframe unexpected"),
        );
        assert_eq!(
            line,
            "h3(H3_FRAME_UNEXPECTED): the stream or connection ended with this HTTP/3 error \
             (closed by peer: frame unexpected)"
        );
        let line = send_failure(SendError::Failed(ErrorKind::Reset), None);
        assert_eq!(line, "reset: the server reset the connection");
    }

    #[test]
    fn connect_failures_say_what_usually_causes_them() {
        let target = Target {
            scheme: "http".into(),
            host: "127.0.0.1".into(),
            port: 1,
            addr: "127.0.0.1:1".parse().expect("addr"),
            dns: std::time::Duration::ZERO,
        };
        let line = connect_failure(
            ErrorKind::ConnectionClosed,
            &target,
            None,
            Attempt::default(),
        );
        assert!(
            line.starts_with("connect failed: connection_closed: the server closed the connection"),
            "{line}"
        );
        assert!(line.contains("http:// to a TLS one?"), "{line}");
        assert!(!line.contains('\n'));
        // An alert to a handshake that named no server (an IP address in the URL) says so,
        // as load's line does.
        let line = connect_failure(
            ErrorKind::Tls,
            &target,
            Some("received fatal alert: UnrecognisedName"),
            Attempt::default(),
        );
        assert!(line.contains("carried no server name (SNI)"), "{line}");
    }
}
