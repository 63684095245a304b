//! One worker thread: a current-thread tokio runtime running this worker's connections.
//!
//! The worker owns its statistics outright. Once a second it hands its interval over a
//! channel (one message per second, never per request); at the end it returns its totals.

use super::context::{RunShared, WorkerCtx};
use super::factory::ProtocolFactory;
use super::lone_set::LoneSet;
use super::pacer::Pacer;
use super::setup::LoadError;
use super::slot::Slot;
use super::stream::run_slot;
use crate::protocol::{ConnectInfo, ConnectOptions, Protocol, Target};
use crate::schedule::WorkerSchedule;
use crate::stats::request_log::WorkerLog;
use crate::stats::{IntervalStats, WorkerRecorder, WorkerStats};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a worker sends to the coordinator.
pub enum WorkerMsg {
    /// One interval's statistics (one per second, and a final partial one).
    Interval {
        /// The second of the run it ends at (1 for the first), or, for the final partial
        /// one, the second it falls in.
        tick: u64,
        /// The interval's statistics.
        stats: IntervalStats,
    },
    /// The worker stopped sending; its totals follow through the join handle.
    Finished,
}

/// What one worker was given.
pub struct WorkerJob {
    /// Where its connections go.
    pub target: Target,
    /// Connections (slots) this worker runs.
    pub connections: u64,
    /// Streams per connection.
    pub streams: u32,
    /// Open model: how to open this worker's connections before the clock starts.
    pub preconnect: Option<ConnectOptions>,
    /// CPU to pin this thread to, if any.
    pub cpu: Option<usize>,
    /// The run's stop flag (an interrupt), watched while connections open before the start.
    pub stop: Arc<AtomicBool>,
}

/// What a worker gets once every worker is ready: the run's clock and its tickets.
pub struct WorkerStart {
    /// The run's shared facts, times included.
    pub shared: Arc<RunShared>,
    /// This worker's tickets.
    pub schedule: WorkerSchedule,
}

/// What a worker returns.
pub struct WorkerResult {
    /// Its run totals.
    pub stats: WorkerStats,
    /// When its last request resolved.
    pub finished_at: Instant,
}

/// A worker's error when the run was abandoned before it started: another worker's set-up
/// failed, and that error is the run's.
pub const NOT_STARTED: &str = "the run did not start";

