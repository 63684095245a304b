//! HTTP/3 on quinn + h3: same answers and knobs as TCP. A connection with no request in progress
//! and no stream traffic for the idle timeout is closed (keep-alive pings keep one with a request
//! in progress open; QUIC's idle timeout ends one whose peer vanished; a request whose client
//! stalls its head, body or reading for the idle timeout is cancelled); GOAWAY (with the next
//! stream id, RFC 9114 §5.2) after N requests, on `close=1` and at shutdown; a client that
//! vanishes only ends its own tasks.

use crate::authority;
use crate::body::CHUNK;
use crate::date;
use crate::echo::EchoBudget;
use crate::respond::{self, Answer, Decision, RequestView};
use crate::totals::{Event, Proto};
use crate::worker::{Answering, ConnSlot, WorkerCtx};
use bytes::{Buf, Bytes};
use futures_util::FutureExt;
use h3::server::{Connection, RequestStream};
use http::header::DATE;
use http::{Method, Response};
use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

mod guard;

type H3Conn = Connection<guard::Guarded, Bytes>;
type H3Stream = RequestStream<guard::GuardedBidi<Bytes>, Bytes>;

/// The connection-level receive window (QUIC flow control) the server grants a client.
const CONNECTION_RECEIVE_WINDOW: u32 = 16 << 20;

/// QUIC transport settings from the limits.
pub fn transport(limits: &crate::config::Limits) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(limits.max_streams.into());
    let (idle, every) = match quinn::IdleTimeout::try_from(limits.idle_timeout) {
        Ok(idle) => (idle, limits.idle_timeout),
        Err(_) => (
            quinn::IdleTimeout::from(quinn::VarInt::from_u32(30_000)),
            Duration::from_secs(30),
        ),
    };
    // QUIC's idle timeout then ends only connections whose peer stopped answering (it never
    // acknowledges the pings); `idle` below ends live ones with nothing in progress.
    t.max_idle_timeout(Some(idle));
    t.keep_alive_interval(Some(every / 3));
    // What one connection's client may have sent and the server not yet read, all streams
    // together: quinn's default is unbounded, so each stream could park its own window (1.25
    // MB): 128 endless bodies held 200 MB a connection, and the QPACK streams the h3 crate
    // never reads held 2.6 MB each. 16 MiB still carries a gigabit over 100 ms.
    t.receive_window(quinn::VarInt::from_u32(CONNECTION_RECEIVE_WINDOW));
    t.congestion_controller_factory(congestion_like_kernel_tcp());
    loss_detection_like_kernel_tcp(&mut t);
    t
}

/// Loss detection as the kernel's TCP runs it once it has seen reordering (RACK, RFC 8985: by
/// time alone, with a quarter of an RTT of slack), not quinn's fixed RFC 9002 defaults (3
/// packets, 9/8 RTT), which adaptive stacks (Linux TCP, quiche, Chrome) leave once reordering
/// shows. Under jitter, which reorders packets as the kernel's netem does, the defaults took
/// reordering for loss and cut the window: 64 KiB answers over h3 ran at 30 req/s where h2 ran
/// at 110 (20 ms + 2 ms jitter, 0.1% loss), 17 where h2 ran at 290 (10 ms + 5 ms jitter); with
/// these, 142 and 116. Under random loss alone it costs h3 about a tenth (5% loss: 61 against
/// 68 req/s), where the kernel's TCP would still be on its packet threshold. The load client's
/// `protocol::h3::transport_config` sets the same.
fn loss_detection_like_kernel_tcp(t: &mut quinn::TransportConfig) {
    t.packet_threshold(u32::MAX);
    t.time_threshold(1.25);
}

/// quinn's controller of the family this host's TCP runs (`bbr`, `reno`, else Cubic).
///
/// The h1/h2 answers go out under the kernel's choice; h3 answers under quinn's default Cubic
/// would compare controllers, not protocols: under random loss Cubic holds ~1.2/sqrt(loss)
/// packets in flight, so with the kernel on BBR, 64 KiB answers over h3 ran 20-50x slower than
/// over h2 at 5% loss. The load client's `protocol::h3::CongestionControl` is the twin.
fn congestion_like_kernel_tcp() -> Arc<dyn quinn::congestion::ControllerFactory + Send + Sync> {
    let kernel = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control");
    match kernel.as_deref().map(str::trim) {
        Ok(name) if name.starts_with("bbr") => Arc::new(quinn::congestion::BbrConfig::default()),
        Ok("reno") => Arc::new(quinn::congestion::NewRenoConfig::default()),
        _ => Arc::new(quinn::congestion::CubicConfig::default()),
    }
}

