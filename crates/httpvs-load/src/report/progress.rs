//! The live progress line on stderr: one line rewritten with `\r`, once a second.

use super::diagnosis::group;
use super::format::{rate, us};
use crate::stats::{IntervalSnapshot, Observer};
use std::io::Write;

/// Writes one rewritten status line per snapshot to stderr.
#[derive(Debug, Default)]
pub struct ProgressLine {
    wrote: bool,
}

impl ProgressLine {
    /// A progress line (the caller decides whether stderr is a terminal).
    pub fn new() -> ProgressLine {
        ProgressLine::default()
    }
}

/// The text of one progress line.
pub fn line(s: &IntervalSnapshot) -> String {
    if s.warmup {
        return format!(
            "warming up… {} connections open",
            s.total_connections_opened
        );
    }
    format!(
        "{:>5.1}s  done {}  {} req/s  p50 {}  p99 {}  errors {}  connections {}",
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
        let _ = write!(err, "\r{}\x1b[K", line(snapshot));
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
