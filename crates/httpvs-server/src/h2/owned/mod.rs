//! The owned HTTP/2 server path (`--h2-engine owned`): a sans-IO core (`core`: frames, flow
//! control, stream states, HPACK via `httpvs-h2wire` with a dynamic table for response heads)
//! driven by one task per connection that reads, answers every request of the read (`GET /` from
//! a head kept encoded, others through `respond::decide`), and writes all answers of the turn at
//! once.

mod core;
mod field_bytes;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod head;
mod response_head;
mod send;

use self::core::{CoreLimits, Event, ServerCore};
use self::head::RequestHead;
use crate::conn_io::ConnState;
use crate::date::{self, Stamp};
use crate::echo::EchoBudget;
use crate::respond::{self, Answer, BodyCollector, Decision, Pending, RequestView};
use crate::totals::{Event as Count, Proto};
use crate::worker::WorkerCtx;
use bytes::Bytes;
use http::header::DATE;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use httpvs_h2wire::stream_id::StreamIdMap;
use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// Read buffer growth step.
const READ_CHUNK: usize = 32 * 1024;
/// How long an idle connection's closing GOAWAY may take to write.
const GOAWAY_WRITE: std::time::Duration = std::time::Duration::from_millis(100);

/// A request whose answer waits for its body.
struct Collecting {
    pending: Box<Pending>,
    collector: BodyCollector,
    head_only: bool,
}

/// Per-connection state of the shell around the core.
struct Shell<'a> {
    core: ServerCore,
    ctx: &'a WorkerCtx,
    proto: Proto,
    state: &'a ConnState,
    /// The worker's date when the current read or timer turn began.
    date: Stamp,
    collecting: StreamIdMap<Collecting>,
    /// The echo bytes its streams hold, together, until each echo is sent.
    echo: Arc<EchoBudget>,
    delayed: BTreeMap<(Instant, u32), (Answer, bool)>,
    /// When each delayed stream is due, so a reset can drop its answer at once.
    delayed_at: StreamIdMap<Instant>,
}

/// Serves one HTTP/2 connection (preface not yet consumed) until it closes.
pub async fn serve<I>(mut io: I, proto: Proto, ctx: &Arc<WorkerCtx>, state: Arc<ConnState>)
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let limits = &ctx.limits;
    let core = ServerCore::new(CoreLimits {
        max_streams: limits.max_streams,
        max_header_list: u32::try_from(limits.max_header_bytes)
            .unwrap_or(u32::MAX)
            .saturating_add(32 * 64),
        accept_limit: limits.max_requests_per_conn,
        max_early_resets: limits.max_pending_reset_streams,
    });
    let mut shell = Shell {
        core,
        ctx,
        proto,
        state: &state,
        date: date::now(),
        collecting: StreamIdMap::default(),
        echo: Arc::new(EchoBudget::new(&ctx.limits)),
        delayed: BTreeMap::new(),
        delayed_at: StreamIdMap::default(),
    };
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut delay_timer = DelayTimer::default();
    let mut idle = pin!(state.idle(limits.idle_timeout));
    let mut shutdown = ctx.shutdown.clone();
    let mut stopping = false;
    loop {
        // A peer that stops reading blocks the write; the idle watch still ends it.
        tokio::select! {
            flushed = shell.flush(&mut io) => if flushed.is_err() {
                return;
            },
            _ = &mut idle => {
                ctx.counters.event(Count::IdleClosed);
                return;
            }
        }
        if shell.core.is_finished() {
            let _ = io.shutdown().await;
            return;
        }
        if input.capacity() - input.len() < READ_CHUNK / 4 {
            input.reserve(READ_CHUNK);
        }
        let next_delay = shell.delayed.keys().next().map(|&(at, _)| at);
        tokio::select! {
            biased;
            read = io.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if shell.on_read(&mut input).is_err() {
                        if shell.core.bad_preface {
                            // No GOAWAY went out: the peer never spoke HTTP/2.
                            ctx.counters.event(Count::NotHttp);
                        } else if !shell.core.rapid_reset {
                            // The core queued GOAWAY with the error's code.
                            ctx.counters.event(Count::H2ProtocolError);
                            ctx.counters.event(Count::GoAway);
                        }
                        let _ = shell.flush(&mut io).await;
                        return;
                    }
                }
            },
            _ = delay_timer.wait(next_delay) => shell.answer_due(),
            _ = &mut idle => {
                if shell.delayed.is_empty() {
                    ctx.counters.event(Count::IdleClosed);
                    shell.core.go_away();
                    // As nginx does: GOAWAY(NO_ERROR) names the last stream processed before
                    // the close, so the client knows nothing it sent was lost. A peer that
                    // does not read gets the close without it.
                    let _ = tokio::time::timeout(GOAWAY_WRITE, shell.flush(&mut io)).await;
                    return;
                }
                idle.set(state.idle(limits.idle_timeout));
            }
            _ = crate::worker::stopping(&mut shutdown), if !stopping => {
                stopping = true;
                shell.core.go_away();
            }
        }
    }
}

