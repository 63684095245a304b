//! One connection slot: the connection its streams share, reopened when the server ends it.
//!
//! A slot is one of the `-c` connections. Its `-m` streams ask it for the current connection;
//! when that one stops accepting requests (GOAWAY, `Connection: close`, FIN, error), the first
//! stream to notice opens a new one while requests already accepted drain on the old one.
//! A connection is counted (close cause, requests carried, wire bytes) when its last user drops it.

use super::context::WorkerCtx;
use super::request_timer::RequestDeadlines;
use crate::error::ErrorKind;
use crate::protocol::{CloseCause, CloseDetail, ConnectInfo, Connection, Protocol, WireBytes};
use std::cell::Cell;
use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// First wait after a failed connect in duration runs; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// Longest wait between connect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// An open connection and what it has carried.
pub struct LiveConn<P: Protocol> {
    /// The protocol's connection.
    pub conn: P::Conn,
    ctx: Rc<WorkerCtx<P>>,
    /// Measured requests sent on it.
    requests: Cell<u64>,
    /// Requests of any kind sent on it (for `--no-keepalive`).
    uses: Cell<u64>,
    /// Sends that ended in a response or a failure (not refused for a retry). Shared so a
    /// request it refused can look later at whether it served anyone after all.
    served: Rc<Cell<u64>>,
    /// Requests that ended on it (a response, or a failure other than the connection closing
    /// or resetting under it) before the run did, warm-up ones included, as the server counts
    /// them against a limit per connection: what the report's requests per connection read.
    /// Refused, cut-off and dropped-unread requests are not carried.
    carried: Cell<u64>,
    /// Counted as opened: at once when opened during the measured part, else (a warm-up
    /// connection) at its first measured request, with its warm-up bytes subtracted. Once.
    counted_open: Cell<bool>,
    /// Its wire counts when the measured part began (a warm-up connection still open then) or
    /// at its first measured request; what it moved before does not count.
    wire_baseline: Cell<Option<WireBytes>>,
    /// Opened before the run's clock with no warm-up to come (the open model's connections):
    /// it counts as opened, its handshake bytes included, even if no request ever comes.
    preopened: bool,
    /// The server's close came with a response that ended after the run did (h1
    /// `Connection: close`): that response is cut off, so its close is not counted as the
    /// server's either; the connection was open at the end, and closes as the others do.
    closed_after_end: Cell<bool>,
    /// How it opened; a warmup connection is counted as opened at its first measured request.
    info: ConnectInfo,
    /// With `--log-file`, its number in the run: 1, 2... in the order opened, warm-up
    /// connections included (the request log's connection column); else 0.
    pub number: u64,
}

impl<P: Protocol> LiveConn<P> {
    /// Notes one request sent here; returns whether the connection had carried one before.
    /// A measured request counts only measured ones: a warm-up connection is counted as opened
    /// at its first measured request, which is then not a reuse. Reuses are counted as requests
    /// end (succeeded or failed), so opened + reused = succeeded + failed when nothing was cut
    /// off; a connection whose first request was cut off at the end counts as opened only.
    pub fn note_request(&self, measured: bool) -> bool {
        let reused = if measured {
            self.requests.get() > 0
        } else {
            self.uses.get() > 0
        };
        self.uses.set(self.uses.get() + 1);
        if measured {
            if !self.counted_open.get() {
                // A flag, not `requests == 0`: a refused first request is un-noted, and the
                // connection must not count as opened twice.
                self.counted_open.set(true);
                if self.wire_baseline.get().is_none() {
                    self.wire_baseline.set(Some(self.conn.wire()));
                }
                self.ctx.recorder.borrow_mut().connection_opened(&self.info);
            }
            self.requests.set(self.requests.get() + 1);
        }
        reused
    }

    /// The last request noted here was not processed (it goes again elsewhere): it does not
    /// count as carried by this connection.
    pub fn unnote_request(&self, measured: bool) {
        if measured {
            self.requests.set(self.requests.get().saturating_sub(1));
        }
    }

