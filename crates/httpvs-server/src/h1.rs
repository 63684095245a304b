//! HTTP/1.1 (cleartext or TLS) on hyper: a service whose `GET /` answer is ready without a task or
//! a box, `Connection: close` on the Nth request or `close=1`, and graceful drain on shutdown.

use crate::authority;
use crate::body::Body;
use crate::conn_io::ConnState;
use crate::respond::{self, Answer, Decision, Pending, RequestView};
use crate::totals::{Event, Proto};
use crate::worker::{Answering, WorkerCtx};
use http::header::{ALLOW, CONNECTION, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};

const CLOSE: HeaderValue = HeaderValue::from_static("close");
/// The methods served (all answered alike), for a 405's Allow.
const ALLOWED: HeaderValue =
    HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE");

/// Serves one HTTP/1.1 connection until it closes, idles out, or drains at shutdown.
pub async fn serve<I>(io: I, proto: Proto, ctx: &Arc<WorkerCtx>, state: Arc<ConnState>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = H1Service {
        ctx: ctx.clone(),
        state: state.clone(),
        proto,
    };
    let mut conn = pin!(ctx.h1.serve_connection(TokioIo::new(io), service));
    // Open at the drain deadline, a connection is still answering (idle ones close at once
    // when draining starts).
    let answering = Answering::new(ctx);
    let mut idle = pin!(state.idle(ctx.limits.idle_timeout));
    let mut shutdown = ctx.shutdown.clone();
    let mut draining = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    count_hyper_ending(&e, proto, ctx);
                }
                answering.done();
                return;
            }
            _ = &mut idle => {
                ctx.counters.event(Event::IdleClosed);
                answering.done();
                return;
            }
            () = state.client_gone() => {
                answering.done();
                return;
            }
            _ = crate::worker::stopping(&mut shutdown), if !draining => {
                conn.as_mut().graceful_shutdown();
                draining = true;
            }
        }
    }
}

/// Counts what hyper did on its own when it ended the connection: its header read timeout (the
/// idle timeout, which usually fires before the idle watch's), and the 400, 414 or 431 it writes
/// for a head it cannot parse. A parse error hyper answers nothing to (an internal one) counts
/// as a 400.
fn count_hyper_ending(e: &hyper::Error, proto: Proto, ctx: &WorkerCtx) {
    if e.is_timeout() {
        ctx.counters.event(Event::IdleClosed);
    } else if e.is_parse_too_large() {
        ctx.counters.request(proto);
        let (event, status) = if is_uri_too_long(e) {
            (Event::UriTooLong, 414)
        } else {
            (Event::HeadersTooLarge, 431)
        };
        ctx.counters.event(event);
        ctx.counters.status(status);
    } else if e.is_parse() && !e.is_parse_version_h2() {
        ctx.counters.request(proto);
        ctx.counters.event(Event::BadRequest);
        ctx.counters.status(400);
    }
}

/// Whether hyper's "too large" is its 414 (a request target over 64 KiB, possible only with
/// `max_header_bytes` over about 56 KiB) rather than its 431. hyper names the two kinds apart
/// only in its message, so that is what is compared (on this rare path only); the test
/// `hyper_s_414_is_counted_as_a_414` notices if a hyper release rewords it.
fn is_uri_too_long(e: &hyper::Error) -> bool {
    e.to_string() == "URI too long"
}

struct H1Service {
    ctx: Arc<WorkerCtx>,
    state: Arc<ConnState>,
    proto: Proto,
}

/// The response future: ready at once, or boxed when it reads a body or waits.
pub enum H1Future {
    /// Decided from the head alone.
    Ready(Option<Response<Body>>),
    /// Reads the body and/or waits first.
    Later(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

impl Future for H1Future {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            H1Future::Ready(r) => {
                Poll::Ready(Ok(r.take().unwrap_or_else(|| Response::new(Body::empty()))))
            }
            H1Future::Later(f) => f.as_mut().poll(cx).map(Ok),
        }
    }
}

impl hyper::service::Service<Request<Incoming>> for H1Service {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = H1Future;

