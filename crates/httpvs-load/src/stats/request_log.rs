//! The per-request log (`httpvs load --log-file`): one tab-separated row per measured request.
//!
//! The first three columns are h2load's `--log-file` columns, in its order, so a script written
//! for h2load's log reads this one; the others follow:
//!
//! | # | column | meaning |
//! |---|---|---|
//! | 1 | start | when the request was dispatched, µs since the Unix epoch |
//! | 2 | status | the HTTP status, or -1 for a failed request (h2load's -1) |
//! | 3 | duration | µs from the start to the end of the response, or to the failure: the report's latency in the closed model, connection set-up included |
//! | 4 | intended | the open model's intended send time, µs since the Unix epoch (the start in the closed model): the corrected latency is start + duration - min(intended, start) |
//! | 5 | connection | the connection of the last attempt, numbered from 1 in the order the run opened them (warm-up ones included); 0 when none opened |
//! | 6 | url | the request's URL, as its index in the run's URLs (0 for the first) |
//! | 7 | error | the failure's kind as the report names it (`reset`, `goaway(NO_ERROR)`...), or `-` |
//! | 8 | sent | µs from the start until its last attempt went out on an open connection: 0 when one was ready; the wait for a connection's set-up, or for a retry after a GOAWAY, otherwise (the duration when none opened). duration - sent is h2load's "time for request" |
//!
//! Rows cover what the report's request counts cover: every measured request that succeeded or
//! failed (warm-up requests and requests cut off at the end have none), so the log has
//! succeeded + failed rows. Each worker fills its own buffer and appends it whole to the file
//! under a lock when it is full and when the worker ends: rows never interleave mid-line,
//! memory stays bounded however long the run, and rows are in end order within a worker
//! (with several workers, as h2load says of its own, slightly out of order overall). As in
//! h2load, the worker that fills a buffer writes it: a disk that stalls stalls that worker. A
//! write that fails stops the log, not the run: the file is cut back to its last whole row, and
//! the report says how many rows were written and why the rest were not.

use crate::error::ErrorKind;
use std::io::{ErrorKind as IoErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// A worker appends its buffer to the file once it holds this much.
const FLUSH_AT: usize = 64 * 1024;

/// Where rows go: a file, or (in tests) anything that can be cut back to a length.
pub trait LogOutput: Write + Send {
    /// Cuts the output back to its first `len` bytes (a write that failed half-way).
    fn cut_to(&mut self, len: u64) -> std::io::Result<()>;
}

impl LogOutput for std::fs::File {
    fn cut_to(&mut self, len: u64) -> std::io::Result<()> {
        // Not a regular file (a pipe, /dev/full): nothing to cut.
        if self.metadata()?.is_file() {
            self.set_len(len)?;
        }
        Ok(())
    }
}

/// The log file of a run, shared by its workers.
pub struct RequestLog {
    /// The file, as the user named it (for the report).
    name: String,
    sink: Mutex<Sink>,
    /// An instant and the same moment in µs since the Unix epoch: rows turn instants into
    /// wall-clock times with one subtraction.
    base: (Instant, u64),
    /// The run's stop flag, set when the log's reader closes the pipe (see the module).
    ends_run: OnceLock<Arc<AtomicBool>>,
}

struct Sink {
    out: Box<dyn LogOutput>,
    /// Bytes written so far, all of them whole rows.
    written: u64,
    rows: u64,
    /// The first write error; once set, later rows are dropped.
    error: Option<String>,
}

/// What the log came to, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLogOutcome {
    /// The file, as given.
    pub file: String,
    /// Rows written.
    pub rows: u64,
    /// Why the log stopped early, if it did (the rows after it are missing).
    pub error: Option<String>,
}

