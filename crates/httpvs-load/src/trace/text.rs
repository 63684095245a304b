//! The trace as text, in the spirit of `nghttp -v`: one line per event starting with its time
//! and direction (`[   1.234ms] send HEADERS frame <...>`), details indented below it.

use super::event::{EventKind, H1Head, H2Detail, H2Frame, HeaderBlock, Priority, TraceEvent};
use super::names;
use super::summary::Summary;
use super::Trace;
use std::fmt::Write;

/// Indentation of detail lines, under the event text.
const INDENT: &str = "               ";

/// Renders the trace, summary line last: its events but those already printed live.
pub fn render(trace: &Trace) -> String {
    let mut out = String::new();
    for event in trace.events.iter().skip(trace.shown_live) {
        render_event(&mut out, event);
    }
    out.push_str(&summary_line(trace.protocol.name(), &trace.summary));
    out.push('\n');
    out
}

/// Renders one event (and its detail lines).
pub fn render_event(out: &mut String, event: &TraceEvent) {
    let ms = event.at.as_secs_f64() * 1000.0;
    let _ = write!(out, "[{ms:>9.3}ms] ");
    let dir = event.dir.name();
    match &event.kind {
        EventKind::TcpConnected { addr } => line(out, format!("TCP connected to {addr}")),
        EventKind::TlsHandshake { version, alpn } => line(
            out,
            format!(
                "TLS handshake done: {}, ALPN {}",
                version.unwrap_or("version unknown"),
                alpn.as_deref().unwrap_or("(none)")
            ),
        ),
        EventKind::QuicHandshake { addr, alpn } => line(
            out,
            format!(
                "QUIC handshake done with {addr}: TLSv1.3, ALPN {}",
                alpn.as_deref().unwrap_or("(none)")
            ),
        ),
        EventKind::H2Frame(frame) => h2_frame(out, dir, frame),
        EventKind::H1Head(head) => h1_head(out, dir, head),
        EventKind::H1Body {
            length,
            framing,
            text,
            cut_off,
            closed_by_server,
            announced,
            trailers,
        } => {
            let of = match announced {
                Some(n) if *cut_off => format!(" of {n}"),
                _ => String::new(),
            };
            let cut = match (*cut_off, *closed_by_server) {
                (false, _) => "",
                (true, true) => ", cut off: the connection ended first",
                // Our --timeout or Ctrl-C: the server had not closed (it read as if it had).
                (true, false) => ", cut off: we ended the connection first",
            };
            line(out, format!("{dir} body: {length}{of} bytes ({framing}{cut})"));
            if let Some(text) = text {
                body_text(out, text);
            }
            for (name, value) in trailers {
                detail(out, format!("trailer {name}: {value}"));
            }
        }
        EventKind::H3StreamOpened { stream } => line(out, format!("h3 stream {stream} opened")),
        EventKind::H3Frame {
            stream,
            frame_type,
            length,
            text,
        } => {
            let name = names::h3_frame(*frame_type);
            let what = match *frame_type {
                0x1 => format!(" ; QPACK-encoded field section: {length} bytes"),
                0x0 => format!(" ; {length} bytes of data"),
                _ => String::new(),
            };
            line(
                out,
                format!("{dir} h3 {name} frame <length={length}, stream_id={stream}>{what}"),
            );
            if let Some(text) = text {
                body_text(out, text);
            }
        }
        EventKind::H3Goaway { stream, id, length } => {
            let length = length.map(|l| format!("length={l}, ")).unwrap_or_default();
            line(
                out,
                format!("{dir} h3 GOAWAY frame <{length}stream_id={stream}> ; first unprocessed request stream id={id}"),
            )
        }
        EventKind::H3StreamFinished { stream } => {
            line(out, format!("{dir} h3 stream {stream} FIN"))
        }
        EventKind::QuicClosed { reason, code } => {
            let code = code.map(|c| format!(" code=0x{c:x}")).unwrap_or_default();
            line(out, format!("QUIC connection closed{code}: {reason}"))
        }
        EventKind::PeerClosed => line(out, format!("{dir} FIN: the server closed the connection")),
        EventKind::Response {
            request,
            status,
            header_bytes,
            body_bytes,
        } => line(
            out,
            format!("request {request}: status {status}, {header_bytes} decoded header bytes, {body_bytes} body bytes"),
        ),
        EventKind::RequestFailed { request, error } => {
            // A request that never went on the wire did not fail there: the summary counts
            // it as not sent, and so does its line.
            if error.starts_with(super::failure::NOT_SENT) {
                line(out, format!("request {request} {error}"))
            } else {
                line(out, format!("request {request} FAILED: {error}"))
            }
        }
        EventKind::Error { error } => line(out, format!("ERROR {error}")),
        EventKind::Note { text } => line(out, format!("note: {text}")),
    }
}

fn line(out: &mut String, text: String) {
    out.push_str(&text);
    out.push('\n');
}

fn detail(out: &mut String, text: impl AsRef<str>) {
    out.push_str(INDENT);
    out.push_str(text.as_ref());
    out.push('\n');
}

