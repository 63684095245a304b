//! An HPACK encoder with a dynamic table, one per connection direction, as servers encode their
//! responses: a field already in the static or dynamic table goes as its index (a byte or
//! two), any other as a literal that enters the dynamic table, so the next head that repeats it
//! refers to it. The table follows the peer's SETTINGS_HEADER_TABLE_SIZE (capped at the 4096
//! bytes both sides start with), and a change is signalled by dynamic table size updates at
//! the start of the next block (RFC 7541 §4.2, §6.3; RFC 9113 §6.5.2).

use super::decoder::DEFAULT_TABLE_SIZE;
use super::dynamic_table::{entry_size, DynamicTable};
use super::encoder::{integer, size_update, string};
use super::static_table::STATIC_TABLE;

/// Encodes the header blocks of one direction of one connection, in the order they are sent.
#[derive(Debug)]
pub struct TableEncoder {
    table: DynamicTable,
    /// Size updates owed to the peer's decoder at the start of the next block: the smallest
    /// size the table had since the last block, and its size now.
    owed: Option<(usize, usize)>,
    /// Moves on whenever the next block could differ from the last for the same fields (an
    /// entry added or evicted, a size change or update): a block encoded without moving it
    /// may be sent again as long as it has not moved since.
    generation: u64,
}

impl Default for TableEncoder {
    fn default() -> Self {
        TableEncoder::new()
    }
}

impl TableEncoder {
    /// An encoder whose table has the size both sides assume before any SETTINGS (4096).
    pub fn new() -> TableEncoder {
        TableEncoder {
            table: DynamicTable::new(DEFAULT_TABLE_SIZE),
            owed: None,
            generation: 0,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE is now `limit`. The table takes at most that, and
    /// at most 4096 bytes even if the peer allows more (the memory a connection costs stays
    /// bounded); a different size is signalled at the start of the next block.
    pub fn set_peer_limit(&mut self, limit: usize) {
        let size = limit.min(DEFAULT_TABLE_SIZE);
        if size == self.table.max_size() {
            return;
        }
        // Entries evicted now are gone for the peer too only once it reads an update at least
        // this small: owe the smallest size of the interval as well as the last (§4.2).
        let lowest = self.owed.map_or(size, |(lowest, _)| lowest.min(size));
        self.owed = Some((lowest, size));
        self.table.set_max_size(size);
        self.generation += 1;
    }

    /// Starts a header block: writes the size updates a SETTINGS change made owed.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some((lowest, last)) = self.owed.take() {
            if lowest < last {
                size_update(lowest, out);
            }
            size_update(last, out);
            self.generation += 1;
        }
    }

    /// Encodes `:status` (a response's first field): one byte for the seven codes of the
    /// static table, otherwise through the dynamic table like any field.
    pub fn status(&mut self, status: u16, out: &mut Vec<u8>) {
        let index = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => {
                let mut digits = [0u8; 5];
                let len = decimal(status, &mut digits);
                return self.field(b":status", &digits[..len], true, out);
            }
        };
        integer(index, 7, 0x80, out);
    }

    /// Encodes one field: by index when a table holds it, else as a literal that enters the
    /// dynamic table when `index` is set and it takes at most half the table (a larger one
    /// would evict most of what repeats, for a field that likely does not).
    pub fn field(&mut self, name: &[u8], value: &[u8], index: bool, out: &mut Vec<u8>) {
        let mut name_index = None;
        for (i, (n, v)) in STATIC_TABLE.iter().enumerate() {
            if n.as_bytes() == name {
                if v.as_bytes() == value {
                    return integer(i + 1, 7, 0x80, out);
                }
                name_index.get_or_insert(i + 1);
            }
        }
        for (i, (n, v)) in self.table.entries().iter().enumerate() {
            if **n == *name {
                if **v == *value {
                    return integer(62 + i, 7, 0x80, out);
                }
                // A static name is never evicted and its index is smaller.
                name_index.get_or_insert(62 + i);
            }
        }
        let add = index && entry_size(name, value) <= self.table.max_size() / 2;
        let (prefix, pattern) = if add { (6, 0x40) } else { (4, 0x00) };
        match name_index {
            Some(i) => integer(i, prefix, pattern, out),
            None => {
                integer(0, prefix, pattern, out);
                string(name, out);
            }
        }
        string(value, out);
        if add {
            // The name is copied before the insert evicts anything (RFC 7541 §4.4's caution
            // about a literal naming an entry its own insertion evicts).
            self.table.insert(Box::from(name), Box::from(value));
            self.generation += 1;
        }
    }

    /// Where the encoder's state is: a block whose encoding left this unchanged may be sent
    /// again, as its bytes, for as long as this has not changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The dynamic table's size in bytes (entries plus their overhead).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The most the dynamic table may take now.
    pub fn max_table_size(&self) -> usize {
        self.table.max_size()
    }

    /// Entries in the dynamic table.
    pub fn table_len(&self) -> usize {
        self.table.entries().len()
    }
}

/// Writes `n` in decimal into `buf`, returning the length (no allocation for `:status`).
fn decimal(mut n: u16, buf: &mut [u8; 5]) -> usize {
    let mut len = 0;
    loop {
        buf[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf[..len].reverse();
    len
}

#[cfg(test)]
mod tests;
