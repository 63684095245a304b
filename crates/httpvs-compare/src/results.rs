//! The results of a comparison: plan, machine facts, set-up and every run of every cell (the `--json` file).
//!
//! The file is documented in `docs/schema/compare-results.schema.json`; bump
//! [`RESULTS_SCHEMA_VERSION`] on any change that removes or renames a field, and update the
//! schema with every field.

use crate::measurement::{Measurement, Spread};
use crate::plan::{Plan, Shape};
use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of the results file; `--from` refuses other major versions.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// Everything a comparison measured; rendered as text, JSON and HTML.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The plan that ran (after `--quick`, `--shape` and `--tune`).
    pub plan: Plan,
    /// The machine it ran on.
    pub machine: crate::machine::MachineFacts,
    /// How the run was set up: target, pinning, what was skipped and why.
    pub setup: Setup,
    /// Every cell, in plan order (when interrupted, those that finished).
    pub cells: Vec<CellResult>,
    /// Whether Ctrl-C, SIGTERM or SIGHUP stopped the run before its last cell (`setup` says where).
    #[serde(default)]
    pub interrupted: bool,
}

/// How the run was set up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Setup {
    /// `embedded server` or the user's URL.
    pub target: String,
    /// CPUs the embedded server was pinned to (empty: not pinned).
    pub server_cpus: Vec<usize>,
    /// CPUs the client was pinned to (empty: not pinned).
    pub client_cpus: Vec<usize>,
    /// One line on pinning ("server on CPU 0, client on CPU 1").
    pub pinning: String,
    /// Protocols not run, and why.
    pub skipped_protocols: Vec<Skipped>,
    /// Conditions not run, and why.
    pub skipped_conditions: Vec<Skipped>,
    /// Shapes chosen by `--tune`, with what each candidate did.
    pub tuning: Vec<TuneChoice>,
    /// Wall-clock seconds the whole comparison took.
    pub elapsed_seconds: f64,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
    /// Cells the matrix had (0 when a run stopped before the matrix was laid out).
    #[serde(default)]
    pub cells_planned: usize,
    /// What an interrupt cut short and dropped: a cell (`lossy / small / h3 4x32`) or `--tune`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<String>,
}

/// Something that was not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Protocol or condition name.
    pub name: String,
    /// Why, in one line.
    pub reason: String,
}

/// Skipped protocols or conditions as lines: names that share a reason on one line
/// (`wan, lossy, severe`, when the emulator is out of reach), in the order first seen.
pub fn grouped(skipped: &[Skipped]) -> Vec<(String, &str)> {
    let mut lines: Vec<(Vec<&str>, &str)> = Vec::new();
    for s in skipped {
        match lines.iter_mut().find(|(_, reason)| *reason == s.reason) {
            Some((names, _)) => names.push(&s.name),
            None => lines.push((vec![&s.name], &s.reason)),
        }
    }
    lines
        .into_iter()
        .map(|(names, reason)| (names.join(", "), reason))
        .collect()
}

/// What `--tune` chose for a protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneChoice {
    /// The protocol.
    pub variant: Variant,
    /// The chosen shape.
    pub chosen: Shape,
    /// Every candidate and its req/s.
    pub candidates: Vec<(Shape, f64)>,
}

impl TuneChoice {
    /// The shapes tried and their rates, `4x32: 654,336 req/s, ...`, as text and HTML show them.
    pub fn tried_text(&self) -> String {
        let tried: Vec<String> = self
            .candidates
            .iter()
            .map(|(shape, rps)| {
                format!("{shape}: {} req/s", crate::render::format::thousands(*rps))
            })
            .collect();
        tried.join(", ")
    }

    /// Why the chosen shape is not the candidate with the top rate, when it is not: a larger
    /// shape wins only by more than 5% (`tune.rs`). Empty otherwise; else "; ..." to append.
    pub fn why_not_fastest(&self) -> &'static str {
        let top = self
            .candidates
            .iter()
            .map(|(_, rps)| *rps)
            .fold(0.0, f64::max);
        match self
            .candidates
            .iter()
            .find(|(shape, _)| *shape == self.chosen)
        {
            Some((_, rps)) if *rps < top => "; a larger shape must beat a smaller one by over 5%",
            _ => "",
        }
    }
}

