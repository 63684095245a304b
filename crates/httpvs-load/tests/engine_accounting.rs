//! Deterministic engine tests over an in-test protocol: accounting identity, retries after
//! GOAWAY, cut-off requests, the open model's correction, and setup errors. Real protocols
//! against real servers are tested in `load_*` tests; here only the engine's bookkeeping is.

use httpvs_load::engine::run_with_protocol;
use httpvs_load::engine::setup::resolve_target;
use httpvs_load::protocol::{
    CloseCause, ConnectInfo, ConnectOptions, Connection, Protocol, ProtocolKind, RequestSpec,
    ResponseInfo, RetryReason, SendError, Target, WireBytes,
};
use httpvs_load::stats::{Quiet, Recording};
use httpvs_load::{ErrorKind, LoadConfig, LoadError, ProtocolFactory};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How the fake server behaves.
#[derive(Clone, Default)]
struct Behaviour {
    /// Each response takes this long.
    delay: Duration,
    /// GOAWAY after this many requests on one connection (0: never).
    goaway_after: u64,
    /// Every n-th request (globally) fails with a reset (0: never).
    fail_every: u64,
    /// Every n-th request answers 503 (0: never).
    status_503_every: u64,
    /// The first request of the whole run stalls this long (a server hiccup).
    first_stall: Duration,
    /// Connections are refused.
    refuse: bool,
    /// Every request is refused for a retry (a server that processes nothing).
    refuse_every_request: bool,
    /// After this many requests a connection refuses every request, with no GOAWAY and
    /// still open (0: never): a server that served once and then stopped processing.
    serve_then_refuse: u64,
    /// Connection attempts allowed before refusing (0: unlimited), "server killed".
    connects_allowed: u64,
    /// Each connect takes this long.
    connect_delay: Duration,
    /// The response after this many on a connection says `Connection: close` and ends after
    /// the run did (0: never): as one whose last bytes come in the cut-off timer's last tick.
    late_close_after: u64,
}

struct Fake {
    b: Behaviour,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    connects: AtomicU64,
    /// Connects that had completed.
    connected: AtomicU64,
    /// `connected` when the first request was sent.
    connected_at_first_request: AtomicU64,
    stalled: AtomicBool,
    /// Connections told the run is over while they had requests in flight.
    quiesced: AtomicU64,
}

struct FakeConn {
    b: Behaviour,
    counters: Arc<Counters>,
    sent: Cell<u64>,
    open: Cell<bool>,
    wire: Cell<WireBytes>,
}

impl Connection for FakeConn {
    async fn send(
        &self,
        _req: &RequestSpec,
        _start: std::time::Instant,
    ) -> Result<ResponseInfo, SendError> {
        let n = self.sent.get() + 1;
        self.sent.set(n);
        if self.b.refuse_every_request
            || (self.b.serve_then_refuse > 0 && n > self.b.serve_then_refuse)
        {
            return Err(SendError::Retry(RetryReason::Refused));
        }
        if self.b.goaway_after > 0 && n > self.b.goaway_after {
            return Err(SendError::Retry(RetryReason::Goaway(0)));
        }
        let global = self.counters.requests.fetch_add(1, Ordering::Relaxed) + 1;
        if global == 1 {
            let connected = self.counters.connected.load(Ordering::Relaxed);
            self.counters
                .connected_at_first_request
                .store(connected, Ordering::Relaxed);
        }
        if !self.b.first_stall.is_zero() && !self.counters.stalled.swap(true, Ordering::Relaxed) {
            tokio::time::sleep(self.b.first_stall).await;
        }
        tokio::time::sleep(self.b.delay).await;
        let mut w = self.wire.get();
        w.sent += 40;
        w.received += 100;
        w.header_received += 10;
        self.wire.set(w);
        if self.b.fail_every > 0 && global.is_multiple_of(self.b.fail_every) {
            return Err(SendError::Failed(ErrorKind::Reset));
        }
        if self.b.late_close_after > 0 && n > self.b.late_close_after {
            self.open.set(false);
            return Ok(ResponseInfo {
                status: 200,
                ttfb: self.b.delay,
                header_bytes: 40,
                body_bytes: 50,
                close_requested: true,
                done_at: Some(std::time::Instant::now() + Duration::from_secs(3600)),
            });
        }
        let status =
            if self.b.status_503_every > 0 && global.is_multiple_of(self.b.status_503_every) {
                503
            } else {
                200
            };
        Ok(ResponseInfo {
            status,
            ttfb: self.b.delay,
            header_bytes: 40,
            body_bytes: 50,
            close_requested: false,
            done_at: None,
        })
    }
    fn accepts_requests(&self) -> bool {
        self.open.get() && (self.b.goaway_after == 0 || self.sent.get() < self.b.goaway_after)
    }
    fn close_cause(&self) -> CloseCause {
        if self.b.goaway_after > 0 && self.sent.get() >= self.b.goaway_after {
            CloseCause::Goaway
        } else if self.b.late_close_after > 0 && self.sent.get() > self.b.late_close_after {
            CloseCause::ConnectionClose
        } else if self.open.get() {
            CloseCause::Open
        } else {
            CloseCause::Local
        }
    }
    fn wire(&self) -> WireBytes {
        self.wire.get()
    }
    fn close(&self) {
        self.open.set(false);
    }
    fn quiesce(&self) {
        self.counters.quiesced.fetch_add(1, Ordering::Relaxed);
    }
}

