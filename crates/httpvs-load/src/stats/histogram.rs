//! A latency histogram in microseconds: fixed-size HDR buckets, so memory never grows with the run.

use hdrhistogram::Histogram;
use std::time::Duration;

/// Highest value tracked: one hour in microseconds; larger values are clamped, never dropped.
const HIGHEST_US: u64 = 3_600_000_000;
/// Three significant figures, as wrk2 and h2load's HDR users keep.
const SIGFIG: u8 = 3;

/// Durations recorded with 1 µs resolution and 0.1% precision, with the exact least and
/// greatest values beside the buckets (a bucket is 512 µs wide at 1 s: its edge would put the
/// minimum below a server's promised 1 s floor).
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
    /// The least value recorded, in µs (`u64::MAX` while empty).
    least: u64,
    /// The greatest value recorded, in µs.
    most: u64,
    /// The sum of the values recorded, in µs: the mean is exact, as min and max are (from
    /// the buckets it could read below the min).
    sum: u64,
    /// The sum of the squares of the values recorded, in µs²: the standard deviation is exact
    /// too (from the buckets, 256 µs wide at 500 ms, it read 110 µs for values 131 µs apart).
    sum_squares: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram (its bucket array is allocated once, here).
    pub fn new() -> LatencyHistogram {
        // The bounds are constants that hdrhistogram accepts; failure would be a programming error.
        let inner = Histogram::new_with_bounds(1, HIGHEST_US, SIGFIG)
            .expect("constant histogram bounds are valid");
        LatencyHistogram {
            inner,
            least: u64::MAX,
            most: 0,
            sum: 0,
            sum_squares: 0,
        }
    }

    /// Records one duration (clamped to the tracked range).
    pub fn record(&mut self, d: Duration) {
        // Not `as_micros`: its u128 arithmetic costs more than the record itself.
        let us = d
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(d.subsec_micros()));
        self.record_us(us);
    }

    /// Records `n` values of 0 µs.
    pub fn record_zeros(&mut self, n: u64) {
        if n > 0 {
            self.inner.saturating_record_n(0, n);
            self.least = 0;
        }
    }

    /// Records a value in microseconds.
    pub fn record_us(&mut self, us: u64) {
        let us = us.min(HIGHEST_US);
        self.inner.saturating_record(us);
        self.least = self.least.min(us);
        self.most = self.most.max(us);
        self.sum = self.sum.saturating_add(us);
        self.sum_squares = self
            .sum_squares
            .saturating_add(u128::from(us) * u128::from(us));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.least = self.least.min(other.least);
        self.most = self.most.max(other.most);
        self.sum = self.sum.saturating_add(other.sum);
        self.sum_squares = self.sum_squares.saturating_add(other.sum_squares);
        // Same bounds on both sides, so `add` cannot fail; saturate rather than panic anyway.
        if self.inner.add(&other.inner).is_err() {
            for v in other.inner.iter_recorded() {
                self.inner
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// Empties the histogram, keeping its buckets.
    pub fn reset(&mut self) {
        self.inner.reset();
        self.least = u64::MAX;
        self.most = 0;
        self.sum = 0;
        self.sum_squares = 0;
    }

    /// The mean of the values recorded, exactly, in µs; 0 when empty.
    pub fn mean_us(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.sum as f64 / self.len() as f64
        }
    }

    /// The (population) standard deviation of the values recorded, exactly, in µs; 0 when
    /// empty: n·Σx² − (Σx)² in integers, so values far from 0 and close together keep their
    /// spread (the f64 difference of two large squares would lose it).
    pub fn stdev_us(&self) -> f64 {
        let n = u128::from(self.len());
        if n == 0 {
            return 0.0;
        }
        let sum = u128::from(self.sum);
        let spread = match (n.checked_mul(self.sum_squares), sum.checked_mul(sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / (n * n) as f64,
            // Past u128 (over 10^9 samples of an hour each): the f64 form.
            _ => {
                let mean = self.mean_us();
                (self.sum_squares as f64 / n as f64 - mean * mean).max(0.0)
            }
        };
        spread.sqrt()
    }

    /// The least value recorded, exactly, in µs; 0 when empty.
    pub fn min_us(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.least
        }
    }

    /// The greatest value recorded, exactly, in µs; 0 when empty.
    pub fn max_us(&self) -> u64 {
        self.most
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// Whether no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The value at percentile `p` (0..=100), in microseconds; 0 when empty.
    pub fn percentile_us(&self, p: f64) -> u64 {
        if self.inner.is_empty() {
            return 0;
        }
        // A bucket's upper edge may lie past the greatest value (or its lower one before the
        // least): no percentile reads outside what was recorded.
        self.inner
            .value_at_percentile(p)
            .clamp(self.min_us(), self.max_us())
    }

    /// The underlying HDR histogram, for the report's summaries and buckets.
    pub fn hdr(&self) -> &Histogram<u64> {
        &self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_keeps_percentiles() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for us in 1..=1000 {
            a.record_us(us);
        }
        for us in 1001..=2000 {
            b.record_us(us);
        }
        a.merge(&b);
        assert_eq!(a.len(), 2000);
        let p50 = a.percentile_us(50.0);
        assert!((999..=1001).contains(&p50), "{p50}");
        a.reset();
        assert!(a.is_empty());
        assert_eq!(a.percentile_us(99.0), 0);
    }

    /// The standard deviation is the values' own, not the buckets': 0 for equal values, and
    /// within half the range (it read 0 for 300,143..300,264 µs, and 110.85 for values 131 µs
    /// apart, which no set of values can have).
    #[test]
    fn stdev_is_exact() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.stdev_us(), 0.0);
        for us in [500_206, 500_337] {
            h.record_us(us);
        }
        assert!((h.stdev_us() - 65.5).abs() < 1e-9, "{}", h.stdev_us());
        let mut same = LatencyHistogram::new();
        for _ in 0..5 {
            same.record_us(300_143);
        }
        assert_eq!(same.stdev_us(), 0.0);
        let mut other = LatencyHistogram::new();
        for us in [2, 4, 4, 4, 5, 5, 7] {
            other.record_us(us);
        }
        other.record_us(9);
        same.reset();
        same.merge(&other);
        assert!((same.stdev_us() - 2.0).abs() < 1e-9, "{}", same.stdev_us());
    }

    /// At 1 s a bucket is 512 µs wide: min and max are the values themselves, and no
    /// percentile lies outside them (min read 999,936 µs against a 1,000,216 µs floor).
    #[test]
    fn min_and_max_are_exact_and_percentiles_stay_within_them() {
        let mut h = LatencyHistogram::new();
        for us in [1_000_216, 1_000_300, 1_000_482] {
            h.record_us(us);
        }
        assert_eq!((h.min_us(), h.max_us()), (1_000_216, 1_000_482));
        assert!(
            (h.mean_us() - 1_000_332.666).abs() < 0.01,
            "{}",
            h.mean_us()
        );
        for p in [0.0, 50.0, 99.0, 100.0] {
            let v = h.percentile_us(p);
            assert!((1_000_216..=1_000_482).contains(&v), "p{p} = {v}");
        }
        let mut other = LatencyHistogram::new();
        other.record_us(7);
        h.merge(&other);
        assert_eq!((h.min_us(), h.max_us()), (7, 1_000_482));
        h.reset();
        assert_eq!((h.min_us(), h.max_us()), (0, 0));
    }

    #[test]
    fn huge_values_are_clamped_not_dropped() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_secs(100_000));
        assert_eq!(h.len(), 1);
    }

    /// Property: merging per-worker histograms gives the percentiles of recording everything
    /// in one histogram.
    #[test]
    fn merged_workers_equal_one_histogram() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        for _ in 0..20 {
            let mut all = LatencyHistogram::new();
            let mut merged = LatencyHistogram::new();
            for _ in 0..rng.random_range(1..6) {
                let mut worker = LatencyHistogram::new();
                for _ in 0..rng.random_range(0..2000) {
                    let us = rng.random_range(1..5_000_000u64);
                    worker.record_us(us);
                    all.record_us(us);
                }
                merged.merge(&worker);
            }
            assert_eq!(merged.len(), all.len());
            for p in [50.0, 90.0, 99.0, 99.9, 100.0] {
                assert_eq!(merged.percentile_us(p), all.percentile_us(p));
            }
        }
    }
}
