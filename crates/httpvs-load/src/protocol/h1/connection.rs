//! One HTTP/1.1 connection: keep-alive, pipelining (writes in order, responses read in the
//! same order), and how the connection ends.
//!
//! Concurrent `send` calls take a ticket when they queue their request (see `write_batch`);
//! each then waits for its turn to read, so up to `-m` requests are on the wire at once. A send
//! that is dropped half-way (a request timeout) leaves the byte stream unusable, so a guard
//! retires the connection.

use super::batch_wake::BatchWake;
use super::head_memo::HeadMemo;
use super::read_ahead::{whole_response, Ready, ReadyResponses};
use super::response::{BodyFraming, ChunkedBody, ResponseHead};
use super::shared_io::{self, IoHalf, Spoke};
use super::turn_wakers::TurnWakers;
use super::write_batch::{WriteBatch, WriteFailure};
use crate::error::ErrorKind;
use crate::protocol::tcp::{io_error_kind, Transport};
use crate::protocol::wire::WireCounter;
use crate::protocol::{
    CloseCause, CloseDetail, RequestSpec, ResponseInfo, RetryReason, SendError, WireBytes,
};
use bytes::{Buf, BytesMut};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Most bytes asked of the socket per read: large reads keep syscalls per response low.
const READ_CHUNK: usize = 64 * 1024;
/// Bytes asked per read at first: small responses never grow the buffer, so an idle
/// connection holds 1 KiB, not 64 KiB.
const FIRST_READ: usize = 1024;

const RETRY: SendError = SendError::Retry(RetryReason::ConnectionClosed);
const BEHIND_TIMEOUT: SendError = SendError::Retry(RetryReason::BehindTimeout);

/// An open HTTP/1.1 connection (plain or TLS).
///
/// `repr(C)` with the fields in the order a request touches them, as in `WriteBatch`: cold
/// state costs a cache miss per line a request touches.
#[repr(C)]
pub struct Http1Connection {
    writes: WriteBatch,
    counter: Arc<WireCounter>,
    next_turn: Cell<u64>,
    /// Responses from this ticket on will never be read (close, EOF, error, abandoned send);
    /// `u64::MAX` while healthy. Earlier pipelined responses still complete.
    dead_from: Cell<u64>,
    cause: Cell<CloseCause>,
    /// What ended it between requests, when that did (`close_detail`): the server's FIN while
    /// idle (seen before a send: `accepts_requests`), or bytes no request asked for.
    detail: Cell<Option<CloseDetail>>,
    keepalive: bool,
    /// Why requests from `WriteBatch::written_through` on could not be written, if so.
    write_error: Cell<Option<ErrorKind>>,
    /// The server ended the connection after a response, by `Connection: close` or by a body
    /// its FIN delimits: the requests behind that response were not processed.
    server_ended: Cell<bool>,
    /// A send was dropped before its answer was read (its `--timeout`, or the run's end):
    /// the requests pipelined behind it are lost with it, not to the server's close.
    abandoned: Cell<bool>,
    /// Taken by the send whose turn it is to read, and put back after its response.
    reader: RefCell<Option<ReadSide>>,
    /// Wakes the send whose turn to read has come.
    turn: TurnWakers,
    /// Responses read ahead of their turn, waiting for their sends.
    ready: ReadyResponses,
}

struct ReadSide {
    io: IoHalf,
    /// Plain TCP: reads go straight to the socket (`IoHalf::poll_read_plain`).
    plain: bool,
    buf: BytesMut,
    /// Bytes to ask for next: doubles (up to `READ_CHUNK`) while reads fill what they ask.
    want: usize,
    /// Pipelined plain TCP: wakes for whole write batches of responses, not each one.
    batch: Option<BatchWake>,
}

impl ReadSide {
    /// About to wait for a response head; `due` responses of its write batch are unread.
    fn head_wait(&mut self, due: u64) {
        if let Some(batch) = self.batch.as_mut() {
            batch.before_head_wait(due, self.buf.len());
        }
    }

    /// About to wait for more of a body.
    fn body_wait(&mut self) {
        if let Some(batch) = self.batch.as_mut() {
            batch.before_body_wait();
        }
    }

