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
    /// Why the relay thread stopped before it was told to, if it did.
    failure: Mutex<Option<String>>,
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

    /// The relay thread stopped on its own: its counters freeze from here on.
    pub fn fail(&self, why: String) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    /// Why the relay stopped on its own, if it did.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relay that stopped on its own says why, and its last counters stay readable.
    #[test]
    fn a_failure_is_kept_beside_the_last_counters() {
        let shared = SharedCounters::default();
        assert_eq!(shared.failure(), None);
        let counters = DirectionCounters {
            packets_in: 3,
            packets_out: 2,
            held: 1,
            ..DirectionCounters::default()
        };
        shared.store(&counters);
        shared.fail("TUN device closed".into());
        assert_eq!(shared.failure().as_deref(), Some("TUN device closed"));
        assert_eq!(shared.load(), counters);
    }
}
