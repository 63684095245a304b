//! The text report: the same fields as the JSON, laid out for a terminal.

use super::diagnosis::group;
use super::format::{bytes, percentile_name, rate, us, us_f, window_size};
use super::model::{Bucket, Distribution, Report};
use crate::error::ErrorKind;
use std::fmt::Write;

/// Renders one cell of a distribution column.
type DistributionCell = fn(&Distribution) -> String;

/// Width of the histogram bars.
const BAR_WIDTH: u64 = 40;

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    header(&mut out, r);
    requests(&mut out, r);
    latency(&mut out, r);
    let heading = if r.latency_uncorrected.is_some() {
        "Latency histogram (corrected)"
    } else {
        "Latency histogram"
    };
    if r.latency_rows.is_empty() {
        // A report from before the rows were kept (`compare --from` an older file).
        histogram(&mut out, heading, &r.latency);
    } else {
        histogram_rows(&mut out, heading, &r.latency_rows);
    }
    phases(&mut out, r);
    statuses_and_errors(&mut out, r);
    wire(&mut out, r);
    connections(&mut out, r);
    quic(&mut out, r);
    network(&mut out, r);
    request_log(&mut out, r);
    thresholds(&mut out, r);
    out
}

fn header(out: &mut String, r: &Report) {
    let s = &r.shape;
    let stop = match (s.requests, s.duration_s) {
        (Some(n), _) => plural(n, "request"),
        (None, Some(d)) => format!("{d}s"),
        _ => String::new(),
    };
    let model = model(s.rate);
    // GET without a body goes without saying; anything else is named.
    let stop = match (s.method.as_str(), s.request_body_bytes) {
        ("GET", 0) => stop,
        (method, 0) => format!("{stop}, {method} without a body"),
        (method, n) => format!("{stop}, {method} with a {} body", bytes(n as f64)),
    };
    let alpn = r
        .protocol
        .alpn
        .as_ref()
        .map(|a| format!(" (ALPN {a})"))
        .unwrap_or_default();
    let via = r
        .target
        .connect_to
        .as_ref()
        .map_or(String::new(), |c| format!(", --connect-to {c}"));
    let _ = writeln!(
        out,
        "httpvs load {} ({}{via})",
        r.target.url, r.target.address
    );
    if !r.target.more_urls.is_empty() {
        // They share the first URL's origin: their paths say which they are.
        let path = |url: &str| -> String {
            url.parse::<http::Uri>()
                .ok()
                .and_then(|u| u.path_and_query().map(|p| p.to_string()))
                .unwrap_or_else(|| url.to_string())
        };
        let shown: Vec<String> = std::iter::once(r.target.url.as_str())
            .chain(r.target.more_urls.iter().map(String::as_str))
            .take(4)
            .map(path)
            .collect();
        let rest = r.target.more_urls.len() + 1 - shown.len();
        let more = if rest > 0 {
            format!(" and {} more", group(rest as u64))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "URLs:         {} in turn: {}{more}",
            group(r.target.more_urls.len() as u64 + 1),
            shown.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "Protocol:     {}{alpn}, requested {}{}",
        r.protocol.negotiated,
        r.protocol.requested,
        r.protocol
            .alt_svc
            .as_ref()
            .map_or(String::new(), |a| format!("; Alt-Svc: {a}"))
    );
    // HTTP/1.1 has no streams: -m is how deep each connection pipelines (with keep-alive; a
    // one-request connection pipelines nothing, and the no-keep-alive part says what -m does).
    let per_connection = match (r.protocol.negotiated.as_str(), s.streams, s.keepalive) {
        ("h1", 1, _) if s.connections == 1 => ", one request at a time".to_string(),
        ("h1", 1, _) => ", one request at a time each".to_string(),
        // Each of a slot's -m streams opens connections of its own: the tail says how many.
        ("h1", m, false) => format!(" × {m} streams"),
        ("h1", depth, true) => format!(", each pipelined {depth} deep"),
        (_, streams, _) => format!(" × {}", plural(u64::from(streams), "stream")),
    };
    let _ = writeln!(
        out,
        "Shape:        {model}: {}{per_connection}, {}, {stop}{}{}",
        plural(u64::from(s.connections), "connection"),
        plural(s.threads as u64, "thread"),
        if s.warmup_s > 0.0 {
            format!(", {}s warmup", s.warmup_s)
        } else {
            String::new()
        },
        match (s.keepalive, s.streams) {
            (true, _) => String::new(),
            (false, 1) => ", no keep-alive".to_string(),
            // Each stream is then a connection of its own, one request long.
            (false, m) => format!(
                ", no keep-alive: up to {} one-request connections open at once",
                group(u64::from(s.connections) * u64::from(m))
            ),
        }
    );
    if let Some(w) = &s.windows {
        let _ = writeln!(
            out,
            "Windows:      receive {} per stream, {}",
            window_size(w.stream_bytes),
            w.connection_bytes
                .map_or("no connection limit".to_string(), |c| format!(
                    "{} per connection",
                    window_size(c)
                ))
        );
    }
    if let Some(n) = &r.network {
        let _ = writeln!(
            out,
            "Network:      emulated link --net {:?}: up \"{}\", down \"{}\"",
            n.spec, n.up.netem, n.down.netem
        );
    }
    // An -n run splits its requests over the connections: with fewer requests than
    // connections (times streams), the rest never open.
    if let Some(n) = s.requests {
        let slots = u64::from(s.connections) * u64::from(s.streams.max(1));
        if n < slots {
            let _ = writeln!(
                out,
                "              -n {} is below -c x -m ({}): only {} of them ran",
                group(n),
                group(slots),
                group(n)
            );
        }
    }
    if s.streams < s.streams_requested {
        let _ = writeln!(
            out,
            "              -m {} capped to {} by the server's concurrent-stream limit",
            s.streams_requested, s.streams
        );
    }
}

/// "1 thread", "4 threads".
fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{} {word}s", group(n))
    }
}