    /// A whole response of `bytes` was read (`None`: one whose size says nothing of the next).
    fn response_seen(&mut self, bytes: Option<usize>) {
        match (self.batch.as_mut(), bytes) {
            (Some(batch), Some(bytes)) => batch.response_seen(bytes),
            (Some(batch), None) => batch.turn_off(),
            (None, _) => {}
        }
    }
}

/// Why reading a response stopped early, and what that says about the connection.
struct ReadFailure {
    error: SendError,
    cause: CloseCause,
    /// Head bytes of the response (interim ones included) that had come whole before it
    /// failed in its body: they count as header bytes received.
    header_bytes: u64,
}

impl Http1Connection {
    /// Bytes an idle connection's server sent unasked (a 408 before a close too) were
    /// received all the same: read, dropped and counted. Off the path of a request.
    #[cold]
    #[inline(never)]
    fn count_unread(&self) {
        let unread = self
            .reader
            .borrow()
            .as_ref()
            .map_or(0, |r| r.io.discard_waiting());
        self.counter.add_received(unread);
    }

    pub(super) fn new(
        transport: Transport,
        counter: Arc<WireCounter>,
        keepalive: bool,
        depth: u32,
    ) -> Self {
        // Pipelined plain TCP only: see `batch_wake` for why TLS is left out.
        let batch = transport
            .plain_fd()
            .filter(|_| depth > 1)
            .map(BatchWake::new);
        let direct = transport.plain_fd().map(|fd| (fd, counter.clone()));
        let (read, write) = shared_io::split(transport);
        Http1Connection {
            writes: WriteBatch::new(write, depth, direct),
            reader: RefCell::new(Some(ReadSide {
                plain: read.is_plain(),
                io: read,
                buf: BytesMut::new(),
                want: FIRST_READ,
                batch,
            })),
            turn: TurnWakers::default(),
            ready: ReadyResponses::default(),
            next_turn: Cell::new(0),
            dead_from: Cell::new(u64::MAX),
            write_error: Cell::new(None),
            server_ended: Cell::new(false),
            abandoned: Cell::new(false),
            cause: Cell::new(CloseCause::Open),
            detail: Cell::new(None),
            counter,
            keepalive,
        }
    }

    /// Records why the connection stopped accepting requests; the first cause wins.
    /// Every response asked for has been read: none is due.
    fn idle(&self) -> bool {
        self.next_turn.get() == self.writes.queued_through()
    }

    /// `--no-keepalive`: this connection carries exactly one request, and it has it. The
    /// connection is not retired then: a server that resets or cuts it off before the answer
    /// is its cause (it read "closed by us" for every one), while a close after a whole
    /// response is the one the request asked for, ours.
    fn spent(&self) -> bool {
        !self.keepalive && self.writes.queued_through() > 0
    }

    fn retire(&self, cause: CloseCause) {
        if self.cause.get() == CloseCause::Open {
            self.cause.set(cause);
        }
    }

    /// Marks responses after `ticket` as unreadable and wakes their waiters.
    fn end_reading_after(&self, ticket: u64) {
        self.end_reading_from(ticket + 1);
    }

    /// Marks responses from `ticket` on as unreadable and wakes their waiters.
    fn end_reading_from(&self, ticket: u64) {
        self.dead_from.set(self.dead_from.get().min(ticket));
        self.turn.wake_from(self.dead_from.get());
    }

