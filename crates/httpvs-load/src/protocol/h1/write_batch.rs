//! The write side of an HTTP/1.1 connection: requests are queued in order (each gets a
//! ticket, its place on the wire) and one flusher writes everything queued, so pipelined
//! requests issued in the same loop turn leave in one write instead of one syscall each.
//!
//! On plain TCP the flusher first hands the batch straight to the socket (`tcp::send_now`):
//! a request nearly always fits its send buffer, and the direct write skips tokio's write
//! future, readiness check and the transport's layers (about 300 instructions and several
//! cache lines a request). Only what the socket did not take goes through tokio.

use super::pending::{Pending, SHARED_BODY};
use super::request_head::{push_chunked, HeadCache};
use super::shared_io::IoHalf;
use crate::protocol::tcp::{send_now, send_vectored_now};
use crate::protocol::wire::WireCounter;
use crate::protocol::RequestSpec;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::task::Waker;
use tokio::io::AsyncWriteExt;

/// Queued request bytes and the socket half they go to.
///
/// `repr(C)`, fields in the order a request touches them: a connection's state is cold each
/// time its next request comes (the other connections and the kernel ran in between), so the
/// fields every request uses sit together, in as few cache lines as they fit, and those only
/// pipelining or the slow write path use come last.
#[repr(C)]
pub struct WriteBatch {
    /// Plain TCP: the socket written directly, and the counter its bytes go to (the direct
    /// write bypasses the counting wrapper).
    direct: Option<(RawFd, Arc<WireCounter>)>,
    /// Taken by the flusher while it writes; lost if a flush is abandoned half-way.
    io: RefCell<Option<IoHalf>>,
    queued: RefCell<Pending>,
    next_ticket: Cell<u64>,
    /// Tickets below this are on the socket.
    written_through: Cell<u64>,
    /// Tickets below this are on the socket or in the batch a flush is writing.
    taken_through: Cell<u64>,
    flushing: Cell<bool>,
    /// The flush under way waits for room in the socket (what it took did not all fit).
    blocked: Cell<bool>,
    /// A HEAD request was queued: its response has no body whatever its headers say, so
    /// responses are not read ahead on this connection.
    head_queued: Cell<bool>,
    /// Whether other sends may queue behind a flusher (pipelining depth > 1).
    batches: bool,
    /// The queue being written; swapped with `queued` so neither is reallocated.
    spare: RefCell<Pending>,
    /// Where each write that may still have responses due ended (its `written_through`),
    /// oldest first; at most one per request in flight (pipelining only).
    batch_ends: RefCell<VecDeque<u64>>,
    /// The earliest send whose request was queued behind a flush, woken when it ends to take
    /// over what is still queued ([`WriteBatch::wait_release`]): its ticket and waker.
    successor: RefCell<Option<(u64, Waker)>>,
}

/// Returns once, after the futures already woken in this task (the other streams of the slot,
/// which are polled in wake order) had their turn. Not `tokio::task::yield_now`: that defers
/// the task until the runtime has polled its I/O driver, one more `epoll_wait` per write batch
/// (measured: 2 a batch instead of 1 at -m 16).
fn let_siblings_run() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
}

/// A flush that failed: requests from `first_unwritten` on never (fully) left.
pub struct WriteFailure {
    /// First ticket not known to be written.
    pub first_unwritten: u64,
    /// What went wrong.
    pub error: io::Error,
}

impl WriteBatch {
    /// A write side for `io`; `depth` is the pipelining depth (`-m`). `direct`: the plain TCP
    /// socket under `io`, which must stay open as long as `io`, and its byte counter.
    pub fn new(io: IoHalf, depth: u32, direct: Option<(RawFd, Arc<WireCounter>)>) -> Self {
        WriteBatch {
            io: RefCell::new(Some(io)),
            direct,
            queued: RefCell::new(Pending::with_capacity(256)),
            spare: RefCell::new(Pending::with_capacity(256)),
            next_ticket: Cell::new(0),
            written_through: Cell::new(0),
            taken_through: Cell::new(0),
            flushing: Cell::new(false),
            blocked: Cell::new(false),
            head_queued: Cell::new(false),
            batches: depth > 1,
            batch_ends: RefCell::new(VecDeque::new()),
            successor: RefCell::new(None),
        }
    }

