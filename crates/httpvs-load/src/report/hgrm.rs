//! Renders a [`Spectrum`] as HdrHistogram's percentile text (`.hgrm`), the "Detailed Percentile
//! spectrum" wrk2 prints and HdrHistogram's plotter reads.
//!
//! Values are milliseconds with 3 decimals, as wrk2's; the columns are the value, its quantile,
//! the samples at or below it and 1/(1-quantile) (`inf` on the last tick), then a footer of
//! `#[...]` lines with the mean, standard deviation, max, count and the histogram's precision.

use super::model::Spectrum;
use std::fmt::Write;

/// The spectrum in `.hgrm` form.
pub fn render(s: &Spectrum) -> String {
    let ms = |us: f64| us / 1000.0;
    let mut out = String::with_capacity(64 * (s.rows.len() + 6));
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    for row in &s.rows {
        let inverse = if row.quantile < 1.0 {
            format!("{:>14.2}", 1.0 / (1.0 - row.quantile))
        } else {
            format!("{:>14}", "inf")
        };
        let _ = writeln!(
            out,
            "{:>12.3} {:>14.12} {:>10} {inverse}",
            ms(row.us as f64),
            row.quantile,
            row.count
        );
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        ms(s.mean_us),
        ms(s.stdev_us)
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        ms(s.max_us as f64),
        s.count
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        s.hdr_buckets, s.hdr_sub_buckets
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build::spectrum;
    use crate::stats::LatencyHistogram;

    /// 1..=1000 µs once each: the ticks climb by HdrHistogram's halvings to 100%.
    fn uniform() -> Spectrum {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000 {
            h.record_us(us);
        }
        spectrum(&h)
    }

    #[test]
    fn ticks_halve_the_distance_to_100_percent_and_end_there() {
        let s = uniform();
        let q: Vec<f64> = s.rows.iter().map(|r| r.quantile).collect();
        assert_eq!(q[0], 0.0);
        // 5 ticks per half: 0, 0.1, ... 0.5, 0.55, ... 0.75, 0.775 ...
        assert!((q[1] - 0.1).abs() < 1e-12, "{q:?}");
        let has = |x: f64| q.iter().any(|t| (t - x).abs() < 1e-12);
        assert!(has(0.5) && has(0.75) && has(0.9), "{q:?}");
        assert_eq!(*q.last().unwrap(), 1.0);
        assert!(q.windows(2).all(|w| w[0] < w[1]), "{q:?}");
        let last = s.rows.last().unwrap();
        assert_eq!((last.us, last.count), (1000, 1000));
        // Exact at 1 µs resolution below 2048 µs: the 50% tick is 500 µs with 500 samples.
        let half = s
            .rows
            .iter()
            .find(|r| (r.quantile - 0.5).abs() < 1e-12)
            .unwrap();
        assert_eq!((half.us, half.count), (500, 500));
        // Levels in percent add up exactly, as Java's: 0.3, not 0.30000000000000004.
        assert!(q.contains(&0.3) && q.contains(&0.8), "{q:?}");
    }

    /// A tick that lands exactly on a bucket's edge takes that bucket, as HdrHistogram's own
    /// iterator: 80 of 100 samples at 3.78 ms and 20 at 20 ms read 20 ms at 0.8 (count 81),
    /// when the report's own p80 was 3.78 ms. Levels summed as fractions of 1 had drifted past.
    #[test]
    fn a_tick_on_a_bucket_edge_takes_that_bucket() {
        let mut h = LatencyHistogram::new();
        for i in 0..100 {
            h.record_us(if i % 5 == 4 { 20_106 } else { 3_782 });
        }
        let s = spectrum(&h);
        for (quantile, count) in [(0.3, 80), (0.75, 80), (0.8, 80)] {
            let row = s.rows.iter().find(|r| r.quantile == quantile).unwrap();
            assert!(row.us < 3_800, "{quantile}: {} µs", row.us);
            assert_eq!(row.count, count, "{quantile}");
        }
        let above = s.rows.iter().find(|r| r.quantile > 0.8).unwrap();
        assert!(above.us > 20_000 && above.count == 100);
    }

    #[test]
    fn renders_wrk2s_columns_and_footer() {
        let text = render(&uniform());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
        );
        assert_eq!(lines[1], "");
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["0.001", "0.000000000000", "1", "1.00"]
        );
        let half = lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some("0.500000000000"))
            .unwrap();
        assert_eq!(
            half.split_whitespace().collect::<Vec<_>>(),
            ["0.500", "0.500000000000", "500", "2.00"]
        );
        let n = lines.len();
        assert_eq!(
            lines[n - 4].split_whitespace().collect::<Vec<_>>(),
            ["1.000", "1.000000000000", "1000", "inf"]
        );
        assert_eq!(
            lines[n - 3],
            "#[Mean    =        0.500, StdDeviation   =        0.289]"
        );
        assert_eq!(
            lines[n - 2],
            "#[Max     =        1.000, Total count    =         1000]"
        );
        assert!(lines[n - 1].starts_with("#[Buckets = "), "{}", lines[n - 1]);
        assert!(lines[n - 1].ends_with("SubBuckets     =         2048]"));
    }

    #[test]
    fn an_empty_run_has_a_header_and_a_footer_only() {
        let text = render(&spectrum(&LatencyHistogram::new()));
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 2);
        assert!(text.contains("Total count    =            0]"));
    }
}
