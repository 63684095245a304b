//! One stream of a slot: takes tickets from the schedule, sends, records the outcome.
//!
//! A slot runs `-m` of these at once on its connection. The loop allocates nothing per request:
//! the send future lives inside this task's state, and outcomes are counter bumps.

use super::request_timer::within;
use super::slot::Slot;
use crate::error::ErrorKind;
use crate::protocol::{Connection, Protocol, RetryReason, SendError};
use crate::schedule::Ticket;
use crate::stats::{RequestTimings, WorkerRecorder};
use std::cell::RefCell;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::time::Sleep;

/// A request refused this many times by connections that processed nothing fails instead
/// (a server that never processes anything must not keep a `-n` run going forever).
const MAX_RETRIES: u32 = 8;

/// One request between its release by the schedule and its outcome. Dropping it unresolved
/// (the run ended under it) counts it as cut off, so no request escapes the identity.
struct InFlight<'a> {
    recorder: &'a RefCell<WorkerRecorder>,
    measured: bool,
    /// Latency origin: the intended time (open model) or the dispatch (closed model).
    origin: Instant,
    first_send: Option<Instant>,
    retries: u32,
    resolved: bool,
}

impl<'a> InFlight<'a> {
    fn start(recorder: &'a RefCell<WorkerRecorder>, ticket: Ticket, now: Instant) -> Self {
        if ticket.measured {
            let mut rec = recorder.borrow_mut();
            rec.started();
            if let Some(at) = ticket.intended {
                rec.send_lag(now.saturating_duration_since(at));
            }
        }
        InFlight {
            recorder,
            measured: ticket.measured,
            // A send the timer released a little early is measured from when it left.
            origin: ticket.intended.map_or(now, |at| at.min(now)),
            first_send: None,
            retries: 0,
            resolved: false,
        }
    }

    fn fail(&mut self, kind: ErrorKind) {
        self.resolved = true;
        if self.measured {
            self.recorder.borrow_mut().failed(kind);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.resolved && self.measured {
            self.recorder.borrow_mut().cut_off();
        }
    }
}

/// What one attempt came to.
enum Attempt {
    /// Succeeded or failed: the request is resolved.
    Done,
    /// Not processed by the server: send it again on a new connection.
    Retry,
}

/// Runs one stream until the schedule has nothing more for it. When the run ends under it
/// (deadline or interrupt) the worker drops this task: the request in flight is cut off.
pub async fn run_stream<P: Protocol>(slot: Rc<Slot<P>>) {
    let ctx = slot.ctx.clone();
    // One request timer per stream, re-armed rather than rebuilt per request. The run's end
    // is not watched here: the worker drops every stream task then (see `worker`), and a
    // request dropped in flight counts as cut off.
    let mut timer = pin!(tokio::time::sleep(IDLE_TIMER));
    // Closed model: the next request is due when the last one ended (one clock read each).
    let mut last_end = None;
    loop {
        if ctx.cancelled.get() {
            break;
        }
        let now = last_end.take().unwrap_or_else(Instant::now);
        let next = ctx.schedule.borrow_mut().next(now);
        let Some(ticket) = next else { break };
        let dispatch = match ticket.intended {
            Some(at) => {
                tokio::time::sleep_until(timer_target(at).into()).await;
                Instant::now()
            }
            None => now,
        };
        let mut req = InFlight::start(&ctx.recorder, ticket, dispatch);
        let mut at = dispatch;
        let end = loop {
            match attempt(&slot, &mut req, timer.as_mut(), at).await {
                (Attempt::Done, end) => break end,
                (Attempt::Retry, end) => at = end,
            }
        };
        last_end = ticket.intended.is_none().then_some(end);
    }
}

/// Where a stream's request timer rests before its first request.
const IDLE_TIMER: Duration = Duration::from_secs(24 * 3600);

/// tokio's timer has 1 ms ticks: it rounds a deadline up to the next tick and its park
/// rounds up again, so a plain sleep wakes 1-2 ms late and every open-model send would be
/// late. Aiming one tick early centres the error on the intended time (measured: lag p50
/// under 0.3 ms at 2,000 req/s); early sends are measured from when they left.
fn timer_target(at: Instant) -> Instant {
    at.checked_sub(TIMER_LEAD).unwrap_or(at)
}

/// How early an open-model stream asks the timer to wake it.
const TIMER_LEAD: std::time::Duration = std::time::Duration::from_millis(1);

/// Sends once on the slot's connection and records the outcome; returns when it ended.
/// `ready_at` is when the request became ready to go (the send starts then if the slot's
/// connection is ready, saving a clock read).
async fn attempt<P: Protocol>(
    slot: &Slot<P>,
    req: &mut InFlight<'_>,
    timer: Pin<&mut Sleep>,
    ready_at: Instant,
) -> (Attempt, Instant) {
    let ctx = &slot.ctx;
    let connected = slot.is_ready();
    let live = match slot.connection().await {
        Ok(live) => live,
        Err(kind) => {
            req.fail(kind);
            return (Attempt::Done, Instant::now());
        }
    };
    let reused = live.note_request(req.measured);
    let send_start = if connected { ready_at } else { Instant::now() };
    let first_send = *req.first_send.get_or_insert(send_start);
    let send = live.conn.send(&ctx.shared.spec);
    let result = match ctx.shared.timeout {
        Some(limit) => within(timer, send_start + limit, send)
            .await
            .unwrap_or(Err(SendError::Failed(ErrorKind::RequestTimeout))),
        None => send.await,
    };
    let end = Instant::now();
    // A refusal from a connection that did serve others (a request limit reached) is bad
    // luck, not a server that processes nothing: it does not use up the retry budget.
    let mut refused_without_progress = false;
    if let Err(SendError::Retry(_)) = result {
        live.unnote_request(req.measured);
        refused_without_progress = live.served() == 0;
    } else {
        live.note_served();
        if reused && req.measured {
            ctx.recorder.borrow_mut().total.connections.reused_requests += 1;
        }
    }
    drop(live);
    if ctx.shared.deadline.is_some_and(|d| end > d) {
        // Finished after the end (the timer that cuts runs off has 1 ms ticks): it was in
        // flight when the run ended, so it is cut off, as the identity counts it.
        return (Attempt::Done, end);
    }
    match result {
        Ok(info) => {
            req.resolved = true;
            if req.measured {
                let timings = RequestTimings {
                    latency: end - req.origin,
                    latency_uncorrected: end - first_send,
                    exchange: end - send_start,
                };
                ctx.recorder.borrow_mut().succeeded(timings, &info);
            }
            (Attempt::Done, end)
        }
        Err(SendError::Retry(reason)) => {
            req.retries += u32::from(refused_without_progress);
            if req.retries > MAX_RETRIES {
                req.fail(retry_exhausted(reason));
                return (Attempt::Done, end);
            }
            if req.measured {
                ctx.recorder.borrow_mut().retried(reason);
            }
            (Attempt::Retry, end)
        }
        Err(SendError::Failed(kind)) => {
            req.fail(kind);
            (Attempt::Done, end)
        }
    }
}

/// The failure a request gets when the server keeps refusing to process it.
fn retry_exhausted(reason: RetryReason) -> ErrorKind {
    match reason {
        RetryReason::Goaway => ErrorKind::Goaway(0),
        RetryReason::Refused => ErrorKind::StreamReset(0x7),
        RetryReason::ConnectionClosed => ErrorKind::ConnectionClosed,
    }
}