fn requests(out: &mut String, r: &Report) {
    let q = &r.requests;
    // Stopped before the measured part began: the warm-up's requests did not outlive it.
    let in_warmup = r.interrupted && r.duration_s == 0.0 && r.shape.warmup_s > 0.0;
    let _ = writeln!(
        out,
        "Duration:     {:.2}s{}",
        r.duration_s,
        if in_warmup {
            " (interrupted in the warm-up: nothing was measured)"
        } else if r.interrupted
            && r.request_log
                .as_ref()
                .is_some_and(|l| l.reader_closed_stdout())
        {
            " (ended when the --log-file reader closed the pipe: the report covers what ran until then)"
        } else if r.interrupted {
            " (interrupted: the report covers what ran until then)"
        } else {
            ""
        }
    );
    // "Succeeded" is a complete response of any status; h2load users read it as 2xx/3xx.
    let not_2xx: u64 = r
        .status_codes
        .iter()
        .filter(|s| !(200..300).contains(&s.code))
        .map(|s| s.count)
        .sum();
    let _ = writeln!(
        out,
        "Requests:     {} started = {} succeeded{} + {} failed + {} cut off at the end{}",
        group(q.started),
        group(q.succeeded),
        match not_2xx {
            0 => String::new(),
            n => format!(" ({} of them not 2xx)", group(n)),
        },
        group(q.failed),
        group(q.cut_off),
        if q.identity_holds {
            ""
        } else {
            "  (IDENTITY BROKEN: a bug in httpvs, please report it)"
        }
    );
    let w = &q.from_warmup;
    if in_warmup && w.cut_off > 0 {
        let _ = writeln!(
            out,
            "From warm-up: {} requests still in flight when it was interrupted, not counted above",
            group(w.cut_off)
        );
    } else if w.finished + w.cut_off > 0 {
        let _ = writeln!(
            out,
            "From warm-up: {} it released outlived it, not counted above ({} finished in the run, {} still in flight at the end)",
            plural(w.finished + w.cut_off, "request"),
            group(w.finished),
            group(w.cut_off)
        );
    }
    if q.retried.total > 0 {
        // Said only when some were: h1 pipelining with --timeout alone makes them.
        let behind = match q.retried.behind_timeout {
            0 => String::new(),
            n => format!(", behind a timed-out request {}", group(n)),
        };
        // GOAWAY and refused streams are h2's and h3's.
        let streams = match r.protocol.is_h1() {
            true => String::new(),
            false => format!(
                "GOAWAY {}, refused stream {}, ",
                group(q.retried.goaway),
                group(q.retried.refused)
            ),
        };
        let _ = writeln!(
            out,
            "Retried:      {} resends (each request counts once, as it ended; after {streams}connection closed {}{behind})",
            group(q.retried.total),
            group(q.retried.connection_closed)
        );
    }
    let t = &r.throughput;
    // Succeeded requests per second, as h2load and compare count them; with failures, the rate
    // of completions (failures included) beside it.
    let _ = writeln!(
        out,
        "Throughput:   {} req/s succeeded{}, {}/s received, {}/s sent",
        rate(t.succeeded_per_s),
        if q.failed > 0 {
            format!(" ({} completed, failures included)", rate(t.requests_per_s))
        } else {
            String::new()
        },
        bytes(t.bytes_received_per_s),
        bytes(t.bytes_sent_per_s)
    );
    if let Some((asked, sent)) = send_rate(r) {
        if sent < 0.97 * asked {
            // Streams waiting on connections that never opened (most failures were of
            // requests that had none): more of them would not help.
            let unconnected = unconnected_failures(r);
            let why = if unconnected > 0 && unconnected * 2 >= r.requests.failed {
                format!(
                    "the streams were waiting on connections that did not open ({} attempts \
                     failed; see Errors)",
                    group(r.connections.failed_to_open)
                )
            } else {
                "every one of the -c x -m streams was waiting on its answer (the server, or an \
                 emulated link's round trip: raise -c or -m if the server can take more), or the \
                 client ran out of CPU"
                    .to_string()
            };
            let _ = writeln!(
                out,
                "  note: asked for {} req/s, sent {} req/s: {why}",
                rate(asked),
                rate(sent)
            );
        }
    }
    series(out, r);
}

