//! Rendering results: the terminal tables and the self-contained HTML report read the same table views.

pub mod format;
pub mod html;

#[cfg(test)]
pub mod sample;
mod svg;
pub mod text;

use crate::results::{Results, Row, Table};
use crate::variant::Variant;
use crate::verdict::{self, Verdict};

/// One table, ready to show: rows folded from repeats, labels, ratios, verdict and anomalies.
pub struct TableView<'a> {
    /// `clean/small`, or `clean` when the plan has one payload.
    pub name: String,
    /// Heading line: condition, its netem string, payload.
    pub title: String,
    /// The source table.
    pub table: Table<'a>,
    /// Its rows, in plan order.
    pub rows: Vec<Row>,
    /// Row labels (protocol, with the shape when a protocol has several).
    pub labels: Vec<String>,
    /// Ratio of each row to the baseline.
    pub ratios: Vec<Option<f64>>,
    /// The baseline protocol.
    pub baseline: Variant,
    /// The verdict.
    pub verdict: Verdict,
    /// Anomalies, one line each.
    pub anomalies: Vec<String>,
}

/// Builds the table views of the results.
pub fn views(results: &Results) -> Vec<TableView<'_>> {
    let baseline = results.plan.baseline();
    let client_cpus = match results.setup.client_cpus.len() {
        0 => results.machine.cores.max(1),
        n => n,
    };
    let repeats = results.plan.repeats as usize;
    let mut views: Vec<TableView<'_>> = results
        .tables()
        .into_iter()
        .map(|table| {
            let rows: Vec<Row> = table.cells.iter().map(|c| c.row()).collect();
            let labels = rows.iter().map(|r| verdict::label(r, &rows)).collect();
            let base = verdict::baseline_row(&rows, baseline).cloned();
            let ratios = rows
                .iter()
                .map(|r| verdict::ratio(r, base.as_ref()))
                .collect();
            let link = results
                .plan
                .conditions
                .iter()
                .find(|c| c.name == table.condition)
                .map(|c| verdict::LinkTraits::of(&[c.up(), c.down()]))
                .unwrap_or_default();
            let anomalies = rows
                .iter()
                .flat_map(|r| verdict::anomalies(r, &rows, client_cpus, repeats))
                .chain(verdict::bytes_note(&rows))
                .chain(verdict::lossy_bytes_note(&rows, link))
                .collect();
            let name = if results.several_payloads() {
                format!("{}/{}", table.condition, table.payload)
            } else {
                table.condition.to_string()
            };
            TableView {
                title: title(results, &table),
                verdict: verdict::verdict(&rows, baseline, link),
                name,
                table,
                rows,
                labels,
                ratios,
                baseline,
                anomalies,
            }
        })
        .collect();
    mark_incomplete(results, &mut views);
    views
}

/// A table's verdict as the `--json` file keeps it (computed from the cells; `--from` recomputes it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VerdictRecord {
    /// `clean/small`, or `clean` when the plan has one payload.
    pub table: String,
    /// Condition name.
    pub condition: String,
    /// Payload name.
    pub payload: String,
    /// The verdict: its line, the fastest, the tied, the compared rows' in-flight counts.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Anomalies, one line each.
    pub anomalies: Vec<String>,
}

/// Every table's verdict and anomalies, in table order.
pub fn verdict_records(results: &Results) -> Vec<VerdictRecord> {
    views(results)
        .into_iter()
        .map(|v| VerdictRecord {
            table: v.name,
            condition: v.table.condition.to_string(),
            payload: v.table.payload.to_string(),
            verdict: v.verdict,
            anomalies: v.anomalies,
        })
        .collect()
}

