//! What to answer, whatever the protocol: limits (431, 413), the query (400), the drawn plan, and
//! the response built from it. Protocol modules only move bytes.

use crate::body::Body;
use crate::config::Limits;
use crate::echo::{EchoBudget, EchoLease};
use crate::query::{parse_query, ResponsePlan, ResponseSpec};
use crate::totals::{Counters, Event};
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Uri};
use std::sync::Arc;

const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");
/// `FIXED_BODY.len()` as a header value, so `GET /` allocates no header value.
const FIXED_LEN: HeaderValue = HeaderValue::from_static("18");

/// The path whose response body is the request body.
pub const ECHO_PATH: &str = "/echo";

/// The parts of a request the answer depends on.
pub struct RequestView<'a> {
    /// Request method.
    pub method: &'a Method,
    /// Request target.
    pub uri: &'a Uri,
    /// Request headers.
    pub headers: &'a HeaderMap,
    /// Whether the request has no body (END_STREAM on the headers, no Content-Length/chunked).
    pub body_empty: bool,
}

/// An answer decided before reading the body.
pub enum Decision {
    /// Send this response now; the request body (if any) is not needed.
    Now(Answer),
    /// Read the body (echo it or drain it) within `max_body_bytes`, wait the delay, then answer.
    Later(Box<Pending>),
}

/// A response and whether the connection should close (h1) or go away (h2, h3) after it.
pub struct Answer {
    /// The response.
    pub response: Response<Body>,
    /// Close or GOAWAY after this response.
    pub close: bool,
}

/// A request whose answer waits for its body and its delay.
pub struct Pending {
    /// The parsed query, for its extra headers.
    pub spec: ResponseSpec,
    /// The drawn plan.
    pub plan: ResponsePlan,
    /// Whether the body is echoed (else drained).
    pub echo: bool,
    /// The declared Content-Length, which sizes an echo's buffer at once.
    pub length: Option<u64>,
}

/// Decides the answer from the request head.
pub fn decide(req: &RequestView<'_>, limits: &Limits, counters: &Counters) -> Decision {
    let header_bytes: usize = req
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    if header_bytes > limits.max_header_bytes {
        return Decision::Now(headers_too_large(limits, counters));
    }
    if req.body_empty && is_fast_path(req.method, req.uri) {
        return Decision::Now(fixed_answer());
    }
    let length = content_length(req.headers);
    if length.is_some_and(|n| n > limits.max_body_bytes) {
        return Decision::Now(body_too_large(limits, counters));
    }
    let spec = match req.uri.query() {
        None => ResponseSpec::default(),
        Some(q) => match parse_query(q) {
            Ok(spec) => spec,
            Err(e) => {
                counters.event(Event::BadQuery);
                return Decision::Now(error(StatusCode::BAD_REQUEST, format!("{e}\n")));
            }
        },
    };
    let plan = spec.plan(|| rand::random_range(0..1_000_000));
    // HEAD too, so its head is GET's: the Content-Length of the (empty) body it would echo.
    let echo = req.uri.path() == ECHO_PATH;
    Decision::Later(Box::new(Pending {
        spec,
        plan,
        echo,
        length,
    }))
}

/// The declared Content-Length, if any and valid.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Whether a plain `GET /` with no query and no body can take the pre-built answer.
pub fn is_fast_path(method: &Method, uri: &Uri) -> bool {
    method == Method::GET && uri.path() == "/" && uri.query().is_none()
}

/// The pre-built answer to `GET /`.
pub fn fixed_answer() -> Answer {
    let mut response = Response::new(Body::fixed());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, TEXT_PLAIN);
    headers.insert(CONTENT_LENGTH, FIXED_LEN);
    Answer {
        response,
        close: false,
    }
}

/// The 431 answer to request headers over the limit, counted.
pub fn headers_too_large(limits: &Limits, counters: &Counters) -> Answer {
    counters.event(Event::HeadersTooLarge);
    let text = format!("request headers over {} bytes\n", limits.max_header_bytes);
    error(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, text)
}

