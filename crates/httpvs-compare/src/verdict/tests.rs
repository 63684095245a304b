//! Verdict tests on hand-made rows: winners, ties inside the spread, and anomalies.

use super::*;
use crate::measurement::Spread;
use crate::plan::Shape;

const CLEAN: LinkTraits = LinkTraits {
    lossy: false,
    delayed: false,
};
const DELAYED: LinkTraits = LinkTraits {
    lossy: false,
    delayed: true,
};
const LOSSY: LinkTraits = LinkTraits {
    lossy: true,
    delayed: true,
};

fn row(variant: Variant, rps: [f64; 3]) -> Row {
    Row {
        variant,
        shape: Shape {
            connections: 4,
            streams: 1,
        },
        rps: Spread::of(rps),
        runs: 3,
        p50_ms: 1.0,
        p99_ms: 2.0,
        bytes_per_request: 200.0,
        connections: 4.0,
        fewest_connections: 4,
        seconds: 3.0,
        started: 1004,
        cut_off: 4,
        warmup_finished: 0,
        ceiling_rps: rps[2] * 1.01,
        errors: 0,
        retried: 0,
        succeeded: 1000,
        fewest_succeeded: 333,
        non_2xx: 0,
        non_2xx_top: None,
        errors_top: None,
        streams_capped: None,
        link_queue_drops: 0,
        link_late: 0,
        link_packets_in: 0,
        client_cpu_max: Some(0.5),
        stall_seconds: 0.0,
        failure: None,
        connection_note: None,
    }
}

/// A row of a single run at `rps` (no spread).
fn single(variant: Variant, rps: f64) -> Row {
    Row {
        runs: 1,
        ..row(variant, [rps, rps, rps])
    }
}

#[test]
fn fastest_with_ratio_and_spread() {
    let rows = [
        row(Variant::H1, [100.0, 100.0, 100.0]),
        row(Variant::H2c, [300.0, 310.0, 324.0]),
        row(Variant::H1Close, [20.0, 21.0, 22.0]),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(v.fastest, Some(Variant::H2c));
    assert!(
        v.line.starts_with("h2c fastest, 3.10x h1 (spread ±4%)"),
        "{}",
        v.line
    );
    assert!(v
        .line
        .contains("slowest h1-close 0.21x h1 (a new connection per request)"));
}

#[test]
fn overlapping_spreads_are_a_tie() {
    let rows = [
        row(Variant::H1, [100.0, 101.0, 102.0]),
        row(Variant::H2c, [150.0, 160.0, 170.0]),
        row(Variant::H2, [140.0, 155.0, 165.0]),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(v.tied, vec![Variant::H2]);
    // Each tied row's spread is quoted: the tie turns on both ranges, not the fastest's alone.
    assert_eq!(
        v.line,
        "tie: h2c ≈ h2 (inside the spread; by median h2c 1.58x h1; spread h2c ±6%, h2 ±8%)"
    );
}

#[test]
fn single_runs_tie_within_five_percent() {
    let rows = [single(Variant::H1, 100.0), single(Variant::H2c, 103.0)];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line
            .starts_with("tie: h2c ≈ h1 (too close to call; by median h2c 1.03x h1; single run"),
        "{}",
        v.line
    );
    // Three repeats that read the same are not a single run: their spread is ±0%.
    let rows = [
        row(Variant::H1, [100.0, 100.0, 100.0]),
        row(Variant::H2c, [103.0, 103.0, 103.0]),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line.contains("spread ±0%: differences under 5%"),
        "{}",
        v.line
    );
}

#[test]
fn nothing_completed() {
    let rows = [row(Variant::H1, [0.0, 0.0, 0.0])];
    assert_eq!(verdict(&rows, Variant::H1, CLEAN).fastest, None);
}

#[test]
fn anomalies_flag_churn_errors_retries_and_saturation() {
    let mut r = row(Variant::H2, [100.0, 100.0, 100.0]);
    r.connections = 40.0;
    r.errors = 10;
    r.retried = 5;
    r.non_2xx = 250;
    r.non_2xx_top = Some(404);
    r.client_cpu_max = Some(0.97);
    let rows = [r.clone()];
    let a = anomalies(&r, &rows, 1, 3);
    assert_eq!(a.len(), 5, "{a:?}");
    assert!(a[0].contains("connection churn: 40 connections opened for 4 configured"));
    assert!(a[2].contains("250 responses were not 2xx (25.0%, mostly 404)"));
    assert!(a[4].contains("client saturated: 97%"));
    assert!(a[0].contains("measured requests each"), "{}", a[0]);
    // With the load report's note, its reading (as the server counted, warm-up included).
    r.connection_note = Some(crate::results::ChurnNote {
        text: "the server closed connections 36 times with GOAWAY, about every 100 requests".into(),
        repeat: 1,
        opened: 41,
    });
    let a = anomalies(&r, &[r.clone()], 1, 3);
    // The note's counts stand beside its own repeat's opened, not the median's.
    assert_eq!(
        a[0],
        "h2: connection churn: 40 connections opened for 4 configured (median of 3 repeats); \
         in repeat 1, 41 opened and the server closed connections 36 times with GOAWAY, about \
         every 100 requests"
    );
    // One repeat: the note is that repeat's, as the opened count is.
    let a = anomalies(&r, &[r.clone()], 1, 1);
    let note = "the server closed connections 36 times with GOAWAY, about every 100 requests";
    assert!(a[0].ends_with(&format!("configured: {note}")), "{}", a[0]);
}

#[test]
fn anomalies_say_when_the_server_capped_the_streams() {
    let mut r = row(Variant::H2c, [100.0, 100.0, 100.0]);
    r.shape.streams = 32;
    r.streams_capped = Some(16);
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 3);
    assert_eq!(
        a,
        [
            "h2c: the server allows 16 concurrent streams per connection, so this row ran 4x16 \
          (64 requests in flight, not 128)"
        ],
    );
}