/// The open model's asked and achieved send rates. A `-z` run divides what it started by the
/// span; a `-n` run's span also holds the wait for its last responses, so its sends are judged
/// up to the last of them: n sends at the rate asked take (n - 1) / rate, plus one interval;
/// and only when some send was late.
fn send_rate(r: &Report) -> Option<(f64, f64)> {
    let asked = r.shape.rate?;
    let started = r.requests.started as f64;
    let schedule = r.schedule.as_ref()?;
    if r.shape.duration_s.is_some() {
        // Every due send went, none late: the schedule was kept, and a short count is only
        // its whole sends (`--rate 1` with a 0.5 s measured part has none due, and was told
        // every stream was waiting on the server).
        if schedule.late_sends == 0 && schedule.unsent == 0 {
            return None;
        }
        (r.duration_s > 0.0).then(|| (asked, started / r.duration_s))
    } else {
        // No send was late: the last one's few µs of ordinary lag are no shortfall, though
        // over a schedule of a millisecond or two they read as one ("sent 946 req/s" of
        // 1,000 for a single request).
        if schedule.late_sends == 0 {
            return None;
        }
        let span = schedule.last_send_s + 1.0 / asked;
        (span > 0.0).then(|| (asked, started / span))
    }
}

/// The per-second series in one line: every second for short runs, else min/mean/max.
fn series(out: &mut String, r: &Report) {
    // Whole seconds only: the partial interval a run ends on (the last half second of a 1.5 s
    // run) is a rate over too short a time to stand beside them.
    let mut since = 0.0;
    let whole: Vec<f64> = r
        .series
        .iter()
        .filter(|p| {
            let span = p.t_s - since;
            since = p.t_s;
            span >= 0.9
        })
        .map(|p| p.requests_per_s)
        .collect();
    if whole.len() < 2 {
        return;
    }
    // The series counts completions: with failures, the line says so.
    let completed = if r.requests.failed > 0 {
        " completed, failures included"
    } else {
        ""
    };
    if whole.len() <= 10 {
        let list: Vec<String> = whole.iter().map(|&v| rate(v)).collect();
        let _ = writeln!(out, "Per second:   {} req/s{completed}", list.join(", "));
    } else {
        let min = whole.iter().copied().fold(f64::INFINITY, f64::min);
        let max = whole.iter().copied().fold(0.0, f64::max);
        let mean = whole.iter().sum::<f64>() / whole.len() as f64;
        let _ = writeln!(
            out,
            "Per second:   min {} req/s, mean {}, max {} over {} seconds{completed}",
            rate(min),
            rate(mean),
            rate(max),
            whole.len()
        );
    }
}

fn latency(out: &mut String, r: &Report) {
    if r.latency.count == 0 {
        let _ = writeln!(out, "\nLatency      none: no request succeeded");
        // The open model's schedule still says what it could not send.
        schedule(out, r);
        return;
    }
    let mut cols: Vec<(&str, &Distribution)> = Vec::new();
    match &r.latency_uncorrected {
        Some(unc) => {
            cols.push(("corrected", &r.latency));
            cols.push(("uncorrected", unc));
        }
        None => cols.push(("latency", &r.latency)),
    }
    let _ = write!(out, "\nLatency     ");
    for (name, _) in &cols {
        let _ = write!(out, "{name:>14}");
    }
    out.push('\n');
    let rows: [(&str, DistributionCell); 4] = [
        ("min", |d| us(d.min_us)),
        ("mean", |d| us_f(d.mean_us)),
        ("stdev", |d| us_f(d.stdev_us)),
        ("max", |d| us(d.max_us)),
    ];
    for (label, f) in rows {
        let _ = write!(out, "  {label:<10}");
        for (_, d) in &cols {
            let _ = write!(out, "{:>14}", f(d));
        }
        out.push('\n');
    }
    for (i, p) in r.latency.percentiles.iter().enumerate() {
        let _ = write!(out, "  {:<10}", percentile_name(p.p));
        for (_, d) in &cols {
            let v = d.percentiles.get(i).map_or(0, |x| x.us);
            let _ = write!(out, "{:>14}", us(v));
        }
        out.push('\n');
    }
    schedule(out, r);
}

