//! Where every producer of a trace puts its events: one shared, timestamped list per trace.
//!
//! A trace is a handful of requests on one connection, so the list is usually small; it is
//! printed in time order, as it grows ([`Recorder::take_live`]) and when the exchange is over. A server that floods (endless 1xx
//! responses, PINGs, empty DATA frames) would make it grow without end, so the recorder keeps
//! the first [`FIRST_KEPT`] events and the last [`LAST_KEPT`], and says how many went between.

use super::event::{Direction, EventKind, TraceEvent};
use super::summary::{summarize, Summary, Tally};
use crate::protocol::{ProtocolKind, WireBytes};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Events kept from the start of a trace.
pub const FIRST_KEPT: usize = 5_000;

/// Events kept from the end of a trace, once more than [`FIRST_KEPT`] came.
pub const LAST_KEPT: usize = 1_000;

/// Body text `--body` shows in one trace, all bodies together: one event holds a whole body,
/// so `?size=50m` held 50 MB and printed it.
pub const BODY_SHOWN: usize = 1 << 20;

/// A cloneable handle to one trace's events.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    start: Instant,
    events: Mutex<Kept>,
    /// Body bytes given to `--body` text so far (up to [`BODY_SHOWN`]).
    body_shown: AtomicUsize,
    /// A [`EventKind::PeerClosed`] was recorded: nothing more can come.
    peer_closed: AtomicBool,
}

/// The events kept: the first ones, the latest ones, and how many were dropped between; and
/// the summary's counts over all of them.
#[derive(Debug, Default)]
struct Kept {
    first: Vec<TraceEvent>,
    last: VecDeque<TraceEvent>,
    /// Outcomes (a response, a request's failure, the connection's error) that left `last`:
    /// kept whatever came after them, one per request at most, beside the connection's
    /// errors. A flood after a timeout pushed the failure itself out, and the trace showed
    /// no outcome for its request.
    outcomes: Vec<TraceEvent>,
    dropped: u64,
    tally: Tally,
    /// Live printing: once opened, how many of `first` (then in time order) were handed out;
    /// they stay the head of [`Recorder::events`].
    live: Option<usize>,
    /// Live printing stopped at a request's failure: its text may still change (a request
    /// never sent is marked so once the trace is over), and what follows it waits too.
    live_held: bool,
}

impl Kept {
    fn push(&mut self, event: TraceEvent) {
        self.tally.add(&event);
        if self.first.len() < FIRST_KEPT {
            self.first.push(event);
            return;
        }
        if self.last.len() == LAST_KEPT {
            match self.last.pop_front() {
                Some(out) if out.is_outcome() => self.outcomes.push(out),
                _ => self.dropped += 1,
            }
        }
        self.last.push_back(event);
    }
}

impl Recorder {
    /// A recorder whose clock starts now (the connection attempt).
    pub fn start_now() -> Recorder {
        Recorder {
            inner: Arc::new(Inner {
                start: Instant::now(),
                events: Mutex::new(Kept::default()),
                body_shown: AtomicUsize::new(0),
                peer_closed: AtomicBool::new(false),
            }),
        }
    }

