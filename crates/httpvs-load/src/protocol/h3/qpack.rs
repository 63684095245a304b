//! QPACK (RFC 9204) as the owned HTTP/3 client needs it: a static-table-only encoder for request
//! heads and a decoder for the field sections servers send when our dynamic table capacity is 0.
//!
//! With SETTINGS_QPACK_MAX_TABLE_CAPACITY left at 0 a server may not insert into a table of ours,
//! so every field section has a Required Insert Count of 0 and refers to the static table or
//! carries literals (possibly Huffman-coded). Anything else is H3_QPACK_DECOMPRESSION_FAILED.

use super::qpack_static::{find_field, find_name, STATIC_TABLE};
use httpvs_h2wire::hpack::huffman;

/// H3_QPACK_DECOMPRESSION_FAILED (RFC 9204 §6).
pub const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;

/// A response field section is bounded so a hostile server cannot grow our memory.
pub const MAX_FIELD_SECTION: usize = 64 << 10;

/// Why a field section could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QpackError {
    /// The block ended inside a representation.
    #[error("QPACK field section truncated")]
    Truncated,
    /// An integer or string length beyond what the block (or our limits) can hold.
    #[error("QPACK integer out of range")]
    Overflow,
    /// A dynamic-table reference, which a capacity of 0 forbids.
    #[error("QPACK dynamic table reference with capacity 0")]
    DynamicReference,
    /// A static index beyond the table.
    #[error("QPACK static index {0} out of range")]
    BadIndex(u64),
    /// Invalid Huffman coding.
    #[error("QPACK invalid Huffman coding")]
    Huffman,
}

