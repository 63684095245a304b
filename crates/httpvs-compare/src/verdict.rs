//! Verdicts and anomalies: which protocol won a table, by how much, whether it is a tie, and what looks wrong.

use crate::results::Row;
use crate::variant::Variant;
use serde::Serialize;

/// When a table has a single repeat there is no measured spread; differences under this are ties.
pub const SINGLE_RUN_TIE: f64 = 0.05;

/// Client CPU at or above this fraction of its cores means the client, not the protocol, was measured.
pub const SATURATED_CPU: f64 = 0.90;

/// A delay-bound ratio within this fraction of the rows' in-flight ratio is said to be about it.
const IN_FLIGHT_RATIO_CLOSE: f64 = 0.15;

/// The verdict of one table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The one-line verdict, e.g. "h2c fastest, 3.1x h1 (spread ±4%)".
    pub line: String,
    /// The fastest row's protocol, if any row measured anything.
    pub fastest: Option<Variant>,
    /// Protocols that tie with the fastest (inside the spread).
    pub tied: Vec<Variant>,
    /// The requests in flight of the rows the verdict compares, when they differ (else empty).
    pub in_flight: Vec<InFlight>,
}

/// One compared row's requests in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InFlight {
    /// The row's label.
    pub row: String,
    /// Connections x streams as run (after any server cap on streams).
    pub requests: u64,
}

/// Row label: the protocol, plus its shape when the table has several shapes of it.
pub fn label(row: &Row, rows: &[Row]) -> String {
    let shapes = rows.iter().filter(|r| r.variant == row.variant).count();
    if shapes > 1 {
        format!("{}@{}", row.variant, row.shape)
    } else {
        row.variant.to_string()
    }
}

/// Requests a row kept in flight: connections x streams as run (a server's stream cap lowers it).
pub fn in_flight(row: &Row) -> u64 {
    let streams = row.streams_capped.unwrap_or(row.shape.streams);
    u64::from(row.shape.connections) * u64::from(streams)
}

/// The compared rows' in-flight counts when they differ, each row once (else empty).
fn differing_in_flight(compared: &[&Row], rows: &[Row]) -> Vec<InFlight> {
    let mut out: Vec<InFlight> = Vec::new();
    for r in compared {
        let row = label(r, rows);
        if !out.iter().any(|f| f.row == row) {
            out.push(InFlight {
                row,
                requests: in_flight(r),
            });
        }
    }
    let first = out.first().map(|f| f.requests);
    if out.iter().all(|f| Some(f.requests) == first) {
        out.clear();
    }
    out
}

/// "rows differ in requests in flight: 128 vs 64" for a row against the baseline, with what the
/// difference alone would give when the ratio is close to it (a delay-bound link: req/s ≈ in
/// flight / round trip). None when they keep the same number in flight.
fn in_flight_note(row: &Row, base: &Row) -> Option<String> {
    let (a, b) = (in_flight(row), in_flight(base));
    if a == b || b == 0 {
        return None;
    }
    let mut note = format!("rows differ in requests in flight: {a} vs {b}");
    let expected = a as f64 / b as f64;
    if let Some(r) = ratio(row, Some(base)) {
        if (r / expected - 1.0).abs() <= IN_FLIGHT_RATIO_CLOSE {
            note.push_str(&format!(
                ", which alone gives {} on a delay-bound link",
                format_ratio(expected)
            ));
        }
    }
    Some(note)
}

/// "(a; b)" of the notes that are there, or nothing.
fn parenthesised(notes: &[Option<String>]) -> String {
    let present: Vec<&str> = notes.iter().flatten().map(String::as_str).collect();
    if present.is_empty() {
        String::new()
    } else {
        format!(" ({})", present.join("; "))
    }
}

/// The ratio of a row's median req/s to the baseline's (None without a usable baseline).
pub fn ratio(row: &Row, baseline: Option<&Row>) -> Option<f64> {
    let base = baseline?.rps.median;
    (base > 0.0).then(|| row.rps.median / base)
}