/// One cell: a protocol at a shape with a payload under a condition, and its repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    /// Condition name.
    pub condition: String,
    /// Payload name.
    pub payload: String,
    /// Protocol.
    pub variant: Variant,
    /// Client shape.
    pub shape: Shape,
    /// The repeats.
    pub runs: Vec<RunResult>,
    /// Why the cell could not run at all, if so.
    #[serde(default)]
    pub failure: Option<String>,
}

/// One repeat: compare's summary and the full load report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// What tables, verdicts and charts read.
    pub summary: Measurement,
    /// The load generator's full report, as its JSON.
    pub report: serde_json::Value,
    /// The emulated link's counters, when a link was in use.
    #[serde(default)]
    pub link: Option<serde_json::Value>,
}

impl RunResult {
    /// Fills summary figures that files from before they existed lack, from the load report.
    fn backfill(&mut self) {
        let requests = &self.report["requests"];
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        let m = &mut self.summary;
        if m.started == 0 && m.cut_off == 0 && m.warmup_cut_off == 0 {
            m.started = n(&requests["started"]);
            m.cut_off = n(&requests["cut_off"]);
            m.warmup_cut_off = n(&requests["from_warmup"]["cut_off"]);
        }
        if m.warmup_finished == 0 {
            m.warmup_finished = n(&requests["from_warmup"]["finished"]);
        }
    }
}

/// A table row: a cell's repeats folded into medians and spreads.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Protocol.
    pub variant: Variant,
    /// Client shape.
    pub shape: Shape,
    /// Successful req/s across repeats.
    pub rps: Spread,
    /// Repeats measured.
    pub runs: usize,
    /// Median of the repeats' p50, ms.
    pub p50_ms: f64,
    /// Median of the repeats' p99, ms.
    pub p99_ms: f64,
    /// Median wire bytes per request.
    pub bytes_per_request: f64,
    /// Median connections opened.
    pub connections: f64,
    /// The fewest connections a repeat opened (a connection counts once it carries a measured request).
    pub fewest_connections: u64,
    /// Median measured period, seconds.
    pub seconds: f64,
    /// Requests started in the measured periods, all repeats together.
    pub started: u64,
    /// Requests in flight when a measured period ended (its own and the warm-up's), all repeats together.
    pub cut_off: u64,
    /// Warm-up requests that ended in a measured period, all repeats together.
    pub warmup_finished: u64,
    /// The most req/s a repeat could have read had every request in flight at its end completed
    /// and every connection its shape asked for opened (infinite when none opened): what a row
    /// too thin to rank might have reached.
    pub ceiling_rps: f64,
    /// Failed requests, all repeats together.
    pub errors: u64,
    /// Retried requests, all repeats together.
    pub retried: u64,
    /// Succeeded requests, all repeats together.
    pub succeeded: u64,
    /// The fewest requests one repeat completed.
    pub fewest_succeeded: u64,
    /// Of `succeeded`, responses whose status was not 2xx, all repeats together.
    pub non_2xx: u64,
    /// The most frequent status among them.
    pub non_2xx_top: Option<u16>,
    /// The error kind that failed the most requests over the repeats, if any failed.
    pub errors_top: Option<String>,
    /// The fewest streams per connection a repeat ran, when the server capped the shape's `-m`.
    pub streams_capped: Option<u32>,
    /// Packets the emulated link's queue dropped (over its limit), both directions, all repeats.
    pub link_queue_drops: u64,
    /// Packets the link's relay sent more than 1 ms late (it could not keep up), all repeats.
    pub link_late: u64,
    /// Packets offered to the link, both directions, all repeats.
    pub link_packets_in: u64,
    /// Highest client CPU fraction seen in a repeat.
    pub client_cpu_max: Option<f64>,
    /// The longest stretch of a repeat's measured period in which nothing completed, though
    /// its own rate would have completed a few dozen there (a stall), seconds; 0 for none.
    pub stall_seconds: f64,
    /// Why it could not run, if so.
    pub failure: Option<String>,
    /// The load-report note on connection churn of the first repeat that had one, with that
    /// repeat's number (1-based) and the connections it opened, which the note's counts are
    /// beside.
    pub connection_note: Option<ChurnNote>,
}

