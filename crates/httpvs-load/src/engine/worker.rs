//! One worker thread: a current-thread tokio runtime running this worker's connections.
//!
//! The worker owns its statistics outright. Once a second it hands its interval over a
//! channel (one message per second, never per request); at the end it returns its totals.

use super::context::{RunShared, WorkerCtx};
use super::factory::ProtocolFactory;
use super::setup::LoadError;
use super::slot::Slot;
use super::stream::run_slot;
use crate::schedule::WorkerSchedule;
use crate::stats::{IntervalStats, WorkerRecorder, WorkerStats};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a worker sends to the coordinator.
pub enum WorkerMsg {
    /// One interval's statistics (one per second, and a final partial one).
    Interval {
        /// The interval's statistics.
        stats: IntervalStats,
    },
    /// The worker stopped sending; its totals follow through the join handle.
    Finished,
}

/// What one worker was given.
pub struct WorkerJob {
    /// Connections (slots) this worker runs.
    pub connections: u64,
    /// Streams per connection.
    pub streams: u32,
    /// This worker's tickets.
    pub schedule: WorkerSchedule,
    /// CPU to pin this thread to, if any.
    pub cpu: Option<usize>,
}

/// What a worker returns.
pub struct WorkerResult {
    /// Its run totals.
    pub stats: WorkerStats,
    /// When its last request resolved.
    pub finished_at: Instant,
}

/// Runs one worker to completion on the current thread.
pub fn run_worker<F: ProtocolFactory>(
    job: WorkerJob,
    shared: Arc<RunShared>,
    factory: Arc<F>,
    tx: Sender<WorkerMsg>,
) -> Result<WorkerResult, LoadError> {
    if let Some(cpu) = job.cpu {
        super::pin::pin_current_thread(cpu);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::Worker(e.to_string()))?;
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, async move {
        let protocol = factory.make(&shared.target)?;
        let ctx = Rc::new(WorkerCtx {
            shared: shared.clone(),
            protocol,
            recorder: RefCell::new(WorkerRecorder::default()),
            schedule: RefCell::new(job.schedule),
            cancelled: Cell::new(false),
            cancel: tokio::sync::Notify::new(),
        });
        let ticker = tokio::task::spawn_local(send_intervals(ctx.clone(), tx.clone()));
        // Every worker starts on the same clock, after all of them are set up.
        tokio::time::sleep_until(shared.origin.into()).await;
        let slots: Vec<Rc<Slot<F::Protocol>>> = (0..job.connections)
            .map(|_| Rc::new(Slot::new(ctx.clone(), job.streams as usize)))
            .collect();
        // The slots run as one set inside this task, not a task each: a response then wakes
        // its slot's node in the set, not a tokio task through the runtime's queue (about 250
        // instructions a request on h1), and a held slot costs a node, not a task header.
        // A panicking slot is a bug; it ends only itself, and the other slots still finish
        // and are counted.
        let mut slots_running: FuturesUnordered<_> = slots
            .iter()
            .map(|slot| {
                AssertUnwindSafe(run_slot(slot.clone(), job.streams as usize)).catch_unwind()
            })
            .collect();
        // The set yields to the runtime every 32 polls by itself; tokio's per-task budget
        // would make one task of every slot yield far more often.
        let all_done = tokio::task::coop::unconstrained(async {
            while slots_running.next().await.is_some() {}
        });
        // Streams end by themselves when the schedule runs dry; at the deadline or on an
        // interrupt they are dropped here instead, which cuts off their requests in flight.
        tokio::select! {
            biased;
            () = all_done => {}
            () = ctx.run_ended() => {}
        }
        drop(slots_running);
        let finished_at = Instant::now();
        ticker.abort();
        for slot in &slots {
            slot.release();
        }
        drop(slots);
        let last = ctx.recorder.borrow_mut().take_interval();
        let _ = tx.send(WorkerMsg::Interval { stats: last });
        let _ = tx.send(WorkerMsg::Finished);
        let stats = std::mem::take(&mut ctx.recorder.borrow_mut().total);
        Ok(WorkerResult { stats, finished_at })
    });
    // Drive connection shutdowns (close frames, FINs) that the drops above queued.
    local.block_on(&runtime, tokio::task::yield_now());
    result
}

/// How often a worker looks at the run's stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Every second (aligned to the run's origin), hands the interval to the coordinator; in
/// between, watches the stop flag so an interrupt ends the streams within [`STOP_POLL`].
async fn send_intervals<P: crate::protocol::Protocol>(
    ctx: Rc<WorkerCtx<P>>,
    tx: Sender<WorkerMsg>,
) {
    let origin = ctx.shared.origin;
    let mut tick = 1u64;
    let mut next_send = origin + Duration::from_secs(tick);
    loop {
        let wake = (Instant::now() + STOP_POLL).min(next_send);
        tokio::time::sleep_until(wake.into()).await;
        if ctx.shared.stopping() {
            ctx.interrupt();
        }
        if Instant::now() < next_send {
            continue;
        }
        let stats = ctx.recorder.borrow_mut().take_interval();
        if tx.send(WorkerMsg::Interval { stats }).is_err() {
            return;
        }
        tick += 1;
        next_send = origin + Duration::from_secs(tick);
    }
}
