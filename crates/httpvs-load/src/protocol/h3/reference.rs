//! The reference HTTP/3 connection on the h3 crate: requests as h3 request streams over a quinn
//! connection, GOAWAY and H3_REQUEST_REJECTED turned into retries, QUIC statistics from quinn.
//!
//! The load path runs the owned client (`owned.rs`); this one is kept as its correctness reference
//! (the differential test runs both) and for `httpvs trace`, whose frame tap wraps h3-quinn.

use super::classify::{self, StreamFailure, H3_NO_ERROR};
use super::connection::{close_cause_of, quic_stats_of, wire_of};
use super::response::{H3_FRAME_ERROR, H3_MESSAGE_ERROR};
use super::tap::{H3TapObserver, TapCounters, TappedConnection, TappedOpener};
use crate::error::ErrorKind;
use crate::protocol::{
    CloseCause, Connection, QuicStats, RequestSpec, ResponseInfo, SendError, WireBytes,
};
use bytes::{Buf, Bytes};
use h3::client::{RequestStream, SendRequest};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Length of the `:status` pseudo-header name plus its three digits, counted like h2 does.
pub(super) const STATUS_FIELD_BYTES: u64 = ":status".len() as u64 + 3;

/// State shared between the connection handle, its h3 driver task and its 0-RTT watcher.
#[derive(Debug, Default)]
struct Shared {
    /// How the h3 driver saw the connection end, once it did.
    ended: OnceLock<ErrorKind>,
    /// We closed it (end of run).
    closed_locally: AtomicBool,
    /// Still in 0-RTT: the handshake has not confirmed yet.
    early: AtomicBool,
    /// 0-RTT was attempted and the server refused it.
    early_rejected: AtomicBool,
    /// Requests sent while `early` was true.
    early_requests: AtomicU64,
}

/// An open HTTP/3 connection on the h3 crate.
pub struct ReferenceConnection {
    quic: quinn::Connection,
    sender: SendRequest<TappedOpener, Bytes>,
    /// Idle clones of `sender`, reused: a fresh clone costs h3-quinn a boxed stream opener.
    idle_senders: Mutex<Vec<SendRequest<TappedOpener, Bytes>>>,
    tap: Arc<TapCounters>,
    shared: Arc<Shared>,
    driver: tokio::task::AbortHandle,
}

/// A request stream as h3 hands it out.
type H3Stream = RequestStream<super::tap::TappedBidi, Bytes>;

impl ReferenceConnection {
    /// Starts HTTP/3 on an established (or 0-RTT) QUIC connection and spawns its driver task,
    /// showing streams and frames to `observer` if given (`httpvs trace`).
    ///
    /// `zero_rtt` is quinn's acceptance future when the connection is still in 0-RTT.
    pub async fn establish_observed(
        quic: quinn::Connection,
        zero_rtt: Option<quinn::ZeroRttAccepted>,
        observer: Option<Arc<dyn H3TapObserver>>,
    ) -> Result<Self, ErrorKind> {
        if let Some(observer) = &observer {
            observer.quic_connected(&quic);
        }
        let tap = Arc::new(TapCounters::observed(observer));
        let shared = Arc::new(Shared::default());
        // The owned client's limit on a response's field section: with none, a HEADERS frame
        // of 100,000 fields decoded into more than an http::HeaderMap holds, and it panicked.
        let (mut driver, sender) = h3::client::builder()
            .max_field_section_size(super::qpack::MAX_FIELD_SECTION as u64)
            .build::<_, _, Bytes>(TappedConnection::new(quic.clone(), tap.clone()))
            .await
            .map_err(|e| classify::h3_connection_failure(&e, quic.close_reason().as_ref()))?;
        if let Some(accepted) = zero_rtt {
            shared.early.store(true, Ordering::Release);
            let watcher = shared.clone();
            tokio::spawn(async move {
                let accepted = accepted.await;
                watcher.early_rejected.store(!accepted, Ordering::Release);
                watcher.early.store(false, Ordering::Release);
            });
        }
        let driver_shared = shared.clone();
        let driver_quic = quic.clone();
        let driver = tokio::spawn(async move {
            let err = futures_util::future::poll_fn(|cx| driver.poll_close(cx)).await;
            let kind = classify::h3_connection_failure(&err, driver_quic.close_reason().as_ref());
            let _ = driver_shared.ended.set(kind);
        })
        .abort_handle();
        Ok(ReferenceConnection {
            quic,
            sender,
            idle_senders: Mutex::new(Vec::new()),
            tap,
            shared,
            driver,
        })
    }