/// One repeat's note on connection churn ([`Row::connection_note`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnNote {
    /// The load report's sentence ("the server closed connections 180 times with GOAWAY…").
    pub text: String,
    /// Which repeat, 1-based.
    pub repeat: usize,
    /// Connections that repeat opened.
    pub opened: u64,
}

impl CellResult {
    /// Folds the repeats into one row.
    pub fn row(&self) -> Row {
        let runs = || self.runs.iter().map(|r| &r.summary);
        let median = |f: fn(&Measurement) -> f64| Spread::of(runs().map(f)).median;
        // Latency and bytes per request exist only where a request completed: a repeat that
        // completed nothing reads 0 there, and it pulled the medians to impossible values
        // (p50 20 ms on a 40 ms round trip).
        let median_done = |f: fn(&Measurement) -> f64| {
            Spread::of(runs().filter(|m| m.succeeded > 0).map(f)).median
        };
        let rps = Spread::of(runs().map(|m| m.requests_per_sec));
        Row {
            variant: self.variant,
            shape: self.shape,
            rps,
            runs: self.runs.len(),
            p50_ms: median_done(|m| m.p50_ms),
            p99_ms: median_done(|m| m.p99_ms),
            bytes_per_request: median_done(|m| m.wire_bytes_per_request),
            connections: median(|m| m.connections_opened as f64),
            fewest_connections: runs().map(|m| m.connections_opened).min().unwrap_or(0),
            seconds: median(|m| m.seconds),
            started: runs().map(|m| m.started).sum(),
            cut_off: runs().map(|m| m.cut_off + m.warmup_cut_off).sum(),
            warmup_finished: runs().map(|m| m.warmup_finished).sum(),
            ceiling_rps: runs()
                .map(|m| ceiling(m, self.shape.connections, self.variant.keepalive()))
                .fold(0.0, f64::max),
            errors: runs().map(|m| m.failed).sum(),
            retried: runs().map(|m| m.retried).sum(),
            succeeded: runs().map(|m| m.succeeded).sum(),
            fewest_succeeded: runs().map(|m| m.succeeded).min().unwrap_or(0),
            non_2xx: runs().flat_map(|m| m.non_2xx.values()).sum(),
            non_2xx_top: most_common(runs().flat_map(|m| &m.non_2xx).map(|(c, n)| (*c, *n))),
            errors_top: most_common(
                runs()
                    .flat_map(|m| &m.errors)
                    .map(|(k, n)| (k.as_str(), *n)),
            )
            .map(str::to_string),
            link_queue_drops: self.link_sum("queue_drops"),
            link_late: self.link_sum("late"),
            link_packets_in: self.link_sum("packets_in"),
            streams_capped: runs().filter_map(|m| m.streams_capped).min(),
            client_cpu_max: runs().filter_map(|m| m.client_cpu).reduce(f64::max),
            stall_seconds: runs()
                .map(|m| stall_seconds(m, rps.median))
                .fold(0.0, f64::max),
            failure: self.failure.clone(),
            connection_note: runs().enumerate().find_map(|(i, m)| {
                m.connection_note.clone().map(|text| ChurnNote {
                    text,
                    repeat: i + 1,
                    opened: m.connections_opened,
                })
            }),
        }
    }
}

/// The key with the largest count summed over `counts` (the last of equals, as `max_by_key`).
fn most_common<K: Ord>(counts: impl Iterator<Item = (K, u64)>) -> Option<K> {
    let mut sums = std::collections::BTreeMap::<K, u64>::new();
    for (key, n) in counts {
        *sums.entry(key).or_default() += n;
    }
    sums.into_iter().max_by_key(|(_, n)| *n).map(|(key, _)| key)
}

