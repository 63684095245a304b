//! Fuzz target: `httpvs_server::fuzz::h2_server` on whatever libFuzzer makes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| httpvs_server::fuzz::h2_server(data));
