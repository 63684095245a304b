//! Verdicts and anomalies: which protocol won a table, by how much, whether it is a tie, and what looks wrong.

use crate::results::Row;
use crate::variant::Variant;
use serde::Serialize;

/// When a table has a single repeat there is no measured spread; differences under this (or under
/// one round of requests in flight, see [`round_rps`]) are ties.
pub const SINGLE_RUN_TIE: f64 = 0.05;

/// Client CPU at or above this fraction of its cores means the client, not the protocol, was measured.
pub const SATURATED_CPU: f64 = 0.90;

/// Fewer completions than this per request in flight per repeat make a row too thin to rank: a
/// closed loop's count moves by one round (one completion per request in flight) with where the
/// measured period's edges fall, so below three rounds that is a third of the figure or more.
pub const MIN_PER_SLOT: f64 = 3.0;

/// A row with at least this share of its requests still in flight at the end is flagged: in a
/// closed loop the share is about 1 / (rounds + 1), so this many means fewer than 9 rounds per
/// request in flight, and B/req (bytes over completed requests) may read over 11% high.
pub const CUT_OFF_SHARE: f64 = 0.10;

/// A delay-bound ratio within this fraction of the rows' in-flight ratio is said to be about it.
const IN_FLIGHT_RATIO_CLOSE: f64 = 0.15;

/// The verdict of one table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The one-line verdict, e.g. "h2c fastest, 3.1x h1 (spread ±4%)".
    pub line: String,
    /// The fastest row's protocol, if any row measured anything.
    pub fastest: Option<Variant>,
    /// The fastest row's label: its protocol, and its shape when the table has several of it.
    pub fastest_row: Option<String>,
    /// Protocols that tie with the fastest (by the spread, the 5% rule or one round in flight).
    pub tied: Vec<Variant>,
    /// The tied rows' labels, as `fastest_row`.
    pub tied_rows: Vec<String>,
    /// The requests in flight of the rows the verdict compares, when they differ (else empty).
    pub in_flight: Vec<InFlight>,
    /// Rows too thin to rank, and why (a verdict names no winner when one could have won).
    pub not_ranked: Vec<NotRanked>,
}

/// A row left out of the ranking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRanked {
    /// The row's label.
    pub row: String,
    /// Why, e.g. "completed 2 of 34 started in 1 s" or "opened 2 of 4 connections".
    pub reason: String,
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
    let ran = row.shape.ran(row.streams_capped);
    u64::from(ran.connections) * u64::from(ran.streams)
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

/// "rows differ in requests in flight: 128 vs 64" for a row against the baseline, with their
/// in-flight ratio when the measured ratio is close to it on a `delayed` link: there latency
/// is the link's and bounds the rate (req/s ≈ in flight / round trip), so that difference
/// alone gives such a ratio. On a clean link latency grows with the load instead (h1 at 480 in
/// flight ran slower than at 64), and a match is a coincidence that read as the cause of a
/// multiplexing win. None when they keep the same number in flight.
fn in_flight_note(row: &Row, base: &Row, delayed: bool) -> Option<String> {
    let (a, b) = (in_flight(row), in_flight(base));
    if a == b || b == 0 {
        return None;
    }
    let mut note = format!("rows differ in requests in flight: {a} vs {b}");
    if let Some(expected) = in_flight_explains(row, base, delayed) {
        note.push_str(&format!(
            ", about their in-flight ratio ({})",
            format_ratio(expected)
        ));
    }
    Some(note)
}

/// The rows' in-flight ratio, when on a delayed link their req/s ratio is about that: each
/// request then waits out the link's round trip, so req/s follows requests in flight.
fn in_flight_explains(row: &Row, base: &Row, delayed: bool) -> Option<f64> {
    let (a, b) = (in_flight(row), in_flight(base));
    if a == b || b == 0 || !delayed {
        return None;
    }
    let expected = a as f64 / b as f64;
    let r = ratio(row, Some(base))?;
    ((r / expected - 1.0).abs() <= IN_FLIGHT_RATIO_CLOSE).then_some(expected)
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

/// Whether `b` ties with `a`: their difference is under one round of requests in flight (see
/// [`round_rps`]), or their min–max ranges overlap, or (single runs, or repeats that all read
/// the same) it is under 5%.
pub fn ties(a: &Row, b: &Row) -> bool {
    let diff = (a.rps.median - b.rps.median).abs();
    // Exactly one round apart is still a tie (the tolerance absorbs float rounding).
    if diff <= round_rps(a).max(round_rps(b)) * (1.0 + 1e-9) {
        return true;
    }
    if a.rps.min < a.rps.max || b.rps.min < b.rps.max {
        return a.rps.min <= b.rps.max && b.rps.min <= a.rps.max;
    }
    let top = a.rps.median.max(b.rps.median);
    top > 0.0 && diff / top <= SINGLE_RUN_TIE
}

/// Which rule of [`ties`] makes `a` and `b` a tie, in words: ranges that meet, a difference
/// within one round of requests in flight, or the 5% rule ("too close to call") when no row
/// has a spread (a single run, or repeats that all read the same: that tie was credited to the
/// one-round rule, beside a spread of ±0%).
fn tie_rule(a: &Row, b: &Row) -> &'static str {
    let spread = a.rps.min < a.rps.max || b.rps.min < b.rps.max;
    let diff = (a.rps.median - b.rps.median).abs();
    if a.runs > 1 && spread && overlap(a, b) {
        "inside the spread"
    } else if a.runs > 1 && diff <= round_rps(a).max(round_rps(b)) * (1.0 + 1e-9) {
        "within one round of requests in flight"
    } else {
        "too close to call"
    }
}

