//! Who to wake when a pipelined response's turn comes: each waiting send registers its
//! ticket, and only that ticket's send is woken (a `Notify` woke every waiter per response,
//! so a 16-deep pipeline polled 16 tasks for each response read).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::task::Waker;

/// Waiting sends by ticket: a ring indexed from the lowest ticket held, so registering and
/// waking cost the same at any depth (a list searched per response made a 50,000-deep
/// pipeline quadratic). The tickets held span at most the pipelining depth: a turn's wake
/// drops every ticket before it.
#[derive(Debug, Default)]
pub struct TurnWakers {
    waiting: RefCell<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// The ticket of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<Waker>>,
}

impl TurnWakers {
    /// Wakes `waker` when `ticket`'s turn comes (or reading ends before it).
    pub fn register(&self, ticket: u64, waker: &Waker) {
        let mut ring = self.waiting.borrow_mut();
        if ring.slots.is_empty() {
            ring.base = ticket;
        }
        while ticket < ring.base {
            ring.slots.push_front(None);
            ring.base -= 1;
        }
        let at = usize::try_from(ticket - ring.base).unwrap_or(usize::MAX);
        if at >= ring.slots.len() {
            ring.slots.resize(at + 1, None);
        }
        match &mut ring.slots[at] {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
    }

    /// Wakes the send holding `ticket`, whose turn came: any send still held before it (its
    /// turn passed, so none should be) is woken too, to look again.
    pub fn wake(&self, ticket: u64) {
        let mut woken = Vec::new();
        {
            let mut ring = self.waiting.borrow_mut();
            // Nothing waits at one request a connection: nothing to look through.
            if ring.slots.is_empty() {
                return;
            }
            while ring.base <= ticket {
                let Some(slot) = ring.slots.pop_front() else {
                    break;
                };
                ring.base += 1;
                woken.extend(slot);
            }
            // Leading free slots go too, so the ring holds what waits and no more.
            while let Some(None) = ring.slots.front() {
                ring.slots.pop_front();
                ring.base += 1;
            }
        }
        // Woken outside the borrow: a waker may run code that registers again.
        for w in woken {
            w.wake();
        }
    }

    /// Wakes every send holding `ticket` or a later one (reading ended; rare).
    pub fn wake_from(&self, ticket: u64) {
        let woken: Vec<Waker> = {
            let mut ring = self.waiting.borrow_mut();
            let from = usize::try_from(ticket.saturating_sub(ring.base)).unwrap_or(usize::MAX);
            if from >= ring.slots.len() {
                return;
            }
            ring.slots.drain(from..).flatten().collect()
        };
        for w in woken {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn woken(c: &Count) -> usize {
        c.0.load(Ordering::Relaxed)
    }

    /// Only the ticket whose turn came is woken, in any order of registering, and a turn
    /// wakes a send held before it rather than dropping it.
    #[test]
    fn wakes_the_turns_ticket_and_none_after() {
        let turns = TurnWakers::default();
        let (c5, w5) = counter();
        let (c3, w3) = counter();
        let (c4, w4) = counter();
        turns.register(5, &w5);
        turns.register(3, &w3);
        turns.register(4, &w4);
        turns.register(4, &w4);
        turns.wake(3);
        assert_eq!((woken(&c3), woken(&c4), woken(&c5)), (1, 0, 0));
        turns.wake(5);
        assert_eq!((woken(&c3), woken(&c4), woken(&c5)), (1, 1, 1));
        assert!(turns.waiting.borrow().slots.is_empty());
    }

    /// Reading's end wakes the ticket given and every later one, and leaves the earlier.
    #[test]
    fn wake_from_wakes_the_rest() {
        let turns = TurnWakers::default();
        let counts: Vec<_> = (10..14).map(|t| (t, counter())).collect();
        for (t, (_, w)) in &counts {
            turns.register(*t, w);
        }
        turns.wake_from(12);
        let got: Vec<usize> = counts.iter().map(|(_, (c, _))| woken(c)).collect();
        assert_eq!(got, [0, 0, 1, 1]);
        turns.wake_from(100);
        turns.wake(11);
        let got: Vec<usize> = counts.iter().map(|(_, (c, _))| woken(c)).collect();
        assert_eq!(got, [1, 1, 1, 1]);
    }

    /// A deep pipeline's turns cost the same each: the ring never holds more than waits.
    #[test]
    fn ring_stays_as_deep_as_the_pipeline() {
        let turns = TurnWakers::default();
        let (c, w) = counter();
        for t in 0..100_000u64 {
            turns.register(t + 16, &w);
            turns.wake(t);
            assert!(turns.waiting.borrow().slots.len() <= 17);
        }
        assert_eq!(woken(&c), 100_000 - 16);
    }
}