impl RequestLog {
    /// A log that writes to `out`, named `name` in the report.
    pub fn new(name: impl Into<String>, out: Box<dyn LogOutput>) -> Arc<RequestLog> {
        let now = Instant::now();
        let epoch_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, micros);
        Arc::new(RequestLog {
            name: name.into(),
            sink: Mutex::new(Sink {
                out,
                written: 0,
                rows: 0,
                error: None,
            }),
            base: (now, epoch_us),
            ends_run: OnceLock::new(),
        })
    }

    /// The file, as the user named it (`-` for stdout).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Ends the run (sets its stop flag, as Ctrl-C does) when a write finds the reader gone
    /// (EPIPE): for a log on stdout, whose reader (`head`) has what it wanted.
    pub fn end_run_when_reader_gone(&self, stop: Arc<AtomicBool>) {
        let _ = self.ends_run.set(stop);
    }

    /// Rows written so far, and the error that stopped the log, if any.
    pub fn outcome(&self) -> RequestLogOutcome {
        let sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        RequestLogOutcome {
            file: self.name.clone(),
            rows: sink.rows,
            error: sink.error.clone(),
        }
    }

    /// `at` in µs since the Unix epoch.
    fn epoch_us(&self, at: Instant) -> u64 {
        let (base, base_us) = self.base;
        if at >= base {
            base_us.saturating_add(micros(at - base))
        } else {
            base_us.saturating_sub(micros(base - at))
        }
    }

    /// Appends whole rows (`bytes`, `rows` of them) to the file. When a write fails part-way
    /// (a disk that filled up), the whole rows it did write stay, the file is cut back to the
    /// last of them, and the log stops.
    fn append(&self, bytes: &[u8], rows: u64) {
        let mut sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        if sink.error.is_some() {
            return;
        }
        let mut done = 0;
        let failure = loop {
            if done == bytes.len() {
                break sink.out.flush().err();
            }
            match sink.out.write(&bytes[done..]) {
                Ok(0) => break Some(IoErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == IoErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        let Some(e) = failure else {
            sink.written += bytes.len() as u64;
            sink.rows += rows;
            return;
        };
        let whole = bytes[..done]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        sink.rows += bytes[..whole].iter().filter(|&&b| b == b'\n').count() as u64;
        sink.written += whole as u64;
        let keep = sink.written;
        let cut = sink.out.cut_to(keep).err();
        if e.kind() == IoErrorKind::BrokenPipe {
            if let Some(stop) = self.ends_run.get() {
                stop.store(true, Ordering::Relaxed);
            }
        }
        sink.error = Some(match cut {
            None if e.kind() == IoErrorKind::BrokenPipe => READER_GONE.to_string(),
            None => e.to_string(),
            Some(c) => format!("{e} (and cutting the last partial row failed: {c})"),
        });
    }
}

/// Why the log stopped when its reader went away (`--log-file - | head`): the CLI ends quietly
/// then, as on any closed stdout pipe, and the report (in `-o`) still says the rows stop there.
pub const READER_GONE: &str = "the reader closed the pipe (EPIPE)";

impl std::fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestLog")
            .field("file", &self.name)
            .finish_non_exhaustive()
    }
}

/// One request's row.
#[derive(Debug, Clone, Copy)]
pub struct RequestRow {
    /// When it was first sent (its dispatch).
    pub start: Instant,
    /// When it was due: the open model's intended time, else the start.
    pub intended: Instant,
    /// When its last attempt went out on an open connection (the end, if none did).
    pub sent: Instant,
    /// When its response ended, or it failed.
    pub end: Instant,
    /// The response's status; `None` for a failure.
    pub status: Option<u16>,
    /// The connection of its last attempt (0: none opened).
    pub connection: u64,
    /// Its URL's index in the run's URLs.
    pub url: u32,
    /// Why it failed.
    pub error: Option<ErrorKind>,
}

/// One worker's side of the log: a buffer of whole rows, appended to the file when full and
/// when the worker drops it.
pub struct WorkerLog {
    log: Arc<RequestLog>,
    buf: Vec<u8>,
    rows: u64,
}

impl WorkerLog {
    /// A worker's buffer for `log`.
    pub fn new(log: Arc<RequestLog>) -> WorkerLog {
        WorkerLog {
            log,
            buf: Vec::with_capacity(FLUSH_AT + 256),
            rows: 0,
        }
    }

    /// Adds one request's row.
    pub fn row(&mut self, row: &RequestRow) {
        let start = self.log.epoch_us(row.start);
        let duration = micros(row.end.saturating_duration_since(row.start));
        let intended = self.log.epoch_us(row.intended);
        let sent = micros(row.sent.saturating_duration_since(row.start));
        let status = row.status.map_or(-1, i32::from);
        // Writing to a Vec cannot fail.
        let _ = write!(
            self.buf,
            "{start}\t{status}\t{duration}\t{intended}\t{}\t{}\t",
            row.connection, row.url
        );
        match &row.error {
            Some(kind) => {
                let _ = write!(self.buf, "{kind}");
            }
            None => self.buf.push(b'-'),
        }
        let _ = writeln!(self.buf, "\t{sent}");
        self.rows += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.log.append(&self.buf, self.rows);
            self.buf.clear();
            self.rows = 0;
        }
    }
}