/// The open model's lines: late sends, and the sends due by the end that never went out.
fn schedule(out: &mut String, r: &Report) {
    if let Some(s) = &r.schedule {
        // No send measured (an interrupt in or just after the warm-up): no lag to speak of,
        // rather than "0 of 0 sends were late" with percentiles of nothing.
        if s.lag.count > 0 {
            let _ = writeln!(
                out,
                "  {} of {} sends were late (more than {} behind their intended time); lag of every send: p50 {}, p99 {}, max {}",
                group(s.late_sends),
                group(s.lag.count),
                us(s.late_threshold_us),
                us(s.lag.percentile(50.0).unwrap_or(0)),
                us(s.lag.percentile(99.0).unwrap_or(0)),
                us(s.lag.max_us)
            );
        }
        if s.unsent > 0 {
            let _ = writeln!(
                out,
                "  {} due by the end never went out (the oldest was due {} before it): \
                 their wait is in no figure above",
                plural(s.unsent, "send"),
                us(s.unsent_oldest_us)
            );
        }
        if s.warmup_dropped > 0 {
            let _ = writeln!(
                out,
                "  {} due in the warm-up never went out: dropped at its end, so the measured part \
                 starts on its own schedule (their wait is in no figure above)",
                plural(s.warmup_dropped, "send")
            );
        }
    }
}

/// The histogram's rows (`Report::latency_rows`), empty ones included, with a bar each.
fn histogram_rows(out: &mut String, heading: &str, rows: &[Bucket]) {
    let most = rows.iter().map(|r| r.count).max().unwrap_or(1).max(1);
    let _ = writeln!(out, "\n{heading}");
    let labels = row_labels(rows);
    for (row, label) in rows.iter().zip(labels) {
        let bar = "■".repeat(((row.count * BAR_WIDTH).div_ceil(most)) as usize);
        let _ = writeln!(
            out,
            "  ≤ {label:>9} |{bar:<width$}| {}",
            group(row.count),
            width = BAR_WIDTH as usize
        );
    }
}

/// The rows' bounds in the best unit, to the µs when two neighbours would read the same at
/// two decimals (a narrow spread: "≤ 1.37ms" twice).
fn row_labels(rows: &[Bucket]) -> Vec<String> {
    let short: Vec<String> = rows.iter().map(|r| us(r.le_us)).collect();
    if short.windows(2).all(|w| w[0] != w[1]) {
        return short;
    }
    rows.iter()
        .map(|r| match r.le_us {
            v if v < 1_000 => format!("{v}µs"),
            v if v < 1_000_000 => format!("{:.3}ms", v as f64 / 1e3),
            v => format!("{:.6}s", v as f64 / 1e6),
        })
        .collect()
}

/// Buckets regrouped by powers of two, one row each, with a bar (reports without rows).
fn histogram(out: &mut String, heading: &str, d: &Distribution) {
    if d.buckets.is_empty() {
        return;
    }
    let mut rows: Vec<(u64, u64)> = Vec::new();
    let max = d.max_us.max(1);
    for b in &d.buckets {
        // Rows are powers of two, each holding the buckets that end at or below it, so "≤ X"
        // is true of every sample in the row; the top row is labelled with the true maximum.
        let bound = b.le_us.clamp(1, max).next_power_of_two();
        match rows.last_mut() {
            Some((le, n)) if *le == bound => *n += b.count,
            _ => rows.push((bound, b.count)),
        }
    }
    if let Some(top) = rows.last_mut() {
        top.0 = top.0.min(max);
    }
    let most = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1);
    let _ = writeln!(out, "\n{heading}");
    for (le, n) in rows {
        let bar = "■".repeat(((n * BAR_WIDTH).div_ceil(most)) as usize);
        let _ = writeln!(
            out,
            "  ≤ {:>9} |{bar:<width$}| {}",
            us(le),
            group(n),
            width = BAR_WIDTH as usize
        );
    }
}

