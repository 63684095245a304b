//! HTTP/1.1 response framing without I/O: the head (httparse) and how its body is delimited
//! (RFC 9112 §6.3), plus an incremental chunked-body decoder that counts and discards data.

use crate::error::ErrorKind;

/// Most response heads carry far fewer headers; more than this is treated as malformed.
const MAX_HEADERS: usize = 128;
/// A chunk-size or trailer line longer than this is malformed (guards memory).
const MAX_LINE: usize = 16 * 1024;

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// Bytes of the head, status line through the blank line.
    pub head_len: usize,
    /// How the body is delimited.
    pub framing: BodyFraming,
    /// The connection ends after this response (`Connection: close`, HTTP/1.0 without
    /// keep-alive, or a close-delimited body).
    pub close: bool,
    /// The head itself said so (`Connection: close`, HTTP/1.0 without keep-alive); false when
    /// only a close-delimited body ends the connection.
    pub close_announced: bool,
    /// The head's framing is faulty (RFC 9112 §6.1, §6.3): `Transfer-Encoding` beside a
    /// `Content-Length`, or in an HTTP/1.0 response. The body is read by its transfer coding,
    /// then we close the connection, as the RFC asks, rather than trust where the next
    /// response starts.
    pub faulty_framing: bool,
}

impl ResponseHead {
    /// 1xx responses other than 101 precede the real response and are skipped.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Parses a response head at the start of `buf`; `Ok(None)` means more bytes are needed.
/// A complete, plain head is scanned by `fast_head`; anything else goes through httparse,
/// which also decides every error.
///
/// Either way a head over [`MAX_RESPONSE_HEAD`](crate::protocol::MAX_RESPONSE_HEAD) is an
/// error, whether it came in one read or in many (only an incomplete one used to be checked),
/// and so is a status below 100 (RFC 9110 §15: three digits from 100; h2 refuses it too).
pub fn parse_head(buf: &[u8], request_was_head: bool) -> Result<Option<ResponseHead>, ErrorKind> {
    let head = match super::fast_head::scan(buf, request_was_head) {
        Some(head) => head?,
        None => match parse_head_httparse(buf, request_was_head)? {
            Some(head) => head,
            None => return Ok(None),
        },
    };
    if head.head_len > crate::protocol::MAX_RESPONSE_HEAD || head.status < 100 {
        return Err(ErrorKind::Protocol);
    }
    Ok(Some(head))
}

/// [`parse_head`] through httparse alone (the reference the fast scanner is tested against).
pub fn parse_head_httparse(
    buf: &[u8],
    request_was_head: bool,
) -> Result<Option<ResponseHead>, ErrorKind> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match parse_into(buf, &mut headers, request_was_head) {
        Err(Some(httparse::Error::TooManyHeaders)) => {
            // A valid head with more fields than the stack holds: again on the heap, with room
            // for one field per line of the first 64 KiB (the head limit bounds them).
            let head = &buf[..buf.len().min(crate::protocol::MAX_RESPONSE_HEAD)];
            let room = head.iter().filter(|&&b| b == b'\n').count() + 1;
            let mut many = vec![httparse::EMPTY_HEADER; room];
            parse_into(buf, &mut many, request_was_head).map_err(|_| ErrorKind::Protocol)
        }
        other => other.map_err(|_| ErrorKind::Protocol),
    }
}

/// How response heads are parsed: a field folded over lines (obs-fold) is taken, as RFC 9112
/// §5.2 asks of a user agent and curl does (every such response failed as `protocol`). Its
/// value keeps the fold; [`unfold`] makes it one line where the value is used.
pub fn parser() -> httparse::ParserConfig {
    let mut config = httparse::ParserConfig::default();
    config.allow_obsolete_multiline_headers_in_responses(true);
    config
}