impl Drop for WorkerLog {
    fn drop(&mut self) {
        self.flush();
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output the test can read back, which fills up at `limit` bytes as a disk does: a
    /// write that crosses it writes what fits, and the next one fails.
    #[derive(Clone)]
    struct Shared {
        bytes: Arc<Mutex<Vec<u8>>>,
        limit: usize,
    }

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let mut bytes = self.bytes.lock().unwrap();
            let room = self.limit.saturating_sub(bytes.len()).min(b.len());
            if room == 0 {
                return Err(std::io::Error::other("disk full"));
            }
            bytes.extend_from_slice(&b[..room]);
            Ok(room)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl LogOutput for Shared {
        fn cut_to(&mut self, len: u64) -> std::io::Result<()> {
            self.bytes.lock().unwrap().truncate(len as usize);
            Ok(())
        }
    }

    fn shared(limit: usize) -> Shared {
        Shared {
            bytes: Arc::new(Mutex::new(Vec::new())),
            limit,
        }
    }

    fn row(log: &RequestLog, ms: u64, status: Option<u16>) -> RequestRow {
        let start = log.base.0 + Duration::from_millis(ms);
        RequestRow {
            start,
            // Released 250 µs early: the intended time is after the start.
            intended: start + Duration::from_micros(250),
            sent: start + Duration::from_micros(400),
            end: start + Duration::from_micros(1_500),
            status,
            connection: 3,
            url: 1,
            error: status.is_none().then_some(ErrorKind::Reset),
        }
    }

    #[test]
    fn rows_have_h2loads_columns_first_then_ours() {
        let out = shared(usize::MAX);
        let log = RequestLog::new("t.tsv", Box::new(out.clone()));
        let mut worker = WorkerLog::new(log.clone());
        worker.row(&row(&log, 10, Some(200)));
        worker.row(&row(&log, 20, None));
        drop(worker);
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 2);
        let base = log.base.1;
        assert_eq!(lines[0][0], (base + 10_000).to_string());
        assert_eq!(lines[0][1..3], ["200", "1500"]);
        assert_eq!(lines[0][3], (base + 10_250).to_string());
        assert_eq!(lines[0][4..], ["3", "1", "-", "400"]);
        assert_eq!(lines[1][1], "-1");
        assert_eq!(lines[1][6], "reset");
        assert_eq!(
            log.outcome(),
            RequestLogOutcome {
                file: "t.tsv".into(),
                rows: 2,
                error: None
            }
        );
    }

    #[test]
    fn buffers_go_out_whole_and_memory_stays_bounded() {
        let out = shared(usize::MAX);
        let log = RequestLog::new("t.tsv", Box::new(out.clone()));
        let mut worker = WorkerLog::new(log.clone());
        for i in 0..20_000 {
            worker.row(&row(&log, i, Some(200)));
            assert!(worker.buf.len() < FLUSH_AT + 256);
        }
        // Flushed whole rows as it went, before the end.
        let mid = out.bytes.lock().unwrap().len();
        assert!(mid > 0 && out.bytes.lock().unwrap().ends_with(b"\n"));
        drop(worker);
        let bytes = out.bytes.lock().unwrap();
        assert!(bytes.len() > mid);
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 20_000);
        assert_eq!(log.outcome().rows, 20_000);
    }

    #[test]
    fn a_failed_write_keeps_whole_rows_and_says_why() {
        let out = shared(FLUSH_AT + 1_000);
        let log = RequestLog::new("full.tsv", Box::new(out.clone()));
        let mut worker = WorkerLog::new(log.clone());
        for i in 0..10_000 {
            worker.row(&row(&log, i, Some(200)));
        }
        drop(worker);
        let outcome = log.outcome();
        assert!(outcome.rows > 0 && outcome.rows < 10_000, "{outcome:?}");
        assert_eq!(outcome.error.as_deref(), Some("disk full"));
        // The second buffer went out part-way: its whole rows stay and count, the partial
        // last one is cut off.
        let bytes = out.bytes.lock().unwrap();
        assert!(
            bytes.len() > FLUSH_AT && bytes.ends_with(b"\n"),
            "{}",
            bytes.len()
        );
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(lines, outcome.rows);
    }

    #[test]
    fn instants_before_the_base_are_earlier_wall_clock_times() {
        let log = RequestLog::new("t", Box::new(shared(0)));
        let (base, base_us) = log.base;
        if let Some(earlier) = base.checked_sub(Duration::from_millis(3)) {
            assert_eq!(log.epoch_us(earlier), base_us - 3_000);
        }
        assert_eq!(
            log.epoch_us(base + Duration::from_secs(1)),
            base_us + 1_000_000
        );
    }
}