fn phases(out: &mut String, r: &Report) {
    let p = &r.phases;
    let _ = writeln!(
        out,
        "\nPhases              min      mean       p50       p99       max     count"
    );
    let _ = writeln!(out, "  dns        {:>9}   (once)", us(p.dns_us));
    let rows = [
        ("tcp connect", &p.tcp_connect),
        ("handshake", &p.handshake),
        ("h2 settings", &p.settings),
        ("ttfb", &p.ttfb),
        ("body", &p.body),
    ];
    for (name, d) in rows {
        if d.count == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "  {name:<11}{:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            us(d.min_us),
            us_f(d.mean_us),
            us(d.percentile(50.0).unwrap_or(0)),
            us(d.percentile(99.0).unwrap_or(0)),
            us(d.max_us),
            group(d.count)
        );
    }
    if let Some(resumed) = p.handshakes_resumed.filter(|&n| n > 0) {
        // A resumed handshake skips the certificate and its signature: shorter, and cheaper
        // for the server, so the row is not a full handshake's figure.
        let _ = writeln!(
            out,
            "  ({} of {} handshakes resumed a TLS session from an earlier connection)",
            group(resumed),
            group(p.handshake.count)
        );
    }
}

fn statuses_and_errors(out: &mut String, r: &Report) {
    if !r.status_codes.is_empty() {
        let _ = writeln!(out, "\nStatus codes");
        for s in &r.status_codes {
            let _ = writeln!(out, "  {:<26}{:>12}", s.code, group(s.count));
        }
    }
    if !r.errors.is_empty() {
        let _ = writeln!(out, "\nErrors");
        for e in &r.errors {
            let _ = writeln!(out, "  {:<26}{:>12}", e.kind, group(e.count));
        }
        if r.no_http_answer() {
            let _ = writeln!(out, "  note: {NOT_HTTP_NOTE}");
        }
        if r.errors.iter().any(|e| e.kind == "local_ports") {
            let _ = writeln!(out, "  note: {LOCAL_PORTS_NOTE}");
        }
        if r.errors.iter().any(|e| e.kind == "open_files") {
            let _ = writeln!(out, "  note: {OPEN_FILES_NOTE}");
        }
        if let Some(note) = tls_after_handshake_note(r) {
            let _ = writeln!(out, "  note: {note}");
        }
    }
}

/// Why requests failed as `tls` in a run whose handshakes completed (some of them at least):
/// for the report's errors, and compare's probe of a user's server.
pub fn tls_after_handshake_note(r: &Report) -> Option<&'static str> {
    let tls = r.errors.iter().any(|e| e.kind == "tls");
    (tls && r.phases.handshake.count > 0).then_some(TLS_AFTER_HANDSHAKE_NOTE)
}

const TLS_AFTER_HANDSHAKE_NOTE: &str = "tls: a failed handshake, or a TLS alert from the server \
     after one. Under TLS 1.3 a server that wants a client certificate refuses only after the \
     handshake has completed: give it one with --cert and --key (one it trusts, if it refused \
     the one given). `httpvs trace URL` shows what the server said.";

/// Why connects failed as `local_ports`, and what frees ports.
const LOCAL_PORTS_NOTE: &str = "local_ports: a new connection could not get a local address \
     (EADDRNOTAVAIL). Most often no local port was free: every connection open to this server, \
     and each one this client closed in the last 60 s (TIME_WAIT, which --no-keepalive fills), \
     holds a port of net.ipv4.ip_local_port_range; use fewer connections, keep them alive, or \
     widen the range. (An IPv6 target on a host with IPv6 off gives it too.)";

/// Why connects failed as `open_files`, and what to change.
const OPEN_FILES_NOTE: &str = "open_files: a new connection could not get a file descriptor \
     (EMFILE or ENFILE): this process's open-file limit (ulimit -n) or the system's \
     (fs.file-max) was reached after the run had started, by connections opened again or by \
     another program's files; raise the limit or use fewer connections.";

/// Why a run in which no request got an HTTP answer failed ([`Report::no_http_answer`]).
pub const NOT_HTTP_NOTE: &str = "no request got an HTTP answer: the server sent something else \
     or hung up (http:// to a TLS port? use https://; or not an HTTP server, or one that breaks \
     HTTP/1.1: httpvs trace URL shows what it sent)";

/// Bytes per request: to a tenth of a byte while small (112.0B against 230.0B is the point of
/// a header comparison), in KiB/MiB once large.
fn per_request(v: f64) -> String {
    if v < 1024.0 {
        format!("{v:.1}B")
    } else {
        bytes(v)
    }
}

