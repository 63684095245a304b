//! The HPACK decoder: one per connection direction, fed every header block in wire order.
//!
//! Fields are handed to a callback as byte slices, so decoding allocates nothing except when
//! an entry enters the dynamic table (servers index a field once, then refer to it).

use super::dynamic_table::DynamicTable;
use super::static_table::STATIC_TABLE;
use super::{huffman, HpackError};
use std::collections::VecDeque;

/// The static table's `transfer-encoding` (index 57), the one name in it HTTP/2 forbids.
const STATIC_TRANSFER_ENCODING: usize = 56;

/// Whether a regular (not pseudo) field name may appear in HTTP/2: lowercase (RFC 9113
/// §8.2.1) and none of HTTP/1.1's connection-specific fields (§8.2.2), as nghttp2 checks.
pub fn regular_name_ok(name: &[u8]) -> bool {
    let connection_specific = match name.len() {
        7 => name == b"upgrade",
        10 => name == b"connection" || name == b"keep-alive",
        16 => name == b"proxy-connection",
        17 => name == b"transfer-encoding",
        _ => false,
    };
    !connection_specific && !name.iter().any(u8::is_ascii_uppercase)
}

/// [`regular_name_ok`], with pseudo-header names (`:status`) passing: their rules are the
/// caller's.
fn name_ok(name: &[u8]) -> bool {
    name.first() == Some(&b':') || regular_name_ok(name)
}

/// SETTINGS_HEADER_TABLE_SIZE's initial value, which httpvs keeps.
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// Decodes the header blocks of one direction of one connection.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The largest size a table size update may set (our SETTINGS_HEADER_TABLE_SIZE).
    size_limit: usize,
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
    /// For each dynamic table entry, newest first: whether its name passes [`name_ok`], judged
    /// once as it enters, so a field that refers to it is checked for free.
    names_ok: VecDeque<bool>,
    /// Bumped whenever the dynamic table changes (an entry enters, a size update): a block
    /// decoded with no change in it reads the same while this stays the same.
    generation: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DEFAULT_TABLE_SIZE)
    }
}

/// Where a decoded name or value lives until it is handed out.
#[derive(Clone, Copy)]
enum Src {
    Static(usize),
    Dynamic(usize),
    Raw(usize, usize),
    Buf,
}