/// Runs one worker to completion on the current thread: sets up (its runtime, its protocol and,
/// in the open model, its connections), says it is `ready`, waits for its start, then runs.
pub fn run_worker<F: ProtocolFactory>(
    job: WorkerJob,
    factory: Arc<F>,
    (ready, start): (Sender<()>, oneshot::Receiver<WorkerStart>),
    tx: Sender<WorkerMsg>,
) -> Result<WorkerResult, LoadError> {
    if let Some(cpu) = job.cpu {
        super::pin::pin_current_thread(cpu);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            // A runtime takes a few files (epoll, an eventfd, a timerfd) per worker thread.
            let hint = match e.raw_os_error() {
                Some(libc::EMFILE) => "; raise the open-file limit (ulimit -n) or use fewer -t",
                _ => "",
            };
            LoadError::Worker(format!("{e}{hint}"))
        })?;
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, async move {
        let protocol = factory.make(&job.target)?;
        let opened = match &job.preconnect {
            Some(options) => {
                let opening = preconnect(&protocol, &job.target, options, job.connections);
                let stopped = async {
                    while !job.stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(STOP_POLL).await;
                    }
                };
                // Interrupted while connecting: nothing more to open; the run ends at its start.
                tokio::select! {
                    opened = opening => opened,
                    () = stopped => Vec::new(),
                }
            }
            None => Vec::new(),
        };
        let _ = ready.send(());
        drop(ready);
        // The run was abandoned before it started (set-up failed elsewhere).
        let Ok(WorkerStart { shared, schedule }) = start.await else {
            return Err(LoadError::Worker(NOT_STARTED.into()));
        };
        let pacer = schedule.is_open().then(Pacer::new).flatten();
        let ctx = Rc::new(WorkerCtx {
            shared: shared.clone(),
            protocol,
            recorder: RefCell::new(WorkerRecorder::default()),
            schedule: RefCell::new(schedule),
            cancelled: Cell::new(false),
            cancel: tokio::sync::Notify::new(),
            log: RefCell::new(shared.request_log.clone().map(WorkerLog::new)),
            pacer: pacer.clone(),
            replaced: RefCell::new(Vec::new()),
        });
        ctx.recorder.borrow_mut().start_clock(shared.origin);
        if shared.stopping() {
            ctx.interrupt();
        }
        let ticker = tokio::task::spawn_local(send_intervals(ctx.clone(), tx.clone()));
        // Every worker starts on the same clock, after all of them are set up (to the
        // microsecond in the open model, whose first intended time is the origin).
        match &pacer {
            Some(pacer) => {
                tokio::task::spawn_local(pacer.clone().drive());
                pacer.until(shared.origin).await;
            }
            // The closed model's first requests leave at the origin too: tokio's timer wakes
            // on 1 ms ticks, which started the clock 0.7-1.8 ms before the first send.
            None => until_precisely(shared.origin).await,
        }
        // `-c` is a u32: so is a worker's share of it.
        let slots: Vec<Rc<Slot<F::Protocol>>> = (0..job.connections as u32)
            .map(|lane| Rc::new(Slot::new(ctx.clone(), job.streams as usize, lane)))
            .collect();
        for (slot, (conn, info)) in slots.iter().zip(opened) {
            slot.adopt(conn, info);
        }
        let boundary = (shared.measure_start > shared.origin).then(|| {
            let slots: Vec<_> = slots.iter().map(Rc::downgrade).collect();
            let at = shared.measure_start;
            tokio::task::spawn_local(async move {
                tokio::time::sleep_until(at.into()).await;
                for slot in slots.iter().filter_map(std::rc::Weak::upgrade) {
                    slot.mark_measure_start();
                }
            })
        });
        run_slots(&ctx, &slots, job.streams as usize).await;
        let finished_at = Instant::now();
        ticker.abort();
        if let Some(task) = boundary {
            task.abort();
        }
        for slot in &slots {
            slot.release();
        }
        drop(slots);
        ctx.protocol.wind_down().await;
        let rest = ctx.recorder.borrow_mut().take_rest();
        for (tick, stats) in rest {
            let _ = tx.send(WorkerMsg::Interval { tick, stats });
        }
        let _ = tx.send(WorkerMsg::Finished);
        let mut stats = std::mem::take(&mut ctx.recorder.borrow_mut().total);
        stats.next_due = ctx.schedule.borrow().next_due();
        stats.warmup_released = ctx.schedule.borrow().warmup_released();
        // The log's last rows go out before the run's report reads its outcome.
        drop(ctx.log.borrow_mut().take());
        Ok(WorkerResult { stats, finished_at })
    });
    // Drive connection shutdowns (close frames, FINs) that the drops above queued.
    local.block_on(&runtime, tokio::task::yield_now());
    result
}

/// Opens up to `n` connections at once, each bounded by the connect timeout; those that fail
/// are left for the slots to open (and count) when they first send.
async fn preconnect<P: Protocol>(
    protocol: &P,
    target: &Target,
    options: &ConnectOptions,
    n: u64,
) -> Vec<(P::Conn, ConnectInfo)> {
    let mut attempts: FuturesUnordered<_> = (0..n)
        .map(|_| tokio::time::timeout(options.connect_timeout, protocol.connect(target, options)))
        .collect();
    let mut opened = Vec::with_capacity(n as usize);
    while let Some(result) = attempts.next().await {
        if let Ok(Ok(conn)) = result {
            opened.push(conn);
        }
    }
    opened
}

