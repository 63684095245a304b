//! One HTTP/2 connection on the owned codec: a request future opens a stream through the
//! shared core, the driver task does the I/O, and the future collects the stream's outcome.

use super::conn_core::ConnCore;
use super::driver::lock;
use crate::protocol::wire::WireCounter;
use crate::protocol::{CloseCause, CloseDetail, RequestSpec, ResponseInfo, SendError, WireBytes};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::task::JoinHandle;

/// An open HTTP/2 connection (h2c or h2 over TLS) on the owned codec.
pub struct Http2Connection {
    core: Arc<Mutex<ConnCore>>,
    counter: Arc<WireCounter>,
    driver: JoinHandle<()>,
}

impl Http2Connection {
    pub(super) fn new(
        core: Arc<Mutex<ConnCore>>,
        counter: Arc<WireCounter>,
        driver: JoinHandle<()>,
    ) -> Self {
        Http2Connection {
            core,
            counter,
            driver,
        }
    }
}

/// One request on the connection: opens its stream through the core, then collects the
/// stream's outcome. Written out rather than as an `async fn` so that it is a few words (it
/// sits in every stream task of the engine for the whole exchange); dropped early (a request
/// timeout, the end of the run), it cancels the stream so the server stops and the slot is
/// reused.
pub struct SendRequest<'a, 'b> {
    core: &'a Mutex<ConnCore>,
    req: &'b RequestSpec,
    /// When the engine started the send, for the time to first byte.
    started: Instant,
    /// Where it stands: not yet opened, waiting for room, or open in a slot of the core.
    phase: Phase,
}

/// A [`SendRequest`]'s progress (the size of the `Option<usize>` it replaced).
#[derive(Clone, Copy)]
enum Phase {
    /// Not polled yet, or refused.
    Unopened,
    /// Registered with the core as waiting for room (`ConnCore::poll_open` pending).
    Waiting,
    /// Open in this slot.
    Open(usize),
}

impl Future for SendRequest<'_, '_> {
    type Output = Result<ResponseInfo, SendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut core = lock(this.core);
        let slot = match this.phase {
            Phase::Open(slot) => slot,
            Phase::Unopened | Phase::Waiting => match core.poll_open(this.req, this.started, cx) {
                Poll::Pending => {
                    this.phase = Phase::Waiting;
                    return Poll::Pending;
                }
                Poll::Ready(Err(refused)) => {
                    this.phase = Phase::Unopened;
                    return Poll::Ready(Err(refused));
                }
                Poll::Ready(Ok(slot)) => {
                    this.phase = Phase::Open(slot);
                    slot
                }
            },
        };
        let outcome = std::task::ready!(core.poll_outcome(slot, cx));
        this.phase = Phase::Unopened;
        Poll::Ready(outcome)
    }
}

impl Drop for SendRequest<'_, '_> {
    fn drop(&mut self) {
        match self.phase {
            Phase::Open(slot) => lock(self.core).abandon(slot),
            // Its task's waker stays registered, and a closing stream would wake it instead of
            // a request still waiting: the waiters look again (and register afresh).
            Phase::Waiting => lock(self.core).wake_room_waiters(),
            Phase::Unopened => {}
        }
    }
}

impl Drop for Http2Connection {
    fn drop(&mut self) {
        // The driver would otherwise linger until the server notices the idle connection.
        self.driver.abort();
    }
}

impl crate::protocol::Connection for Http2Connection {
    fn send<'a, 'b>(
        &'a self,
        req: &'b RequestSpec,
        start: Instant,
    ) -> impl Future<Output = Result<ResponseInfo, SendError>> + use<'a, 'b> {
        SendRequest {
            core: &self.core,
            req,
            started: start,
            phase: Phase::Unopened,
        }
    }

    fn accepts_requests(&self) -> bool {
        lock(&self.core).accepts_requests()
    }

    fn close_cause(&self) -> CloseCause {
        lock(&self.core).close_cause()
    }

    fn goaway_error(&self) -> Option<u64> {
        lock(&self.core).goaway_error()
    }

    fn close_detail(&self) -> Option<CloseDetail> {
        lock(&self.core).closed_idle().then_some(CloseDetail::Idle)
    }

    fn protocol_breach(&self) -> Option<String> {
        lock(&self.core).protocol_breach()
    }

    fn wire(&self) -> WireBytes {
        self.counter.snapshot()
    }

    fn close(&self) {
        lock(&self.core).close_locally();
        self.driver.abort();
    }

    fn quiesce(&self) {
        lock(&self.core).quiesce();
    }
}
