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

/// The text of one progress line; `asked` is the open model's `--rate`.
pub fn line(s: &IntervalSnapshot, asked: Option<f64>) -> String {
    if s.warmup {
        return format!(
            "warming up… {} connections open",
            s.total_connections_opened
        );
    }
    let schedule = asked.map_or(String::new(), |asked| {
        // Sends due so far against sends started: Fortio's "not reaching the requested qps",
        // while it happens.
        let due = (asked * s.elapsed.as_secs_f64()).floor() as u64;
        let behind = due.saturating_sub(s.total_started);
        let behind = if behind > 1 && behind * 50 > due {
            format!(", {} sends behind", group(behind))
        } else {
            String::new()
        };
        format!(" (of {} asked{behind})", rate(asked))
    });
    format!(
        "{:>5.1}s  done {}  {} req/s{schedule}  p50 {}  p99 {}  errors {}  connections {}",
        s.elapsed.as_secs_f64(),
        group(s.total_completed),
        rate(s.requests_per_sec),
        us(s.total_p50_us),
        us(s.total_p99_us),
        group(s.total_failed),
        group(s.total_connections_opened)
    )
}

impl Observer for ProgressLine {
    fn on_interval(&mut self, snapshot: &IntervalSnapshot) {
        let mut err = std::io::stderr().lock();
        // \x1b[K clears what a longer previous line left behind.
        let _ = write!(err, "\r{}\x1b[K", line(snapshot, self.asked));
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
            requests_per_sec: 157.0,
            total_started: 330,
            ..IntervalSnapshot::default()
        };
        assert!(line(&s, None).contains("157.0 req/s  p50"));
        assert!(line(&s, Some(500.0)).contains("157.0 req/s (of 500.0 asked, 670 sends behind)"));
        let on_time = IntervalSnapshot {
            total_started: 999,
            ..s
        };
        assert!(line(&on_time, Some(500.0)).contains("req/s (of 500.0 asked)  p50"));
    }
}
