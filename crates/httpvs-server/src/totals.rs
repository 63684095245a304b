//! What the server did: per-worker counters (no shared cache line on the hot path) summed into `ServerTotals`.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The protocol a connection or request was served with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.1 over cleartext TCP.
    H1,
    /// HTTP/1.1 over TLS.
    H1Tls,
    /// HTTP/2 prior knowledge over cleartext TCP.
    H2c,
    /// HTTP/2 over TLS.
    H2,
    /// HTTP/3 over QUIC.
    H3,
}

/// One worker's counters, padded to its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Counters {
    connections: [AtomicU64; 5],
    requests: [AtomicU64; 5],
    goaways: AtomicU64,
    over_max_connections: AtomicU64,
    headers_too_large: AtomicU64,
    uris_too_long: AtomicU64,
    bodies_too_large: AtomicU64,
    rapid_reset_cutoffs: AtomicU64,
    idle_closed: AtomicU64,
    bad_queries: AtomicU64,
    bad_requests: AtomicU64,
    statuses: [AtomicU64; 6],
    not_http: AtomicU64,
    tls_handshake_failures: AtomicU64,
    quic_handshake_failures: AtomicU64,
    h2_protocol_errors: AtomicU64,
    h3_protocol_errors: AtomicU64,
    refused_streams: AtomicU64,
    cut_off: AtomicU64,
}

/// A counted event other than a connection or a request.
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// GOAWAY sent (h2 or h3).
    GoAway,
    /// Connection refused because `max_connections` were open.
    OverMaxConnections,
    /// 431 sent.
    HeadersTooLarge,
    /// 414 sent (by hyper, for a request target past its limit).
    UriTooLong,
    /// 413 sent.
    BodyTooLarge,
    /// Connection cut off for resetting streams (CVE-2023-44487).
    RapidReset,
    /// Connection closed after `idle_timeout` without I/O.
    IdleClosed,
    /// 400 sent for a malformed query.
    BadQuery,
    /// 400 sent for a malformed request (no valid Host on HTTP/1.1, a head that does not parse).
    BadRequest,
    /// A cleartext opening (or HTTP/1.1-over-TLS one) closed without an answer: not HTTP.
    NotHttp,
    /// A TLS handshake that failed (not one that timed out: that is `IdleClosed`).
    TlsHandshakeFailed,
    /// A QUIC handshake that failed (not one that timed out).
    QuicHandshakeFailed,
    /// An h2 connection ended by a GOAWAY with an error code (not rapid reset's).
    H2ProtocolError,
    /// An h3 connection the server closed with an error code (the client broke RFC 9114).
    H3ProtocolError,
    /// A stream refused with REFUSED_STREAM over `max_streams`.
    RefusedStream,
    /// A request still in progress when the drain deadline (`--grace`) passed.
    CutOff,
}

impl Counters {
    /// Counts an accepted connection.
    pub fn connection(&self, proto: Proto) {
        self.connections[proto as usize].fetch_add(1, Relaxed);
    }

    /// Counts a request.
    pub fn request(&self, proto: Proto) {
        self.requests[proto as usize].fetch_add(1, Relaxed);
    }

    /// Counts an event.
    pub fn event(&self, event: Event) {
        let counter = match event {
            Event::GoAway => &self.goaways,
            Event::OverMaxConnections => &self.over_max_connections,
            Event::HeadersTooLarge => &self.headers_too_large,
            Event::UriTooLong => &self.uris_too_long,
            Event::BodyTooLarge => &self.bodies_too_large,
            Event::RapidReset => &self.rapid_reset_cutoffs,
            Event::IdleClosed => &self.idle_closed,
            Event::BadQuery => &self.bad_queries,
            Event::BadRequest => &self.bad_requests,
            Event::NotHttp => &self.not_http,
            Event::TlsHandshakeFailed => &self.tls_handshake_failures,
            Event::QuicHandshakeFailed => &self.quic_handshake_failures,
            Event::H2ProtocolError => &self.h2_protocol_errors,
            Event::H3ProtocolError => &self.h3_protocol_errors,
            Event::RefusedStream => &self.refused_streams,
            Event::CutOff => &self.cut_off,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Counts an answer's status by class. Every counter here is written by its worker's thread
    /// only, so this is a plain load and store, not a locked add: it is on every answer's path.
    pub fn status(&self, status: u16) {
        let class = &self.statuses[usize::from(status / 100).min(5)];
        class.store(class.load(Relaxed).wrapping_add(1), Relaxed);
    }
}

/// Counts by protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ByProto {
    /// HTTP/1.1 over cleartext TCP.
    pub h1: u64,
    /// HTTP/1.1 over TLS.
    pub h1_tls: u64,
    /// h2c prior knowledge.
    pub h2c: u64,
    /// h2 over TLS.
    pub h2: u64,
    /// HTTP/3.
    pub h3: u64,
}

impl ByProto {
    /// The sum over protocols.
    pub fn total(&self) -> u64 {
        self.h1 + self.h1_tls + self.h2c + self.h2 + self.h3
    }

