//! What happened to packets in one direction of a link, and both directions together.

use std::fmt;

/// Packet counts of one direction. Identity: `packets_out + held = packets_in + duplicated - lost - queue_drops`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionCounters {
    /// Packets read from the sending side.
    pub packets_in: u64,
    /// Bytes read from the sending side.
    pub bytes_in: u64,
    /// Packets handed to the receiving side (including ones it then rejected).
    pub packets_out: u64,
    /// Bytes handed to the receiving side.
    pub bytes_out: u64,
    /// Packets inside the link now, waiting for their time.
    pub held: u64,
    /// Packets dropped by the loss model.
    pub lost: u64,
    /// Extra copies made by `duplicate`.
    pub duplicated: u64,
    /// Packets with one bit flipped by `corrupt`.
    pub corrupted: u64,
    /// Packets sent ahead of the delayed ones by `reorder`.
    pub reordered: u64,
    /// Packets dropped because `limit` packets were already held.
    pub queue_drops: u64,
    /// Packets marked CE instead of dropped (`ecn`).
    pub ecn_marked: u64,
    /// Packets the relay sent more than 1 ms after their due time: it could not keep up.
    pub late: u64,
    /// Packets the receiving kernel refused outright (e.g. a corrupted IP version).
    pub rejected: u64,
}

impl DirectionCounters {
    /// The sum of two sets of counts.
    pub fn add(&self, other: &DirectionCounters) -> DirectionCounters {
        DirectionCounters {
            packets_in: self.packets_in + other.packets_in,
            bytes_in: self.bytes_in + other.bytes_in,
            packets_out: self.packets_out + other.packets_out,
            bytes_out: self.bytes_out + other.bytes_out,
            held: self.held + other.held,
            lost: self.lost + other.lost,
            duplicated: self.duplicated + other.duplicated,
            corrupted: self.corrupted + other.corrupted,
            reordered: self.reordered + other.reordered,
            queue_drops: self.queue_drops + other.queue_drops,
            ecn_marked: self.ecn_marked + other.ecn_marked,
            late: self.late + other.late,
            rejected: self.rejected + other.rejected,
        }
    }
}

/// Counts of both directions of a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Client to server.
    pub up: DirectionCounters,
    /// Server to client.
    pub down: DirectionCounters,
}

impl fmt::Display for LinkCounters {
    /// A small table, one row per direction.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEADERS: [&str; 13] = [
            "dir",
            "in",
            "out",
            "bytes out",
            "held",
            "lost",
            "dup",
            "corrupt",
            "reorder",
            "qdrop",
            "ecn",
            "late",
            "rejected",
        ];
        const WIDTHS: [usize; 13] = [5, 9, 9, 11, 5, 7, 7, 8, 8, 7, 6, 6, 8];
        let row = |f: &mut fmt::Formatter<'_>, cells: [String; 13]| -> fmt::Result {
            for (i, (cell, width)) in cells.iter().zip(WIDTHS).enumerate() {
                match i {
                    0 => write!(f, "{cell:<width$}")?,
                    _ => write!(f, " {cell:>width$}")?,
                }
            }
            writeln!(f)
        };
        row(f, HEADERS.map(String::from))?;
        for (name, c) in [("up", &self.up), ("down", &self.down)] {
            let values = [
                c.packets_in,
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
            let mut cells: [String; 13] = Default::default();
            cells[0] = name.to_string();
            for (cell, v) in cells[1..].iter_mut().zip(values) {
                *cell = v.to_string();
            }
            row(f, cells)?;
        }
        Ok(())
    }
}
