//! A set of futures run inside one task, woken without atomics on the thread that owns it.
//!
//! The worker runs its lone-stream slots (h1 at `-m 1`) as the members of one set in one task
//! (`worker.rs`). `futures`' `FuturesUnordered` did that job, but every wake of a member paid
//! for thread-safety it does not use here: an atomic swap on the member's queued flag, an
//! atomic push onto its ready queue, and two more atomic swaps as the set polled it. Profiled
//! against h2o (h1, 64 connections), that was about a ninth of httpvs' user time per request,
//! and this set cut user time by a sixth, 0.80 to 0.675 µs a request (issue #7). Here a wake on the owning thread, which is every wake tokio's I/O driver makes
//! on a current-thread runtime, is a push onto a plain thread-local list. A wake from any other
//! thread still works, through a mutex, and wakes the set's task as a `FuturesUnordered` would.
//!
//! The set polls only members that were woken, each at most once per poll of the set, and
//! returns `Pending` (asking to be polled again) when members are woken again while it polls,
//! so a member that keeps waking itself cannot starve the runtime's I/O driver. A member that
//! panics ends alone: the others go on.

use futures_util::task::AtomicWaker;
use std::cell::RefCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Distinct for every set made in the process, so a waker finds its own set's list.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The ready lists of the sets that live on this thread (usually one: the worker's).
struct LocalReady {
    id: u64,
    /// Members woken since the set last took them.
    ready: Vec<u32>,
    /// The set's task, to wake when a member is woken while the set is not being polled.
    parent: Option<Waker>,
    /// `parent` was woken and has not polled the set since: no need to wake it again.
    parent_woken: bool,
}

thread_local! {
    static READY: RefCell<Vec<LocalReady>> = const { RefCell::new(Vec::new()) };
}

/// What a set's wakers share with it.
struct Shared {
    id: u64,
    /// Members woken from other threads.
    remote: Mutex<Vec<u32>>,
    /// Set when `remote` has entries, so the set looks at the mutex only then.
    remote_pending: AtomicBool,
    /// The set's task, for wakes from other threads.
    parent: AtomicWaker,
}

/// The waker of one member.
struct MemberWaker {
    shared: Arc<Shared>,
    index: u32,
    /// Queued and not yet polled: a second wake adds nothing. Only read and written as plain
    /// loads and stores; a lost update costs at most one spurious poll, which futures allow.
    queued: AtomicBool,
}

impl Wake for MemberWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.load(Ordering::Relaxed) {
            return;
        }
        self.queued.store(true, Ordering::Relaxed);
        let id = self.shared.id;
        // On the set's own thread the list is found by the set's id; elsewhere (or if the
        // list is borrowed, which the set never lets happen across a member's poll) it is not.
        let local = READY
            .try_with(|lists| {
                let Ok(mut lists) = lists.try_borrow_mut() else {
                    return false;
                };
                let Some(list) = lists.iter_mut().find(|l| l.id == id) else {
                    return false;
                };
                list.ready.push(self.index);
                if !list.parent_woken {
                    list.parent_woken = true;
                    if let Some(parent) = &list.parent {
                        parent.wake_by_ref();
                    }
                }
                true
            })
            .unwrap_or(false);
        if !local {
            let mut remote = match self.shared.remote.lock() {
                Ok(remote) => remote,
                Err(poisoned) => poisoned.into_inner(),
            };
            remote.push(self.index);
            self.shared.remote_pending.store(true, Ordering::Release);
            drop(remote);
            self.shared.parent.wake();
        }
    }
}

/// A set of futures of one type, run to completion together by awaiting [`LoneSet::run`].
pub struct LoneSet<F> {
    shared: Arc<Shared>,
    members: Vec<Option<Pin<Box<F>>>>,
    wakers: Vec<(Arc<MemberWaker>, Waker)>,
    live: usize,
    /// The list taken from the thread-local one, swapped back empty (keeps both allocations).
    batch: Vec<u32>,
    /// Not `Send`, whatever its members are: its wakers find its list on the thread that made
    /// it, and a set moved to another thread would never see their wakes.
    _here: std::marker::PhantomData<*const ()>,
}

