//! The last block of response bytes a reader read, kept byte for byte with what it read as: a
//! server answering the same request sends the same head again and again (h2o's and nginx's
//! change only in `Date`, once a second), so a repeat costs a compare instead of a parse.
//!
//! Used by every protocol's response reader: h1's heads (a buffer that starts with the kept
//! head), h2's HPACK blocks (read in the same table generation) and h3's QPACK field sections.

/// The last block kept, the key it was read under (what else the reading depended on) and
/// what it read as.
#[derive(Debug)]
pub struct LastRead<K, T> {
    bytes: Vec<u8>,
    kept: Option<(K, T)>,
}

impl<K, T> Default for LastRead<K, T> {
    fn default() -> Self {
        LastRead::new()
    }
}

impl<K, T> LastRead<K, T> {
    /// Nothing kept.
    pub const fn new() -> Self {
        LastRead {
            bytes: Vec::new(),
            kept: None,
        }
    }
}

impl<K: Copy + PartialEq, T: Copy> LastRead<K, T> {
    /// What `block` read as, when it is the block kept and was read under `key`.
    pub fn get(&self, block: &[u8], key: K) -> Option<T> {
        match self.kept {
            Some((k, value)) if k == key && self.bytes == block => Some(value),
            _ => None,
        }
    }

    /// What the block at the start of `buf` read as, when `buf` starts with the block kept
    /// (read under `key`): for a block that ends where its own bytes say (h1's blank line).
    pub fn get_prefix(&self, buf: &[u8], key: K) -> Option<T> {
        match self.kept {
            Some((k, value)) if k == key && buf.get(..self.bytes.len()) == Some(&self.bytes) => {
                Some(value)
            }
            _ => None,
        }
    }

    /// Keeps `block` and what it read as under `key`, unless it is longer than `limit` (a copy
    /// per response would cost more than it saves, and a held connection stays small).
    pub fn keep(&mut self, block: &[u8], key: K, value: T, limit: usize) {
        if block.len() <= limit {
            self.bytes.clear();
            self.bytes.extend_from_slice(block);
            self.kept = Some((key, value));
        }
    }
}