    /// Notes that a send here ended with a response or a failure.
    pub fn note_served(&self) {
        self.served.set(self.served.get() + 1);
    }

    /// Notes that the server's close came with a response that ended after the run did.
    pub fn note_closed_after_end(&self) {
        self.closed_after_end.set(true);
    }

    /// Notes that a request ended here before the run did (see `carried`).
    pub fn note_carried(&self) {
        self.carried.set(self.carried.get() + 1);
    }

    /// How many sends here ended with a response or a failure, as a counter that outlives
    /// the connection.
    pub fn served_counter(&self) -> Rc<Cell<u64>> {
        self.served.clone()
    }

    fn counts(&self) -> bool {
        self.counted_open.get()
    }

    /// The measured part begins while this warm-up connection is open: what it moves from now
    /// on counts, and it counts as opened, even if no measured request ever comes to it
    /// (warm-up requests still in flight on a slow link).
    fn mark_measure_start(&self) {
        // Already counted: opened in the measured part (the mark runs on a timer, a little after
        // the measured part began), or carried a measured request. It counts from then on.
        if !self.counted_open.get() && self.wire_baseline.get().is_none() {
            self.wire_baseline.set(Some(self.conn.wire()));
        }
    }
}

impl<P: Protocol> Drop for LiveConn<P> {
    fn drop(&mut self) {
        let mut cause = match self.closed_after_end.get() {
            true => CloseCause::Local,
            false => self.conn.close_cause(),
        };
        // Open to the end, and the server closed it while it sat idle (its idle timeout, as h1
        // sees only before a send): the server's close, as h2's GOAWAY and h3's close are.
        let closed_idle = cause == CloseCause::Open && self.conn.peer_finished();
        if closed_idle {
            cause = CloseCause::Fin;
        }
        self.conn.close();
        if !self.counts() {
            // A warm-up connection open in the measured part with only warm-up requests on it
            // (they outlived the warm-up) has its baseline from then.
            let crossed = self.wire_baseline.get().is_some();
            if !self.preopened && !crossed {
                return;
            }
            // Opened for the run and never used, or open through the measured part carrying
            // warm-up requests: the server saw it then, so the report counts it.
            self.ctx.recorder.borrow_mut().connection_opened(&self.info);
        }
        let mut wire = self.conn.wire();
        if let Some(base) = self.wire_baseline.get() {
            wire = subtract(wire, base);
        }
        let quic = self.conn.quic_stats();
        let mut rec = self.ctx.recorder.borrow_mut();
        rec.total.wire.add_wire(&wire);
        rec.total.connections.retire(cause, self.carried.get());
        if cause == CloseCause::Goaway && self.conn.goaway_error().is_some() {
            rec.total.connections.closed_goaway_error += 1;
        }
        match self.conn.close_detail() {
            _ if closed_idle => rec.total.connections.closed_idle += 1,
            Some(CloseDetail::Idle) => rec.total.connections.closed_idle += 1,
            Some(CloseDetail::Unasked) => rec.total.connections.closed_unasked += 1,
            None => {}
        }
        if let Some(q) = quic {
            rec.total.quic.add(&q);
        }
    }
}

fn subtract(a: WireBytes, b: WireBytes) -> WireBytes {
    WireBytes {
        sent: a.sent.saturating_sub(b.sent),
        received: a.received.saturating_sub(b.received),
        header_sent: a.header_sent.saturating_sub(b.header_sent),
        header_received: a.header_received.saturating_sub(b.header_received),
        header_decoded_received: a
            .header_decoded_received
            .saturating_sub(b.header_decoded_received),
        datagrams_sent: a.datagrams_sent.saturating_sub(b.datagrams_sent),
        datagrams_received: a.datagrams_received.saturating_sub(b.datagrams_received),
    }
}

