//! Response heads of the owned HTTP/2 server, HPACK-encoded with a dynamic table per connection
//! (`TableEncoder`), as h2o does: a head's first use puts its fields in the client's table and
//! later heads name them by index, a byte each. The fixed answer's head is kept encoded while
//! its second and the table stay the same, so `GET /` costs a copy of a few bytes; any other
//! head that repeats the last one encoded (a load sends the same request again and again) is
//! sent again as its bytes while the table stays the same, a comparison instead of a search of
//! both tables for every field.
//!
//! A head must be encoded just before it is queued, in the order heads go out: each encoding
//! may change the table the client's decoder follows.

use crate::date::Stamp;
use httpvs_h2wire::hpack::TableEncoder;

/// `FIXED_BODY.len()` as a field value.
const FIXED_LEN: &[u8] = b"18";

/// The response head encoder of one connection.
#[derive(Debug)]
pub struct ResponseHeads {
    encoder: TableEncoder,
    /// The last head encoded by `encode` (its buffer reused).
    block: Vec<u8>,
    /// What `block` encodes: its status and fields, length-prefixed (see [`push_field`]).
    block_key: Vec<u8>,
    /// The encoder's generation for which `block` may be sent again; `None` when encoding it
    /// changed the table.
    block_for: Option<u64>,
    /// The key of the head being encoded (a buffer reused).
    key: Vec<u8>,
    /// The fixed answer's head.
    fixed: Vec<u8>,
    /// The date's second and the encoder's generation for which `fixed` may be sent again;
    /// `None` when its encoding changed the table (it was good for that one answer).
    fixed_for: Option<(u64, u64)>,
}

impl Default for ResponseHeads {
    fn default() -> Self {
        ResponseHeads {
            encoder: TableEncoder::new(),
            block: Vec::with_capacity(256),
            block_key: Vec::with_capacity(256),
            block_for: None,
            key: Vec::with_capacity(256),
            fixed: Vec::with_capacity(64),
            fixed_for: None,
        }
    }
}

impl ResponseHeads {
    /// The client's SETTINGS_HEADER_TABLE_SIZE; the next head carries the size update.
    pub fn set_peer_table_size(&mut self, value: u32) {
        self.encoder.set_peer_limit(value as usize);
    }

    /// Encodes `:status` and `fields` as the next head to go out: the last head's bytes again
    /// when it had the same status and fields and the table has not changed since.
    pub fn encode<'a>(
        &mut self,
        status: u16,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> &[u8] {
        self.key.clear();
        self.key.extend_from_slice(&status.to_le_bytes());
        for (name, value) in fields {
            push_field(&mut self.key, name, value);
        }
        let generation = self.encoder.generation();
        if self.block_for == Some(generation) && self.key == self.block_key {
            return &self.block;
        }
        self.block.clear();
        encode_head(
            &mut self.encoder,
            status,
            KeyFields(&self.key[2..]),
            &mut self.block,
        );
        self.block_for = (self.encoder.generation() == generation).then_some(generation);
        std::mem::swap(&mut self.key, &mut self.block_key);
        &self.block
    }

    /// The head of `GET /`'s fixed answer (200, text/plain, content-length 18, `date`) as the
    /// next head to go out: from the table once its fields are there, the same bytes each time
    /// until the second turns or the table changes.
    pub fn fixed(&mut self, date: &Stamp) -> &[u8] {
        let generation = self.encoder.generation();
        if self.fixed_for != Some((date.second, generation)) {
            self.fixed.clear();
            let fields = [
                (&b"content-type"[..], &b"text/plain"[..]),
                (b"content-length", FIXED_LEN),
                (b"date", &date.text[..]),
            ];
            encode_head(&mut self.encoder, 200, fields.into_iter(), &mut self.fixed);
            self.fixed_for =
                (self.encoder.generation() == generation).then_some((date.second, generation));
        }
        &self.fixed
    }
}

/// Appends one field to a head's key: the name's length, the name, the value's length, the
/// value (lengths as 4 bytes, so no two heads share a key).
fn push_field(key: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    for part in [name, value] {
        key.extend_from_slice(&(part.len() as u32).to_le_bytes());
        key.extend_from_slice(part);
    }
}

/// The fields of a head's key, in order (what [`push_field`] wrote).
struct KeyFields<'a>(&'a [u8]);

impl<'a> Iterator for KeyFields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let mut part = || -> Option<&'a [u8]> {
            let len = u32::from_le_bytes(self.0.get(..4)?.try_into().ok()?) as usize;
            let bytes = self.0.get(4..4 + len)?;
            self.0 = &self.0[4 + len..];
            Some(bytes)
        };
        Some((part()?, part()?))
    }
}