fn shaped(variant: Variant, connections: u32, streams: u32, rps: f64) -> Row {
    let mut r = row(variant, [rps, rps, rps]);
    r.shape = Shape {
        connections,
        streams,
    };
    r.fewest_connections = u64::from(connections);
    r.connections = f64::from(connections);
    r.runs = 1;
    r.fewest_succeeded = r.succeeded;
    r
}

#[test]
fn a_ratio_between_rows_of_different_in_flight_says_so() {
    // wan, 600 ms, from the review: 4x32 against h1's 64 reads "1.9x" from the shapes alone.
    let rows = [
        shaped(Variant::H1, 64, 1, 1493.0),
        shaped(Variant::H2c, 4, 32, 2773.0),
    ];
    let v = verdict(&rows, Variant::H1, DELAYED);
    assert!(
        v.line.starts_with(
            "h2c fastest, 1.86x h1 (rows differ in requests in flight: 128 vs 64, \
             about their in-flight ratio (2.00x); single run"
        ),
        "{}",
        v.line
    );
    let counts: Vec<(&str, u64)> = v
        .in_flight
        .iter()
        .map(|f| (f.row.as_str(), f.requests))
        .collect();
    assert_eq!(counts, [("h2c", 128), ("h1", 64)]);
    // On a clean link latency grows with the load, so a ratio near the in-flight one is not
    // read as coming from it (h2c@8x60 at 7.02x h1@64 is multiplexing: h1 at 480 ran slower).
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line.starts_with(
            "h2c fastest, 1.86x h1 (rows differ in requests in flight: 128 vs 64; single run"
        ),
        "{}",
        v.line
    );
}

#[test]
fn equal_in_flight_needs_no_note_even_when_a_server_capped_the_streams() {
    let mut capped = shaped(Variant::H2c, 4, 32, 2773.0);
    capped.streams_capped = Some(16);
    for h2c in [shaped(Variant::H2c, 4, 16, 2773.0), capped] {
        let rows = [shaped(Variant::H1, 64, 1, 1400.0), h2c];
        let v = verdict(&rows, Variant::H1, CLEAN);
        assert!(!v.line.contains("in flight"), "{}", v.line);
        assert!(v.in_flight.is_empty());
    }
}

#[test]
fn tied_rows_of_different_in_flight_say_so_without_a_ratio() {
    let rows = [
        shaped(Variant::H1, 64, 1, 1500.0),
        shaped(Variant::H2c, 4, 32, 1490.0),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line
            .starts_with("tie: h1 ≈ h2c (too close to call; rows differ in requests in flight: h1 64, h2c 128; single run"),
        "{}",
        v.line
    );
}

/// Two rows where the baseline is the fastest: the other row is named with its ratio and the
/// in-flight note (the line read "h2c fastest" alone, the 0.82x and the 512 vs 128 unsaid).
#[test]
fn two_rows_led_by_the_baseline_name_the_other() {
    let many = |mut r: Row| {
        (r.started, r.succeeded, r.fewest_succeeded) = (100_004, 100_000, 100_000);
        r
    };
    let rows = [
        many(shaped(Variant::H2c, 8, 64, 3000.0)),
        many(shaped(Variant::H2, 4, 32, 2460.0)),
    ];
    let v = verdict(&rows, Variant::H2c, CLEAN);
    assert!(
        v.line
            .contains("; slowest h2 0.82x h2c (rows differ in requests in flight: 128 vs 512)"),
        "{}",
        v.line
    );
    let counts: Vec<u64> = v.in_flight.iter().map(|f| f.requests).collect();
    assert_eq!(counts, [512, 128], "{:?}", v.in_flight);
}

/// One repeat that completed nothing makes the row too thin to rank, whatever the others
/// completed (their average hid it: 88 of 2 x 8 read 5.5 per request in flight).
#[test]
fn a_repeat_that_completed_nothing_is_too_thin_to_rank() {
    let mut r = shaped(Variant::H2c, 1, 8, 176.0);
    r.runs = 2;
    r.succeeded = 88;
    r.started = 96;
    r.fewest_succeeded = 0;
    let why = unfit(&r).expect("unfit");
    assert!(
        why.contains("0.0 per request in flight in its thinnest run"),
        "{why}"
    );
}

#[test]
fn the_slowest_rows_ratio_says_when_its_in_flight_differs() {
    let rows = [
        shaped(Variant::H1, 64, 1, 1500.0),
        shaped(Variant::H2c, 4, 16, 3000.0),
        shaped(Variant::H1Close, 32, 1, 300.0),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line.ends_with(
            "; slowest h1-close 0.20x h1 (a new connection per request; \
             rows differ in requests in flight: 32 vs 64)"
        ),
        "{}",
        v.line
    );
}

/// A single run of `seconds` that completed `ok` of `started` requests, opening `opened` connections.
fn run_of(shape: (Variant, u32, u32), seconds: f64, started: u64, ok: u64, opened: u64) -> Row {
    let (variant, connections, streams) = shape;
    let mut r = shaped(variant, connections, streams, ok as f64 / seconds);
    r.seconds = seconds;
    r.started = started;
    r.succeeded = ok;
    r.fewest_succeeded = ok;
    r.cut_off = started - ok;
    r.fewest_connections = opened;
    r.connections = opened as f64;
    let scale = (f64::from(connections) / opened.max(1) as f64).max(1.0);
    r.ceiling_rps = started as f64 / seconds * scale;
    r
}

/// Counts read as the anomaly lines beside them do: "1,104 of 1,296", not "1104 of 1296".
#[test]
fn a_thin_row_s_counts_have_thousands_separators() {
    let row = run_of((Variant::H1, 2000, 1), 1.0, 3296, 1104, 2000);
    let why = unfit(&row).unwrap();
    assert!(why.starts_with("completed 1,104 of 3,296 started"), "{why}");
}