/// The baseline row of a table: the first row of the baseline protocol.
pub fn baseline_row(rows: &[Row], baseline: Variant) -> Option<&Row> {
    rows.iter()
        .find(|r| r.variant == baseline && r.failure.is_none())
}

/// The relative margin inside which two rows tie: their spreads, or 5% for single runs.
fn tie_margin(a: &Row, b: &Row) -> f64 {
    let measured = a.rps.relative_half_range() + b.rps.relative_half_range();
    if measured > 0.0 {
        measured
    } else {
        SINGLE_RUN_TIE
    }
}

/// Whether `b` is within the spread of `a` (rows' min–max ranges overlap, or within 5% for single runs).
pub fn ties(a: &Row, b: &Row) -> bool {
    if a.rps.min < a.rps.max || b.rps.min < b.rps.max {
        return a.rps.min <= b.rps.max && b.rps.min <= a.rps.max;
    }
    let top = a.rps.median.max(b.rps.median);
    top > 0.0 && (a.rps.median - b.rps.median).abs() / top <= tie_margin(a, b)
}

/// The verdict for a table's rows; `lossy` says the link drops or corrupts packets.
pub fn verdict(rows: &[Row], baseline: Variant, lossy: bool) -> Verdict {
    let mut ranked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.failure.is_none() && r.rps.median > 0.0)
        .collect();
    ranked.sort_by(|a, b| b.rps.median.total_cmp(&a.rps.median));
    let Some(best) = ranked.first().copied() else {
        return Verdict {
            line: "no protocol completed a request".into(),
            fastest: None,
            tied: vec![],
            in_flight: vec![],
        };
    };
    let base = baseline_row(rows, baseline);
    let tied: Vec<&Row> = ranked[1..]
        .iter()
        .copied()
        .filter(|r| ties(best, r))
        .collect();
    let spread = format_spread(best);
    let quoted = base.filter(|b| best.variant != baseline && ratio(best, Some(b)).is_some());
    let vs_base = quoted
        .and_then(|b| ratio(best, Some(b)))
        .map(|r| format!("{} {baseline}", format_ratio(r)));
    let best_note = quoted.and_then(|b| in_flight_note(best, b));
    let mut compared: Vec<&Row> = std::iter::once(best).chain(tied.iter().copied()).collect();
    let mut line = if tied.is_empty() {
        let vs_base = vs_base.map(|v| format!(", {v}")).unwrap_or_default();
        format!(
            "{} fastest{vs_base}{}",
            label(best, rows),
            parenthesised(&[best_note, Some(spread)])
        )
    } else {
        let names: Vec<String> = compared.iter().map(|r| label(r, rows)).collect();
        let by_median = vs_base.map(|v| format!("by median {} {v}", label(best, rows)));
        // Tied rows are compared with each other too: say when they differ in flight.
        let tied_note = match best_note {
            Some(note) => Some(note),
            None => {
                let differ = differing_in_flight(&compared, rows);
                (!differ.is_empty()).then(|| {
                    let each: Vec<String> = differ
                        .iter()
                        .map(|f| format!("{} {}", f.row, f.requests))
                        .collect();
                    format!("rows differ in requests in flight: {}", each.join(", "))
                })
            }
        };
        format!(
            "tie: {}{}",
            names.join(" ≈ "),
            parenthesised(&[
                Some("inside the spread".into()),
                by_median,
                tied_note,
                Some(spread)
            ])
        )
    };
    if let Some(b) = quoted {
        compared.push(b);
    }
    if let Some(worst) = ranked.last().filter(|w| ranked.len() > 2 && !ties(best, w)) {
        if let Some(r) = ratio(worst, base).filter(|_| worst.variant != baseline) {
            line.push_str(&format!(
                "; slowest {} {} {baseline}",
                label(worst, rows),
                format_ratio(r)
            ));
            let note = base.and_then(|b| in_flight_note(worst, b));
            line.push_str(&parenthesised(&[explain_slow(worst, base, lossy), note]));
            compared.push(worst);
            compared.extend(base);
        }
    }
    for r in rows
        .iter()
        .filter(|r| r.failure.is_none() && r.rps.median <= 0.0)
    {
        line.push_str(&format!("; {} completed nothing", label(r, rows)));
    }
    Verdict {
        line,
        fastest: Some(best.variant),
        tied: tied.iter().map(|r| r.variant).collect(),
        in_flight: differing_in_flight(&compared, rows),
    }
}

