//! A request header block as the owned HTTP/2 server reads it: pseudo-headers and fields kept in
//! buffers reused from request to request, checked as RFC 9113 §8.2-8.3 asks (a malformed
//! request is a stream error of type PROTOCOL_ERROR), an `:authority` or `host` included.

use super::field_bytes::{check_value, is_valid_name, Value};
use crate::authority;

/// The decoded head of one request (or a trailer block); buffers are reused.
#[derive(Debug)]
pub struct RequestHead {
    /// `:method`.
    pub method: Vec<u8>,
    /// `:scheme`.
    pub scheme: Vec<u8>,
    /// `:path`.
    pub path: Vec<u8>,
    /// `:authority`.
    pub authority: Vec<u8>,
    /// Regular fields back to back; `spans` cuts them into names and values.
    bytes: Vec<u8>,
    /// (name end, value end) offsets into `bytes`, one per regular field.
    spans: Vec<(usize, usize)>,
    /// Names plus values of every field, pseudo-headers included (what the 431 limit counts).
    pub header_bytes: usize,
    /// The declared content-length.
    pub content_length: Option<u64>,
    seen: u8,
    regular_seen: bool,
    /// Set once any rule is broken; the stream is then reset.
    pub malformed: bool,
    /// A regular field's value holds a control byte RFC 9113 allows but RFC 9110's field-value
    /// (and `http::HeaderValue`) does not: the request goes the slow way, which answers 400.
    pub control_bytes: bool,
    /// The last `:authority` or `host` found valid on this connection (kept across `clear`).
    known_authority: Vec<u8>,
    /// Field bytes kept at most (the advertised header-list size): past it fields are only
    /// counted, which is all the 431 answer needs, so an HPACK bomb (one table entry named
    /// over and over) costs no memory (kept across `clear`).
    store_limit: usize,
}

const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const PATH: u8 = 4;
const AUTHORITY: u8 = 8;

impl Default for RequestHead {
    /// An empty head that keeps every field.
    fn default() -> RequestHead {
        RequestHead::storing_up_to(usize::MAX)
    }
}

impl RequestHead {
    /// An empty head that keeps at most `limit` bytes of fields.
    pub fn storing_up_to(limit: usize) -> RequestHead {
        RequestHead {
            method: Vec::new(),
            scheme: Vec::new(),
            path: Vec::new(),
            authority: Vec::new(),
            bytes: Vec::new(),
            spans: Vec::new(),
            header_bytes: 0,
            content_length: None,
            seen: 0,
            regular_seen: false,
            malformed: false,
            control_bytes: false,
            known_authority: Vec::new(),
            store_limit: limit,
        }
    }

    /// Whether the fields so far are past what is kept: the request gets 431.
    pub fn over_limit(&self) -> bool {
        self.header_bytes > self.store_limit
    }

    /// Empties the head for the next block.
    pub fn clear(&mut self) {
        self.method.clear();
        self.scheme.clear();
        self.path.clear();
        self.authority.clear();
        self.bytes.clear();
        self.spans.clear();
        self.header_bytes = 0;
        self.content_length = None;
        self.seen = 0;
        self.regular_seen = false;
        self.malformed = false;
        self.control_bytes = false;
    }

