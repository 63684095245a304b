//! Human units for the text report: durations, byte counts, rates.

/// 812 → "812µs", 12_340 → "12.34ms", 1_230_000 → "1.23s".
pub fn us(v: u64) -> String {
    us_f(v as f64)
}

/// A duration in µs (fractional), in the best unit.
pub fn us_f(v: f64) -> String {
    if v < 1_000.0 {
        format!("{v:.0}µs")
    } else if v < 1_000_000.0 {
        format!("{:.2}ms", v / 1_000.0)
    } else {
        format!("{:.2}s", v / 1_000_000.0)
    }
}

/// 1536 → "1.50KiB".
pub fn bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = v;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0}B")
    } else {
        format!("{v:.2}{}", UNITS[unit])
    }
}

/// 12345.678 → "12,345.7".
pub fn rate(v: f64) -> String {
    let whole = v.trunc() as u64;
    let tenth = ((v - v.trunc()) * 10.0).round() as u64;
    if tenth >= 10 {
        format!("{}.0", super::diagnosis::group(whole + 1))
    } else {
        format!("{}.{}", super::diagnosis::group(whole), tenth)
    }
}

/// 99.9 → "p99.9", 50.0 → "p50".
pub fn percentile_name(p: f64) -> String {
    let s = format!("{p}");
    format!("p{}", s.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(us(812), "812µs");
        assert_eq!(us(12_340), "12.34ms");
        assert_eq!(us(1_230_000), "1.23s");
        assert_eq!(bytes(1536.0), "1.50KiB");
        assert_eq!(bytes(10.0), "10B");
        assert_eq!(rate(12345.678), "12,345.7");
        assert_eq!(rate(9.96), "10.0");
        assert_eq!(percentile_name(99.9), "p99.9");
        assert_eq!(percentile_name(50.0), "p50");
    }
}
