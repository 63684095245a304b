//! Counters a relay thread publishes and any thread reads, without locks.

use crate::counters::DirectionCounters;
use std::sync::atomic::{AtomicU64, Ordering};

/// One direction's counters as atomics, written by its relay thread only.
#[derive(Debug, Default)]
pub struct SharedCounters {
    fields: [AtomicU64; 13],
}

impl SharedCounters {
    /// Publishes a snapshot.
    pub fn store(&self, c: &DirectionCounters) {
        let values = [
            c.packets_in,
            c.bytes_in,
            c.packets_out,
            c.bytes_out,
            c.held,
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
            held: v[4],
            lost: v[5],
            duplicated: v[6],
            corrupted: v[7],
            reordered: v[8],
            queue_drops: v[9],
            ecn_marked: v[10],
            late: v[11],
            rejected: v[12],
        }
    }
}
