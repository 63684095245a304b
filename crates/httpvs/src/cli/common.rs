//! Flag values `httpvs load` and `httpvs trace` share: request headers and durations.

use super::usage;
use std::time::Duration;

/// One `-H "Name: value"` flag as a header; a bad one is an exit-2 usage error.
pub(super) fn parse_header(h: &str) -> anyhow::Result<(http::HeaderName, http::HeaderValue)> {
    let bad = || usage(format!("invalid header {h:?}: use \"Name: value\""));
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    let name = http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let value = http::HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
    Ok((name, value))
}

/// A duration flag like `--timeout 10s`; a bad one is an exit-2 usage error naming the flag.
pub(super) fn duration_flag(flag: &str, s: &str) -> anyhow::Result<Duration> {
    parse_duration(s).ok_or_else(|| {
        usage(format!(
            "invalid {flag} {s:?}: use a number with a unit, like 500ms, 10s or 1m"
        ))
    })
}

/// "500ms", "10s", "1.5m", "1h", "800us"; a bare number is seconds.
pub(super) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let secs = value * scale;
    (0.0..1e9)
        .contains(&secs)
        .then(|| Duration::from_secs_f64(secs))
}
