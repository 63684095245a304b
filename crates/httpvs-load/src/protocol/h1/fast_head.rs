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
    let mut pos = text_end(buf, 12)?;
    if buf[12..pos].first().is_some_and(|&b| b != b' ') {
        return None;
    }
    pos = crlf(buf, pos)?;
    // (name start, colon, end of value) of each header line.
    let mut lines = [(0u32, 0u32, 0u32); FAST_HEADERS];
    let mut count = 0;
    loop {
        if buf.get(pos) == Some(&b'\r') {
            pos = crlf(buf, pos)?;
            break;
        }
        let mut colon = pos;
        while colon < buf.len() && TCHAR[buf[colon] as usize] {
            colon += 1;
        }
        if colon == pos || buf.get(colon) != Some(&b':') || count == FAST_HEADERS {
            return None;
        }
        let end = text_end(buf, colon + 1)?;
        lines[count] = (pos as u32, colon as u32, end as u32);
        count += 1;
        pos = crlf(buf, end)?;
    }
    let mut facts = HeadFacts::default();
    for &(start, colon, end) in &lines[..count] {
        let name = &buf[start as usize..colon as usize];
        // Every use of a value trims it (`HeadFacts` parses trimmed digits and tokens).
        let value = &buf[colon as usize + 1..end as usize];
        if let Err(e) = facts.header(name, value) {
            return Some(Err(e));
        }
    }
    Some(Ok(facts.head(status, http10, pos, request_was_head)))
}

/// Where the text (field value or reason phrase: HTAB, SP, visible ASCII, obs-text) that
/// starts at `from` ends; `None` if it runs off the buffer. Eight bytes at a time: a word
/// with no byte below 0x20 and no 0x7f is all text.
fn text_end(buf: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut at = from;
    while let Some(chunk) = buf.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
        let del = word ^ (ONES * 0x7f);
        let is_del = del.wrapping_sub(ONES) & !del & HIGHS;
        if below_space | is_del != 0 {
            break;
        }
        at += 8;
    }
    while let Some(&b) = buf.get(at) {
        if !(b == b'\t' || (b >= 0x20 && b != 0x7f)) {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// The index past the CRLF at `at`; `None` if something else is there (httparse decides).
fn crlf(buf: &[u8], at: usize) -> Option<usize> {
    (buf.get(at..at + 2)? == b"\r\n").then_some(at + 2)
}

/// Token characters (RFC 9110 §5.6.2), the only ones a header name may hold.
const TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

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
