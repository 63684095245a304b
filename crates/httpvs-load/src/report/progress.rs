//! The live progress line on stderr: one line rewritten with `\r`, once a second.

use super::diagnosis::group;
use super::format::{rate, us};
use crate::stats::{IntervalSnapshot, Observer};
use std::io::Write;

/// Writes one rewritten status line per snapshot to stderr.
#[derive(Debug, Default)]
pub struct ProgressLine {
    wrote: bool,
    /// `--rate`, for the open model's asked rate and how far behind its schedule is.
    asked: Option<f64>,
}

impl ProgressLine {
    /// A progress line (the caller decides whether stderr is a terminal).
    pub fn new() -> ProgressLine {
        ProgressLine::default()
    }

    /// A progress line for an open-model run at `rate` requests/s.
    pub fn open(rate: f64) -> ProgressLine {
        ProgressLine {
            wrote: false,
            asked: Some(rate),
        }
    }
}

/// The text of one progress line; `asked` is the open model's `--rate`. Its rate is of
/// succeeded requests, as the report's throughput: against a dead server failures are done at
/// once, and a rate of them read as a server keeping up.
pub fn line(s: &IntervalSnapshot, asked: Option<f64>) -> String {
    fit_line(s, asked, 0)
}

/// [`line`] within `columns - 1` characters (0: no limit): its fields with short labels when
/// the line is too long, then the last fields left off, whole, until it fits (the live line
/// was cut mid-word on a narrow terminal, and never showed p50, p99, errors or connections).
fn fit_line(s: &IntervalSnapshot, asked: Option<f64>, columns: usize) -> String {
    let Some([full, short]) = fields(s, asked) else {
        return fit(warmup_line(s), columns);
    };
    let fits = |line: &str| columns == 0 || line.chars().count() < columns;
    let line = full.join("  ");
    if fits(&line) {
        return line;
    }
    // The elapsed time, the count and the rate stay; then each other field in turn of what it
    // tells, as long as it fits, shown in its place.
    let mut shown = [true, true, true, false, false, false, false, false];
    for field in [4, 5, 6, 3, 7] {
        shown[field] = true;
        let line = join_shown(&short, &shown);
        if !fits(&line) {
            shown[field] = false;
        }
    }
    // Narrower still, the rate and then the count go whole: cut, "64,3" read as a rate.
    for field in [2, 1] {
        if fits(&join_shown(&short, &shown)) {
            break;
        }
        shown[field] = false;
    }
    fit(join_shown(&short, &shown), columns)
}

fn join_shown(fields: &[String], shown: &[bool]) -> String {
    let kept: Vec<&str> = fields
        .iter()
        .zip(shown)
        .filter(|(f, shown)| **shown && !f.is_empty())
        .map(|(f, _)| f.as_str())
        .collect();
    kept.join(" ")
}

fn warmup_line(s: &IntervalSnapshot) -> String {
    // Connections count from their first measured request, so none would show here.
    // The warm-up's last second ends as measuring starts: nothing is left to count down.
    if s.warmup_left.is_zero() {
        return "warm-up done, measuring…".to_string();
    }
    format!("warming up… {:.1}s left", s.warmup_left.as_secs_f64())
}

/// The line's fields, with long and with short labels; `None` in the warm-up.
fn fields(s: &IntervalSnapshot, asked: Option<f64>) -> Option<[Vec<String>; 2]> {
    if s.warmup {
        return None;
    }
    let schedule = |short: bool| {
        asked.map_or(String::new(), |asked| {
            // Sends due so far against sends started: Fortio's "not reaching the requested
            // qps", while it happens.
            let due = (asked * s.elapsed.as_secs_f64()).floor() as u64;
            let behind = due.saturating_sub(s.total_started);
            let behind = match (behind > 1 && behind * 50 > due, short) {
                (true, false) => format!(", {} sends behind", group(behind)),
                (true, true) => format!(", {} behind", group(behind)),
                (false, _) => String::new(),
            };
            format!(" (of {} asked{behind})", asked_rate(asked))
        })
    };
    let secs = s.interval.as_secs_f64();
    let ok_per_sec = if secs > 0.0 {
        s.completed.saturating_sub(s.failed) as f64 / secs
    } else {
        0.0
    };
    // Latency is of succeeded requests: with none yet there is no figure (not 0µs).
    let latency = |v: u64| {
        if s.total_completed > s.total_failed {
            us(v)
        } else {
            "-".to_string()
        }
    };
    let elapsed = format!("{:.1}s", s.elapsed.as_secs_f64());
    let (done, ok) = (group(s.total_completed), rate(ok_per_sec));
    let (p50, p99) = (latency(s.total_p50_us), latency(s.total_p99_us));
    let (failed, opened) = (group(s.total_failed), group(s.total_connections_opened));
    Some([
        vec![
            format!("{elapsed:>6}"),
            format!("done {done}"),
            format!("{ok} ok/s{}", schedule(false)),
            format!("p50 {p50}"),
            format!("p99 {p99}"),
            format!("errors {failed}"),
            format!("connections {opened}"),
        ],
        vec![
            elapsed,
            format!("{done} done"),
            format!("{ok}/s"),
            schedule(true).trim_start().to_string(),
            format!("p50 {p50}"),
            format!("p99 {p99}"),
            format!("err {failed}"),
            format!("conn {opened}"),
        ],
    ])
}

/// `--rate` as given when it has more than a tenth's precision (0.04, not 0.0), else as the
/// other rates.
fn asked_rate(v: f64) -> String {
    if v < 1000.0 && (v * 10.0).fract() != 0.0 {
        format!("{v}")
    } else {
        rate(v)
    }
}

