//! HTTP/2 connection limits at the frame level, on both HTTP/2 engines: GOAWAY after exactly N
//! requests with the right last-stream-id, rapid reset (CVE-2023-44487) cut off while other
//! clients are served, in one read or spread over many, and a reset stream's delay let go.

mod support;

use httpvs_server::{H2Engine, Limits, RunningServer};
use std::collections::BTreeSet;
use std::time::Duration;
use support::raw_h2::{get_headers, rst_cancel, RawH2, HEADERS};

const ENGINES: [H2Engine; 2] = [H2Engine::Owned, H2Engine::Hyper];

fn server(limits: Limits, engine: H2Engine) -> RunningServer {
    support::server_on(limits, engine)
}

#[test]
fn one_h2_connection_gets_exactly_n_responses_then_goaway_names_the_nth_stream() {
    for engine in ENGINES {
        one_h2_connection_gets_exactly_n_responses_then_goaway_names_the_nth_stream_on(engine);
    }
}

fn one_h2_connection_gets_exactly_n_responses_then_goaway_names_the_nth_stream_on(
    engine: H2Engine,
) {
    const N: u32 = 5;
    let server = server(
        Limits {
            max_requests_per_conn: Some(u64::from(N)),
            ..Limits::default()
        },
        engine,
    );
    let mut client = RawH2::connect(server.http_addr().unwrap());
    // 3N requests in one write: the server reads them all at once, so only the gate keeps it exact.
    let burst: Vec<u8> = (0..3 * N)
        .flat_map(|i| get_headers(2 * i + 1, "/"))
        .collect();
    client.send(&burst);
    let frames = client.frames_until_closed(Duration::from_secs(10));

    let answered: BTreeSet<u32> = frames
        .iter()
        .filter(|f| f.kind == HEADERS)
        .map(|f| f.stream)
        .collect();
    let expected: BTreeSet<u32> = (0..N).map(|i| 2 * i + 1).collect();
    assert_eq!(
        answered, expected,
        "exactly the first N streams are answered"
    );
    let goaways: Vec<(u32, u32)> = frames.iter().filter_map(|f| f.goaway()).collect();
    let (last_id, code) = *goaways.last().expect("a GOAWAY");
    assert_eq!(
        last_id,
        2 * N - 1,
        "last-stream-id is the Nth stream; all: {goaways:?}"
    );
    assert_eq!(code, 0, "NO_ERROR");
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.requests.h2c, u64::from(N));
    assert!(totals.goaways_sent >= 1);
}

#[test]
fn a_sequential_client_sees_the_same_limit() {
    for engine in ENGINES {
        a_sequential_client_sees_the_same_limit_on(engine);
    }
}

fn a_sequential_client_sees_the_same_limit_on(engine: H2Engine) {
    const N: u32 = 3;
    let server = server(
        Limits {
            max_requests_per_conn: Some(u64::from(N)),
            ..Limits::default()
        },
        engine,
    );
    let mut client = RawH2::connect(server.http_addr().unwrap());
    let mut answered = Vec::new();
    for i in 0..N + 2 {
        client.send(&get_headers(2 * i + 1, "/"));
        let frames = client.frames_until_closed(Duration::from_millis(300));
        answered.extend(
            frames
                .iter()
                .filter(|f| f.kind == HEADERS)
                .map(|f| f.stream),
        );
    }
    assert_eq!(answered, vec![1, 3, 5]);
}

#[test]
fn rapid_reset_is_cut_off_with_goaway_while_others_are_served() {
    for engine in ENGINES {
        rapid_reset_is_cut_off_with_goaway_while_others_are_served_on(engine);
    }
}

fn rapid_reset_is_cut_off_with_goaway_while_others_are_served_on(engine: H2Engine) {
    let server = server(Limits::default(), engine);
    let addr = server.http_addr().unwrap();
    let mut attacker = RawH2::connect(addr);
    let attack: Vec<u8> = (0..2000u32)
        .flat_map(|i| [get_headers(2 * i + 1, "/"), rst_cancel(2 * i + 1)].concat())
        .collect();
    attacker.send(&attack);
    let frames = attacker.frames_until_closed(Duration::from_secs(10));
    let goaway = frames.iter().find_map(|f| f.goaway()).expect("GOAWAY");
    assert_eq!(goaway.1, 0xb, "ENHANCE_YOUR_CALM");

    let mut other = RawH2::connect(addr);
    other.send(&get_headers(1, "/"));
    let frames = other.frames_until_closed(Duration::from_millis(500));
    assert!(frames.iter().any(|f| f.kind == HEADERS && f.stream == 1));
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.rejected.rapid_reset_cutoffs, 1);
}

/// One open-and-reset per read, 2 ms apart, never fills a per-read count (nor the h2 crate's
/// accept queue); the connection's budget of early resets still runs dry.
#[test]
fn rapid_reset_spread_over_reads_is_cut_off_too() {
    for engine in ENGINES {
        rapid_reset_spread_over_reads_is_cut_off_too_on(engine);
    }
}

