//! netem's time-ordered packet queue ("tfifo"): packets leave by due time, ties in arrival order,
//! with a front lane for reordered packets that skip the delay.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// A packet waiting for its time.
#[derive(Debug)]
struct Scheduled {
    due: Duration,
    seq: u64,
    packet: Vec<u8>,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// Packets held by one direction until their due time.
#[derive(Debug, Default)]
pub struct TimedQueue {
    front: VecDeque<(Duration, Vec<u8>)>,
    timed: BinaryHeap<Reverse<Scheduled>>,
    latest_due: Option<Duration>,
    seq: u64,
}

impl TimedQueue {
    /// Packets held.
    pub fn len(&self) -> usize {
        self.front.len() + self.timed.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds `packet` until `due`.
    pub fn push(&mut self, due: Duration, packet: Vec<u8>) {
        self.seq += 1;
        self.latest_due = Some(self.latest_due.map_or(due, |l| l.max(due)));
        self.timed.push(Reverse(Scheduled {
            due,
            seq: self.seq,
            packet,
        }));
    }

    /// Puts `packet` ahead of every delayed one, due `now`.
    pub fn push_front(&mut self, now: Duration, packet: Vec<u8>) {
        self.latest_due = Some(self.latest_due.map_or(now, |l| l.max(now)));
        self.front.push_back((now, packet));
    }

    /// The latest due time of any held packet (the rate limiter's reference point).
    pub fn latest_due(&self) -> Option<Duration> {
        if self.is_empty() {
            None
        } else {
            self.latest_due
        }
    }

    /// When the next packet is due.
    pub fn next_due(&self) -> Option<Duration> {
        if let Some((due, _)) = self.front.front() {
            return Some(*due);
        }
        self.timed.peek().map(|Reverse(s)| s.due)
    }

    /// The next packet due at or before `now`, with its due time.
    pub fn pop_due(&mut self, now: Duration) -> Option<(Duration, Vec<u8>)> {
        let popped = if let Some(item) = self.front.pop_front() {
            Some(item)
        } else if self.timed.peek().is_some_and(|Reverse(s)| s.due <= now) {
            self.timed.pop().map(|Reverse(s)| (s.due, s.packet))
        } else {
            None
        };
        if self.is_empty() {
            self.latest_due = None;
        }
        popped
    }
}
