//! HTTP/1.1 request heads, serialized once per distinct request and reused for every send.
//!
//! The cache is shared by the connections of a worker thread ([`HeadCache::with_shared`]): they
//! send the same request, so its entry stays warm, where a cache per connection cost a few
//! cache misses a request (and a copy of every head per connection).

use crate::protocol::{RequestSpec, USER_AGENT};
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, USER_AGENT as UA};
use http::Method;
use std::cell::RefCell;

/// A run uses one request (or a handful); more distinct ones than this are re-serialized.
const CACHED_HEADS: usize = 8;

/// Serialized request heads, keyed by the request they came from.
#[derive(Debug, Default)]
pub struct HeadCache {
    entries: Vec<(HeadKey, Cached)>,
    next_evict: usize,
}

/// A serialized head, and whether its body goes in chunk framing ([`sends_chunked`]): both
/// decided once per distinct request, not per send.
#[derive(Debug)]
struct Cached {
    head: Vec<u8>,
    chunked: bool,
}

/// What the head depends on; the body itself is sent separately.
#[derive(Debug, PartialEq, Eq)]
struct HeadKey {
    method: Method,
    uri: http::Uri,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    body_len: usize,
    keepalive: bool,
}

impl HeadKey {
    fn matches(&self, req: &RequestSpec, keepalive: bool) -> bool {
        self.body_len == req.body.len()
            && self.keepalive == keepalive
            && self.method == req.method
            && same_uri(&self.uri, &req.uri)
            && self.headers == req.headers
    }
}

/// Whether two URIs are written the same: a cheap cache-key test (`Uri`'s own equality
/// parses and folds case, several hundred instructions a request). Equal URIs written
/// differently only miss the cache.
pub fn same_uri(a: &http::Uri, b: &http::Uri) -> bool {
    same_str(
        a.path_and_query().map(|p| p.as_str()),
        b.path_and_query().map(|p| p.as_str()),
    ) && same_str(
        a.authority().map(|x| x.as_str()),
        b.authority().map(|x| x.as_str()),
    ) && same_str(a.scheme_str(), b.scheme_str())
}

/// String equality that skips the comparison for the same bytes in memory: a cached key
/// holds a clone of the run's URI, whose parts share the original's buffer.
fn same_str(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b) || a == b,
        (a, b) => a == b,
    }
}

thread_local! {
    static SHARED: RefCell<HeadCache> = const { RefCell::new(HeadCache::new()) };
}

impl HeadCache {
    /// An empty cache.
    pub const fn new() -> Self {
        HeadCache {
            entries: Vec::new(),
            next_evict: 0,
        }
    }

    /// Runs `f` with this thread's cache, shared by its connections.
    pub fn with_shared<R>(f: impl FnOnce(&mut HeadCache) -> R) -> R {
        SHARED.with(|heads| f(&mut heads.borrow_mut()))
    }

    /// The serialized head for `req`, built on first use. Borrowed, not a `Bytes` clone:
    /// a clone and its drop are two atomic reference-count updates per request.
    /// Beside it, whether the body goes in chunk framing.
    pub fn head(&mut self, req: &RequestSpec, keepalive: bool) -> (&[u8], bool) {
        let at = match self
            .entries
            .iter()
            .position(|(k, _)| k.matches(req, keepalive))
        {
            Some(at) => at,
            None => self.insert(req, keepalive),
        };
        let cached = &self.entries[at].1;
        (&cached.head, cached.chunked)
    }

    fn insert(&mut self, req: &RequestSpec, keepalive: bool) -> usize {
        let head = Cached {
            head: serialize_head(req, keepalive),
            chunked: sends_chunked(req),
        };
        let key = HeadKey {
            method: req.method.clone(),
            uri: req.uri.clone(),
            headers: req.headers.clone(),
            body_len: req.body.len(),
            keepalive,
        };
        if self.entries.len() < CACHED_HEADS {
            self.entries.push((key, head));
            self.entries.len() - 1
        } else {
            let at = self.next_evict;
            self.entries[at] = (key, head);
            self.next_evict = (at + 1) % CACHED_HEADS;
            at
        }
    }
}