impl Protocol for Fake {
    type Conn = FakeConn;
    async fn connect(
        &self,
        _target: &Target,
        _options: &ConnectOptions,
    ) -> Result<(FakeConn, ConnectInfo), ErrorKind> {
        let n = self.counters.connects.fetch_add(1, Ordering::Relaxed) + 1;
        let killed = self.b.connects_allowed > 0 && n > self.b.connects_allowed;
        if self.b.refuse || killed {
            return Err(ErrorKind::Refused);
        }
        tokio::time::sleep(self.b.connect_delay).await;
        self.counters.connected.fetch_add(1, Ordering::Relaxed);
        let conn = FakeConn {
            b: self.b.clone(),
            counters: self.counters.clone(),
            sent: Cell::new(0),
            open: Cell::new(true),
            wire: Cell::new(WireBytes::default()),
        };
        Ok((conn, ConnectInfo::default()))
    }
}

struct FakeFactory {
    b: Behaviour,
    counters: Arc<Counters>,
}

impl ProtocolFactory for FakeFactory {
    type Protocol = Fake;
    fn kind(&self) -> ProtocolKind {
        ProtocolKind::H2c
    }
    fn make(&self, _target: &Target) -> Result<Fake, LoadError> {
        Ok(Fake {
            b: self.b.clone(),
            counters: self.counters.clone(),
        })
    }
}

fn run(config: &LoadConfig, b: Behaviour) -> Result<httpvs_load::Report, LoadError> {
    run_counted(config, b, Arc::default())
}

fn run_counted(
    config: &LoadConfig,
    b: Behaviour,
    counters: Arc<Counters>,
) -> Result<httpvs_load::Report, LoadError> {
    let factory = FakeFactory { b, counters };
    let mut rec = Recording::default();
    let target = resolve_target(&config.url, None)?;
    run_with_protocol(
        config,
        &target,
        factory,
        None,
        &mut rec,
        Arc::new(AtomicBool::new(false)),
    )
}

fn config() -> LoadConfig {
    // Port 9 is never connected to: the fake protocol answers.
    LoadConfig::new("http://127.0.0.1:9/").unwrap()
}

#[test]
fn closed_model_counts_every_request_once() {
    let c = config().shape(4, 3).threads(2).requests(1000);
    let r = run(&c, Behaviour::default()).unwrap();
    assert_eq!(r.requests.started, 1000);
    assert_eq!(r.requests.succeeded, 1000);
    assert!(r.requests.identity_holds);
    assert_eq!(r.connections.opened, 4);
    assert_eq!(r.status_codes.len(), 1);
    assert_eq!(r.latency.count, 1000);
    assert_eq!(r.wire.received, 100 * 1000);
    assert_eq!(r.wire.header_savings, Some(0.75));
    assert_eq!(r.connections.reused_requests, 1000 - 4);
}

#[test]
fn goaway_requests_are_retried_on_new_connections_not_failed() {
    let b = Behaviour {
        goaway_after: 10,
        ..Behaviour::default()
    };
    let c = config().shape(2, 5).threads(2).requests(1000);
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.failed, 0, "{:?}", r.errors);
    assert_eq!(r.requests.succeeded, 1000);
    assert!(r.requests.identity_holds);
    // 1000 requests at 10 per connection: 100 connections.
    assert!(
        (100..=102).contains(&r.connections.opened),
        "{}",
        r.connections.opened
    );
    assert!(r.connections.closed_by_server.goaway >= 98);
    assert_eq!(r.connections.requests_per_connection.max, 10);
    let d = r.connections.diagnosis.expect("churn is explained");
    assert!(d.contains("about every 10 requests"), "{d}");
    assert!(d.contains("keepalive_requests"), "{d}");
}

