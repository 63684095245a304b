//! One HTTP/3 connection as the engine sees it: the owned client (the load path) or the h3-crate
//! reference, and the QUIC figures both read from quinn the same way.

use super::classify;
use super::owned::OwnedConnection;
use super::reference::ReferenceConnection;
use super::tap::H3TapObserver;
use crate::error::ErrorKind;
use crate::protocol::{
    CloseCause, CloseDetail, Connection, QuicStats, RequestSpec, ResponseInfo, SendError, WireBytes,
};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Which HTTP/3 implementation a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum H3Engine {
    /// The owned client over quinn streams (`owned.rs`): the load path.
    #[default]
    Owned,
    /// The h3 crate (with h3-quinn): the correctness reference and `httpvs trace`'s tap.
    Reference,
}

/// An open HTTP/3 connection.
pub struct H3Connection {
    inner: Inner,
    /// The QUIC connection, for [`Connection::stream_limit`].
    quic: quinn::Connection,
    /// What the reachability watch and this connection share.
    watch: Arc<Watched>,
}

/// What a connection and its reachability watch share.
#[derive(Default)]
pub(super) struct Watched {
    /// Set by the watch before it closes the connection: the server is gone, so the close we
    /// made is reported as [`ErrorKind::Unreachable`], not as a plain close.
    pub(super) gone: AtomicBool,
    /// Requests waiting on the connection: a second of silence with one waiting is worth a
    /// probe whether or not quinn sent anything in it (once every packet was acknowledged, it
    /// sends nothing more to a dead server until its next keep-alive).
    pub(super) waiting: AtomicU32,
}

/// Counts a request as waiting until it ends, however it ends (its future dropped included).
struct Waiting<'a>(&'a AtomicU32);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicU32) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

enum Inner {
    Owned(OwnedConnection),
    Reference(ReferenceConnection),
}

impl H3Connection {
    /// Starts HTTP/3 on an established (or 0-RTT) QUIC connection with the owned client.
    ///
    /// `zero_rtt` is quinn's acceptance future when the connection is still in 0-RTT.
    pub async fn establish(
        quic: quinn::Connection,
        zero_rtt: Option<quinn::ZeroRttAccepted>,
    ) -> Result<Self, ErrorKind> {
        let owned = OwnedConnection::establish(quic.clone(), zero_rtt).await?;
        Ok(H3Connection {
            inner: Inner::Owned(owned),
            quic,
            watch: Arc::default(),
        })
    }

    /// Starts HTTP/3 with the h3 crate, showing streams and frames to `observer` if given.
    pub async fn establish_reference(
        quic: quinn::Connection,
        zero_rtt: Option<quinn::ZeroRttAccepted>,
        observer: Option<Arc<dyn H3TapObserver>>,
    ) -> Result<Self, ErrorKind> {
        let reference =
            ReferenceConnection::establish_observed(quic.clone(), zero_rtt, observer).await?;
        Ok(H3Connection {
            inner: Inner::Reference(reference),
            quic,
            watch: Arc::default(),
        })
    }

    /// What the reachability watch reads (requests waiting) and sets (just before it closes
    /// this connection because the server's port answered ICMP port-unreachable).
    pub(super) fn watched(&self) -> Arc<Watched> {
        self.watch.clone()
    }

    fn is_gone(&self) -> bool {
        self.watch.gone.load(Ordering::Acquire)
    }

    /// Which implementation this connection runs.
    pub fn engine(&self) -> H3Engine {
        match self.inner {
            Inner::Owned(_) => H3Engine::Owned,
            Inner::Reference(_) => H3Engine::Reference,
        }
    }
}

impl Connection for H3Connection {
    async fn send(&self, req: &RequestSpec, start: Instant) -> Result<ResponseInfo, SendError> {
        let _waiting = Waiting::new(&self.watch.waiting);
        let result = match &self.inner {
            Inner::Owned(c) => c.send(req, start).await,
            // Boxed: the reference's future is several times the owned one's, and this future
            // sits in every stream in flight and is moved once per request.
            Inner::Reference(c) => Box::pin(c.send(req, start)).await,
        };
        match result {
            // Our own close, made because the server is gone: say so.
            Err(SendError::Failed(ErrorKind::ConnectionClosed)) if self.is_gone() => {
                Err(SendError::Failed(ErrorKind::Unreachable))
            }
            other => other,
        }
    }

    fn accepts_requests(&self) -> bool {
        match &self.inner {
            Inner::Owned(c) => c.accepts_requests(),
            Inner::Reference(c) => c.accepts_requests(),
        }
    }

    fn close_detail(&self) -> Option<CloseDetail> {
        match &self.inner {
            Inner::Owned(c) => c.close_detail(),
            // The reference engine (trace's, and the differential test's) does not track it.
            Inner::Reference(_) => None,
        }
    }

    fn close_cause(&self) -> CloseCause {
        let cause = match &self.inner {
            Inner::Owned(c) => c.close_cause(),
            Inner::Reference(c) => c.close_cause(),
        };
        // The server vanished: the connection failed, it did not end cleanly.
        match cause {
            CloseCause::Fin if self.is_gone() => CloseCause::Reset,
            cause => cause,
        }
    }