fn wire(out: &mut String, r: &Report) {
    let w = &r.wire;
    // Per succeeded request: with none, there is no such figure (not 0 B).
    let each = |v: f64| {
        if r.requests.succeeded == 0 {
            String::new()
        } else {
            format!(" ({}/request)", per_request(v))
        }
    };
    let _ = writeln!(
        out,
        "\nWire bytes   sent {}{}, received {}{}",
        bytes(w.sent as f64),
        each(w.sent_per_request),
        bytes(w.received as f64),
        each(w.received_per_request)
    );
    let savings = w
        .header_savings
        .map(|s| format!(" (header savings {:.2}%)", s * 100.0))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  headers    sent {}, received {} encoded / {} decoded{savings}",
        bytes(w.header_sent as f64),
        bytes(w.header_received as f64),
        bytes(w.header_decoded_received as f64)
    );
    let _ = writeln!(
        out,
        "  body       received {}",
        bytes(w.body_received as f64)
    );
    if let Some(note) = per_request_skew(r) {
        let _ = writeln!(out, "  note: {note}");
    }
}

/// Failure kinds of requests whose connection never opened: they moved no bytes.
const NO_CONNECTION: [ErrorKind; 4] = [
    ErrorKind::Refused,
    ErrorKind::ConnectTimeout,
    ErrorKind::LocalPorts,
    ErrorKind::OpenFiles,
];

/// Requests that failed for want of a connection ([`NO_CONNECTION`]).
fn unconnected_failures(r: &Report) -> u64 {
    r.errors
        .iter()
        .filter(|e| NO_CONNECTION.iter().any(|k| k.to_string() == e.kind))
        .map(|e| e.count)
        .sum()
}

/// A note when the per-request figures count the bytes of many requests they do not divide
/// by: every byte of the measured part is on the wire, but only succeeded requests divide it,
/// so warm-up requests that finished in it, failed ones and those cut off at the end add bytes
/// and no requests (at `-m 50` with a 1 s delay, 20 KiB/request for 10 KiB responses).
fn per_request_skew(r: &Report) -> Option<String> {
    let q = &r.requests;
    // A request whose connection never opened moved nothing: a server killed mid-run gave
    // hundreds of refusals, and the note said the figures "may read up to 3.1x high".
    let failed = q.failed.saturating_sub(unconnected_failures(r));
    // A resent request (behind a GOAWAY or a close) was written twice or more.
    let others =
        q.from_warmup.finished + failed + q.cut_off + q.from_warmup.cut_off + q.retried.total;
    if q.succeeded == 0 || others * 10 < q.succeeded {
        return None;
    }
    let most = (q.succeeded + others) as f64 / q.succeeded as f64;
    Some(format!(
        "the per-request bytes divide by the {} succeeded requests only, while {} more (warm-up ones that finished, failed ones, ones cut off, resent ones) moved bytes too: they may read up to {most:.1}x high",
        group(q.succeeded),
        group(others)
    ))
}

fn connections(out: &mut String, r: &Report) {
    let c = &r.connections;
    let s = &c.closed_by_server;
    let _ = writeln!(
        out,
        "\nConnections  opened {}{}, failed to open {}, reused for {} requests",
        group(c.opened),
        match c.probes {
            0 => String::new(),
            1 => " (+1 probe before the run)".to_string(),
            n => format!(" (+{n} probes before the run)"),
        },
        group(c.failed_to_open),
        group(c.reused_requests)
    );
    // Each protocol's own ways: GOAWAY is h2's and h3's, `Connection: close` h1's, and QUIC
    // has no FIN (its plain close is the server's CONNECTION_CLOSE without an error).
    let h1 = r.protocol.is_h1();
    let fin = match r.protocol.negotiated.as_str() {
        "h3" => "CONNECTION_CLOSE",
        _ => "FIN",
    };
    let announced = if h1 || (s.goaway == 0 && s.connection_close > 0) {
        format!("Connection: close {}", group(s.connection_close))
    } else {
        format!(
            "GOAWAY {}{}",
            group(s.goaway),
            match s.goaway_error {
                0 => String::new(),
                n if n == s.goaway => " all with an error code".to_string(),
                n => format!(" of which {} with an error code", group(n)),
            }
        )
    };
    let _ = writeln!(
        out,
        "  closed by the server {} ({announced}, {fin} {}, reset {}); by us {}{}",
        group(s.total),
        group(s.fin),
        group(s.reset),
        group(c.closed_locally),
        match c.closed_unasked {
            0 => String::new(),
            n => format!(" ({} after bytes no request asked for)", group(n)),
        }
    );
    let p = &c.requests_per_connection;
    let _ = writeln!(
        out,
        "  requests per connection: min {}, mean {}, max {}",
        group(p.min),
        rate(p.mean),
        group(p.max)
    );
    if let Some(d) = &c.diagnosis {
        let _ = writeln!(out, "  note: {d}");
    }
}