    async fn send_request(
        &self,
        req: &RequestSpec,
        start: Instant,
    ) -> Result<ResponseInfo, SendError> {
        let mut in_flight = InFlight {
            conn: self,
            ticket: None,
            returned: false,
            head_bytes: Cell::new(0),
        };
        let (ticket, flushes) = self.queue_request(req)?;
        in_flight.ticket = Some(ticket);
        // This send writes the queue when no flush is under way; else the flush under way
        // writes it, or ours once that one ends without it. Nearly always all of it goes
        // straight into the socket, and the read follows.
        let writer = match flushes {
            true => Writer::Us,
            false => self.await_writer(ticket).await,
        };
        let rest = match writer {
            Writer::Taken => false,
            Writer::Us => self.start_flush().await,
            // Its turn to read came first: it reads, and writes if it falls to it.
            Writer::Pending => true,
        };
        if !rest {
            let result = self.receive(req, start, ticket, &mut in_flight).await;
            in_flight.returned = true;
            return result;
        }
        // The socket is full: the rest is written beside the read. A server that reads no
        // further request until its answers to the earlier ones are read (its socket full of
        // them) waited on our reads while we waited on its, and the pipelined connection stood
        // still until the timeout.
        let result = {
            let mut flush =
                std::pin::pin!((writer == Writer::Us).then(|| self.flush_queued(ticket, true)));
            let mut receive = std::pin::pin!(self.receive(req, start, ticket, &mut in_flight));
            let mut result = None;
            std::future::poll_fn(|cx| loop {
                let mut writing = false;
                if let Some(ours) = flush.as_mut().as_pin_mut() {
                    match ours.poll(cx) {
                        Poll::Ready(()) => flush.set(None),
                        Poll::Pending => writing = true,
                    }
                }
                // The read starts once the request is written (it sizes its wait by the write's
                // batch), or while the write waits on the socket.
                if result.is_none() && (!writing || self.writes.is_blocked()) {
                    if let Poll::Ready(r) = receive.as_mut().poll(cx) {
                        result = Some(r);
                    }
                }
                if writing {
                    // A flush begun is finished (one cut off half-way ends the connection).
                    return Poll::Pending;
                }
                if let Some(done) = result.take() {
                    if self.left_to_write(ticket) {
                        // Answered unwritten (a server's stray answer, or its close): nothing more
                        // is written for it, and the sends queued after ours look again for who
                        // writes them.
                        self.writes.leave(ticket);
                        self.turn.wake_from(ticket + 1);
                    }
                    return Poll::Ready(done);
                }
                if ticket >= self.dead_from.get() && ticket >= self.writes.written_through() {
                    // The connection ended with the request unwritten (another send's flush was
                    // cut off): its answer will never come, so the read is not waited out.
                    return Poll::Ready(Err(self.settle(req, ticket, self.unanswered(ticket))));
                }
                let unwritten = self.left_to_write(ticket);
                if unwritten && !self.writes.is_flushing() {
                    flush.set(Some(self.flush_queued(ticket, false)));
                    continue;
                }
                if unwritten {
                    self.writes.wait_release(ticket, cx.waker());
                }
                // Otherwise only the response is awaited; its read wakes us.
                return Poll::Pending;
            })
            .await
        };
        in_flight.returned = true;
        result
    }