    /// Takes one decoded field; `trailer` blocks may carry no pseudo-header.
    pub fn field(&mut self, name: &[u8], value: &[u8], trailer: bool) {
        if let Some(pseudo) = name.strip_prefix(b":") {
            let (bit, slot) = match pseudo {
                b"method" => (METHOD, &mut self.method),
                b"scheme" => (SCHEME, &mut self.scheme),
                b"path" => (PATH, &mut self.path),
                b"authority" => (AUTHORITY, &mut self.authority),
                _ => {
                    self.malformed = true;
                    return;
                }
            };
            // `:method` and the rest of `:path` are checked where they are used: the fast path
            // takes only `GET` and `/`, the slow path parses both and answers 400; a path not
            // beginning with `/` is malformed (RFC 9113 §8.3.1). A repeat is malformed
            // whatever its value, and is not scanned (a block of references to one large table
            // entry repeats it thousands of times).
            let bad_value = self.seen & bit == 0
                && match bit {
                    SCHEME => !is_valid_scheme(value),
                    AUTHORITY => !is_known_good_authority(&mut self.known_authority, value),
                    PATH => !crate::authority::is_valid_path(value),
                    _ => false,
                };
            if trailer || self.regular_seen || self.seen & bit != 0 || bad_value {
                self.malformed = true;
            }
            // Pseudo-headers count toward the 431 limit as the header list's other fields do
            // (RFC 9113 §6.5.2), and as the hyper engine counts them: a 50 KB `:path` was
            // served. They are kept whatever their size (the block's own bound holds them), so
            // the request gets its 431 rather than a reset.
            self.header_bytes += name.len() + value.len();
            // A repeated pseudo-header is malformed already; only the first is kept.
            if self.seen & bit == 0 {
                slot.extend_from_slice(value);
            }
            self.seen |= bit;
            return;
        }
        self.regular_seen = true;
        if self.over_limit() {
            // Past the list size fields are only counted, and the request gets 431 whatever
            // they hold: not scanned, since a block of 1-byte references to one large table
            // entry decodes to thousands of copies of it (a 64 KiB block can name a 4 KB entry
            // some 60,000 times).
            self.header_bytes += name.len() + value.len();
            return;
        }
        let checked = check_value(value);
        if !is_valid_name(name) || checked == Value::Malformed {
            self.malformed = true;
            return;
        }
        self.control_bytes |= checked == Value::Control;
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => self.malformed = true,
            b"te" if value != b"trailers" => self.malformed = true,
            b"host" if !is_known_good_authority(&mut self.known_authority, value) => {
                self.malformed = true
            }
            b"content-length" => {
                let parsed = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                match (parsed, self.content_length) {
                    (None, _) => self.malformed = true,
                    (Some(n), Some(before)) if n != before => self.malformed = true,
                    (Some(n), _) => self.content_length = Some(n),
                }
            }
            _ => {}
        }
        self.header_bytes += name.len() + value.len();
        if self.over_limit() {
            return;
        }
        self.bytes.extend_from_slice(name);
        let name_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.spans.push((name_end, self.bytes.len()));
    }

    /// Whether a complete request head is well formed (RFC 9113 §8.3.1).
    pub fn is_valid_request(&self) -> bool {
        let required = METHOD | SCHEME | PATH;
        !self.malformed && self.seen & required == required && !self.path.is_empty()
    }

    /// The regular fields as (name, value).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut start = 0;
        self.spans.iter().map(move |&(name_end, value_end)| {
            let pair = (
                &self.bytes[start..name_end],
                &self.bytes[name_end..value_end],
            );
            start = value_end;
            pair
        })
    }
}