/// Appends `value` as a prefixed integer (RFC 7541 §5.1) whose first byte carries `flags` above
/// its low `prefix_bits` bits.
pub fn put_int(out: &mut Vec<u8>, flags: u8, prefix_bits: u8, value: u64) {
    let max = (1u64 << prefix_bits) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Reads a prefixed integer from the low `prefix_bits` of `block[*at]` onwards.
fn get_int(block: &[u8], at: &mut usize, prefix_bits: u8) -> Result<u64, QpackError> {
    let max = (1u64 << prefix_bits) - 1;
    let first = *block.get(*at).ok_or(QpackError::Truncated)?;
    *at += 1;
    let mut value = u64::from(first) & max;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let byte = *block.get(*at).ok_or(QpackError::Truncated)?;
        *at += 1;
        if shift > 56 {
            return Err(QpackError::Overflow);
        }
        value += u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Appends a raw (not Huffman-coded) string literal whose length prefix has `prefix_bits` bits.
fn put_string(out: &mut Vec<u8>, flags: u8, prefix_bits: u8, bytes: &[u8]) {
    put_int(out, flags, prefix_bits, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a string literal, Huffman-coded when that is shorter (the H bit sits just above the
/// length prefix).
fn put_string_shortest(out: &mut Vec<u8>, flags: u8, prefix_bits: u8, bytes: &[u8]) {
    let coded_len = huffman::encoded_len(bytes);
    if coded_len < bytes.len() {
        put_int(
            out,
            flags | (1 << prefix_bits),
            prefix_bits,
            coded_len as u64,
        );
        huffman::encode(bytes, out);
    } else {
        put_string(out, flags, prefix_bits, bytes);
    }
}

/// Encodes a request field section with the static table only: exact matches as indexed field
/// lines, known names as literals with a name reference, the rest as literals, each string
/// Huffman-coded when shorter. The section is encoded once per distinct request, so coding costs
/// nothing per request and every request's packet is smaller.
pub fn encode_field_section(fields: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
    // Required Insert Count 0, Base 0.
    out.extend_from_slice(&[0, 0]);
    for &(name, value) in fields {
        if let Some(index) = find_field(name, value) {
            put_int(out, 0b1100_0000, 6, index as u64);
        } else if let Some(index) = find_name(name) {
            put_int(out, 0b0101_0000, 4, index as u64);
            put_string_shortest(out, 0, 7, value);
        } else {
            put_string_shortest(out, 0b0010_0000, 3, name);
            put_string_shortest(out, 0, 7, value);
        }
    }
}

/// What the client needs from a response field section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodedSection {
    /// The `:status` value, if the section had a well-formed one.
    pub status: Option<u16>,
    /// Decoded names + values of the regular (non-pseudo) fields.
    pub field_bytes: u64,
    /// Whether the section broke HTTP/3 message rules (unknown or repeated pseudo-header, a
    /// pseudo-header after a regular field, a `content-length` that is no length or two that
    /// differ): the caller treats the message as malformed.
    pub malformed: bool,
    /// The `content-length` value, when the section has one.
    pub content_length: Option<u64>,
}

impl DecodedSection {
    fn field(&mut self, name: &[u8], value: &[u8], seen_regular: &mut bool) {
        if name.first() == Some(&b':') {
            let repeated = self.status.is_some();
            self.status = (name == b":status").then(|| parse_status(value)).flatten();
            self.malformed |= *seen_regular || repeated || self.status.is_none();
        } else {
            *seen_regular = true;
            self.field_bytes += (name.len() + value.len()) as u64;
            if name == b"content-length" {
                match (
                    crate::protocol::parse_content_length(value),
                    self.content_length,
                ) {
                    (Some(n), None) => self.content_length = Some(n),
                    (Some(n), Some(earlier)) if n == earlier => {}
                    _ => self.malformed = true,
                }
            }
        }
    }
}

/// Whether a literal field name may appear in an HTTP/3 response: no uppercase letter, and
/// not a connection-specific field (RFC 9114 §4.2).
fn is_lawful_name(name: &[u8]) -> bool {
    !name.iter().any(u8::is_ascii_uppercase)
        && !crate::protocol::CONNECTION_SPECIFIC
            .iter()
            .any(|field| field.as_bytes() == name)
}

/// A three-digit status code.
fn parse_status(value: &[u8]) -> Option<u16> {
    match value {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

/// Reads a string literal whose H bit sits just above its `prefix_bits` length prefix; Huffman
/// strings are decoded into `scratch` (cleared first) and returned from there.
fn get_string<'a>(
    block: &'a [u8],
    at: &mut usize,
    prefix_bits: u8,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], QpackError> {
    let huffman_coded = block.get(*at).ok_or(QpackError::Truncated)? & (1 << prefix_bits) != 0;
    let len = get_int(block, at, prefix_bits)?;
    let len = usize::try_from(len).map_err(|_| QpackError::Overflow)?;
    let end = at.checked_add(len).ok_or(QpackError::Overflow)?;
    let raw = block.get(*at..end).ok_or(QpackError::Truncated)?;
    *at = end;
    if !huffman_coded {
        return Ok(raw);
    }
    scratch.clear();
    huffman::decode(raw, scratch).map_err(|_| QpackError::Huffman)?;
    Ok(scratch)
}

/// A static table entry by index.
fn static_entry(index: u64) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| STATIC_TABLE.get(i).copied())
        .ok_or(QpackError::BadIndex(index))
}

/// Decodes a field section that may only use the static table. `name_scratch` and
/// `value_scratch` hold Huffman-decoded strings (reused across calls, so no allocation once warm).
pub fn decode_field_section(
    block: &[u8],
    name_scratch: &mut Vec<u8>,
    value_scratch: &mut Vec<u8>,
) -> Result<DecodedSection, QpackError> {
    let mut at = 0;
    let required_insert_count = get_int(block, &mut at, 8)?;
    let _delta_base = get_int(block, &mut at, 7)?;
    if required_insert_count != 0 {
        return Err(QpackError::DynamicReference);
    }
    let mut section = DecodedSection::default();
    let mut seen_regular = false;
    while at < block.len() {
        let first = block[at];
        if first & 0b1000_0000 != 0 {
            // Indexed field line; T (0x40) set means the static table.
            if first & 0b0100_0000 == 0 {
                return Err(QpackError::DynamicReference);
            }
            let (name, value) = static_entry(get_int(block, &mut at, 6)?)?;
            section.field(name, value, &mut seen_regular);
        } else if first & 0b0100_0000 != 0 {
            // Literal with name reference; T (0x10) set means the static table.
            if first & 0b0001_0000 == 0 {
                return Err(QpackError::DynamicReference);
            }
            let (name, _) = static_entry(get_int(block, &mut at, 4)?)?;
            let value = get_string(block, &mut at, 7, value_scratch)?;
            section.field(name, value, &mut seen_regular);
        } else if first & 0b0010_0000 != 0 {
            // Literal with literal name: H bit 0x08, 3-bit length prefix.
            let name = get_string(block, &mut at, 3, name_scratch)?;
            let value = get_string(block, &mut at, 7, value_scratch)?;
            // Only a literal name can break the name rules (the static table's are sound): an
            // uppercase letter, or a connection-specific field, makes the message malformed
            // (RFC 9114 §4.2), as the h2 client judges them (it took `Content-Type`).
            section.malformed |= !is_lawful_name(name);
            section.field(name, value, &mut seen_regular);
        } else {
            // Post-base forms (0001xxxx, 0000xxxx) always refer to the dynamic table.
            return Err(QpackError::DynamicReference);
        }
    }
    Ok(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(block: &[u8]) -> Result<DecodedSection, QpackError> {
        decode_field_section(block, &mut Vec::new(), &mut Vec::new())
    }

    #[test]
    fn prefixed_integers_round_trip_rfc_7541_examples() {
        let mut out = Vec::new();
        put_int(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        put_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
        for prefix in [3u8, 4, 6, 7, 8] {
            for value in [0u64, 1, 6, 7, 127, 128, 255, 300, 16_384, u32::MAX as u64] {
                let mut out = Vec::new();
                put_int(&mut out, 0, prefix, value);
                let mut at = 0;
                assert_eq!(get_int(&out, &mut at, prefix), Ok(value));
                assert_eq!(at, out.len());
            }
        }
    }

    #[test]
    fn encoded_request_decodes_back() {
        let fields: [(&[u8], &[u8]); 5] = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"localhost:4433"),
            (b":path", b"/?size=10"),
            (b"x-custom-header", b"v"),
        ];
        let mut block = Vec::new();
        encode_field_section(&fields, &mut block);
        // Prefix, two indexed lines, two literals with name refs, one literal name.
        assert_eq!(&block[..4], &[0, 0, 0xc0 | 17, 0xc0 | 23]);
        let section = decode(&block).expect("decodes");
        assert_eq!(section.field_bytes, 16);
        assert!(section.malformed, "a request has no :status");
    }

    #[test]
    fn response_with_static_status_and_huffman_values() {
        // :status 200 indexed (25), content-length literal with name ref (4) Huffman "18",
        // and a literal name "x-a" with raw value "b".
        let mut block = vec![0, 0, 0xc0 | 25];
        let mut coded = Vec::new();
        huffman::encode(b"18", &mut coded);
        put_int(&mut block, 0b0101_0000, 4, 4);
        put_int(&mut block, 0x80, 7, coded.len() as u64);
        block.extend_from_slice(&coded);
        put_string(&mut block, 0b0010_0000, 3, b"x-a");
        put_string(&mut block, 0, 7, b"b");
        let section = decode(&block).expect("decodes");
        assert_eq!(section.status, Some(200));
        assert_eq!(section.field_bytes, ("content-length".len() + 2 + 4) as u64);
        assert!(!section.malformed);
    }

    #[test]
    fn literal_status_and_pseudo_order() {
        let mut block = vec![0, 0];
        put_int(&mut block, 0b0101_0000, 4, 24); // :status name ref
        put_string(&mut block, 0, 7, b"299");
        assert_eq!(decode(&block).expect("ok").status, Some(299));
        let mut late = vec![0, 0, 0xc0 | 2, 0xc0 | 25]; // age: 0, then :status 200
        assert!(decode(&late).expect("ok").malformed);
        late.truncate(2);
        put_int(&mut late, 0b0101_0000, 4, 24);
        put_string(&mut late, 0, 7, b"20");
        assert!(decode(&late).expect("ok").malformed, "two-digit status");
    }

    /// A literal name with an uppercase letter, or a connection-specific one, makes the
    /// section malformed; lowercase names pass.
    #[test]
    fn literal_names_that_break_http3_rules_are_malformed() {
        let section = |name: &[u8]| {
            let mut block = vec![0, 0];
            put_int(&mut block, 0xc0, 6, 25); // :status 200
            put_string(&mut block, 0x20, 3, name);
            put_string(&mut block, 0, 7, b"v");
            decode(&block).expect("decodes").malformed
        };
        assert!(!section(b"x-trace"));
        for bad in [
            &b"X-Trace"[..],
            b"connection",
            b"transfer-encoding",
            b"upgrade",
        ] {
            assert!(section(bad), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn dynamic_references_and_truncation_are_errors() {
        assert_eq!(decode(&[1, 0]), Err(QpackError::DynamicReference));
        assert_eq!(decode(&[0, 0, 0x80]), Err(QpackError::DynamicReference));
        assert_eq!(decode(&[0, 0, 0x40]), Err(QpackError::DynamicReference));
        assert_eq!(decode(&[0, 0, 0x10]), Err(QpackError::DynamicReference));
        assert_eq!(decode(&[0, 0, 0x00]), Err(QpackError::DynamicReference));
        assert_eq!(
            decode(&[0, 0, 0xc0 | 63, 50]),
            Err(QpackError::BadIndex(113))
        );
        assert_eq!(
            decode(&[0, 0, 0x50 | 4, 5, b'1']),
            Err(QpackError::Truncated)
        );
        assert_eq!(decode(&[0]), Err(QpackError::Truncated));
        assert_eq!(
            decode(&[0, 0, 0x50 | 4, 0x81, 0xff]),
            Err(QpackError::Huffman)
        );
    }

    #[test]
    fn random_blocks_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut names = Vec::new();
        let mut values = Vec::new();
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let block: Vec<u8> = (0..len)
                .map(|i| (seed >> ((i % 8) * 8)) as u8 ^ i as u8)
                .collect();
            let _ = decode_field_section(&block, &mut names, &mut values);
        }
    }
}