/// The 413 answer to a request body over the limit, counted. The rest of the body is not
/// read: h2 and h3 reset just the stream after the answer, and hyper closes an HTTP/1.1
/// connection whose request body was left unread.
pub fn body_too_large(limits: &Limits, counters: &Counters) -> Answer {
    counters.event(Event::BodyTooLarge);
    let text = format!("request body over {} bytes\n", limits.max_body_bytes);
    error(StatusCode::PAYLOAD_TOO_LARGE, text)
}

/// A plain-text error answer.
pub fn error(status: StatusCode, text: String) -> Answer {
    let mut answer = text_answer(Body::bytes(text));
    *answer.response.status_mut() = status;
    answer
}

fn text_answer(body: Body) -> Answer {
    let len = body.len();
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, TEXT_PLAIN);
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    Answer {
        response,
        close: false,
    }
}

impl Pending {
    /// What reads the body: it keeps an echo within `limits` and a part of `budget` (the
    /// connection's; `None` for HTTP/1.1, whose one request at a time gets its own), and only
    /// counts any other body.
    pub fn collector(&self, limits: &Limits, budget: Option<&Arc<EchoBudget>>) -> BodyCollector {
        let echo = self.echo.then(|| {
            let lease = match budget {
                Some(budget) => budget.lease(),
                None => Arc::new(EchoBudget::new(limits)).lease(),
            };
            Echoing {
                body: Vec::new(),
                lease,
                declared: self.length,
            }
        });
        BodyCollector {
            limit: limits.max_body_bytes,
            seen: 0,
            echo,
        }
    }

    /// The answer once the body is read (`echoed` holds it when echoing).
    pub fn answer(&self, echoed: Option<Body>) -> Answer {
        let status = StatusCode::from_u16(self.plan.status).unwrap_or(StatusCode::OK);
        let mut answer = if status_has_body(status) {
            text_answer(match (self.plan.size, echoed) {
                (Some(size), _) => Body::generated(size),
                (None, Some(echoed)) => echoed,
                (None, None) => Body::fixed(),
            })
        } else {
            // RFC 9110 §8.6, §15.3.5, §15.4.5: 204 and 304 have no content, a 204 must not
            // carry Content-Length, and a 304's may only repeat the would-be 200's; so no body,
            // no Content-Length and no Content-Type (`size=` is ignored). Every protocol then
            // ends the stream with the head.
            Answer {
                response: Response::new(Body::empty()),
                close: false,
            }
        };
        *answer.response.status_mut() = status;
        let headers = answer.response.headers_mut();
        for (name, value) in &self.spec.headers {
            if name == http::header::CONTENT_TYPE {
                // Replaces the answer's own, rather than sending two.
                headers.insert(name.clone(), value.clone());
            } else {
                headers.append(name.clone(), value.clone());
            }
        }
        answer.close = self.plan.close;
        answer
    }
}

/// Whether the status forbids a body and Content-Length (HEAD is handled by the protocol layers).
pub fn status_has_body(status: StatusCode) -> bool {
    !(status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED)
}

/// The request body passed `max_body_bytes`.
#[derive(Debug, Clone, Copy)]
pub struct BodyTooLarge;

/// Collected request body bytes, or `Err(BodyTooLarge)` when over the limit or the echo budget.
pub struct BodyCollector {
    limit: u64,
    seen: u64,
    /// The echo so far; `None` when the body is only counted.
    echo: Option<Echoing>,
}

/// An echo being collected.
struct Echoing {
    /// The bytes, in one buffer: a body sent as 1-byte pieces (1-byte DATA frames, 1-byte
    /// chunks) cost an allocation and a list entry each as a list of pieces, about 64 bytes
    /// held a byte (a 4 MiB echo held 270 MB), past any limit on body bytes.
    body: Vec<u8>,
    /// The buffer's capacity, in the connection's budget.
    lease: EchoLease,
    /// The declared Content-Length.
    declared: Option<u64>,
}

