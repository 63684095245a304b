//! Verdict tests on hand-made rows: winners, ties inside the spread, and anomalies.

use super::*;
use crate::measurement::Spread;
use crate::plan::Shape;

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
        errors: 0,
        retried: 0,
        succeeded: 1000,
        non_2xx: 0,
        non_2xx_top: None,
        streams_capped: None,
        client_cpu_max: Some(0.5),
        failure: None,
    }
}

#[test]
fn fastest_with_ratio_and_spread() {
    let rows = [
        row(Variant::H1, [100.0, 100.0, 100.0]),
        row(Variant::H2c, [300.0, 310.0, 324.0]),
        row(Variant::H1Close, [20.0, 21.0, 22.0]),
    ];
    let v = verdict(&rows, Variant::H1, false);
    assert_eq!(v.fastest, Some(Variant::H2c));
    assert!(
        v.line.starts_with("h2c fastest, 3.1x h1 (spread ±4%)"),
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
    let v = verdict(&rows, Variant::H1, false);
    assert_eq!(v.tied, vec![Variant::H2]);
    assert!(
        v.line
            .starts_with("tie: h2c ≈ h2 (inside the spread; by median h2c 1.6x h1; spread ±"),
        "{}",
        v.line
    );
}

#[test]
fn single_runs_tie_within_five_percent() {
    let single = |variant, rps| Row {
        runs: 1,
        ..row(variant, [rps, rps, rps])
    };
    let rows = [single(Variant::H1, 100.0), single(Variant::H2c, 103.0)];
    let v = verdict(&rows, Variant::H1, false);
    assert!(
        v.line
            .starts_with("tie: h2c ≈ h1 (inside the spread; by median h2c 1.0x h1; single run"),
        "{}",
        v.line
    );
    // Three repeats that read the same are not a single run: their spread is ±0%.
    let rows = [
        row(Variant::H1, [100.0, 100.0, 100.0]),
        row(Variant::H2c, [103.0, 103.0, 103.0]),
    ];
    let v = verdict(&rows, Variant::H1, false);
    assert!(
        v.line.contains("spread ±0%: differences under 5%"),
        "{}",
        v.line
    );
}

#[test]
fn nothing_completed() {
    let rows = [row(Variant::H1, [0.0, 0.0, 0.0])];
    assert_eq!(verdict(&rows, Variant::H1, false).fastest, None);
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
    r.runs = 1;
    r
}

#[test]
fn a_ratio_between_rows_of_different_in_flight_says_so() {
    // wan, 600 ms, from the review: 4x32 against h1's 64 reads "1.9x" from the shapes alone.
    let rows = [
        shaped(Variant::H1, 64, 1, 1493.0),
        shaped(Variant::H2c, 4, 32, 2773.0),
    ];
    let v = verdict(&rows, Variant::H1, false);
    assert!(
        v.line.starts_with(
            "h2c fastest, 1.9x h1 (rows differ in requests in flight: 128 vs 64, \
             which alone gives 2.0x on a delay-bound link; single run"
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
}

#[test]
fn equal_in_flight_needs_no_note_even_when_a_server_capped_the_streams() {
    let mut capped = shaped(Variant::H2c, 4, 32, 2773.0);
    capped.streams_capped = Some(16);
    for h2c in [shaped(Variant::H2c, 4, 16, 2773.0), capped] {
        let rows = [shaped(Variant::H1, 64, 1, 1400.0), h2c];
        let v = verdict(&rows, Variant::H1, false);
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
    let v = verdict(&rows, Variant::H1, false);
    assert!(
        v.line
            .starts_with("tie: h1 ≈ h2c (inside the spread; rows differ in requests in flight: h1 64, h2c 128; single run"),
        "{}",
        v.line
    );
}

#[test]
fn the_slowest_rows_ratio_says_when_its_in_flight_differs() {
    let rows = [
        shaped(Variant::H1, 64, 1, 1500.0),
        shaped(Variant::H2c, 4, 16, 3000.0),
        shaped(Variant::H1Close, 32, 1, 300.0),
    ];
    let v = verdict(&rows, Variant::H1, false);
    assert!(
        v.line.ends_with(
            "; slowest h1-close 0.20x h1 (a new connection per request; \
             rows differ in requests in flight: 32 vs 64)"
        ),
        "{}",
        v.line
    );
}
