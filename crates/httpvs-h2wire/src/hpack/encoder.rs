//! HPACK encoding of request heads. A load generator sends the same head again and again, so
//! each distinct head is encoded once into two blocks: `first` adds its fields to the server's
//! dynamic table, and `steady` (sent from then on) names them by index, a byte or two each.

use super::dynamic_table::entry_size;
use super::huffman;
use super::static_table::{find_exact, find_name};

/// The header blocks of one request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestBlocks {
    /// The block for the head's first use on a connection.
    pub first: Vec<u8>,
    /// The block for every later use (equal to `first` without indexing).
    pub steady: Vec<u8>,
    /// Dynamic table bytes `first` adds (0 without indexing).
    pub table_bytes: usize,
}

/// Encodes `fields` (names lower-case, pseudo-headers first). With `indexing`, fields that are
/// not in the static table enter the dynamic table in `first` and are indexed in `steady`;
/// the caller checks `table_bytes` fits the server's table before sending `first`.
pub fn request_blocks(fields: &[(&[u8], &[u8])], indexing: bool) -> RequestBlocks {
    let mut first = Vec::with_capacity(128);
    let mut steady = Vec::with_capacity(32);
    let dynamic: usize = fields
        .iter()
        .filter(|(n, v)| find_exact(n, v).is_none())
        .count();
    let mut added = 0;
    let mut table_bytes = 0;
    for &(name, value) in fields {
        if let Some(index) = find_exact(name, value) {
            integer(index, 7, 0x80, &mut first);
            integer(index, 7, 0x80, &mut steady);
        } else if indexing {
            literal(name, value, 6, 0x40, &mut first);
            added += 1;
            table_bytes += entry_size(name, value);
            // The newest entry is index 62; those added after this one push it up.
            integer(62 + dynamic - added, 7, 0x80, &mut steady);
        } else {
            literal(name, value, 4, 0x00, &mut first);
            literal(name, value, 4, 0x00, &mut steady);
        }
    }
    RequestBlocks {
        first,
        steady,
        table_bytes,
    }
}

/// Encodes `fields` against a dynamic table that holds exactly `table` (oldest entry first)
/// and that this block leaves as it is: a field in the static table or in `table` is named by
/// index, any other is a literal without indexing. A connection's further heads share most of
/// their fields (`:authority`, `user-agent`) with the head it indexed, as a browser's or
/// h2load's requests do, and only a new `:path` goes as a literal.
pub fn block_against(fields: &[(&[u8], &[u8])], table: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    for &(name, value) in fields {
        if let Some(index) = find_exact(name, value) {
            integer(index, 7, 0x80, &mut out);
        } else if let Some(k) = table.iter().position(|&(n, v)| n == name && v == value) {
            // The newest entry is index 62.
            integer(62 + table.len() - 1 - k, 7, 0x80, &mut out);
        } else {
            literal(name, value, 4, 0x00, &mut out);
        }
    }
    out
}

/// A dynamic table size update to `size` (RFC 7541 §6.3).
pub fn size_update(size: usize, out: &mut Vec<u8>) {
    integer(size, 5, 0x20, out);
}

/// A literal field with the given representation (`prefix` bits of name index after `pattern`).
pub fn literal(name: &[u8], value: &[u8], prefix: u8, pattern: u8, out: &mut Vec<u8>) {
    match find_name(name) {
        Some(index) => integer(index, prefix, pattern, out),
        None => {
            integer(0, prefix, pattern, out);
            string(name, out);
        }
    }
    string(value, out);
}

/// An integer with a `prefix`-bit prefix, the rest of the first octet being `pattern`.
pub fn integer(mut value: usize, prefix: u8, pattern: u8, out: &mut Vec<u8>) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(pattern | value as u8);
        return;
    }
    out.push(pattern | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A string literal, Huffman-coded when that is shorter.
pub fn string(s: &[u8], out: &mut Vec<u8>) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer(coded, 7, 0x80, out);
        huffman::encode(s, out);
    } else {
        integer(s.len(), 7, 0x00, out);
        out.extend_from_slice(s);
    }
}