/// Runs every slot until the schedule runs dry or the run ends (deadline or interrupt); a
/// request still in flight then is dropped with its slot, before this returns, and counts as
/// cut off.
async fn run_slots<P: Protocol>(ctx: &WorkerCtx<P>, slots: &[Rc<Slot<P>>], streams: usize) {
    // One stream a slot (h1 at `-m 1`): the slots run as the members of one set in this task,
    // not a task each. A response then wakes its slot's member (a push onto a thread-local
    // list, `lone_set.rs`), not a tokio task through the runtime's queue (about 250
    // instructions a request), and a held slot costs a member, not a task header. tokio's
    // budget still applies to the task, so a slot reading a long body gives way to the others.
    // A panic while a slot is polled ends only that slot. Each member is boxed as it is made:
    // a list of the unboxed futures first (a few KB each) left about 1 KB a connection of
    // freed heap in the RSS of a 10,000-connection run.
    let lone = slots.iter().filter(|_| streams == 1);
    let mut set = LoneSet::new(lone.map(|slot| run_slot(slot.clone(), 1)));
    // Several streams a slot: a task each. Their streams yield on purpose (a pipelined h1 flush
    // lets its siblings queue first), and a set takes two yields as its cue to hand the whole
    // task back to the runtime, which then polls its I/O driver: in one set, h1 at `-m 16` made
    // 0.10 `epoll_wait` a request, against 0.06 with a task a slot.
    let mut tasks = VecDeque::new();
    if streams != 1 {
        for slot in slots {
            tasks.push_back(tokio::task::spawn_local(run_slot(slot.clone(), streams)));
        }
    }
    let all_done = async {
        set.run().await;
        // Popped only once awaited: a handle must not be awaited twice.
        while let Some(task) = tasks.front_mut() {
            // A panicking slot is a bug; the other slots still finish and are counted.
            let _ = task.await;
            tasks.pop_front();
        }
    };
    let ended_early = tokio::select! {
        biased;
        () = all_done => false,
        () = ctx.run_ended() => true,
    };
    // An open `-z` run lasts its `-z`, as wrk2's does, even when its last send came early
    // (`--rate 0.5 -z 3s` sends at 0 and 2 s).
    if !ended_early && ctx.schedule.borrow().is_open() && ctx.shared.deadline.is_some() {
        ctx.run_ended().await;
    }
    if ended_early {
        // Dropped in flight, its requests are cut off: the server needs no word per stream.
        for slot in slots {
            slot.quiesce();
        }
        super::slot::quiesce_replaced(ctx);
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// Waits until `at` to the microsecond (a timerfd), or by tokio's timer where there is none.
async fn until_precisely(at: Instant) {
    let after = at.saturating_duration_since(Instant::now());
    if after.is_zero() {
        return;
    }
    match httpvs_timerfd::TimerFd::after(after) {
        Ok(timer) if timer.expired().await.is_ok() => {}
        _ => tokio::time::sleep_until(at.into()).await,
    }
}

/// How often a worker looks at the run's stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Every second (aligned to the run's origin), hands the interval to the coordinator; in
/// between, watches the stop flag so an interrupt ends the streams within [`STOP_POLL`], or at
/// once when the stop came with the stop bell ([`super::stop_bell`], rung by the CLI's signal
/// handler).
async fn send_intervals<P: crate::protocol::Protocol>(
    ctx: Rc<WorkerCtx<P>>,
    tx: Sender<WorkerMsg>,
) {
    let origin = ctx.shared.origin;
    let mut tick = 1u64;
    let mut next_send = origin + Duration::from_secs(tick);
    let mut bell = super::stop_bell::Listener::watch();
    loop {
        let wake = (Instant::now() + STOP_POLL).min(next_send);
        let rung = tokio::select! {
            () = tokio::time::sleep_until(wake.into()) => false,
            () = bell.rung() => true,
        };
        if ctx.shared.stopping() {
            ctx.interrupt();
        }
        if rung {
            // Seen once: it stays rung, and another run's stop must not spin this loop.
            bell.stop_listening();
        }
        if Instant::now() < next_send {
            continue;
        }
        let (second, stats) = ctx.recorder.borrow_mut().take_interval();
        if tx
            .send(WorkerMsg::Interval {
                tick: second,
                stats,
            })
            .is_err()
        {
            return;
        }
        tick += 1;
        next_send = origin + Duration::from_secs(tick);
    }
}