    fn wire(&self) -> WireBytes {
        match &self.inner {
            Inner::Owned(c) => c.wire(),
            Inner::Reference(c) => c.wire(),
        }
    }

    fn close(&self) {
        match &self.inner {
            Inner::Owned(c) => c.close(),
            Inner::Reference(c) => c.close(),
        }
    }

    fn quic_stats(&self) -> Option<QuicStats> {
        match &self.inner {
            Inner::Owned(c) => c.quic_stats(),
            Inner::Reference(c) => c.quic_stats(),
        }
    }

    /// Opens request streams until quinn would wait for the server's MAX_STREAMS, then cancels
    /// them (H3_REQUEST_CANCELLED, before any byte of a request): the count is the server's
    /// initial_max_streams_bidi when it is at most `want`.
    fn stream_limit(&self, want: u32) -> Option<u32> {
        use futures_util::FutureExt;
        let tries = want.min(MAX_STREAM_PROBE).saturating_add(1);
        let mut opened = Vec::new();
        while (opened.len() as u32) < tries {
            match self.quic.open_bi().now_or_never() {
                Some(Ok(stream)) => opened.push(stream),
                // Waiting for MAX_STREAMS: the limit.
                None => break,
                // The connection is gone: no limit learned.
                Some(Err(_)) => return None,
            }
        }
        let n = opened.len() as u32;
        for (mut send, mut recv) in opened {
            let code = quinn::VarInt::from_u32(classify::H3_REQUEST_CANCELLED as u32);
            let _ = send.reset(code);
            let _ = recv.stop(code);
        }
        (n < tries).then_some(n)
    }
}

/// Most streams [`Connection::stream_limit`] opens to find a limit.
const MAX_STREAM_PROBE: u32 = 10_000;

/// The report's close cause for a connection that ended as `ended` (after GOAWAY and local close
/// have been ruled out).
pub(super) fn close_cause_of(ended: Option<ErrorKind>) -> CloseCause {
    match ended {
        None => CloseCause::Open,
        Some(ErrorKind::ConnectionClosed) => CloseCause::Fin,
        // Our own idle timer ended it: the server went silent (died, restarted, or the path
        // went away), it closed nothing.
        Some(ErrorKind::IdleTimeout) => CloseCause::Local,
        Some(_) => CloseCause::Reset,
    }
}

/// Wire bytes from quinn's UDP counters plus the QPACK header bytes the client counted.
pub(super) fn wire_of(
    quic: &quinn::Connection,
    header_sent: u64,
    header_received: u64,
) -> WireBytes {
    let stats = quic.stats();
    WireBytes {
        sent: stats.udp_tx.bytes,
        received: stats.udp_rx.bytes,
        header_sent,
        header_received,
        datagrams_sent: stats.udp_tx.datagrams,
        datagrams_received: stats.udp_rx.datagrams,
        ..WireBytes::default()
    }
}

/// Requests sent in 0-RTT as (accepted early, refused): all one or the other, as the server
/// takes or refuses a connection's early data whole.
fn early_split(sent_early: u64, rejected: bool) -> (u64, u64) {
    match rejected {
        true => (0, sent_early),
        false => (sent_early, 0),
    }
}

/// The report's QUIC section for one connection, from quinn's statistics. `sent_early`:
/// requests sent while the connection was in 0-RTT; `rejected`: the server refused its early
/// data, so none of them counts as early (they were sent again).
pub(super) fn quic_stats_of(
    quic: &quinn::Connection,
    sent_early: u64,
    rejected: bool,
) -> QuicStats {
    let stats = quic.stats();
    let (early_requests, early_rejected) = early_split(sent_early, rejected);
    QuicStats {
        datagrams_sent: stats.udp_tx.datagrams,
        datagrams_received: stats.udp_rx.datagrams,
        udp_bytes_sent: stats.udp_tx.bytes,
        udp_bytes_received: stats.udp_rx.bytes,
        // Our own packets only: a receiver cannot tell a lost packet from one never sent, and
        // quinn does not expose received packet-number gaps. Server-to-client loss is the
        // server's to count (or the emulated link's, whose counters the report carries).
        packets_lost: stats.path.lost_packets,
        // quinn does not count retransmissions; it requeues the frames of every lost packet
        // except MTU probes, so this is the number of lost packets whose data was resent.
        retransmits: stats
            .path
            .lost_packets
            .saturating_sub(stats.path.lost_plpmtud_probes),
        smoothed_rtt: stats.path.rtt,
        min_rtt: stats.path.min_rtt,
        cwnd: stats.path.cwnd,
        early_requests,
        early_rejected,
    }
}

#[cfg(test)]
mod tests {
    use super::early_split;

    /// Requests sent before the server refused the early data are not early ones (they read
    /// as early, though the server never took them so).
    #[test]
    fn refused_early_data_counts_no_early_request() {
        assert_eq!(early_split(3, false), (3, 0));
        assert_eq!(early_split(3, true), (0, 3));
    }
}