    /// Request `ticket` was queued behind another send's flush: waits until a flush took it
    /// along, until none is under way (this send writes the queue), or until its turn to read
    /// came (its turn's wake comes once: waiting on, it slept through it, and no answer on the
    /// connection was read again).
    async fn await_writer(&self, ticket: u64) -> Writer {
        std::future::poll_fn(|cx| {
            if !self.left_to_write(ticket) {
                return Poll::Ready(Writer::Taken);
            }
            if !self.writes.is_flushing() {
                return Poll::Ready(Writer::Us);
            }
            if self.next_turn.get() == ticket {
                return Poll::Ready(Writer::Pending);
            }
            self.writes.wait_release(ticket, cx.waker());
            // The flush under way takes it along without a word: its answer may then come,
            // read ahead by an earlier send, which wakes the send whose turn it is.
            self.turn.register(ticket, cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Begins a flush and writes what is queued straight into the socket; true when some is
    /// left for [`Http1Connection::flush_queued`] (the socket is full, or the transport is TLS).
    async fn start_flush(&self) -> bool {
        self.writes.begin();
        // A flush cut off half-way (dropped send) would corrupt every later request.
        let mut partial = PartialWrite {
            conn: self,
            done: false,
        };
        self.writes.gather().await;
        let direct = self.writes.write_direct();
        partial.done = true;
        match direct {
            Ok(done) => !done,
            Err(failure) => {
                self.write_failed(failure);
                false
            }
        }
    }

    /// Whether request `ticket` is still to be written: in no flush's batch yet (one that
    /// waits counts as writing it), and the connection can still carry it.
    fn left_to_write(&self, ticket: u64) -> bool {
        self.writes.taken_through() <= ticket
            && self.write_error.get().is_none()
            && self.dead_from.get() > ticket
    }

    /// Waits for the turn of request `ticket` (queued) to read, and reads its response.
    async fn receive(
        &self,
        req: &RequestSpec,
        start: Instant,
        ticket: u64,
        in_flight: &mut InFlight<'_>,
    ) -> Result<ResponseInfo, SendError> {
        if let Err(error) = self.wait_turn(ticket).await {
            return Err(self.settle(req, ticket, error));
        }
        if let Some(Ready { mut info, arrived }) = self.ready.take(ticket) {
            in_flight.ticket = None;
            info.ttfb = arrived.saturating_duration_since(start);
            // Read ahead only when whole: it arrived complete.
            info.done_at = Some(arrived);
            return Ok(info);
        }
        let Some(mut side) = self.reader.borrow_mut().take() else {
            // An earlier reader failed, or was abandoned mid-response; `dead_from` already
            // covers us.
            return Err(self.settle(req, ticket, self.lost()));
        };
        let is_head = req.method == http::Method::HEAD;
        let due = self.writes.responses_due(ticket);
        let heads = &in_flight.head_bytes;
        let result = read_response(&mut side, is_head, start, ticket > 0, due, heads).await;
        in_flight.ticket = None;
        match result {
            Ok((head, info)) => {
                self.counter.add_header_received(info.header_bytes);
                let last = if head.close {
                    // A body delimited by the close ends with the server's FIN, not with a
                    // `Connection: close` it never sent.
                    let cause = if !self.keepalive {
                        // The close the request asked for (`Connection: close`).
                        CloseCause::Local
                    } else if head.status == 101 || head.faulty_framing {
                        // Switched protocols, or framing we will not trust for the next
                        // response: we leave the connection, the server ended nothing.
                        CloseCause::Local
                    } else if head.close_announced {
                        CloseCause::ConnectionClose
                    } else {
                        CloseCause::Fin
                    };
                    self.closed_by_server(ticket, cause);
                    ticket
                } else {
                    self.read_ahead(&mut side, ticket)
                };
                if last + 1 == self.writes.queued_through()
                    && !side.buf.is_empty()
                    && self.cause.get() == CloseCause::Open
                {
                    // Every request answered, and bytes beyond (two responses to one request):
                    // read as the next request's response, they would pair every later answer
                    // with the wrong request. Closed, as curl closes on "excess found".
                    self.detail.set(Some(CloseDetail::Unasked));
                    self.retire(CloseCause::Local);
                    self.end_reading_after(last);
                }
                *self.reader.borrow_mut() = Some(side);
                self.next_turn.set(last + 1);
                for done in ticket + 1..=last {
                    self.turn.wake(done);
                }
                self.turn.wake(last + 1);
                Ok(info)
            }
            Err(failure) => {
                self.counter.add_header_received(failure.header_bytes);
                self.retire(failure.cause);
                self.end_reading_after(ticket);
                Err(self.settle(req, ticket, failure.error))
            }
        }
    }

    /// The outcome of a request `error` kept from its response. A request that went out whole
    /// and was then dropped without the server saying so may have been processed: it is sent
    /// again only if it may be ([`RequestSpec::may_resend`]); a POST fails instead, as Go's
    /// client and RFC 9110 §9.2.2 have it, so the server never sees it twice.
    fn settle(&self, req: &RequestSpec, ticket: u64, error: SendError) -> SendError {
        if error != RETRY && error != BEHIND_TIMEOUT {
            return error;
        }
        // In a batch being written it may have gone whole: a POST is not sent twice.
        let unsaid = ticket < self.writes.taken_through() && !self.server_ended.get();
        if !unsaid || req.may_resend() {
            return error;
        }
        SendError::Failed(match (error, self.cause.get()) {
            // Lost with the request ahead that timed out: the timeout's doing, not the server's.
            (BEHIND_TIMEOUT, _) => ErrorKind::RequestTimeout,
            (_, CloseCause::Reset) => ErrorKind::Reset,
            _ => ErrorKind::ConnectionClosed,
        })
    }

    /// The server ends the connection after response `ticket`: it said `Connection: close`
    /// (`cause` ConnectionClose), or the body runs until its FIN (`cause` Fin).
    fn closed_by_server(&self, ticket: u64, cause: CloseCause) {
        self.server_ended.set(true);
        // A pipelined write may already have hit the close (Fin/Reset); the server's
        // explicit close is the reason behind it.
        if cause == CloseCause::ConnectionClose
            && matches!(self.cause.get(), CloseCause::Fin | CloseCause::Reset)
        {
            self.cause.set(CloseCause::ConnectionClose);
        }
        self.retire(cause);
        self.end_reading_after(ticket);
    }

    /// Completes the responses after `ticket` that are already whole in the buffer, for
    /// their sends to collect; returns the last ticket completed (`ticket` if none).
    fn read_ahead(&self, side: &mut ReadSide, ticket: u64) -> u64 {
        if !self.writes.reads_ahead() {
            return ticket;
        }
        let mut last = ticket;
        let mut arrived = None;
        while last + 1 < self.writes.queued_through() && last + 1 < self.dead_from.get() {
            let Some((info, used)) = HeadMemo::with_shared(|memo| whole_response(memo, &side.buf))
            else {
                break;
            };
            side.buf.advance(used);
            side.response_seen(Some(used));
            last += 1;
            self.counter.add_header_received(info.header_bytes);
            let arrived = *arrived.get_or_insert_with(Instant::now);
            self.ready.put(last, Ready { info, arrived });
            if info.close_requested {
                self.closed_by_server(last, CloseCause::ConnectionClose);
                break;
            }
        }
        last
    }

    /// Queues the request; returns its ticket, the position of its response on the wire, and
    /// whether this send is to write the queue ([`Http1Connection::flush_queued`]): no flush
    /// is under way, which would take it along.
    fn queue_request(&self, req: &RequestSpec) -> Result<(u64, bool), SendError> {
        if self.cause.get() != CloseCause::Open || self.spent() {
            return Err(RETRY);
        }
        let (ticket, head_len) = self.writes.queue(req, self.keepalive);
        self.counter.add_header_sent(head_len as u64);
        Ok((ticket, !self.writes.is_flushing()))
    }

    /// Writes what is queued, request `own` included; `begun`: [`Http1Connection::start_flush`]
    /// already wrote what the socket took, and this writes the rest.
    async fn flush_queued(&self, own: u64, begun: bool) {
        if !begun && !self.start_flush().await {
            return;
        }
        // A flush cut off half-way (dropped send) would corrupt every later request.
        let mut partial = PartialWrite {
            conn: self,
            done: false,
        };
        let flushed = self.writes.write_rest(own).await;
        partial.done = true;
        if let Err(failure) = flushed {
            self.write_failed(failure);
        }
    }

    /// The server closed or reset the connection under our writes. Requests already on the
    /// wire may still be answered, and so may the one cut off mid-write: a server may answer
    /// before it has read the whole request (RFC 9110 §15: a 413 for a body over its limit, a
    /// 401), then close, and its answer waits in the socket ahead of the FIN or RST. The rest
    /// learn the error in `wait_turn`.
    fn write_failed(&self, failure: WriteFailure) {
        let kind = io_error_kind(&failure.error);
        self.retire(match kind {
            ErrorKind::ConnectionClosed => CloseCause::Fin,
            _ => CloseCause::Reset,
        });
        self.write_error.set(Some(kind));
        self.end_reading_after(failure.first_unwritten);
    }

    /// The outcome of a request whose response will never be read. A request that could not
    /// be written on a reused connection met a keep-alive race: nothing of it was processed,
    /// so it may be sent again.
    fn unanswered(&self, ticket: u64) -> SendError {
        match self.write_error.get() {
            Some(kind) if ticket >= self.writes.written_through() => match kind {
                ErrorKind::ConnectionClosed | ErrorKind::Reset if ticket > 0 => RETRY,
                kind => SendError::Failed(kind),
            },
            _ => self.lost(),
        }
    }

    /// The outcome of a written request whose response will not be read: lost with a send
    /// that was dropped ahead of it, or else to the connection's close.
    fn lost(&self) -> SendError {
        match self.abandoned.get() {
            true => BEHIND_TIMEOUT,
            false => RETRY,
        }
    }

    async fn wait_turn(&self, ticket: u64) -> Result<(), SendError> {
        std::future::poll_fn(|cx| {
            if self.ready.has(ticket) {
                return Poll::Ready(Ok(()));
            }
            if ticket >= self.dead_from.get() {
                return Poll::Ready(Err(self.unanswered(ticket)));
            }
            if self.next_turn.get() == ticket {
                return Poll::Ready(Ok(()));
            }
            self.turn.register(ticket, cx.waker());
            Poll::Pending
        })
        .await
    }
}

/// Who writes a queued request ([`Http1Connection::await_writer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// A flush took it along (written, or in the batch being written).
    Taken,
    /// Its own send: no flush is under way.
    Us,
    /// Not yet known: the flush under way may take it, or end without it.
    Pending,
}

/// Retires the connection if a send is dropped (request timeout) after writing its request
/// but before its response was read: the responses behind it can no longer be found.
struct InFlight<'a> {
    conn: &'a Http1Connection,
    ticket: Option<u64>,
    /// The send returned: dropped now, it was not cut off (its `--timeout`, the run's end).
    returned: bool,
    /// Response head bytes read for it whose request is still waiting for its body: counted
    /// if the request is dropped there (a `--timeout` after the head came lost them).
    head_bytes: Cell<u64>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            self.conn.counter.add_header_received(self.head_bytes.get());
            if !self.returned {
                self.conn.abandoned.set(true);
            }
            self.conn.retire(CloseCause::Local);
            self.conn.end_reading_after(ticket);
        }
    }
}

