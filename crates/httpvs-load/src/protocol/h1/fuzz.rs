//! Fuzzing entry for the HTTP/1.1 response parsers: a server's bytes, as a hostile peer sends them.

use super::fast_head;
use super::head_memo::HeadMemo;
use super::read_ahead::whole_response;
use super::response::{parse_head, parse_head_httparse, ChunkedBody};

/// Reads `data` (after a first byte that picks the split point) as a response head through the
/// fast scanner, httparse and the memo, and as a chunked body fed in two pieces and whole.
/// Panics only where two readings disagree: the fast scanner with httparse, the memo with a
/// fresh parse, or a chunked body fed in pieces with the same body fed whole.
pub fn response(data: &[u8]) {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    for was_head in [false, true] {
        let reference = parse_head_httparse(data, was_head);
        if let Some(fast) = fast_head::scan(data, was_head) {
            assert_eq!(
                fast.map(Some),
                reference,
                "fast scanner and httparse disagree"
            );
        }
        let parsed = parse_head(data, was_head);
        let mut memo = HeadMemo::default();
        let first = memo.parse(data, was_head);
        let again = memo.parse(data, was_head);
        assert_eq!(first, parsed, "the memo's first parse");
        assert_eq!(again, parsed, "the memo's answer");
    }
    let _ = whole_response(&mut HeadMemo::default(), data);

    let whole = chunked(&[data]);
    let at = (split as usize).min(data.len());
    let (a, b) = data.split_at(at);
    assert_eq!(chunked(&[a, b]), whole, "a chunked body split at {at}");
}

/// What a chunked decoder makes of `pieces` arriving in turn: data bytes, bytes used, done,
/// or the error. Unconsumed bytes carry over to the next piece, as the connection's buffer does.
fn chunked(pieces: &[&[u8]]) -> Result<(u64, usize, bool), crate::error::ErrorKind> {
    let mut body = ChunkedBody::default();
    let (mut data, mut used) = (0, 0);
    let mut buf = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            let fed = body.feed(&buf)?;
            data += fed.data;
            used += fed.consumed;
            buf.drain(..fed.consumed);
            if fed.consumed == 0 || body.is_done() {
                break;
            }
        }
        if body.is_done() {
            break;
        }
    }
    Ok((data, used, body.is_done()))
}
