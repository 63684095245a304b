//! HPACK's dynamic table (RFC 7541 §2.3.2, §4): newest entry first, each entry counted as its
//! name plus its value plus 32 bytes, the oldest evicted first. The decoder keeps one for the
//! blocks it reads and the table encoder one for the blocks it writes; sharing the code keeps
//! both sides' eviction the same to the byte.

use std::collections::VecDeque;

/// Per-entry overhead in the table size (RFC 7541 §4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// The size an entry of `name` and `value` takes in the table (RFC 7541 §4.1).
pub fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + ENTRY_OVERHEAD
}

/// A table entry: name and value.
pub(crate) type Entry = (Box<[u8]>, Box<[u8]>);

/// The entries of one direction of one connection.
#[derive(Debug)]
pub(crate) struct DynamicTable {
    /// Newest first: dynamic index 62 is `entries[0]`.
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    /// An empty table that may hold `max_size` bytes.
    pub(crate) fn new(max_size: usize) -> DynamicTable {
        DynamicTable {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// Bytes the entries take, overhead included.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The most the entries may take.
    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    /// Sets the maximum size (a dynamic table size update), evicting what no longer fits.
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    /// The entries, newest (index 62) first.
    pub(crate) fn entries(&self) -> &VecDeque<Entry> {
        &self.entries
    }

    /// Adds an entry, evicting the oldest ones to make room.
    pub(crate) fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) {
        let size = entry_size(&name, &value);
        // An entry larger than the table empties it and is not added (RFC 7541 §4.4).
        self.evict_to(self.max_size.saturating_sub(size));
        if size <= self.max_size {
            self.size += size;
            self.entries.push_front((name, value));
        }
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let Some((n, v)) = self.entries.pop_back() else {
                break;
            };
            self.size -= entry_size(&n, &v);
        }
    }
}