fn body_text(out: &mut String, text: &str) {
    for l in text.lines() {
        detail(out, format!("| {l}"));
    }
}

fn h2_frame(out: &mut String, dir: &str, f: &H2Frame) {
    let flag_names = names::h2_flags(f.frame_type, f.flags);
    let flags = if flag_names.is_empty() {
        format!("0x{:02x}", f.flags)
    } else {
        format!("0x{:02x} {}", f.flags, flag_names.join("|"))
    };
    line(
        out,
        format!(
            "{dir} {} frame <length={}, flags={flags}, stream_id={}>",
            names::h2_frame(f.frame_type),
            f.length,
            f.stream
        ),
    );
    match &f.detail {
        H2Detail::None => {}
        H2Detail::Malformed => detail(out, "; malformed payload"),
        H2Detail::Data { data_len, text } => {
            detail(out, format!("; {data_len} bytes of data"));
            if let Some(text) = text {
                body_text(out, text);
            }
        }
        H2Detail::Headers(block) => header_block(out, block),
        H2Detail::HeaderFragment { fragment } => {
            detail(out, format!("; {fragment} bytes of a header block, continued"))
        }
        H2Detail::Priority(p) => detail(out, priority(p)),
        H2Detail::RstStream { code } => {
            detail(out, format!("(error_code={}(0x{code:x}))", names::h2_error(*code)))
        }
        H2Detail::Settings(values) => {
            detail(out, format!("(niv={})", values.len()));
            for (id, value) in values {
                detail(out, format!("[{}(0x{id:02x}):{value}]", names::h2_setting(*id)));
            }
        }
        H2Detail::Ping(data) => {
            let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
            detail(out, format!("(opaque_data={hex})"));
        }
        H2Detail::Goaway {
            last_stream,
            code,
            debug,
        } => detail(
            out,
            format!(
                "(last_stream_id={last_stream}, error_code={}(0x{code:x}), opaque_data(len={})={debug:?})",
                names::h2_error(*code),
                debug.len()
            ),
        ),
        H2Detail::WindowUpdate(n) => detail(out, format!("(window_size_increment={n})")),
    }
}

/// A priority as nghttp shows it: the wire's weight byte is one less than the weight.
fn priority(p: &Priority) -> String {
    format!(
        "(dep_stream_id={}, weight={}, exclusive={})",
        p.depends_on,
        u16::from(p.weight) + 1,
        u8::from(p.exclusive)
    )
}

fn header_block(out: &mut String, block: &HeaderBlock) {
    if let Some(p) = &block.priority {
        detail(out, priority(p));
    }
    if let Some(id) = block.promised_stream {
        detail(out, format!("(promised_stream_id={id})"));
    }
    if let Some(error) = &block.error {
        detail(
            out,
            format!("; header block of {} bytes; {error}", block.encoded),
        );
        return;
    }
    for (name, value) in &block.fields {
        detail(out, format!("{name}: {value}"));
    }
    detail(
        out,
        format!(
            "; HPACK: {} bytes encoded, {} bytes decoded{}",
            block.encoded,
            block.decoded,
            savings(block.encoded, Some(block.decoded))
        ),
    );
}

fn h1_head(out: &mut String, dir: &str, head: &H1Head) {
    line(out, format!("{dir} {}", head.start_line));
    for (name, value) in &head.fields {
        detail(out, format!("{name}: {value}"));
    }
    let mut note = format!("; head: {} bytes", head.size);
    match head.keeps_open {
        Some(true) => note.push_str("; connection stays open"),
        Some(false) => note.push_str("; connection closes after this response"),
        None => {}
    }
    detail(out, note);
}

fn savings(encoded: u64, decoded: Option<u64>) -> String {
    match decoded {
        Some(d) if d > 0 => format!(" ({:.1}% saved)", 100.0 * (1.0 - encoded as f64 / d as f64)),
        _ => String::new(),
    }
}

/// The one summary line.
pub fn summary_line(protocol: &str, s: &Summary) -> String {
    let headers = match s.header_decoded {
        Some(decoded) => format!(
            "headers both ways {} B encoded / {decoded} B decoded{}",
            s.header_encoded,
            savings(s.header_encoded, Some(decoded))
        ),
        None => format!(
            "headers both ways {} B encoded (decoded size not visible)",
            s.header_encoded
        ),
    };
    let statuses = if s.statuses.is_empty() {
        String::new()
    } else {
        let each: Vec<String> = s
            .statuses
            .iter()
            .map(|(st, n)| format!("{st}:{n}"))
            .collect();
        format!(" statuses={}", each.join(","))
    };
    format!(
        "summary: protocol={protocol} connections={} streams={} max_in_flight={} requests={} \
         answered={} failed={} not_sent={}{statuses} sent={} B received={} B; {headers}",
        u8::from(s.connected),
        s.streams_opened,
        s.max_in_flight,
        s.requests,
        s.succeeded,
        s.failed,
        s.not_sent,
        s.bytes_sent,
        s.bytes_received
    )
}
