//! The per-request timeout without a timer per request or per stream: one timer per connection
//! slot watches the deadlines of its streams' requests.
//!
//! Each stream of a slot has one small entry (deadline, expired flag, waker) instead of a tokio
//! `Sleep` in its task (112 bytes, and the task's size class is a multiple of 128): with 100,000
//! streams in flight that was most of the engine's memory per stream. The slot's watcher task
//! keeps one `Sleep` armed at the earliest deadline it knows of. A stream's requests start in
//! order and every request of a slot has the same limit, so a new deadline is almost never
//! earlier than the armed one: the watcher wakes about once per timeout period (or when a
//! request does time out), scans the slot's `-m` entries, wakes the expired ones and re-arms at
//! the earliest deadline still pending. Nothing is inserted into tokio's timer wheel per request.
//!
//! The watcher shares its slot's task, which wakes for every response; its timer wakes it
//! through a waker of its own that also raises a flag, so a wake that was not the timer's (and
//! did not arm an earlier deadline) returns at once instead of polling the timer (about 200
//! instructions and a cache miss a request on h1).

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Where the watcher's timer rests while no deadline is pending.
const IDLE: Duration = Duration::from_secs(24 * 3600);

/// The request deadlines of one slot's streams and the watcher that enforces them.
pub struct RequestDeadlines {
    entries: RefCell<Vec<Entry>>,
    /// The earliest deadline the watcher must wake for (`None`: nothing pending).
    armed: Cell<Option<Instant>>,
    watcher: RefCell<Option<Waker>>,
    /// What the watcher's timer wakes: raises the flag, then wakes the watcher's task.
    timer_wake: Arc<TimerWake>,
    /// `timer_wake` as a waker, made once.
    timer_waker: Waker,
    /// The deadline the timer was last polled for.
    polled_for: Cell<Option<Instant>>,
}

impl Default for RequestDeadlines {
    fn default() -> Self {
        let timer_wake = Arc::new(TimerWake::default());
        RequestDeadlines {
            entries: RefCell::default(),
            armed: Cell::default(),
            watcher: RefCell::default(),
            timer_waker: Waker::from(timer_wake.clone()),
            timer_wake,
            polled_for: Cell::default(),
        }
    }
}

/// The watcher timer's waker: says that the timer fired, and wakes the watcher's task.
#[derive(Default)]
struct TimerWake {
    fired: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl TimerWake {
    fn set_task(&self, waker: &Waker) {
        *self.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(waker.clone());
    }
}

impl Wake for TimerWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

/// One stream's request in flight under a deadline.
#[derive(Default)]
struct Entry {
    deadline: Option<Instant>,
    expired: bool,
    waker: Option<Waker>,
}

impl RequestDeadlines {
    /// Deadlines for `streams` streams, numbered `0..streams`.
    pub fn new(streams: usize) -> Self {
        let entries = (0..streams).map(|_| Entry::default()).collect();
        RequestDeadlines {
            entries: RefCell::new(entries),
            ..RequestDeadlines::default()
        }
    }

    /// Runs `work` for stream `stream` until `deadline` (if any); `None` if the deadline came
    /// first. The work is held inside, so a stream's task keeps one send future, not two.
    pub fn within<F: Future>(
        &self,
        stream: usize,
        deadline: Option<Instant>,
        work: F,
    ) -> Within<'_, F> {
        if let Some(deadline) = deadline {
            self.start(stream, deadline);
        }
        Within {
            board: self,
            stream,
            timed: deadline.is_some(),
            work,
        }
    }

    fn start(&self, stream: usize, deadline: Instant) {
        {
            let mut entries = self.entries.borrow_mut();
            let entry = &mut entries[stream];
            entry.deadline = Some(deadline);
            entry.expired = false;
        }
        if self.armed.get().is_none_or(|armed| deadline < armed) {
            self.armed.set(Some(deadline));
            if let Some(watcher) = self.watcher.borrow().as_ref() {
                watcher.wake_by_ref();
            }
        }
    }

    /// The watcher: runs for as long as the slot's streams do (the worker drops it then).
    pub async fn watch(&self) {
        let mut timer = pin!(tokio::time::sleep(IDLE));
        poll_fn(|cx| self.poll_watch(timer.as_mut(), cx)).await
    }