    /// Turns a request stream failure into a retry or a classified failure.
    fn failure(&self, err: &h3::error::StreamError, stream_id: Option<u64>) -> SendError {
        if self.tap.closed_for_excessive_load() {
            // Our own close, for a frame too large to hold: not the server closing.
            return SendError::Failed(ErrorKind::H3(super::response::H3_EXCESSIVE_LOAD));
        }
        let reason = self.quic.close_reason();
        let failure = classify::stream_failure(err, reason.as_ref());
        let beyond_goaway = match (self.tap.goaway_id(), stream_id) {
            (Some(goaway), Some(id)) => id >= goaway,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let early_rejected = self.shared.early_rejected.load(Ordering::Acquire);
        classify::send_error(failure, beyond_goaway, early_rejected)
    }

    /// A request sender: an idle one if there is one, else a new clone.
    fn idle_sender(&self) -> SendRequest<TappedOpener, Bytes> {
        let idle = self
            .idle_senders
            .lock()
            .ok()
            .and_then(|mut pool| pool.pop());
        idle.unwrap_or_else(|| self.sender.clone())
    }

    /// Keeps a sender for the next request (at most one per stream in flight is ever made).
    fn return_sender(&self, sender: SendRequest<TappedOpener, Bytes>) {
        if let Ok(mut pool) = self.idle_senders.lock() {
            pool.push(sender);
        }
    }

    /// Builds the h3 request head from the shared request spec, as the owned client's
    /// `encode_head` does: a `-H host:` override is the `:authority` (the h3 crate refused a
    /// Host unlike the URI's authority, so the request was never sent), user-agent unless
    /// given, no connection-specific or empty fields.
    fn request_head(req: &RequestSpec) -> Result<http::Request<()>, SendError> {
        let host = req
            .headers
            .iter()
            .find(|(name, _)| name == http::header::HOST);
        let uri = match host {
            Some((_, host)) => {
                let mut parts = req.uri.clone().into_parts();
                parts.authority = Some(
                    http::uri::Authority::try_from(host.as_bytes())
                        .map_err(|_| SendError::Failed(ErrorKind::Protocol))?,
                );
                http::Uri::from_parts(parts).map_err(|_| SendError::Failed(ErrorKind::Protocol))?
            }
            None => req.uri.clone(),
        };
        let mut builder = http::Request::builder().method(req.method.clone()).uri(uri);
        let mut agent = false;
        for (name, value) in &req.headers {
            agent |= name == http::header::USER_AGENT;
            let skipped = name == http::header::HOST
                || crate::protocol::connection_specific(name, value)
                || value.is_empty();
            if !skipped {
                builder = builder.header(name, value);
            }
        }
        if !agent {
            builder = builder.header(http::header::USER_AGENT, crate::protocol::USER_AGENT);
        }
        builder
            .body(())
            .map_err(|_| SendError::Failed(ErrorKind::Protocol))
    }

    /// Sends the body (if any) and finishes the request side of the stream.
    async fn send_body(&self, stream: &mut H3Stream, req: &RequestSpec) -> Result<(), SendError> {
        let id = Some(stream.id().into_inner());
        let sent = async {
            if !req.body.is_empty() {
                stream.send_data(req.body.clone()).await?;
            }
            stream.finish().await
        }
        .await;
        match sent {
            Ok(()) => Ok(()),
            // The server may answer before reading the whole body, then stop our sending side
            // with H3_NO_ERROR (RFC 9114 §4.1): the response still comes.
            Err(e)
                if classify::stream_failure(&e, None) == StreamFailure::StoppedEarly
                    && self.tap.goaway_id().is_none() =>
            {
                Ok(())
            }
            Err(e) => Err(self.failure(&e, id)),
        }
    }

    /// Reads the response head and body of a sent request.
    async fn read_response(
        &self,
        stream: &mut H3Stream,
        start: Instant,
        head_request: bool,
    ) -> Result<ResponseInfo, SendError> {
        let id = Some(stream.id().into_inner());
        let mut response = stream
            .recv_response()
            .await
            .map_err(|e| self.failure(&e, id))?;
        // Interim (1xx) heads come before the final one, as the owned client reads them: the
        // trace reported a 100 or a 103 as the answer. 101 has no place in HTTP/3 (§4.4).
        while response.status().is_informational() {
            if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                return Err(SendError::Failed(ErrorKind::H3(H3_MESSAGE_ERROR)));
            }
            response = stream
                .recv_response()
                .await
                .map_err(|e| self.failure(&e, id))?;
        }
        // The first byte of the final head, as the owned client times it.
        let ttfb = start.elapsed();
        let header_bytes = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().len() + value.len()) as u64)
            .sum::<u64>()
            + STATUS_FIELD_BYTES;
        let length = content_length(response.headers())?;
        let mut body_bytes = 0u64;
        let stream_id = stream.id().into_inner();
        loop {
            let Some(chunk) = stream.recv_data().await.map_err(|e| self.failure(&e, id))? else {
                // h3 says "no more" at trailers, and at an empty DATA frame too, after which
                // it hands out no more of the body (a 2-byte body after a 0-byte frame read
                // as 0 bytes): read on to the FIN, letting the timers run between, and take
                // the body's length from the DATA bytes the tap saw come.
                match self.tap.take_fin(stream_id) {
                    // A FIN inside a frame cut it short, which h3 passes over in silence.
                    Some(end) if end.cut => {
                        return Err(SendError::Failed(ErrorKind::H3(H3_FRAME_ERROR)));
                    }
                    Some(end) => {
                        body_bytes = body_bytes.max(end.data_bytes);
                        break;
                    }
                    None => tokio::task::yield_now().await,
                }
                continue;
            };
            body_bytes += chunk.remaining() as u64;
        }
        // As the owned client judges a body against its content-length (a HEAD's answer, a
        // 204 or a 304 announces one it does not carry).
        let status = response.status().as_u16();
        if let Some(kind) =
            crate::protocol::body_length_error(length, body_bytes, head_request, status)
        {
            return Err(SendError::Failed(kind));
        }
        Ok(ResponseInfo {
            status: response.status().as_u16(),
            ttfb,
            header_bytes,
            body_bytes,
            close_requested: false,
            done_at: None,
        })
    }
}

