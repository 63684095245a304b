//! What compare keeps of one run: the few figures its tables, verdicts and charts read.
//!
//! The full load report is kept beside it in the JSON; this summary is what `--from` re-renders,
//! so a results file stays readable when the load report's schema grows.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One measured repeat of one cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Measured period, seconds.
    pub seconds: f64,
    /// Successful requests per second over the measured period.
    pub requests_per_sec: f64,
    /// Requests that got a response.
    pub succeeded: u64,
    /// Requests that failed (any error kind).
    pub failed: u64,
    /// Requests started in the measured period (succeeded + failed + cut off).
    #[serde(default)]
    pub started: u64,
    /// Of them, still in flight when the period ended.
    #[serde(default)]
    pub cut_off: u64,
    /// Requests released in the warm-up and still in flight when the period ended (outside
    /// `started`: a slow link can hold every slot's warm-up request past the warm-up).
    #[serde(default)]
    pub warmup_cut_off: u64,
    /// Requests released in the warm-up that ended (a response or a failure) in the measured
    /// period: their bytes are in it, outside `started`.
    #[serde(default)]
    pub warmup_finished: u64,
    /// Requests resent because the server never processed them (after GOAWAY, close, REFUSED_STREAM).
    pub retried: u64,
    /// Failures by kind name.
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// Responses whose status was not 2xx, by status (counted in `succeeded`: they completed).
    #[serde(default)]
    pub non_2xx: BTreeMap<u16, u64>,
    /// Streams per connection as run, when the server's concurrent-stream limit cut `-m` below
    /// the shape's (h2, h3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams_capped: Option<u32>,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// 90th percentile latency, milliseconds.
    pub p90_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: f64,
    /// Wire bytes (both directions) per successful request.
    pub wire_bytes_per_request: f64,
    /// Connections opened during the measured period.
    pub connections_opened: u64,
    /// Connections the server closed (FIN, Connection: close, GOAWAY).
    pub connections_closed_by_server: u64,
    /// The load report's note on connection churn, when it had one (what closed them and
    /// after how many requests each, as the server counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_note: Option<String>,
    /// Client CPU used, as a fraction of the client's CPUs (1.0 = all of them busy).
    pub client_cpu: Option<f64>,
    /// Latency CDF points: (milliseconds, fraction of requests at or below).
    #[serde(default)]
    pub latency_cdf: Vec<(f64, f64)>,
    /// Successful requests per second, one value per interval of the measured period (the
    /// intervals end on the run's whole seconds, so the first is often shorter).
    #[serde(default)]
    pub per_second: Vec<f64>,
    /// Seconds into the measured period at the end of each `per_second` interval (files from
    /// before it was kept lack it; the load report's `series[].t_s` has it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_second_at: Vec<f64>,
    /// QUIC packets the client's stack declared lost (h3 only).
    pub quic_packets_lost: Option<u64>,
    /// Packets the emulated link dropped, both directions (when a link was in use).
    pub link_packets_lost: Option<u64>,
}

/// Median, minimum and maximum of a figure across repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (all zero when empty).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if !n.is_multiple_of(2) {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }

    /// Half the min–max range as a fraction of the median (0.04 = ±4%).
    pub fn relative_half_range(&self) -> f64 {
        if self.median <= 0.0 {
            return 0.0;
        }
        (self.max - self.min) / 2.0 / self.median
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_median_and_extremes() {
        let s = Spread::of([3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of([4.0, 1.0, 2.0, 3.0]);
        assert_eq!(s.median, 2.5);
        assert_eq!(Spread::of([]), Spread::default());
        assert!((Spread::of([96.0, 100.0, 104.0]).relative_half_range() - 0.04).abs() < 1e-9);
    }
}