    fn poll_watch(
        &self,
        mut timer: Pin<&mut tokio::time::Sleep>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        {
            let mut watcher = self.watcher.borrow_mut();
            if !watcher.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *watcher = Some(cx.waker().clone());
                self.timer_wake.set_task(cx.waker());
            }
        }
        // Woken by something else than the timer, with no new deadline to arm: nothing to do.
        // A load first: the flag is almost always down, and a swap is a locked instruction.
        let fired = self.timer_wake.fired.load(Ordering::Acquire)
            && self.timer_wake.fired.swap(false, Ordering::Acquire);
        if !fired && self.polled_for.get() == self.armed.get() {
            return Poll::Pending;
        }
        loop {
            let Some(armed) = self.armed.get() else {
                self.polled_for.set(None);
                return Poll::Pending;
            };
            let at = tokio::time::Instant::from_std(armed);
            self.polled_for.set(Some(armed));
            // A deadline already past is not asked of the timer: tokio's timer says Pending
            // once the task's budget is spent, however late it is, and a stream whose peer
            // never pauses spends it on every poll before this one (its request then never
            // timed out). Only a wake by the timer or a new deadline gets here.
            if tokio::time::Instant::now() < at {
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                let mut timer_cx = Context::from_waker(&self.timer_waker);
                if timer.as_mut().poll(&mut timer_cx).is_pending() {
                    return Poll::Pending;
                }
            }
            // The timer fired at the armed deadline: that one has come even if the clock,
            // read a moment later, is a hair behind it (no spinning on sub-tick remainders).
            let now = Instant::now().max(at.into_std());
            self.armed.set(self.expire(now));
        }
    }

    /// Marks and wakes the requests due by `now`; returns the earliest deadline still pending.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for entry in self.entries.borrow_mut().iter_mut() {
            let Some(deadline) = entry.deadline else {
                continue;
            };
            if deadline <= now {
                entry.deadline = None;
                entry.expired = true;
                if let Some(waker) = &entry.waker {
                    waker.wake_by_ref();
                }
            } else if next.is_none_or(|n| deadline < n) {
                next = Some(deadline);
            }
        }
        next
    }
}

/// A request's work racing its stream's deadline (see [`RequestDeadlines::within`]).
pub struct Within<'a, F> {
    board: &'a RequestDeadlines,
    stream: usize,
    timed: bool,
    work: F,
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `work` is structurally pinned: it is never moved out of `self` (not by
        // `Drop` either), and `Within` is `Unpin` only when `F` is.
        let this = unsafe { self.get_unchecked_mut() };
        let work = unsafe { Pin::new_unchecked(&mut this.work) };
        if let Poll::Ready(out) = work.poll(cx) {
            return Poll::Ready(Some(out));
        }
        if !this.timed {
            return Poll::Pending;
        }
        let mut entries = this.board.entries.borrow_mut();
        let entry = &mut entries[this.stream];
        if entry.expired {
            return Poll::Ready(None);
        }
        // The same task polls a stream's every request: the waker is cloned once, not per poll.
        if !entry
            .waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            entry.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl<F> Drop for Within<'_, F> {
    fn drop(&mut self) {
        if !self.timed {
            return;
        }
        // Done or abandoned: the watcher no longer looks at this stream.
        let mut entries = self.board.entries.borrow_mut();
        let entry = &mut entries[self.stream];
        entry.deadline = None;
        entry.expired = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn quick_work_finishes_and_late_work_times_out_at_its_deadline() {
        let board = Rc::new(RequestDeadlines::new(2));
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let watcher = tokio::task::spawn_local({
                    let board = board.clone();
                    async move { board.watch().await }
                });
                let limit = Duration::from_millis(100);
                for _ in 0..5 {
                    let quick = async { 7 };
                    assert_eq!(board.within(0, Some(now() + limit), quick).await, Some(7));
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                let start = tokio::time::Instant::now();
                let slow = tokio::time::sleep(Duration::from_secs(1));
                assert_eq!(board.within(1, Some(now() + limit), slow).await, None);
                // The paused clock makes this exact: the timeout fires at its deadline.
                let waited = tokio::time::Instant::now() - start;
                assert!(waited >= limit && waited < limit * 2, "{waited:?}");
                watcher.abort();
            })
            .await;
    }

    /// Work that is always ready (a peer streaming bytes without pause) spends the task's
    /// budget on every poll, and the watcher is polled after it in the same task: its timer
    /// then said Pending however late it was, and the request never timed out.
    #[test]
    fn work_that_spends_the_task_budget_still_times_out() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let board = RequestDeadlines::new(1);
            let out = runtime.block_on(async {
                let busy = async {
                    loop {
                        tokio::task::consume_budget().await;
                    }
                };
                let deadline = Instant::now() + Duration::from_millis(50);
                tokio::select! {
                    biased;
                    out = board.within(0, Some(deadline), busy) => out,
                    () = board.watch() => Some(()),
                }
            });
            let _ = tx.send(out);
        });
        // Real time, not a paused clock: a task that is always woken never lets it advance.
        let out = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(out, Ok(None), "the request did not time out");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn each_stream_times_out_at_its_own_deadline() {
        let board = Rc::new(RequestDeadlines::new(3));
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let watcher = tokio::task::spawn_local({
                    let board = board.clone();
                    async move { board.watch().await }
                });
                let start = tokio::time::Instant::now();
                let mut streams = Vec::new();
                // Later streams get earlier deadlines: the watcher must re-arm earlier.
                for (stream, ms) in [(0, 300u64), (1, 200), (2, 100)] {
                    let board = board.clone();
                    streams.push(tokio::task::spawn_local(async move {
                        let never = std::future::pending::<()>();
                        let deadline = now() + Duration::from_millis(ms);
                        let out = board.within(stream, Some(deadline), never).await;
                        (out, tokio::time::Instant::now() - start, ms)
                    }));
                }
                for stream in streams {
                    let (out, waited, ms) = stream.await.unwrap();
                    assert_eq!(out, None);
                    let due = Duration::from_millis(ms);
                    assert!(waited >= due && waited < due + Duration::from_millis(5));
                }
                watcher.abort();
            })
            .await;
    }
}
