//! Open-model send times to the microsecond: a worker's streams wait for their intended times
//! on one timerfd, not on tokio's timer.
//!
//! tokio's timer has 1 ms ticks: it rounds a deadline up to the next tick and its park rounds
//! up again. Against a fast server at a low rate every send left a mean 0.5 ms after its
//! intended time (measured: lag p50 501 µs at `--rate 100 -c 1` against h2o), and since the
//! corrected latency runs from the intended time, a 57 µs exchange read as 750 µs: the timer's
//! error, not the server's. Here each waiting stream is an entry in a heap ordered by its time,
//! and one timerfd is armed for the earliest; a task of the worker reads it and wakes what is
//! due.
//!
//! An expiry is dear in a virtual machine (the guest's timer writes trap, and the worker
//! wakes from idle: about 10 µs of CPU each here), so expiries come at most [`MIN_GAP`] apart (4,000 a
//! second), and each response that comes back releases the waits already due
//! ([`Pacer::release_due`]): the worker is awake then anyway. Below 4,000 sends a second per
//! worker each send has its own expiry; above, a send leaves at most `MIN_GAP` late, sooner
//! when a response comes in between. Where no timerfd can be made (not Linux, out of descriptors)
//! streams wait on tokio's timer, aimed one tick early so its error centres on the time.

use httpvs_timerfd::TimerFd;
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A worker's pacing: its timerfd and the streams waiting on it.
pub struct Pacer {
    waiting: RefCell<BinaryHeap<Queued>>,
    /// The time the timerfd is armed for, if it is.
    armed: Cell<Option<Instant>>,
    /// The last expiry: the next comes at least [`MIN_GAP`] after it.
    expired: Cell<Option<Instant>>,
    timer: TimerFd,
}

/// The least time between two expiries.
pub const MIN_GAP: Duration = Duration::from_micros(250);

/// One stream's wait: its time, and the waker to call once it has come (none once it has).
struct Entry {
    at: Instant,
    waker: RefCell<Option<Waker>>,
    /// In the heap (its wait was polled before its time).
    queued: Cell<bool>,
}

/// An entry in the heap, earliest first.
struct Queued(Rc<Entry>);

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.0.at == other.0.at
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.at.cmp(&self.0.at)
    }
}

impl Pacer {
    /// A pacer whose driver must be spawned on the worker ([`Pacer::drive`]); `None` where no
    /// timerfd can be made.
    pub fn new() -> Option<Rc<Pacer>> {
        Some(Rc::new(Pacer {
            waiting: RefCell::new(BinaryHeap::new()),
            armed: Cell::new(None),
            expired: Cell::new(None),
            timer: TimerFd::new().ok()?,
        }))
    }

    /// Completes at `at` (within the kernel's wake-up latency, tens of microseconds).
    pub fn until(&self, at: Instant) -> Until<'_> {
        Until {
            pacer: self,
            entry: Rc::new(Entry {
                at,
                waker: RefCell::new(None),
                queued: Cell::new(false),
            }),
        }
    }

    /// Wakes the waits that are due and arms the timer for the next one, forever: spawned
    /// once per worker and dropped with it.
    pub async fn drive(self: Rc<Self>) {
        loop {
            if self.timer.expired().await.is_err() {
                // A timerfd that cannot be read any more: the waits go by tokio's timer (1 ms
                // ticks) from here on, so no stream is left waiting for an expiry.
                let next = self.next().unwrap_or_else(|| Instant::now() + MIN_GAP);
                tokio::time::sleep_until(next.into()).await;
            }
            self.armed.set(None);
            let now = Instant::now();
            self.expired.set(Some(now));
            self.release_due(now);
            if let Some(next) = self.next() {
                self.arm(next);
            }
        }
    }

    /// Wakes the waits due by `now`. Called on every expiry, and by the streams whenever a
    /// response comes back (the worker is awake anyway).
    pub fn release_due(&self, now: Instant) {
        let mut waiting = self.waiting.borrow_mut();
        while waiting.peek().is_some_and(|Queued(entry)| entry.at <= now) {
            if let Some(Queued(entry)) = waiting.pop() {
                if let Some(waker) = entry.waker.take() {
                    waker.wake();
                }
            }
        }
    }

    /// The earliest wait's time.
    fn next(&self) -> Option<Instant> {
        self.waiting.borrow().peek().map(|Queued(entry)| entry.at)
    }

    /// Arms the timer for `at`, or [`MIN_GAP`] after the last expiry if that is later, unless
    /// it is armed for earlier already.
    fn arm(&self, at: Instant) {
        let at = match self.expired.get() {
            Some(expired) => at.max(expired + MIN_GAP),
            None => at,
        };
        if self.armed.get().is_some_and(|armed| armed <= at) {
            return;
        }
        self.armed.set(Some(at));
        // It cannot fail on a valid timerfd with a normalised time.
        let _ = self.timer.arm(at.saturating_duration_since(Instant::now()));
    }
}

/// A stream's wait for its intended time ([`Pacer::until`]). Small: it is part of every
/// open-model stream's task.
pub struct Until<'a> {
    pacer: &'a Pacer,
    entry: Rc<Entry>,
}

impl Future for Until<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let entry = &this.entry;
        if entry.queued.get() && entry.waker.borrow().is_none() {
            // Woken by the pacer.
            return Poll::Ready(());
        }
        if Instant::now() >= entry.at {
            entry.waker.take();
            return Poll::Ready(());
        }
        entry.waker.replace(Some(cx.waker().clone()));
        if !entry.queued.get() {
            entry.queued.set(true);
            this.pacer.waiting.borrow_mut().push(Queued(entry.clone()));
            this.pacer.arm(entry.at);
        }
        Poll::Pending
    }
}

impl Drop for Until<'_> {
    fn drop(&mut self) {
        // A wait dropped early (the run ended) must not be woken; its entry leaves the heap
        // when its time comes.
        self.entry.waker.take();
    }
}

/// Where there is no pacer: how early a stream asks tokio's timer to wake it (one tick).
pub const TOKIO_TIMER_LEAD: Duration = Duration::from_millis(1);

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Waits end at or after their times, in time order, whatever order they began in; a
    /// dropped wait is not woken. (How late they end is measured by hand, not asserted: a
    /// loaded machine may wake any process late.)
    #[tokio::test(flavor = "current_thread")]
    async fn waits_end_at_their_times_in_order() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let pacer = Pacer::new().expect("a timerfd");
                let driver = tokio::task::spawn_local(pacer.clone().drive());
                let start = Instant::now();
                let order = Rc::new(RefCell::new(Vec::new()));
                let offsets_us = [3000u64, 500, 1500, 250, 2000];
                let dropped = pacer.until(start + Duration::from_micros(100));
                drop(dropped);
                let waits = offsets_us.map(|us| {
                    let (pacer, order) = (pacer.clone(), order.clone());
                    tokio::task::spawn_local(async move {
                        let at = start + Duration::from_micros(us);
                        pacer.until(at).await;
                        let now = Instant::now();
                        assert!(now >= at, "{us} µs: woke {:?} early", at - now);
                        order.borrow_mut().push(us);
                    })
                });
                for wait in waits {
                    wait.await.expect("the wait ends");
                }
                assert_eq!(*order.borrow(), [250, 500, 1500, 2000, 3000]);
                assert!(pacer.waiting.borrow().is_empty());
                driver.abort();
            })
            .await;
    }
}
