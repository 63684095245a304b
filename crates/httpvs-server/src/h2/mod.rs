//! HTTP/2 (h2c and h2 over TLS) on one of two engines (`ServeConfig::h2_engine`). `owned/` is the
//! default: httpvs's own frame layer on `httpvs-h2wire`. The rest of this module is the reference
//! on the h2 crate directly: one task per connection accepts streams and answers `GET /` inline
//! (so responses of one read are written together); streams that read a body or wait get their
//! own task. Both send GOAWAY on shutdown, on `close=1` and after N streams.

mod cork;
mod gate;
mod owned;
mod reset_budget;
mod stream;

pub use cork::{Cork, CorkedIo};
pub use gate::{FrameGate, GateSignal, GatedIo};
#[cfg(feature = "fuzzing")]
pub use owned::fuzz::server as fuzz_owned_server;

use crate::conn_io::ConnState;
use crate::echo::EchoBudget;
use crate::totals::{Event, Proto};
use crate::worker::WorkerCtx;
use bytes::Bytes;
use h2::server::{Connection, SendResponse};
use h2::{Reason, RecvStream};
use http::Request;
use reset_budget::ResetBudget;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use tokio::io::{AsyncRead, AsyncWrite};

/// Serves one HTTP/2 connection (the preface not yet consumed) until it closes.
pub async fn serve<I>(io: I, proto: Proto, ctx: &Arc<WorkerCtx>, state: Arc<ConnState>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if ctx.h2_engine == crate::config::H2Engine::Owned {
        return owned::serve(io, proto, ctx, state).await;
    }
    let cork = Arc::new(Cork::default());
    let io = CorkedIo::new(io, cork.clone());
    match ctx.limits.max_requests_per_conn {
        Some(limit) => {
            let signal = Arc::new(GateSignal::default());
            let gated = GatedIo::new(io, limit, signal.clone());
            run(gated, proto, ctx, state, cork, Some(signal)).await
        }
        None => run(io, proto, ctx, state, cork, None).await,
    }
}

#[allow(clippy::large_enum_variant)] // lives on the stack for one loop turn
enum Next {
    Stream(Request<RecvStream>, SendResponse<Bytes>),
    Closed,
    Failed(h2::Error),
    GateReached,
}

async fn run<I>(
    io: I,
    proto: Proto,
    ctx: &Arc<WorkerCtx>,
    state: Arc<ConnState>,
    cork: Arc<Cork>,
    gate: Option<Arc<GateSignal>>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = ctx.h2.handshake::<I, Bytes>(io);
    let mut conn = match tokio::time::timeout(ctx.handshake_timeout(), handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(_)) => return,
        Err(_) => {
            ctx.counters.event(Event::IdleClosed);
            return;
        }
    };
    let mut idle = pin!(state.idle(ctx.limits.idle_timeout));
    let mut shutdown = ctx.shutdown.clone();
    let mut going_away = false;
    // The echo bytes the connection's streams hold, together, until each echo is sent.
    let echo = Arc::new(EchoBudget::new(&ctx.limits));
    // The h2 crate's own guard (`max_pending_accept_reset_streams`) counts reset streams still
    // in its accept queue, which a client resetting one stream per read never fills.
    let mut resets = ResetBudget::new(ctx.limits.max_pending_reset_streams);
    loop {
        let next = tokio::select! {
            next = next_stream(&mut conn, &cork, gate.as_deref(), going_away) => next,
            _ = &mut idle => {
                ctx.counters.event(Event::IdleClosed);
                if !going_away {
                    close_idle(&mut conn, &cork, ctx).await;
                }
                return;
            }
            _ = crate::worker::stopping(&mut shutdown), if !going_away => Next::GateReached,
        };
        match next {
            Next::Stream(request, mut respond) => {
                if !reset_budget_allows(&mut respond, &mut resets) {
                    conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                    ctx.counters.event(Event::RapidReset);
                    ctx.counters.event(Event::GoAway);
                    going_away = true;
                    continue;
                }
                let close = stream::answer(request, respond, proto, ctx, &state, &echo);
                if close && !going_away {
                    go_away(&mut conn, ctx, &mut going_away);
                }
            }
            Next::GateReached => go_away(&mut conn, ctx, &mut going_away),
            Next::Closed => return,
            Next::Failed(e) => {
                if e.is_go_away() && e.is_library() {
                    match e.reason() {
                        Some(Reason::ENHANCE_YOUR_CALM) => ctx.counters.event(Event::RapidReset),
                        Some(Reason::NO_ERROR) | None => {}
                        Some(_) => ctx.counters.event(Event::H2ProtocolError),
                    }
                    if e.reason().is_some_and(|r| r != Reason::NO_ERROR) {
                        ctx.counters.event(Event::GoAway);
                    }
                }
                return;
            }
        }
    }
}

/// How long an idle connection's closing GOAWAY may take to write.
const GOAWAY_WRITE: std::time::Duration = std::time::Duration::from_millis(100);

/// As nginx does: GOAWAY(NO_ERROR) naming the last stream processed, then the close, so the
/// client knows nothing it sent was lost. The h2 crate writes it while the connection is
/// polled; a peer that does not read gets the close without it.
async fn close_idle<I>(conn: &mut Connection<I, Bytes>, cork: &Cork, ctx: &WorkerCtx)
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    conn.abrupt_shutdown(Reason::NO_ERROR);
    ctx.counters.event(Event::GoAway);
    let _ = tokio::time::timeout(GOAWAY_WRITE, async {
        while let Next::Stream(..) = next_stream(conn, cork, None, true).await {}
    })
    .await;
}

/// Charges a stream the client reset before it was accepted (so before any answer could leave)
/// to the connection's budget, or credits one that will be answered; `false` when spent.
fn reset_budget_allows(respond: &mut SendResponse<Bytes>, resets: &mut ResetBudget) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match respond.poll_reset(&mut cx) {
        Poll::Ready(_) => resets.spend(),
        Poll::Pending => {
            resets.earn(1);
            true
        }
    }
}

fn go_away<I, B>(conn: &mut Connection<I, B>, ctx: &WorkerCtx, going_away: &mut bool)
where
    I: AsyncRead + AsyncWrite + Unpin,
    B: bytes::Buf,
{
    if !*going_away {
        conn.graceful_shutdown();
        ctx.counters.event(Event::GoAway);
        *going_away = true;
    }
}

/// The next accepted stream; or, when the gate has let N streams through, a turn to send GOAWAY.
/// Streams already read are taken with the cork closed; before waiting, the cork opens and h2
/// polls once more, so the answers to one read leave in one write.
async fn next_stream<I>(
    conn: &mut Connection<I, Bytes>,
    cork: &Cork,
    gate: Option<&GateSignal>,
    going_away: bool,
) -> Next
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let classify = |polled| match polled {
        Poll::Ready(Some(Ok((request, respond)))) => Poll::Ready(Next::Stream(request, respond)),
        Poll::Ready(Some(Err(e))) => Poll::Ready(Next::Failed(e)),
        Poll::Ready(None) => Poll::Ready(Next::Closed),
        Poll::Pending if !going_away && gate.is_some_and(|g| g.is_triggered()) => {
            Poll::Ready(Next::GateReached)
        }
        Poll::Pending => Poll::Pending,
    };
    std::future::poll_fn(|cx| {
        cork.close();
        if let Poll::Ready(next) = classify(conn.poll_accept(cx)) {
            if !matches!(next, Next::Stream(..)) {
                cork.open();
            }
            return Poll::Ready(next);
        }
        cork.open();
        classify(conn.poll_accept(cx))
    })
    .await
}