fn quic(out: &mut String, r: &Report) {
    let Some(q) = &r.quic else { return };
    let _ = writeln!(
        out,
        "\nQUIC         {} datagrams sent ({}), {} received ({}); {} sent packets lost, {} resent",
        group(q.datagrams_sent),
        bytes(q.udp_bytes_sent as f64),
        group(q.datagrams_received),
        bytes(q.udp_bytes_received as f64),
        group(q.packets_lost),
        group(q.retransmits)
    );
    let _ = writeln!(
        out,
        "  RTT mean {} (min {}), our cwnd mean {}, early (0-RTT) requests {}{}",
        us(q.mean_smoothed_rtt_us),
        us(q.min_rtt_us),
        bytes(q.mean_cwnd_bytes as f64),
        group(q.early_requests),
        early_rejected(q.early_rejected)
    );
    if let Some(note) = &q.note {
        let _ = writeln!(out, "  note: {note}");
    }
}

/// What follows the early-request count when the server refused early data.
fn early_rejected(n: u64) -> String {
    match n {
        0 => String::new(),
        n => format!(
            " ({} more sent early were refused by the server, and sent again)",
            group(n)
        ),
    }
}

/// The emulated link's relay counters, one row per direction, as `httpvs netem` prints them.
fn network(out: &mut String, r: &Report) {
    let Some(n) = &r.network else { return };
    // A `seed` in the options is what repeats the run (for its direction; --net-seed is then
    // refused).
    let own_seed = n.spec.split_whitespace().any(|w| w == "seed");
    let seed = match own_seed {
        true => format!("seed {} where --net names none", n.seed),
        false => format!("seed {} (--net-seed repeats it)", n.seed),
    };
    let _ = writeln!(
        out,
        "\nNetwork      --net {:?}, {seed}, MTU {}; packets over the whole run",
        n.spec, n.mtu
    );
    let _ = writeln!(
        out,
        "  {:<5}{:>9}{:>9}{:>11}{:>7}{:>6}{:>8}{:>8}{:>7}{:>6}{:>6}{:>9}",
        "dir",
        "in",
        "out",
        "bytes out",
        "lost",
        "dup",
        "corrupt",
        "reorder",
        "qdrop",
        "ecn",
        "late",
        "rejected"
    );
    for (name, d) in [("up", &n.up), ("down", &n.down)] {
        let _ = writeln!(
            out,
            "  {name:<5}{:>9}{:>9}{:>11}{:>7}{:>6}{:>8}{:>8}{:>7}{:>6}{:>6}{:>9}",
            d.packets_in,
            d.packets_out,
            bytes(d.bytes_out as f64),
            d.lost,
            d.duplicated,
            d.corrupted,
            d.reordered,
            d.queue_drops,
            d.ecn_marked,
            d.late,
            d.rejected
        );
    }
    let late = n.up.late + n.down.late;
    if late > 0 {
        let _ = writeln!(
            out,
            "  note: {} packets left the relay more than 1 ms after their time: this machine could not keep up, so delays were longer than asked",
            group(late)
        );
    }
    let held = n.up.held + n.down.held;
    if held > 0 {
        let _ = writeln!(out, "  {held} packets were still in the link at the end");
    }
    if let Some(note) = spurious_quic_loss(r) {
        let _ = writeln!(out, "  note: {note}");
    }
}

/// QUIC declared far more of this client's packets lost than the link dropped on the way up:
/// the rest came late or out of order (jitter reorders packets, in the kernel's netem too), and
/// RFC 9002's loss detection (3 packets or 9/8 of an RTT behind) took them for lost and cut
/// the congestion window each time. TCP's RACK adapts its reordering window; QUIC here does not.
fn spurious_quic_loss(r: &Report) -> Option<String> {
    let (q, n) = (r.quic.as_ref()?, r.network.as_ref()?);
    // A corrupted packet is dropped by its receiver (checksum, AEAD): lost as surely.
    let dropped = n.up.lost + n.up.queue_drops + n.up.rejected + n.up.corrupted;
    (q.packets_lost > 2 * dropped + 10).then(|| {
        format!(
            "QUIC declared {} of its packets lost while the link dropped or corrupted {} on the \
             way up: the others came late or out of order (jitter and reorder move packets), \
             and QUIC's loss detection took them for lost and cut its window",
            group(q.packets_lost),
            group(dropped)
        )
    })
}

/// Where `--log-file` put each request's row, and whether every row got there.
fn request_log(out: &mut String, r: &Report) {
    let Some(log) = &r.request_log else { return };
    let rows = plural(log.rows, "row");
    match &log.error {
        None => {
            let _ = writeln!(
                out,
                "\nRequest log  {rows} in {} (start µs, status, duration µs, intended µs, \
                 connection, url, error, sent µs; tab-separated)",
                log.file
            );
        }
        Some(why) => {
            let _ = writeln!(
                out,
                "\nRequest log  {rows} in {}, then writing failed: {why}; the other rows are \
                 missing",
                log.file
            );
        }
    }
}