/// Retires the connection if a send is dropped while it flushes queued requests.
struct PartialWrite<'a> {
    conn: &'a Http1Connection,
    done: bool,
}

impl Drop for PartialWrite<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.conn.abandoned.set(true);
            self.conn.retire(CloseCause::Local);
            self.conn
                .end_reading_from(self.conn.writes.written_through());
            // The send waiting to take over (it may be reading) learns the end.
            self.conn.writes.abandon();
        }
    }
}

async fn fill(side: &mut ReadSide) -> io::Result<usize> {
    let ReadSide {
        io,
        plain,
        buf,
        want,
        batch,
        ..
    } = side;
    // Room for the whole batch the kernel waits for, so one read takes it.
    buf.reserve((*want).max(batch.as_ref().map_or(0, BatchWake::read_size)));
    let room = buf.capacity() - buf.len();
    let n = match batch {
        Some(batch) => batch.read(io, buf).await?,
        None if *plain => {
            let mut woken = false;
            std::future::poll_fn(|cx| {
                let read = io.poll_read_plain(cx, buf, woken);
                woken = true;
                read
            })
            .await?
        }
        None => io.read_buf(buf).await?,
    };
    if n == room {
        *want = (*want * 2).min(READ_CHUNK);
    }
    Ok(n)
}

