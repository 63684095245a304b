//! Fuzzing entry for the owned HTTP/2 server core: a client's bytes, as a hostile peer sends them.

use super::core::{CoreLimits, Event, ServerCore};
use crate::body::Body;
use crate::date::Stamp;
use bytes::Bytes;

/// Some second's date, for the fixed answer.
const DATE: Stamp = Stamp {
    second: 0,
    text: *b"Thu, 01 Jan 1970 00:00:00 GMT",
};

/// Feeds `data` (after a first byte that picks where the first read ends) to a server core as
/// two reads, the client preface included, answering every request as the shell does: `GET /`
/// with the fixed answer, anything else with a small body and its path in a header. Never
/// panics on the bytes: a connection error ends the input.
pub fn server(data: &[u8]) {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let mut core = ServerCore::new(CoreLimits {
        max_streams: 8,
        max_header_list: 16 * 1024,
        accept_limit: Some(16),
        max_early_resets: 4,
    });
    let at = (split as usize * 4).min(data.len());
    let mut input = Vec::new();
    for read in [&data[..at], &data[at..]] {
        input.extend_from_slice(read);
        let ended = on_read(&mut core, &mut input);
        core.pump();
        core.out.clear();
        if ended {
            break;
        }
    }
}

/// One read's worth of events, answered; whether the connection must end.
fn on_read(core: &mut ServerCore, input: &mut Vec<u8>) -> bool {
    let mut consumed = 0;
    core.begin_batch();
    let mut to_answer = Vec::new();
    let ended = loop {
        match core.next_event(input, &mut consumed) {
            Ok(None) => break false,
            Err(_) => break true,
            Ok(Some(Event::Request { stream, head, .. })) => {
                let path = head.path.clone();
                to_answer.push((stream, path));
            }
            Ok(Some(Event::Data { .. } | Event::Reset { .. })) => {}
        }
    };
    input.drain(..consumed);
    for (stream, path) in to_answer {
        if path == b"/" {
            core.respond_fixed(stream, &DATE);
        } else {
            let shown: &[u8] = if path.iter().all(|b| b.is_ascii_graphic()) {
                &path
            } else {
                b"-"
            };
            let fields = [
                (&b"content-type"[..], &b"text/plain"[..]),
                (b"x-path", shown),
            ];
            let body = Body::Whole(Some(Bytes::from_static(b"fuzz")));
            core.respond(stream, 200, fields.into_iter(), body, false);
        }
    }
    ended
}
