//! `--fail-on "error-rate>1%,p99>250ms"`: rules a run must not break, for CI use.
//!
//! Metrics: `error-rate` and `non-2xx-rate` (percent of started requests), `p50` … `p99.99`,
//! `mean`, `max` (durations: us, ms or s; a bare number is ms) and `rps` (succeeded requests/s:
//! a run whose requests all fail has an rps of 0, whatever its rate of failures) and `unsent`
//! (open model: sends due by the end of a `-z` run that never went out).
//! Operators: `>` (breached when above) and `<` (breached when below).

use super::model::{Report, ThresholdResult};

/// What a rule measures.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Metric {
    ErrorRate,
    Non2xxRate,
    Percentile(f64),
    Mean,
    Max,
    Rps,
    Unsent,
}

impl Metric {
    /// The unit of the rule's limit and of the measured value.
    fn unit(self) -> &'static str {
        match self {
            Metric::ErrorRate | Metric::Non2xxRate => "%",
            Metric::Percentile(_) | Metric::Mean | Metric::Max => "ms",
            Metric::Rps => "req/s",
            Metric::Unsent => "requests",
        }
    }
}

/// One parsed rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    rule: String,
    metric: Metric,
    above: bool,
    /// Percent, milliseconds, or requests/s, by metric.
    limit: f64,
}

impl Threshold {
    /// The percentile the rule judges, if it is a latency percentile (the report must list it).
    pub fn percentile(&self) -> Option<f64> {
        match self.metric {
            Metric::Percentile(p) => Some(p),
            _ => None,
        }
    }
}

/// Parses a comma-separated list of rules; the error names the rule and what is wrong.
pub fn parse(spec: &str) -> Result<Vec<Threshold>, String> {
    let rules: Vec<Threshold> = spec
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse_one)
        .collect::<Result<_, _>>()?;
    if rules.is_empty() {
        // A CI gate that checks nothing must not pass by accident.
        return Err(format!(
            "--fail-on {spec:?} has no rule (like \"error-rate>1%,p99>250ms\")"
        ));
    }
    Ok(rules)
}

fn parse_one(rule: &str) -> Result<Threshold, String> {
    let (name, op, value) = match (rule.find('>'), rule.find('<')) {
        (Some(i), None) => (&rule[..i], true, &rule[i + 1..]),
        (None, Some(i)) => (&rule[..i], false, &rule[i + 1..]),
        _ => return Err(format!("--fail-on rule {rule:?} needs one '>' or '<'")),
    };
    let name = name.trim().to_ascii_lowercase();
    let value = value.trim();
    let metric = match name.as_str() {
        "error-rate" | "errors" => Metric::ErrorRate,
        "non-2xx-rate" | "non2xx-rate" => Metric::Non2xxRate,
        "mean" => Metric::Mean,
        "max" => Metric::Max,
        "rps" | "req/s" => Metric::Rps,
        "unsent" => Metric::Unsent,
        p if p.starts_with('p') => match p[1..].parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 100.0 => Metric::Percentile(x),
            _ => return Err(format!("--fail-on: unknown percentile {p:?}")),
        },
        other => {
            return Err(format!(
                "--fail-on: unknown metric {other:?} (error-rate, non-2xx-rate, p50..p99.99, mean, max, rps, unsent)"
            ))
        }
    };
    let limit = match metric {
        Metric::ErrorRate | Metric::Non2xxRate => {
            parse_number(value.strip_suffix('%').unwrap_or(value))
        }
        Metric::Rps | Metric::Unsent => parse_number(value),
        _ => parse_ms(value),
    }
    .ok_or_else(|| format!("--fail-on rule {rule:?}: cannot read the value {value:?}"))?;
    if limit < 0.0 {
        return Err(format!(
            "--fail-on rule {rule:?}: a negative limit is never crossed"
        ));
    }
    if matches!(metric, Metric::ErrorRate | Metric::Non2xxRate) && limit > 100.0 {
        return Err(format!(
            "--fail-on rule {rule:?}: a rate is a percentage, 0 to 100"
        ));
    }
    Ok(Threshold {
        rule: rule.to_string(),
        metric,
        above: op,
        limit,
    })
}