impl CellResult {
    /// A link counter summed over both directions and every repeat (0 without a link).
    fn link_sum(&self, key: &str) -> u64 {
        let dirs = ["up", "down"];
        self.runs
            .iter()
            .filter_map(|r| r.link.as_ref())
            .flat_map(|l| dirs.map(|d| l[d][key].as_u64().unwrap_or(0)))
            .sum()
    }
}

/// Completions a stretch must have been expected to hold before nothing in it reads as a stall.
const STALL_EXPECTED: f64 = 20.0;

/// The longest stretch of `m`'s per-second series (consecutive intervals) with no completion,
/// where the repeat's own rate, or the row's (`row_rps`, for a repeat that completed nothing
/// and so has none), expected at least [`STALL_EXPECTED`] and which lasted more than twice its
/// p99 latency: a closed loop whose requests take a second or more completes in waves, and an
/// empty second between two waves is no stall. 0 without one, or without the interval ends
/// (older files).
pub fn stall_seconds(m: &Measurement, row_rps: f64) -> f64 {
    let expected_rps = m.requests_per_sec.max(row_rps);
    let waves = 2.0 * m.p99_ms / 1000.0;
    let mut longest: f64 = 0.0;
    let mut run = 0.0;
    let mut start = 0.0;
    for (rate, end) in m.per_second.iter().zip(&m.per_second_at) {
        if *rate == 0.0 {
            run += end - start;
            if expected_rps * run >= STALL_EXPECTED && run > waves {
                longest = longest.max(run);
            }
        } else {
            run = 0.0;
        }
        start = *end;
    }
    longest
}

/// A repeat's req/s had every request in flight at its end completed, scaled up for the
/// connections that never opened (their slots sat idle). Not scaled for a row that opens a
/// connection per request (h1-close): its slots wait on handshakes by design, and a refused one
/// is a failed request, not an idle slot.
fn ceiling(m: &Measurement, asked: u32, keepalive: bool) -> f64 {
    if m.seconds <= 0.0 {
        return f64::INFINITY;
    }
    let done = (m.succeeded + m.cut_off + m.warmup_cut_off) as f64 / m.seconds;
    if !keepalive {
        return done;
    }
    let opened = m.connections_opened as f64;
    if opened <= 0.0 {
        return f64::INFINITY;
    }
    done * (f64::from(asked) / opened).max(1.0)
}

/// The cells of one table: a condition and a payload.
#[derive(Debug, Clone)]
pub struct Table<'a> {
    /// Condition name.
    pub condition: &'a str,
    /// Payload name.
    pub payload: &'a str,
    /// Its cells, in plan order.
    pub cells: Vec<&'a CellResult>,
}