/// In an interrupted run, a table that lacks rows says so in its verdict: a winner among the
/// rows that ran is not a verdict on the rows that did not.
fn mark_incomplete(results: &Results, views: &mut [TableView<'_>]) {
    if !results.interrupted {
        return;
    }
    let skipped = &results.setup.skipped_protocols;
    let planned: usize = results
        .plan
        .protocols
        .iter()
        .filter(|v| !skipped.iter().any(|s| s.name == v.name()))
        .map(|v| results.plan.shapes_for(*v).len())
        .sum();
    for view in views.iter_mut().filter(|v| v.rows.len() < planned) {
        // The interrupt dropped the rest: one row that ran has nothing to be fastest against,
        // as when the others did not run.
        let ran = view.rows.iter().filter(|r| r.failure.is_none()).count();
        if ran == 1 {
            if let Some(only) = view.verdict.fastest_row.take() {
                view.verdict.line = format!("no verdict: only {only} ran");
                view.verdict.fastest = None;
                view.verdict.tied.clear();
                view.verdict.tied_rows.clear();
                view.verdict.in_flight.clear();
            }
        }
        view.verdict.line.push_str(&format!(
            "; incomplete: interrupted after {} of {planned} rows",
            view.rows.len()
        ));
    }
}

fn title(results: &Results, table: &Table<'_>) -> String {
    let plan = &results.plan;
    let netem = plan
        .conditions
        .iter()
        .find(|c| c.name == table.condition)
        .map(|c| {
            if c.is_clean() {
                "no emulation".to_string()
            } else if c.up() == c.down() {
                c.up().to_string()
            } else {
                format!("up: {}, down: {}", or_none(c.up()), or_none(c.down()))
            }
        })
        .unwrap_or_default();
    let payload = plan
        .payloads
        .iter()
        .find(|p| p.name == table.payload)
        .map(|p| {
            let size = p
                .size
                .map(|s| format!(" {} response", binary_size(&s.to_string())))
                .unwrap_or_default();
            let body = p
                .body
                .map(|b| format!(" {} body", binary_size(&b.to_string())))
                .unwrap_or_default();
            format!("{} {}{size}{body}", p.method, p.path)
        })
        .unwrap_or_default();
    format!(
        "== {} ({netem}) · {} ({payload})",
        table.condition, table.payload
    )
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "none"
    } else {
        s
    }
}