#[test]
fn failures_and_statuses_are_counted_by_kind() {
    let b = Behaviour {
        fail_every: 10,
        status_503_every: 7,
        ..Behaviour::default()
    };
    let c = config().shape(3, 2).threads(1).requests(700);
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.started, 700);
    assert_eq!(r.requests.failed, 70);
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].kind, "reset");
    assert_eq!(r.errors[0].count, 70);
    let total: u64 = r.status_codes.iter().map(|s| s.count).sum();
    assert_eq!(total, 630);
    assert!(r.status_codes.iter().any(|s| s.code == 503));
    assert!(r.requests.identity_holds);
}

#[test]
fn requests_in_flight_at_the_deadline_are_cut_off() {
    let b = Behaviour {
        delay: Duration::from_millis(40),
        ..Behaviour::default()
    };
    let c = config()
        .shape(2, 4)
        .threads(2)
        .duration(Duration::from_millis(300));
    let r = run(&c, b).unwrap();
    assert!(r.requests.started > 0);
    assert_eq!(r.requests.cut_off, 8, "every stream had one in flight");
    assert!(r.requests.identity_holds);
    assert_eq!(
        r.requests.started,
        r.requests.succeeded + r.requests.failed + r.requests.cut_off
    );
}

/// A `Connection: close` that came with a response ending after the run is not counted as
/// the server's close: the response is cut off, and so is its close. Counted, 40 connections
/// read "closed by the server 40; by us 0" beside a request cut off on one of them.
#[test]
fn a_close_that_came_with_a_cut_off_response_is_ours() {
    let b = Behaviour {
        delay: Duration::from_millis(5),
        late_close_after: 3,
        ..Behaviour::default()
    };
    let c = config()
        .shape(1, 1)
        .threads(1)
        .duration(Duration::from_secs(5));
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.succeeded, 3, "{:?}", r.requests);
    assert_eq!(r.requests.cut_off, 1, "{:?}", r.requests);
    assert_eq!(r.connections.opened, 1, "{:?}", r.connections);
    assert_eq!(
        r.connections.closed_by_server.total, 0,
        "{:?}",
        r.connections
    );
    assert_eq!(r.connections.closed_locally, 1, "{:?}", r.connections);
}

#[test]
fn a_server_killed_mid_run_turns_into_counted_refusals() {
    let b = Behaviour {
        goaway_after: 50,
        connects_allowed: 3, // the probe, then two connections, then nothing listens
        ..Behaviour::default()
    };
    let c = config().shape(1, 2).threads(1).requests(500);
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.started, 500);
    assert_eq!(r.requests.succeeded, 100);
    assert_eq!(r.requests.failed, 400);
    assert_eq!(r.errors[0].kind, "refused");
    assert!(r.requests.identity_holds);
    assert!(r.connections.failed_to_open > 0);
    // Refused requests moved no bytes: the per-request bytes are not said to read high.
    let text = httpvs_load::report::text::render(&r);
    assert!(!text.contains("may read up to"), "{text}");
}

#[test]
fn open_model_corrects_for_a_stall_and_counts_late_sends() {
    let b = Behaviour {
        first_stall: Duration::from_millis(400),
        ..Behaviour::default()
    };
    let c = config()
        .shape(1, 1)
        .threads(1)
        .rate(200.0)
        .duration(Duration::from_secs(1));
    let r = run(&c, b).unwrap();
    let corrected = r.latency.percentile(99.0).unwrap();
    let unc = r.latency_uncorrected.as_ref().unwrap();
    // ~80 sends queued behind the stall: their latency from the intended time is long,
    // from the actual send it is not. The uncorrected p99 stays far below the stall.
    assert!(corrected >= 200_000, "corrected p99 {corrected}µs");
    assert!(unc.percentile(90.0).unwrap() < 100_000, "{unc:?}");
    let lag = r.schedule.as_ref().unwrap();
    assert!(lag.late_sends >= 50, "{}", lag.late_sends);
    assert!(r.requests.identity_holds);
}

