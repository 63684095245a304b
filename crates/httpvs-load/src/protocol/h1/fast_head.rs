//! A fast path for the common response head: complete, `HTTP/1.x NNN`, CRLF lines, plain
//! `name: value` headers. It scans only what framing needs (about a fifth of httparse's
//! instructions on h2o's heads) and hands anything unusual, incomplete or malformed back to
//! httparse (`None`), so errors and edge cases are decided in one place.

use super::response::{HeadFacts, ResponseHead};
use crate::error::ErrorKind;

/// Headers tracked on the fast path; a head with more goes to httparse.
const FAST_HEADERS: usize = 32;

/// The head at the start of `buf` if it is complete and plain; `None` to let httparse decide.
pub fn scan(buf: &[u8], request_was_head: bool) -> Option<Result<ResponseHead, ErrorKind>> {
    let http10 = match buf.get(..9)? {
        b"HTTP/1.1 " => false,
        b"HTTP/1.0 " => true,
        _ => return None,
    };
    let digits = buf.get(9..12)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let status = digits
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    let mut pos = line_end(buf, 12)?;
    if buf[12..pos - 2].first().is_some_and(|&b| b != b' ')
        || !buf[12..pos - 2].iter().all(|&b| is_text(b))
    {
        return None;
    }
    // (name start, colon, line end without CRLF) of each header line.
    let mut lines = [(0u32, 0u32, 0u32); FAST_HEADERS];
    let mut count = 0;
    loop {
        let end = line_end(buf, pos)?;
        if end == pos + 2 {
            pos = end;
            break;
        }
        let line = &buf[pos..end - 2];
        let colon = line.iter().position(|&b| b == b':')?;
        if colon == 0 || !line[..colon].iter().all(|&b| is_tchar(b)) {
            return None;
        }
        if !line[colon + 1..].iter().all(|&b| is_text(b)) || count == FAST_HEADERS {
            return None;
        }
        lines[count] = (pos as u32, (pos + colon) as u32, (end - 2) as u32);
        count += 1;
        pos = end;
    }
    let mut facts = HeadFacts::default();
    for &(start, colon, end) in &lines[..count] {
        let name = &buf[start as usize..colon as usize];
        let value = buf[colon as usize + 1..end as usize].trim_ascii();
        if let Err(e) = facts.header(name, value) {
            return Some(Err(e));
        }
    }
    Some(Ok(facts.head(status, http10, pos, request_was_head)))
}

/// The index just past the CRLF ending the line that starts at `from`; `None` if there is no
/// complete line or it ends in a bare LF.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let lf = from + buf.get(from..)?.iter().position(|&b| b == b'\n')?;
    (lf > from && buf[lf - 1] == b'\r').then_some(lf + 1)
}

/// Field-value and reason-phrase bytes: HTAB, SP, visible ASCII, obs-text.
fn is_text(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// Token characters (RFC 9110 §5.6.2), the only ones a header name may hold.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::super::response::parse_head_httparse;
    use super::*;

    type Answers = (
        Option<Result<ResponseHead, ErrorKind>>,
        Result<Option<ResponseHead>, ErrorKind>,
    );

    fn both(head: &[u8]) -> Answers {
        (scan(head, false), parse_head_httparse(head, false))
    }

    #[test]
    fn a_plain_head_matches_httparse() {
        let head = b"HTTP/1.1 200 OK\r\nDate: Sun, 22 Nov 2026 04:00:00 GMT\r\nServer: h2o/2.2.5\r\nContent-Length: 18\r\nConnection: keep-alive\r\n\r\nbody";
        let (fast, slow) = both(head);
        assert_eq!(fast.unwrap().ok(), slow.unwrap());
    }

    /// Heads built from plain parts and then damaged at random: whenever the fast path gives an
    /// answer, it is httparse's answer.
    #[test]
    fn random_heads_agree_with_httparse() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9112);
        let names = [
            "Content-Length",
            "content-length",
            "Transfer-Encoding",
            "Connection",
            "Server",
            "X-A",
            "Bad Name",
            "",
        ];
        let values = [
            "18",
            " 18 ",
            "0",
            "chunked",
            "gzip, chunked",
            "close",
            "keep-alive",
            "Keep-Alive, Close",
            "x\ty",
            "1a",
            "",
        ];
        let mut agreed = 0;
        for _ in 0..20_000 {
            let mut head = Vec::new();
            head.extend_from_slice(
                ["HTTP/1.1 ", "HTTP/1.0 ", "HTTP/2.0 "][rng.random_range(0..3)].as_bytes(),
            );
            head.extend_from_slice(
                ["200", "204", "304", "101", "100", "404", "2x0"][rng.random_range(0..7)]
                    .as_bytes(),
            );
            head.extend_from_slice(
                [" OK", "", " ", " Not Found"][rng.random_range(0..4)].as_bytes(),
            );
            head.extend_from_slice(b"\r\n");
            for _ in 0..rng.random_range(0..6) {
                head.extend_from_slice(names[rng.random_range(0..names.len())].as_bytes());
                head.extend_from_slice([": ", ":", " : "][rng.random_range(0..3)].as_bytes());
                head.extend_from_slice(values[rng.random_range(0..values.len())].as_bytes());
                head.extend_from_slice(b"\r\n");
            }
            head.extend_from_slice(b"\r\n");
            if rng.random_bool(0.3) {
                let at = rng.random_range(0..head.len());
                head[at] = rng.random();
            }
            if rng.random_bool(0.2) {
                head.truncate(rng.random_range(0..head.len()));
            }
            let (fast, slow) = both(&head);
            if let Some(fast) = fast {
                assert_eq!(fast.map(Some), slow, "{:?}", String::from_utf8_lossy(&head));
                agreed += 1;
            }
        }
        assert!(agreed > 1000, "the fast path took only {agreed} heads");
    }
}
