//! Request heads as ready-to-send bytes, encoded once per distinct request on a connection: the
//! HEADERS frame (static-table QPACK) followed by the DATA frame header of the body, if any.

use super::frames::{put_frame_header, FRAME_DATA, FRAME_HEADERS};
use super::qpack::encode_field_section;
use crate::protocol::h1::same_uri;
use crate::protocol::{RequestSpec, USER_AGENT};
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Uri};

/// A run uses one request (or a handful); more distinct ones than this are re-encoded in turn.
const CACHED_HEADS: usize = 8;

/// One encoded head and the request it was built from.
#[derive(Debug)]
struct Entry {
    method: Method,
    uri: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body_len: usize,
    encoded: EncodedHead,
}

impl Entry {
    fn matches(&self, req: &RequestSpec) -> bool {
        self.body_len == req.body.len()
            && self.method == req.method
            && same_uri(&self.uri, &req.uri)
            && self.headers == req.headers
    }
}

/// A request head ready for the wire.
#[derive(Debug, Clone)]
pub struct EncodedHead {
    /// HEADERS frame, then the body's DATA frame header when the request has a body.
    pub bytes: Bytes,
    /// QPACK-encoded field section bytes (the HEADERS payload), for header-compression figures.
    pub field_section_len: u64,
}

/// The encoded heads of one connection.
#[derive(Debug, Default)]
pub struct HeadCache {
    entries: Vec<Entry>,
    next_evict: usize,
}

impl HeadCache {
    /// The encoded head for `req` (a cheap `Bytes` clone once cached).
    pub fn head(&mut self, req: &RequestSpec) -> EncodedHead {
        if let Some(entry) = self.entries.iter().find(|e| e.matches(req)) {
            return entry.encoded.clone();
        }
        let encoded = encode_head(req);
        let entry = Entry {
            method: req.method.clone(),
            uri: req.uri.clone(),
            headers: req.headers.clone(),
            body_len: req.body.len(),
            encoded: encoded.clone(),
        };
        if self.entries.len() < CACHED_HEADS {
            self.entries.push(entry);
        } else {
            self.entries[self.next_evict] = entry;
            self.next_evict = (self.next_evict + 1) % CACHED_HEADS;
        }
        encoded
    }
}

/// The HTTP/3 head of `req`: `:authority` from the URI (or a `-H host:` override), user-agent
/// unless given, content-length for a body (as the HTTP/2 client sends), no connection headers.
pub fn encode_head(req: &RequestSpec) -> EncodedHead {
    let mut authority = req.uri.authority().map_or("", |a| a.as_str()).as_bytes();
    let mut regular: Vec<(&[u8], &[u8])> = Vec::with_capacity(req.headers.len() + 2);
    for (name, value) in &req.headers {
        if *name == header::HOST {
            authority = value.as_bytes();
        } else if !crate::protocol::connection_specific(name, value) && !value.is_empty() {
            // An empty `-H 'Name:'` sends no such header, ours included, as curl's does.
            regular.push((name.as_str().as_bytes(), value.as_bytes()));
        }
    }
    let has = |wanted: &HeaderName| req.headers.iter().any(|(name, _)| name == wanted);
    if !has(&header::USER_AGENT) {
        regular.push((b"user-agent", USER_AGENT.as_bytes()));
    }
    let body_len = req.body.len().to_string();
    if !req.body.is_empty() && !has(&header::CONTENT_LENGTH) {
        regular.push((b"content-length", body_len.as_bytes()));
    }
    let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut fields: Vec<(&[u8], &[u8])> = vec![
        (b":method", req.method.as_str().as_bytes()),
        (
            b":scheme",
            req.uri.scheme_str().unwrap_or("https").as_bytes(),
        ),
        (b":authority", authority),
        (b":path", path.as_bytes()),
    ];
    fields.extend(regular);
    let mut section = Vec::new();
    encode_field_section(&fields, &mut section);
    let mut bytes = Vec::with_capacity(section.len() + 16);
    put_frame_header(&mut bytes, FRAME_HEADERS, section.len() as u64);
    bytes.extend_from_slice(&section);
    if !req.body.is_empty() {
        put_frame_header(&mut bytes, FRAME_DATA, req.body.len() as u64);
    }
    EncodedHead {
        bytes: Bytes::from(bytes),
        field_section_len: section.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::super::qpack::decode_field_section;
    use super::*;
    use crate::protocol::h3::frames::read_frame_header;

    fn spec(body: &'static [u8], headers: Vec<(HeaderName, HeaderValue)>) -> RequestSpec {
        RequestSpec {
            method: Method::POST,
            uri: "https://example.test:4433/a?b=1".parse().expect("uri"),
            headers,
            body: Bytes::from_static(body),
        }
    }

    #[test]
    fn head_is_a_headers_frame_then_the_data_frame_header() {
        let head = encode_head(&spec(b"hello", Vec::new()));
        let (ty, len) = read_frame_header(&head.bytes).expect("frame");
        assert_eq!((ty, len), (FRAME_HEADERS, head.field_section_len));
        let start = head.bytes.len() - 2 - len as usize;
        let block = &head.bytes[start..start + len as usize];
        let section = decode_field_section(block, &mut Vec::new(), &mut Vec::new()).expect("ok");
        let expected = "user-agent".len() + USER_AGENT.len() + "content-length".len() + 1;
        assert_eq!(section.field_bytes, expected as u64);
        assert_eq!(&head.bytes[head.bytes.len() - 2..], &[0x00, 5]);
    }

    #[test]
    fn host_overrides_authority_and_connection_headers_are_dropped() {
        let headers = vec![
            (header::HOST, HeaderValue::from_static("other.test")),
            (header::CONNECTION, HeaderValue::from_static("close")),
            (header::USER_AGENT, HeaderValue::from_static("me")),
        ];
        let head = encode_head(&spec(b"", headers));
        let fields: [(&[u8], &[u8]); 5] = [
            (b":method", b"POST"),
            (b":scheme", b"https"),
            (b":authority", b"other.test"),
            (b":path", b"/a?b=1"),
            (b"user-agent", b"me"),
        ];
        let mut expected = Vec::new();
        encode_field_section(&fields, &mut expected);
        assert_eq!(
            &head.bytes[head.bytes.len() - expected.len()..],
            &expected[..]
        );
        assert_eq!(head.field_section_len, expected.len() as u64);
    }

    #[test]
    fn cache_returns_the_same_bytes_and_tells_requests_apart() {
        let mut cache = HeadCache::default();
        let a = cache.head(&spec(b"x", Vec::new()));
        let again = cache.head(&spec(b"x", Vec::new()));
        assert_eq!(a.bytes.as_ptr(), again.bytes.as_ptr());
        let b = cache.head(&spec(b"xy", Vec::new()));
        assert_ne!(a.bytes, b.bytes);
    }
}