impl Results {
    /// The tables, in plan order: by condition, then payload.
    pub fn tables(&self) -> Vec<Table<'_>> {
        let mut tables: Vec<Table<'_>> = Vec::new();
        for cell in &self.cells {
            let found = tables
                .iter_mut()
                .find(|t| t.condition == cell.condition && t.payload == cell.payload);
            match found {
                Some(t) => t.cells.push(cell),
                None => tables.push(Table {
                    condition: &cell.condition,
                    payload: &cell.payload,
                    cells: vec![cell],
                }),
            }
        }
        tables
    }

    /// "2 of 8 cells did not run (see their rows)", when some did not (a server gone
    /// mid-matrix): the text's last line and the HTML's banner.
    pub fn not_run_line(&self) -> Option<String> {
        let failed = self.cells.iter().filter(|c| c.failure.is_some()).count();
        (failed > 0).then(|| {
            format!(
                "{failed} of {} cells did not run (see their rows)",
                self.cells.len()
            )
        })
    }

    /// The line that says a run was interrupted and what it holds, when it was.
    pub fn interruption_line(&self) -> Option<String> {
        if !self.interrupted {
            return None;
        }
        let s = &self.setup;
        let finished = match s.cells_planned {
            0 => format!("{} cells finished", self.cells.len()),
            n => format!("{} of {n} cells finished", self.cells.len()),
        };
        let dropped = match &s.dropped {
            Some(what) => format!("; the one in progress ({what}) was dropped"),
            None => String::new(),
        };
        Some(format!(
            "interrupted (Ctrl-C, SIGTERM or SIGHUP): {finished}{dropped}; tables and verdicts cover the finished cells only"
        ))
    }

    /// Whether the plan has more than one payload (tables then name theirs).
    pub fn several_payloads(&self) -> bool {
        self.plan.payloads.len() > 1
    }

    /// Reads a results file written by `--json`.
    pub fn read(path: &Path) -> Result<Results, String> {
        // Bounded: a matrix's results are megabytes, and /dev/zero must not fill memory.
        let text = httpvs_load::files::read_text_bounded(path, 256 << 20)
            .map_err(|e| format!("cannot read --from {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        if value.get("plan").is_none() && value.get("requests").is_some() {
            // Same schema version, another command: it read "missing field `plan`".
            return Err(format!(
                "{}: a report of httpvs load --json, not results of httpvs compare --json",
                path.display()
            ));
        }
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(u64::from(RESULTS_SCHEMA_VERSION)) {
            let found = version.map_or_else(|| "none".to_owned(), |v| v.to_string());
            return Err(format!(
                "{}: not a results file of httpvs compare (schema_version {found}, expected {RESULTS_SCHEMA_VERSION})",
                path.display(),
            ));
        }
        // From the text, not the value: its errors then say where ("at line 57 column 30"),
        // where the value's said only "invalid type: null, expected f64".
        let mut results: Results =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for run in results.cells.iter_mut().flat_map(|c| &mut c.runs) {
            run.backfill();
        }
        Ok(results)
    }

    /// Writes the results as pretty JSON, with each table's verdict and anomalies after the cells.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = self.to_json().map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

/// The `--json` file: the results, and the verdicts they make (read back as ignored: `--from`
/// recomputes them, so a file stays consistent with the rules of the httpvs that renders it).
#[derive(Serialize)]
struct Written<'a> {
    #[serde(flatten)]
    results: &'a Results,
    verdicts: Vec<crate::render::VerdictRecord>,
}

impl Results {
    /// The results as the `--json` file has them.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&Written {
            results: self,
            verdicts: crate::render::verdict_records(self),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuned_shape_that_is_not_the_fastest_says_why() {
        let shape = |connections| Shape {
            connections,
            streams: 1,
        };
        let mut choice = TuneChoice {
            variant: Variant::H1,
            chosen: shape(16),
            candidates: vec![(shape(16), 155_976.0), (shape(64), 156_726.0)],
        };
        assert!(choice.why_not_fastest().contains("over 5%"));
        choice.chosen = shape(64);
        assert_eq!(choice.why_not_fastest(), "");
    }

    /// A repeat that completed nothing has no latency or bytes per request: the row's medians
    /// leave it out (they read p50 20 ms on a 40 ms round trip, the mean of 0 and 40), and its
    /// empty period is a stall by the row's rate (its own is 0, so it never was one).
    #[test]
    fn a_repeat_that_completed_nothing_is_left_out_of_latency_and_is_a_stall() {
        let done = Measurement {
            seconds: 0.5,
            requests_per_sec: 176.0,
            succeeded: 88,
            p50_ms: 40.3,
            p99_ms: 40.3,
            wire_bytes_per_request: 149.5,
            per_second: vec![176.0],
            per_second_at: vec![0.5],
            ..Measurement::default()
        };
        let nothing = Measurement {
            seconds: 0.5,
            per_second: vec![0.0],
            per_second_at: vec![0.5],
            ..Measurement::default()
        };
        let run = |summary: Measurement| RunResult {
            summary,
            report: serde_json::Value::Null,
            link: None,
        };
        let cell = CellResult {
            condition: "lossy".into(),
            payload: "small".into(),
            variant: Variant::H2c,
            shape: Shape {
                connections: 1,
                streams: 8,
            },
            runs: vec![run(nothing), run(done)],
            failure: None,
        };
        let row = cell.row();
        assert_eq!(
            (row.p50_ms, row.p99_ms, row.bytes_per_request),
            (40.3, 40.3, 149.5)
        );
        assert_eq!(row.rps.median, 88.0);
        assert_eq!(row.fewest_succeeded, 0);
        assert_eq!(row.stall_seconds, 0.5);
    }

