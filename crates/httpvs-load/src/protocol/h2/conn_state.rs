//! What the connection handle, its driver task and its frame tap share about one HTTP/2
//! connection: GOAWAY seen, how the connection ended, and whether we closed it.

use crate::error::ErrorKind;
use crate::protocol::tcp::io_error_kind;
use crate::protocol::CloseCause;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// No GOAWAY seen yet.
const NO_GOAWAY: u32 = u32::MAX;

/// Shared per-connection state; atomics because the driver runs as its own task.
#[derive(Debug)]
pub struct ConnState {
    goaway_last_stream: AtomicU32,
    goaway_code: AtomicU32,
    local_close: AtomicBool,
    ended: AtomicBool,
    /// How the connection ended (set once, when the driver finishes).
    end: Mutex<Option<ConnEnd>>,
}

/// How a connection's driver finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnEnd {
    /// Who ended it.
    pub cause: CloseCause,
    /// The error it ended with, if any.
    pub error: Option<ErrorKind>,
}

impl Default for ConnState {
    fn default() -> Self {
        ConnState {
            goaway_last_stream: AtomicU32::new(NO_GOAWAY),
            goaway_code: AtomicU32::new(0),
            local_close: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            end: Mutex::new(None),
        }
    }
}

impl ConnState {
    /// Records a received GOAWAY. A later GOAWAY may only lower the last stream id.
    pub fn goaway_received(&self, last_stream: u32, code: u32) {
        self.goaway_code.store(code, Ordering::Relaxed);
        self.goaway_last_stream
            .fetch_min(last_stream, Ordering::Relaxed);
    }

    /// The server's GOAWAY error code, when it sent one that was not NO_ERROR.
    pub fn goaway_error(&self) -> Option<u64> {
        goaway_error(self.goaway())
    }

    /// The last stream id of the server's GOAWAY, and its error code.
    pub fn goaway(&self) -> Option<(u32, u32)> {
        let last = self.goaway_last_stream.load(Ordering::Relaxed);
        (last != NO_GOAWAY).then(|| (last, self.goaway_code.load(Ordering::Relaxed)))
    }

    /// We closed the connection (end of run).
    pub fn close_locally(&self) {
        self.local_close.store(true, Ordering::Relaxed);
    }

    /// The driver finished with `result`.
    pub fn finish(&self, result: Result<(), h2::Error>) {
        let error = result.err().map(|e| connection_error_kind(&e));
        let cause = match error {
            None | Some(ErrorKind::ConnectionClosed) => CloseCause::Fin,
            Some(_) => CloseCause::Reset,
        };
        *self.end.lock().unwrap_or_else(|p| p.into_inner()) = Some(ConnEnd { cause, error });
        self.ended.store(true, Ordering::Release);
    }

    /// How the driver finished, once it has.
    pub fn end(&self) -> Option<ConnEnd> {
        if !self.ended.load(Ordering::Acquire) {
            return None;
        }
        *self.end.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether new streams may be opened.
    pub fn accepts_requests(&self) -> bool {
        !self.local_close.load(Ordering::Relaxed)
            && self.goaway_last_stream.load(Ordering::Relaxed) == NO_GOAWAY
            && !self.ended.load(Ordering::Relaxed)
    }

    /// Why the connection stopped accepting requests.
    pub fn close_cause(&self) -> CloseCause {
        if self.local_close.load(Ordering::Relaxed) {
            CloseCause::Local
        } else if self.goaway().is_some() {
            CloseCause::Goaway
        } else if let Some(end) = self.end() {
            end.cause
        } else {
            CloseCause::Open
        }
    }
}

/// Classifies an error that ended a whole connection.
pub fn connection_error_kind(e: &h2::Error) -> ErrorKind {
    if let Some(io) = e.get_io() {
        return io_error_kind(io);
    }
    match e.reason() {
        Some(reason) if e.is_go_away() && e.is_remote() => {
            ErrorKind::Goaway(u32::from(reason).into())
        }
        _ => ErrorKind::Protocol,
    }
}

/// The error code of a GOAWAY (last stream id, code) when it is not NO_ERROR: both h2 engines
/// count such a close as the server failing.
pub fn goaway_error(goaway: Option<(u32, u32)>) -> Option<u64> {
    goaway
        .map(|(_, code)| u64::from(code))
        .filter(|code| *code != 0)
}