/// Reads one whole response. `reused`: earlier requests went out on this connection, so an
/// end before any byte of this response means the server closed it first (retry, not failure).
/// `due`: responses of its write batch still unread, it included. `heads`: the head bytes read
/// so far, for a request dropped before the body is whole (the result carries them otherwise).
async fn read_response(
    side: &mut ReadSide,
    is_head: bool,
    start: Instant,
    reused: bool,
    due: u64,
    heads: &Cell<u64>,
) -> Result<(ResponseHead, ResponseInfo), ReadFailure> {
    // When the response's first bytes were seen: the time to first byte, and the time it was
    // complete if its body came with them (no clock read of its own after the last read).
    let mut seen = None;
    // The head took more than the read that brought its first bytes.
    let mut head_split = false;
    let mut interim_bytes = 0u64;
    let head = loop {
        if !side.buf.is_empty() {
            seen.get_or_insert_with(Instant::now);
            let parsed = HeadMemo::with_shared(|memo| memo.parse(&side.buf, is_head));
            let broken = |kind| {
                after_interim(
                    protocol_failure(kind),
                    interim_bytes + refused_head(&side.buf),
                )
            };
            match parsed.map_err(broken)? {
                Some(head) if head.is_interim() => {
                    interim_bytes += head.head_len as u64;
                    heads.set(interim_bytes);
                    side.buf.advance(head.head_len);
                    continue;
                }
                Some(head) => break head,
                None if side.buf.len() > crate::protocol::MAX_RESPONSE_HEAD => {
                    // A head that never ends must not grow the buffer without bound.
                    return Err(broken(ErrorKind::Protocol));
                }
                None => {}
            }
        }
        side.head_wait(due);
        let read = fill(side).await;
        let before_response = seen.is_none() && reused;
        head_split = seen.is_some();
        match read {
            Ok(0) if before_response => return Err(closed_failure(RETRY)),
            Ok(0) => {
                let failure = closed_failure(SendError::Failed(ErrorKind::ConnectionClosed));
                return Err(after_interim(failure, interim_bytes));
            }
            Ok(_) => {}
            Err(e) if before_response && io_error_kind(&e) == ErrorKind::Reset => {
                return Err(ReadFailure {
                    error: RETRY,
                    cause: CloseCause::Reset,
                    header_bytes: 0,
                })
            }
            Err(e) => return Err(after_interim(io_failure(&e), interim_bytes)),
        }
    };
    let after_head = (side.buf.len() - head.head_len) as u64;
    let whole = match head.framing {
        BodyFraming::Empty => true,
        BodyFraming::Length(len) => after_head >= len,
        BodyFraming::Chunked | BodyFraming::UntilClose => false,
    };
    let body_bytes = match head.framing {
        BodyFraming::Length(len) if whole => {
            // The body came with the head: one step past both.
            side.buf.advance(head.head_len + len as usize);
            len
        }
        framing => {
            side.buf.advance(head.head_len);
            heads.set(interim_bytes + head.head_len as u64);
            let read = match framing {
                BodyFraming::Empty => Ok(0),
                BodyFraming::Length(len) => read_sized_body(side, len).await,
                BodyFraming::Chunked => read_chunked_body(side).await,
                BodyFraming::UntilClose => read_body_until_close(side).await,
            };
            read.map_err(|failure| ReadFailure {
                header_bytes: interim_bytes + head.head_len as u64,
                ..failure
            })?
        }
    };
    let sized = matches!(head.framing, BodyFraming::Empty | BodyFraming::Length(_));
    let size = usize::try_from(body_bytes)
        .ok()
        .map(|body| head.head_len + body);
    side.response_seen(size.filter(|_| sized && interim_bytes == 0));
    let info = ResponseInfo {
        status: head.status,
        ttfb: seen.map_or(Duration::ZERO, |seen| seen.saturating_duration_since(start)),
        // h1 headers are not compressed: decoded size = encoded size, as h2load counts them.
        header_bytes: interim_bytes + head.head_len as u64,
        body_bytes,
        close_requested: head.close,
        done_at: seen.filter(|_| whole && !head_split),
    };
    Ok((head, info))
}