#[test]
fn rows_with_most_requests_cut_off_name_no_winner() {
    // rate/large from the review: 94% and 87% of the started requests were cut off.
    let rows = [
        run_of((Variant::H1, 32, 1), 1.0, 34, 2, 32),
        run_of((Variant::H2c, 1, 32), 1.0, 37, 5, 1),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(
        v.line,
        "no verdict: h1 completed 2 of 34 started in 1 s, h2c completed 5 of 37 started in 1 s; \
         run longer with --duration"
    );
    assert_eq!(v.fastest, None);
    assert_eq!(v.not_ranked.len(), 2);
}

#[test]
fn fewer_connections_than_the_shape_asked_name_no_winner() {
    // severe from the review: h3 "fastest" with 2 of its 4 connections opened.
    let rows = [
        run_of((Variant::H1, 64, 1), 0.6, 340, 288, 64),
        run_of((Variant::H3, 4, 16), 0.6, 1282, 1218, 2),
    ];
    let v = verdict(&rows, Variant::H1, LOSSY);
    assert_eq!(
        v.line,
        "no verdict: h3 opened 2 of 4 connections; a --warmup over 1 s lets lost handshakes \
         retry (TCP's first wait is 1 s)"
    );
    assert_eq!(v.fastest, None);
}

#[test]
fn few_completions_per_request_in_flight_are_too_thin_to_rank() {
    // 2.2 per request in flight: one round more or less moves req/s by 45%.
    let rows = [
        run_of((Variant::H1, 64, 1), 0.6, 340, 288, 64),
        run_of((Variant::H2, 4, 32), 0.6, 416, 288, 4),
    ];
    let v = verdict(&rows, Variant::H1, LOSSY);
    assert!(
        v.line.starts_with(
            "no verdict: h2 completed 288 of 416 started in 0.6 s, 2.2 per request in flight;"
        ),
        "{}",
        v.line
    );
}

#[test]
fn a_thin_row_that_could_not_have_won_is_left_out_not_blocking() {
    let rows = [
        run_of((Variant::H1, 64, 1), 0.6, 352, 288, 64),
        run_of((Variant::H1Close, 64, 1), 0.6, 74, 55, 64),
        run_of((Variant::H3, 4, 16), 0.6, 1282, 1218, 4),
    ];
    let v = verdict(&rows, Variant::H1, LOSSY);
    assert_eq!(v.fastest, Some(Variant::H3));
    assert!(v.line.starts_with("h3 fastest, 4.23x h1 ("), "{}", v.line);
    assert!(
        v.line.ends_with(
            "; not ranked, though below h3 even had all they left in flight completed: \
             h1-close (completed 55 of 74 started in 0.6 s, 0.9 per request in flight)"
        ),
        "{}",
        v.line
    );
    // A thin baseline gives no ratio: it would be as thin.
    let rows = [
        run_of((Variant::H1, 64, 1), 0.6, 100, 64, 64),
        run_of((Variant::H3, 4, 16), 0.6, 1282, 1218, 4),
    ];
    let v = verdict(&rows, Variant::H1, LOSSY);
    assert!(v.line.starts_with("h3 fastest (single run"), "{}", v.line);
}

#[test]
fn a_difference_under_one_round_of_requests_in_flight_is_a_tie() {
    // wan, 600 ms, from the review: 64 in flight move req/s in steps of 107; 1,493 vs 1,387.
    let rows = [
        run_of((Variant::H1, 64, 1), 0.6, 896, 832, 64),
        run_of((Variant::H3, 2, 32), 0.6, 960, 896, 2),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(
        v.line,
        "tie: h3 ≈ h1 (too close to call; by median h3 1.08x h1; single run: differences under 5% \
         or of at most one round of requests in flight (107 req/s) are ties)"
    );
    // Rows whose rounds differ: the largest is quoted as what it is, a bound ("512 req/s"
    // read as every pair's margin, though h3 200 req/s behind was not tied).
    let rows = [
        run_of((Variant::H1, 256, 1), 0.5, 3000, 2000, 256),
        run_of((Variant::H2c, 4, 16), 0.5, 3064, 3000, 4),
        run_of((Variant::H3, 4, 16), 0.5, 2964, 2900, 4),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(v.line.contains("(up to 512 req/s) are ties"), "{}", v.line);
}

#[test]
fn anomalies_flag_rows_too_thin_to_rank() {
    let thin = run_of((Variant::H1, 32, 1), 1.0, 34, 2, 32);
    let lost = run_of((Variant::H3, 4, 16), 0.6, 1282, 1218, 2);
    let rows = [thin.clone(), lost.clone()];
    let a = anomalies(&thin, &rows, 1, 1);
    assert!(
        a.contains(&"h1: too thin to rank: completed 2 of 34 started in 1 s".to_string()),
        "{a:?}"
    );
    let a = anomalies(&lost, &rows, 1, 1);
    assert!(
        a[0].starts_with("h3: too thin to rank: opened 2 of 4 connections (the missing ones'"),
        "{a:?}"
    );
}

#[test]
fn a_few_missing_connections_of_many_are_flagged_but_ranked() {
    // 61 of 64: at most 4.7% low, inside the 5% a single run's tie rule already allows.
    let h1 = run_of((Variant::H1, 64, 1), 0.6, 741, 678, 61);
    let h2c = run_of((Variant::H2c, 4, 16), 0.6, 1617, 1489, 4);
    let rows = [h1.clone(), h2c];
    let v = verdict(&rows, Variant::H1, LOSSY);
    assert!(v.line.starts_with("h2c fastest, 2.20x h1"), "{}", v.line);
    let a = anomalies(&h1, &rows, 1, 1);
    assert!(
        a[0].starts_with("h1: opened 61 of 64 connections (the missing ones'")
            && a[0].ends_with("5% or fewer, so it is still ranked"),
        "{a:?}"
    );
    // 60 of 64 is over 5%.
    let rows = [
        run_of((Variant::H1, 64, 1), 0.6, 741, 678, 60),
        rows[1].clone(),
    ];
    assert_eq!(
        verdict(&rows, Variant::H1, LOSSY).not_ranked[0].reason,
        "opened 60 of 64 connections"
    );
}

/// On a link too slow for the handshakes (rate 1kbit), the requests in flight were mostly
/// waiting for a connection: said, since the row's `new conns` read 9 for a shape of 64.
#[test]
fn warm_up_requests_in_flight_say_how_few_connections_had_opened() {
    let mut h1 = run_of((Variant::H1, 64, 1), 0.3, 0, 0, 9);
    h1.cut_off = 64;
    h1.ceiling_rps = f64::INFINITY;
    assert_eq!(
        unfit(&h1).unwrap(),
        "completed nothing in 0.3 s: its 64 warm-up requests were still in flight at the end \
         (only 9 of 64 connections had opened)"
    );
}

#[test]
fn a_row_whose_warm_up_requests_outlived_the_warm_up_says_so_not_lost_handshakes() {
    // jitter/large from the review: h3's 32 warm-up requests were all still in flight.
    let mut h3 = run_of((Variant::H3, 1, 32), 1.0, 0, 0, 0);
    h3.cut_off = 32;
    h3.ceiling_rps = f64::INFINITY; // no connection counted: what it could do is unknown
    let rows = [run_of((Variant::H1, 32, 1), 1.0, 526, 494, 32), h3];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(
        v.line,
        "no verdict: h3 completed nothing in 1 s: its 32 warm-up requests were still in flight \
         at the end (no connection had opened); run longer with --duration"
    );
}

#[test]
fn anomalies_show_cut_offs_queue_drops_and_a_relay_that_could_not_keep_up() {
    // dup/large from the review: the link's queue dropped 8% and the relay ran late.
    let mut r = run_of((Variant::H3, 1, 32), 1.0, 690, 658, 1);
    r.link_queue_drops = 3022;
    r.link_packets_in = 37_000;
    r.link_late = 475;
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 1);
    assert!(
        a.iter().any(|l| l.starts_with(
            "h3: the link's queue dropped 3,022 packets (8.2% of those offered) on top of"
        )),
        "{a:?}"
    );
    assert!(
        a.iter().any(|l| l.starts_with(
            "h3: 475 packets (1.3%) left the link's relay more than 1 ms after their time"
        )),
        "{a:?}"
    );
    // One is one packet ("1 packets (2.0%)").
    let mut few = r.clone();
    few.link_packets_in = 50;
    few.link_late = 1;
    few.link_queue_drops = 0;
    let a = anomalies(&few, std::slice::from_ref(&few), 1, 1);
    assert!(
        a.iter().any(|l| l.starts_with("h3: 1 packet (2.0%) left")),
        "{a:?}"
    );
    // 15 late of 37,000 move nothing: no line.
    r.link_late = 15;
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 1);
    assert!(!a.iter().any(|l| l.contains("could not keep up")), "{a:?}");
    assert!(!a.iter().any(|l| l.contains("still in flight")), "{a:?}");
    // severe, 600 ms: 64 of 352 (18%) still in flight at the end.
    let r = run_of((Variant::H2, 4, 16), 0.6, 352, 288, 4);
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 1);
    assert!(
        a.iter().any(|l| {
            l
            == "h2: 18% of its requests (64 of 352) were still in flight when the measured period \
             ended"
        }),
        "{a:?}"
    );
    assert_eq!(bytes_high(&r).map(format_ratio).as_deref(), Some("1.22x"));
}

