//! What a run shares across worker threads, and what one worker shares among its tasks.

use super::pacer::Pacer;
use crate::protocol::{ConnectOptions, Protocol, RequestSpec, Target};
use crate::schedule::WorkerSchedule;
use crate::stats::request_log::{RequestLog, WorkerLog};
use crate::stats::WorkerRecorder;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Read-only facts of the run, shared by every worker thread.
pub struct RunShared {
    /// Where connections go.
    pub target: Target,
    /// The requests every worker sends, in turn (one unless several URLs were given).
    pub specs: Box<[RequestSpec]>,
    /// How connections are opened.
    pub options: ConnectOptions,
    /// When the run (warmup included) began.
    pub origin: Instant,
    /// When counting begins (after the warmup).
    pub measure_start: Instant,
    /// `-z`: when the run ends; requests in flight then are cut off.
    pub deadline: Option<Instant>,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// Whether a failed connect waits before the next attempt (closed-model duration runs), rather than
    /// failing the slot's requests at once (request-count runs, as h2load does).
    pub backoff_on_connect_failure: bool,
    /// Set when the run must stop early (interrupt); checked before each new request.
    pub stop: Arc<AtomicBool>,
    /// `--log-file`: where each measured request's row goes.
    pub request_log: Option<Arc<RequestLog>>,
    /// The last connection number given out (the request log's connection column).
    pub connections_numbered: AtomicU64,
}

impl RunShared {
    /// Whether the run was asked to stop early.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A number for a connection just opened: 1, 2... in the order the run opened them.
    pub fn number_connection(&self) -> u64 {
        self.connections_numbered.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// One worker's state, shared by its tasks on one thread (hence `RefCell`, never a lock).
pub struct WorkerCtx<P: Protocol> {
    /// The run's shared facts.
    pub shared: Arc<RunShared>,
    /// This worker's protocol instance (h3 keeps one endpoint per worker).
    pub protocol: P,
    /// This worker's statistics.
    pub recorder: RefCell<WorkerRecorder>,
    /// This worker's tickets.
    pub schedule: RefCell<WorkerSchedule>,
    /// Set (with `cancel` notified) when the run is interrupted.
    pub cancelled: Cell<bool>,
    /// Wakes every stream when the run is interrupted.
    pub cancel: tokio::sync::Notify,
    /// `--log-file`: this worker's buffer of request rows.
    pub log: RefCell<Option<WorkerLog>>,
    /// Open model: what streams wait on for their intended times (`None`: tokio's timer).
    pub pacer: Option<Rc<Pacer>>,
    /// Connections a slot replaced while its streams still held them (draining after a
    /// GOAWAY), for the run's end ([`super::slot::quiesce_replaced`]); one list a worker, not
    /// a slot (a held connection's bytes); an entry whose streams all ended is gone, pruned.
    pub replaced: RefCell<Vec<std::rc::Weak<super::slot::LiveConn<P>>>>,
}

impl<P: Protocol> WorkerCtx<P> {
    /// The request at `index` (from [`Slot::next_spec`](super::slot::Slot::next_spec)).
    pub fn request(&self, index: u32) -> &RequestSpec {
        &self.shared.specs[index as usize]
    }

    /// Completes when the run ends under a request: at the `-z` deadline or on interrupt.
    pub async fn run_ended(&self) {
        if self.cancelled.get() {
            return;
        }
        // Outside tokio's task budget: the streams polled before this in the same task can
        // spend it on every poll (a server streaming `100 Continue` heads without pause), and a
        // timer with no budget says Pending however late it is: a 3 s run went on for 27 s.
        tokio::task::unconstrained(async {
            match self.shared.deadline {
                Some(deadline) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(deadline.into()) => {}
                        _ = self.cancel.notified() => {}
                    }
                }
                None => self.cancel.notified().await,
            }
        })
        .await
    }

    /// Interrupts every stream of this worker (called when the run's stop flag is seen).
    pub fn interrupt(&self) {
        if !self.cancelled.replace(true) {
            self.cancel.notify_waiters();
        }
    }
}
