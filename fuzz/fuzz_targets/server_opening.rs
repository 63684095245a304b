//! Fuzz target: `httpvs_server::fuzz::opening_and_query` on whatever libFuzzer makes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| httpvs_server::fuzz::opening_and_query(data));
