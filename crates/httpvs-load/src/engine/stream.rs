//! One stream of a slot: takes tickets from the schedule, sends, records the outcome.
//!
//! A slot runs `-m` of these at once on its connection. The loop allocates nothing per request:
//! the send future lives inside this task's state, and outcomes are counter bumps.

use super::context::WorkerCtx;
use super::pacer::TOKIO_TIMER_LEAD;
use super::slot::{LiveConn, Slot};
use crate::error::ErrorKind;
use crate::protocol::{Connection, Protocol, ResponseInfo, RetryReason, SendError};
use crate::schedule::Ticket;
use crate::stats::request_log::RequestRow;
use crate::stats::{RequestTimings, WorkerRecorder};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;
use tokio::time::Sleep;

/// A request refused this many times without progress fails instead (a server that never
/// processes anything must not keep a `-n` run going forever). A refusal is without progress
/// when the connection that made it processed nothing at all, or when it is the same open
/// connection refusing again with nothing processed in between (it served once and stopped).
/// This is judged at the request's next refusal, once the refusing connection has had the
/// time to: a GOAWAY after one request refuses the other streams before the one it processes
/// has finished.
const MAX_RETRIES: u8 = 8;

/// One request between its release by the schedule and its outcome. Dropping it unresolved
/// (the run ended under it) counts it as cut off, so no request escapes the identity.
struct InFlight<'a> {
    recorder: &'a RefCell<WorkerRecorder>,
    measured: bool,
    /// Open model: the request had an intended time, so its uncorrected latency is recorded.
    open: bool,
    /// The intended time (open model) or the dispatch (closed model). Latency runs from it, or
    /// from the dispatch when the pacing timer released the request a little early.
    origin: Instant,
    first_send: Option<Instant>,
    retries: u8,
    /// What the last connection to refuse this request served (its counter, and the count
    /// at the refusal), read at the request's next refusal.
    refused_by: Option<(Rc<Cell<u64>>, u64)>,
    resolved: bool,
    /// Which of the run's requests it sends (`RunShared::specs`); a retry sends it again.
    spec: u32,
}

impl<'a> InFlight<'a> {
    fn start<P: Protocol>(ctx: &'a WorkerCtx<P>, ticket: Ticket, now: Instant, spec: u32) -> Self {
        let recorder = &ctx.recorder;
        if ticket.measured {
            let mut rec = recorder.borrow_mut();
            rec.started(now);
            if let Some(at) = ticket.intended {
                let into_run = now.saturating_duration_since(ctx.shared.measure_start);
                rec.send_lag(now.saturating_duration_since(at), into_run);
            }
        }
        InFlight {
            recorder,
            measured: ticket.measured,
            open: ticket.intended.is_some(),
            origin: ticket.intended.unwrap_or(now),
            first_send: None,
            retries: 0,
            refused_by: None,
            resolved: false,
            spec,
        }
    }

