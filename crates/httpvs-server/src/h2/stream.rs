//! One HTTP/2 stream: decide the answer, send it inline when it is ready, or in a task that reads
//! the body, waits the delay and sends a large body as flow control allows (and ends early when
//! the client resets the stream).

use crate::authority;
use crate::body::{Body, CHUNK};
use crate::conn_io::ConnState;
use crate::date;
use crate::echo::EchoBudget;
use crate::respond::{self, Answer, Decision, Pending, RequestView};
use crate::totals::Proto;
use crate::worker::{Answering, WorkerCtx};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::DATE;
use http::{Method, Request, Response};
use std::sync::Arc;

/// Answers a stream; returns whether the connection should go away after it (`close=1`).
pub fn answer(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    proto: Proto,
    ctx: &Arc<WorkerCtx>,
    state: &Arc<ConnState>,
    echo: &Arc<EchoBudget>,
) -> bool {
    if !authority::request_names_a_valid_one(&request) {
        // Malformed (RFC 9113 §8.1.1), as the owned engine and the h2 crate itself treat it.
        respond.send_reset(Reason::PROTOCOL_ERROR);
        return false;
    }
    ctx.counters.request(proto);
    state.next_request();
    let (parts, body) = request.into_parts();
    let head_only = parts.method == Method::HEAD;
    let view = RequestView {
        method: &parts.method,
        uri: &parts.uri,
        headers: &parts.headers,
        body_empty: body.is_end_stream(),
    };
    match respond::decide(&view, &ctx.limits, &ctx.counters) {
        Decision::Now(answer) => {
            let close = answer.close;
            ctx.counters.status(answer.response.status().as_u16());
            send_small(respond, answer, head_only);
            if !body.is_end_stream() {
                tokio::spawn(drain(body));
            }
            close
        }
        Decision::Later(pending) => {
            let close = pending.plan.close;
            let ctx = ctx.clone();
            let state = state.clone();
            let echo = echo.clone();
            tokio::spawn(async move {
                let answering = Answering::new(&ctx);
                // A stream the client resets stops here, as on the owned engine: a reset delayed
                // stream neither keeps a task nor holds the connection open until its delay ends.
                let (answer, unread) = tokio::select! {
                    answered = answer_later(*pending, body, &ctx, &state, &echo) => answered,
                    _ = std::future::poll_fn(|cx| respond.poll_reset(cx)) => {
                        answering.done();
                        return;
                    }
                };
                ctx.counters.status(answer.response.status().as_u16());
                send(respond, answer, head_only).await;
                answering.done();
                if let Some(body) = unread {
                    drain(body).await;
                }
            });
            close
        }
    }
}

/// Sends a response whose body is small enough to hand to h2 at once.
fn send_small(mut respond: SendResponse<Bytes>, answer: Answer, head_only: bool) {
    let (mut parts, mut body) = answer.response.into_parts();
    add_date(&mut parts.headers);
    let end = head_only || body.is_empty();
    let Ok(mut stream) = respond.send_response(Response::from_parts(parts, ()), end) else {
        return;
    };
    if !end {
        if let Some(chunk) = body.next_chunk(usize::MAX) {
            let _ = stream.send_data(chunk, true);
        }
    }
}

/// Reads the body and waits; returns the answer, and the body when it was left unread (413).
async fn answer_later(
    pending: Pending,
    mut body: RecvStream,
    ctx: &WorkerCtx,
    state: &ConnState,
    echo: &Arc<EchoBudget>,
) -> (Answer, Option<RecvStream>) {
    let mut collector = pending.collector(&ctx.limits, Some(echo));
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else { break };
        let _ = body.flow_control().release_capacity(chunk.len());
        if collector.push(chunk).is_err() {
            return (
                respond::body_too_large(&ctx.limits, &ctx.counters),
                Some(body),
            );
        }
    }
    if let Some(delay) = pending.plan.delay {
        state.delay(delay).await;
    }
    (pending.answer(collector.finish()), None)
}

/// Most request body bytes read and dropped after an early answer (413, 431, 400).
const DRAIN_LIMIT: usize = 1 << 20;

/// Reads and drops the rest of a body answered early, so the stream ends cleanly instead of with
/// RST_STREAM(CANCEL), which clients report as an error even after a complete response.
async fn drain(mut body: RecvStream) {
    let mut seen = 0;
    while seen < DRAIN_LIMIT {
        match body.data().await {
            Some(Ok(chunk)) => {
                seen += chunk.len();
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            _ => return,
        }
    }
}

/// Sends a response of any size, chunk by chunk as the peer's flow-control window opens.
async fn send(mut respond: SendResponse<Bytes>, answer: Answer, head_only: bool) {
    let (parts, mut body) = answer.response.into_parts();
    if head_only || body.len() <= CHUNK as u64 {
        return send_small(
            respond,
            Answer {
                response: Response::from_parts(parts, body),
                close: false,
            },
            head_only,
        );
    }
    let mut parts = parts;
    add_date(&mut parts.headers);
    let Ok(mut stream) = respond.send_response(Response::from_parts(parts, ()), false) else {
        return;
    };
    let _ = send_body(&mut stream, &mut body).await;
}

/// The `date` hyper writes on HTTP/1.1, unless the query set one.
fn add_date(headers: &mut http::HeaderMap) {
    headers.entry(DATE).or_insert_with(date::header_value);
}

async fn send_body(stream: &mut SendStream<Bytes>, body: &mut Body) -> Result<(), h2::Error> {
    while !body.is_empty() {
        stream.reserve_capacity(CHUNK.min(body.len() as usize));
        let granted = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(granted) => granted?,
            None => return Ok(()),
        };
        if granted == 0 {
            continue;
        }
        if let Some(chunk) = body.next_chunk(granted) {
            stream.send_data(chunk, body.is_empty())?;
        }
    }
    Ok(())
}