/// Whether two rows' min-max ranges of req/s meet.
fn overlap(a: &Row, b: &Row) -> bool {
    a.rps.min <= b.rps.max && b.rps.min <= a.rps.max
}

/// One round of a row's requests in flight over its measured period (in flight ÷ seconds): a
/// closed loop's req/s moves in steps of about this, so a smaller difference is no difference.
pub fn round_rps(row: &Row) -> f64 {
    if row.seconds > 0.0 {
        in_flight(row) as f64 / row.seconds
    } else {
        0.0
    }
}

/// Why a row's figures are too thin to rank, or None when they can carry a verdict:
/// - fewer connections opened than its shape asked for (in some repeat): the missing ones'
///   requests never started, so its req/s counts which handshakes survived the link;
/// - more requests still in flight at the end than completed: most of what it started is not
///   in its req/s;
/// - fewer than [`MIN_PER_SLOT`] completions per request in flight per repeat: its req/s is
///   then mostly where the period's edges fell (one round more or less is a third or more).
pub fn unfit(row: &Row) -> Option<String> {
    if row.failure.is_some() {
        return None;
    }
    // Error answers first: such a row is left out whatever else is wrong with it, and says so.
    if let Some(why) = mostly_not_2xx(row) {
        return Some(why);
    }
    // Before the connection count: a server that went away opened none, and it is not a link
    // that lost handshakes.
    if failed_all(row) {
        return Some(format!(
            "failed all {} requests it ended (see its errors)",
            count(row.errors)
        ));
    }
    if lost_handshakes(row) {
        return Some(opened_text(row));
    }
    // Per repeat, the thinnest: one repeat that completed nothing is no measurement, however
    // many the others completed (their average hid it).
    let per_slot = row.fewest_succeeded as f64 / in_flight(row).max(1) as f64;
    if row.cut_off <= row.succeeded && per_slot >= MIN_PER_SLOT {
        return None;
    }
    let period = match row.runs {
        0 | 1 => seconds(row.seconds),
        n => format!("{n} runs of {}", seconds(row.seconds)),
    };
    if row.started == 0 && row.succeeded == 0 {
        return Some(if row.cut_off > 0 {
            // Requests wait in flight for their connection's handshake: on a slow link most of
            // them may have had no connection yet.
            let opened = match (missing_connections(row), row.fewest_connections) {
                (0, _) => String::new(),
                (_, 0) => " (no connection had opened)".into(),
                (_, n) => format!(
                    " (only {n} of {} connections had opened)",
                    row.shape.connections
                ),
            };
            format!(
                "completed nothing in {period}: its {} warm-up requests were still in flight at the end{opened}",
                count(row.cut_off)
            )
        } else {
            format!("completed nothing in {period}")
        });
    }
    let mut why = format!(
        "completed {} of {} started in {period}",
        count(row.succeeded),
        count(row.started)
    );
    if row.cut_off <= row.succeeded {
        let thinnest = if row.runs > 1 {
            " in its thinnest run"
        } else {
            ""
        };
        why.push_str(&format!(", {per_slot:.1} per request in flight{thinnest}"));
    }
    // The cut-off anomaly counts these too: said here, the two lines add up.
    let measured_cut = row.started.saturating_sub(row.succeeded + row.errors);
    let from_warmup = row.cut_off.saturating_sub(measured_cut);
    if from_warmup > 0 {
        why.push_str(&format!(
            ", and {} started in the warm-up were still in flight",
            count(from_warmup)
        ));
    }
    Some(why)
}

/// Every request the row ended failed (a server gone, refusing connections): it could not
/// have won, whatever its ceiling.
fn failed_all(row: &Row) -> bool {
    row.succeeded == 0 && row.errors > 0
}

/// Why a row is not ranked when most of its responses were not 2xx: a 404 or 500 page is
/// not the service, and a server answers errors at a speed of its own.
fn mostly_not_2xx(row: &Row) -> Option<String> {
    (row.succeeded > 0 && row.non_2xx * 2 > row.succeeded).then(|| {
        format!(
            "{:.1}% of its responses were not 2xx (mostly {}): it measured an error answer, not the service; check the URL and the server",
            100.0 * row.non_2xx as f64 / row.succeeded as f64,
            row.non_2xx_top.unwrap_or(0)
        )
    })
}

