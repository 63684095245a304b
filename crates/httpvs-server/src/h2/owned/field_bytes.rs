//! The byte rules of RFC 9113 §8.2.1 for field names and values, at a cost the `GET /` fast path
//! can pay on every request: a table lookup per name byte, and values checked eight bytes at a
//! time. No allocation, no branch per value byte in the common case.

/// What a field value's bytes allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Nothing to object to.
    Plain,
    /// A control byte other than NUL, CR, LF or HTAB, or DEL: RFC 9113 allows it, RFC 9110's
    /// field-value (and `http::HeaderValue`) does not.
    Control,
    /// NUL, CR or LF anywhere, or SP or HTAB at either end: the message is malformed.
    Malformed,
}

/// Classifies a field value.
#[inline]
pub fn check_value(value: &[u8]) -> Value {
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    if blank(value.first()) || blank(value.last()) {
        return Value::Malformed;
    }
    if !has_control_byte(value) {
        return Value::Plain;
    }
    // Rare: tell the malformed bytes from the merely unusual ones.
    let mut kind = Value::Plain;
    for &b in value {
        match b {
            0 | b'\r' | b'\n' => return Value::Malformed,
            b'\t' => {}
            0..0x20 | 0x7f => kind = Value::Control,
            _ => {}
        }
    }
    kind
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any byte is under 0x20 or is 0x7f (HTAB included: the caller sorts it out). Whole
/// words, the last one overlapping the one before, so no value of 4 bytes or more takes a loop
/// per byte.
fn has_control_byte(value: &[u8]) -> bool {
    let word = |bytes: &[u8; 8]| word_has_control_byte(u64::from_le_bytes(*bytes));
    if let Some(last) = value.last_chunk::<8>() {
        return value
            .chunks_exact(8)
            .any(|w| w.first_chunk().is_some_and(word))
            || word(last);
    }
    // 4 to 7 bytes: two overlapping halves, each topped up with bytes that are never hits.
    let half = |bytes: &[u8; 4]| {
        word_has_control_byte(u64::from(u32::from_le_bytes(*bytes)) | PLAIN_HIGH_HALF)
    };
    if let (Some(first), Some(last)) = (value.first_chunk::<4>(), value.last_chunk::<4>()) {
        return half(first) || half(last);
    }
    value.iter().any(|&b| b < 0x20 || b == 0x7f)
}

/// Four `a` bytes in the high half of a word.
const PLAIN_HIGH_HALF: u64 = 0x6161_6161 << 32;

/// The word-at-a-time tests "some byte < n" (exact for n <= 0x80) and "some byte == 0" (on the
/// word XOR 0x7f7f...): a borrow can mark a byte above a true hit, never a word without one.
fn word_has_control_byte(x: u64) -> bool {
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
    let del = x ^ (ONES * 0x7f);
    let is_del = del.wrapping_sub(ONES) & !del & HIGHS;
    (below_space | is_del) != 0
}

/// Bytes of a field name as HTTP/2 allows it: token characters, no upper case.
static NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = matches!(b as u8,
            b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
            | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~');
        b += 1;
    }
    table
};

/// Whether `name` is a non-empty lower-case token.
#[inline]
pub fn is_valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| NAME_BYTE[usize::from(b)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(b: u8) -> bool {
        b < 0x20 || b == 0x7f
    }

    #[test]
    fn every_byte_at_every_place_of_a_word_is_told_right() {
        for len in 1..=19 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut value = vec![b'a'; len];
                    value[at] = b;
                    assert_eq!(
                        has_control_byte(&value),
                        control(b),
                        "{b:#x} at {at} of {len}"
                    );
                    // A hit next to bytes that borrow (0x00, 0x80, 0xff) stays exact.
                    for other in [0x00, 0x1f, 0x20, 0x7e, 0x80, 0xff] {
                        value.fill(other);
                        value[at] = b;
                        let expected = control(b) || (len > 1 && control(other));
                        assert_eq!(
                            has_control_byte(&value),
                            expected,
                            "{b:#x} among {other:#x}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn values_are_plain_control_or_malformed() {
        let cases: [(&[u8], Value); 12] = [
            (b"", Value::Plain),
            (b"h2load nghttp2/1.52.0", Value::Plain),
            (b"a b\tc", Value::Plain),
            (b"caf\xc3\xa9", Value::Plain),
            (b"a\x01b", Value::Control),
            (b"\x7f", Value::Control),
            (b" a", Value::Malformed),
            (b"a\t", Value::Malformed),
            (b"a\rb", Value::Malformed),
            (b"a\nb\x01", Value::Malformed),
            (b"a\0", Value::Malformed),
            (b"a\x01b\0", Value::Malformed),
        ];
        for (value, kind) in cases {
            assert_eq!(check_value(value), kind, "{value:?}");
        }
    }

    #[test]
    fn names_are_lower_case_tokens() {
        for good in ["user-agent", "x-a", "te", "a1!#$%&'*+-.^_`|~"] {
            assert!(is_valid_name(good.as_bytes()), "{good}");
        }
        for bad in [
            "",
            "User-Agent",
            "a b",
            "a:b",
            "a\"",
            "a\0",
            "é",
            "(x)",
            "a/b",
            "x{",
        ] {
            assert!(!is_valid_name(bad.as_bytes()), "{bad}");
        }
    }
}
