//! Fuzz target: `httpvs_h2wire::fuzz::hpack` on whatever libFuzzer makes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| httpvs_h2wire::fuzz::hpack(data));
