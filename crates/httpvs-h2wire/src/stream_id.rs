//! Maps keyed by HTTP/2 stream id: the id, spread by one multiplication, is the hash.
//!
//! Stream ids are distinct odd (client) numbers, so SipHash's protection buys nothing here and
//! cost the owned server a quarter of its instructions per request. A peer that picks ids to
//! collide can at worst make lookups walk the few entries its concurrent-stream limit allows.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for `u32` stream ids.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        // Spread consecutive odd ids over the table's low bits.
        self.0 = u64::from(n >> 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map from stream id to `V` with [`IdHasher`].
pub type StreamIdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_id_map_finds_what_it_holds() {
        let mut map = StreamIdMap::default();
        for id in (1..2000u32).step_by(2) {
            map.insert(id, id * 10);
        }
        assert_eq!(map.len(), 1000);
        assert!((1..2000u32)
            .step_by(2)
            .all(|id| map.get(&id) == Some(&(id * 10))));
        assert_eq!(map.get(&2), None);
    }
}