/// RFC 3986 §3.1: `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`; the two every client
/// sends are taken at a glance.
fn is_valid_scheme(scheme: &[u8]) -> bool {
    if matches!(scheme, b"http" | b"https") {
        return true;
    }
    scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Whether `value` is a valid authority (`authority.rs`). A connection names the same one in
/// request after request, so the last valid one is kept and an equal value is not checked again.
fn is_known_good_authority(known: &mut Vec<u8>, value: &[u8]) -> bool {
    if !value.is_empty() && value == known.as_slice() {
        return true;
    }
    if !authority::is_valid(value) {
        return false;
    }
    known.clear();
    known.extend_from_slice(value);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(fields: &[(&str, &str)]) -> RequestHead {
        let mut head = RequestHead::default();
        for (n, v) in fields {
            head.field(n.as_bytes(), v.as_bytes(), false);
        }
        head
    }

    const BASE: [(&str, &str); 3] = [(":method", "GET"), (":scheme", "http"), (":path", "/")];

    #[test]
    fn a_plain_request_is_valid_and_keeps_its_fields() {
        let h = head(&[BASE[0], BASE[1], BASE[2], ("accept", "*/*"), ("x-a", "1")]);
        assert!(h.is_valid_request());
        let fields: Vec<_> = h.fields().collect();
        assert_eq!(
            fields,
            [(&b"accept"[..], &b"*/*"[..]), (&b"x-a"[..], &b"1"[..])]
        );
        // Pseudo-headers count too (27 of the 40), as the hyper engine counts them.
        assert_eq!(h.header_bytes, 40);
    }

    /// Past the list size a field is only counted: the request gets 431 for its size, and the
    /// fields after the limit are not scanned (a malformed one there does not turn it into a
    /// reset), so a header block that repeats one large table entry costs its bytes, not a scan
    /// of every copy.
    #[test]
    fn fields_past_the_limit_are_counted_not_scanned() {
        let mut h = RequestHead::storing_up_to(100);
        for (n, v) in BASE {
            h.field(n.as_bytes(), v.as_bytes(), false);
        }
        let big = "v".repeat(200);
        h.field(b"x-big", big.as_bytes(), false);
        h.field(b"x-bad", b"a\0b", false);
        h.field(b"Bad-Name", b"1", false);
        assert!(h.over_limit());
        assert!(h.is_valid_request(), "judged malformed past the limit");
        assert_eq!(h.header_bytes, 27 + 5 + 200 + 5 + 3 + 8 + 1);
        // Before the limit the same field is malformed, as ever.
        let h = head(&[BASE[0], BASE[1], BASE[2], ("x-bad", "a\0b")]);
        assert!(!h.is_valid_request());
    }

    #[test]
    fn broken_heads_are_malformed() {
        let cases: &[&[(&str, &str)]] = &[
            &[BASE[0], BASE[1]],
            &[BASE[0], BASE[1], (":path", "")],
            &[BASE[0], BASE[1], BASE[2], (":method", "GET")],
            &[BASE[0], BASE[1], BASE[2], (":status", "200")],
            &[BASE[0], BASE[1], ("x", "1"), BASE[2]],
            &[BASE[0], BASE[1], BASE[2], ("Upper", "1")],
            &[BASE[0], BASE[1], BASE[2], ("connection", "close")],
            &[BASE[0], BASE[1], BASE[2], ("te", "gzip")],
            &[BASE[0], BASE[1], BASE[2], ("content-length", "x")],
            &[BASE[0], BASE[1], BASE[2], (":authority", "a b")],
            &[BASE[0], BASE[1], BASE[2], (":authority", "user@host")],
            &[BASE[0], BASE[1], BASE[2], ("host", "")],
            &[BASE[0], BASE[1], BASE[2], ("host", "a/b")],
            &[BASE[0], BASE[1], BASE[2], ("x-a", " lead")],
            &[BASE[0], BASE[1], BASE[2], ("x-a", "trail\t")],
            &[BASE[0], BASE[1], BASE[2], ("x-a", "a\rb")],
            &[BASE[0], BASE[1], BASE[2], ("x-a", "a\0b")],
            &[BASE[0], (":scheme", "http "), BASE[2]],
            &[BASE[0], (":scheme", "1http"), BASE[2]],
            &[BASE[0], (":scheme", ""), BASE[2]],
            &[BASE[0], BASE[1], (":path", "noslash")],
            &[BASE[0], BASE[1], (":path", "noslash?size=5")],
        ];
        for case in cases {
            assert!(!head(case).is_valid_request(), "{case:?}");
        }
        assert!(head(&[BASE[0], BASE[1], BASE[2], ("te", "trailers")]).is_valid_request());
        let inner = head(&[
            BASE[0],
            BASE[1],
            BASE[2],
            ("x-a", "a b\tc"),
            ("x-b", "caf\u{e9}"),
        ]);
        assert!(inner.is_valid_request() && !inner.control_bytes);
        let control = head(&[
            BASE[0],
            BASE[1],
            BASE[2],
            ("x-a", "a\x01b"),
            ("x-b", "\x7f"),
        ]);
        assert!(control.is_valid_request() && control.control_bytes);
        let named = [(":authority", "[::1]:8443"), ("host", "localhost:8080")];
        assert!(head(&[BASE[0], BASE[1], BASE[2], named[0], named[1]]).is_valid_request());
    }
}