/// Connections the shape asked for that a repeat never opened (the most in any repeat). Not
/// for h1-close: it opens one per request, and a handshake lost to the link is part of what it
/// measures, not a row short of its connections.
fn missing_connections(row: &Row) -> u64 {
    if !row.variant.keepalive() {
        return 0;
    }
    u64::from(row.shape.connections).saturating_sub(row.fewest_connections)
}

/// More than 5% of the connections missing: the row's req/s may read more than the single-run
/// tie margin low. Up to 5% cannot turn a verdict the tie rule would not already call a tie.
fn too_few_connections(row: &Row) -> bool {
    missing_connections(row) as f64 > SINGLE_RUN_TIE * f64::from(row.shape.connections)
}

/// Too few connections opened, and that is the row's trouble (a row that completed nothing,
/// with its warm-up requests still in flight, opened none for that reason instead).
fn lost_handshakes(row: &Row) -> bool {
    too_few_connections(row) && (row.started > 0 || row.succeeded > 0 || row.cut_off == 0)
}

/// "opened 2 of 4 connections" ("as few as" over several repeats).
fn opened_text(row: &Row) -> String {
    let few = if row.runs > 1 { "as few as " } else { "" };
    format!(
        "opened {few}{} of {} connections",
        row.fewest_connections, row.shape.connections
    )
}

/// `1 s`, `0.6 s`.
fn seconds(s: f64) -> String {
    if (s - s.round()).abs() < 0.05 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// Whether a row too thin to rank could have reached `best`: its ceiling (every request in
/// flight at the end completed, every missing connection opened) is within 5% of best's lowest
/// repeat or above it.
fn could_reach(row: &Row, best: &Row) -> bool {
    row.ceiling_rps * (1.0 + SINGLE_RUN_TIE) >= best.rps.min
}

/// What a table's network condition does to packets, as far as a verdict's words go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkTraits {
    /// It drops or corrupts packets.
    pub lossy: bool,
    /// It delays them: latency is the link's, so req/s follows requests in flight.
    pub delayed: bool,
}

impl LinkTraits {
    /// The traits of a link whose directions carry these netem strings (empty: none). What
    /// the strings set decides, not the words in them: `loss 0%` loses nothing.
    pub fn of(directions: &[&str]) -> LinkTraits {
        let mut link = LinkTraits::default();
        for text in directions.iter().filter(|t| !t.trim().is_empty()) {
            // Plans are checked before they run; a string that no longer parses says nothing.
            if let Ok(i) = httpvs_netem::Impairment::parse(text) {
                link.lossy |= i.loses();
                link.delayed |= i.delays();
            }
        }
        link
    }
}

