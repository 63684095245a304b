//! The trace as JSON lines: one object per event, each with `t_ms` (milliseconds since the
//! connection attempt began), `dir` (`send`, `recv`, `local`) and `type`; the summary last.

use super::event::{EventKind, H2Detail, TraceEvent};
use super::names;
use super::summary::Summary;
use super::Trace;
use serde_json::{json, Map, Value};

/// Renders the trace as JSON lines, summary last: its events but those already printed live.
pub fn render(trace: &Trace) -> String {
    let mut out = String::new();
    for event in trace.events.iter().skip(trace.shown_live) {
        out.push_str(&event_json(event).to_string());
        out.push('\n');
    }
    // The last event's time, rounded as the events' own are.
    let end = trace.events.last().map_or(0.0, |e| millis(e.at));
    out.push_str(&summary_json(trace.protocol.name(), &trace.summary, end).to_string());
    out.push('\n');
    out
}

/// Milliseconds with microsecond resolution (no binary-fraction noise in the output).
fn millis(at: std::time::Duration) -> f64 {
    at.as_micros() as f64 / 1000.0
}

/// One event as a JSON object.
pub fn event_json(event: &TraceEvent) -> Value {
    let (ty, fields) = kind_json(&event.kind);
    let mut obj = Map::new();
    obj.insert("t_ms".into(), json!(millis(event.at)));
    obj.insert("dir".into(), json!(event.dir.name()));
    obj.insert("type".into(), json!(ty));
    if let Value::Object(fields) = fields {
        obj.extend(fields);
    }
    Value::Object(obj)
}

fn kind_json(kind: &EventKind) -> (String, Value) {
    match kind {
        EventKind::TcpConnected { addr } => {
            ("tcp_connected".into(), json!({"addr": addr.to_string()}))
        }
        EventKind::TlsHandshake { version, alpn } => (
            "tls_handshake".into(),
            json!({"tls_version": version, "alpn": alpn}),
        ),
        EventKind::QuicHandshake { addr, alpn } => (
            "quic_handshake".into(),
            json!({"addr": addr.to_string(), "tls_version": "TLSv1.3", "alpn": alpn}),
        ),
        EventKind::H2Frame(f) => {
            let mut v = json!({
                "proto": "h2",
                "stream": f.stream,
                "length": f.length,
                "flags": f.flags,
                "flag_names": names::h2_flags(f.frame_type, f.flags),
            });
            if let (Value::Object(obj), Value::Object(extra)) = (&mut v, h2_detail(&f.detail)) {
                obj.extend(extra);
            }
            (names::h2_frame(f.frame_type), v)
        }
        EventKind::H1Head(h) => (
            "h1_head".into(),
            json!({"proto": "h1", "start_line": h.start_line, "fields": fields(&h.fields),
                   "size": h.size, "keeps_open": h.keeps_open}),
        ),
        EventKind::H1Body {
            length,
            framing,
            text,
            cut_off,
            closed_by_server,
            announced,
            trailers,
        } => (
            "h1_body".into(),
            json!({"proto": "h1", "length": length, "framing": framing, "text": text,
                   "cut_off": cut_off,
                   "cut_off_by": cut_off.then_some(if *closed_by_server { "server" } else { "client" }),
                   "announced": announced, "trailers": fields(trailers)}),
        ),
        EventKind::H3StreamOpened { stream } => (
            "stream_opened".into(),
            json!({"proto": "h3", "stream": stream}),
        ),
        EventKind::H3Frame {
            stream,
            frame_type,
            length,
            text,
        } => (
            names::h3_frame(*frame_type),
            json!({"proto": "h3", "stream": stream, "frame_type": frame_type, "length": length,
                   "text": text}),
        ),
        EventKind::H3Goaway { stream, id, length } => (
            "GOAWAY".into(),
            json!({"proto": "h3", "stream": stream, "frame_type": 0x7, "length": length,
                   "goaway_id": id}),
        ),
        EventKind::H3StreamFinished { stream } => (
            "stream_fin".into(),
            json!({"proto": "h3", "stream": stream}),
        ),
        EventKind::QuicClosed { reason, code } => (
            "quic_closed".into(),
            json!({"reason": reason, "code": code}),
        ),
        EventKind::Response {
            request,
            status,
            header_bytes,
            body_bytes,
        } => (
            "response".into(),
            json!({"request": request, "status": status, "header_bytes": header_bytes,
                   "body_bytes": body_bytes}),
        ),
        EventKind::PeerClosed => ("peer_closed".into(), json!({})),
        EventKind::RequestFailed { request, error } => (
            "request_failed".into(),
            json!({"request": request, "error": error}),
        ),
        EventKind::Error { error } => ("error".into(), json!({"error": error})),
        EventKind::Note { text } => ("note".into(), json!({"text": text})),
    }
}