    /// How many of `want` body bytes `--body` may show, within the trace's [`BODY_SHOWN`];
    /// the first time it runs out a note says so.
    pub fn body_room(&self, want: usize) -> usize {
        let shown = &self.inner.body_shown;
        let mut used = shown.load(Ordering::Relaxed);
        loop {
            let room = BODY_SHOWN.saturating_sub(used).min(want);
            if room == 0 {
                if want > 0 && used == BODY_SHOWN {
                    // Past the budget by one: the note comes once.
                    if shown
                        .compare_exchange(used, used + 1, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                    {
                        let text = format!(
                            "--body: body text past the first {} KiB of the trace is not shown",
                            BODY_SHOWN >> 10
                        );
                        self.record(Direction::Local, EventKind::Note { text });
                    }
                }
                return 0;
            }
            match shown.compare_exchange(used, used + room, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return room,
                Err(now) => used = now,
            }
        }
    }

    /// Whether the server has closed the connection (so `--linger` need not wait on).
    pub fn peer_closed(&self) -> bool {
        self.inner.peer_closed.load(Ordering::Relaxed)
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
        if kind == EventKind::PeerClosed {
            self.inner.peer_closed.store(true, Ordering::Relaxed);
        }
        let event = TraceEvent { at, dir, kind };
        // A poisoned lock means a producer panicked; the list itself is still whole.
        self.inner
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    /// Starts live printing: from now on [`Recorder::take_live`] hands out the events in time
    /// order. Called once the events stamped after they happened (the connect phases, known
    /// when connect returns) are in: every later one is stamped as it is recorded, on the
    /// trace's one thread, so recording order is time order.
    pub fn open_live(&self) {
        let mut kept = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        if kept.live.is_none() {
            kept.first.sort_by_key(|e| e.at);
            kept.live = Some(0);
        }
    }

    /// The events recorded since the last call, to print as they come: none before
    /// [`Recorder::open_live`], none from a request's failure on (they print with the rest at
    /// the end), none past the first [`FIRST_KEPT`] (the rest print at the end, bounded).
    pub fn take_live(&self) -> Vec<TraceEvent> {
        let mut kept = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        let Some(shown) = kept.live else {
            return Vec::new();
        };
        if kept.live_held {
            return Vec::new();
        }
        let mut out = Vec::new();
        for event in &kept.first[shown..] {
            if matches!(event.kind, EventKind::RequestFailed { .. }) {
                kept.live_held = true;
                break;
            }
            out.push(event.clone());
        }
        kept.live = Some(shown + out.len());
        out
    }

    /// How many events [`Recorder::take_live`] handed out: the head of [`Recorder::events`].
    pub fn shown_live(&self) -> usize {
        let kept = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        kept.live.unwrap_or(0)
    }

    /// The trace's summary: from `events` (this recorder's [`Recorder::events`], in time order)
    /// when all were kept, else from the counts kept over every event as it came (the events
    /// shown are only the first and last).
    pub fn summary(
        &self,
        protocol: ProtocolKind,
        requests: u32,
        events: &[TraceEvent],
        wire: WireBytes,
    ) -> Summary {
        let kept = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        if kept.dropped == 0 {
            drop(kept);
            return summarize(protocol, requests, events, wire);
        }
        kept.tally.clone().finish(protocol, requests, wire)
    }

    /// All events kept, in time order (ties keep recording order), with a note where events
    /// were dropped. Those printed live come first, as they were printed.
    pub fn events(&self) -> Vec<TraceEvent> {
        let kept = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        let shown = kept.live.unwrap_or(0);
        let mut events = kept.first.clone();
        if kept.dropped == 0 {
            // Nothing dropped: one list in time order (events can be recorded after later ones,
            // stamped with when they happened).
            events.extend(kept.outcomes.iter().chain(&kept.last).cloned());
            events[shown..].sort_by_key(|e| e.at);
            return events;
        }
        events[shown..].sort_by_key(|e| e.at);
        let mut last: Vec<TraceEvent> = kept.outcomes.iter().chain(&kept.last).cloned().collect();
        last.sort_by_key(|e| e.at);
        events.push(TraceEvent {
            at: last.first().map_or(Duration::ZERO, |e| e.at),
            dir: Direction::Local,
            kind: EventKind::Note {
                text: format!(
                    "{} events not shown: a trace keeps its first {FIRST_KEPT} and last {LAST_KEPT}, \
                     and every request's outcome",
                    kept.dropped
                ),
            },
        });
        events.extend(last);
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary counts every event, those a long trace drops included: a 1,000-request
    /// trace read 591 answered and 401 not sent, though all were answered.
    #[test]
    fn the_summary_counts_the_events_not_shown() {
        let recorder = Recorder::start_now();
        let n = (FIRST_KEPT + LAST_KEPT) as u32 + 500;
        for request in 1..=n {
            let kind = EventKind::Response {
                request,
                status: 200,
                header_bytes: 10,
                body_bytes: 5,
            };
            recorder.record(Direction::Local, kind);
        }
        let s = recorder.summary(
            ProtocolKind::H2c,
            n,
            &recorder.events(),
            WireBytes::default(),
        );
        assert_eq!((s.succeeded, s.failed, s.not_sent), (n, 0, 0));
        assert_eq!(s.statuses.get(&200), Some(&n));
    }

    /// `--body` text is bounded for the whole trace, and its end is said once.
    #[test]
    fn body_text_has_one_budget_per_trace() {
        let recorder = Recorder::start_now();
        assert_eq!(recorder.body_room(BODY_SHOWN - 10), BODY_SHOWN - 10);
        assert_eq!(recorder.body_room(100), 10);
        assert_eq!(recorder.body_room(100), 0);
        assert_eq!(recorder.body_room(100), 0);
        let notes = recorder
            .events()
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::Note { text } if text.starts_with("--body")))
            .count();
        assert_eq!(notes, 1);
    }

    #[test]
    fn a_flood_keeps_its_first_and_last_events_and_counts_the_rest() {
        let recorder = Recorder::start_now();
        let total = FIRST_KEPT + LAST_KEPT + 123;
        for i in 0..total {
            recorder.record_at(
                Duration::from_micros(i as u64),
                Direction::Recv,
                EventKind::Note {
                    text: i.to_string(),
                },
            );
        }
        let events = recorder.events();
        assert_eq!(events.len(), FIRST_KEPT + 1 + LAST_KEPT);
        let text = |e: &TraceEvent| match &e.kind {
            EventKind::Note { text } => text.clone(),
            other => format!("{other:?}"),
        };
        assert_eq!(text(&events[0]), "0");
        assert_eq!(
            text(&events[FIRST_KEPT]),
            format!(
                "123 events not shown: a trace keeps its first {FIRST_KEPT} and last {LAST_KEPT}, \
                 and every request's outcome"
            )
        );
        assert_eq!(
            text(&events[FIRST_KEPT + 1]),
            (FIRST_KEPT + 123).to_string()
        );
        assert_eq!(text(events.last().unwrap()), (total - 1).to_string());
    }

    /// A request's outcome recorded inside a flood (a timeout, then frames the server kept
    /// sending) stays in the trace however many events come after it: it was pushed out of the
    /// last events kept, and the trace showed no outcome for the request.
    #[test]
    fn an_outcome_outlives_the_flood_after_it() {
        let recorder = Recorder::start_now();
        let note = |i: usize| EventKind::Note {
            text: i.to_string(),
        };
        let mut at = 0;
        let mut record = |kind| {
            at += 1;
            recorder.record_at(Duration::from_micros(at), Direction::Recv, kind);
        };
        (0..FIRST_KEPT + 10).for_each(|i| record(note(i)));
        record(EventKind::RequestFailed {
            request: 1,
            error: "request_timeout".into(),
        });
        (0..3 * LAST_KEPT).for_each(|i| record(note(i)));
        let events = recorder.events();
        let failed: Vec<_> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::RequestFailed { request: 1, .. }))
            .collect();
        assert_eq!(failed.len(), 1);
        // In time order: after the note of what went unshown, before the last events.
        let at = |e: &TraceEvent| e.at;
        let i = events.iter().position(|e| e.is_outcome()).unwrap();
        assert!(
            matches!(events[i - 1].kind, EventKind::Note { ref text } if text.contains("not shown"))
        );
        assert!(events[i + 1..].iter().all(|e| at(e) > at(&events[i])));
        assert_eq!(events.len(), FIRST_KEPT + 1 + 1 + LAST_KEPT);
    }
}
