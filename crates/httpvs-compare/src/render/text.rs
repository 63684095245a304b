//! The terminal report: one table per condition (and payload), a verdict line each, anomalies flagged.

use super::format;
use super::TableView;
use crate::results::Results;
use std::fmt::Write;

/// Column headers, shared with the HTML tables.
pub const HEADERS: [&str; 9] = [
    "protocol",
    "shape",
    "req/s",
    "spread",
    "p50",
    "p99",
    "B/req",
    "new conns",
    "errors",
];

/// The cells of one row, as the tables print them (the ratio column comes last).
pub fn row_cells(view: &TableView, i: usize) -> Vec<String> {
    let row = &view.rows[i];
    let single = row.runs <= 1;
    if let Some(f) = &row.failure {
        let mut cells = vec![view.labels[i].clone(), row.shape.to_string()];
        cells.push(format!("did not run: {f}"));
        return cells;
    }
    vec![
        view.labels[i].clone(),
        row.shape.to_string(),
        format::thousands(row.rps.median),
        format::spread(row.rps.relative_half_range(), single),
        format::millis(row.p50_ms),
        format::millis(row.p99_ms),
        format::bytes(row.bytes_per_request),
        format::thousands(row.connections),
        format::thousands(row.errors as f64),
        view.ratios[i]
            .map(crate::verdict::format_ratio)
            .unwrap_or_else(|| "-".into()),
    ]
}

/// Renders the set-up lines and every table of the results for a terminal.
pub fn render(results: &Results) -> String {
    let mut out = setup_lines(results);
    for view in super::views(results) {
        let mut headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
        headers.push(format!("vs {}", view.baseline));
        let rows: Vec<Vec<String>> = (0..view.rows.len()).map(|i| row_cells(&view, i)).collect();
        let _ = writeln!(out, "\n{}", view.title);
        out.push_str(&aligned(&headers, &rows));
        let _ = writeln!(out, "verdict {}: {}", view.name, view.verdict.line);
        for a in &view.anomalies {
            let _ = writeln!(out, "  ! {a}");
        }
    }
    out
}

/// Columns padded to their widest cell; text left, numbers right.
fn aligned(headers: &[String], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows.iter().filter(|r| r.len() == cols) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(headers).chain(rows.iter().map(|r| r.as_slice())) {
        let mut text = String::new();
        for (i, cell) in line.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count());
            if i < 2 || line.len() != cols {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            } else {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            }
            text.push_str("  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// What ran where: target, pinning, shapes, and what was skipped or tuned.
fn setup_lines(results: &Results) -> String {
    let s = &results.setup;
    let mut out = format!(
        "httpvs compare: {} on {}; {}\n",
        results.plan.name, s.target, s.pinning
    );
    let _ = writeln!(
        out,
        "{} repeat(s) of {} after a {} warm-up per cell; medians, spread = ±half the min-max range",
        results.plan.repeats, results.plan.duration, results.plan.warmup
    );
    if let Some(line) = results.interruption_line() {
        let _ = writeln!(out, "{line}");
    }
    // On an emulated link the server's TCP congestion control shapes the TCP rows (BBR paces a
    // response of a few KiB over a long round trip), and h3 follows it: worth a line there.
    let emulated = results
        .plan
        .conditions
        .iter()
        .any(|c| !c.is_clean() && results.cells.iter().any(|cell| cell.condition == c.name));
    let tcp = &results.machine.tcp_congestion_control;
    if emulated && !tcp.is_empty() {
        let _ = writeln!(
            out,
            "TCP congestion control: {tcp} (the kernel's; the TCP rows use it, and h3 follows it)"
        );
    }
    for list in [&s.skipped_protocols, &s.skipped_conditions] {
        for (names, reason) in crate::results::grouped(list) {
            let _ = writeln!(out, "skipped {names}: {reason}");
        }
    }
    for t in &s.tuning {
        let _ = writeln!(
            out,
            "tuned {}: {} (tried {}{})",
            t.variant,
            t.chosen,
            t.tried_text(),
            t.why_not_fastest()
        );
    }
    out
}