fn h2_detail(detail: &H2Detail) -> Value {
    match detail {
        H2Detail::None => json!({}),
        H2Detail::Malformed => json!({"malformed": true}),
        H2Detail::Data { data_len, text } => json!({"data_length": data_len, "text": text}),
        H2Detail::Headers(b) => json!({
            "fields": fields(&b.fields),
            "encoded_bytes": b.encoded,
            "decoded_bytes": b.decoded,
            "priority": b.priority.map(|p| json!({"depends_on": p.depends_on,
                "weight": u16::from(p.weight) + 1, "exclusive": p.exclusive})),
            "promised_stream": b.promised_stream,
            "decode_error": b.error,
        }),
        H2Detail::HeaderFragment { fragment } => json!({"fragment_bytes": fragment}),
        H2Detail::Priority(p) => json!({"depends_on": p.depends_on,
            "weight": u16::from(p.weight) + 1, "exclusive": p.exclusive}),
        H2Detail::RstStream { code } => {
            json!({"error_code": code, "error": names::h2_error(*code)})
        }
        H2Detail::Settings(values) => {
            // By name, the value in force (a repeated setting's last, RFC 9113 §6.5.3); and
            // every entry in wire order, repeats included, as the text shows them.
            let settings: Map<String, Value> = values
                .iter()
                .map(|(id, v)| (names::h2_setting(*id), json!(v)))
                .collect();
            let entries: Vec<Value> = values
                .iter()
                .map(|(id, v)| json!({"id": id, "name": names::h2_setting(*id), "value": v}))
                .collect();
            json!({"settings": settings, "entries": entries})
        }
        H2Detail::Ping(data) => {
            json!({"opaque_data": data.iter().map(|b| format!("{b:02x}")).collect::<String>()})
        }
        H2Detail::Goaway {
            last_stream,
            code,
            debug,
        } => json!({
            "last_stream_id": last_stream, "error_code": code,
            "error": names::h2_error(*code), "debug_data": debug}),
        H2Detail::WindowUpdate(n) => json!({"window_size_increment": n}),
    }
}

fn fields(fields: &[(String, String)]) -> Value {
    Value::Array(fields.iter().map(|(n, v)| json!([n, v])).collect())
}

/// The summary as a JSON object of type `summary`.
pub fn summary_json(protocol: &str, s: &Summary, t_ms: f64) -> Value {
    json!({
        "t_ms": t_ms,
        "dir": "local",
        "type": "summary",
        "protocol": protocol,
        "connections": u8::from(s.connected),
        "requests": s.requests,
        "succeeded": s.succeeded,
        "statuses": s.statuses.iter().map(|(st, n)| (st.to_string(), json!(n))).collect::<Map<_, _>>(),
        "failed": s.failed,
        "not_sent": s.not_sent,
        "streams_opened": s.streams_opened,
        "max_in_flight": s.max_in_flight,
        "bytes_sent": s.bytes_sent,
        "bytes_received": s.bytes_received,
        "header_encoded_bytes": s.header_encoded,
        "header_decoded_bytes": s.header_decoded,
        "header_savings_percent": s.header_savings_percent(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::{Direction, H2Detail, H2Frame};

    #[test]
    fn settings_keep_every_entry_in_wire_order_beside_the_values_in_force() {
        let event = TraceEvent {
            at: std::time::Duration::ZERO,
            dir: Direction::Recv,
            kind: EventKind::H2Frame(H2Frame {
                frame_type: 0x4,
                flags: 0,
                stream: 0,
                length: 18,
                detail: H2Detail::Settings(vec![(3, 100), (3, 5), (1, 4096)]),
            }),
        };
        let v = event_json(&event);
        // A repeated setting's last value is the one in force (RFC 9113 §6.5.3).
        assert_eq!(v["settings"]["SETTINGS_MAX_CONCURRENT_STREAMS"], 5);
        let entries: Vec<(u64, u64)> = v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| (e["id"].as_u64().unwrap(), e["value"].as_u64().unwrap()))
            .collect();
        // It kept only 5 and 4096, by name: the text showed three entries, the JSON two.
        assert_eq!(entries, [(3, 100), (3, 5), (1, 4096)]);
    }
}