/// The verdict for a table's rows on a link with `link`'s traits.
///
/// Rows too thin to rank ([`unfit`]) are left out of the ranking; when one of them could have
/// reached the fastest ranked row (or no row is fit), there is no winner and the line says why.
pub fn verdict(rows: &[Row], baseline: Variant, link: LinkTraits) -> Verdict {
    let ran: Vec<&Row> = rows.iter().filter(|r| r.failure.is_none()).collect();
    let nothing = |line: String, not_ranked: Vec<NotRanked>| Verdict {
        line,
        fastest: None,
        fastest_row: None,
        tied: vec![],
        tied_rows: vec![],
        in_flight: vec![],
        not_ranked,
    };
    if ran.iter().all(|r| r.rps.median <= 0.0) {
        return nothing("no protocol completed a request".into(), vec![]);
    }
    let thin: Vec<(&Row, String)> = ran
        .iter()
        .filter_map(|r| unfit(r).map(|why| (*r, why)))
        .collect();
    let mut ranked: Vec<&Row> = ran
        .iter()
        .copied()
        .filter(|r| r.rps.median > 0.0 && !thin.iter().any(|(t, _)| std::ptr::eq(*t, *r)))
        .collect();
    ranked.sort_by(|a, b| b.rps.median.total_cmp(&a.rps.median));
    let not_ranked: Vec<NotRanked> = thin
        .iter()
        .map(|(r, why)| NotRanked {
            row: label(r, rows),
            reason: why.clone(),
        })
        .collect();
    let best = ranked.first().copied();
    // A row of error answers, or of failures, is left out whatever its speed: it could not
    // have won.
    let (errored, thin): (Vec<_>, Vec<_>) = thin
        .into_iter()
        .partition(|(r, _)| mostly_not_2xx(r).is_some() || failed_all(r));
    let blocking: Vec<&(&Row, String)> = thin
        .iter()
        .filter(|(r, _)| best.is_none_or(|b| could_reach(r, b)))
        .collect();
    // Rows that did not run (the server went away mid-matrix).
    let not_run: Vec<String> = rows
        .iter()
        .filter(|r| r.failure.is_some())
        .map(|r| label(r, rows))
        .collect();
    let Some(best) = best.filter(|_| blocking.is_empty()) else {
        let mut line = if blocking.is_empty() {
            let each: Vec<String> = errored
                .iter()
                .map(|(r, why)| format!("{} {why}", label(r, rows)))
                .collect();
            format!("no verdict: {}", each.join(", "))
        } else {
            no_verdict_line(&blocking, rows)
        };
        if !not_run.is_empty() {
            line.push_str(&format!("; did not run: {}", not_run.join(", ")));
        }
        return nothing(line, not_ranked);
    };
    // One row left to rank because the others did not run, or failed every request: there is
    // nothing to compare it with.
    let failed: Vec<String> = not_run
        .iter()
        .map(|name| format!("{name} did not run"))
        .chain(
            errored
                .iter()
                .filter(|(r, _)| failed_all(r))
                .map(|(r, _)| format!("{} failed every request", label(r, rows))),
        )
        .collect();
    let other_errored = errored.iter().any(|(r, _)| !failed_all(r));
    if ranked.len() == 1 && !failed.is_empty() && !other_errored && thin.is_empty() {
        return nothing(
            format!(
                "no verdict: only {} ran ({})",
                label(best, rows),
                failed.join(", ")
            ),
            not_ranked,
        );
    }
    let mut v = ranked_verdict(&ranked, best, rows, baseline, link);
    if !errored.is_empty() {
        let each: Vec<String> = errored
            .iter()
            .map(|(r, _)| {
                let why = if failed_all(r) {
                    "every request failed"
                } else {
                    "mostly not 2xx"
                };
                format!("{} ({why})", label(r, rows))
            })
            .collect();
        v.line
            .push_str(&format!("; not ranked: {}", each.join(", ")));
    }
    if !thin.is_empty() {
        let each: Vec<String> = thin
            .iter()
            .map(|(r, why)| format!("{} ({why})", label(r, rows)))
            .collect();
        v.line.push_str(&format!(
            "; not ranked, though below {} even had all they left in flight completed: {}",
            label(best, rows),
            each.join(", ")
        ));
    }
    // Rows that did not run are named, or the line would read as a verdict over every
    // protocol of the table.
    if !not_run.is_empty() {
        v.line
            .push_str(&format!("; did not run: {}", not_run.join(", ")));
    }
    v.not_ranked = not_ranked;
    v
}

/// How far a row's B/req may read high: it divides every byte of the measured period by the
/// completed requests, while warm-up requests that ended in the period, failed ones, ones
/// cut off at its end and resent ones (behind a GOAWAY or a close) moved bytes too, up to
/// (completed + those) / completed. `None` under [`CUT_OFF_SHARE`] of the completed, as
/// `load`'s note.
pub fn bytes_high(row: &Row) -> Option<f64> {
    let others = row.cut_off + row.warmup_finished + row.errors + row.retried;
    (row.failure.is_none()
        && row.succeeded > 0
        && others as f64 >= row.succeeded as f64 * CUT_OFF_SHARE)
        .then(|| (row.succeeded + others) as f64 / row.succeeded as f64)
}

/// One line for a table's rows whose B/req may read high (see [`bytes_high`]): "B/req counts
/// ...: h1 up to 1.14x high, h2c up to 1.29x".
pub fn bytes_note(rows: &[Row]) -> Option<String> {
    let each: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            bytes_high(r).map(|h| format!("{} up to {}", label(r, rows), format_ratio(h)))
        })
        .collect();
    (!each.is_empty()).then(|| {
        format!(
            "B/req divides the period's bytes by its completed requests, while warm-up requests \
             that ended in it, failed ones, ones still in flight at its end and resent ones moved \
             bytes too, so it may read high: {}",
            each.join(", ")
        )
    })
}

/// On a lossy link, one line when h3 sits beside TCP rows: h3's B/req counts every datagram
/// quinn sent or took in (resent packets, and the ACKs loss brings, included), while a TCP
/// row's counts its socket's bytes once, the kernel's retransmissions unseen. At 30% loss h3
/// read 312 B/req up where it read 129 clean, and h1 69 against 67.
pub fn lossy_bytes_note(rows: &[Row], link: LinkTraits) -> Option<String> {
    let ran = |r: &&Row| r.failure.is_none() && r.bytes_per_request > 0.0;
    let least = |h3: bool| {
        rows.iter()
            .filter(ran)
            .filter(|r| (r.variant == Variant::H3) == h3)
            .map(|r| r.bytes_per_request)
            .reduce(f64::min)
    };
    // Only where h3's reads above a TCP row's: where it reads below, nothing is overstated.
    let above = matches!((least(true), least(false)), (Some(h3), Some(tcp)) if h3 > tcp);
    (link.lossy && above).then(|| {
        "B/req on a lossy link: h3's counts every UDP datagram, its resent packets and the \
         ACKs loss brings included, while a TCP row's counts its socket's bytes once (the \
         kernel resends unseen)"
            .to_string()
    })
}