/// Dropped with streams still unanswered after the drain deadline (the worker's runtime
/// dropping what is left), a connection counts them as cut off.
impl Drop for Shell<'_> {
    fn drop(&mut self) {
        self.ctx.count_cut_off(self.core.unanswered_streams());
    }
}

/// The wait for the next delayed answer, kept across loop turns: remade only when that
/// answer's time changes, so a connection inside a delay's last milliseconds (a timerfd,
/// `precise_sleep`) makes one timer per delayed answer, not one per read.
#[derive(Default)]
struct DelayTimer {
    at: Option<Instant>,
    sleep: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
}

impl DelayTimer {
    /// Completes at `at` (never, for `None`).
    async fn wait(&mut self, at: Option<Instant>) {
        if at != self.at {
            self.at = at;
            self.sleep = at.map(|t| {
                Box::pin(crate::precise_sleep::sleep_until(t.into_std()))
                    as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
            });
        }
        match &mut self.sleep {
            Some(sleep) => {
                sleep.as_mut().await;
                // Done: the next call makes a new one, even for the same time.
                self.sleep = None;
                self.at = None;
            }
            None => std::future::pending().await,
        }
    }
}

impl Shell<'_> {
    /// Writes everything queued (and the bodies windows allow) in as few writes as possible.
    async fn flush<I: AsyncWrite + Unpin>(&mut self, io: &mut I) -> std::io::Result<()> {
        if self.core.take_goaway_sent() {
            self.ctx.counters.event(Count::GoAway);
        }
        loop {
            self.core.pump();
            if self.core.out.is_empty() {
                return Ok(());
            }
            io.write_all(&self.core.out).await?;
            io.flush().await?;
            self.core.out.clear();
            if !self.core.wants_pump() {
                return Ok(());
            }
        }
    }

    /// Handles every whole frame in `input`; `Err` when the connection must end.
    fn on_read(&mut self, input: &mut Vec<u8>) -> Result<(), ()> {
        self.refresh_date();
        let mut consumed = 0;
        self.core.begin_batch();
        let result = loop {
            match self.core.next_event(input, &mut consumed) {
                Ok(None) => break Ok(()),
                Err(_) => break Err(()),
                Ok(Some(Event::Request {
                    stream,
                    head,
                    end_stream,
                })) => {
                    self.ctx.counters.request(self.proto);
                    self.state.next_request();
                    // The head passed RFC 9113's field checks as it was decoded (`head.rs`); a
                    // value the slow path would refuse as a `HeaderValue` goes there for its 400.
                    let fast = end_stream
                        && head.method == b"GET"
                        && head.path == b"/"
                        && !head.control_bytes
                        && head.header_bytes <= self.ctx.limits.max_header_bytes;
                    if fast {
                        self.ctx.counters.status(200);
                        self.core.respond_fixed(stream, &self.date);
                    } else {
                        let decided = decide(head, end_stream, self.ctx);
                        self.on_decision(stream, decided, end_stream);
                    }
                }
                Ok(Some(Event::Data {
                    stream,
                    data,
                    end_stream,
                })) => {
                    let chunk = Bytes::copy_from_slice(data);
                    self.on_data(stream, chunk, end_stream);
                }
                Ok(Some(Event::Reset { stream })) => {
                    self.stop_collecting(stream);
                    if let Some(at) = self.delayed_at.remove(&stream) {
                        self.delayed.remove(&(at, stream));
                    }
                }
            }
        };
        if self.core.rapid_reset {
            self.ctx.counters.event(Count::RapidReset);
            self.ctx.counters.event(Count::GoAway);
        }
        for _ in 0..std::mem::take(&mut self.core.refused_streams) {
            self.ctx.counters.event(Count::RefusedStream);
        }
        input.drain(..consumed);
        result
    }

    fn on_decision(&mut self, stream: u32, decided: (Decision, bool), end_stream: bool) {
        let (decision, head_only) = decided;
        match decision {
            Decision::Now(answer) => self.send(stream, answer, head_only),
            Decision::Later(pending) => {
                let collector = pending.collector(&self.ctx.limits, Some(&self.echo));
                let collecting = Collecting {
                    pending,
                    collector,
                    head_only,
                };
                if end_stream {
                    self.finish(stream, collecting);
                } else {
                    self.collecting.insert(stream, collecting);
                }
            }
        }
    }

    fn on_data(&mut self, stream: u32, chunk: Bytes, end_stream: bool) {
        let Some(collecting) = self.collecting.get_mut(&stream) else {
            return; // answered early: the rest of the body is read and dropped
        };
        if collecting.collector.push(chunk).is_err() {
            let head_only = collecting.head_only;
            self.stop_collecting(stream);
            let answer = respond::body_too_large(&self.ctx.limits, &self.ctx.counters);
            return self.send(stream, answer, head_only);
        }
        if end_stream {
            if let Some(collecting) = self.stop_collecting(stream) {
                self.finish(stream, collecting);
            }
        }
    }

    /// Takes a stream out of the collecting set.
    fn stop_collecting(&mut self, stream: u32) -> Option<Collecting> {
        self.collecting.remove(&stream)
    }

    /// The body is complete: answer now or after the delay.
    fn finish(&mut self, stream: u32, collecting: Collecting) {
        let Collecting {
            pending,
            collector,
            head_only,
        } = collecting;
        let answer = pending.answer(collector.finish());
        match pending.plan.delay {
            Some(delay) => {
                let at = Instant::now() + delay;
                self.delayed.insert((at, stream), (answer, head_only));
                self.delayed_at.insert(stream, at);
            }
            None => self.send(stream, answer, head_only),
        }
    }

    /// Takes the worker's current date (a thread-local read, no clock) once per read batch or
    /// timer turn.
    fn refresh_date(&mut self) {
        self.date = date::now();
    }

    fn answer_due(&mut self) {
        self.refresh_date();
        let now = Instant::now();
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, stream), (answer, head_only)) = entry.remove_entry();
            self.delayed_at.remove(&stream);
            self.send(stream, answer, head_only);
        }
    }

    fn send(&mut self, stream: u32, answer: Answer, head_only: bool) {
        let close = answer.close;
        let (parts, body) = answer.response.into_parts();
        self.ctx.counters.status(parts.status.as_u16());
        let date =
            (!parts.headers.contains_key(DATE)).then_some((&b"date"[..], &self.date.text[..]));
        let fields = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .chain(date);
        let status = parts.status.as_u16();
        self.core.respond(stream, status, fields, body, head_only);
        if close {
            self.core.go_away();
        }
    }
}