/// Warm-up requests that ended in the period put bytes in B/req and no request: with 4 of them
/// and 4 cut off over 56 completed, h1's 278 B exchange read 299 (7.5% high) without a note,
/// as only the cut-off share (7%) was looked at. One line per table names every such row.
#[test]
fn bytes_of_warmup_requests_that_ended_in_the_period_are_flagged() {
    let mut r = run_of((Variant::H1, 4, 1), 0.6, 60, 56, 4);
    r.warmup_finished = 4;
    let mut h2 = run_of((Variant::H2, 4, 1), 0.6, 300, 296, 4);
    h2.warmup_finished = 4;
    assert_eq!(
        bytes_note(&[r.clone(), h2.clone()]).as_deref(),
        Some(
            "B/req divides the period's bytes by its completed requests, while warm-up requests \
             that ended in it, failed ones, ones still in flight at its end and resent ones \
             moved bytes too, so it may read high: h1 up to 1.14x"
        )
    );
    r.warmup_finished = 0;
    assert_eq!(bytes_note(&[r.clone(), h2.clone()]), None);
    // Resent requests (behind GOAWAYs or closes) were written again: 231 resent for 400
    // completed read 105.7 B a GET of 67.
    r.retried = 8;
    assert!(bytes_note(&[r, h2]).is_some_and(|n| n.ends_with("h1 up to 1.21x")));
}

#[test]
fn no_ratio_to_a_baseline_whose_client_was_saturated() {
    // clean, from the review: h1 at 95% of the client's CPU, "h2 fastest, 4.5x h1".
    let mut h1 = shaped(Variant::H1, 64, 1, 96_013.0);
    h1.client_cpu_max = Some(0.95);
    h1.succeeded = 57_608;
    let mut h2 = shaped(Variant::H2, 4, 16, 431_413.0);
    h2.succeeded = 258_848;
    let rows = [h1, h2];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(
        v.line,
        "h2 fastest (no ratio to h1: its client was saturated, so its req/s is the client's \
         limit; single run: differences under 5% are ties)"
    );
}

/// h1 at 64 connections held back by its client (95% of its CPU), h2 at `h2_rps` and h3 at
/// 20,000 req/s, both at 4x16.
fn beside_a_saturated_h1(h2_rps: f64, h2_succeeded: u64) -> [Row; 3] {
    let mut h1 = shaped(Variant::H1, 64, 1, 96_013.0);
    h1.client_cpu_max = Some(0.95);
    h1.succeeded = 57_608;
    let mut h2 = shaped(Variant::H2, 4, 16, h2_rps);
    h2.succeeded = h2_succeeded;
    let mut h3 = shaped(Variant::H3, 4, 16, 20_000.0);
    h3.succeeded = 12_000;
    [h1, h2, h3]
}