fn rapid_reset_spread_over_reads_is_cut_off_too_on(engine: H2Engine) {
    let server = server(Limits::default(), engine);
    let mut attacker = RawH2::connect(server.http_addr().unwrap());
    let mut frames = attacker.frames_until_closed(Duration::from_millis(20));
    let mut pairs = 0;
    while pairs < 200 && !frames.iter().any(|f| f.goaway().is_some()) {
        let id = 2 * pairs + 1;
        attacker.send(&[get_headers(id, "/"), rst_cancel(id)].concat());
        frames.extend(attacker.frames_until_closed(Duration::from_millis(2)));
        pairs += 1;
    }
    frames.extend(attacker.frames_until_closed(Duration::from_secs(5)));
    let goaway = frames.iter().find_map(|f| f.goaway());
    assert_eq!(
        goaway.map(|g| g.1),
        Some(0xb),
        "{engine:?}: ENHANCE_YOUR_CALM after {pairs} pairs"
    );
    let limit = Limits::default().max_pending_reset_streams as u32;
    assert!(pairs > limit, "{engine:?}: cut off after {pairs} pairs");
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.rejected.rapid_reset_cutoffs, 1, "{engine:?}");
}

/// A client that gives up on a delayed request (a timeout) resets it in a later read: that
/// costs no budget, and the delay stops holding the connection open at once.
#[test]
fn a_reset_delayed_stream_lets_the_connection_idle_out() {
    for engine in ENGINES {
        a_reset_delayed_stream_lets_the_connection_idle_out_on(engine);
    }
}

fn a_reset_delayed_stream_lets_the_connection_idle_out_on(engine: H2Engine) {
    let limits = Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = server(limits, engine);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    client.send(&get_headers(1, "/?delay=30s"));
    let _ = client.frames_until_closed(Duration::from_millis(50));
    client.send(&rst_cancel(1));
    let start = std::time::Instant::now();
    let frames = client.frames_until_closed(Duration::from_secs(5));
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "{engine:?}: closed after {waited:?}"
    );
    assert!(!frames.iter().any(|f| f.kind == HEADERS), "{engine:?}");
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.rejected.rapid_reset_cutoffs, 0, "{engine:?}");
    assert_eq!(totals.rejected.idle_closed, 1, "{engine:?}");
}

#[test]
fn shutdown_sends_goaway_and_finishes_streams_in_flight() {
    for engine in ENGINES {
        shutdown_sends_goaway_and_finishes_streams_in_flight_on(engine);
    }
}

fn shutdown_sends_goaway_and_finishes_streams_in_flight_on(engine: H2Engine) {
    let server = server(Limits::default(), engine);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    client.send(&get_headers(1, "/?delay=300ms"));
    while server.totals().requests.h2c == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let reader = std::thread::spawn(move || client.frames_until_closed(Duration::from_secs(10)));
    let totals = server.shutdown(Duration::from_secs(5));
    let frames = reader.join().unwrap();
    assert!(
        frames.iter().any(|f| f.kind == HEADERS && f.stream == 1),
        "answered"
    );
    let last = frames
        .iter()
        .filter_map(|f| f.goaway())
        .next_back()
        .expect("GOAWAY");
    assert_eq!(last, (1, 0), "final GOAWAY names stream 1, NO_ERROR");
    assert_eq!(totals.goaways_sent, 1);
}

#[test]
fn close_1_answers_then_goes_away() {
    for engine in ENGINES {
        close_1_answers_then_goes_away_on(engine);
    }
}

fn close_1_answers_then_goes_away_on(engine: H2Engine) {
    let server = server(Limits::default(), engine);
    let mut client = RawH2::connect(server.http_addr().unwrap());
    client.send(&get_headers(1, "/?close=1"));
    let frames = client.frames_until_closed(Duration::from_secs(10));
    assert!(frames.iter().any(|f| f.kind == HEADERS && f.stream == 1));
    let last = frames
        .iter()
        .filter_map(|f| f.goaway())
        .next_back()
        .expect("GOAWAY");
    assert_eq!(last, (1, 0));
}

/// As nginx does: a connection closed for idleness says so first with GOAWAY(NO_ERROR) naming
/// the last stream it processed, so a client knows nothing it sent was lost, on both engines; the
/// GOAWAY counts in the totals.
#[test]
fn an_idle_connection_gets_goaway_before_it_is_closed() {
    for engine in ENGINES {
        an_idle_connection_gets_goaway_before_it_is_closed_on(engine);
    }
}

fn an_idle_connection_gets_goaway_before_it_is_closed_on(engine: H2Engine) {
    let limits = Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = server(limits, engine);
    let mut served = RawH2::connect(server.http_addr().unwrap());
    served.send(&get_headers(1, "/"));
    served.send(&get_headers(3, "/"));
    let mut unused = RawH2::connect(server.http_addr().unwrap());
    for (client, last_id) in [(&mut served, 3), (&mut unused, 0)] {
        let frames = client.frames_until_closed(Duration::from_secs(5));
        let goaways: Vec<(u32, u32)> = frames.iter().filter_map(|f| f.goaway()).collect();
        assert_eq!(goaways, vec![(last_id, 0)], "{engine:?}: {frames:?}");
        let last = frames.last().and_then(|f| f.goaway());
        assert!(last.is_some(), "{engine:?}: GOAWAY is the last frame");
    }
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!(totals.rejected.idle_closed, 2, "{engine:?}");
    assert_eq!(totals.goaways_sent, 2, "{engine:?}");
}