/// One of the `-c` connections, reopened as needed.
pub struct Slot<P: Protocol> {
    /// The worker this slot belongs to.
    pub ctx: Rc<WorkerCtx<P>>,
    /// The request deadlines of its streams (`--timeout`).
    pub deadlines: RequestDeadlines,
    current: RefCell<Option<Rc<LiveConn<P>>>>,
    /// A stream is opening a connection; the others wait for its turn to end.
    connecting: Cell<bool>,
    /// Streams waiting for the connecting stream's turn to end.
    turn_waiters: RefCell<Vec<Waker>>,
    /// Connect attempts ended (a generation number: waiters learn whether one ended while they
    /// waited). Counted at the end, not the start: a stream that comes while an attempt is
    /// under way shares its outcome rather than making its own after it.
    attempts: Cell<u64>,
    /// The last attempt's failure, if it failed.
    last_failure: Cell<Option<ErrorKind>>,
    consecutive_failures: Cell<u32>,
    /// The index in `shared.specs` of the slot's next request.
    next_spec: Cell<u32>,
    /// Which of the worker's connections this is: the open model's sends for it are its own.
    pub lane: u32,
    /// Requests refused on a connection (for a retry) that have no connection yet: a new
    /// request lets them write first on the next one.
    pub retrying: Cell<u32>,
}

impl<P: Protocol> Slot<P> {
    /// A request's attempt has its connection, or none will come: a retry (not `fresh`) no
    /// longer waits for one ([`Slot::retrying`]).
    pub fn retry_connected(&self, fresh: bool) {
        if !fresh {
            self.retrying.set(self.retrying.get().saturating_sub(1));
        }
    }

    /// A slot with no connection yet, for `streams` streams: the worker's connection `lane`.
    pub fn new(ctx: Rc<WorkerCtx<P>>, streams: usize, lane: u32) -> Slot<P> {
        let timed = ctx.shared.timeout.is_some();
        Slot {
            ctx,
            deadlines: RequestDeadlines::new(if timed { streams } else { 0 }),
            current: RefCell::new(None),
            connecting: Cell::new(false),
            turn_waiters: RefCell::new(Vec::new()),
            attempts: Cell::new(0),
            last_failure: Cell::new(None),
            consecutive_failures: Cell::new(0),
            next_spec: Cell::new(0),
            lane,
            retrying: Cell::new(0),
        }
    }

    /// The index of the request a newly released ticket on this slot sends: the run's URLs in
    /// turn per connection, as h2load's clients go round them (per worker, `-c 3` over three
    /// URLs gave each connection one URL only).
    pub fn next_spec(&self) -> u32 {
        let count = self.ctx.shared.specs.len();
        if count <= 1 {
            return 0;
        }
        let at = self.next_spec.get();
        self.next_spec
            .set(if (at as usize) + 1 < count { at + 1 } else { 0 });
        at
    }

    /// The connection to send on, opening one if needed. With keep-alive, one stream at a time
    /// opens the slot's connection, and streams that waited while another stream's attempt
    /// failed share that failure instead of hammering a dead server.
    /// `measured`: whether the request that asks is (one opened for a warm-up request counts
    /// as a warm-up connection, even when it opens after the warm-up ended).
    pub async fn connection(&self, measured: bool) -> Result<Rc<LiveConn<P>>, ErrorKind> {
        if let Some(c) = self.usable() {
            return Ok(c);
        }
        if !self.ctx.shared.options.keepalive {
            // One connection per request: each stream opens its own at once, so up to `-m`
            // connect at a time. Taking turns, the streams' connects ran one after another, and
            // each request waited for the others' handshakes in no phase of the report.
            return Box::pin(self.reconnect(measured)).await;
        }
        let mut seen = self.attempts.get();
        // Waiting for the turn is small; only the stream whose turn it is builds the connect.
        let _turn = loop {
            if let Some(turn) = self.connect_turn(seen).await {
                break turn;
            }
            // An attempt ended while this stream waited: its outcome is this stream's too.
            if let Some(c) = self.usable() {
                return Ok(c);
            }
            if let Some(kind) = self.last_failure.get() {
                return Err(kind);
            }
            // It opened a connection that is spent already: wait for a turn to open the next.
            seen = self.attempts.get();
        };
        if let Some(c) = self.usable() {
            return Ok(c);
        }
        // Drop our hold on the spent connection; it is counted once in-flight streams finish.
        self.replace_current(None);
        // Boxed: the connect future is large, and inlined it would sit in every stream task
        // (memory per stream), though it runs only when a connection opens. Boxed only here,
        // by the one stream that connects: a box per waiting stream was 1.7 KB each while
        // `-m` streams waited for a connection (and glibc keeps that peak as RSS).
        Box::pin(self.reconnect(measured)).await
    }

