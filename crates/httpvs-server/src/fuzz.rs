//! Fuzzing entries for what the server reads from a client: the opening bytes, the query, the h2 frames.

pub use crate::h2::fuzz_owned_server as h2_server;

/// Classifies `data` as a connection's opening bytes, every prefix of them as they may arrive,
/// and parses it as a response query; never panics, and a prefix's verdict never changes
/// once given.
pub fn opening_and_query(data: &[u8]) {
    let whole = crate::opening::classify(data);
    for end in 0..data.len() {
        if let Some(early) = crate::opening::classify(&data[..end]) {
            assert_eq!(Some(early), whole, "the verdict on {end} bytes changed");
            break;
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(spec) = crate::query::parse_query(text) {
            let mut draw = 0u32;
            let _ = spec.plan(|| {
                draw = draw.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                draw % 1_000_000
            });
        }
    }
}
