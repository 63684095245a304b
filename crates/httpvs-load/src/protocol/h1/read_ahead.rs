//! Pipelined responses completed ahead of their turn: the send reading its own response goes
//! on through every later response already whole in the buffer, so a read that brought 16
//! responses finishes 16 sends in one pass (and their next requests leave in one write).
//!
//! Only simple responses are taken ahead: a complete head with no body or a Content-Length
//! body wholly buffered. Anything else (interim, chunked, close-delimited, HEAD requests on
//! the connection) is left for its own send to read.

use super::head_memo::HeadMemo;
use super::response::BodyFraming;
use crate::protocol::ResponseInfo;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Instant;

/// A response taken ahead: what it was and when its bytes had arrived.
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    /// The response (its `ttfb` is filled in by its own send, which knows when it started).
    pub info: ResponseInfo,
    /// When the response was found whole in the buffer.
    pub arrived: Instant,
}

/// Responses taken ahead, by ticket (at most the pipelining depth of them).
#[derive(Debug, Default)]
pub struct ReadyResponses {
    ready: RefCell<VecDeque<(u64, Ready)>>,
}

impl ReadyResponses {
    /// Keeps `ready` for `ticket`.
    pub fn put(&self, ticket: u64, ready: Ready) {
        self.ready.borrow_mut().push_back((ticket, ready));
    }

    /// Whether `ticket`'s response was taken ahead.
    pub fn has(&self, ticket: u64) -> bool {
        self.ready.borrow().iter().any(|(t, _)| *t == ticket)
    }

    /// Takes `ticket`'s response, if it was taken ahead.
    pub fn take(&self, ticket: u64) -> Option<Ready> {
        let mut ready = self.ready.borrow_mut();
        let at = ready.iter().position(|(t, _)| *t == ticket)?;
        ready.remove(at).map(|(_, r)| r)
    }
}

/// The next response if it lies whole in `buf`: its info (ttfb zero), whether it closes the
/// connection, and the bytes it takes. `None` when it is incomplete or not a simple one.
/// Heads are parsed through the connection's `memo`.
pub fn whole_response(memo: &mut HeadMemo, buf: &[u8]) -> Option<(ResponseInfo, usize)> {
    let head = memo.parse(buf, false).ok()??;
    if head.is_interim() {
        return None;
    }
    let body = match head.framing {
        BodyFraming::Empty => 0,
        BodyFraming::Length(len) => len,
        BodyFraming::Chunked | BodyFraming::UntilClose => return None,
    };
    let total = head.head_len.checked_add(usize::try_from(body).ok()?)?;
    if buf.len() < total {
        return None;
    }
    let info = ResponseInfo {
        status: head.status,
        ttfb: std::time::Duration::ZERO,
        header_bytes: head.head_len as u64,
        body_bytes: body,
        close_requested: head.close,
        done_at: None,
    };
    Some((info, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_only_whole_simple_responses() {
        let memo = &mut HeadMemo::default();
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 204 No Content\r\n\r\n";
        let (first, used) = whole_response(memo, two).unwrap();
        assert_eq!((first.status, first.body_bytes, used), (200, 2, 40));
        let (second, rest) = whole_response(memo, &two[used..]).unwrap();
        assert_eq!((second.status, rest), (204, two.len() - used));
        assert!(
            whole_response(memo, &two[..used - 1]).is_none(),
            "body not all here"
        );
        assert!(whole_response(
            memo,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        .is_none());
        assert!(whole_response(memo, b"HTTP/1.1 100 Continue\r\n\r\n").is_none());
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(whole_response(memo, close).unwrap().0.close_requested);
    }
}