/// Writes the request line and headers. Host and User-Agent are added unless `-H` gave them;
/// Content-Length is added for a body (or an empty POST/PUT/PATCH, as curl does).
pub fn serialize_head(req: &RequestSpec, keepalive: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(req.method.as_str().as_bytes());
    out.push(b' ');
    let target = req.uri.path_and_query().map_or("/", |pq| pq.as_str());
    out.extend_from_slice(if target.is_empty() { "/" } else { target }.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let has = |name: &http::HeaderName| req.headers.iter().any(|(n, _)| n == name);
    if !has(&HOST) {
        if let Some(authority) = req.uri.authority() {
            // Userinfo never goes into Host.
            let host = authority.as_str().rsplit('@').next().unwrap_or("");
            push_header(&mut out, b"Host", host.as_bytes());
        }
    }
    if !has(&UA) {
        push_header(&mut out, b"User-Agent", USER_AGENT.as_bytes());
    }
    // An empty `-H 'Name:'` sends no such header, ours included, as curl's does.
    for (name, value) in req.headers.iter().filter(|(_, v)| !v.is_empty()) {
        push_header(&mut out, name.as_str().as_bytes(), value.as_bytes());
    }
    let wants_length =
        !req.body.is_empty() || matches!(req.method, Method::POST | Method::PUT | Method::PATCH);
    if wants_length && !has(&CONTENT_LENGTH) && !has(&TRANSFER_ENCODING) {
        push_header(
            &mut out,
            b"Content-Length",
            req.body.len().to_string().as_bytes(),
        );
    }
    if !keepalive && !has(&CONNECTION) {
        push_header(&mut out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Whether `-H Transfer-Encoding` asks for a chunked body (its last coding is `chunked`, as
/// RFC 9112 §6.1 requires of a request): the body then goes out in chunk framing, not bare.
pub fn sends_chunked(req: &RequestSpec) -> bool {
    req.headers
        .iter()
        .any(|(name, value)| name == TRANSFER_ENCODING && ends_in_chunked(value.as_bytes()))
}

/// Whether a Transfer-Encoding value's last coding is `chunked`.
pub fn ends_in_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// Appends `body` as one chunk and the last chunk, with no trailers.
pub fn push_chunked(out: &mut Vec<u8>, body: &[u8]) {
    if !body.is_empty() {
        out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
}

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(method: Method, uri: &str, body: &'static [u8]) -> RequestSpec {
        RequestSpec {
            method,
            uri: uri.parse().unwrap(),
            headers: vec![],
            body: bytes::Bytes::from_static(body),
        }
    }

    #[test]
    fn a_chunked_transfer_encoding_frames_the_body() {
        let mut req = spec(Method::POST, "http://h/", b"hello");
        assert!(!sends_chunked(&req));
        req.headers.push((
            TRANSFER_ENCODING,
            http::HeaderValue::from_static("gzip, Chunked"),
        ));
        assert!(sends_chunked(&req));
        let head = String::from_utf8(serialize_head(&req, true)).unwrap();
        assert!(!head.contains("Content-Length"), "{head}");
        let mut body = Vec::new();
        push_chunked(&mut body, b"hello");
        assert_eq!(body, b"5\r\nhello\r\n0\r\n\r\n");
        body.clear();
        push_chunked(&mut body, b"");
        assert_eq!(body, b"0\r\n\r\n");
    }

    #[test]
    fn get_head_has_host_and_agent() {
        let head = serialize_head(
            &spec(Method::GET, "http://u@127.0.0.1:8080/a?b=1", b""),
            true,
        );
        let text = String::from_utf8(head).unwrap();
        assert_eq!(
            text,
            format!(
                "GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: {USER_AGENT}\r\n\r\n"
            )
        );
    }

    /// An empty `-H 'User-Agent:'` sends none, as curl's does (it went out empty).
    #[test]
    fn an_empty_header_is_left_out_with_its_default() {
        let mut req = spec(Method::GET, "http://h/", b"");
        req.headers
            .push(("user-agent".parse().unwrap(), "".parse().unwrap()));
        let text = String::from_utf8(serialize_head(&req, true)).unwrap();
        assert_eq!(text, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    }

    #[test]
    fn post_without_keepalive_has_length_and_close() {
        let mut req = spec(Method::POST, "http://h/", b"abc");
        req.headers
            .push(("user-agent".parse().unwrap(), "me".parse().unwrap()));
        let text = String::from_utf8(serialize_head(&req, false)).unwrap();
        assert!(text.contains("user-agent: me\r\n"), "{text}");
        assert!(!text.contains("User-Agent"), "{text}");
        assert!(
            text.ends_with("Content-Length: 3\r\nConnection: close\r\n\r\n"),
            "{text}"
        );
    }

    #[test]
    fn cache_reuses_heads_per_request() {
        let mut cache = HeadCache::default();
        let req = spec(Method::GET, "http://h/x", b"");
        let a = cache.head(&req, true).0.to_vec();
        let a_at = cache.head(&req, true).0.as_ptr();
        assert_eq!(cache.head(&req, true).0.as_ptr(), a_at);
        let c = cache.head(&req, false).0.to_vec();
        assert_ne!(a, c);
        let same_text = spec(Method::GET, "http://h/x", b"");
        assert_eq!(cache.head(&same_text, true).0.as_ptr(), a_at);
        let other = spec(Method::GET, "http://h/y", b"");
        assert_ne!(cache.head(&other, true).0, &a[..]);
    }
}