/// Accepts QUIC connections until shutdown.
pub async fn accept_loop(endpoint: quinn::Endpoint, ctx: Arc<WorkerCtx>) {
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => return,
            },
            _ = crate::worker::stopping(&mut shutdown) => {
                endpoint.set_server_config(None);
                return;
            }
        };
        let Some(slot) = ctx.admit() else {
            incoming.refuse();
            continue;
        };
        tokio::spawn(serve_connection(incoming, ctx.clone(), slot));
    }
}

async fn serve_connection(incoming: quinn::Incoming, ctx: Arc<WorkerCtx>, _slot: ConnSlot) {
    let connecting = tokio::time::timeout(ctx.handshake_timeout(), incoming).await;
    let quic = match connecting {
        Ok(Ok(quic)) => quic,
        Ok(Err(quinn::ConnectionError::TimedOut)) | Err(_) => {
            ctx.counters.event(Event::IdleClosed);
            return;
        }
        Ok(Err(_)) => {
            ctx.counters.event(Event::QuicHandshakeFailed);
            return;
        }
    };
    ctx.counters.connection(Proto::H3);
    if serve_h3(quic, &ctx).await {
        ctx.counters.event(Event::IdleClosed);
    }
}

/// Serves HTTP/3 on `quic` until it ends; true when the idle watch or QUIC's idle timeout (both
/// the server's `idle_timeout`) ended it.
async fn serve_h3(quic: quinn::Connection, ctx: &Arc<WorkerCtx>) -> bool {
    let mut builder = h3::server::builder();
    let max_field_section = ctx.limits.max_header_bytes as u64 + 32 * 64;
    builder.max_field_section_size(max_field_section);
    // QPACK's Huffman can make a field section's encoding longer than the section (up to 30
    // bits a byte): up to 4x the limit is read and answered 431; past that, refused unread.
    let guarded = guard::Guarded::new(quic.clone(), 4 * max_field_section);
    let Ok(mut conn) = builder.build(guarded).await else {
        return false;
    };
    let mut shutdown = ctx.shutdown.clone();
    let (close_tx, mut close_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut accepted: u64 = 0;
    let mut goaway_sent = false;
    let in_progress = Arc::new(AtomicU32::new(0));
    // The echo bytes the connection's requests hold, together, until each echo is sent.
    let echo = Arc::new(EchoBudget::new(&ctx.limits));
    let mut idle = pin!(idle(&quic, &in_progress, ctx.limits.idle_timeout));
    loop {
        let resolver = tokio::select! {
            r = conn.accept() => match r {
                Ok(Some(resolver)) => resolver,
                Ok(None) => {
                    // Past our GOAWAY, every request answered: but quinn drops what a stream
                    // has not yet sent when its connection closes, and dropping `conn` closes
                    // it at once (the last answers of a --max-requests-per-conn connection
                    // were lost, the client reading connection_closed). The client closes
                    // once it has them; one that does not is left to the idle watch, or, at
                    // the stop, given a moment.
                    let stop_flush = async {
                        crate::worker::stopping(&mut shutdown).await;
                        tokio::time::sleep(STOP_FLUSH).await;
                    };
                    tokio::select! {
                        _ = quic.closed() => {}
                        _ = &mut idle => quic.close(H3_NO_ERROR, b""),
                        () = stop_flush => {}
                    }
                    return false;
                }
                Err(e) => {
                    if closed_for_violation(&e) {
                        ctx.counters.event(Event::H3ProtocolError);
                    }
                    // Asked now: once the h3 connection is dropped, the reason reads
                    // LocallyClosed.
                    return timed_out(&quic);
                }
            },
            _ = &mut idle => {
                quic.close(H3_NO_ERROR, b"idle");
                return true;
            }
            Some(()) = close_rx.recv(), if !goaway_sent => {
                go_away(&mut conn, ctx, &mut goaway_sent).await;
                continue;
            }
            _ = crate::worker::stopping(&mut shutdown), if !goaway_sent => {
                go_away(&mut conn, ctx, &mut goaway_sent).await;
                continue;
            }
        };
        accepted += 1;
        let over = goaway_sent;
        let task_ctx = ctx.clone();
        let close_tx = close_tx.clone();
        let in_progress = in_progress.clone();
        let echo = echo.clone();
        tokio::spawn(async move {
            let answering = Answering::new(&task_ctx);
            // A head that does not come whole within the idle timeout is dropped (its stream
            // closed), as HTTP/1.1's header read is bounded (slowloris); until it has come the
            // request is not in progress, so a stalled one leaves its connection to the idle
            // watch.
            let resolving = stalled_after(task_ctx.limits.idle_timeout, resolver.resolve_request());
            let Some(resolved) = resolving.await else {
                return answering.done();
            };
            let _busy = InProgress::new(in_progress);
            let (request, mut stream) = match resolved {
                Ok(resolved) => resolved,
                // The h3 crate has answered 431 itself (over max_field_section_size).
                Err(h3::error::StreamError::HeaderTooBig { .. }) => {
                    task_ctx.counters.request(Proto::H3);
                    task_ctx.counters.event(Event::HeadersTooLarge);
                    task_ctx.counters.status(431);
                    answering.done();
                    return;
                }
                Err(_) => return answering.done(),
            };
            if over {
                // h3 lets through the stream whose id our GOAWAY names; RFC 9114 says it was not processed.
                stream.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
                return answering.done();
            }
            answer(request, stream, &task_ctx, close_tx, &echo).await;
            answering.done();
        });
        let last = ctx
            .limits
            .max_requests_per_conn
            .is_some_and(|n| accepted >= n);
        if last && !goaway_sent {
            go_away(&mut conn, ctx, &mut goaway_sent).await;
        }
    }
}

/// How long a connection done with its requests at the stop waits for the client to close it,
/// so its last answers can leave.
const STOP_FLUSH: std::time::Duration = std::time::Duration::from_millis(200);

/// The HTTP/3 error code for a close without error (RFC 9114 §8.1).
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);

