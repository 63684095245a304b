//! One HTTP/2 connection on the `h2` crate's client, kept as the correctness reference for
//! the owned codec: streams up to the server's limit, body flow control, and the mapping of
//! GOAWAY / RST_STREAM / I/O failures to retries and kinds.

use super::conn_state::{connection_error_kind, ConnState};
use super::request_template::TemplateCache;
use crate::error::ErrorKind;
use crate::protocol::tcp::io_error_kind;
use crate::protocol::wire::WireCounter;
use crate::protocol::{CloseCause, RequestSpec, ResponseInfo, RetryReason, SendError, WireBytes};
use bytes::Bytes;
use http::HeaderMap;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;

/// `:status` and its three digits, as HPACK decodes them (h2load counts name + value).
const STATUS_PSEUDO_HEADER_BYTES: u64 = 7 + 3;

/// An open HTTP/2 connection (h2c or h2 over TLS). The `h2` connection itself runs as a
/// separate task (`driver`); this handle opens streams on it.
pub struct ReferenceConnection {
    sender: h2::client::SendRequest<Bytes>,
    state: Arc<ConnState>,
    counter: Arc<WireCounter>,
    driver: JoinHandle<()>,
    templates: RefCell<TemplateCache>,
}

impl ReferenceConnection {
    pub(super) fn new(
        sender: h2::client::SendRequest<Bytes>,
        state: Arc<ConnState>,
        counter: Arc<WireCounter>,
        driver: JoinHandle<()>,
    ) -> Self {
        ReferenceConnection {
            sender,
            state,
            counter,
            driver,
            templates: RefCell::new(TemplateCache::default()),
        }
    }

    async fn send_request(
        &self,
        req: &RequestSpec,
        start: Instant,
    ) -> Result<ResponseInfo, SendError> {
        let head = self.templates.borrow_mut().request(req);
        let sender = self.sender.clone();
        // Waits while the server's MAX_CONCURRENT_STREAMS is reached.
        let mut sender = sender.ready().await.map_err(|e| self.unsent(&e))?;
        let end_of_stream = req.body.is_empty();
        let (response, mut body_tx) = sender
            .send_request(head, end_of_stream)
            .map_err(|e| self.unsent(&e))?;
        let stream_id = u32::from(response.stream_id());
        if !end_of_stream {
            // Buffered by h2 and sent as the server's flow-control window allows.
            body_tx
                .send_data(req.body.clone(), true)
                .map_err(|e| self.failed(&e, stream_id))?;
        }
        let response = response.await.map_err(|e| self.failed(&e, stream_id))?;
        let ttfb = start.elapsed();
        let status = response.status().as_u16();
        let mut header_bytes = STATUS_PSEUDO_HEADER_BYTES + decoded_size(response.headers());
        let mut body = response.into_body();
        let mut body_bytes = 0u64;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| self.failed(&e, stream_id))?;
            body_bytes += chunk.len() as u64;
            // Hand the window back at once: we only count the bytes.
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body
            .trailers()
            .await
            .map_err(|e| self.failed(&e, stream_id))?;
        header_bytes += trailers.as_ref().map_or(0, decoded_size);
        Ok(ResponseInfo {
            status,
            ttfb,
            header_bytes,
            body_bytes,
            close_requested: false,
            done_at: None,
        })
    }

    /// An error before the request got a stream: the server never saw it.
    fn unsent(&self, e: &h2::Error) -> SendError {
        if (e.is_go_away() && e.is_remote()) || self.state.goaway().is_some() {
            let code = self
                .state
                .goaway()
                .map(|(_, code)| code)
                .or_else(|| e.reason().map(u32::from));
            SendError::Retry(RetryReason::Goaway(code.map_or(0, u64::from)))
        } else if e.is_io() || self.state.end().is_some() {
            SendError::Retry(RetryReason::ConnectionClosed)
        } else {
            SendError::Failed(connection_error_kind(e))
        }
    }

    /// An error on stream `stream_id` after it was sent.
    fn failed(&self, e: &h2::Error, stream_id: u32) -> SendError {
        stream_error(e, stream_id, self.state.goaway())
    }
}

/// Classifies a stream's error. `goaway`: the server's last stream id and code, if it sent one.
pub fn stream_error(e: &h2::Error, stream_id: u32, goaway: Option<(u32, u32)>) -> SendError {
    if let Some(io) = e.get_io() {
        return SendError::Failed(io_error_kind(io));
    }
    let code = e.reason().map_or(0, |r| u64::from(u32::from(r)));
    if e.is_reset() && e.is_remote() {
        return if e.reason() == Some(h2::Reason::REFUSED_STREAM) {
            SendError::Retry(RetryReason::Refused)
        } else {
            SendError::Failed(ErrorKind::StreamReset(code))
        };
    }
    if e.is_go_away() && e.is_remote() {
        // Streams above the last id were never processed (RFC 9113 §6.8): safe to resend.
        return match goaway {
            Some((last, _)) if stream_id <= last => SendError::Failed(ErrorKind::Goaway(code)),
            _ => SendError::Retry(RetryReason::Goaway(code)),
        };
    }
    SendError::Failed(ErrorKind::Protocol)
}

/// Decoded header bytes: names plus values, as h2load's `bytes_head_decomp` counts them.
fn decoded_size(headers: &HeaderMap) -> u64 {
    headers
        .iter()
        .map(|(name, value)| (name.as_str().len() + value.len()) as u64)
        .sum()
}

impl Drop for ReferenceConnection {
    fn drop(&mut self) {
        // The driver would otherwise linger until the server notices the idle connection.
        self.driver.abort();
    }
}

impl crate::protocol::Connection for ReferenceConnection {
    fn send(
        &self,
        req: &RequestSpec,
        start: Instant,
    ) -> impl std::future::Future<Output = Result<ResponseInfo, SendError>> {
        self.send_request(req, start)
    }

    fn accepts_requests(&self) -> bool {
        self.state.accepts_requests()
    }

    fn close_cause(&self) -> CloseCause {
        self.state.close_cause()
    }

    fn goaway_error(&self) -> Option<u64> {
        self.state.goaway_error()
    }

    fn wire(&self) -> WireBytes {
        self.counter.snapshot()
    }

    fn close(&self) {
        self.state.close_locally();
        self.driver.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_size_counts_names_and_values() {
        let mut headers = HeaderMap::new();
        headers.insert("server", "nginx".parse().unwrap());
        headers.insert("content-length", "17".parse().unwrap());
        assert_eq!(decoded_size(&headers), 6 + 5 + 14 + 2);
    }
}
