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

/// A receive window as given: 16384 → "16KiB", 6 MiB → "6MiB", 2^30-1 → "1GiB-1" (h2load's
/// 2^N-1), else exact bytes ("1,000B").
pub fn window_size(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        let whole = 1u64 << shift;
        if n >= whole && n.is_multiple_of(whole) {
            return format!("{}{unit}", n >> shift);
        }
        let next = n.saturating_add(1);
        if next >= whole && next.is_multiple_of(whole) {
            return format!("{}{unit}-1", next >> shift);
        }
    }
    format!("{}B", super::diagnosis::group(n))
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
        assert_eq!(window_size(16_384), "16KiB");
        assert_eq!(window_size(6 << 20), "6MiB");
        assert_eq!(window_size((1 << 30) - 1), "1GiB-1");
        assert_eq!(window_size(65_535), "64KiB-1");
        assert_eq!(window_size(1_250_000), "1,250,000B");
        assert_eq!(window_size(1), "1B");
    }
}
