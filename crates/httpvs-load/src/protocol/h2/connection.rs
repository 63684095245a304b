//! One HTTP/2 connection on the owned codec: a request future opens a stream through the
//! shared core, the driver task does the I/O, and the future collects the stream's outcome.

use super::conn_core::ConnCore;
use super::driver::lock;
use crate::protocol::wire::WireCounter;
use crate::protocol::{CloseCause, RequestSpec, ResponseInfo, SendError, WireBytes};
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
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

    async fn send_request(&self, req: &RequestSpec) -> Result<ResponseInfo, SendError> {
        let started = Instant::now();
        let slot = poll_fn(|cx| lock(&self.core).poll_open(req, started, cx)).await?;
        let mut stream = OpenStream {
            core: &self.core,
            slot,
            done: false,
        };
        let outcome = poll_fn(|cx| lock(&self.core).poll_outcome(slot, cx)).await;
        stream.done = true;
        outcome
    }
}

/// A sent stream whose outcome is not collected yet; dropped early (a request timeout), it
/// cancels the stream so the server stops and the slot is reused.
struct OpenStream<'a> {
    core: &'a Mutex<ConnCore>,
    slot: usize,
    done: bool,
}

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        if !self.done {
            lock(self.core).abandon(self.slot);
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
    fn send(
        &self,
        req: &RequestSpec,
    ) -> impl std::future::Future<Output = Result<ResponseInfo, SendError>> {
        self.send_request(req)
    }

    fn accepts_requests(&self) -> bool {
        lock(&self.core).accepts_requests()
    }

    fn close_cause(&self) -> CloseCause {
        lock(&self.core).close_cause()
    }

    fn wire(&self) -> WireBytes {
        self.counter.snapshot()
    }

    fn close(&self) {
        lock(&self.core).close_locally();
        self.driver.abort();
    }
}
