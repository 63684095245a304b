//! Unit and randomized tests of the query parser and the plan draw.

use super::*;
use rand::{Rng, SeedableRng};

fn plan(query: &str, draw: u32) -> ResponsePlan {
    parse_query(query).unwrap().plan(|| draw)
}

#[test]
fn empty_query_is_the_default_plan() {
    let p = plan("", 0);
    assert_eq!(
        p,
        ResponsePlan {
            status: 200,
            size: None,
            delay: None,
            close: false
        }
    );
}

#[test]
fn sizes_take_binary_suffixes() {
    assert_eq!(plan("size=100", 0).size, Some(100));
    assert_eq!(plan("size=1k", 0).size, Some(1024));
    assert_eq!(plan("size=64K", 0).size, Some(65536));
    assert_eq!(plan("size=1m", 0).size, Some(1 << 20));
    assert_eq!(plan("size=2MiB", 0).size, Some(2 << 20));
    assert_eq!(plan("size=0", 0).size, Some(0));
}

#[test]
fn delays_take_units() {
    assert_eq!(plan("delay=10ms", 0).delay, Some(Duration::from_millis(10)));
    assert_eq!(plan("delay=1s", 0).delay, Some(Duration::from_secs(1)));
    assert_eq!(
        plan("delay=1.5s", 0).delay,
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        plan("delay=250us", 0).delay,
        Some(Duration::from_micros(250))
    );
    assert_eq!(plan("delay=0", 0).delay, None);
}

#[test]
fn status_close_and_headers() {
    let spec = parse_query("status=503&close=1&header=x-a:b&header=X-Trace:%20v%201").unwrap();
    let p = spec.plan(|| 0);
    assert_eq!((p.status, p.close), (503, true));
    assert_eq!(spec.headers.len(), 2);
    assert_eq!(spec.headers[1].0.as_str(), "x-trace");
    assert_eq!(spec.headers[1].1, "v 1");
}

#[test]
fn probability_lists_split_by_cumulative_bounds() {
    let spec = parse_query("status=503:10,429:5").unwrap();
    assert_eq!(spec.plan(|| 0).status, 503);
    assert_eq!(spec.plan(|| 99_999).status, 503);
    assert_eq!(spec.plan(|| 100_000).status, 429);
    assert_eq!(spec.plan(|| 149_999).status, 429);
    assert_eq!(spec.plan(|| 150_000).status, 200);
    let spec = parse_query("delay=1ms:90,200ms:10").unwrap();
    assert_eq!(spec.plan(|| 899_999).delay, Some(Duration::from_millis(1)));
    assert_eq!(
        spec.plan(|| 999_999).delay,
        Some(Duration::from_millis(200))
    );
}

#[test]
fn single_value_never_draws() {
    let spec = parse_query("status=404&size=1k").unwrap();
    let p = spec.plan(|| panic!("no draw needed"));
    assert_eq!((p.status, p.size), (404, Some(1024)));
}

#[test]
fn unknown_parameters_are_ignored() {
    assert_eq!(plan("foo=bar&x", 0).status, 200);
}

#[test]
fn malformed_values_name_the_parameter() {
    let cases = [
        ("size=abc", "size"),
        ("size=1x", "size"),
        ("size=99999999999g", "size"),
        ("delay=soon", "delay"),
        ("delay=11m", "delay"),
        ("status=99", "status"),
        ("status=abc", "status"),
        ("status=503:60,429:50", "status"),
        ("status=503,429", "status"),
        ("status=503:x", "status"),
        ("close=maybe", "close"),
        ("header=novalue", "header"),
        ("header=content-length:5", "header"),
        ("header=proxy-connection:x", "header"),
        ("header=bad name:v", "header"),
        ("size=", "size"),
    ];
    for (query, param) in cases {
        let err = parse_query(query).unwrap_err();
        assert_eq!(err.param, param, "{query}");
        assert!(err.to_string().contains(param), "{err}");
    }
}

#[test]
fn percent_decoding_keeps_invalid_escapes() {
    assert_eq!(percent_decode("a%2Cb+c"), "a,b c");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%zz"), "%zz");
}

/// Random probability lists: the draw frequencies match the asked percentages.
#[test]
fn random_lists_draw_the_asked_shares() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for _ in 0..50 {
        let a: u32 = rng.random_range(0..=60);
        let b: u32 = rng.random_range(0..=(100 - a));
        let spec = parse_query(&format!("status=503:{a},429:{b}")).unwrap();
        let mut counts = [0u32; 3];
        for draw in (0..PPM).step_by(97) {
            match spec.plan(|| draw).status {
                503 => counts[0] += 1,
                429 => counts[1] += 1,
                _ => counts[2] += 1,
            }
        }
        let total = f64::from(counts.iter().sum::<u32>());
        let share = |n: u32| 100.0 * f64::from(n) / total;
        assert!((share(counts[0]) - f64::from(a)).abs() < 0.1);
        assert!((share(counts[1]) - f64::from(b)).abs() < 0.1);
    }
}

/// Random byte strings never panic the parser.
#[test]
fn random_queries_never_panic() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    let alphabet = b"sizedlaytuchoer=&:,%+.0123456789kmgs-x";
    for _ in 0..20_000 {
        let len = rng.random_range(0..40);
        let q: String = (0..len)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
            .collect();
        let _ = parse_query(&q);
    }
}