/// The response's content-length, if it gives one; values that are not one number, or differ,
/// make the response malformed (RFC 9114 §4.1.2), as the owned client has it.
fn content_length(headers: &http::HeaderMap) -> Result<Option<u64>, SendError> {
    let mut length = None;
    for value in headers.get_all(http::header::CONTENT_LENGTH) {
        let n = crate::protocol::parse_content_length(value.as_bytes())
            .ok_or(SendError::Failed(ErrorKind::Protocol))?;
        if length.is_some_and(|l| l != n) {
            return Err(SendError::Failed(ErrorKind::Protocol));
        }
        length = Some(n);
    }
    Ok(length)
}

impl Connection for ReferenceConnection {
    async fn send(&self, req: &RequestSpec, start: Instant) -> Result<ResponseInfo, SendError> {
        let head = Self::request_head(req)?;
        if self.shared.early.load(Ordering::Acquire) {
            self.shared.early_requests.fetch_add(1, Ordering::Relaxed);
        }
        let mut sender = self.idle_sender();
        let opened = sender.send_request(head).await;
        self.return_sender(sender);
        let mut stream = opened.map_err(|e| self.failure(&e, None))?;
        self.send_body(&mut stream, req).await?;
        let head_request = req.method == http::Method::HEAD;
        self.read_response(&mut stream, start, head_request).await
    }

    fn accepts_requests(&self) -> bool {
        self.tap.goaway_id().is_none()
            && self.shared.ended.get().is_none()
            && !self.shared.closed_locally.load(Ordering::Acquire)
            && self.quic.close_reason().is_none()
    }

    fn close_cause(&self) -> CloseCause {
        if self.tap.goaway_id().is_some() {
            return CloseCause::Goaway;
        }
        if self.shared.closed_locally.load(Ordering::Acquire) {
            return CloseCause::Local;
        }
        let ended = self.shared.ended.get().copied().or_else(|| {
            self.quic
                .close_reason()
                .map(|r| classify::connection_failure(&r))
        });
        close_cause_of(ended)
    }

    fn wire(&self) -> WireBytes {
        wire_of(
            &self.quic,
            self.tap.header_sent.load(Ordering::Relaxed),
            self.tap.header_received.load(Ordering::Relaxed),
        )
    }

    fn close(&self) {
        self.shared.closed_locally.store(true, Ordering::Release);
        self.quic
            .close(quinn::VarInt::from_u32(H3_NO_ERROR as u32), b"");
    }

    fn quic_stats(&self) -> Option<QuicStats> {
        let early = self.shared.early_requests.load(Ordering::Relaxed);
        let rejected = self.shared.early_rejected.load(Ordering::Acquire);
        Some(quic_stats_of(&self.quic, early, rejected))
    }
}

impl Drop for ReferenceConnection {
    fn drop(&mut self) {
        // Closing here (not only when the last SendRequest drops) sends CONNECTION_CLOSE at once.
        self.quic
            .close(quinn::VarInt::from_u32(H3_NO_ERROR as u32), b"");
        self.driver.abort();
    }
}