    fn add(&mut self, counters: &[AtomicU64; 5]) {
        let v = |p: Proto| counters[p as usize].load(Relaxed);
        self.h1 += v(Proto::H1);
        self.h1_tls += v(Proto::H1Tls);
        self.h2c += v(Proto::H2c);
        self.h2 += v(Proto::H2);
        self.h3 += v(Proto::H3);
    }
}

/// Requests and connections refused or cut off by a limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Rejections {
    /// Connections closed at once because `max_connections` were open.
    pub over_max_connections: u64,
    /// 431 responses: the server's, hyper's (a head past its buffer) and the h3 crate's. Not the
    /// h2 crate's on `--h2-engine hyper` (a header list past SETTINGS_MAX_HEADER_LIST_SIZE), which
    /// it answers inside the crate where nothing can see it.
    pub headers_too_large: u64,
    /// 414 responses: hyper's, to an HTTP/1 request target over 64 KiB (reachable only with
    /// `max_header_bytes` over about 56 KiB; a smaller head limit answers 431 first).
    pub uris_too_long: u64,
    /// 413 responses.
    pub bodies_too_large: u64,
    /// Connections cut off with GOAWAY for rapid resets.
    pub rapid_reset_cutoffs: u64,
    /// Connections closed after the idle timeout, by whoever noticed: the server's idle watch,
    /// hyper's header read timeout, the h3 idle watch, QUIC's idle timeout (a peer gone), or the bound on the opening bytes and
    /// handshakes (those connections are not in `connections`: no protocol was known yet).
    pub idle_closed: u64,
    /// 400 responses for malformed queries.
    pub bad_queries: u64,
    /// 400 responses for malformed requests: an HTTP/1.1 request without Host (or any with two,
    /// or with one that is not a valid authority), an HTTP/1 head hyper could not parse, an h2
    /// field the owned engine could not take.
    pub bad_requests: u64,
}

/// Answers sent, by status class (1xx is hyper's `100 Continue` only, not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ByStatus {
    /// 2xx answers.
    pub s2xx: u64,
    /// 3xx answers.
    pub s3xx: u64,
    /// 4xx answers (the server's and hyper's own 400/414/431, the h3 crate's 431).
    pub s4xx: u64,
    /// 5xx answers.
    pub s5xx: u64,
}

impl ByStatus {
    /// The sum over classes.
    pub fn total(&self) -> u64 {
        self.s2xx + self.s3xx + self.s4xx + self.s5xx
    }
}

/// Connections and requests that ended without an answer, or before theirs was whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Failures {
    /// Connections closed without an answer for opening with something that is not HTTP/1.x or
    /// the h2 preface (garbage, HTTP/0.9, a broken preface); not in `connections`.
    pub not_http: u64,
    /// TLS handshakes that failed (timed-out ones are `idle_closed`); not in `connections`.
    pub tls_handshakes: u64,
    /// QUIC handshakes that failed (timed-out ones are `idle_closed`); not in `connections`.
    pub quic_handshakes: u64,
    /// h2 connections ended by a GOAWAY with an error code (a protocol, flow-control, frame-size
    /// or compression error); rapid-reset cut-offs are counted apart.
    pub h2_protocol_errors: u64,
    /// h3 connections the server closed with an H3 error code for the client's fault (a
    /// broken control stream, a frame where none may come, a second SETTINGS).
    pub h3_protocol_errors: u64,
    /// Streams refused with REFUSED_STREAM over `max_streams` (owned engine; the h2 crate refuses
    /// them inside, unseen).
    pub refused_streams: u64,
    /// Requests still in progress when `--grace` ran out at stop (h1 and h2 on the hyper engine:
    /// one per connection or stream task still open; the owned h2 engine and h3: every open
    /// stream).
    pub cut_off_at_stop: u64,
}