/// `line` cut to `columns - 1` characters (0: no limit): a line that wraps leaves a row
/// behind at every rewrite, as `\r` returns to the start of the last row only.
fn fit(line: String, columns: usize) -> String {
    if columns == 0 || line.chars().count() < columns {
        return line;
    }
    line.chars().take(columns - 1).collect()
}

/// The terminal's width on stderr, 0 when unknown.
fn stderr_columns() -> usize {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into `size`, which lives across the call.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok {
        usize::from(size.ws_col)
    } else {
        0
    }
}

impl Observer for ProgressLine {
    fn on_interval(&mut self, snapshot: &IntervalSnapshot) {
        let text = fit_line(snapshot, self.asked, stderr_columns());
        let mut err = std::io::stderr().lock();
        // \x1b[K clears what a longer previous line left behind.
        let _ = write!(err, "\r{text}\x1b[K");
        let _ = err.flush();
        self.wrote = true;
    }

    fn on_finish(&mut self) {
        if self.wrote {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_open_model_shows_its_asked_rate_and_how_far_behind_it_is() {
        let s = IntervalSnapshot {
            elapsed: Duration::from_secs(2),
            interval: Duration::from_secs(1),
            completed: 157,
            total_started: 330,
            ..IntervalSnapshot::default()
        };
        assert!(line(&s, None).contains("157.0 ok/s  p50"));
        assert!(line(&s, Some(500.0)).contains("157.0 ok/s (of 500.0 asked, 670 sends behind)"));
        let on_time = IntervalSnapshot {
            total_started: 999,
            ..s
        };
        assert!(line(&on_time, Some(500.0)).contains("ok/s (of 500.0 asked)  p50"));
        assert!(line(&on_time, Some(0.04)).contains("(of 0.04 asked"));
    }

    /// A dead server's instant failures are no rate of answers, and with no request answered
    /// there is no latency (it read 2,834 req/s of 2,000 asked, p50 0µs).
    #[test]
    fn failures_are_not_a_rate_and_no_answer_has_no_latency() {
        let s = IntervalSnapshot {
            elapsed: Duration::from_secs(4),
            interval: Duration::from_secs(1),
            completed: 2_834,
            failed: 2_834,
            total_completed: 7_999,
            total_failed: 7_999,
            ..IntervalSnapshot::default()
        };
        let text = line(&s, None);
        assert!(
            text.contains("done 7,999  0.0 ok/s  p50 -  p99 -  errors 7,999"),
            "{text}"
        );
    }

    /// The warm-up counts down rather than show connections, which count from their first
    /// measured request (it read "0 connections open" at 100k req/s).
    #[test]
    fn the_warmup_shows_what_is_left_of_it() {
        let s = IntervalSnapshot {
            warmup: true,
            warmup_left: Duration::from_millis(1500),
            ..IntervalSnapshot::default()
        };
        assert_eq!(line(&s, None), "warming up… 1.5s left");
        // A 1 s warm-up's only second ends as it does: it read "0.0s left".
        let ended = IntervalSnapshot {
            warmup_left: Duration::ZERO,
            ..s
        };
        assert_eq!(line(&ended, None), "warm-up done, measuring…");
    }

    /// On a narrow terminal the line takes short labels, then leaves off its last fields
    /// whole: it was cut mid-word at 60 columns ("sends behin"), p50 and the rest unseen.
    #[test]
    fn a_narrow_terminal_gets_whole_fields() {
        let s = IntervalSnapshot {
            elapsed: Duration::from_secs(12),
            interval: Duration::from_secs(1),
            completed: 50_000,
            total_completed: 600_000,
            total_started: 600_000,
            total_p50_us: 1_200,
            total_p99_us: 8_000,
            total_connections_opened: 64,
            ..IntervalSnapshot::default()
        };
        let wide = fit_line(&s, Some(100_000.0), 200);
        assert!(wide.contains("sends behind)  p50"), "{wide}");
        let narrow = fit_line(&s, Some(100_000.0), 60);
        assert_eq!(
            narrow,
            "12.0s 600,000 done 50,000.0/s p50 1.20ms p99 8.00ms err 0"
        );
        let roomier = fit_line(&s, Some(100_000.0), 100);
        assert_eq!(
            roomier,
            "12.0s 600,000 done 50,000.0/s (of 100,000.0 asked, 600,000 behind) p50 1.20ms \
             p99 8.00ms err 0"
        );
        let closed = fit_line(&s, None, 60);
        assert_eq!(
            closed,
            "12.0s 600,000 done 50,000.0/s p50 1.20ms p99 8.00ms err 0"
        );
        // Narrower, the rate and then the count go whole ("12.0s 600,000 done 50,0" read
        // as a rate of 50.0); too narrow for the time alone, it is cut.
        assert_eq!(fit_line(&s, None, 26), "12.0s 600,000 done");
        assert_eq!(fit_line(&s, None, 18), "12.0s");
        assert_eq!(fit_line(&s, None, 4).chars().count(), 3);
    }

    /// Cut to the terminal: a wrapped line left a row behind at every rewrite.
    #[test]
    fn the_line_fits_the_terminal() {
        assert_eq!(fit("µs…abcdef".into(), 5), "µs…a");
        assert_eq!(fit("abc".into(), 80), "abc");
        assert_eq!(fit("abc".into(), 0), "abc");
        assert_eq!(fit("abcd".into(), 4), "abc");
    }
}