/// "no verdict: h1 completed 2 of 34 started in 1 s, ...; run longer with --duration".
fn no_verdict_line(blocking: &[&(&Row, String)], rows: &[Row]) -> String {
    let each: Vec<String> = blocking
        .iter()
        .map(|(r, why)| format!("{} {why}", label(r, rows)))
        .collect();
    let lost = blocking.iter().any(|(r, _)| lost_handshakes(r));
    let thin = blocking.iter().any(|(r, _)| !lost_handshakes(r));
    let advice = match (thin, lost) {
        (true, true) => {
            "run longer with --duration, and a --warmup over 1 s lets lost handshakes retry"
        }
        (false, true) => "a --warmup over 1 s lets lost handshakes retry (TCP's first wait is 1 s)",
        _ => "run longer with --duration",
    };
    format!("no verdict: {}; {advice}", each.join(", "))
}

/// The verdict among ranked rows: the fastest, its ties, its ratio to the baseline, the slowest.
fn ranked_verdict(
    ranked: &[&Row],
    best: &Row,
    rows: &[Row],
    baseline: Variant,
    link: LinkTraits,
) -> Verdict {
    // A ratio needs a ranked baseline (one too thin to rank would make the ratio as thin) whose
    // client was not saturated (its req/s would be the client's limit, not the protocol's).
    let listed =
        baseline_row(rows, baseline).filter(|b| ranked.iter().any(|r| std::ptr::eq(*r, *b)));
    let saturated = listed.filter(|b| b.client_cpu_max.is_some_and(|c| c >= SATURATED_CPU));
    let base = listed.filter(|_| saturated.is_none());
    // The baseline is a row, not a protocol: another shape of its protocol (`h1@64` against
    // `h1@8`) is compared with it like any other row.
    let is_base = |r: &Row| listed.is_some_and(|b| std::ptr::eq(r, b));
    let base_label = listed.map_or_else(|| baseline.to_string(), |b| label(b, rows));
    let base_note = saturated.map(|b| {
        if is_base(best) {
            // Fastest even held back by its client: it is at least this fast, and the others'
            // ratios to it are at most what the table shows.
            "its client was saturated, so it may be faster still".to_string()
        } else {
            format!(
                "no ratio to {}: its client was saturated, so its req/s is the client's limit",
                label(b, rows)
            )
        }
    });
    let tied: Vec<&Row> = ranked[1..]
        .iter()
        .copied()
        .filter(|r| ties(best, r))
        .collect();
    let step = ranked.iter().map(|r| round_rps(r)).fold(0.0, f64::max);
    // A pair ties within the larger of its two rounds: where the rows' rounds differ, the one
    // quoted is the largest, which not every pair gets.
    let steps_differ = ranked.iter().any(|r| round_rps(r) < step * 0.99);
    let spread = format_spread(best, step, steps_differ);
    // A tie of repeats turns on every tied row's range, not only the fastest's: quote each.
    // (Repeats that all read the same tie by the 5% rule, which `spread` then names.)
    let tie_rows = || std::iter::once(best).chain(tied.iter().copied());
    let tie_spread = if !tied.is_empty()
        && tie_rows().all(|r| r.runs > 1)
        && tie_rows().any(|r| r.rps.min < r.rps.max)
    {
        let each: Vec<String> = tie_rows()
            .map(|r| {
                format!(
                    "{} ±{:.0}%",
                    label(r, rows),
                    r.rps.relative_half_range() * 100.0
                )
            })
            .collect();
        format!("spread {}", each.join(", "))
    } else {
        spread.clone()
    };
    let quoted = base.filter(|b| !is_base(best) && ratio(best, Some(b)).is_some());
    let vs_base = quoted
        .and_then(|b| ratio(best, Some(b)))
        .map(|r| format!("{} {base_label}", format_ratio(r)));
    let best_note = quoted.and_then(|b| in_flight_note(best, b, link.delayed));
    // A win the in-flight ratio accounts for needs no other reason (h3 at 2x16 streams read
    // "QUIC recovers a lost packet" at 2.00x h1 with 8 connections).
    let best_reason = quoted
        .filter(|b| in_flight_explains(best, b, link.delayed).is_none())
        .and_then(|b| explain_fast(best, b, link.lossy));
    let mut compared: Vec<&Row> = std::iter::once(best).chain(tied.iter().copied()).collect();
    let mut line = if rows.len() == 1 {
        // The table's only row (the plan or the probe left one protocol): no "fastest" of one,
        // and no tie rule (nothing to tie with): its spread, when repeats measured one.
        let spread = (best.runs > 1).then(|| spread_of(best));
        format!(
            "only {} here: nothing to compare it with{}",
            label(best, rows),
            parenthesised(&[spread])
        )
    } else if tied.is_empty() {
        let vs_base = vs_base.map(|v| format!(", {v}")).unwrap_or_default();
        format!(
            "{} fastest{vs_base}{}",
            label(best, rows),
            parenthesised(&[best_reason, base_note, best_note, Some(spread)])
        )
    } else {
        let names: Vec<String> = compared.iter().map(|r| label(r, rows)).collect();
        let by_median = vs_base.map(|v| format!("by median {} {v}", label(best, rows)));
        // Tied rows are compared with each other too: say when they differ in flight.
        let tied_note = best_note.or_else(|| {
            let differ = differing_in_flight(&compared, rows);
            (!differ.is_empty()).then(|| {
                let each: Vec<String> = differ
                    .iter()
                    .map(|f| format!("{} {}", f.row, f.requests))
                    .collect();
                format!("rows differ in requests in flight: {}", each.join(", "))
            })
        });
        format!(
            "tie: {}{}",
            names.join(" ≈ "),
            parenthesised(&[
                // The rule that made each tie (a single run has no spread: the 5% rule
                // follows), each named once.
                Some({
                    let mut rules: Vec<&str> = Vec::new();
                    for r in compared.iter().filter(|r| !std::ptr::eq(**r, best)) {
                        let rule = tie_rule(best, r);
                        if !rules.contains(&rule) {
                            rules.push(rule);
                        }
                    }
                    rules.join("; ")
                }),
                base_note,
                by_median,
                tied_note,
                Some(tie_spread)
            ])
        )
    };
    if let Some(b) = quoted {
        compared.push(b);
    }
    // With two rows, the best's ratio to the baseline covers the pair, unless the best is the
    // baseline: then the other row is named here, or the line would not mention it.
    let two_from_base = ranked.len() == 2 && is_base(best);
    if let Some(worst) = ranked
        .last()
        .filter(|w| (ranked.len() > 2 || two_from_base) && !ties(best, w))
    {
        // A slowest row that ties with the baseline is not slower than it by the rules the
        // line quotes: no `slowest h2 0.99x h1-tls`.
        let apart = base.is_some_and(|b| !ties(worst, b));
        // Against a baseline held back by its client, fastest or not, the slowest row's ratio
        // is a bound: the baseline could only have been faster (unless the row was held back
        // too).
        let bound = saturated.filter(|_| worst.client_cpu_max.is_none_or(|c| c < SATURATED_CPU));
        if let Some(r) = ratio(worst, bound).filter(|_| !is_base(worst)) {
            line.push_str(&format!(
                "; slowest {} ≤{} {base_label}",
                label(worst, rows),
                format_ratio(r)
            ));
            // Its usual reason, as beside a ratio that is not a bound.
            line.push_str(&parenthesised(&[explain_slow(worst, base, link.lossy)]));
            compared.push(worst);
        } else if let Some(r) = ratio(worst, base).filter(|_| !is_base(worst) && apart) {
            line.push_str(&format!(
                "; slowest {} {} {base_label}",
                label(worst, rows),
                format_ratio(r)
            ));
            let note = base.and_then(|b| in_flight_note(worst, b, link.delayed));
            // As for the fastest row: a ratio the in-flight ratio accounts for needs no other
            // reason (h2 at 0.49x h1-tls read "head-of-line blocking" beside "about their
            // in-flight ratio (0.50x)").
            let explained =
                base.is_some_and(|b| in_flight_explains(worst, b, link.delayed).is_some());
            let reason = explain_slow(worst, base, link.lossy).filter(|_| !explained);
            line.push_str(&parenthesised(&[reason, note]));
            compared.push(worst);
            compared.extend(base);
        } else if let Some((b, r)) = base
            .filter(|b| !is_base(worst) && tied.iter().any(|t| std::ptr::eq(*t, *b)))
            .and_then(|b| Some((b, ratio(worst, Some(b))?)))
        {
            // Tied with the baseline, which is in the tie, but not with the fastest: left out,
            // the row was in neither part of the line ("tie: h1-tls ≈ h1 ≈ h2c ≈ h2" and no
            // word of h3 at 0.95x h1).
            line.push_str(&format!(
                "; slowest {} {} {base_label} (tied with {base_label}, not with {})",
                label(worst, rows),
                format_ratio(r),
                label(best, rows)
            ));
            compared.push(worst);
            compared.push(b);
        }
    }
    Verdict {
        line,
        fastest: Some(best.variant),
        fastest_row: Some(label(best, rows)),
        tied: tied.iter().map(|r| r.variant).collect(),
        tied_rows: tied.iter().map(|r| label(r, rows)).collect(),
        in_flight: differing_in_flight(&compared, rows),
        not_ranked: vec![],
    }
}