    fn fail(&mut self, kind: ErrorKind, at: Instant) {
        self.resolved = true;
        if self.measured {
            self.recorder.borrow_mut().failed(at, kind);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.resolved {
            let mut rec = self.recorder.borrow_mut();
            if self.measured {
                rec.cut_off();
            } else {
                // Released in the warm-up and never ended: outside the identity, but said.
                rec.total.warmup_overrun.cut_off += 1;
            }
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

/// Runs the `streams` streams of one slot, and the watcher of their request deadlines, as one
/// future until the schedule has nothing more for them (the worker drops it when the run ends
/// under them). The worker runs lone-stream slots as nodes of one set in one task, and others as
/// a task each (`worker.rs`); a slot runs its streams in a set of its own rather than a task
/// each: a tokio task adds about
/// 120 bytes to its future and rounds up to 128-byte steps, while a stream in this set costs its
/// future and one small node (memory per stream in flight, issue #7). A lone stream (h1, `-m 1`)
/// runs without the set, which would cost it a second future-sized node.
pub async fn run_slot<P: Protocol>(slot: Rc<Slot<P>>, streams: usize) {
    let all_done = async {
        if streams == 1 {
            return run_stream(slot.clone(), 0).await;
        }
        let mut set: FuturesUnordered<_> = (0..streams)
            .map(|index| run_stream(slot.clone(), index))
            .collect();
        while set.next().await.is_some() {}
    };
    match slot.ctx.shared.timeout {
        // The watcher never ends by itself: the slot is done when its streams are.
        Some(_) => {
            tokio::select! {
                biased;
                () = all_done => {}
                () = slot.deadlines.watch() => {}
            }
        }
        None => all_done.await,
    }
}

/// Runs stream `index` of its slot until the schedule has nothing more for it. When the run
/// ends under it (deadline or interrupt) the worker drops this task: the request in flight is
/// cut off. The run's end is not watched here, and the request timeout is the slot's watcher's
/// (`request_timer`): what this task keeps across a send is only the request's own state, so
/// that each of the `-c x -m` tasks stays small (memory per stream in flight).
///
/// An `async` block rather than an `async fn`: a function's arguments would be kept twice in the
/// task (as arguments and as the locals they move into).
#[allow(clippy::manual_async_fn)] // on purpose: see above
pub fn run_stream<P: Protocol>(slot: Rc<Slot<P>>, index: usize) -> impl Future<Output = ()> {
    async move {
        // When the stream's next step became ready, known without a clock read: the closed
        // model's next request is due when the last one ended; a retry is ready when the
        // refusal came. One variable for both keeps the task small.
        let mut ready: Option<Instant> = None;
        // Open model: one timer for this stream's intended send times, made on first use.
        let mut pacer = None;
        loop {
            let mut req = {
                let Some((ticket, dispatch)) = next_ticket(&slot, ready.take(), &mut pacer).await
                else {
                    break;
                };
                ready = Some(dispatch);
                InFlight::start(&slot.ctx, ticket, dispatch, slot.next_spec())
            };
            let end = loop {
                let ready_at = ready.take().unwrap_or_else(Instant::now);
                // The open model's uncorrected latency runs from the request's dispatch, its
                // connection's set-up included, as the closed model's latency does.
                let fresh = req.first_send.is_none();
                req.first_send.get_or_insert(ready_at);
                let (live, send_start) = match slot.usable() {
                    Some(live) => (live, ready_at),
                    // Boxed: a reconnect is rare, and inlined its future sat in every stream.
                    None => match Box::pin(connection_for(&slot, req.measured, fresh)).await {
                        Ok(live) => (live, Instant::now()),
                        Err(kind) => {
                            slot.retry_connected(fresh);
                            let end = Instant::now();
                            req.fail(kind, end);
                            log_row(&slot.ctx, &req, (end, end), 0, Err(kind));
                            break end;
                        }
                    },
                };
                slot.retry_connected(fresh);
                let reused = live.note_request(req.measured);
                let deadline = slot.ctx.shared.timeout.map(|limit| send_start + limit);
                // Pinned where it is made and lent to the timer: moved into `within` by value,
                // the protocol's send future (hundreds of bytes) was copied three times a request.
                let result = {
                    let send =
                        std::pin::pin!(live.conn.send(slot.ctx.request(req.spec), send_start));
                    slot.deadlines.within(index, deadline, send).await
                }
                .unwrap_or(Err(SendError::Failed(ErrorKind::RequestTimeout)));
                // The protocol's own clock read as the response completed, when it made one.
                let end = match &result {
                    Ok(info) => info.done_at.unwrap_or_else(Instant::now),
                    Err(_) => Instant::now(),
                };
                // Open model: the worker is awake, so the waits already due go now, with no
                // timer expiry of their own.
                if let Some(pacer) = &slot.ctx.pacer {
                    pacer.release_due(end);
                }
                let sent = Sent {
                    live,
                    send_start,
                    reused,
                    end,
                };
                match settle(&slot.ctx, &mut req, sent, result) {
                    Attempt::Done => break end,
                    Attempt::Retry => {
                        ready = Some(end);
                        slot.retrying.set(slot.retrying.get() + 1);
                    }
                }
            };
            // Closed model: the next request is due when this one ended.
            ready = (!req.open).then_some(end);
        }
    }
}

/// A connection when the slot has none usable. A new (`fresh`) request lets the slot's retries
/// ([`Slot::retrying`]) write first on it: the stream whose request had just succeeded opened
/// the next connection and wrote on it at once, ahead of the streams refused on the last one,
/// so against a server that answers one request a connection (HTTP/1.0, `keepalive_timeout 0`)
/// the same pipelined requests were turned away again on each one, hundreds of times, until
/// the schedule ran out.
async fn connection_for<P: Protocol>(
    slot: &Slot<P>,
    measured: bool,
    fresh: bool,
) -> Result<Rc<LiveConn<P>>, ErrorKind> {
    let live = slot.connection(measured).await?;
    if !fresh || !slot.ctx.shared.options.keepalive || slot.retrying.get() == 0 {
        return Ok(live);
    }
    drop(live);
    // The streams waiting for this connection were woken as it opened: they run first.
    tokio::task::yield_now().await;
    match slot.usable() {
        Some(live) => Ok(live),
        None => slot.connection(measured).await,
    }
}

/// The next ticket and when it is dispatched, once its intended time (open model) has come;
/// `None` when the schedule is done or the run was interrupted.
/// Open model: streams wait on the worker's pacer, or else on tokio's timer, boxed: kept in
/// the task it would add its 112 bytes to every stream, closed model included.
async fn next_ticket<P: Protocol>(
    slot: &Slot<P>,
    last_end: Option<Instant>,
    pacer: &mut Option<Pin<Box<Sleep>>>,
) -> Option<(Ticket, Instant)> {
    let ctx = &slot.ctx;
    if ctx.cancelled.get() {
        return None;
    }
    let now = last_end.unwrap_or_else(Instant::now);
    let ticket = ctx.schedule.borrow_mut().next(now, slot.lane as usize)?;
    let dispatch = match ticket.intended {
        // Behind schedule: no wait (and no timer entry to make).
        Some(at) if at <= now => now,
        Some(at) => match &ctx.pacer {
            Some(worker_pacer) => {
                // Boxed, as the timer below: the stream's task stays small.
                Box::pin(worker_pacer.until(at)).await;
                Instant::now()
            }
            None => {
                let wake = tokio::time::Instant::from_std(timer_target(at));
                match pacer {
                    Some(timer) => timer.as_mut().reset(wake),
                    None => *pacer = Some(Box::pin(tokio::time::sleep_until(wake))),
                }
                if let Some(timer) = pacer {
                    timer.as_mut().await;
                }
                Instant::now()
            }
        },
        None => now,
    };
    Some((ticket, dispatch))
}

/// Where the worker has no pacer: tokio's timer rounds a deadline up to its next 1 ms tick and
/// its park rounds up again, so a plain sleep wakes 1-2 ms late. Aiming one tick early centres
/// the error on the intended time; early sends are measured from when they left.
fn timer_target(at: Instant) -> Instant {
    at.checked_sub(TOKIO_TIMER_LEAD).unwrap_or(at)
}

/// One send that came back: on which connection, and when it started and ended.
struct Sent<P: Protocol> {
    live: Rc<LiveConn<P>>,
    send_start: Instant,
    /// Whether the connection had carried a request before this one.
    reused: bool,
    end: Instant,
}

/// A response cut off at the end that asked to close its connection: the close is cut off with
/// it. Out of line: it runs once a run at most, and kept inline it cost every request.
#[cold]
#[inline(never)]
fn note_close_cut_off<P: Protocol>(live: &LiveConn<P>, result: &Result<ResponseInfo, SendError>) {
    if matches!(result, Ok(info) if info.close_requested) {
        live.note_closed_after_end();
    }
}

/// Records what one send came to and says whether the request is resolved.
fn settle<P: Protocol>(
    ctx: &WorkerCtx<P>,
    req: &mut InFlight<'_>,
    sent: Sent<P>,
    result: Result<ResponseInfo, SendError>,
) -> Attempt {
    let Sent {
        live,
        send_start,
        reused,
        end,
    } = sent;
    // A refusal from a connection that did serve others (a request limit reached) is bad
    // luck, not a server that processes nothing: it does not use up the retry budget. The
    // previous refuser has settled by now; this one is judged at the next refusal.
    let mut refused_without_progress = false;
    // Finished after the end (the timer that cuts runs off has 1 ms ticks): it was in flight
    // when the run ended, so it is cut off, as the identity counts it.
    let after_end = ctx.shared.deadline.is_some_and(|d| end > d);
    if let Err(SendError::Retry(_)) = result {
        live.unnote_request(req.measured);
        let counter = live.served_counter();
        let now_served = counter.get();
        if let Some((served, then)) = req.refused_by.replace((counter, now_served)) {
            let again_here = req
                .refused_by
                .as_ref()
                .is_some_and(|(here, _)| Rc::ptr_eq(here, &served));
            refused_without_progress = served.get() == 0 || (again_here && then == now_served);
        }
    } else {
        live.note_served();
        if after_end {
            note_close_cut_off(&live, &result);
        }
        if !after_end {
            // Closed or reset before its answer: the server dropped it unread, as a server
            // at its connection limit does; it carried nothing there.
            let dropped = matches!(
                result,
                Err(SendError::Failed(
                    ErrorKind::ConnectionClosed | ErrorKind::Reset
                ))
            );
            if !dropped {
                live.note_carried();
            }
            if reused && req.measured {
                ctx.recorder.borrow_mut().total.connections.reused_requests += 1;
            }
        }
    }
    let number = live.number;
    drop(live);
    let ended = !matches!(result, Err(SendError::Retry(_)));
    if !req.measured && ended && !after_end && end >= ctx.shared.measure_start {
        // A warm-up request that ended in the measured part: outside the identity, but said.
        ctx.recorder.borrow_mut().total.warmup_overrun.finished += 1;
    }
    if after_end {
        return Attempt::Done;
    }
    match result {
        Ok(info) => {
            req.resolved = true;
            if req.measured {
                let exchange = end - send_start;
                let timings = RequestTimings {
                    // The closed model's first attempt starts at its dispatch: one subtraction.
                    latency: if req.origin == send_start {
                        exchange
                    } else {
                        // A send the timer released a little early is measured from when it left.
                        end - req.origin.min(req.first_send.unwrap_or(send_start))
                    },
                    latency_uncorrected: req
                        .open
                        .then(|| end - req.first_send.unwrap_or(send_start)),
                    exchange,
                };
                ctx.recorder.borrow_mut().succeeded(end, timings, &info);
                log_row(ctx, req, (send_start, end), number, Ok(info.status));
            }
            Attempt::Done
        }
        Err(SendError::Retry(reason)) => {
            req.retries += u8::from(refused_without_progress);
            if req.retries > MAX_RETRIES {
                let kind = retry_exhausted(reason);
                req.fail(kind, end);
                log_row(ctx, req, (send_start, end), number, Err(kind));
                return Attempt::Done;
            }
            if req.measured {
                ctx.recorder.borrow_mut().retried(reason);
            }
            Attempt::Retry
        }
        Err(SendError::Failed(kind)) => {
            req.fail(kind, end);
            log_row(ctx, req, (send_start, end), number, Err(kind));
            Attempt::Done
        }
    }
}

/// `--log-file`: the row of a measured request that ended (`status`, or why it failed) on
/// connection `number` (0: none opened), its last attempt `sent` on an open connection at the
/// first instant of `times` (the end, when it never was) and ended at the second.
fn log_row<P: Protocol>(
    ctx: &WorkerCtx<P>,
    req: &InFlight<'_>,
    (sent, end): (Instant, Instant),
    number: u64,
    outcome: Result<u16, ErrorKind>,
) {
    if !req.measured || ctx.shared.request_log.is_none() {
        return;
    }
    if let Some(log) = ctx.log.borrow_mut().as_mut() {
        let start = req.first_send.unwrap_or(sent);
        log.row(&RequestRow {
            start,
            intended: req.origin,
            sent,
            end,
            status: outcome.ok(),
            connection: number,
            url: req.spec,
            error: outcome.err(),
        });
    }
}

/// The failure a request gets when the server keeps refusing to process it.
fn retry_exhausted(reason: RetryReason) -> ErrorKind {
    match reason {
        RetryReason::Goaway(code) => ErrorKind::Goaway(code),
        RetryReason::Refused => ErrorKind::StreamReset(0x7),
        RetryReason::Rejected => ErrorKind::H3(0x10b), // H3_REQUEST_REJECTED
        // Early data refused again and again: the handshake's part (0-RTT) kept failing.
        RetryReason::EarlyRejected => ErrorKind::Handshake,
        RetryReason::ConnectionClosed => ErrorKind::ConnectionClosed,
        RetryReason::BehindTimeout => ErrorKind::RequestTimeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::h2::Http2;

    /// When retries run out, the failure names the refusal in its own protocol's words.
    #[test]
    fn an_exhausted_refusal_is_named_in_its_protocol() {
        assert_eq!(
            retry_exhausted(RetryReason::Refused).name(),
            "rst_stream(REFUSED_STREAM)"
        );
        assert_eq!(
            retry_exhausted(RetryReason::Rejected).name(),
            "h3(H3_REQUEST_REJECTED)"
        );
        assert_eq!(
            retry_exhausted(RetryReason::EarlyRejected),
            ErrorKind::Handshake
        );
    }

    fn future_size<A, B, F: Fn(A, B) -> Fut, Fut>(_: &F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// A stream in flight costs its future plus a node of its slot's set (about 70 bytes):
    /// with 100,000 h2 streams held, every 8 bytes here is 0.8 MB (issue #7's memory goal).
    #[test]
    fn an_h2_stream_future_stays_small() {
        let size = future_size(&run_stream::<Http2>);
        assert!(size <= 224, "the h2 stream future grew to {size} bytes");
    }

    /// A connection's facts are copied through every connect future: 8 more bytes here cost
    /// a held h1 connection about 130 bytes of RSS (10,000 connections connect at once, and
    /// their futures' peak stays in the heap).
    #[test]
    fn connect_info_stays_small() {
        let size = std::mem::size_of::<crate::protocol::ConnectInfo>();
        assert!(size <= 56, "ConnectInfo grew to {size} bytes");
    }
}