    /// The server went away during h1-close's second repeat: that repeat opened no connection
    /// (each was refused) and completed nothing. Its ceiling is what it completed, not
    /// "unknown": it could not have reached h1's 114k req/s, so it must not block the verdict.
    #[test]
    fn a_connection_per_request_row_s_ceiling_is_not_scaled_by_connections() {
        let gone = Measurement {
            seconds: 0.5,
            failed: 97,
            started: 97,
            ..Measurement::default()
        };
        assert_eq!(ceiling(&gone, 64, false), 0.0);
        let ran = Measurement {
            seconds: 0.5,
            succeeded: 11_000,
            cut_off: 64,
            connections_opened: 11_000,
            ..gone.clone()
        };
        assert_eq!(ceiling(&ran, 64, false), 22_128.0);
        // A keep-alive row that opened none: what it could do is unknown.
        assert_eq!(ceiling(&gone, 64, true), f64::INFINITY);
        let half = Measurement {
            connections_opened: 32,
            ..ran
        };
        assert_eq!(ceiling(&half, 64, true), 44_256.0);
    }

    #[test]
    fn a_stretch_with_nothing_completed_is_a_stall_only_where_some_were_due() {
        let m = Measurement {
            requests_per_sec: 648.0,
            per_second: vec![0.0, 1296.0],
            per_second_at: vec![0.5, 1.0],
            ..Measurement::default()
        };
        assert_eq!(stall_seconds(&m, 0.0), 0.5);
        // A first interval of 10 ms at 648/s expected 6: nothing there is no stall.
        let short = Measurement {
            per_second: vec![0.0, 655.0],
            per_second_at: vec![0.01, 1.0],
            ..m.clone()
        };
        assert_eq!(stall_seconds(&short, 0.0), 0.0);
        // Older files kept no interval ends.
        let old = Measurement {
            per_second_at: vec![],
            ..m
        };
        assert_eq!(stall_seconds(&old, 0.0), 0.0);
        // Consecutive empty intervals are one stall.
        let long = Measurement {
            requests_per_sec: 600.0,
            per_second: vec![900.0, 0.0, 0.0, 0.0, 900.0],
            per_second_at: vec![1.0, 2.0, 3.0, 4.0, 5.0],
            ..Measurement::default()
        };
        assert_eq!(stall_seconds(&long, 0.0), 3.0);
        // Requests that take 1.8 s complete in waves: an empty second between them is none.
        let waves = Measurement {
            requests_per_sec: 35.0,
            p99_ms: 1_800.0,
            per_second: vec![64.0, 0.0, 64.0, 0.0],
            per_second_at: vec![1.0, 2.0, 3.0, 4.0],
            ..Measurement::default()
        };
        assert_eq!(stall_seconds(&waves, 0.0), 0.0);
    }

    /// Without the emulator the same reason went out once per condition, three long lines.
    #[test]
    fn skipped_names_that_share_a_reason_share_a_line() {
        let skip = |name: &str, reason: &str| Skipped {
            name: name.into(),
            reason: reason.into(),
        };
        let skipped = [
            skip("wan", "no emulator"),
            skip("lossy", "no emulator"),
            skip("h3", "no QUIC"),
            skip("severe", "no emulator"),
        ];
        let lines = grouped(&skipped);
        assert_eq!(
            lines,
            [
                ("wan, lossy, severe".to_string(), "no emulator"),
                ("h3".to_string(), "no QUIC")
            ]
        );
    }
}