    /// Queues `req`; returns its ticket and the length of its head.
    pub fn queue(&self, req: &RequestSpec, keepalive: bool) -> (u64, usize) {
        let mut queued = self.queued.borrow_mut();
        let (head_len, chunked) = HeadCache::with_shared(|heads| {
            let (head, chunked) = heads.head(req, keepalive);
            queued.inline_mut().extend_from_slice(head);
            (head.len(), chunked)
        });
        match (chunked, req.body.len() >= SHARED_BODY) {
            // A GET's: nothing to queue.
            (false, _) if req.body.is_empty() => {}
            (false, _) => queued.push_body(&req.body),
            (true, false) => push_chunked(queued.inline_mut(), &req.body),
            // One chunk, as push_chunked frames it, around the shared body.
            (true, true) => {
                let size = format!("{:x}\r\n", req.body.len());
                queued.inline_mut().extend_from_slice(size.as_bytes());
                queued.push_body(&req.body);
                queued.inline_mut().extend_from_slice(b"\r\n0\r\n\r\n");
            }
        }
        let ticket = self.next_ticket.get();
        self.next_ticket.set(ticket + 1);
        if req.method == http::Method::HEAD {
            self.head_queued.set(true);
        }
        (ticket, head_len)
    }

    /// Tickets below this have been queued (their responses may be on the way).
    pub fn queued_through(&self) -> u64 {
        self.next_ticket.get()
    }

    /// Whether responses may be read ahead: requests are pipelined (at depth 1 a response is
    /// never behind another), and no HEAD request went on this connection.
    pub fn reads_ahead(&self) -> bool {
        self.batches && !self.head_queued.get()
    }

    /// Whether a flush is under way (it may also write whatever is queued now; if it does not,
    /// it wakes the sends waiting in [`WriteBatch::wait_release`] when it ends).
    pub fn is_flushing(&self) -> bool {
        self.flushing.get()
    }

    /// Whether the flush under way waits for room in the socket.
    pub fn is_blocked(&self) -> bool {
        self.blocked.get()
    }

    /// The send of request `ticket`, queued behind the flush under way, is woken when it ends
    /// if no earlier request waits too: the earliest takes over, and its flush writes every
    /// request queued, the later ones included. One waker, not one per waiting send: at
    /// `-m 50000` a list woken whole made each flush cost every send a poll.
    pub fn wait_release(&self, ticket: u64, waker: &Waker) {
        let mut successor = self.successor.borrow_mut();
        match &*successor {
            // An earlier send whose request a flush took since then no longer takes over.
            Some((earlier, _)) if *earlier < ticket && *earlier >= self.taken_through.get() => {}
            Some((same, known)) if *same == ticket && known.will_wake(waker) => {}
            _ => *successor = Some((ticket, waker.clone())),
        }
    }

    /// The send of request `ticket` leaves with it unwritten (its answer came some other
    /// way): it no longer takes over.
    pub fn leave(&self, ticket: u64) {
        let mut successor = self.successor.borrow_mut();
        if successor.as_ref().is_some_and(|(t, _)| *t == ticket) {
            *successor = None;
        }
    }

    /// A flush was cut off half-way (its send dropped; the connection is retired): it ends,
    /// and the send waiting to take over is woken to find the connection gone.
    pub fn abandon(&self) {
        self.end(false);
    }

    /// The flush is over: the send waiting to take over is woken, unless the flush took its
    /// request along (it queued while the flush waited on its siblings).
    fn release(&self) {
        self.end(true);
    }

    fn end(&self, unless_taken: bool) {
        self.flushing.set(false);
        self.blocked.set(false);
        let successor = self.successor.borrow_mut().take();
        if let Some((ticket, waker)) = successor {
            if !unless_taken || ticket >= self.taken_through.get() {
                waker.wake();
            }
        }
    }

    /// Tickets below this are on the socket.
    pub fn written_through(&self) -> u64 {
        self.written_through.get()
    }

    /// Tickets below this are on the socket or in the batch the flush under way writes: the
    /// rest wait for a flush.
    pub fn taken_through(&self) -> u64 {
        self.taken_through.get()
    }

