//! What a TCP connection opens with, read before any protocol takes it: the h2c preface, an
//! HTTP/1.x request line (after any empty lines, RFC 9112 §2.2), a request line of a version
//! past 1.x (answered 505 here, as nginx does; hyper would say 400), or neither (closed without
//! an answer). The bytes read are replayed to the protocol (`Replay`, or `ConnIo`'s prefix).
//! A minor version past 1.1 (`HTTP/1.2`) is replayed as `HTTP/1.1`: RFC 9112 §2.3 has a server
//! process it as the highest minor version it implements, and hyper's parser knows only 1.0 and
//! 1.1.

use crate::date;
use crate::io_util::{write_through_inner, Prefix};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The HTTP/2 client connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Longest opening judged before handing over to hyper.
const MAX_PROBE: usize = 8 * 1024;

/// What a connection opens with.
#[derive(Debug, PartialEq, Eq)]
pub enum Opening {
    /// The HTTP/2 preface.
    H2,
    /// An HTTP/1.x request line (or one too long to judge; hyper answers 414/431 then).
    H1,
    /// A request line of an HTTP version past 1.x (`HTTP/2.0`, `HTTP/3.0`): 505.
    Unsupported,
    /// Neither (like h2spec's invalid preface, or HTTP/0.9): closed without an answer, which is
    /// what an HTTP/2 client must see after a bad preface.
    Neither,
}

/// Reads until the opening is known; returns it and the bytes read, to be replayed.
pub async fn probe<R: AsyncRead + Unpin>(stream: &mut R) -> io::Result<(Opening, Vec<u8>)> {
    let mut seen = Vec::with_capacity(1024);
    loop {
        if stream.read_buf(&mut seen).await? == 0 {
            return Ok((Opening::Neither, seen));
        }
        if let Some(kind) = classify(&seen) {
            if let Some(at) = newer_minor_at(&seen) {
                seen[at] = b'1';
            }
            return Ok((kind, seen));
        }
        if seen.len() >= MAX_PROBE {
            return Ok((Opening::H1, seen));
        }
        if seen.len() == seen.capacity() {
            seen.reserve(seen.len());
        }
    }
}

/// The opening of `seen`, or `None` while it could still be any.
pub fn classify(seen: &[u8]) -> Option<Opening> {
    let n = seen.len().min(PREFACE.len());
    if seen[..n] == PREFACE[..n] {
        return (n == PREFACE.len()).then_some(Opening::H2);
    }
    if seen.starts_with(&PREFACE[..16]) {
        // The preface's first line, then something else: a broken h2 opening, not a request.
        return Some(Opening::Neither);
    }
    // A request line starts with its method, a token: a first byte that no token has (NUL,
    // a TLS handshake's 0x16, binary) never becomes one, and waiting for its line end held
    // the connection until the idle timeout (30 s for 1,000 NUL bytes).
    if seen
        .iter()
        .find(|&&b| b != b'\r' && b != b'\n')
        .is_some_and(|&b| !is_tchar(b))
    {
        return Some(Opening::Neither);
    }
    let (_, line) = first_line(seen)?;
    if line.ends_with(b" HTTP/1.1") || line.ends_with(b" HTTP/1.0") {
        return Some(Opening::H1);
    }
    Some(match request_version(line) {
        Some((b'1', b'2'..=b'9')) => Opening::H1,
        Some((b'2'..=b'9', _)) => Opening::Unsupported,
        _ => Opening::Neither,
    })
}

/// RFC 9110 §5.6.2's `tchar`: what a method (a token) is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The first line of `seen` without its line end, after any empty lines (skipped, as hyper
/// does between requests), and where it starts; `None` until it is whole.
fn first_line(seen: &[u8]) -> Option<(usize, &[u8])> {
    let start = seen.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let rest = &seen[start..];
    let line_end = rest.iter().position(|&b| b == b'\n')?;
    let line = &rest[..line_end];
    Some((start, line.strip_suffix(b"\r").unwrap_or(line)))
}

/// The version digits (major, minor) of a request line shaped `METHOD target HTTP/M.m`.
fn request_version(line: &[u8]) -> Option<(u8, u8)> {
    if line.split(|&b| b == b' ').count() != 3 || !line.first().is_some_and(u8::is_ascii_uppercase)
    {
        return None;
    }
    match line.rsplit(|&b| b == b' ').next() {
        Some(&[b'H', b'T', b'T', b'P', b'/', major, b'.', minor])
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Some((major, minor))
        }
        _ => None,
    }
}