impl Decoder {
    /// A decoder whose table may grow to `size_limit` bytes (and starts at that size).
    pub fn new(size_limit: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(size_limit),
            size_limit,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
            names_ok: VecDeque::new(),
            generation: 0,
        }
    }

    /// Changes whenever the dynamic table does. A block whose decoding left it unchanged
    /// (every field indexed, or a literal not indexed) decodes to the same fields again for
    /// as long as it stays the same, so a caller may keep what it read from it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The dynamic table's current size in bytes (entries plus their overhead).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Decodes one complete header block, handing each field to `on_field(name, value)`.
    pub fn decode(
        &mut self,
        block: &[u8],
        on_field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        self.decode_checked(block, on_field).map(|_| ())
    }

    /// [`Decoder::decode`], also saying whether every regular field name may appear in
    /// HTTP/2 ([`regular_name_ok`]). A name from a table is judged once, as it entered, so
    /// the check costs a field that refers to one nothing.
    pub fn decode_checked(
        &mut self,
        block: &[u8],
        mut on_field: impl FnMut(&[u8], &[u8]),
    ) -> Result<bool, HpackError> {
        let mut pos = 0;
        let mut fields_seen = false;
        let mut names_ok = true;
        while pos < block.len() {
            let first = block[pos];
            if first & 0x80 != 0 {
                let index = integer(block, &mut pos, 7)?;
                let src = self.check_index(index)?;
                names_ok &= self.src_name_ok(src);
                let (name, value) = self.lookup(src);
                on_field(name, value);
            } else if first & 0xe0 == 0x20 {
                let size = integer(block, &mut pos, 5)?;
                if fields_seen || size > self.size_limit {
                    return Err(HpackError::SizeUpdate);
                }
                self.table.set_max_size(size);
                self.generation += 1;
                self.names_ok.truncate(self.table.entries().len());
                continue;
            } else {
                let (prefix, indexing) = if first & 0xc0 == 0x40 {
                    (6, true)
                } else {
                    (4, false)
                };
                names_ok &= self.literal(block, &mut pos, prefix, indexing, &mut on_field)?;
            }
            fields_seen = true;
        }
        Ok(names_ok)
    }

    /// Whether the name at `src`, a table's, passes [`name_ok`].
    fn src_name_ok(&self, src: Src) -> bool {
        match src {
            Src::Static(i) => i != STATIC_TRANSFER_ENCODING,
            Src::Dynamic(i) => self.names_ok.get(i).copied().unwrap_or(true),
            Src::Raw(..) | Src::Buf => true,
        }
    }

    fn literal(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        prefix: u8,
        indexing: bool,
        on_field: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<bool, HpackError> {
        let index = integer(block, pos, prefix)?;
        let (name, literal_name) = if index == 0 {
            (string(block, pos, &mut self.name_buf)?, true)
        } else {
            (self.check_index(index)?, false)
        };
        let value = string(block, pos, &mut self.value_buf)?;
        let table_ok = self.src_name_ok(name);
        let (name, value) = (
            self.resolve(name, block, true),
            self.resolve(value, block, false),
        );
        let ok = if literal_name {
            name_ok(name)
        } else {
            table_ok
        };
        on_field(name, value);
        if indexing {
            let (name, value) = (Box::from(name), Box::from(value));
            let fits = super::dynamic_table::entry_size(&name, &value) <= self.table.max_size();
            self.table.insert(name, value);
            self.generation += 1;
            if fits {
                self.names_ok.push_front(ok);
            }
            self.names_ok.truncate(self.table.entries().len());
        }
        Ok(ok)
    }

    fn check_index(&self, index: usize) -> Result<Src, HpackError> {
        match index {
            0 => Err(HpackError::BadIndex(0)),
            1..=61 => Ok(Src::Static(index - 1)),
            _ if index - 62 < self.table.entries().len() => Ok(Src::Dynamic(index - 62)),
            _ => Err(HpackError::BadIndex(index)),
        }
    }

    fn lookup(&self, src: Src) -> (&[u8], &[u8]) {
        match src {
            Src::Static(i) => (STATIC_TABLE[i].0.as_bytes(), STATIC_TABLE[i].1.as_bytes()),
            Src::Dynamic(i) => {
                let (n, v) = &self.table.entries()[i];
                (n, v)
            }
            // check_index returns table sources only.
            Src::Raw(..) | Src::Buf => (&[], &[]),
        }
    }

    fn resolve<'a>(&'a self, src: Src, block: &'a [u8], is_name: bool) -> &'a [u8] {
        match src {
            Src::Static(i) => STATIC_TABLE[i].0.as_bytes(),
            Src::Dynamic(i) => &self.table.entries()[i].0,
            Src::Raw(start, end) => &block[start..end],
            Src::Buf if is_name => &self.name_buf,
            Src::Buf => &self.value_buf,
        }
    }
}

/// Reads an integer with an `prefix`-bit prefix (RFC 7541 §5.1) at `pos`.
fn integer(block: &[u8], pos: &mut usize, prefix: u8) -> Result<usize, HpackError> {
    let mask = (1usize << prefix) - 1;
    let mut value = usize::from(*block.get(*pos).ok_or(HpackError::Truncated)?) & mask;
    *pos += 1;
    if value < mask {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let byte = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        // Five continuation bytes carry 35 bits: far beyond any sane length or index.
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
        value += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Reads a string literal (RFC 7541 §5.2): raw bytes stay in the block, Huffman goes to `buf`.
fn string(block: &[u8], pos: &mut usize, buf: &mut Vec<u8>) -> Result<Src, HpackError> {
    let huffman_coded = *block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = integer(block, pos, 7)?;
    let start = *pos;
    let end = start.checked_add(len).ok_or(HpackError::Truncated)?;
    if end > block.len() {
        return Err(HpackError::Truncated);
    }
    *pos = end;
    if huffman_coded {
        buf.clear();
        huffman::decode(&block[start..end], buf)?;
        Ok(Src::Buf)
    } else {
        Ok(Src::Raw(start, end))
    }
}
