//! Who to wake when a pipelined response's turn comes: each waiting send registers its
//! ticket, and only that ticket's send is woken (a `Notify` woke every waiter per response,
//! so a 16-deep pipeline polled 16 tasks for each response read).

use std::cell::RefCell;
use std::task::Waker;

/// Waiting sends by ticket (at most the pipelining depth of them).
#[derive(Debug, Default)]
pub struct TurnWakers {
    waiting: RefCell<Vec<(u64, Waker)>>,
}

impl TurnWakers {
    /// Wakes `waker` when `ticket`'s turn comes (or reading ends before it).
    pub fn register(&self, ticket: u64, waker: &Waker) {
        let mut waiting = self.waiting.borrow_mut();
        match waiting.iter_mut().find(|(t, _)| *t == ticket) {
            Some((_, w)) if w.will_wake(waker) => {}
            Some((_, w)) => *w = waker.clone(),
            None => waiting.push((ticket, waker.clone())),
        }
    }

    /// Wakes the send holding `ticket`.
    pub fn wake(&self, ticket: u64) {
        let found = {
            let mut waiting = self.waiting.borrow_mut();
            let at = waiting.iter().position(|(t, _)| *t == ticket);
            at.map(|i| waiting.swap_remove(i).1)
        };
        if let Some(w) = found {
            w.wake();
        }
    }

    /// Wakes every send holding `ticket` or a later one (reading ended; rare).
    pub fn wake_from(&self, ticket: u64) {
        let mut woken = Vec::new();
        {
            let mut waiting = self.waiting.borrow_mut();
            let mut i = 0;
            while i < waiting.len() {
                if waiting[i].0 >= ticket {
                    woken.push(waiting.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
        // Woken outside the borrow: a waker may run code that registers again.
        for w in woken {
            w.wake();
        }
    }
}