impl BodyCollector {
    /// Adds a chunk; `Err` once the limit is passed, or when the echo's buffer would pass the
    /// connection's budget.
    pub fn push(&mut self, chunk: Bytes) -> Result<(), BodyTooLarge> {
        self.seen += chunk.len() as u64;
        if self.seen > self.limit {
            return Err(BodyTooLarge);
        }
        let Some(echo) = self.echo.as_mut() else {
            return Ok(());
        };
        let needed = echo.body.len() + chunk.len();
        if needed > echo.body.capacity() {
            let capacity = grown(echo.body.capacity(), needed, echo.declared, self.limit);
            if !echo.lease.hold(capacity as u64) {
                return Err(BodyTooLarge);
            }
            echo.body.reserve_exact(capacity - echo.body.len());
        }
        // A copy, not the chunk: a chunk is a slice of the transport's receive buffer
        // (quinn's, a whole batch of datagrams; hyper's read buffer), which it keeps alive
        // whole: the budget counts the copy's buffer, and 4 h3 connections whose slices it
        // counted as 64 MiB each held 1 GB.
        echo.body.extend_from_slice(&chunk);
        Ok(())
    }

    /// The echo, holding its part of the budget until it is dropped; `None` when not echoing.
    pub fn finish(self) -> Option<Body> {
        let echo = self.echo?;
        Some(Body::echoed(Bytes::from(echo.body), echo.lease))
    }

    /// Heap bytes it holds for what it kept.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.echo.as_ref().map_or(0, |e| e.body.capacity())
    }
}