    fn call(&self, req: Request<Incoming>) -> H1Future {
        self.ctx.counters.request(self.proto);
        let n = self.state.next_request();
        let last = self
            .ctx
            .limits
            .max_requests_per_conn
            .is_some_and(|max| n >= max);
        let (parts, body) = req.into_parts();
        if parts.method == Method::CONNECT {
            return H1Future::Ready(Some(finish(
                connect_not_allowed(),
                last,
                parts.version,
                &self.ctx,
            )));
        }
        if !host_is_valid(parts.version, &parts.headers) {
            self.ctx.counters.event(Event::BadRequest);
            let text = "one valid Host header is required (RFC 9112 3.2)\n".to_owned();
            let mut answer = respond::error(StatusCode::BAD_REQUEST, text);
            // As nginx does: a client that sends this is not to be trusted with what follows.
            answer.close = true;
            return H1Future::Ready(Some(finish(answer, last, parts.version, &self.ctx)));
        }
        // Origin-form or absolute-form (RFC 9112 §3.2): `GET noslash` read as an authority and
        // was answered 200, while `noslash?size=5` got hyper's own 400.
        if !crate::authority::is_valid_path(parts.uri.path().as_bytes()) {
            self.ctx.counters.event(Event::BadRequest);
            let text = "the request target must begin with / (RFC 9112 3.2.1)\n".to_owned();
            let answer = respond::error(StatusCode::BAD_REQUEST, text);
            return H1Future::Ready(Some(finish(answer, last, parts.version, &self.ctx)));
        }
        let body_empty = hyper::body::Body::is_end_stream(&body);
        let view = RequestView {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            body_empty,
        };
        match respond::decide(&view, &self.ctx.limits, &self.ctx.counters) {
            Decision::Now(mut answer) => {
                // A body refused by its content-length is left unread, which ends the
                // connection: the 413 says so. (hyper drains a small body left by another
                // answer, a 431 or a 400, and keeps the connection.)
                answer.close |=
                    !body_empty && answer.response.status() == StatusCode::PAYLOAD_TOO_LARGE;
                H1Future::Ready(Some(finish(answer, last, parts.version, &self.ctx)))
            }
            Decision::Later(pending) => {
                let ctx = self.ctx.clone();
                let state = self.state.clone();
                let version = parts.version;
                H1Future::Later(Box::pin(async move {
                    let answer = answer_later(*pending, body, body_empty, &ctx, &state).await;
                    finish(answer, last, version, &ctx)
                }))
            }
        }
    }
}

async fn answer_later(
    pending: Pending,
    mut body: Incoming,
    body_empty: bool,
    ctx: &WorkerCtx,
    state: &ConnState,
) -> Answer {
    let mut collector = pending.collector(&ctx.limits, None);
    if !body_empty {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                // A malformed chunked body, or one the client's FIN cut short: 400 and close,
                // as nginx does, never an answer built on part of the body.
                ctx.counters.event(Event::BadRequest);
                let mut answer = respond::error(
                    StatusCode::BAD_REQUEST,
                    "the request body is malformed or incomplete\n".to_owned(),
                );
                answer.close = true;
                return answer;
            };
            if let Ok(data) = frame.into_data() {
                if collector.push(data).is_err() {
                    // The rest of the body is left unread, which ends the connection: the 413
                    // says so (it came without `Connection: close`, then the close).
                    let mut answer = respond::body_too_large(&ctx.limits, &ctx.counters);
                    answer.close = true;
                    return answer;
                }
            }
        }
    }
    if let Some(delay) = pending.plan.delay {
        if !state.delay_while_there(delay).await {
            // The client has gone: `serve` ends the connection, and no answer is written.
            std::future::pending::<()>().await;
        }
    }
    pending.answer(collector.finish())
}

/// Every method but CONNECT gets the same answers; a CONNECT gets 405, as nginx does, and a
/// close: what a client sends next would be a tunnel's bytes, not a request.
fn connect_not_allowed() -> Answer {
    let text = "this server does not tunnel: CONNECT is not allowed\n".to_owned();
    let mut answer = respond::error(StatusCode::METHOD_NOT_ALLOWED, text);
    answer.response.headers_mut().insert(ALLOW, ALLOWED);
    answer.close = true;
    answer
}

/// RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without Host, and to any request
/// with more than one or with one whose value is not a valid authority (HTTP/1.0 may leave it
/// out). One lookup, no allocation.
fn host_is_valid(version: Version, headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (_, Some(_)) => false,
        (Some(host), None) => authority::is_valid(host.as_bytes()),
        (None, None) => version < Version::HTTP_11,
    }
}

fn finish(answer: Answer, last: bool, version: Version, ctx: &WorkerCtx) -> Response<Body> {
    let mut response = answer.response;
    ctx.counters.status(response.status().as_u16());
    if answer.close || last {
        response.headers_mut().insert(CONNECTION, CLOSE);
        if version == Version::HTTP_10 {
            // To an HTTP/1.0 client that asked for keep-alive, hyper adds `keep-alive` to an
            // HTTP/1.1 answer's Connection (it read `close, keep-alive`); one marked 1.0, as it
            // goes out anyway, only closes.
            *response.version_mut() = Version::HTTP_10;
        }
    }
    response
}
