//! The last response head of a connection, kept byte for byte with what it parsed to: a server
//! under load answers with the same head again and again (h2o's and nginx's change only in
//! `Date`, once a second), and comparing its ~200 bytes costs a few dozen instructions where
//! scanning them cost about 2,700 a response (callgrind, h1 against h2o).
//!
//! Parsing is a pure function of the head's bytes (and of whether the request was HEAD), and a
//! head ends at its first blank line, so a buffer that starts with the remembered bytes starts
//! with that same head.
//!
//! One memo serves all the connections of a worker thread ([`HeadMemo::with_shared`]): they
//! talk to one server and mostly get the same head. A memo per connection was cold by the time
//! its connection's next response came (64 connections and the kernel's work in between), and
//! comparing against it cost about four cache misses a response; the shared one is warm.

use super::response::{parse_head, ResponseHead};
use crate::error::ErrorKind;
use crate::protocol::last_read::LastRead;
use std::cell::RefCell;

/// Heads longer than this are parsed every time (they are rare, and not worth the copy).
const MAX_MEMO: usize = 1024;

/// The last response head seen (by a connection, or by a worker thread's connections) and its parse.
#[derive(Debug, Default)]
pub struct HeadMemo {
    /// The head, keyed by whether its request was HEAD.
    last: LastRead<bool, ResponseHead>,
}

thread_local! {
    static SHARED: RefCell<HeadMemo> = const { RefCell::new(HeadMemo::new()) };
}

impl HeadMemo {
    /// An empty memo.
    pub const fn new() -> Self {
        HeadMemo {
            last: LastRead::new(),
        }
    }

    /// Runs `f` with this thread's memo, shared by its connections.
    pub fn with_shared<R>(f: impl FnOnce(&mut HeadMemo) -> R) -> R {
        SHARED.with(|memo| f(&mut memo.borrow_mut()))
    }

    /// [`parse_head`], answered from the memo when `buf` starts with the last head.
    pub fn parse(
        &mut self,
        buf: &[u8],
        request_was_head: bool,
    ) -> Result<Option<ResponseHead>, ErrorKind> {
        if let Some(head) = self.last.get_prefix(buf, request_was_head) {
            return Ok(Some(head));
        }
        let parsed = parse_head(buf, request_was_head)?;
        if let Some(head) = parsed {
            self.last
                .keep(&buf[..head.head_len], request_was_head, head, MAX_MEMO);
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_answers_as_the_parser_does() {
        let mut memo = HeadMemo::default();
        let a = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let b = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhey";
        let close = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
        for buf in [
            &a[..],
            a,
            b,
            a,
            close,
            &a[..20],
            a,
            b"HTTP/1.1 2x0\r\n\r\n",
            a,
        ] {
            for is_head in [false, true] {
                assert_eq!(
                    memo.parse(buf, is_head),
                    parse_head(buf, is_head),
                    "{:?} {is_head}",
                    String::from_utf8_lossy(buf)
                );
            }
        }
    }
}