impl<F: Future<Output = ()>> LoneSet<F> {
    /// A set of `members`, each to be polled first when the set is first polled.
    pub fn new(members: impl IntoIterator<Item = F>) -> LoneSet<F> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            id,
            remote: Mutex::new(Vec::new()),
            remote_pending: AtomicBool::new(false),
            parent: AtomicWaker::new(),
        });
        let members: Vec<_> = members.into_iter().map(|f| Some(Box::pin(f))).collect();
        let wakers = (0..members.len())
            .map(|index| {
                let member = Arc::new(MemberWaker {
                    shared: shared.clone(),
                    index: index as u32,
                    queued: AtomicBool::new(true),
                });
                let waker = Waker::from(member.clone());
                (member, waker)
            })
            .collect();
        let ready = (0..members.len() as u32).collect();
        READY.with(|lists| {
            lists.borrow_mut().push(LocalReady {
                id,
                ready,
                parent: None,
                parent_woken: false,
            })
        });
        LoneSet {
            shared,
            live: members.len(),
            members,
            wakers,
            batch: Vec::new(),
            _here: std::marker::PhantomData,
        }
    }

    /// Runs every member to its end (or its panic).
    pub fn run(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| self.poll_run(cx))
    }

    fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let id = self.shared.id;
        let mut budget = self.members.len();
        // For wakes from other threads; on this one the list below holds the set's waker.
        self.shared.parent.register(cx.waker());
        loop {
            // Take what is ready, and say where to wake the set from now on.
            READY.with(|lists| {
                let mut lists = lists.borrow_mut();
                if let Some(list) = lists.iter_mut().find(|l| l.id == id) {
                    std::mem::swap(&mut list.ready, &mut self.batch);
                    list.parent_woken = false;
                    match &list.parent {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => list.parent = Some(cx.waker().clone()),
                    }
                }
            });
            if self.shared.remote_pending.load(Ordering::Relaxed)
                && self.shared.remote_pending.swap(false, Ordering::Acquire)
            {
                let mut remote = match self.shared.remote.lock() {
                    Ok(remote) => remote,
                    Err(poisoned) => poisoned.into_inner(),
                };
                self.batch.append(&mut remote);
            }
            if self.batch.is_empty() {
                return if self.live == 0 {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                };
            }
            if budget == 0 {
                // Woken again while this poll ran: give the runtime its turn, then go on.
                self.put_back();
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            for k in 0..self.batch.len() {
                let index = self.batch[k] as usize;
                let (member, waker) = &self.wakers[index];
                member.queued.store(false, Ordering::Relaxed);
                let Some(future) = self.members[index].as_mut() else {
                    continue;
                };
                budget = budget.saturating_sub(1);
                let mut member_cx = Context::from_waker(waker);
                let done = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut member_cx)))
                    .map_or(true, |poll| poll.is_ready());
                if done {
                    self.members[index] = None;
                    self.live -= 1;
                }
            }
            self.batch.clear();
            if self.live == 0 {
                return Poll::Ready(());
            }
        }
    }

    /// Returns the taken batch to the thread-local list (members still to poll).
    fn put_back(&mut self) {
        let id = self.shared.id;
        READY.with(|lists| {
            let mut lists = lists.borrow_mut();
            if let Some(list) = lists.iter_mut().find(|l| l.id == id) {
                list.ready.append(&mut self.batch);
            }
        });
    }
}

impl<F> Drop for LoneSet<F> {
    fn drop(&mut self) {
        let id = self.shared.id;
        // Members first: dropping one may wake another, which must still find the list.
        self.members.clear();
        let _ = READY.try_with(|lists| {
            if let Ok(mut lists) = lists.try_borrow_mut() {
                lists.retain(|l| l.id != id);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn every_member_runs_to_its_end() {
        let done = Rc::new(Cell::new(0));
        current_thread().block_on(async {
            let mut set = LoneSet::new((0..50u64).map(|i| {
                let done = done.clone();
                async move {
                    for _ in 0..i % 5 {
                        tokio::task::yield_now().await;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(i % 3)).await;
                    done.set(done.get() + 1);
                }
            }));
            set.run().await;
        });
        assert_eq!(done.get(), 50);
    }

    #[test]
    fn a_wake_from_another_thread_reaches_the_member() {
        let rt = current_thread();
        rt.block_on(async {
            let mut set = LoneSet::new((0..4).map(|_| async {
                let (tx, rx) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    let _ = tx.send(());
                });
                let _ = rx.await;
            }));
            set.run().await;
        });
    }

    #[test]
    fn a_panicking_member_ends_alone() {
        let done = Rc::new(Cell::new(0));
        current_thread().block_on(async {
            let mut set = LoneSet::new((0..3).map(|i| {
                let done = done.clone();
                async move {
                    tokio::task::yield_now().await;
                    if i == 1 {
                        panic!("member 1 panics on purpose");
                    }
                    done.set(done.get() + 1);
                }
            }));
            set.run().await;
        });
        assert_eq!(done.get(), 2);
    }

    #[test]
    fn a_member_that_keeps_waking_itself_lets_the_others_run() {
        let stop = Rc::new(Cell::new(false));
        current_thread().block_on(async {
            let spinner = {
                let stop = stop.clone();
                async move {
                    while !stop.get() {
                        tokio::task::yield_now().await;
                    }
                }
            };
            let stopper = {
                let stop = stop.clone();
                async move {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    stop.set(true);
                }
            };
            let members: Vec<Pin<Box<dyn Future<Output = ()>>>> =
                vec![Box::pin(spinner), Box::pin(stopper)];
            LoneSet::new(members).run().await;
        });
        assert!(stop.get());
    }

    #[test]
    fn dropping_the_set_drops_its_members() {
        let dropped = Rc::new(Cell::new(0));
        struct Count(Rc<Cell<u32>>);
        impl Drop for Count {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        current_thread().block_on(async {
            let set = LoneSet::new((0..3).map(|_| {
                let count = Count(dropped.clone());
                async move {
                    let _count = count;
                    std::future::pending::<()>().await;
                }
            }));
            let mut set = set;
            let _ = tokio::time::timeout(std::time::Duration::from_millis(5), set.run()).await;
            drop(set);
        });
        assert_eq!(dropped.get(), 3);
        READY.with(|lists| assert!(lists.borrow().is_empty()));
    }
}
