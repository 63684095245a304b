//! Counters a relay thread publishes and any thread reads, as one consistent snapshot.

use crate::counters::DirectionCounters;
use std::sync::Mutex;

/// One direction's counters, written by its relay thread only.
///
/// A mutex, not one atomic per field: a reader must see every field from the same moment, or
/// the identity `out + held - held_at_start = in + dup - lost - qdrop` is off by the packets
/// that moved between two field loads. The relay stores once per wake-up; a store is an
/// uncontended lock.
#[derive(Debug, Default)]
pub struct SharedCounters {
    snapshot: Mutex<DirectionCounters>,
}

impl SharedCounters {
    /// Publishes a snapshot.
    pub fn store(&self, c: &DirectionCounters) {
        // A poisoned lock only means a reader panicked: the counters are still whole.
        let mut held = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        *held = *c;
    }

    /// The latest snapshot.
    pub fn load(&self) -> DirectionCounters {
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner())
    }
}