/// The server's totals since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ServerTotals {
    /// Connections accepted, by protocol.
    pub connections: ByProto,
    /// Requests answered, by protocol.
    pub requests: ByProto,
    /// Answers by status class.
    pub statuses: ByStatus,
    /// GOAWAY frames sent (h2 and h3).
    pub goaways_sent: u64,
    /// Refusals by limit.
    pub rejected: Rejections,
    /// What ended without an answer.
    pub failed: Failures,
}

impl ServerTotals {
    /// Sums workers' counters.
    pub fn sum<'a>(workers: impl IntoIterator<Item = &'a Counters>) -> ServerTotals {
        let mut t = ServerTotals::default();
        for c in workers {
            t.connections.add(&c.connections);
            t.requests.add(&c.requests);
            t.goaways_sent += c.goaways.load(Relaxed);
            let r = &mut t.rejected;
            r.over_max_connections += c.over_max_connections.load(Relaxed);
            r.headers_too_large += c.headers_too_large.load(Relaxed);
            r.uris_too_long += c.uris_too_long.load(Relaxed);
            r.bodies_too_large += c.bodies_too_large.load(Relaxed);
            r.rapid_reset_cutoffs += c.rapid_reset_cutoffs.load(Relaxed);
            r.idle_closed += c.idle_closed.load(Relaxed);
            r.bad_queries += c.bad_queries.load(Relaxed);
            r.bad_requests += c.bad_requests.load(Relaxed);
            let s = &mut t.statuses;
            s.s2xx += c.statuses[2].load(Relaxed);
            s.s3xx += c.statuses[3].load(Relaxed);
            s.s4xx += c.statuses[4].load(Relaxed);
            s.s5xx += c.statuses[5].load(Relaxed);
            let f = &mut t.failed;
            f.not_http += c.not_http.load(Relaxed);
            f.tls_handshakes += c.tls_handshake_failures.load(Relaxed);
            f.quic_handshakes += c.quic_handshake_failures.load(Relaxed);
            f.h2_protocol_errors += c.h2_protocol_errors.load(Relaxed);
            f.h3_protocol_errors += c.h3_protocol_errors.load(Relaxed);
            f.refused_streams += c.refused_streams.load(Relaxed);
            f.cut_off_at_stop += c.cut_off.load(Relaxed);
        }
        t
    }
}

impl std::fmt::Display for ServerTotals {
    /// The totals block printed when `httpvs serve` stops.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let row = |f: &mut std::fmt::Formatter<'_>, name: &str, b: &ByProto| {
            writeln!(
                f,
                "{name:<12} {:>10} total  (h1 {}, h1+tls {}, h2c {}, h2 {}, h3 {})",
                b.total(),
                b.h1,
                b.h1_tls,
                b.h2c,
                b.h2,
                b.h3
            )
        };
        row(f, "connections", &self.connections)?;
        row(f, "requests", &self.requests)?;
        let s = &self.statuses;
        writeln!(
            f,
            "{:<12} {:>10} total  (2xx {}, 3xx {}, 4xx {}, 5xx {})",
            "answers",
            s.total(),
            s.s2xx,
            s.s3xx,
            s.s4xx,
            s.s5xx
        )?;
        writeln!(f, "{:<12} {:>10}", "goaways", self.goaways_sent)?;
        let r = &self.rejected;
        write!(
            f,
            "{:<12} over-max-connections {}, 431 {}, 414 {}, 413 {}, 400 query {}, 400 request {}, rapid-reset {}, idle-closed {}",
            "rejected",
            r.over_max_connections,
            r.headers_too_large,
            r.uris_too_long,
            r.bodies_too_large,
            r.bad_queries,
            r.bad_requests,
            r.rapid_reset_cutoffs,
            r.idle_closed
        )?;
        let x = &self.failed;
        write!(
            f,
            "\n{:<12} not-http {}, tls-handshake {}, quic-handshake {}, h2-protocol-error {}, h3-protocol-error {}, refused-stream {}, cut-off-at-stop {}",
            "failed",
            x.not_http,
            x.tls_handshakes,
            x.quic_handshakes,
            x.h2_protocol_errors,
            x.h3_protocol_errors,
            x.refused_streams,
            x.cut_off_at_stop
        )
    }
}
