//! HTTP/1.1 messages of one traced connection, read from its plaintext both ways: request and
//! response heads (httparse, with the load generator's own `parse_head` deciding how a
//! response body ends and whether the connection stays open), and body lengths.

use super::event::{Direction, EventKind, Field, H1Head};
use super::recorder::Recorder;
use crate::protocol::h1::{parse_head, BodyFraming, ChunkedBody};
use crate::protocol::wire::WireTap;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The plaintext tap of a traced h1 connection; clones share the parsing state.
#[derive(Debug, Clone)]
pub struct H1Wire {
    state: Arc<Mutex<H1State>>,
}

#[derive(Debug)]
struct H1State {
    recorder: Recorder,
    show_body: bool,
    sent: MessageReader,
    received: MessageReader,
    /// Methods of requests whose responses have not begun: HEAD responses have no body.
    methods: VecDeque<String>,
    /// The server's close was shown.
    peer_closed: bool,
}

/// Where one direction is: reading a head or skipping a body.
#[derive(Debug, Default)]
struct MessageReader {
    head: Vec<u8>,
    body: Option<Body>,
}

#[derive(Debug)]
struct Body {
    framing: &'static str,
    left: BodyLeft,
    length: u64,
    text: Option<Vec<u8>>,
    /// A chunked body's trailer section as it came (`ChunkedBody` bounds it as a head).
    trailers: Vec<u8>,
}

#[derive(Debug)]
enum BodyLeft {
    Length(u64),
    Chunked(ChunkedBody, Vec<u8>),
    UntilClose,
}

impl H1Wire {
    /// A tap recording into `recorder`; `show_body` keeps bodies as text.
    pub fn new(recorder: Recorder, show_body: bool) -> H1Wire {
        H1Wire {
            state: Arc::new(Mutex::new(H1State {
                recorder,
                show_body,
                sent: MessageReader::default(),
                received: MessageReader::default(),
                methods: VecDeque::new(),
                peer_closed: false,
            })),
        }
    }