/// One head: size updates owed, `:status` (one byte for the static table's seven), the fields.
///
/// Every field is offered to the dynamic table, `date` included, as h2o does: a connection under
/// load gets many answers a second, and all but the second's first then name the date in one
/// byte instead of a 24-byte literal. A new second adds one 65-byte entry and the stale dates
/// are evicted oldest first like any entry; after a minute or so they push out the fields that
/// repeat, which their next use puts back (a few literal bytes, once). A field over half the
/// table stays a literal without indexing (`TableEncoder::field`).
fn encode_head<'a>(
    encoder: &mut TableEncoder,
    status: u16,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut Vec<u8>,
) {
    encoder.begin_block(out);
    encoder.status(status, out);
    for (name, value) in fields {
        encoder.field(name, value, true, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::FIXED_BODY;
    use httpvs_h2wire::hpack::Decoder;

    fn stamp(second: u64) -> Stamp {
        let mut text = *b"Thu, 01 Jan 1970 00:00:00 GMT";
        text[23] = b'0' + (second / 10 % 6) as u8;
        text[24] = b'0' + (second % 10) as u8;
        Stamp { second, text }
    }

    fn decode(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(block, |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .unwrap();
        out
    }

    #[test]
    fn fixed_len_is_the_fixed_body_s_length() {
        assert_eq!(FIXED_LEN, FIXED_BODY.len().to_string().as_bytes());
    }

    /// The fixed head is encoded again only when the second or the table moved, and every block
    /// handed out decodes, in order, to the answer's fields.
    #[test]
    fn the_fixed_head_shrinks_to_four_bytes_and_follows_the_second_and_the_table() {
        let mut heads = ResponseHeads::default();
        let mut client = Decoder::default();
        let mut sizes = Vec::new();
        for (second, other) in [(1, false), (1, false), (1, true), (1, false), (2, false)] {
            if other {
                let extra = [(&b"x-test"[..], &b"hello"[..])];
                let block = heads.encode(503, extra.into_iter()).to_vec();
                assert_eq!(decode(&mut client, &block)[1].1, "hello");
            }
            let date = stamp(second);
            let block = heads.fixed(&date).to_vec();
            let fields = decode(&mut client, &block);
            assert_eq!(fields[0], (":status".into(), "200".into()));
            assert_eq!(fields[2], ("content-length".into(), "18".into()));
            assert_eq!(fields[3].1.as_bytes(), date.text);
            sizes.push(block.len());
        }
        // Literals first, then indexes: the other answer's entries moved the indexes, not the
        // size; a new second costs the date's literal once.
        assert!(sizes[0] > 30, "{sizes:?}");
        assert_eq!(sizes[1..4], [4, 4, 4]);
        assert!(sizes[4] > 20, "{sizes:?}");
        assert_eq!(heads.fixed(&stamp(2)).len(), 4);
    }

    /// Another head that repeats is sent again as its bytes while the table holds still, and
    /// encoded afresh when anything moved it; in any order, every block decodes to its own
    /// fields.
    #[test]
    fn repeated_heads_are_replayed_only_while_the_table_holds_still() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut heads = ResponseHeads::default();
        let mut client = Decoder::default();
        let lengths = [&b"100"[..], b"1024", b"65536"];
        let mut replays = 0;
        for i in 0..3_000 {
            if i == 1_500 {
                heads.set_peer_table_size(200);
            }
            let second = 1 + i / 500;
            let date = stamp(second);
            let status = [200, 200, 200, 404, 418][rng.random_range(0..5)];
            let length = lengths[rng.random_range(0..lengths.len())];
            let fields = [
                (&b"content-type"[..], &b"text/plain"[..]),
                (b"content-length", length),
                (b"date", &date.text[..]),
            ];
            let before = (heads.block_for, heads.block_key.clone());
            let block = heads.encode(status, fields.into_iter()).to_vec();
            if before.0.is_some() && before.1 == heads.block_key && block.len() < 8 {
                replays += 1;
            }
            let got = decode(&mut client, &block);
            assert_eq!(got[0], (":status".into(), status.to_string()), "{i}");
            assert_eq!(got[2].1.as_bytes(), length, "{i}");
            assert_eq!(got[3].1.as_bytes(), date.text, "{i}");
            if rng.random_range(0..4) == 0 {
                decode(&mut client, heads.fixed(&date));
            }
        }
        assert!(replays > 100, "{replays}");
        assert!(client.table_size() <= 200);
    }

    #[test]
    fn a_lower_table_size_is_signalled_in_the_next_head() {
        let mut heads = ResponseHeads::default();
        let mut client = Decoder::default();
        decode(&mut client, heads.fixed(&stamp(1)));
        heads.set_peer_table_size(0);
        let block = heads.fixed(&stamp(1)).to_vec();
        assert_eq!(block[0], 0x20, "{block:?}");
        assert_eq!(decode(&mut client, &block).len(), 4);
        assert_eq!(client.table_size(), 0);
        // Without a table the head stays literal, and is still replayed until the second turns.
        let steady = heads.fixed(&stamp(1)).to_vec();
        assert_eq!(steady, block[1..]);
        assert_eq!(decode(&mut client, &steady).len(), 4);
    }
}