/// A request in progress on a connection: from its head's arrival to its answer's end (or the
/// stream's failure), the connection is not idle however long its `delay` or body takes.
struct InProgress(Arc<AtomicU32>);

impl InProgress {
    fn new(count: Arc<AtomicU32>) -> InProgress {
        count.fetch_add(1, Relaxed);
        InProgress(count)
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Resolves once the connection has had no request in progress and no stream traffic (nor a
/// peer's PING) for `timeout`, checked in quarter steps like the TCP idle watch. The server's
/// own keep-alive pings and the acknowledgements they draw are not activity.
async fn idle(quic: &quinn::Connection, in_progress: &AtomicU32, timeout: Duration) {
    let activity = || {
        let stats = quic.stats();
        let (rx, tx) = (stats.frame_rx, stats.frame_tx);
        rx.stream + rx.ping + rx.reset_stream + rx.stop_sending + tx.stream
    };
    crate::conn_io::quiet_for(timeout, activity, || in_progress.load(Relaxed) > 0).await;
}

/// Whether the h3 crate closed the connection with an error code: the client broke RFC 9114
/// (a second SETTINGS, a frame where none may come, a broken control stream).
fn closed_for_violation(e: &h3::error::ConnectionError) -> bool {
    use h3::error::{Code, ConnectionError, LocalError};
    matches!(
        e,
        ConnectionError::Local {
            error: LocalError::Application { code, .. },
            ..
        } if *code != Code::H3_NO_ERROR
    )
}

fn timed_out(quic: &quinn::Connection) -> bool {
    matches!(quic.close_reason(), Some(quinn::ConnectionError::TimedOut))
}

async fn go_away(conn: &mut H3Conn, ctx: &WorkerCtx, sent: &mut bool) {
    // shutdown(1) names the next stream id, so the last accepted one counts as processed.
    let _ = conn.shutdown(1).await;
    ctx.counters.event(Event::GoAway);
    *sent = true;
}

/// Answers one request; tells the connection through `close_tx` when it asks for `close=1`.
async fn answer(
    request: http::Request<()>,
    mut stream: H3Stream,
    ctx: &WorkerCtx,
    close_tx: tokio::sync::mpsc::UnboundedSender<()>,
    echo: &Arc<EchoBudget>,
) {
    if !authority::request_names_a_valid_one(&request) {
        // Malformed (RFC 9114 §4.1.2), as the h3 crate treats an authority it cannot parse.
        stream.stop_stream(h3::error::Code::H3_MESSAGE_ERROR);
        stream.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
        return;
    }
    ctx.counters.request(Proto::H3);
    let head_only = request.method() == Method::HEAD;
    let view = RequestView {
        method: request.method(),
        uri: request.uri(),
        headers: request.headers(),
        body_empty: respond::content_length(request.headers()).unwrap_or(0) == 0
            && matches!(*request.method(), Method::GET | Method::HEAD),
    };
    let answer = match respond::decide(&view, &ctx.limits, &ctx.counters) {
        Decision::Now(answer) => answer,
        Decision::Later(pending) => {
            let mut collector = pending.collector(&ctx.limits, Some(echo));
            let mut too_large = false;
            loop {
                // A body that stops arriving for the idle timeout ends the request, as a
                // stalled upload ends an HTTP/1.1 connection.
                let Some(next) = stalled_after(ctx.limits.idle_timeout, stream.recv_data()).await
                else {
                    cancel(&mut stream);
                    return;
                };
                let mut chunk = match next {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break,
                    // The client reset its request: nothing to answer (it read as a body
                    // complete, and a `?delay=` then held the stream to its end).
                    Err(_) => {
                        cancel(&mut stream);
                        return;
                    }
                };
                let bytes = chunk.copy_to_bytes(chunk.remaining());
                if collector.push(bytes).is_err() {
                    too_large = true;
                    break;
                }
            }
            if too_large {
                respond::body_too_large(&ctx.limits, &ctx.counters)
            } else {
                if let Some(delay) = pending.plan.delay {
                    crate::precise_sleep::sleep(delay).await;
                }
                pending.answer(collector.finish())
            }
        }
    };
    let close = answer.close;
    let status = answer.response.status().as_u16();
    // Counted once quinn takes the head: a stream the client stopped first (its `--timeout`
    // gave up on a `delay=`) got no answer, and is in `requests` only, as h1 and h2 count a
    // request reset before its answer. The h3 crate does not tell a server of STOP_SENDING
    // before it writes.
    let idle_timeout = ctx.limits.idle_timeout;
    let _ = send(
        &mut stream,
        answer,
        head_only,
        || ctx.counters.status(status),
        idle_timeout,
    )
    .await;
    // A request answered without reading its body (GET, HEAD) usually has its FIN here already:
    // take it, so dropping the stream does not send STOP_SENDING (a frame per request that both
    // sides pay for). A client still sending (a body over the limit, answered 413) is asked to
    // stop with H3_NO_ERROR, as RFC 9114 §4.1 has it: quinn's drop would say 0, which is no
    // HTTP/3 code, and a client may take it for a failure and drop the answer. (With nothing of
    // the body waiting, the read is pending and h3-quinn cannot stop its stream: the drop's 0
    // it is; `guard::GuardedBidi` keeps that from panicking.)
    if !matches!(stream.recv_data().now_or_never(), Some(Ok(None))) {
        stream.stop_sending(h3::error::Code::H3_NO_ERROR);
    }
    if close {
        let _ = close_tx.send(());
    }
}

/// Sends the answer. A client that grants no flow-control credit for the idle timeout (it
/// reads nothing) has the stream reset, as HTTP/1.1 closes a connection whose client stopped
/// reading.
async fn send(
    stream: &mut H3Stream,
    answer: Answer,
    head_only: bool,
    head_taken: impl FnOnce(),
    idle_timeout: Duration,
) -> Result<(), h3::error::StreamError> {
    let (mut parts, mut body) = answer.response.into_parts();
    // The `date` hyper writes on HTTP/1.1, unless the query set one.
    parts.headers.entry(DATE).or_insert_with(date::header_value);
    stream
        .send_response(Response::from_parts(parts, ()))
        .await?;
    head_taken();
    if !head_only {
        while let Some(chunk) = body.next_chunk(CHUNK) {
            match stalled_after(idle_timeout, stream.send_data(chunk)).await {
                Some(sent) => sent?,
                None => {
                    cancel(stream);
                    return Ok(());
                }
            }
        }
    }
    stream.finish().await
}

/// `step`'s output, or `None` when it has not finished within `timeout`: a client that
/// stalled a request's head, body or reading of the answer.
async fn stalled_after<F: std::future::Future>(timeout: Duration, step: F) -> Option<F::Output> {
    tokio::time::timeout(timeout, step).await.ok()
}

/// Ends a stalled request's stream with H3_REQUEST_CANCELLED (RFC 9114 §8.1: the server may
/// cancel a request), freeing its place in the connection: the answer's side is reset, and the
/// client is asked to stop sending (with a read pending, h3-quinn cannot: the drop says 0).
fn cancel(stream: &mut H3Stream) {
    stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
}

#[cfg(test)]
mod tests {
    /// A client may park at most the connection's receive window unread, all streams together
    /// (quinn's default is unbounded: 128 endless bodies held 200 MB a connection).
    #[test]
    fn a_connections_unread_bytes_are_bounded() {
        let t = super::transport(&crate::config::Limits::default());
        let shown = format!("{t:?}");
        let want = format!("receive_window: {}", super::CONNECTION_RECEIVE_WINDOW);
        assert!(shown.contains(&want), "{shown}");
    }
}