/// A short reason for a slow row, when its figures and the link point at one.
fn explain_slow(row: &Row, base: Option<&Row>, lossy: bool) -> Option<String> {
    let (base_p50, base_p99) = base.map_or((0.0, 0.0), |b| (b.p50_ms, b.p99_ms));
    let tcp_multiplexed = matches!(row.variant, Variant::H2 | Variant::H2c);
    // A stall of the one connection holds every stream: the median rises with it, where
    // h1's p99 is itself loss recovery's (h2 at p50 57.7 ms against h1's 20.1 ms, with both
    // p99s about 0.6-0.7 s, went unexplained).
    let stalled = row.p99_ms > base_p99 * 1.5 || row.p50_ms > base_p50 * 1.5;
    let why = if row.variant == Variant::H1Close {
        "a new connection per request"
    } else if row.variant.multiplexed() && row.shape.streams == 1 {
        "one stream per connection: multiplexing unused"
    } else if tcp_multiplexed && lossy && stalled {
        "head-of-line blocking: one lost packet stalls every stream on the connection"
    } else {
        return None;
    };
    Some(why.into())
}

/// The usual reason for a row that beat the baseline, where one applies: h3 ahead of a TCP
/// protocol on a lossy link.
fn explain_fast(row: &Row, base: &Row, lossy: bool) -> Option<String> {
    let beat = ratio(row, Some(base)).is_some_and(|r| r > 1.0 + SINGLE_RUN_TIE);
    (lossy && beat && row.variant == Variant::H3 && base.variant != Variant::H3).then(|| {
        "QUIC recovers a lost packet on its own stream, where TCP holds up every byte behind it"
            .into()
    })
}