/// A baseline held back by its client that is not the fastest: the fastest gets no ratio, and
/// the line named no slowest row either (`httpvs compare`'s large payload here: "h2c fastest
/// (no ratio to h1 ...)" and nothing of h3). The slowest's ratio is a bound there too.
#[test]
fn a_saturated_baseline_that_is_not_fastest_bounds_the_slowest_ratio() {
    let rows = beside_a_saturated_h1(431_413.0, 258_848);
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(
        v.line,
        "h2 fastest (no ratio to h1: its client was saturated, so its req/s is the client's \
         limit; single run: differences under 5% are ties); slowest h3 ≤0.21x h1"
    );
    // The baseline itself slowest: no ratio of it to itself.
    let mut h3 = shaped(Variant::H3, 4, 16, 200_000.0);
    h3.succeeded = 120_000;
    let rows = [rows[0].clone(), rows[1].clone(), h3];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(!v.line.contains("slowest"), "{}", v.line);
}

/// The fastest row is the baseline, held back by its client: the line said only "h1 fastest
/// (spread ±0%)", naming no slowest row and not why. The slowest's ratio is now a bound.
#[test]
fn a_saturated_fastest_baseline_bounds_the_slowest_ratio() {
    let rows = beside_a_saturated_h1(43_141.0, 25_884);
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(
        v.line,
        "h1 fastest (its client was saturated, so it may be faster still; single run: \
         differences under 5% are ties); slowest h3 ≤0.21x h1"
    );
    // A slowest row held back too has no bound to give.
    let mut rows = rows;
    rows[2].client_cpu_max = Some(0.97);
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(!v.line.contains("slowest"), "{}", v.line);
    // A bound keeps the slowest row's usual reason (it went without one).
    let mut close = shaped(Variant::H1Close, 64, 1, 4_000.0);
    close.succeeded = 2_400;
    let rows = [rows[0].clone(), rows[1].clone(), close];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line
            .ends_with("slowest h1-close ≤0.04x h1 (a new connection per request)"),
        "{}",
        v.line
    );
}

#[test]
fn b_per_req_is_flagged_when_cut_off_transfers_inflate_it() {
    // rate/large from the review: "466.6k B/req" for a 64 KiB response, 2 completed, 32 cut off.
    let r = run_of((Variant::H1, 32, 1), 1.0, 34, 2, 32);
    let note = bytes_note(std::slice::from_ref(&r)).unwrap_or_default();
    assert!(
        note.ends_with("so it may read high: h1 up to 17x"),
        "{note}"
    );
}

/// h1-close opens a connection per request: fewer of them than its shape's slots is not a row
/// short of connections (it was read as "opened 56 of 64" on `severe`).
#[test]
fn h1_close_is_not_short_of_connections() {
    let r = run_of((Variant::H1Close, 64, 1), 1.0, 400, 390, 56);
    assert_eq!(unfit(&r), None);
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 1);
    assert!(!a.iter().any(|l| l.contains("opened 56 of 64")), "{a:?}");
    // The same figures on keep-alive h1 are: 8 of 64 connections never opened.
    let r = run_of((Variant::H1, 64, 1), 1.0, 400, 390, 56);
    assert!(unfit(&r).is_some_and(|why| why.contains("opened 56 of 64")));
}

/// A row whose responses were mostly not 2xx (a URL that answers 500) is not ranked: it used to
/// win "h2c fastest, 12x h1" on error pages, with only an anomaly line to say so.
#[test]
fn a_row_of_error_answers_is_not_ranked() {
    let mut bad = row(Variant::H2c, [3000.0, 3100.0, 3200.0]);
    bad.non_2xx = 1000;
    bad.non_2xx_top = Some(500);
    let rows = [row(Variant::H1, [100.0, 100.0, 100.0]), bad.clone()];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_ne!(v.fastest, Some(Variant::H2c), "{}", v.line);
    assert_eq!(v.not_ranked.len(), 1, "{}", v.line);
    let a = anomalies(&bad, &rows, 1, 3);
    assert!(
        a.iter()
            .any(|l| l
                .starts_with("h2c: not ranked: 100.0% of its responses were not 2xx (mostly 500)")),
        "{a:?}"
    );
    // The winner's line names the row left out.
    assert!(
        v.line.ends_with("; not ranked: h2c (mostly not 2xx)"),
        "{}",
        v.line
    );
    // Every row on error answers: no verdict, saying why.
    let mut h1 = row(Variant::H1, [100.0, 100.0, 100.0]);
    h1.non_2xx = 1000;
    h1.non_2xx_top = Some(500);
    let v = verdict(&[h1, bad.clone()], Variant::H1, CLEAN);
    assert!(
        v.line
            .starts_with("no verdict: h1 100.0% of its responses were not 2xx"),
        "{}",
        v.line
    );
    assert!(!v.line.contains("--duration"), "{}", v.line);
    // A few errors among many 2xx are an anomaly line, not a reason to leave the row out.
    bad.non_2xx = 10;
    assert_eq!(unfit(&bad), None);
}

/// Counts in anomaly lines carry thousands separators, as the tables do, and a share that
/// rounds to nothing reads `<0.1%`, not `0.0%`.
#[test]
fn anomaly_counts_are_grouped_and_tiny_shares_are_not_zero() {
    let mut r = row(Variant::H2c, [3000.0, 3100.0, 3200.0]);
    r.succeeded = 320_270;
    r.errors = 16;
    r.retried = 5_655;
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 3);
    assert!(
        a.contains(&"h2c: 16 errors (<0.1% of requests)".to_string()),
        "{a:?}"
    );
    assert!(
        a.iter()
            .any(|l| l.starts_with("h2c: 5,655 requests retried on a new connection")),
        "{a:?}"
    );
}

/// A repeat that completed nothing for half its period (the review's h2c at 648 req/s beside
/// 12,360 and 10,957) is flagged, where its ±53% spread stood unexplained.
#[test]
fn a_stalled_repeat_is_flagged() {
    let mut r = row(Variant::H2c, [648.0, 10_957.0, 12_360.0]);
    r.stall_seconds = 0.5;
    let a = anomalies(&r, std::slice::from_ref(&r), 1, 3);
    assert!(
        a.iter()
            .any(|l| l
                .starts_with("h2c: a repeat completed nothing for 0.5 s of its measured period")),
        "{a:?}"
    );
}