/// A stalled connection's sends wait for it, as wrk2's connections' do, on one thread as on
/// two: at 100/s over two connections, the 20 sends due on the stalled one during its 400 ms
/// went out late, where on one thread the other connection took them on time (and the tail a
/// run reported depended on `-t`).
#[test]
fn open_model_sends_wait_for_their_own_connection_whatever_the_threads() {
    for threads in [1, 2] {
        let b = Behaviour {
            first_stall: Duration::from_millis(400),
            ..Behaviour::default()
        };
        let c = config()
            .shape(2, 1)
            .threads(threads)
            .rate(100.0)
            .duration(Duration::from_secs(1));
        let r = run(&c, b).unwrap();
        let lag = r.schedule.as_ref().unwrap();
        assert!(
            lag.late_sends >= 15,
            "-t {threads}: {} late",
            lag.late_sends
        );
        let corrected = r.latency.percentile(95.0).unwrap();
        assert!(
            corrected >= 100_000,
            "-t {threads}: corrected p95 {corrected}µs"
        );
        assert!(r.requests.identity_holds);
    }
}

/// The open model opens every connection before its clock starts (as wrk2): the first send
/// finds all six open, though each connect takes 20 ms and the sends are 1 ms apart. Those
/// connections count as opened at their first request, and no connect happens after.
#[test]
fn the_open_model_connects_before_its_first_send() {
    let b = Behaviour {
        connect_delay: Duration::from_millis(20),
        ..Behaviour::default()
    };
    let counters = Arc::new(Counters::default());
    let c = config().shape(6, 1).threads(2).rate(1000.0).requests(60);
    let r = run_counted(&c, b, counters.clone()).unwrap();
    // Six connections and the probe.
    assert_eq!(
        counters.connected_at_first_request.load(Ordering::Relaxed),
        7
    );
    assert_eq!(counters.connects.load(Ordering::Relaxed), 7);
    assert_eq!(r.connections.opened, 6);
    assert_eq!(r.connections.opened + r.connections.reused_requests, 60);
    assert!(r.requests.identity_holds);
    // Two requests for six connections: two opened, as the closed model opens two; all six
    // were opened (the server saw them) and four left unused.
    let counters = Arc::new(Counters::default());
    let c = config().shape(6, 1).threads(2).rate(1000.0).requests(2);
    let r = run_counted(&c, Behaviour::default(), counters.clone()).unwrap();
    assert_eq!(r.connections.opened, 2);
    assert_eq!(
        counters.connects.load(Ordering::Relaxed),
        3,
        "two and the probe"
    );
    assert_eq!(r.requests.succeeded, 2);
}

/// An open-model `-n` run spans n / rate, and so does its series: `--rate 3 -n 1` (one send,
/// answered at once) is one point of 3 req/s at 0.33 s, not a spike at the answer's time;
/// `--rate 100 -n 108` one point of 100 req/s at 1.08 s.
#[test]
fn an_open_model_n_runs_series_ends_where_its_duration_does() {
    for (rate, n) in [(3.0, 1), (100.0, 108), (20.0, 25)] {
        let c = config().shape(2, 1).threads(1).rate(rate).requests(n);
        let r = run(&c, Behaviour::default()).unwrap();
        assert_eq!(r.requests.succeeded, n);
        let last = r.series.last().unwrap();
        assert_eq!(last.t_s, r.duration_s, "{:?}", r.series);
        assert!(
            (r.duration_s - n as f64 / rate).abs() < 0.05,
            "{}",
            r.duration_s
        );
        let completed: f64 = r
            .series
            .iter()
            .scan(0.0, |from, p| {
                let count = p.requests_per_s * (p.t_s - *from);
                *from = p.t_s;
                Some(count)
            })
            .sum();
        assert!((completed - n as f64).abs() < 1e-6, "{:?}", r.series);
        assert!(
            (last.requests_per_s - rate).abs() < rate * 0.2,
            "{:?}",
            r.series
        );
    }
}

/// `preconnect` (compare sets it): the closed model opens every connection before its clock
/// starts, as the open model does, so a slow handshake does not eat the measured part.
#[test]
fn the_closed_model_can_connect_before_its_clock_starts() {
    let b = Behaviour {
        connect_delay: Duration::from_millis(200),
        ..Behaviour::default()
    };
    let counters = Arc::new(Counters::default());
    let mut c = config().shape(4, 1).threads(1).requests(40);
    c.preconnect = true;
    let r = run_counted(&c, b, counters.clone()).unwrap();
    // Four connections and the probe, all before the first request.
    assert_eq!(
        counters.connected_at_first_request.load(Ordering::Relaxed),
        5
    );
    assert_eq!(r.connections.opened, 4);
    assert_eq!(r.requests.succeeded, 40);
    assert!(r.requests.identity_holds);
}

