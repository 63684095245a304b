//! The request side of [`ConnCore`]: opening streams within the server's limit, handing
//! outcomes to their futures, abandoning streams whose futures were dropped.

use super::super::frame_write::{self as write, code};
use super::super::streams::Stream;
use super::{ConnCore, ConnEnd, PendingBody, MAX_OUT_BACKLOG, MAX_STREAM_ID};
use crate::error::ErrorKind;
use crate::protocol::{CloseCause, RequestSpec, ResponseInfo, RetryReason, SendError};
use std::task::{Context, Poll};
use std::time::Instant;

impl ConnCore {
    /// Opens a stream for `req` and queues its frames, or waits while the server's stream limit
    /// is reached. Fails with a retry when the connection takes no more requests.
    pub fn poll_open(
        &mut self,
        req: &RequestSpec,
        started: Instant,
        cx: &mut Context<'_>,
    ) -> Poll<Result<usize, SendError>> {
        if let Some(refusal) = self.refusal() {
            return Poll::Ready(Err(refusal));
        }
        if self.streams.open() >= self.max_streams || self.out.len() >= MAX_OUT_BACKLOG {
            self.wait_for_room(cx);
            return Poll::Pending;
        }
        let id = self.next_stream_id;
        self.next_stream_id += 2;
        let end_stream = req.body.is_empty();
        let max_frame = self.peer_max_frame;
        let block = self.heads.block(req, self.peer_table_size);
        let block_len = match self.table_update.take() {
            Some(size) => {
                let mut with_update = Vec::with_capacity(block.len() + 4);
                encoder_size_update(size, &mut with_update);
                with_update.extend_from_slice(block);
                write::headers(&mut self.out, id, &with_update, end_stream, max_frame);
                with_update.len()
            }
            None => {
                write::headers(&mut self.out, id, block, end_stream, max_frame);
                block.len()
            }
        };
        self.counter.add_header_sent(block_len as u64);
        let slot = self.streams.insert(Stream {
            id,
            at: started,
            outcome: None,
            waker: None,
            status: 0,
            ttfb_ns: 0,
            header_bytes: 0,
            body_bytes: 0,
            send_window: self.peer_initial_window,
            recv_unacked: 0,
            head_request: req.method == http::Method::HEAD,
            expected_body: super::super::streams::NO_LENGTH,
        });
        if !end_stream {
            self.bodies.push(PendingBody {
                slot,
                id,
                body: req.body.clone(),
                sent: 0,
            });
            self.push_bodies();
        }
        self.wake_driver();
        Poll::Ready(Ok(slot))
    }

    /// Why a new request may not be sent here, as the retry the engine should make.
    fn refusal(&self) -> Option<SendError> {
        if let Some((_, code)) = self.goaway {
            Some(SendError::Retry(RetryReason::Goaway(u64::from(code))))
        } else if let Some(ConnEnd {
            error: Some(ErrorKind::Protocol),
            ..
        }) = self.end
        {
            // The server broke the protocol: a new connection would most likely too, so the
            // request fails with it rather than retrying (a storm against a broken server).
            Some(SendError::Failed(ErrorKind::Protocol))
        } else if self.local_close || self.end.is_some() || self.next_stream_id > MAX_STREAM_ID {
            Some(SendError::Retry(RetryReason::ConnectionClosed))
        } else {
            None
        }
    }

    /// The outcome of the stream in `slot`, once known (the slot is then released).
    pub fn poll_outcome(
        &mut self,
        slot: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<ResponseInfo, SendError>> {
        let Some(stream) = self.streams.get_mut(slot) else {
            return Poll::Ready(Err(SendError::Failed(ErrorKind::ConnectionClosed)));
        };
        if stream.outcome.is_none() {
            match &mut stream.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        let outcome = self.streams.free(slot).and_then(|s| {
            let info = s.response_info();
            s.outcome.map(|o| o.map(|()| info))
        });
        Poll::Ready(outcome.unwrap_or(Err(SendError::Failed(ErrorKind::ConnectionClosed))))
    }

    /// The future of the stream in `slot` was dropped (a request timeout): cancel the stream.
    pub fn abandon(&mut self, slot: usize) {
        let Some(stream) = self.streams.get_mut(slot) else {
            return;
        };
        if stream.outcome.is_none() && self.end.is_none() && !self.quiet {
            write::rst_stream(&mut self.out, stream.id, code::CANCEL);
            self.wake_driver();
            self.stream_closed();
        }
        self.streams.free(slot);
        self.bodies.retain(|b| b.slot != slot);
    }

    /// The server's first SETTINGS: its stream limit, or why the connection ended first.
    pub fn poll_settings(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u32>, ErrorKind>> {
        if self.settings_received {
            return Poll::Ready(Ok(self.first_max_streams));
        }
        if let Some(end) = self.end {
            return Poll::Ready(Err(end.error.unwrap_or(ErrorKind::ConnectionClosed)));
        }
        self.connect_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Whether new requests may be sent.
    pub fn accepts_requests(&self) -> bool {
        self.refusal().is_none()
    }

    /// The server's GOAWAY error code, when it sent one that was not NO_ERROR.
    pub fn goaway_error(&self) -> Option<u64> {
        super::super::conn_state::goaway_error(self.goaway)
    }

    /// The server's GOAWAY ended the connection while no request was in flight (asked after
    /// we have closed it too, as the engine retires it).
    pub fn closed_idle(&self) -> bool {
        self.goaway_idle && self.goaway.is_some()
    }

    /// Why the connection stopped accepting requests.
    pub fn close_cause(&self) -> CloseCause {
        if self.local_close {
            CloseCause::Local
        } else if self.goaway.is_some() {
            CloseCause::Goaway
        } else if let Some(end) = self.end {
            end.cause
        } else if self.next_stream_id > MAX_STREAM_ID {
            CloseCause::Local
        } else {
            CloseCause::Open
        }
    }

    /// The run is over and its streams are about to be dropped with the connection: no
    /// RST_STREAM(CANCEL) for them. Dozens of cancels in one burst read to a server as a
    /// rapid-reset attack (CVE-2023-44487), which `httpvs serve` and nginx answer with GOAWAY
    /// ENHANCE_YOUR_CALM, and the report then blamed the server for failing.
    pub fn quiesce(&mut self) {
        self.quiet = true;
    }

    /// We close the connection (end of run): open streams end, the driver stops.
    pub fn close_locally(&mut self) {
        self.local_close = true;
        self.end(CloseCause::Local, Some(ErrorKind::ConnectionClosed));
    }
}

fn encoder_size_update(size: usize, out: &mut Vec<u8>) {
    crate::protocol::hpack::encoder::size_update(size, out);
}
