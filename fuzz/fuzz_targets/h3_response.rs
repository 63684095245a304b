//! Fuzz target: `httpvs_load::protocol::h3::fuzz::response` on whatever libFuzzer makes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| httpvs_load::protocol::h3::fuzz::response(data));