#[test]
fn a_refused_first_connection_is_a_setup_error() {
    let b = Behaviour {
        refuse: true,
        ..Behaviour::default()
    };
    let c = LoadConfig::new("http://127.0.0.1:1/").unwrap().requests(10);
    let e = run(&c, b).unwrap_err();
    assert_eq!(
        e.to_string(),
        "connection refused: 127.0.0.1:1 — is the server running?"
    );
}

#[test]
fn observer_gets_a_snapshot_each_second() {
    let factory = FakeFactory {
        b: Behaviour {
            delay: Duration::from_millis(5),
            ..Behaviour::default()
        },
        counters: Arc::default(),
    };
    let c = config()
        .shape(2, 1)
        .threads(1)
        .duration(Duration::from_millis(2300));
    let mut rec = Recording::default();
    let target = resolve_target(&c.url, None).unwrap();
    let r = run_with_protocol(&c, &target, factory, None, &mut rec, Arc::default()).unwrap();
    assert!(rec.snapshots.len() >= 2, "{}", rec.snapshots.len());
    assert!(rec.snapshots[0].completed > 0);
    assert!(r.series.len() >= 2);
    let last = rec.snapshots.last().unwrap();
    assert_eq!(last.total_started, r.requests.started);
}

#[test]
fn warmup_requests_are_not_counted_but_its_connections_are() {
    let counters = Arc::new(Counters::default());
    let factory = FakeFactory {
        b: Behaviour {
            delay: Duration::from_millis(2),
            ..Behaviour::default()
        },
        counters: counters.clone(),
    };
    let mut c = config()
        .shape(3, 1)
        .threads(1)
        .duration(Duration::from_millis(300));
    c.warmup = Duration::from_millis(300);
    let target = resolve_target(&c.url, None).unwrap();
    let r = run_with_protocol(&c, &target, factory, None, &mut Quiet, Arc::default()).unwrap();
    let sent = counters.requests.load(Ordering::Relaxed);
    assert!(r.requests.started > 0);
    assert!(
        sent > r.requests.started + 50,
        "warmup sends are not counted"
    );
    assert_eq!(r.connections.opened, 3, "warmup connections count once");
    assert!(r.requests.identity_holds);
}

/// With `--no-keepalive` in the open model, a warm-up connection whose one request ended is
/// not part of the measured part: it read "opened 13" (and "13 connections for 10 requests"),
/// one per slot still holding its spent warm-up connection at the boundary.
#[test]
fn spent_no_keepalive_warmup_connections_are_not_counted() {
    let mut c = config().shape(4, 1).threads(1).rate(20.0).requests(10);
    c.keepalive = false;
    c.warmup = Duration::from_millis(500);
    let r = run(&c, Behaviour::default()).unwrap();
    assert_eq!(r.requests.succeeded, 10, "{:?}", r.requests);
    assert_eq!(r.connections.opened, 10, "{:?}", r.connections);
}

/// Warm-up requests that outlive the warm-up are outside the identity, but the report says
/// so, and the bytes their connections move in the measured part count: a link slow enough to
/// hold every stream past the warm-up used to report zeros and nothing else.
#[test]
fn warmup_requests_that_outlive_it_are_reported() {
    let run_with_delay = |delay_ms: u64| {
        let b = Behaviour {
            delay: Duration::from_millis(delay_ms),
            ..Behaviour::default()
        };
        let mut c = config()
            .shape(2, 3)
            .threads(1)
            .duration(Duration::from_millis(400));
        c.warmup = Duration::from_millis(100);
        run(&c, b).unwrap()
    };
    // Each ends 150 ms into the measured part; the next ones are cut off at its end.
    let r = run_with_delay(250);
    assert_eq!(r.requests.from_warmup.finished, 6);
    assert_eq!(r.requests.from_warmup.cut_off, 0);
    assert_eq!(r.requests.started, 6);
    assert_eq!(r.requests.cut_off, 6);
    assert_eq!(r.wire.received, 6 * 100, "the warm-up responses' bytes");
    assert!(r.requests.identity_holds);
    // Nothing ends before the run does.
    let r = run_with_delay(2000);
    assert_eq!(r.requests.from_warmup.finished, 0);
    assert_eq!(r.requests.from_warmup.cut_off, 6);
    assert_eq!(r.requests.started, 0);
    assert_eq!(r.connections.opened, 2, "open through the measured part");
    assert!(r.requests.identity_holds);
}

