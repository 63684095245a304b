//! Counters a relay thread publishes and any thread reads, without locks.

use crate::counters::DirectionCounters;
use std::sync::atomic::{AtomicU64, Ordering};

/// One direction's counters as atomics, written by its relay thread only.
#[derive(Debug, Default)]
pub struct SharedCounters {
    fields: [AtomicU64; 12],
}

impl SharedCounters {
    /// Publishes a snapshot.
    pub fn store(&self, c: &DirectionCounters) {
        let values = [
            c.packets_in,
            c.bytes_in,
            c.packets_out,
            c.bytes_out,
            c.lost,
            c.duplicated,
            c.corrupted,
            c.reordered,
            c.queue_drops,
            c.ecn_marked,
            c.late,
            c.rejected,
        ];
        for (field, value) in self.fields.iter().zip(values) {
            field.store(value, Ordering::Relaxed);
        }
    }

    /// The latest snapshot.
    pub fn load(&self) -> DirectionCounters {
        let v: Vec<u64> = self
            .fields
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        DirectionCounters {
            packets_in: v[0],
            bytes_in: v[1],
            packets_out: v[2],
            bytes_out: v[3],
            lost: v[4],
            duplicated: v[5],
            corrupted: v[6],
            reordered: v[7],
            queue_drops: v[8],
            ecn_marked: v[9],
            late: v[10],
            rejected: v[11],
        }
    }
}