/// The answer for a request off the fast path, and whether it is a HEAD.
fn decide(head: &RequestHead, end_stream: bool, ctx: &WorkerCtx) -> (Decision, bool) {
    let bad = |text: &str| {
        ctx.counters.event(Count::BadRequest);
        let answer = respond::error(StatusCode::BAD_REQUEST, format!("{text}\n"));
        (Decision::Now(answer), false)
    };
    if head.header_bytes > ctx.limits.max_header_bytes {
        // Counted over every field, kept or not (past the list size they are only counted).
        let answer = respond::headers_too_large(&ctx.limits, &ctx.counters);
        return (Decision::Now(answer), head.method == b"HEAD");
    }
    let Ok(method) = Method::from_bytes(&head.method) else {
        return bad("bad method");
    };
    let Ok(uri) = Uri::try_from(head.path.as_slice()) else {
        return bad("bad path");
    };
    let mut headers = HeaderMap::with_capacity(8);
    for (name, value) in head.fields() {
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        else {
            return bad("bad header");
        };
        headers.append(name, value);
    }
    let head_only = method == Method::HEAD;
    let view = RequestView {
        method: &method,
        uri: &uri,
        headers: &headers,
        body_empty: end_stream,
    };
    (
        respond::decide(&view, &ctx.limits, &ctx.counters),
        head_only,
    )
}
