//! Where every producer of a trace puts its events: one shared, timestamped list per trace.
//!
//! A trace is a handful of requests on one connection, so the list is small and bounded by
//! the exchange itself; it is printed, sorted by time, when the exchange is over.

use super::event::{Direction, EventKind, TraceEvent};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A cloneable handle to one trace's events.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    start: Instant,
    events: Mutex<Vec<TraceEvent>>,
}

impl Recorder {
    /// A recorder whose clock starts now (the connection attempt).
    pub fn start_now() -> Recorder {
        Recorder {
            inner: Arc::new(Inner {
                start: Instant::now(),
                events: Mutex::new(Vec::new()),
            }),
        }
    }

    /// When the clock started.
    pub fn start(&self) -> Instant {
        self.inner.start
    }

    /// Records an event that happens now.
    pub fn record(&self, dir: Direction, kind: EventKind) {
        self.record_at(self.inner.start.elapsed(), dir, kind);
    }

    /// Records an event at `at` after the start (phases known only once connect returns).
    pub fn record_at(&self, at: Duration, dir: Direction, kind: EventKind) {
        let event = TraceEvent { at, dir, kind };
        // A poisoned lock means a producer panicked; the list itself is still whole.
        self.inner
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    /// All events so far, in time order (ties keep recording order).
    pub fn events(&self) -> Vec<TraceEvent> {
        let mut events = self
            .inner
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        events.sort_by_key(|e| e.at);
        events
    }
}