/// A field value with each obs-fold (CRLF or LF, then spaces or tabs) replaced by one space, as
/// RFC 9112 §5.2 asks before the value is read.
pub fn unfold(value: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !value.contains(&b'\n') {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        match value[i] {
            b'\r' | b'\n' => {
                while i < value.len() && matches!(value[i], b'\r' | b'\n' | b' ' | b'\t') {
                    i += 1;
                }
                out.push(b' ');
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Parses a head with room for `headers.len()` fields; an error is httparse's, or `None` for
/// a field whose value breaks HTTP (a bad Content-Length).
fn parse_into<'b>(
    buf: &'b [u8],
    headers: &mut [httparse::Header<'b>],
    request_was_head: bool,
) -> Result<Option<ResponseHead>, Option<httparse::Error>> {
    let mut response = httparse::Response::new(headers);
    let head_len = match parser().parse_response(&mut response, buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Some(e)),
    };
    let status = response.code.ok_or(None)?;
    let http10 = response.version == Some(0);
    let mut facts = HeadFacts::default();
    for header in response.headers.iter() {
        facts
            .header(header.name.as_bytes(), header.value)
            .map_err(|_| None)?;
    }
    Ok(Some(facts.head(status, http10, head_len, request_was_head)))
}

/// What the headers of a head say about framing and the connection.
#[derive(Debug, Default)]
pub struct HeadFacts {
    content_length: Option<u64>,
    chunked: bool,
    transfer_encoding: bool,
    close_token: bool,
    keep_alive_token: bool,
}

impl HeadFacts {
    /// Takes one header into account.
    pub fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), ErrorKind> {
        // Most headers are none of the three: their lengths say so without a comparison.
        if !matches!(name.len(), 10 | 14 | 17) {
            return Ok(());
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let len = parse_content_length(value)?;
            if self.content_length.is_some_and(|seen| seen != len) {
                return Err(ErrorKind::Protocol);
            }
            self.content_length = Some(len);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.transfer_encoding = true;
            self.chunked = ends_chunked(value);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in tokens(value) {
                self.close_token |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
        Ok(())
    }

    /// The head these facts describe (RFC 9112 §6.3).
    pub fn head(
        &self,
        status: u16,
        http10: bool,
        head_len: usize,
        request_was_head: bool,
    ) -> ResponseHead {
        let bodiless =
            request_was_head || (100..200).contains(&status) || status == 204 || status == 304;
        let framing = if bodiless {
            BodyFraming::Empty
        } else if self.transfer_encoding {
            if self.chunked {
                BodyFraming::Chunked
            } else {
                BodyFraming::UntilClose
            }
        } else if let Some(len) = self.content_length {
            BodyFraming::Length(len)
        } else {
            BodyFraming::UntilClose
        };
        let close_announced = self.close_token || (http10 && !self.keep_alive_token);
        // After a 101 the connection speaks another protocol (RFC 9110 §15.2.2): the response
        // counts, with its status, and the connection is not used again.
        let switched = status == 101;
        let faulty_framing = self.transfer_encoding && (self.content_length.is_some() || http10);
        ResponseHead {
            status,
            head_len,
            framing,
            close: close_announced
                || switched
                || faulty_framing
                || framing == BodyFraming::UntilClose,
            close_announced,
            faulty_framing,
        }
    }
}

fn parse_content_length(value: &[u8]) -> Result<u64, ErrorKind> {
    crate::protocol::parse_content_length(value.trim_ascii()).ok_or(ErrorKind::Protocol)
}

/// Whether a `Connection` value names `close` among its tokens (either side's header).
pub fn names_close(value: &[u8]) -> bool {
    tokens(value).any(|t| t.eq_ignore_ascii_case(b"close"))
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

/// Whether a `Transfer-Encoding` value's final coding is `chunked`, the one that delimits a
/// body (RFC 9112 §6.3); any later coding means the body runs to the close.
pub fn ends_chunked(value: &[u8]) -> bool {
    tokens(value)
        .last()
        .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"))
}

/// Decodes a chunked body incrementally, counting data bytes without keeping them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedBody {
    state: ChunkState,
    /// Trailer bytes read so far: the section is bounded as a head is.
    trailer_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// What one [`ChunkedBody::feed`] call consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of input consumed (framing and data).
    pub consumed: usize,
    /// Body data bytes among them.
    pub data: u64,
    /// Where, in this call's input, the trailer section begins (the bytes from there to
    /// `consumed` are trailer lines and the blank line ending them; the trace shows them);
    /// `None` when this call did not reach it.
    pub trailer_from: Option<usize>,
}

impl Default for ChunkedBody {
    fn default() -> Self {
        ChunkedBody {
            state: ChunkState::Size,
            trailer_bytes: 0,
        }
    }
}

impl ChunkedBody {
    /// The terminating chunk and trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consumes as much of `buf` as forms complete framing; stops when more input is needed
    /// or the body is done. Bytes after the body are left alone.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Fed, ErrorKind> {
        self.feed_with(buf, |_| {})
    }

    /// [`ChunkedBody::feed`], handing each run of body data to `on_data` as it is read (the
    /// trace's `--body` shows it).
    pub fn feed_with(
        &mut self,
        buf: &[u8],
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<Fed, ErrorKind> {
        let mut fed = Fed {
            consumed: 0,
            data: 0,
            trailer_from: None,
        };
        loop {
            let rest = &buf[fed.consumed..];
            match self.state {
                ChunkState::Done => return Ok(fed),
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        fed.consumed += n;
                        self.state = if size == 0 {
                            ChunkState::Trailer
                        } else {
                            ChunkState::Data(size)
                        };
                    }
                    Ok(httparse::Status::Partial) if rest.len() < MAX_LINE => return Ok(fed),
                    _ => return Err(ErrorKind::Protocol),
                },
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok(fed);
                    }
                    let take = left.min(rest.len() as u64);
                    on_data(&rest[..take as usize]);
                    fed.consumed += take as usize;
                    fed.data += take;
                    self.state = if take == left {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - take)
                    };
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(fed);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ErrorKind::Protocol);
                    }
                    fed.consumed += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer => {
                    fed.trailer_from.get_or_insert(fed.consumed);
                    match rest.windows(2).position(|w| w == b"\r\n") {
                        Some(0) => {
                            fed.consumed += 2;
                            self.state = ChunkState::Done;
                        }
                        // A trailer section past a head's limit is refused as a head is (12 MB
                        // of trailers were read to the end).
                        Some(line)
                            if self.trailer_bytes + line + 2
                                > crate::protocol::MAX_RESPONSE_HEAD =>
                        {
                            return Err(ErrorKind::Protocol)
                        }
                        Some(line) => {
                            fed.consumed += line + 2;
                            self.trailer_bytes += line + 2;
                        }
                        None if rest.len() < MAX_LINE => return Ok(fed),
                        None => return Err(ErrorKind::Protocol),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> ResponseHead {
        parse_head(raw.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn folds_become_one_space() {
        assert_eq!(&*unfold(b"a\r\n  b\n\tc"), b"a b c");
        assert_eq!(&*unfold(b"plain"), b"plain");
    }

    #[test]
    fn a_head_of_many_fields_is_read() {
        let mut raw = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..1000 {
            raw.push_str(&format!("x-{i}: v\r\n"));
        }
        raw.push_str("Content-Length: 2\r\n\r\nhi");
        let h = head(&raw);
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, BodyFraming::Length(2));
    }

    /// A head over 64 KiB is refused when it is complete too (it passed when one read brought
    /// it whole, and failed when it came in pieces); a status below 100 is refused on both
    /// parsers, as h2 refuses it.
    #[test]
    fn a_long_head_and_a_status_below_100_are_protocol_errors() {
        let mut raw = String::from("HTTP/1.1 200 OK\r\nx: ");
        raw.push_str(&"v".repeat(70_000));
        raw.push_str("\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(parse_head(raw.as_bytes(), false), Err(ErrorKind::Protocol));
        for status in ["099", "000", "042"] {
            for raw in [
                format!("HTTP/1.1 {status} OK\r\nContent-Length: 0\r\n\r\n"),
                format!("HTTP/1.1 {status} OK\r\nContent-Length: 0\r\nX:  y\r\n\r\n"),
            ] {
                assert_eq!(
                    parse_head(raw.as_bytes(), false),
                    Err(ErrorKind::Protocol),
                    "{raw}"
                );
            }
        }
        assert_eq!(head("HTTP/1.1 100 Continue\r\n\r\n").status, 100);
        assert_eq!(
            head("HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n").status,
            999
        );
    }

    #[test]
    fn content_length_keep_alive() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, BodyFraming::Length(5));
        assert_eq!(h.head_len, 38);
        assert!(!h.close);
    }

    #[test]
    fn chunked_wins_over_length_and_close_is_seen() {
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\nConnection: Keep-Alive, Close\r\n\r\n",
        );
        assert_eq!(h.framing, BodyFraming::Chunked);
        assert!(h.close);
    }

    /// Framing RFC 9112 calls faulty closes the connection after the response, which is
    /// still read by its transfer coding: the next response's start cannot be trusted.
    #[test]
    fn faulty_framing_closes_the_connection() {
        for faulty in [
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let h = head(faulty);
            assert_eq!(h.framing, BodyFraming::Chunked, "{faulty:?}");
            assert!(
                h.close && h.faulty_framing && !h.close_announced,
                "{faulty:?}"
            );
        }
        let fine = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(!fine.close && !fine.faulty_framing);
    }

    #[test]
    fn bodiless_statuses_and_head_requests() {
        assert_eq!(
            head("HTTP/1.1 204 No Content\r\n\r\n").framing,
            BodyFraming::Empty
        );
        assert_eq!(
            head("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n").framing,
            BodyFraming::Empty
        );
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, BodyFraming::Empty);
        assert!(head("HTTP/1.1 100 Continue\r\n\r\n").is_interim());
        let switched = head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\n\r\n");
        assert!(!switched.is_interim());
        assert!(
            switched.close,
            "a connection that switched protocols is not reused"
        );
    }

    #[test]
    fn http10_and_unframed_bodies_close() {
        assert!(head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n").close);
        assert!(
            !head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n").close
        );
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::UntilClose);
        assert!(h.close);
    }

    #[test]
    fn malformed_heads_are_protocol_errors() {
        assert_eq!(
            parse_head(b"HTTP/1.1 2x0 OK\r\n\r\n", false),
            Err(ErrorKind::Protocol)
        );
        assert_eq!(
            parse_head(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false
            ),
            Err(ErrorKind::Protocol)
        );
        assert_eq!(parse_head(b"HTTP/1.1 200 O", false), Ok(None));
    }

    #[test]
    fn chunked_body_byte_by_byte() {
        let wire = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        let mut body = ChunkedBody::default();
        let mut pending = Vec::new();
        let mut data = 0;
        let mut used = 0;
        for &b in wire.iter() {
            if body.is_done() {
                break;
            }
            pending.push(b);
            let fed = body.feed(&pending).unwrap();
            pending.drain(..fed.consumed);
            used += fed.consumed;
            data += fed.data;
        }
        assert!(body.is_done());
        assert_eq!(data, 11);
        assert_eq!(used, wire.len() - 4);
    }

    #[test]
    fn chunked_body_in_one_piece_leaves_the_next_response() {
        let wire = b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1";
        let mut body = ChunkedBody::default();
        let fed = body.feed(wire).unwrap();
        assert!(body.is_done());
        assert_eq!(fed.data, 3);
        assert_eq!(&wire[fed.consumed..], b"HTTP/1.1");
    }

    #[test]
    fn bad_chunk_framing_is_a_protocol_error() {
        let mut body = ChunkedBody::default();
        assert_eq!(body.feed(b"zz\r\n"), Err(ErrorKind::Protocol));
        let mut body = ChunkedBody::default();
        assert_eq!(body.feed(b"1\r\naXY"), Err(ErrorKind::Protocol));
    }

    /// A random valid chunked body, fed in random pieces, always decodes to its data length;
    /// random bytes never panic the decoder or the head parser.
    #[test]
    fn random_chunked_bodies_and_garbage() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..500 {
            let mut wire = Vec::new();
            let mut data = 0u64;
            for _ in 0..rng.random_range(0..6) {
                let size = rng.random_range(1..300usize);
                wire.extend_from_slice(format!("{size:x}\r\n").as_bytes());
                wire.extend(vec![b'd'; size]);
                wire.extend_from_slice(b"\r\n");
                data += size as u64;
            }
            wire.extend_from_slice(b"0\r\n");
            if rng.random_bool(0.3) {
                wire.extend_from_slice(b"x-trailer: 1\r\n");
            }
            wire.extend_from_slice(b"\r\n");
            let mut body = ChunkedBody::default();
            let (mut pending, mut got, mut at) = (Vec::new(), 0, 0);
            while !body.is_done() {
                let step = rng.random_range(1..40).min(wire.len() - at);
                pending.extend_from_slice(&wire[at..at + step]);
                at += step;
                let fed = body.feed(&pending).unwrap();
                pending.drain(..fed.consumed);
                got += fed.data;
            }
            assert_eq!((got, at, pending.len()), (data, wire.len(), 0));

            let garbage: Vec<u8> = (0..rng.random_range(0..200))
                .map(|_| rng.random())
                .collect();
            let _ = ChunkedBody::default().feed(&garbage);
            let _ = parse_head(&garbage, false);
        }
    }

    /// A trailer section is bounded as a head is: 64 KiB of trailer lines read whole, one
    /// more line refused (12 MB of trailers were read to the end, 16 KiB a line).
    #[test]
    fn a_trailer_section_past_a_heads_limit_is_refused() {
        let line = format!("x-t: {}\r\n", "v".repeat(1000));
        let lines = crate::protocol::MAX_RESPONSE_HEAD / line.len();
        let mut wire = b"0\r\n".to_vec();
        wire.extend(line.repeat(lines).as_bytes());
        let mut within = wire.clone();
        within.extend_from_slice(b"\r\n");
        let mut body = ChunkedBody::default();
        body.feed(&within).unwrap();
        assert!(body.is_done());
        wire.extend(line.as_bytes());
        wire.extend_from_slice(b"\r\n");
        assert_eq!(ChunkedBody::default().feed(&wire), Err(ErrorKind::Protocol));
    }
}
