//! Fuzzing entry for the owned HTTP/3 readers: a server's stream bytes, as a hostile peer sends them.

use super::frames::{FrameEvent, FrameScanner};
use super::qpack::decode_field_section;
use super::response::{DecodeScratch, ResponseReader, ResponseViolation};

/// What reading one response stream came to: the error, or the head (if whole) and counts.
type Reading = Result<(Option<u16>, u64, u64, u64), ResponseViolation>;

/// Reads `data` (after a first byte that picks the split point) as a response stream, a
/// control stream and a QPACK field section. Panics only where the same bytes read whole and
/// read in two chunks disagree.
pub fn response(data: &[u8]) {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let at = (split as usize).min(data.len());
    let (a, b) = data.split_at(at);
    assert_eq!(read(&[a, b]), read(&[data]), "a response split at {at}");
    for scanner in [FrameScanner::request_stream, FrameScanner::uni_stream] {
        assert_eq!(
            scan(scanner(), &[a, b]),
            scan(scanner(), &[data]),
            "frames split at {at}"
        );
    }
    let (mut names, mut values) = (Vec::new(), Vec::new());
    let _ = decode_field_section(data, &mut names, &mut values);
}

fn read(chunks: &[&[u8]]) -> Reading {
    let mut reader = ResponseReader::default();
    let mut scratch = DecodeScratch::default();
    for chunk in chunks {
        reader.feed(chunk, &mut scratch)?;
    }
    let head = reader.finish().ok().map(|h| h.status);
    Ok((
        head,
        reader.body_bytes(),
        reader.encoded_header_bytes(),
        reader.decoded_header_bytes(),
    ))
}

fn scan(mut scanner: FrameScanner, chunks: &[&[u8]]) -> (Vec<FrameEvent>, bool) {
    let mut events = Vec::new();
    for chunk in chunks {
        scanner.feed(chunk, |event| events.push(event));
    }
    (events, scanner.is_control_stream())
}