/// A short reason for a slow row, when its figures and the link point at one.
fn explain_slow(row: &Row, base: Option<&Row>, lossy: bool) -> Option<String> {
    let base_p99 = base.map_or(0.0, |b| b.p99_ms);
    let tcp_multiplexed = matches!(row.variant, Variant::H2 | Variant::H2c);
    let why = if row.variant == Variant::H1Close {
        "a new connection per request"
    } else if row.variant.multiplexed() && row.shape.streams == 1 {
        "one stream per connection: multiplexing unused"
    } else if tcp_multiplexed && lossy && row.p99_ms > base_p99 * 1.5 {
        "head-of-line blocking: one lost packet stalls every stream on the connection"
    } else {
        return None;
    };
    Some(why.into())
}

/// `3.1x`, `0.62x`.
pub fn format_ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}x")
    } else if r >= 1.0 {
        format!("{r:.1}x")
    } else {
        format!("{r:.2}x")
    }
}

/// `spread ±4%`; with a single repeat, or repeats that all read the same, the 5% rule for ties.
pub fn format_spread(row: &Row) -> String {
    if row.runs <= 1 {
        return "single run: differences under 5% are ties".into();
    }
    if row.rps.min == row.rps.max {
        return "spread ±0%: differences under 5% are ties".into();
    }
    format!("spread ±{:.0}%", row.rps.relative_half_range() * 100.0)
}

/// What looks wrong in a row, one line each.
pub fn anomalies(row: &Row, rows: &[Row], client_cpus: usize, repeats: usize) -> Vec<String> {
    let name = label(row, rows);
    let mut out = Vec::new();
    if row.failure.is_some() {
        // The table row already says why; a second line would only repeat it.
        return out;
    }
    let configured = f64::from(row.shape.connections);
    if row.variant.keepalive() && row.connections > 2.0 * configured {
        let per_conn = row.succeeded as f64 / repeats.max(1) as f64 / row.connections.max(1.0);
        out.push(format!(
            "{name}: connection churn: {:.0} connections opened for {} configured, about {:.0} requests each \
             (the server closes them: check its max requests per connection)",
            row.connections, row.shape.connections, per_conn
        ));
    }
    if let Some(ran) = row.streams_capped {
        let c = row.shape.connections;
        out.push(format!(
            "{name}: the server allows {ran} concurrent streams per connection, so this row ran \
             {c}x{ran} ({} requests in flight, not {})",
            u64::from(c) * u64::from(ran),
            row.shape.in_flight()
        ));
    }
    if row.errors > 0 {
        let total = row.errors + row.succeeded;
        out.push(format!(
            "{name}: {} errors ({:.1}% of requests)",
            row.errors,
            100.0 * row.errors as f64 / total.max(1) as f64
        ));
    }
    if row.non_2xx > 0 {
        out.push(format!(
            "{name}: {} responses were not 2xx ({:.1}%, mostly {}): its req/s counts them; \
             check the URL and the server",
            row.non_2xx,
            100.0 * row.non_2xx as f64 / row.succeeded.max(1) as f64,
            row.non_2xx_top.unwrap_or(0)
        ));
    }
    if row.retried > 0 {
        out.push(format!(
            "{name}: {} requests retried on a new connection (GOAWAY, Connection: close or REFUSED_STREAM)",
            row.retried
        ));
    }
    if let Some(cpu) = row.client_cpu_max.filter(|c| *c >= SATURATED_CPU) {
        out.push(format!(
            "{name}: client saturated: {:.0}% of its {client_cpus} CPU(s), so this row measures the client, not the protocol",
            cpu * 100.0
        ));
    }
    out
}

#[cfg(test)]
mod tests;
