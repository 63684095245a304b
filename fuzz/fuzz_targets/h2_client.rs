//! Fuzz target: `httpvs_load::protocol::h2::fuzz::client` on whatever libFuzzer makes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| httpvs_load::protocol::h2::fuzz::client(data));