fn parse_number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// "250ms" → 250, "1.5s" → 1500, "800us" → 0.8; a bare number is milliseconds.
fn parse_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (s, 1.0)
    };
    parse_number(num).map(|v| v * scale)
}

/// Evaluates every rule against a report.
pub fn evaluate(rules: &[Threshold], report: &Report) -> Vec<ThresholdResult> {
    rules
        .iter()
        .map(|t| {
            let actual = measure(t.metric, report);
            // A latency rule over no response, or a rate over no request, has nothing to pass
            // on: an outage must not read as a latency of 0 and go green.
            let no_data = match t.metric {
                Metric::Percentile(_) | Metric::Mean | Metric::Max => report.latency.count == 0,
                Metric::ErrorRate | Metric::Non2xxRate => report.requests.started == 0,
                Metric::Rps | Metric::Unsent => false,
            };
            let breached = no_data
                || if t.above {
                    actual > t.limit
                } else {
                    actual < t.limit
                };
            ThresholdResult {
                rule: t.rule.clone(),
                actual,
                unit: t.metric.unit().to_string(),
                breached,
                no_data,
            }
        })
        .collect()
}

fn measure(metric: Metric, r: &Report) -> f64 {
    let started = r.requests.started.max(1) as f64;
    let ms = |us: u64| us as f64 / 1000.0;
    match metric {
        Metric::ErrorRate => 100.0 * r.requests.failed as f64 / started,
        Metric::Non2xxRate => {
            let non2xx: u64 = r
                .status_codes
                .iter()
                .filter(|s| !(200..300).contains(&s.code))
                .map(|s| s.count)
                .sum();
            100.0 * (non2xx + r.requests.failed) as f64 / started
        }
        Metric::Percentile(p) => ms(r.latency.hdr_like_percentile(p)),
        Metric::Mean => r.latency.mean_us / 1000.0,
        Metric::Max => ms(r.latency.max_us),
        Metric::Rps => r.throughput.succeeded_per_s,
        Metric::Unsent => r.schedule.as_ref().map_or(0, |s| s.unsent) as f64,
    }
}

impl super::model::Distribution {
    /// The listed percentile at or just above `p` (the report lists p50 … p99.99, any
    /// `--percentiles`, and the percentiles `--fail-on` rules name).
    pub fn hdr_like_percentile(&self, p: f64) -> u64 {
        self.percentiles
            .iter()
            .find(|x| x.p >= p - 1e-9)
            .or(self.percentiles.last())
            .map_or(0, |x| x.us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_unsent() {
        let rules = parse("p99>1s,error-rate>1%,rps<10,unsent>0").unwrap();
        let units: Vec<_> = rules.iter().map(|r| r.metric.unit()).collect();
        assert_eq!(units, ["ms", "%", "req/s", "requests"]);
        assert_eq!(rules[3].metric, Metric::Unsent);
        assert_eq!(rules[3].limit, 0.0);
    }

    #[test]
    fn parses_the_issue_example() {
        let rules = parse("error-rate>1%,p99>250ms").unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].metric, Metric::ErrorRate);
        assert_eq!(rules[0].limit, 1.0);
        assert_eq!(rules[1].metric, Metric::Percentile(99.0));
        assert_eq!(rules[1].limit, 250.0);
        assert!(!parse("rps<1000").unwrap()[0].above);
        assert_eq!(parse("p99.9>1.5s").unwrap()[0].limit, 1500.0);
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "p99",
            "latency>1ms",
            "p99>fast",
            "p101>1ms",
            "a>1<2",
            "",
            " , ",
            "p99>-1ms",
            "error-rate>200%",
            "non-2xx-rate>101",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