    async fn reconnect(&self, measured: bool) -> Result<Rc<LiveConn<P>>, ErrorKind> {
        self.wait_after_failures().await;
        self.open(measured).await
    }

    /// Waits until no other stream is connecting, then takes the turn; or, `None`, returns as
    /// soon as an attempt has ended since the caller saw `seen` attempts. A woken waiter looks
    /// at the attempt count first: the stream whose attempt failed retakes the turn for its
    /// next request before its waiters run, and waiters that only looked at the turn waited
    /// for that attempt too, and the next, for as long as the server stayed down (an h3 `-n`
    /// run failed one request per 250 ms refused probe instead of all of a slot's streams).
    /// A waiting stream holds only a reference (no lock queue node), since all `-m` streams
    /// wait at once on a new slot.
    async fn connect_turn(&self, seen: u64) -> Option<ConnectTurn<'_, P>> {
        poll_fn(|cx| {
            if self.attempts.get() != seen {
                return Poll::Ready(None);
            }
            if self.connecting.get() {
                self.turn_waiters.borrow_mut().push(cx.waker().clone());
                return Poll::Pending;
            }
            self.connecting.set(true);
            Poll::Ready(Some(ConnectTurn { slot: self }))
        })
        .await
    }

    /// The measured part begins: the open connection's wire counts from now (see
    /// [`LiveConn`]'s `wire_baseline`).
    pub fn mark_measure_start(&self) {
        if let Some(live) = self.current.borrow().as_ref() {
            // A `--no-keepalive` connection whose one request has ended only waits to be
            // replaced at the slot's next send: it takes no part in the measured part (the
            // open model counted each as opened, "13 connections for 10 requests").
            let spent = !self.ctx.shared.options.keepalive
                && live.uses.get() > 0
                && live.served.get() >= live.uses.get();
            if !spent {
                live.mark_measure_start();
            }
        }
    }

    /// Takes a connection opened before the run's clock started (the open model opens them
    /// first): like a warm-up connection, it is counted as opened at its first measured request.
    /// Without a warm-up, it counts as opened at once, when the measured part begins (the
    /// per-second series' first point holds every one), its handshake bytes count as the closed
    /// model's do, and it counts even if no request comes to it.
    pub fn adopt(&self, conn: P::Conn, info: ConnectInfo) {
        let shared = &self.ctx.shared;
        let preopened = shared.measure_start <= shared.origin;
        if preopened {
            self.ctx.recorder.borrow_mut().connection_opened(&info);
        }
        self.install(conn, info, preopened, preopened);
    }

    fn install(
        &self,
        conn: P::Conn,
        info: ConnectInfo,
        counted_open: bool,
        preopened: bool,
    ) -> Rc<LiveConn<P>> {
        let live = Rc::new(LiveConn {
            conn,
            ctx: self.ctx.clone(),
            requests: Cell::new(0),
            uses: Cell::new(0),
            served: Rc::new(Cell::new(0)),
            carried: Cell::new(0),
            counted_open: Cell::new(counted_open),
            wire_baseline: Cell::new(preopened.then(WireBytes::default)),
            closed_after_end: Cell::new(false),
            preopened,
            info,
            // Numbered only for the request log: the count is shared by the run's workers.
            number: if self.ctx.shared.request_log.is_some() {
                self.ctx.shared.number_connection()
            } else {
                0
            },
        });
        self.replace_current(Some(live.clone()));
        live
    }

    /// Makes `new` the current connection; the one it replaces, if streams still hold it
    /// (draining after a GOAWAY), is remembered for [`quiesce_replaced`].
    fn replace_current(&self, new: Option<Rc<LiveConn<P>>>) {
        let old = std::mem::replace(&mut *self.current.borrow_mut(), new);
        // With --no-keepalive each connection carries one request: one RST_STREAM at most.
        if !self.ctx.shared.options.keepalive {
            return;
        }
        if let Some(old) = old.filter(|o| Rc::strong_count(o) > 1) {
            let mut replaced = self.ctx.replaced.borrow_mut();
            // Pruned only when full, so a push costs O(1) amortized however many drain.
            if replaced.len() == replaced.capacity() {
                replaced.retain(|w| w.strong_count() > 0);
            }
            replaced.push(Rc::downgrade(&old));
        }
    }

    /// The run is over: the requests in flight on its current connection are dropped next.
    pub fn quiesce(&self) {
        if let Some(live) = self.current.borrow().as_ref() {
            live.conn.quiesce();
        }
    }

    /// Drops the current connection (end of run); it is counted as closed by us.
    pub fn release(&self) {
        self.current.borrow_mut().take();
    }

    /// The connection to send on if one is open and takes requests now (no waiting).
    pub fn usable(&self) -> Option<Rc<LiveConn<P>>> {
        let current = self.current.borrow();
        let live = current.as_ref()?;
        let keepalive_ok = self.ctx.shared.options.keepalive || live.uses.get() == 0;
        (keepalive_ok && live.conn.accepts_requests()).then(|| live.clone())
    }

    async fn wait_after_failures(&self) {
        let failures = self.consecutive_failures.get();
        if failures == 0 || !self.ctx.shared.backoff_on_connect_failure {
            return;
        }
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << failures.min(10).saturating_sub(1))
            .min(MAX_BACKOFF);
        tokio::time::sleep(wait).await;
    }

    async fn open(&self, measured: bool) -> Result<Rc<LiveConn<P>>, ErrorKind> {
        let shared = &self.ctx.shared;
        let attempt = self.ctx.protocol.connect(&shared.target, &shared.options);
        let result = tokio::time::timeout(shared.options.connect_timeout, attempt)
            .await
            .unwrap_or(Err(ErrorKind::ConnectTimeout));
        self.attempts.set(self.attempts.get() + 1);
        match result {
            Ok((conn, info)) => {
                // For a warm-up request dispatched just before the measured part, it opens in
                // it: it counts, as a warm-up connection does, from its first measured request
                // (the warm-up request's bytes are not the run's).
                let opened_measured = measured && Instant::now() >= shared.measure_start;
                if opened_measured {
                    self.ctx.recorder.borrow_mut().connection_opened(&info);
                }
                self.last_failure.set(None);
                self.consecutive_failures.set(0);
                Ok(self.install(conn, info, opened_measured, false))
            }
            Err(kind) => {
                if Instant::now() >= shared.measure_start {
                    self.ctx.recorder.borrow_mut().connection_failed();
                }
                self.last_failure.set(Some(kind));
                self.consecutive_failures
                    .set(self.consecutive_failures.get().saturating_add(1));
                Err(kind)
            }
        }
    }
}

/// One stream's turn to open the slot's connection; ending it (done, failed or dropped with
/// its stream) lets the waiting streams look again.
struct ConnectTurn<'a, P: Protocol> {
    slot: &'a Slot<P>,
}

impl<P: Protocol> Drop for ConnectTurn<'_, P> {
    fn drop(&mut self) {
        self.slot.connecting.set(false);
        let waiters = std::mem::take(&mut *self.slot.turn_waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }
}

/// The run is over: the requests in flight on connections still draining after their slot
/// replaced them are dropped next, as the current ones' are ([`Slot::quiesce`]).
pub fn quiesce_replaced<P: Protocol>(ctx: &WorkerCtx<P>) {
    for old in ctx.replaced.borrow().iter().filter_map(Weak::upgrade) {
        old.conn.quiesce();
    }
}