/// `12x`, `4.03x`, `0.62x`, `0.003x`: two decimals under 10, so a 1.05x tie and a 1.03x win
/// do not read `1.1x` and `1.0x`; a ratio below 0.01 keeps one significant digit (it read
/// `0.00x`, as if the row had not run), one below 0.001 reads `<0.001x`, and none at all `0x`.
pub fn format_ratio(r: f64) -> String {
    if r == 0.0 {
        // A row that completed nothing: none, not "less than a thousandth".
        "0x".to_string()
    } else if r >= 10.0 {
        format!("{r:.0}x")
    } else if r >= 0.01 {
        format!("{r:.2}x")
    } else if r >= 0.001 {
        format!("{r:.3}x")
    } else {
        "<0.001x".to_string()
    }
}

/// `spread ±4%`; with a single repeat, or repeats that all read the same, the rule for ties:
/// 5%, or one round of requests in flight (`step` req/s, "up to" when the rows' rounds differ:
/// a pair ties within the larger of its two) when that is more.
pub fn format_spread(row: &Row, step: f64, steps_differ: bool) -> String {
    let rule = if step > SINGLE_RUN_TIE * row.rps.median {
        format!(
            "differences under 5% or of at most one round of requests in flight ({}{} req/s) are ties",
            if steps_differ { "up to " } else { "" },
            crate::render::format::thousands(step)
        )
    } else {
        "differences under 5% are ties".into()
    };
    if row.runs <= 1 {
        return format!("single run: {rule}");
    }
    if row.rps.min == row.rps.max {
        return format!("{}: {rule}", spread_of(row));
    }
    spread_of(row)
}

/// `spread ±4%`: half the range of a row's repeats, as a share of its median.
fn spread_of(row: &Row) -> String {
    format!("spread ±{:.0}%", row.rps.relative_half_range() * 100.0)
}

/// The share of the link's packets sent late by its relay above which a row is flagged.
const LATE_SHARE: f64 = 0.01;

/// "1 packet", "3,022 packets".
fn packets(n: u64) -> String {
    match n {
        1 => "1 packet".to_string(),
        n => format!("{} packets", count(n)),
    }
}

/// A count with thousands separators, as the tables print them.
fn count(n: u64) -> String {
    crate::render::format::thousands(n as f64)
}

/// `part` of `whole` as a percentage to a tenth, and `<0.1%` rather than a `0.0%` that reads
/// as none.
fn share_text(part: u64, whole: u64) -> String {
    let pct = 100.0 * part as f64 / whole.max(1) as f64;
    if part > 0 && pct < 0.05 {
        "<0.1%".into()
    } else {
        format!("{pct:.1}%")
    }
}