fn thresholds(out: &mut String, r: &Report) {
    if r.thresholds.is_empty() {
        return;
    }
    let latency = if r.latency_uncorrected.is_some() {
        "; latency rules read the corrected latency"
    } else {
        ""
    };
    let _ = writeln!(out, "\nThresholds (--fail-on{latency})");
    for t in &r.thresholds {
        let actual = match t.unit.as_str() {
            "ms" => us((t.actual * 1000.0).round() as u64),
            "%" => format!("{:.2}%", t.actual),
            "req/s" => format!("{} req/s", rate(t.actual)),
            _ => group(t.actual.round() as u64),
        };
        if t.no_data {
            let _ = writeln!(
                out,
                "  {:<24} no data (no request to judge it by)  BREACHED",
                t.rule
            );
            continue;
        }
        // A latency rule judges the requests that were measured: sends that never went out
        // (a stalled server at the end of an open-model run) waited longer than any of them.
        let blind = match (&r.schedule, t.unit.as_str()) {
            (Some(s), "ms") if !t.breached && s.unsent_oldest_us as f64 > t.actual * 1000.0 => {
                format!(
                    " (but {} sends never went out, the oldest due {} before the end: --fail-on unsent>0 judges them)",
                    group(s.unsent),
                    us(s.unsent_oldest_us)
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:<24} actual {:<14} {}{blind}",
            t.rule,
            actual,
            if t.breached { "BREACHED" } else { "ok" }
        );
    }
}

/// The load model, the rate as given, with its thousands grouped as every other count here.
fn model(rate: Option<f64>) -> String {
    match rate {
        Some(r) if r.fract() == 0.0 && r < u64::MAX as f64 => {
            format!("open model at {} req/s", group(r as u64))
        }
        Some(r) => format!("open model at {r} req/s"),
        None => "closed model".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::Bucket;

    /// The Shape line's rate read "1000000000 req/s" beside counts grouped everywhere else.
    #[test]
    fn the_rate_is_grouped_as_counts_are() {
        assert_eq!(model(Some(1e9)), "open model at 1,000,000,000 req/s");
        assert_eq!(model(Some(2.5)), "open model at 2.5 req/s");
        assert_eq!(model(None), "closed model");
    }

    /// Requests sent in 0-RTT that the server refused are not early requests: they are said
    /// apart (they counted as early).
    #[test]
    fn refused_early_requests_are_said_apart() {
        assert_eq!(early_rejected(0), "");
        assert_eq!(
            early_rejected(1200),
            " (1,200 more sent early were refused by the server, and sent again)"
        );
    }

    /// Every row's "≤ X" holds for its samples, and the top row is the true maximum: a bucket
    /// starting near 200 µs and ending at 520 µs once sat in a row labelled "≤ 256µs".
    #[test]
    fn histogram_rows_never_sit_below_their_samples() {
        let mut d = crate::report::build::empty_distribution();
        d.count = 16;
        d.min_us = 90;
        d.max_us = 509;
        d.buckets = vec![
            Bucket {
                le_us: 100,
                count: 10,
            },
            Bucket {
                le_us: 199,
                count: 2,
            },
            Bucket {
                le_us: 300,
                count: 3,
            },
            Bucket {
                le_us: 520,
                count: 1,
            },
        ];
        let mut out = String::new();
        histogram(&mut out, "Latency histogram", &d);
        let labels: Vec<&str> = out
            .lines()
            .filter_map(|l| l.trim().strip_prefix("≤"))
            .map(|l| l.split('|').next().unwrap().trim())
            .collect();
        assert_eq!(labels, ["128µs", "256µs", "509µs"], "{out}");
        assert!(
            out.contains("509µs |") && out.lines().last().unwrap().ends_with("| 4"),
            "{out}"
        );
    }

    /// Rows of a narrow spread are labelled to the µs when two decimals of ms would repeat a
    /// label ("≤ 1.37ms" twice, "≤ 1.38ms" three times).
    #[test]
    fn neighbouring_rows_never_read_the_same() {
        let rows: Vec<Bucket> = [1_370, 1_372, 1_374, 1_380]
            .iter()
            .map(|&le_us| Bucket { le_us, count: 1 })
            .collect();
        assert_eq!(
            row_labels(&rows),
            ["1.370ms", "1.372ms", "1.374ms", "1.380ms"]
        );
        let wide: Vec<Bucket> = [500, 1_370, 2_000_000]
            .iter()
            .map(|&le_us| Bucket { le_us, count: 1 })
            .collect();
        assert_eq!(row_labels(&wide), ["500µs", "1.37ms", "2.00s"]);
    }
}
