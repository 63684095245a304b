//! Number formatting shared by the terminal and HTML tables, so both show the same figures.

/// `52,310`.
pub fn thousands(n: f64) -> String {
    let n = n.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `850µs`, `1.24ms`, `38.1ms`, `1.20s`.
pub fn millis(ms: f64) -> String {
    if !ms.is_finite() || ms <= 0.0 {
        "-".into()
    } else if ms < 1.0 {
        format!("{:.0}µs", ms * 1000.0)
    } else if ms < 10.0 {
        format!("{ms:.2}ms")
    } else if ms < 1000.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

/// `203`, `66.1k`, `1.05M` (bytes).
pub fn bytes(n: f64) -> String {
    if !n.is_finite() || n <= 0.0 {
        "-".into()
    } else if n < 10_000.0 {
        format!("{n:.0}")
    } else if n < 1e6 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{:.2}M", n / 1e6)
    }
}

/// `±4%`, or empty for a single run.
pub fn spread(half_range: f64, single: bool) -> String {
    if single {
        String::new()
    } else {
        format!("±{:.0}%", half_range * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(52310.4), "52,310");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(millis(0.85), "850µs");
        assert_eq!(millis(38.14), "38.1ms");
        assert_eq!(bytes(66100.0), "66.1k");
        assert_eq!(spread(0.04, false), "±4%");
    }
}
