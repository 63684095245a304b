//! The fuzz targets' entry points (`fuzz/`) over their seeds and seeded random variations of
//! them, so the ordinary suite runs every parser of a peer's bytes on hostile input without
//! nightly or libFuzzer. A panic here is a finding: `scripts/fuzz` runs the real fuzzer.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

/// Variations tried per target: bounded, a few seconds in a debug build.
const VARIATIONS: usize = 20_000;

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// One random change in the manner of libFuzzer's mutators: flip, set, insert, erase, splice
/// in another seed's bytes, or cut.
fn vary(rng: &mut SmallRng, input: &mut Vec<u8>, others: &[Vec<u8>]) {
    let at = if input.is_empty() {
        0
    } else {
        rng.random_range(0..input.len())
    };
    match rng.random_range(0..6) {
        0 if !input.is_empty() => input[at] ^= 1 << rng.random_range(0..8),
        1 if !input.is_empty() => {
            input[at] = [0, 0xff, 0x7f, 0x80, b'\r', b'\n', b':'][rng.random_range(0..7)]
        }
        2 => input.insert(at, rng.random()),
        3 if !input.is_empty() => {
            let end = (at + rng.random_range(1..8)).min(input.len());
            input.drain(at..end);
        }
        4 => {
            let other = &others[rng.random_range(0..others.len())];
            let from = rng.random_range(0..=other.len());
            let to = (from + rng.random_range(0..32)).min(other.len());
            input.splice(at..at, other[from..to].iter().copied());
        }
        _ => input.truncate(at),
    }
}

fn run(target: &str, seed: u64, entry: fn(&[u8])) {
    let seeds = seeds(target);
    for input in &seeds {
        entry(input);
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..VARIATIONS {
        let mut input = seeds[rng.random_range(0..seeds.len())].clone();
        for _ in 0..rng.random_range(1..6) {
            vary(&mut rng, &mut input, &seeds);
        }
        entry(&input);
    }
}

#[test]
fn hpack_seeds_and_variations() {
    run("hpack", 7541, httpvs_h2wire::fuzz::hpack);
}

#[test]
fn h1_response_seeds_and_variations() {
    run(
        "h1_response",
        9112,
        httpvs_load::protocol::h1::fuzz::response,
    );
}

#[test]
fn h2_client_seeds_and_variations() {
    run("h2_client", 9113, httpvs_load::protocol::h2::fuzz::client);
}

#[test]
fn h3_response_seeds_and_variations() {
    run(
        "h3_response",
        9114,
        httpvs_load::protocol::h3::fuzz::response,
    );
}

#[test]
fn h2_server_seeds_and_variations() {
    run("h2_server", 7540, httpvs_server::fuzz::h2_server);
}

#[test]
fn server_opening_and_query_seeds_and_variations() {
    run(
        "server_opening",
        9110,
        httpvs_server::fuzz::opening_and_query,
    );
}