/// `completed 43 of 60 started` beside `64 of 107 still in flight`: the warm-up's requests in
/// flight are named too, so the two lines add up (43 + 17 + 47 = 107).
#[test]
fn a_thin_row_names_the_warm_up_requests_still_in_flight() {
    let mut r = run_of((Variant::H1Close, 64, 1), 0.6, 60, 43, 61);
    r.cut_off = 64;
    let why = unfit(&r).expect("too thin");
    assert_eq!(
        why,
        "completed 43 of 60 started in 0.6 s, and 47 started in the warm-up were still in flight"
    );
}

/// A row at 290 req/s against 140,420 is 0.002x, not `0.00x`.
#[test]
fn tiny_ratios_keep_a_digit() {
    assert_eq!(format_ratio(290.0 / 140_420.0), "0.002x");
    assert_eq!(format_ratio(0.0004), "<0.001x");
    // A row of 0 req/s read "<0.001x", as if it had completed something.
    assert_eq!(format_ratio(0.0), "0x");
    assert_eq!(format_ratio(0.62), "0.62x");
    assert_eq!(format_ratio(3.21), "3.21x");
    // A 5% tie and a 3% win keep their second decimal.
    assert_eq!(format_ratio(1.05), "1.05x");
    assert_eq!(format_ratio(1.03), "1.03x");
}

/// The other protocol did not run (the server went away): the one row that did is not called
/// fastest, since there was nothing to compare it with.
#[test]
fn a_lone_row_beside_rows_that_did_not_run_is_no_winner() {
    let mut gone = row(Variant::H2c, [0.0, 0.0, 0.0]);
    gone.failure = Some("connection refused".into());
    let rows = [row(Variant::H1, [100.0, 100.0, 100.0]), gone];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(v.fastest, None);
    assert_eq!(v.line, "no verdict: only h1 ran (h2c did not run)");
}