/// Open model: warm-up sends that had not gone out by its end are dropped there, and the
/// report counts them: at 100/s, a first response that took 600 ms held the one connection
/// through a 500 ms warm-up, and its other 49 sends vanished without a word.
#[test]
fn warmup_sends_dropped_at_its_end_are_counted() {
    let stalled = Behaviour {
        first_stall: Duration::from_millis(600),
        ..Behaviour::default()
    };
    let mut c = config()
        .shape(1, 1)
        .threads(1)
        .rate(100.0)
        .duration(Duration::from_millis(300));
    c.warmup = Duration::from_millis(500);
    let r = run(&c, stalled).unwrap();
    assert_eq!(r.schedule.as_ref().unwrap().warmup_dropped, 49);
    assert!(r.requests.identity_holds);
    // A warm-up that keeps up drops none.
    let r = run(&c, Behaviour::default()).unwrap();
    assert_eq!(r.schedule.as_ref().unwrap().warmup_dropped, 0);
}

#[test]
fn a_server_that_processes_nothing_fails_requests_instead_of_looping() {
    let b = Behaviour {
        refuse_every_request: true,
        ..Behaviour::default()
    };
    let c = config().shape(1, 2).threads(1).requests(20);
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.failed, 20);
    assert_eq!(r.errors[0].kind, "rst_stream(REFUSED_STREAM)");
    // A refusal is charged at the next one, once its connection is known to have served
    // nothing: nine retries, and the tenth refusal fails the request.
    assert_eq!(r.requests.retried.refused, 20 * 9);
    assert!(r.requests.identity_holds);
}

#[test]
fn a_connection_that_served_once_then_refuses_everything_ends_the_run() {
    // No GOAWAY, the connection stays open and keeps refusing: each request is refused by
    // the same connection with no progress between, so the retry budget runs out.
    let b = Behaviour {
        serve_then_refuse: 1,
        ..Behaviour::default()
    };
    let c = config().shape(1, 1).threads(1).requests(5);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(&c, b));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the run ended by itself")
        .unwrap();
    assert_eq!(r.requests.succeeded, 1);
    assert_eq!(r.requests.failed, 4);
    assert_eq!(r.errors[0].kind, "rst_stream(REFUSED_STREAM)");
    assert_eq!(r.requests.retried.refused, 4 * 9);
    assert!(r.requests.identity_holds);
}

#[test]
fn a_request_past_its_timeout_fails_as_a_timeout_and_the_others_succeed() {
    // The slot's one timer watches every stream's deadline (engine/request_timer.rs): the
    // stalled request times out while the other streams of its slot go on completing.
    let b = Behaviour {
        delay: Duration::from_millis(1),
        first_stall: Duration::from_secs(5),
        ..Behaviour::default()
    };
    let mut c = config().shape(2, 3).threads(1).requests(300);
    c.timeout = Some(Duration::from_millis(300));
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.started, 300);
    assert_eq!(r.requests.failed, 1, "{:?}", r.errors);
    assert_eq!(r.errors[0].kind, "request_timeout");
    assert_eq!(r.requests.succeeded, 299);
    assert!(r.requests.identity_holds);
}

#[test]
fn every_stream_of_a_stalled_server_times_out_once_per_request() {
    let b = Behaviour {
        delay: Duration::from_secs(5),
        ..Behaviour::default()
    };
    let mut c = config().shape(2, 4).threads(2).requests(16);
    c.timeout = Some(Duration::from_millis(200));
    let r = run(&c, b).unwrap();
    assert_eq!(r.requests.started, 16);
    assert_eq!(r.requests.failed, 16, "{:?}", r.errors);
    assert_eq!(r.errors[0].kind, "request_timeout");
    assert!(r.requests.identity_holds);
}

/// At the run's end every connection with requests in flight is told, before they are
/// dropped: the current one and one still draining after a GOAWAY (h2 then sends no
/// RST_STREAM burst on either; the draining one used to be missed).
#[test]
fn the_end_of_the_run_reaches_draining_connections_too() {
    let b = Behaviour {
        delay: Duration::from_millis(400),
        goaway_after: 2,
        ..Behaviour::default()
    };
    let counters = Arc::new(Counters::default());
    let c = config()
        .shape(1, 4)
        .threads(1)
        .duration(Duration::from_millis(150));
    let r = run_counted(&c, b, counters.clone()).unwrap();
    assert_eq!(r.requests.cut_off, 4, "{:?}", r.requests);
    assert_eq!(r.connections.opened, 2);
    assert_eq!(counters.quiesced.load(Ordering::Relaxed), 2);
}