    /// How many responses are due from the write that carried `ticket`, it included (1 if it
    /// is not written yet). Tickets must be asked in order: earlier writes are forgotten.
    pub fn responses_due(&self, ticket: u64) -> u64 {
        if !self.batches {
            return 1;
        }
        let mut ends = self.batch_ends.borrow_mut();
        while ends.front().is_some_and(|&end| end <= ticket) {
            ends.pop_front();
        }
        ends.front().map_or(1, |&end| end - ticket)
    }

    /// Starts a flush of what is queued now, request `own` included, for the caller to write:
    /// [`WriteBatch::gather`] first when pipelining, then [`WriteBatch::write_direct`], and
    /// [`WriteBatch::write_rest`] for what that leaves. What other sends queue while it waits
    /// on the socket is theirs to write once it ends: a flusher that took every later request
    /// along stayed busy as long as pipelined answers kept bringing new requests, and its own
    /// send never returned.
    pub fn begin(&self) {
        self.flushing.set(true);
    }

    /// Pipelining: lets the sends ready in this same loop turn queue behind the flush first.
    pub async fn gather(&self) {
        if self.batches {
            let_siblings_run().await;
        }
    }

    /// Writes what is queued straight to the socket (plain TCP); `Ok(true)` when all of it went,
    /// which ends the flush. Otherwise [`WriteBatch::write_rest`] writes the rest.
    pub fn write_direct(&self) -> Result<bool, WriteFailure> {
        match self.send_direct() {
            Ok(false) => Ok(false),
            done => {
                self.release();
                done
            }
        }
    }

    /// Writes what the direct write left (all of it on TLS) through tokio, and ends the flush.
    pub async fn write_rest(&self, own: u64) -> Result<(), WriteFailure> {
        let written = self.write_batch(own).await;
        self.release();
        written
    }

    async fn write_batch(&self, own: u64) -> Result<(), WriteFailure> {
        let Some(mut io) = self.io.borrow_mut().take() else {
            return Err(self.failure(io::ErrorKind::BrokenPipe.into()));
        };
        self.blocked.set(true);
        while self.written_through.get() <= own {
            let mut batch = self.spare.take();
            std::mem::swap(&mut batch, &mut *self.queued.borrow_mut());
            let through = self.next_ticket.get();
            self.taken_through.set(through);
            if batch.is_empty() {
                self.spare.replace(batch);
                break;
            }
            let written = async {
                for piece in batch.pieces() {
                    io.write_all(piece).await?;
                }
                io.flush().await
            }
            .await;
            batch.clear();
            self.spare.replace(batch);
            if let Err(error) = written {
                return Err(self.failure(error));
            }
            self.written_through.set(through);
            if self.batches {
                self.batch_ends.borrow_mut().push_back(through);
            }
        }
        self.io.replace(Some(io));
        Ok(())
    }

    /// Plain TCP: writes what is queued straight to the socket; `true` if all of it went (what
    /// did not is left queued for tokio).
    fn send_direct(&self) -> Result<bool, WriteFailure> {
        let Some((fd, counter)) = &self.direct else {
            return Ok(false);
        };
        if self.io.borrow().is_none() {
            // An earlier flush was abandoned half-way: the stream is unusable.
            return Ok(false);
        }
        let mut queued = self.queued.borrow_mut();
        if queued.is_empty() {
            return Ok(false);
        }
        let (sent, all) = match queued.as_one() {
            Some(bytes) => {
                let sent = send_now(*fd, bytes).map_err(|e| self.failure(e))?;
                (sent, bytes.len())
            }
            None => {
                let sent =
                    send_vectored_now(*fd, &queued.io_slices()).map_err(|e| self.failure(e))?;
                (sent, queued.len())
            }
        };
        counter.add_sent(sent as u64);
        if sent < all {
            queued.consume(sent);
            return Ok(false);
        }
        queued.clear();
        let through = self.next_ticket.get();
        self.written_through.set(through);
        self.taken_through.set(through);
        if self.batches {
            self.batch_ends.borrow_mut().push_back(through);
        }
        Ok(true)
    }

    fn failure(&self, error: io::Error) -> WriteFailure {
        WriteFailure {
            first_unwritten: self.written_through.get(),
            error,
        }
    }
}
