//! The bytes an HTTP/1.1 connection has queued to write: heads, small bodies and chunk framing
//! copied in, and each large body kept as the run's shared `Bytes` at its place among them, so
//! a connection holds no copy of it (an 8 MB `--data-file` cost two copies per connection and
//! pipelined request: 266 MB at `-c 16`, where h2c held 20 MB).

use bytes::{Buf, Bytes};
use std::collections::VecDeque;
use std::io::IoSlice;

/// Bodies this long or longer are written from the shared `Bytes`; shorter ones are copied,
/// so a small request still leaves in one `send` from one buffer.
pub const SHARED_BODY: usize = 16 * 1024;

/// Most pieces one vectored write hands the kernel (IOV_MAX is 1024).
const MAX_PIECES: usize = 64;

/// Queued bytes in write order.
#[derive(Debug, Default)]
pub struct Pending {
    /// Everything but the shared bodies, in order.
    inline: Vec<u8>,
    /// Each shared body, after the first `at` bytes of `inline`.
    shared: VecDeque<(usize, Bytes)>,
}

impl Pending {
    /// An empty queue whose inline buffer holds `capacity` bytes before it grows.
    pub fn with_capacity(capacity: usize) -> Pending {
        Pending {
            inline: Vec::with_capacity(capacity),
            shared: VecDeque::new(),
        }
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.inline.is_empty() && self.shared.is_empty()
    }

    /// The bytes copied in so far, to append to.
    pub fn inline_mut(&mut self) -> &mut Vec<u8> {
        &mut self.inline
    }

    /// Queues `body`: copied if short, else kept shared.
    #[inline]
    pub fn push_body(&mut self, body: &Bytes) {
        if body.len() < SHARED_BODY {
            self.inline.extend_from_slice(body);
        } else {
            self.shared.push_back((self.inline.len(), body.clone()));
        }
    }

    /// The inline bytes, when no body is shared (then the queue is one buffer).
    #[inline]
    pub fn as_one(&self) -> Option<&[u8]> {
        self.shared.is_empty().then_some(&self.inline[..])
    }

    /// The queue's pieces in write order, none empty.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.shared
            .iter()
            .flat_map(move |(at, body)| {
                let before = &self.inline[start..*at];
                start = *at;
                [before, &body[..]]
            })
            .chain(std::iter::once(
                &self.inline[self.shared.back().map_or(0, |(at, _)| *at)..],
            ))
            .filter(|piece| !piece.is_empty())
    }

    /// The first pieces as a vectored write takes them.
    pub fn io_slices(&self) -> Vec<IoSlice<'_>> {
        self.pieces().take(MAX_PIECES).map(IoSlice::new).collect()
    }

    /// Total bytes queued.
    pub fn len(&self) -> usize {
        self.inline.len() + self.shared.iter().map(|(_, b)| b.len()).sum::<usize>()
    }

    /// Drops the first `n` bytes, written.
    pub fn consume(&mut self, mut n: usize) {
        loop {
            let before = self.shared.front().map_or(self.inline.len(), |(at, _)| *at);
            let take = n.min(before);
            self.inline.drain(..take);
            for (at, _) in &mut self.shared {
                *at -= take;
            }
            n -= take;
            if n == 0 {
                return;
            }
            let Some((_, body)) = self.shared.front_mut() else {
                return;
            };
            if n < body.len() {
                body.advance(n);
                return;
            }
            n -= body.len();
            self.shared.pop_front();
        }
    }

    /// Empties the queue, keeping the inline buffer's capacity.
    #[inline]
    pub fn clear(&mut self) {
        self.inline.clear();
        if !self.shared.is_empty() {
            self.shared.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(p: &Pending) -> Vec<u8> {
        p.pieces().flatten().copied().collect()
    }

    #[test]
    fn large_bodies_stay_shared_and_keep_their_place() {
        let big = Bytes::from(vec![b'b'; SHARED_BODY]);
        let mut p = Pending::with_capacity(16);
        p.inline_mut().extend_from_slice(b"H1");
        p.push_body(&big);
        p.inline_mut().extend_from_slice(b"H2");
        p.push_body(&Bytes::from_static(b"small"));
        p.inline_mut().extend_from_slice(b"H3");
        p.push_body(&big);
        assert!(p.as_one().is_none());
        let mut expected = b"H1".to_vec();
        expected.extend_from_slice(&big);
        expected.extend_from_slice(b"H2smallH3");
        expected.extend_from_slice(&big);
        assert_eq!(written(&p), expected);
        assert_eq!(p.len(), expected.len());
        // Written in pieces of every size, what is left is always the rest (compared whole
        // near the boundaries and now and then, its length every time).
        for step in [1, 7, SHARED_BODY - 1, SHARED_BODY + 3] {
            let mut q = Pending::default();
            q.inline_mut().extend_from_slice(b"H1");
            q.push_body(&big);
            q.inline_mut().extend_from_slice(b"H2smallH3");
            q.push_body(&big);
            let mut done = 0;
            for turn in 0.. {
                if q.is_empty() {
                    break;
                }
                let n = step.min(q.len());
                q.consume(n);
                done += n;
                assert_eq!(q.len(), expected.len() - done, "step {step} at {done}");
                let near_a_boundary = [2, 2 + SHARED_BODY, 11 + SHARED_BODY]
                    .iter()
                    .any(|b| done.abs_diff(*b) < 16);
                if near_a_boundary || turn % 997 == 0 || q.len() < 16 {
                    assert_eq!(written(&q), expected[done..], "step {step} at {done}");
                }
            }
        }
    }

    #[test]
    fn small_bodies_are_one_buffer() {
        let mut p = Pending::default();
        p.inline_mut().extend_from_slice(b"HEAD");
        p.push_body(&Bytes::from_static(b"body"));
        assert_eq!(p.as_one(), Some(&b"HEADbody"[..]));
        assert_eq!(p.io_slices().len(), 1);
        p.clear();
        assert!(p.is_empty() && p.pieces().next().is_none());
    }
}