/// Where in `seen` the minor version digit of an HTTP/1.2 to 1.9 request line is.
fn newer_minor_at(seen: &[u8]) -> Option<usize> {
    let (start, line) = first_line(seen)?;
    matches!(request_version(line), Some((b'1', b'2'..=b'9'))).then(|| start + line.len() - 1)
}

/// Writes the 505 answer to a request line of an unsupported version, then shuts down writing.
pub async fn answer_unsupported<W: AsyncWrite + Unpin>(stream: &mut W) -> io::Result<()> {
    const BODY: &str = "this server speaks HTTP/1.0 and HTTP/1.1 on this port \
                        (HTTP/2 by its preface or ALPN, HTTP/3 over QUIC)\n";
    let date = date::header_value();
    let head = format!(
        "HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-type: text/plain\r\n\
         content-length: {}\r\nconnection: close\r\ndate: {}\r\n\r\n{BODY}",
        BODY.len(),
        date.to_str().unwrap_or_default(),
    );
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

/// A stream whose first reads return bytes already read from it (the probed opening).
pub struct Replay<I> {
    inner: I,
    prefix: Prefix,
}

impl<I> Replay<I> {
    /// Wraps `inner`; `prefix` is read before anything from it.
    pub fn new(inner: I, prefix: Vec<u8>) -> Replay<I> {
        Replay {
            inner,
            prefix: Prefix::new(prefix),
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Replay<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.read_into(buf) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

write_through_inner!(Replay);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings_are_told_apart() {
        assert_eq!(classify(PREFACE), Some(Opening::H2));
        assert_eq!(classify(b"PRI * HTTP/2"), None);
        assert_eq!(
            classify(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Some(Opening::H1)
        );
        assert_eq!(classify(b"GET / HTTP/1.0\n"), Some(Opening::H1));
        assert_eq!(classify(b"GET /long/path"), None);
        assert_eq!(
            classify(b"INVALID CONNECTION PREFACE\r\n\r\n"),
            Some(Opening::Neither)
        );
        assert_eq!(
            classify(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"),
            Some(Opening::Neither)
        );
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n\r\n"), None);
    }

    /// Bytes that cannot start a method are judged at once: a NUL, a TLS ClientHello on the
    /// cleartext port, a space. They waited for a line end, up to the idle timeout.
    #[test]
    fn a_first_byte_no_method_has_is_neither_at_once() {
        for seen in [&b"\0"[..], b"\x16\x03\x01\x02\x00", b"\r\n\0", b" GET"] {
            assert_eq!(classify(seen), Some(Opening::Neither), "{seen:?}");
        }
        // A method still being read, or a lowercase one (hyper takes it), waits for its line.
        assert_eq!(classify(b"G"), None);
        assert_eq!(classify(b"get / HTTP/1.1\r\n"), Some(Opening::H1));
    }

    #[test]
    fn empty_lines_before_the_request_line_are_skipped() {
        assert_eq!(classify(b"\r\n"), None);
        assert_eq!(classify(b"\r\n\r\n\nGET / HTTP/1.1\r\n"), Some(Opening::H1));
        assert_eq!(
            classify(b"\r\nGET / HTTP/2.0\r\n"),
            Some(Opening::Unsupported)
        );
    }

    #[test]
    fn a_newer_minor_version_is_read_as_http_1_1() {
        assert_eq!(classify(b"GET / HTTP/1.2\r\n"), Some(Opening::H1));
        assert_eq!(classify(b"\r\nGET / HTTP/1.9\n"), Some(Opening::H1));
        let seen = b"\r\nGET / HTTP/1.2\r\nHost: x\r\n";
        let at = newer_minor_at(seen).expect("a newer minor");
        assert_eq!(seen[at], b'2');
        assert_eq!(&seen[at - 7..=at], b"HTTP/1.2");
        assert_eq!(newer_minor_at(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(newer_minor_at(b"hello HTTP/1.2\r\n"), None);
    }

    #[test]
    fn versions_past_1_are_505_and_the_rest_is_not_http() {
        for line in [
            &b"GET / HTTP/2.0\r\n"[..],
            b"POST /x HTTP/3.0\n",
            b"GET / HTTP/2.1\r\n",
        ] {
            assert_eq!(classify(line), Some(Opening::Unsupported), "{line:?}");
        }
        for line in [
            &b"GET /\r\n"[..],
            b"GET / HTTP/1.10\r\n",
            b"GET / HTTP/2\r\n",
            b"hello HTTP/2.0\r\n",
            b"GET / x HTTP/2.0\r\n",
            b"\x16\x03\x01 HTTP/2.0\r\n",
        ] {
            assert_eq!(classify(line), Some(Opening::Neither), "{line:?}");
        }
    }
}