async fn read_sized_body(side: &mut ReadSide, len: u64) -> Result<u64, ReadFailure> {
    let mut left = len;
    loop {
        let take = left.min(side.buf.len() as u64);
        side.buf.advance(take as usize);
        left -= take;
        if left == 0 {
            return Ok(len);
        }
        read_more_body(side).await?;
    }
}

async fn read_chunked_body(side: &mut ReadSide) -> Result<u64, ReadFailure> {
    let mut body = ChunkedBody::default();
    let mut total = 0;
    loop {
        let fed = body.feed(&side.buf).map_err(protocol_failure)?;
        side.buf.advance(fed.consumed);
        total += fed.data;
        if body.is_done() {
            return Ok(total);
        }
        read_more_body(side).await?;
    }
}

async fn read_body_until_close(side: &mut ReadSide) -> Result<u64, ReadFailure> {
    let mut total = 0;
    loop {
        total += side.buf.len() as u64;
        side.buf.clear();
        side.body_wait();
        match fill(side).await {
            Ok(0) => return Ok(total),
            // Over TLS a FIN without close_notify is rustls's UnexpectedEof: for a body the
            // close delimits, that FIN is its end, as curl and browsers take it (every such
            // response failed as connection_closed).
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(total),
            Ok(_) => {}
            Err(e) => return Err(io_failure(&e)),
        }
    }
}