/// The capacity an echo's buffer grows to, to hold `needed` bytes: the declared length when it
/// covers them (one allocation, for an honest client), else double, never past the body limit.
fn grown(capacity: usize, needed: usize, declared: Option<u64>, limit: u64) -> usize {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match declared.and_then(|n| usize::try_from(n).ok()) {
        Some(n) if n >= needed && n <= limit => n,
        _ => capacity.saturating_mul(2).min(limit).max(needed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::FIXED_BODY;

    /// A pending `/echo` request that declared `length`.
    fn echo_request(length: Option<u64>) -> Pending {
        let spec = ResponseSpec::default();
        Pending {
            plan: spec.plan(|| 0),
            spec,
            echo: true,
            length,
        }
    }

    /// A collector for an echo within a 1 MiB limit, with a budget of its own.
    fn echo_collector(length: Option<u64>) -> BodyCollector {
        let limits = Limits {
            max_body_bytes: 1 << 20,
            ..Limits::default()
        };
        echo_request(length).collector(&limits, None)
    }

    /// The echo's bytes, all in one piece.
    fn whole(mut body: Body) -> Bytes {
        let bytes = body.next_chunk(usize::MAX).unwrap_or_default();
        assert!(body.is_empty());
        bytes
    }

    /// A kept chunk is a copy of its bytes, not a slice that keeps the transport's whole
    /// receive buffer alive (4 h3 connections holding 64 MiB of echo each held 1 GB).
    #[test]
    fn an_echo_keeps_copies_not_the_transports_buffers() {
        let buffer = Bytes::from(vec![7u8; 64 * 1024]);
        let slice = buffer.slice(100..110);
        let mut collector = echo_collector(None);
        collector.push(slice.clone()).unwrap();
        let kept = whole(collector.finish().unwrap());
        assert_eq!(kept, slice);
        let within = buffer.as_ptr_range().contains(&kept.as_ptr());
        assert!(!within, "the kept bytes point into the receive buffer");
    }

    /// A body in 1-byte pieces is held as its bytes, not as a list of pieces: about 64 bytes
    /// a body byte before (a 4 MiB echo in 1-byte chunks took `httpvs serve` to 270 MB).
    #[test]
    fn an_echo_in_one_byte_pieces_holds_about_its_bytes() {
        let mut collector = echo_collector(None);
        let piece = Bytes::from_static(b"x");
        for _ in 0..100_000 {
            collector.push(piece.clone()).unwrap();
        }
        let held = collector.held();
        assert!(held <= 2 * 100_000, "{held} bytes held");
        let kept = whole(collector.finish().unwrap());
        assert_eq!(kept.len(), 100_000);
        assert!(kept.iter().all(|&b| b == b'x'));
    }

    /// A declared length sizes the buffer once; a longer body still grows it, within the limit.
    #[test]
    fn an_echo_of_declared_length_is_held_in_one_buffer_of_that_length() {
        let mut collector = echo_collector(Some(100_000));
        for _ in 0..100 {
            collector.push(Bytes::from(vec![b'x'; 1000])).unwrap();
            assert_eq!(collector.held(), 100_000);
        }
        collector.push(Bytes::from_static(b"y")).unwrap();
        assert_eq!(collector.held(), 200_000);
        assert_eq!(whole(collector.finish().unwrap()).len(), 100_001);
        let mut collector = echo_collector(Some(10));
        collector.push(Bytes::from(vec![b'x'; 1 << 20])).unwrap();
        assert_eq!(collector.held(), 1 << 20);
        assert!(collector.push(Bytes::from_static(b"x")).is_err());
    }

    /// The echo holds its part of the connection's budget until its body is dropped (sent, or
    /// cut off), not only while it arrives; past the budget a body is refused as too large.
    #[test]
    fn an_echo_holds_its_budget_until_its_body_is_dropped() {
        let limits = Limits {
            max_body_bytes: 1000,
            ..Limits::default()
        };
        let budget = Arc::new(EchoBudget::new(&limits));
        let mut bodies = Vec::new();
        for _ in 0..8 {
            let mut collector = echo_request(Some(1000)).collector(&limits, Some(&budget));
            collector.push(Bytes::from_static(b"x")).unwrap();
            bodies.push(collector.finish().unwrap());
        }
        assert_eq!(budget.held(), 8000);
        let mut ninth = echo_request(Some(1000)).collector(&limits, Some(&budget));
        assert!(ninth.push(Bytes::from_static(b"x")).is_err());
        bodies.pop();
        assert!(ninth.push(Bytes::from_static(b"x")).is_ok());
        drop((bodies, ninth));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn fixed_length_header_matches_the_body() {
        assert_eq!(FIXED_LEN, FIXED_BODY.len().to_string().as_str());
    }

    /// HEAD /echo gets GET /echo's head: the length of the empty body it would echo, not
    /// the fixed body's 18 bytes.
    #[test]
    fn head_echo_has_the_head_of_get_echo() {
        let counters = Counters::default();
        for method in [Method::GET, Method::HEAD] {
            let uri: Uri = "/echo".parse().unwrap();
            let view = RequestView {
                method: &method,
                uri: &uri,
                headers: &HeaderMap::new(),
                body_empty: true,
            };
            let Decision::Later(pending) = decide(&view, &Limits::default(), &counters) else {
                panic!("{method}: answered before the body");
            };
            assert!(pending.echo, "{method}");
            let answer = pending.answer(Some(Body::bytes(Bytes::new())));
            assert_eq!(
                answer.response.headers().get(CONTENT_LENGTH).unwrap(),
                "0",
                "{method}"
            );
        }
    }

    /// `header=content-type:...` replaces the answer's content type rather than adding one.
    #[test]
    fn a_content_type_from_the_query_replaces_the_default() {
        let spec = parse_query("header=content-type:x/y").unwrap();
        let pending = Pending {
            plan: spec.plan(|| 0),
            spec,
            echo: false,
            length: None,
        };
        let answer = pending.answer(None);
        let types: Vec<_> = answer
            .response
            .headers()
            .get_all(http::header::CONTENT_TYPE)
            .iter()
            .collect();
        assert_eq!(types, ["x/y"]);
    }

    #[test]
    fn no_content_statuses_have_no_body_and_no_content_length() {
        for (query, status) in [("status=204&size=10", 204), ("status=304", 304)] {
            let spec = parse_query(query).unwrap();
            let pending = Pending {
                plan: spec.plan(|| 0),
                spec,
                echo: false,
                length: None,
            };
            let answer = pending.answer(Some(Body::bytes("echoed")));
            let response = &answer.response;
            assert_eq!(response.status().as_u16(), status);
            assert!(response.body().is_empty(), "{query}");
            assert!(response.headers().get(CONTENT_LENGTH).is_none(), "{query}");
        }
    }
}