/// The server went away mid-matrix: two rows ran and are ranked, and the line names the one
/// that did not run (it read "h1 fastest ...; slowest h1-close ..." as if over the whole table).
#[test]
fn rows_that_did_not_run_are_named_beside_a_verdict() {
    let mut gone = row(Variant::H2c, [0.0, 0.0, 0.0]);
    gone.failure = Some("connection refused".into());
    let rows = [
        row(Variant::H1, [100.0, 100.0, 100.0]),
        row(Variant::H2, [200.0, 200.0, 200.0]),
        gone,
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(v.fastest, Some(Variant::H2));
    assert!(v.line.starts_with("h2 fastest, 2.00x h1"), "{}", v.line);
    assert!(v.line.ends_with("; did not run: h2c"), "{}", v.line);
}

/// A row that ran but failed every request (the server went away during its cell) is not
/// blamed on lost handshakes ("opened 0 of 4 connections; a --warmup over 1 s lets lost
/// handshakes retry", on loopback), and does not stop the other row's verdict.
#[test]
fn a_row_that_failed_every_request_is_left_out_not_blamed_on_handshakes() {
    let mut refused = run_of((Variant::H2c, 4, 1), 1.0, 176, 0, 0);
    refused.errors = 176;
    refused.cut_off = 0;
    refused.ceiling_rps = 176.0;
    let ok = row(Variant::H1, [100.0, 100.0, 100.0]);
    assert_eq!(
        unfit(&refused).as_deref(),
        Some("failed all 176 requests it ended (see its errors)")
    );
    let v = verdict(&[ok.clone(), refused.clone()], Variant::H1, CLEAN);
    assert_eq!(v.fastest, None);
    assert_eq!(v.line, "no verdict: only h1 ran (h2c failed every request)");
    let three = [ok, row(Variant::H2, [200.0, 200.0, 200.0]), refused];
    let v = verdict(&three, Variant::H1, CLEAN);
    assert_eq!(v.fastest, Some(Variant::H2));
    assert!(
        v.line.ends_with("; not ranked: h2c (every request failed)"),
        "{}",
        v.line
    );
}

/// Repeats whose ranges do not meet, tied by the one-round rule (1105 - 1010 = 95 req/s, under
/// 64 in flight / 0.6 s), say so: they read "inside the spread".
#[test]
fn a_tie_by_one_round_says_so() {
    let mut h1 = row(Variant::H1, [1000.0, 1010.0, 1020.0]);
    let mut h2c = row(Variant::H2c, [1100.0, 1105.0, 1110.0]);
    for r in [&mut h1, &mut h2c] {
        r.shape.connections = 64;
        r.fewest_connections = 64;
        r.connections = 64.0;
        r.seconds = 0.6;
    }
    let v = verdict(&[h1, h2c], Variant::H1, CLEAN);
    assert!(
        v.line
            .starts_with("tie: h2c ≈ h1 (within one round of requests in flight;"),
        "{}",
        v.line
    );
}

/// Repeats that all read the same have no spread: a tie between such rows more than one round
/// apart is the 5% rule's, and says so (it was credited to the one-round rule beside ±0%).
#[test]
fn a_tie_of_rows_without_spread_names_the_five_percent_rule() {
    let mut h2c = row(Variant::H2c, [1430.0, 1430.0, 1430.0]);
    let mut h3 = row(Variant::H3, [1500.0, 1500.0, 1500.0]);
    for r in [&mut h2c, &mut h3] {
        r.shape.connections = 64;
        r.fewest_connections = 64;
        r.connections = 64.0;
        r.seconds = 1.0;
    }
    let v = verdict(&[h2c, h3], Variant::H2c, CLEAN);
    assert!(
        v.line.starts_with("tie: h3 ≈ h2c (too close to call;"),
        "{}",
        v.line
    );
}

/// With several shapes of one protocol, `tied` repeats the protocol; `fastest_row` and
/// `tied_rows` name the rows, as the line does.
#[test]
fn verdict_names_rows_not_only_protocols() {
    let shaped = |variant, streams, rps| Row {
        shape: Shape {
            connections: 4,
            streams,
        },
        // Enough rounds per request in flight to be ranked.
        started: 100_004,
        succeeded: 100_000,
        fewest_succeeded: 33_333,
        ..row(variant, rps)
    };
    let rows = [
        row(Variant::H1, [100.0, 101.0, 102.0]),
        shaped(Variant::H2, 8, [150.0, 160.0, 170.0]),
        shaped(Variant::H2, 32, [155.0, 158.0, 165.0]),
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(v.fastest, Some(Variant::H2), "{}", v.line);
    assert_eq!(v.fastest_row.as_deref(), Some("h2@4x8"));
    assert_eq!(v.tied, vec![Variant::H2]);
    assert_eq!(v.tied_rows, vec!["h2@4x32".to_string()]);
    assert!(v.line.starts_with("tie: h2@4x8 ≈ h2@4x32"), "{}", v.line);
}

/// The baseline is a row: `h1@64` against the baseline `h1@8` gets its ratio and the in-flight
/// note like any other row (it read `h1@64 fastest` with neither, which hid a ratio that came
/// from the shapes alone).
#[test]
fn another_shape_of_the_baseline_protocol_is_compared_with_the_baseline_row() {
    let shaped = |variant, connections, rps| Row {
        shape: Shape {
            connections,
            streams: 1,
        },
        started: 100_064,
        succeeded: 100_000,
        fewest_succeeded: 100_000,
        connections: f64::from(connections),
        fewest_connections: u64::from(connections),
        runs: 1,
        ..row(variant, rps)
    };
    let rows = [
        shaped(Variant::H1, 8, [100.0, 100.0, 100.0]),
        shaped(Variant::H1, 64, [800.0, 800.0, 800.0]),
        shaped(Variant::H2c, 64, [790.0, 790.0, 790.0]),
    ];
    let v = verdict(&rows, Variant::H1, DELAYED);
    assert!(
        v.line.starts_with(
            "tie: h1@64 ≈ h2c (too close to call; by median h1@64 8.00x h1@8; rows differ in \
             requests in flight: 64 vs 8, about their in-flight ratio (8.00x)"
        ),
        "{}",
        v.line
    );
    assert!(!v.in_flight.is_empty(), "{:?}", v.in_flight);
}

/// A slowest row within the tie rule of the baseline is not named slowest against it.
#[test]
fn a_slowest_row_that_ties_with_the_baseline_is_not_called_slowest() {
    let rows = [
        single(Variant::H1Tls, 582.0),
        single(Variant::H3, 1570.0),
        single(Variant::H2, 573.0),
    ];
    let v = verdict(&rows, Variant::H1Tls, CLEAN);
    assert!(v.line.starts_with("h3 fastest, 2.70x h1-tls"), "{}", v.line);
    assert!(!v.line.contains("slowest"), "{}", v.line);
}

/// A slowest row tied with the baseline, which is in the tie, but not with the fastest: the
/// tie leaves it out, and it is named with both (it was in no part of the line).
#[test]
fn a_slowest_row_tied_with_a_tied_baseline_is_still_named() {
    let rows = [
        single(Variant::H1, 1500.0),
        single(Variant::H1Tls, 1540.0),
        single(Variant::H2c, 1510.0),
        single(Variant::H3, 1461.0),
    ];
    let v = verdict(&rows, Variant::H1, DELAYED);
    assert!(v.line.starts_with("tie: h1-tls ≈ h2c ≈ h1"), "{}", v.line);
    assert!(
        v.line
            .ends_with("; slowest h3 0.97x h1 (tied with h1, not with h1-tls)"),
        "{}",
        v.line
    );
}

/// A table of one row (the plan or the probe left one protocol) names no "fastest" of one; the
/// row still stands, so the run has its verdict.
#[test]
fn a_table_of_one_row_says_there_is_nothing_to_compare() {
    let rows = [row(Variant::H2c, [100.0, 101.0, 99.0])];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(
        v.line
            .starts_with("only h2c here: nothing to compare it with"),
        "{}",
        v.line
    );
    assert!(!v.line.contains("fastest"), "{}", v.line);
    assert_eq!(v.fastest, Some(Variant::H2c));
    // Its spread, and no tie rule: there is nothing to tie with.
    assert_eq!(
        v.line,
        "only h2c here: nothing to compare it with (spread ±1%)"
    );
    let mut single = rows[0].clone();
    single.runs = 1;
    let v = verdict(&[single], Variant::H1, CLEAN);
    assert_eq!(v.line, "only h2c here: nothing to compare it with");
}

/// Under loss the verdict names the usual reasons: h3's win by QUIC's per-stream recovery,
/// and h2's loss by head-of-line blocking when its median rose, though h1's p99 (loss
/// recovery's own) hid it from a p99 rule (published: h3 2.97x h1, h2 0.60x, no reason given).
#[test]
fn under_loss_the_reasons_are_named() {
    let with = |variant, rps: f64, p50: f64, p99: f64| {
        let mut r = row(variant, [rps, rps, rps]);
        r.shape.streams = if variant == Variant::H1 { 1 } else { 8 };
        (r.p50_ms, r.p99_ms) = (p50, p99);
        r
    };
    let rows = [
        with(Variant::H1, 1000.0, 20.1, 593.7),
        with(Variant::H2, 600.0, 57.7, 703.9),
        with(Variant::H3, 2970.0, 12.0, 300.0),
    ];
    let v = verdict(&rows, Variant::H1, LOSSY);
    assert!(
        v.line.starts_with(
            "h3 fastest, 2.97x h1 (QUIC recovers a lost packet on its own stream, where TCP \
             holds up every byte behind it;"
        ),
        "{}",
        v.line
    );
    assert!(
        v.line
            .contains("slowest h2 0.60x h1 (head-of-line blocking"),
        "{}",
        v.line
    );
    // On a clean link neither is said.
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert!(!v.line.contains("QUIC recovers"), "{}", v.line);
    assert!(!v.line.contains("head-of-line"), "{}", v.line);
}

/// A win the in-flight ratio accounts for on a delayed link gets no loss reason: h3 at 2x8
/// against h1 at 8 read "QUIC recovers a lost packet" at 2.00x, the in-flight ratio alone.
#[test]
fn a_win_the_in_flight_ratio_explains_gets_no_loss_reason() {
    let mut h1 = row(Variant::H1, [1000.0; 3]);
    (h1.shape.connections, h1.fewest_connections) = (8, 8);
    let mut h3 = row(Variant::H3, [2000.0; 3]);
    (h3.shape.connections, h3.shape.streams) = (2, 8);
    let v = verdict(&[h1, h3], Variant::H1, LOSSY);
    assert!(!v.line.contains("QUIC recovers"), "{}", v.line);
    assert!(
        v.line.contains("about their in-flight ratio (2.00x)"),
        "{}",
        v.line
    );
}

/// The same for the slowest row: h2 at 4x8 against h1-tls at 64 connections, 0.49x on a
/// lossy link, read "head-of-line blocking" beside "about their in-flight ratio (0.50x)".
#[test]
fn a_loss_the_in_flight_ratio_explains_gets_no_other_reason() {
    let mut h1 = row(Variant::H1Tls, [1000.0; 3]);
    (h1.shape.connections, h1.fewest_connections) = (64, 64);
    let mut h2 = row(Variant::H2, [490.0; 3]);
    (h2.shape.connections, h2.shape.streams) = (4, 8);
    (h2.p50_ms, h2.p99_ms) = (h1.p50_ms * 2.0, h1.p99_ms * 2.0);
    let mut h3 = row(Variant::H3, [1000.0; 3]);
    (h3.shape.connections, h3.shape.streams) = (4, 16);
    let v = verdict(&[h1, h2, h3], Variant::H1Tls, LOSSY);
    assert!(v.line.contains("slowest h2 0.49x h1-tls"), "{}", v.line);
    assert!(
        v.line.contains("about their in-flight ratio (0.50x)"),
        "{}",
        v.line
    );
    assert!(!v.line.contains("head-of-line"), "{}", v.line);
}

/// The link's traits come from what its netem strings set, not the words in them.
#[test]
fn link_traits_follow_the_impairment_not_its_words() {
    let of = |up: &str, down: &str| {
        let l = LinkTraits::of(&[up, down]);
        (l.lossy, l.delayed)
    };
    assert_eq!(
        of("delay 10ms loss 0%", "delay 10ms loss 0%"),
        (false, true)
    );
    assert_eq!(of("", "loss 1%"), (true, false));
    assert_eq!(of("corrupt 5%", ""), (true, false));
    assert_eq!(of("loss gemodel 1% 10% 70% 0.1%", ""), (true, false));
    assert_eq!(of("rate 1mbit", "delay 0ms 5ms"), (false, true));
    assert_eq!(of("", ""), (false, false));
}

/// h3 beside TCP rows on a lossy link: one line says their B/req count different things.
#[test]
fn h3_bytes_beside_tcp_on_a_lossy_link_are_flagged() {
    let mut rows = [row(Variant::H1, [1000.0; 3]), row(Variant::H3, [1000.0; 3])];
    (rows[0].bytes_per_request, rows[1].bytes_per_request) = (295.0, 312.0);
    let note = lossy_bytes_note(&rows, LOSSY).unwrap_or_default();
    assert!(
        note.starts_with("B/req on a lossy link: h3's counts"),
        "{note}"
    );
    assert_eq!(lossy_bytes_note(&rows, DELAYED), None);
    assert_eq!(lossy_bytes_note(&rows[..1], LOSSY), None);
    // h3 reading below the TCP rows overstates nothing (it was flagged at 72.8k against 73.5k).
    rows[1].bytes_per_request = 290.0;
    assert_eq!(lossy_bytes_note(&rows, LOSSY), None);
}

/// A row whose server refused every connection failed everything: it is not ranked for that,
/// not "too thin" for handshakes the link lost (it read so, with the link's 1 s retry).
#[test]
fn a_row_that_failed_everything_is_not_blamed_on_lost_handshakes() {
    let mut r = row(Variant::H1, [0.0, 0.0, 0.0]);
    r.succeeded = 0;
    r.fewest_succeeded = 0;
    r.errors = 47;
    r.started = 111;
    r.connections = 0.0;
    r.fewest_connections = 0;
    let a = anomalies(&r, &[r.clone()], 1, 3);
    assert_eq!(a.len(), 1, "{a:?}");
    assert!(
        a[0].starts_with("h1: not ranked: failed all 47 requests"),
        "{}",
        a[0]
    );
    assert!(!a[0].contains("handshake"), "{}", a[0]);
}

/// A row with connections refused mid-cell says the server went away: a server killed during
/// the h2 cell was ranked "0.23x" with no word of it.
#[test]
fn errors_name_their_main_kind_and_refusals_a_server_gone() {
    let mut r = row(Variant::H2, [100.0, 100.0, 100.0]);
    r.errors = 192;
    r.errors_top = Some("refused".into());
    let a = anomalies(&r, &[r.clone()], 1, 3);
    let line = a
        .iter()
        .find(|l| l.contains("errors"))
        .expect("an errors line");
    assert!(line.contains("mostly refused"), "{line}");
    assert!(
        line.contains("refused new connections during this cell"),
        "{line}"
    );
    r.errors_top = Some("request_timeout".into());
    let a = anomalies(&r, &[r.clone()], 1, 3);
    let line = a
        .iter()
        .find(|l| l.contains("errors"))
        .expect("an errors line");
    assert!(line.ends_with("mostly request_timeout)"), "{line}");
}

/// A no-verdict line still names the rows that did not run, as a ranked line does.
#[test]
fn a_no_verdict_line_names_the_rows_that_did_not_run() {
    let mut gone = row(Variant::H2c, [0.0, 0.0, 0.0]);
    gone.failure = Some("connection refused".into());
    let rows = [
        row(Variant::H1, [100.0, 100.0, 100.0]),
        run_of((Variant::H1Close, 64, 1), 0.3, 200, 10, 10),
        gone,
    ];
    let v = verdict(&rows, Variant::H1, CLEAN);
    assert_eq!(v.fastest, None);
    assert!(v.line.starts_with("no verdict: h1-close "), "{}", v.line);
    assert!(v.line.ends_with("; did not run: h2c"), "{}", v.line);
}
