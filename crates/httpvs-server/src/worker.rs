//! One worker thread's context: limits, its own counters, the shutdown signal, protocol builders,
//! and the connection count that enforces `max_connections` across workers.

use crate::config::{H2Engine, Limits};
use crate::totals::{Counters, Event};
use hyper_util::rt::TokioTimer;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Slack above `max_header_bytes` for hyper's own hard cap (request line, separators), so the
/// server's own check answers 431 with a reason first.
const H1_HEADER_SLACK: usize = 8 * 1024;

/// What every connection task of one worker shares.
pub struct WorkerCtx {
    /// Limits from the config.
    pub limits: Limits,
    /// This worker's counters.
    pub counters: Arc<Counters>,
    /// Open connections over all workers.
    pub live_all: Arc<AtomicUsize>,
    /// Open connections of this worker (shutdown waits for zero).
    pub live_here: Arc<AtomicUsize>,
    /// Becomes the drain deadline when the server stops accepting.
    pub shutdown: watch::Receiver<Option<Instant>>,
    /// HTTP/1.1 connection settings.
    pub h1: hyper::server::conn::http1::Builder,
    /// HTTP/2 connection settings.
    pub h2: h2::server::Builder,
    /// Which HTTP/2 implementation serves connections.
    pub h2_engine: H2Engine,
}

impl WorkerCtx {
    /// A worker context with protocol builders set from `limits`.
    pub fn new(
        limits: Limits,
        counters: Arc<Counters>,
        live_all: Arc<AtomicUsize>,
        shutdown: watch::Receiver<Option<Instant>>,
        h2_engine: H2Engine,
    ) -> WorkerCtx {
        WorkerCtx {
            h1: h1_builder(&limits),
            h2: h2_builder(&limits),
            limits,
            counters,
            live_all,
            live_here: Arc::new(AtomicUsize::new(0)),
            shutdown,
            h2_engine,
        }
    }

    /// Takes a connection slot, or counts a refusal when `max_connections` are open.
    pub fn admit(self: &Arc<Self>) -> Option<ConnSlot> {
        let before = self.live_all.fetch_add(1, Relaxed);
        if before >= self.limits.max_connections {
            self.live_all.fetch_sub(1, Relaxed);
            self.counters.event(Event::OverMaxConnections);
            return None;
        }
        self.live_here.fetch_add(1, Relaxed);
        Some(ConnSlot { ctx: self.clone() })
    }

    /// The bound on handshakes and the preface probe.
    pub fn handshake_timeout(&self) -> Duration {
        self.limits.idle_timeout
    }

    /// Counts `n` requests cut off if the drain deadline has passed: called as a task is dropped,
    /// which after the deadline is the worker's runtime dropping what is left.
    pub fn count_cut_off(&self, n: usize) {
        let past = self
            .shutdown
            .borrow()
            .is_some_and(|deadline| Instant::now() >= deadline);
        if past {
            for _ in 0..n {
                self.counters.event(Event::CutOff);
            }
        }
    }
}

/// Held while one request (or a connection's request in progress) is being answered: dropped
/// unfinished after the drain deadline, it counts a request cut off; `done` lets it go quietly.
pub struct Answering<'a> {
    ctx: &'a WorkerCtx,
}

impl<'a> Answering<'a> {
    /// Starts watching.
    pub fn new(ctx: &'a WorkerCtx) -> Answering<'a> {
        Answering { ctx }
    }

    /// The answer is complete (or the client gave up): nothing to count.
    pub fn done(self) {
        std::mem::forget(self);
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.ctx.count_cut_off(1);
    }
}

/// A held connection slot; dropping it frees the slot.
pub struct ConnSlot {
    ctx: Arc<WorkerCtx>,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.ctx.live_all.fetch_sub(1, Relaxed);
        self.ctx.live_here.fetch_sub(1, Relaxed);
    }
}

fn h1_builder(limits: &Limits) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout)
        .keep_alive(true)
        // A client may shut its writing side once its request is out and wait for the answer
        // (`shutdown(SHUT_WR)`, as `nc -N` does): nginx answers it, and hyper by default drops
        // the connection at that FIN, so a request still being handled (`?delay=`) was never
        // answered. A client gone whole fails the write instead, as any peer that vanishes; the
        // cost: a request whose client left during `?delay=` holds its task until the delay ends.
        .half_close(true)
        // pipeline_flush would batch the answers to pipelined requests into one write, but hyper
        // then drops every answer still buffered when keep-alive ends mid-pipeline (`close=1`,
        // --max-requests-per-conn), so answers to pipelined requests are flushed one by one.
        .pipeline_flush(false)
        // max_headers stays hyper's default (100): setting it makes hyper build a zeroed
        // header index vector per request instead of using a stack array.
        .max_buf_size((limits.max_header_bytes + H1_HEADER_SLACK).max(8192));
    b
}

/// The h2 crate answers 431 itself to a header list past `max_header_list_size` (its count adds
/// 32 bytes per field, so the slack keeps it above the server's own 431 for most requests); those
/// answers never reach the server, so the totals miss them on this engine.
fn h2_builder(limits: &Limits) -> h2::server::Builder {
    let mut b = h2::server::Builder::new();
    let header_list = u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX);
    b.max_concurrent_streams(limits.max_streams)
        .max_header_list_size(header_list.saturating_add(32 * 64))
        .initial_window_size(1 << 20)
        .initial_connection_window_size(4 << 20)
        .max_pending_accept_reset_streams(limits.max_pending_reset_streams)
        .max_local_error_reset_streams(Some(1024))
        .max_send_buffer_size(crate::body::CHUNK * 2);
    b
}

/// Resolves when the server stops accepting (the watch guard is dropped before returning).
pub async fn stopping(shutdown: &mut watch::Receiver<Option<Instant>>) {
    let _ = shutdown.wait_for(|stop| stop.is_some()).await;
}