/// A plan's size as written (`100`, `64k`, `1m`: binary multiples, as `httpvs serve` reads
/// them) with its unit: `100B`, `64KiB`, `1MiB` (it read `64kB`, a decimal unit).
fn binary_size(size: &str) -> String {
    let unit = match size.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => "KiB",
        Some('m') => "MiB",
        Some('g') => "GiB",
        _ => return format!("{size}B"),
    };
    format!("{}{unit}", &size[..size.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_labelled_in_binary_units() {
        assert_eq!(binary_size("64k"), "64KiB");
        assert_eq!(binary_size("1m"), "1MiB");
        assert_eq!(binary_size("100"), "100B");
    }

    #[test]
    fn text_has_a_row_per_protocol_and_a_verdict_per_table() {
        let results = sample::results();
        let text = text::render(&results);
        assert_eq!(text.matches("verdict ").count(), 4, "{text}");
        assert!(
            text.contains("verdict clean/small: h3 fastest, 3.00x h1"),
            "{text}"
        );
        for v in Variant::ALL {
            assert!(text.contains(&format!("\n{} ", v.name())), "{text}");
        }
    }

    /// On an emulated link the server's TCP congestion control shapes the rows (BBR paces a
    /// response of a few KiB over a long round trip): the text names it then, and the HTML's
    /// machine line and the JSON always.
    #[test]
    fn the_tcp_congestion_control_is_named_where_a_link_was_emulated() {
        let mut results = sample::results();
        results.machine.tcp_congestion_control = "bbr".into();
        let line = "TCP congestion control: bbr (the kernel's; the TCP rows use it, and h3 \
                    follows it)\n";
        assert!(text::render(&results).contains(line));
        assert!(html::render(&results).contains(", TCP bbr, "));
        let json: serde_json::Value = serde_json::from_str(&results.to_json().unwrap()).unwrap();
        assert_eq!(json["machine"]["tcp_congestion_control"], "bbr");
        // No cell ran on an emulated link (skipped, or a clean-only plan): no line.
        results.cells.retain(|c| c.condition == "clean");
        let t = text::render(&results);
        assert!(!t.contains("TCP congestion control"), "{t}");
        // A file of an older release has no such field: it reads as unknown, and no line.
        let mut json = json;
        json["machine"]
            .as_object_mut()
            .unwrap()
            .remove("tcp_congestion_control");
        let back: Results = serde_json::from_value(json).unwrap();
        assert_eq!(back.machine.tcp_congestion_control, "");
    }

    #[test]
    fn json_keeps_each_tables_verdict_with_the_in_flight_counts_it_compared() {
        let mut results = sample::results();
        for c in results
            .cells
            .iter_mut()
            .filter(|c| c.variant == Variant::H3)
        {
            c.shape = crate::plan::Shape {
                connections: 4,
                streams: 32,
            };
        }
        let text = results.to_json().unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let verdicts = json["verdicts"].as_array().unwrap();
        assert_eq!(verdicts.len(), 4);
        let first = &verdicts[0];
        assert_eq!(first["table"], "clean/small");
        assert_eq!(first["fastest"], "h3");
        let line = first["line"].as_str().unwrap();
        assert!(
            line.starts_with("h3 fastest, 3.00x h1 (rows differ in requests in flight: 128 vs 64"),
            "{line}"
        );
        assert_eq!(
            first["in_flight"],
            serde_json::json!([{"row": "h3", "requests": 128}, {"row": "h1", "requests": 64}])
        );
        // `--from` reads the file back; the verdicts are recomputed, not read.
        let back: Results = serde_json::from_str(&text).unwrap();
        assert_eq!(back.cells.len(), results.cells.len());
    }

    #[test]
    fn html_is_self_contained_with_charts() {
        let html = html::render(&sample::results());
        assert!(html.matches("<svg").count() >= 8);
        for fetch in ["src=", "href=", "url(", "@import"] {
            assert!(!html.contains(fetch), "{fetch}");
        }
        assert!(!html.contains("<script"));
        if let Ok(path) = std::env::var("HTTPVS_SAMPLE_HTML") {
            std::fs::write(path, &html).unwrap();
        }
        if let Ok(path) = std::env::var("HTTPVS_SAMPLE_TEXT") {
            std::fs::write(path, text::render(&sample::results())).unwrap();
        }
    }

    #[test]
    fn an_interrupted_run_says_so_in_text_and_html() {
        let mut results = sample::results();
        assert_eq!(results.interruption_line(), None);
        assert!(!html::render(&results).contains("class=\"banner\""));
        results.cells.pop();
        results.interrupted = true;
        results.setup.cells_planned = results.cells.len() + 1;
        results.setup.dropped = Some("wan / large / h3 4x32".into());
        let n = results.cells.len();
        let line = format!(
            "interrupted (Ctrl-C, SIGTERM or SIGHUP): {n} of {} cells finished; the one in progress \
             (wan / large / h3 4x32) was dropped",
            n + 1
        );
        let text = text::render(&results);
        assert!(text.contains(&line), "{text}");
        // The last table lost its h3 row: its verdict says so; the others are whole.
        assert_eq!(text.matches("; incomplete: ").count(), 1, "{text}");
        assert!(
            text.contains("; incomplete: interrupted after 5 of 6 rows\n"),
            "{text}"
        );
        let html = html::render(&results);
        assert!(html.contains("<p class=\"banner\">interrupted"), "{html}");
    }

    /// Cells that did not run (a server gone mid-matrix) are a banner of the HTML report too,
    /// as the text's last line: the report said nothing of them.
    #[test]
    fn cells_that_did_not_run_are_a_banner() {
        let mut results = sample::results();
        assert_eq!(results.not_run_line(), None);
        results.cells[0].failure = Some("connection refused".into());
        let line = format!(
            "1 of {} cells did not run (see their rows)",
            results.cells.len()
        );
        assert_eq!(results.not_run_line().as_deref(), Some(line.as_str()));
        let html = html::render(&results);
        assert!(
            html.contains(&format!("<p class=\"banner\">{line}</p>")),
            "{html}"
        );
    }

    /// An interrupt that left a table one row names no fastest: it had nothing to be faster
    /// than (it read "h1 fastest; incomplete: interrupted after 1 of 3 rows").
    #[test]
    fn an_interrupt_that_left_one_row_gives_no_verdict() {
        let mut results = sample::results();
        let first = (
            results.cells[0].condition.clone(),
            results.cells[0].payload.clone(),
        );
        let keep = results.cells[0].variant;
        results
            .cells
            .retain(|c| (c.condition.clone(), c.payload.clone()) != first || c.variant == keep);
        results.interrupted = true;
        let text = text::render(&results);
        let name = keep.name();
        assert!(
            text.contains(&format!(
                ": no verdict: only {name} ran; incomplete: interrupted after 1 of "
            )),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&results.to_json().unwrap()).unwrap();
        assert_eq!(json["verdicts"][0]["fastest"], serde_json::Value::Null);
    }

    #[test]
    fn a_results_file_without_the_interrupt_fields_reads_as_complete() {
        let mut value = serde_json::to_value(sample::results()).unwrap();
        assert_eq!(value["interrupted"], false);
        value.as_object_mut().unwrap().remove("interrupted");
        value["setup"]
            .as_object_mut()
            .unwrap()
            .remove("cells_planned");
        let back: Results = serde_json::from_value(value).unwrap();
        assert!(!back.interrupted);
        assert_eq!(back.setup.cells_planned, 0);
    }
}