    /// The connection is over (`by_server`: the server closed it; else the trace ended it): a
    /// body delimited by the close ends here.
    pub fn finish(&self, by_server: bool) {
        let mut state = self.lock();
        let state = &mut *state;
        if let Some(body) = state.received.body.take() {
            // A direction parked after an unparseable head has no body to show: its note
            // already said so, and "cut off: the connection ended first" would blame the close.
            if body.framing != UNPARSED {
                body_event(&state.recorder, Direction::Recv, body, by_server);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, H1State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl WireTap for H1Wire {
    fn sent(&mut self, bytes: &[u8]) {
        self.lock().feed(Direction::Send, bytes);
    }

    fn received(&mut self, bytes: &[u8]) {
        self.lock().feed(Direction::Recv, bytes);
    }

    /// A body delimited by the close ends here, before the response it completes is shown;
    /// then the close itself, once.
    fn closed(&mut self) {
        self.finish(true);
        let mut state = self.lock();
        if !state.peer_closed {
            state.peer_closed = true;
            state
                .recorder
                .record(Direction::Recv, EventKind::PeerClosed);
        }
    }
}

impl H1State {
    fn feed(&mut self, dir: Direction, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let reader = match dir {
                Direction::Recv => &mut self.received,
                _ => &mut self.sent,
            };
            if let Some(body) = reader.body.as_mut() {
                let used = body.feed(bytes, &self.recorder);
                bytes = &bytes[used..];
                if body.is_done() {
                    if let Some(body) = reader.body.take() {
                        body_event(&self.recorder, dir, body, false);
                    }
                }
                continue;
            }
            let before = reader.head.len();
            reader.head.extend_from_slice(bytes);
            match self.parse_head(dir) {
                Some(head_len) => {
                    let reader = self.reader(dir);
                    let used = head_len.saturating_sub(before).min(bytes.len());
                    reader.head.clear();
                    bytes = &bytes[used..];
                }
                None => return,
            }
        }
    }

    fn reader(&mut self, dir: Direction) -> &mut MessageReader {
        match dir {
            Direction::Recv => &mut self.received,
            _ => &mut self.sent,
        }
    }

    /// Parses a complete head from the buffered bytes; returns its length once complete.
    fn parse_head(&mut self, dir: Direction) -> Option<usize> {
        let buf = std::mem::take(&mut self.reader(dir).head);
        let parsed = match dir {
            Direction::Recv => self.response_head(&buf),
            _ => self.request_head(&buf),
        };
        let reader = self.reader(dir);
        reader.head = buf;
        match parsed {
            Ok(Some((head, body))) => {
                let len = head.size as usize;
                self.recorder.record(dir, EventKind::H1Head(head));
                if let Some(body) = body {
                    if body.is_done() {
                        body_event(&self.recorder, dir, body, false);
                    } else {
                        self.reader(dir).body = Some(body);
                    }
                }
                Some(len)
            }
            Ok(None) if self.reader(dir).head.len() <= crate::protocol::MAX_RESPONSE_HEAD => None,
            Ok(None) | Err(()) => {
                // A TLS record (alert 0x15, handshake 0x16, version 3.x): a TLS server
                // answering a cleartext request, as `load`'s report says it.
                let head = &self.reader(dir).head;
                let tls = dir == Direction::Recv
                    && head.len() >= 2
                    && matches!(head[0], 0x15 | 0x16)
                    && head[1] == 0x03;
                let text = match tls {
                    true => {
                        "unparseable HTTP/1.1 head: the server answered with a TLS record \
                             (http:// to a TLS port? use https://); the rest of this direction \
                             is not shown"
                    }
                    false => "unparseable HTTP/1.1 head; the rest of this direction is not shown",
                };
                self.recorder
                    .record(dir, EventKind::Note { text: text.into() });
                // Park the direction: a huge "body" that is never shown.
                self.reader(dir).body =
                    Some(Body::new(UNPARSED, BodyLeft::Length(u64::MAX), false));
                Some(self.reader(dir).head.len())
            }
        }
    }

    fn request_head(&mut self, buf: &[u8]) -> Result<Option<(H1Head, Option<Body>)>, ()> {
        let mut headers = field_room(buf);
        let mut req = httparse::Request::new(&mut headers);
        let size = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(()),
        };
        let method = req.method.unwrap_or_default().to_string();
        let start_line = format!(
            "{} {} HTTP/1.{}",
            method,
            req.path.unwrap_or_default(),
            req.version.unwrap_or(1)
        );
        let fields = fields_of(req.headers);
        let length = content_length(&fields).unwrap_or(0);
        self.methods.push_back(method);
        // A chunked request body (`-H 'Transfer-Encoding: chunked'`) is framed by its chunks,
        // whatever a Content-Length says (RFC 9112 §6.3).
        let body = if chunked(&fields) {
            Some(Body::new(
                "chunked",
                BodyLeft::Chunked(ChunkedBody::default(), Vec::new()),
                self.show_body,
            ))
        } else {
            (length > 0)
                .then(|| Body::new("content-length", BodyLeft::Length(length), self.show_body))
        };
        let head = H1Head {
            start_line,
            fields,
            size: size as u64,
            keeps_open: None,
        };
        Ok(Some((head, body)))
    }

    fn response_head(&mut self, buf: &[u8]) -> Result<Option<(H1Head, Option<Body>)>, ()> {
        let was_head = self.methods.front().is_some_and(|m| m == "HEAD");
        let Some(parsed) = parse_head(buf, was_head).map_err(|_| ())? else {
            return Ok(None);
        };
        let mut headers = field_room(buf);
        let mut resp = httparse::Response::new(&mut headers);
        crate::protocol::h1::parser()
            .parse_response(&mut resp, buf)
            .map_err(|_| ())?;
        let start_line = format!(
            "HTTP/1.{} {} {}",
            resp.version.unwrap_or(1),
            resp.code.unwrap_or_default(),
            resp.reason.unwrap_or_default()
        );
        let interim = parsed.is_interim();
        if !interim {
            self.methods.pop_front();
        }
        let left = match parsed.framing {
            BodyFraming::Empty => None,
            BodyFraming::Length(n) => Some(("content-length", BodyLeft::Length(n))),
            BodyFraming::Chunked => Some((
                "chunked",
                BodyLeft::Chunked(ChunkedBody::default(), Vec::new()),
            )),
            BodyFraming::UntilClose => Some(("until-close", BodyLeft::UntilClose)),
        };
        let head = H1Head {
            start_line: start_line.trim_end().to_string(),
            fields: fields_of(resp.headers),
            size: parsed.head_len as u64,
            keeps_open: (!interim).then_some(!parsed.close),
        };
        let body = left.map(|(name, left)| Body::new(name, left, self.show_body));
        Ok(Some((head, body)))
    }
}

impl Body {
    fn new(framing: &'static str, left: BodyLeft, show: bool) -> Body {
        Body {
            framing,
            left,
            length: 0,
            text: show.then(Vec::new),
            trailers: Vec::new(),
        }
    }

    fn is_done(&self) -> bool {
        match &self.left {
            BodyLeft::Length(n) => *n == 0,
            BodyLeft::Chunked(c, _) => c.is_done(),
            BodyLeft::UntilClose => false,
        }
    }

    /// Consumes body bytes from `bytes`; returns how many belonged to the body.
    fn feed(&mut self, bytes: &[u8], recorder: &Recorder) -> usize {
        let keep = |text: &mut Option<Vec<u8>>, body: &[u8]| {
            if let Some(text) = text {
                text.extend_from_slice(&body[..recorder.body_room(body.len())]);
            }
        };
        match &mut self.left {
            BodyLeft::Length(left) => {
                let take = (*left).min(bytes.len() as u64) as usize;
                *left -= take as u64;
                self.length += take as u64;
                keep(&mut self.text, &bytes[..take]);
                take
            }
            BodyLeft::UntilClose => {
                self.length += bytes.len() as u64;
                keep(&mut self.text, bytes);
                bytes.len()
            }
            BodyLeft::Chunked(chunked, pending) => {
                // Chunk framing may split anywhere: keep the unconsumed tail for the next feed.
                pending.extend_from_slice(bytes);
                let text = &mut self.text;
                match chunked.feed_with(pending, |data| keep(text, data)) {
                    Ok(fed) => {
                        self.length += fed.data;
                        // Bounded by the decoder, which refuses a section past a head's limit.
                        if let Some(from) = fed.trailer_from {
                            self.trailers
                                .extend_from_slice(&pending[from..fed.consumed]);
                        }
                        pending.drain(..fed.consumed);
                        if !chunked.is_done() {
                            return bytes.len();
                        }
                        // Bytes after the body belong to the next message (pipelining).
                        let leftover = pending.len().min(bytes.len());
                        pending.clear();
                        bytes.len() - leftover
                    }
                    Err(_) => {
                        // Said in the body's line: it read as complete ("0 bytes (chunked)").
                        self.framing = "chunked, broken here: the rest is not shown";
                        self.left = BodyLeft::Length(0);
                        bytes.len()
                    }
                }
            }
        }
    }
}

/// Room for every field a head at the start of `buf` can hold, one per line, as the load
/// client reads heads: a fixed 128 showed a head of 150 fields as unparseable.
fn field_room(buf: &[u8]) -> Vec<httparse::Header<'static>> {
    vec![httparse::EMPTY_HEADER; buf.iter().filter(|&&b| b == b'\n').count() + 1]
}

/// The framing of a direction parked after a head that could not be parsed.
const UNPARSED: &str = "unparsed";

fn body_event(recorder: &Recorder, dir: Direction, body: Body, closed_by_server: bool) {
    let cut_off = match &body.left {
        BodyLeft::Length(left) => *left > 0,
        BodyLeft::Chunked(chunked, _) => !chunked.is_done(),
        // Its end is the server's close: one we ended first was cut off.
        BodyLeft::UntilClose => !closed_by_server,
    };
    let announced = match &body.left {
        BodyLeft::Length(left) if body.framing == "content-length" => Some(body.length + left),
        _ => None,
    };
    recorder.record(
        dir,
        EventKind::H1Body {
            length: body.length,
            framing: body.framing,
            text: body.text.map(|t| String::from_utf8_lossy(&t).into_owned()),
            cut_off,
            closed_by_server,
            announced,
            trailers: trailer_fields(&body.trailers),
        },
    );
}

/// A trailer section's fields (`name: value` lines), as they came.
fn trailer_fields(section: &[u8]) -> Vec<Field> {
    String::from_utf8_lossy(section)
        .split("\r\n")
        .filter(|line| !line.is_empty())
        .map(|line| match line.split_once(':') {
            Some((name, value)) => (name.to_string(), value.trim().to_string()),
            None => (line.to_string(), String::new()),
        })
        .collect()
}

fn fields_of(headers: &[httparse::Header<'_>]) -> Vec<Field> {
    headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(&crate::protocol::h1::unfold(h.value)).into_owned(),
            )
        })
        .collect()
}