/// What looks wrong in a row, one line each.
pub fn anomalies(row: &Row, rows: &[Row], client_cpus: usize, repeats: usize) -> Vec<String> {
    let name = label(row, rows);
    let mut out = Vec::new();
    if row.failure.is_some() {
        // The table row already says why; a second line would only repeat it.
        return out;
    }
    const LOST: &str = "the missing ones' requests never started: a handshake lost on the link \
                        waits 1 s or more to retry";
    match unfit(row) {
        // In unfit's order: a row that failed everything (a server gone: every connect
        // refused) is that, not a link that lost handshakes, whatever it opened.
        Some(why) if mostly_not_2xx(row).is_some() || failed_all(row) => {
            out.push(format!("{name}: not ranked: {why}"));
            return out;
        }
        Some(why) if lost_handshakes(row) => {
            out.push(format!("{name}: too thin to rank: {why} ({LOST})"));
        }
        Some(why) => out.push(format!("{name}: too thin to rank: {why}")),
        None if missing_connections(row) > 0 => out.push(format!(
            "{name}: {} ({LOST}); 5% or fewer, so it is still ranked",
            opened_text(row)
        )),
        None => {}
    }
    let configured = f64::from(row.shape.connections);
    if row.variant.keepalive() && row.connections > 2.0 * configured {
        // As the table's `new conns` shows it (a median of two repeats can end in .5).
        let opened = format!(
            "{name}: connection churn: {} connections opened for {} configured",
            count(row.connections.round() as u64),
            row.shape.connections
        );
        match &row.connection_note {
            // The load report's own reading: by what the server counted, warm-up included.
            // It is one repeat's, so its counts stand beside that repeat's opened, not the
            // median (184 opened, 180 closed read as "156 opened ... closed 180 times").
            Some(note) if repeats > 1 => out.push(format!(
                "{opened} (median of {repeats} repeats); in repeat {}, {} opened and {}",
                note.repeat,
                count(note.opened),
                note.text
            )),
            Some(note) => out.push(format!("{opened}: {}", note.text)),
            None => {
                let per_conn =
                    row.succeeded as f64 / repeats.max(1) as f64 / row.connections.max(1.0);
                out.push(format!(
                    "{opened}, about {per_conn:.0} measured requests each (the server closes \
                     them: check its max requests per connection)"
                ));
            }
        }
    }
    if let Some(ran) = row.streams_capped {
        let c = row.shape.connections;
        out.push(format!(
            "{name}: the server allows {ran} concurrent streams per connection, so this row ran \
             {c}x{ran} ({} requests in flight, not {})",
            in_flight(row),
            row.shape.in_flight()
        ));
    }
    if row.errors > 0 {
        let total = row.errors + row.succeeded;
        let mostly = row
            .errors_top
            .as_deref()
            .map_or(String::new(), |kind| format!(", mostly {kind}"));
        // Connections refused mid-cell: the server went away (or hit its connection limit),
        // and the row's figures are partly its absence (a server killed mid-cell was ranked
        // with no word of it).
        let gone = match row.errors_top.as_deref() {
            Some("refused") => {
                ": the server refused new connections during this cell (it \
                 stopped, or hit a connection limit), so its figures are partly that, not the \
                 protocol"
            }
            _ => "",
        };
        out.push(format!(
            "{name}: {} errors ({} of requests{mostly}){gone}",
            count(row.errors),
            share_text(row.errors, total)
        ));
    }
    if row.non_2xx > 0 {
        out.push(format!(
            "{name}: {} responses were not 2xx ({}, mostly {}): its req/s counts them; \
             check the URL and the server",
            count(row.non_2xx),
            share_text(row.non_2xx, row.succeeded),
            row.non_2xx_top.unwrap_or(0)
        ));
    }
    if row.retried > 0 {
        // A sum over the repeats, where the table's figures are medians: said so.
        let over = match repeats {
            0 | 1 => String::new(),
            n => format!(" over its {n} repeats"),
        };
        out.push(format!(
            "{name}: {} {} retried on a new connection{over} (GOAWAY, Connection: close, \
             REFUSED_STREAM, or a connection the server closed before its answer)",
            count(row.retried),
            if row.retried == 1 {
                "request"
            } else {
                "requests"
            }
        ));
    }
    let ended_or_cut = row.succeeded + row.errors + row.cut_off;
    let share = row.cut_off as f64 / ended_or_cut.max(1) as f64;
    if share >= CUT_OFF_SHARE {
        out.push(format!(
            "{name}: {:.0}% of its requests ({} of {}) were still in flight when the \
             measured period ended",
            share * 100.0,
            count(row.cut_off),
            count(ended_or_cut)
        ));
    }
    if row.link_queue_drops > 0 {
        out.push(format!(
            "{name}: the link's queue dropped {} ({} of those offered) on top of the \
             condition's own loss: the traffic outran netem's queue (raise its `limit`)",
            packets(row.link_queue_drops),
            share_text(row.link_queue_drops, row.link_packets_in)
        ));
    }
    // A few late packets among thousands move no figure; 1% of them can.
    if row.link_late as f64 > LATE_SHARE * row.link_packets_in as f64 {
        out.push(format!(
            "{name}: {} ({}) left the link's relay more than 1 ms after their time: \
             this machine could not keep up, so delays were longer than asked",
            packets(row.link_late),
            share_text(row.link_late, row.link_packets_in)
        ));
    }
    if row.stall_seconds > 0.0 {
        out.push(format!(
            "{name}: a repeat completed nothing for {:.1} s of its measured period (a stall of \
             the client, the server or the link): that repeat's req/s reads low, and the spread \
             with it",
            row.stall_seconds
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