/// Reads more of a body whose end is known; the connection ending first truncates it.
async fn read_more_body(side: &mut ReadSide) -> Result<(), ReadFailure> {
    side.body_wait();
    match fill(side).await {
        Ok(0) => Err(closed_failure(SendError::Failed(ErrorKind::TruncatedBody))),
        // Over TLS a FIN without close_notify (a server that crashed) is rustls's
        // UnexpectedEof: the body is as truncated as by a plain FIN (it read connection_closed).
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(closed_failure(SendError::Failed(ErrorKind::TruncatedBody)))
        }
        Ok(_) => Ok(()),
        Err(e) => Err(io_failure(&e)),
    }
}

/// The bytes of a response head refused as broken (too long, a bad Content-Length) that began
/// as one, with a status line: they count as header bytes received, so the run is not taken
/// for one whose server never answered in HTTP ("http:// to a TLS port?", exit 1). Up to the
/// head's end, or all that came of it.
fn refused_head(buf: &[u8]) -> u64 {
    if !buf.starts_with(b"HTTP/") {
        return 0;
    }
    let head = &buf[..buf.len().min(crate::protocol::MAX_RESPONSE_HEAD)];
    let end = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(head.len(), |at| at + 4);
    end as u64
}

/// `failure` after interim (1xx) heads of `bytes` had come: they count as header bytes.
fn after_interim(failure: ReadFailure, bytes: u64) -> ReadFailure {
    ReadFailure {
        header_bytes: bytes,
        ..failure
    }
}

fn closed_failure(error: SendError) -> ReadFailure {
    ReadFailure {
        error,
        cause: CloseCause::Fin,
        header_bytes: 0,
    }
}

/// The server's response broke HTTP/1.1: we close the connection (it is not the server's close).
fn protocol_failure(kind: ErrorKind) -> ReadFailure {
    ReadFailure {
        error: SendError::Failed(kind),
        cause: CloseCause::Local,
        header_bytes: 0,
    }
}

fn io_failure(e: &io::Error) -> ReadFailure {
    let kind = io_error_kind(e);
    ReadFailure {
        error: SendError::Failed(kind),
        cause: match kind {
            ErrorKind::ConnectionClosed => CloseCause::Fin,
            _ => CloseCause::Reset,
        },
        header_bytes: 0,
    }
}

impl crate::protocol::Connection for Http1Connection {
    fn send(
        &self,
        req: &RequestSpec,
        start: Instant,
    ) -> impl std::future::Future<Output = Result<ResponseInfo, SendError>> {
        self.send_request(req, start)
    }

    fn accepts_requests(&self) -> bool {
        if self.cause.get() != CloseCause::Open || self.spent() {
            return false;
        }
        // Idle (every response read) and the server spoke: it closed the connection while it
        // sat unused (an idle timeout). Sending on it would fail and be sent again elsewhere,
        // a retry and a reconnect inside the request's latency.
        // Bytes no request asked for: read as the next response, they would answer it wrongly.
        if !self.idle() {
            return true;
        }
        let spoke = self.reader.borrow().as_ref().map(|r| r.io.peer_spoke());
        match spoke {
            Some(Spoke::Closed) => {
                self.count_unread();
                self.retire(CloseCause::Fin);
                self.detail.set(Some(CloseDetail::Idle));
                false
            }
            Some(Spoke::Unasked) => {
                self.count_unread();
                self.retire(CloseCause::Local);
                self.detail.set(Some(CloseDetail::Unasked));
                false
            }
            Some(Spoke::Nothing) | None => true,
        }
    }

    fn close_detail(&self) -> Option<CloseDetail> {
        self.detail.get()
    }

    fn peer_finished(&self) -> bool {
        // While a response is due the reader sees the close itself; idle, or retired (no
        // response due any more), only a peek does.
        let idle = self.cause.get() != CloseCause::Open || self.idle();
        let spoke = self.reader.borrow().as_ref().map(|r| r.io.peer_spoke());
        idle && spoke == Some(Spoke::Closed)
    }

    fn close_cause(&self) -> CloseCause {
        self.cause.get()
    }

    fn wire(&self) -> WireBytes {
        self.counter.snapshot()
    }

    /// Stops accepting requests; the socket closes when the engine drops the connection.
    fn close(&self) {
        self.retire(CloseCause::Local);
    }
}