/// Whether the request's body is chunked: the last transfer coding named is `chunked`.
fn chunked(fields: &[Field]) -> bool {
    fields
        .iter()
        .rfind(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
        .is_some_and(|(_, v)| crate::protocol::h1::ends_chunked(v.as_bytes()))
}

fn content_length(fields: &[Field]) -> Option<u64> {
    fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads_and_bodies(recorder: &Recorder) -> Vec<String> {
        recorder
            .events()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::H1Head(h) => Some(format!("{} {}", e.dir.name(), h.start_line)),
                EventKind::H1Body {
                    length, framing, ..
                } => Some(format!("{} body {length} {framing}", e.dir.name())),
                _ => None,
            })
            .collect()
    }

    /// A chunked request body (`-H 'Transfer-Encoding: chunked'`) is shown by its chunks, and
    /// the next request's head after it: it read as an unparseable head, the rest unshown.
    #[test]
    fn a_chunked_request_body_is_shown() {
        let recorder = Recorder::start_now();
        let mut wire = H1Wire::new(recorder.clone(), true);
        wire.sent(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n");
        assert_eq!(
            heads_and_bodies(&recorder),
            [
                "send POST /echo HTTP/1.1",
                "send body 6 chunked",
                "send GET / HTTP/1.1"
            ]
        );
    }

    /// Heads of more than 128 fields, either way: they read as unparseable (the load client
    /// reads them), and the summary counted the request as not sent.
    #[test]
    fn heads_of_many_fields_are_shown() {
        let recorder = Recorder::start_now();
        let mut wire = H1Wire::new(recorder.clone(), false);
        let fields: String = (0..150).map(|i| format!("x-h{i}: v\r\n")).collect();
        wire.sent(format!("GET / HTTP/1.1\r\nHost: x\r\n{fields}\r\n").as_bytes());
        wire.received(format!("HTTP/1.1 200 OK\r\n{fields}Content-Length: 2\r\n\r\nhi").as_bytes());
        assert_eq!(
            heads_and_bodies(&recorder),
            [
                "send GET / HTTP/1.1",
                "recv HTTP/1.1 200 OK",
                "recv body 2 content-length"
            ]
        );
        let fields = recorder.events().iter().find_map(|e| match &e.kind {
            EventKind::H1Head(h) if e.dir == Direction::Recv => Some(h.fields.len()),
            _ => None,
        });
        assert_eq!(fields, Some(151));
    }

    /// `--body` shows a chunked body's data, either way (it showed none), and an until-close
    /// body the trace ended first is cut off (it read as whole).
    #[test]
    fn chunked_bodies_are_shown_and_an_unclosed_body_is_cut_off() {
        let texts = |recorder: &Recorder| -> Vec<(Option<String>, bool)> {
            recorder
                .events()
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::H1Body { text, cut_off, .. } => Some((text.clone(), *cut_off)),
                    _ => None,
                })
                .collect()
        };
        let recorder = Recorder::start_now();
        let mut wire = H1Wire::new(recorder.clone(), true);
        wire.sent(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
        wire.received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
        wire.received(b"2\r\nde\r\n0\r\n\r\n");
        assert_eq!(
            texts(&recorder),
            [(Some("hello".into()), false), (Some("abcde".into()), false)]
        );
        // Ended by the trace, it is cut off; by the server's close, whole.
        for by_server in [false, true] {
            let recorder = Recorder::start_now();
            let mut wire = H1Wire::new(recorder.clone(), true);
            wire.sent(b"GET / HTTP/1.1\r\n\r\n");
            wire.received(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc");
            wire.finish(by_server);
            assert_eq!(texts(&recorder), [(Some("abc".into()), !by_server)]);
        }
    }

    #[test]
    fn pipelined_requests_and_responses_split_at_every_byte() {
        let recorder = Recorder::start_now();
        let mut wire = H1Wire::new(recorder.clone(), true);
        let requests = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcHEAD /b HTTP/1.1\r\nHost: x\r\n\r\n";
        let responses = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n2\r\nuv\r\n0\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
        for b in requests {
            wire.sent(std::slice::from_ref(b));
        }
        wire.sent(b"GET /c HTTP/1.1\r\n\r\n");
        for b in responses {
            wire.received(std::slice::from_ref(b));
        }
        assert_eq!(
            heads_and_bodies(&recorder),
            [
                "send POST /a HTTP/1.1",
                "send body 3 content-length",
                "send HEAD /b HTTP/1.1",
                "send GET /c HTTP/1.1",
                "recv HTTP/1.1 200 OK",
                "recv body 5 chunked",
                // The HEAD response announces 1000 bytes but has no body.
                "recv HTTP/1.1 200 OK",
                "recv HTTP/1.1 204 No Content",
            ]
        );
        let closes: Vec<Option<bool>> = recorder
            .events()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::H1Head(h) if e.dir == Direction::Recv => Some(h.keeps_open),
                _ => None,
            })
            .collect();
        assert_eq!(closes, [Some(true), Some(true), Some(false)]);
    }

    #[test]
    fn a_close_delimited_body_ends_at_finish_and_garbage_is_a_note() {
        let recorder = Recorder::start_now();
        let mut wire = H1Wire::new(recorder.clone(), false);
        wire.sent(b"GET / HTTP/1.1\r\n\r\n");
        wire.received(b"HTTP/1.0 200 OK\r\n\r\nhello");
        wire.received(b" world");
        wire.finish(true);
        assert_eq!(heads_and_bodies(&recorder)[2], "recv body 11 until-close");
        let garbage = Recorder::start_now();
        let mut wire = H1Wire::new(garbage.clone(), false);
        wire.received(b"\x00\x01 not http\r\n\r\n");
        wire.received(b"more");
        assert!(garbage
            .events()
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Note { text } if text.contains("unparseable"))));
        // At the close, no body line blames the connection for what was never parsed.
        wire.finish(true);
        assert!(!garbage
            .events()
            .iter()
            .any(|e| matches!(&e.kind, EventKind::H1Body { .. })));
    }

    /// The recorded events as the text trace prints them.
    fn rendered(recorder: &Recorder) -> String {
        let mut text = String::new();
        for event in recorder.events() {
            crate::trace::text::render_event(&mut text, &event);
        }
        text
    }

    /// A body cut short says so, with what was announced, and who ended the connection: by
    /// us (`--timeout`, Ctrl-C) while the server still held it open, it read as the server's
    /// close.
    #[test]
    fn a_body_the_close_cut_short_says_so_and_what_was_announced() {
        for (by_server, who) in [
            (true, "the connection ended first"),
            (false, "we ended the connection first"),
        ] {
            let recorder = Recorder::start_now();
            let mut wire = H1Wire::new(recorder.clone(), false);
            wire.sent(b"GET / HTTP/1.1\r\n\r\n");
            wire.received(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
            wire.finish(by_server);
            let text = rendered(&recorder);
            let line = format!("recv body: 3 of 100 bytes (content-length, cut off: {who})");
            assert!(text.contains(&line), "{text}");
        }
    }

    /// A chunk size that is not one breaks the framing: the body line says so, where it read
    /// "0 bytes (chunked)" as if complete.
    #[test]
    fn broken_chunked_framing_is_said() {
        let recorder = Recorder::start_now();
        let mut wire = H1Wire::new(recorder.clone(), false);
        wire.sent(b"GET / HTTP/1.1\r\n\r\n");
        wire.received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n");
        let text = rendered(&recorder);
        assert!(
            text.contains("(chunked, broken here: the rest is not shown)"),
            "{text}"
        );
    }

    /// A chunked body's trailers are shown under its body line, byte by byte or whole (they
    /// were consumed unseen).
    #[test]
    fn chunked_trailers_are_shown() {
        for split in [false, true] {
            let recorder = Recorder::start_now();
            let mut wire = H1Wire::new(recorder.clone(), false);
            wire.sent(b"GET / HTTP/1.1\r\n\r\n");
            let response =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\
X-Checksum: abc\r\nX-Other: 1\r\n\r\n";
            if split {
                for b in response {
                    wire.received(std::slice::from_ref(b));
                }
            } else {
                wire.received(response);
            }
            let text = rendered(&recorder);
            assert!(text.contains("recv body: 3 bytes (chunked)"), "{text}");
            assert!(text.contains("trailer X-Checksum: abc"), "{text}");
            assert!(text.contains("trailer X-Other: 1"), "{text}");
        }
    }
}
