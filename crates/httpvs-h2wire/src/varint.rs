//! QUIC variable-length integers (RFC 9000 §16), as HTTP/3 frames carry them: read whole from
//! a slice, or across chunk boundaries. Shared by the h3 client's frame readers and the
//! server's frame-header guard.

/// Reads one varint from the start of `bytes`: its value and encoded length.
pub fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = 1usize << (first >> 6);
    let encoded = bytes.get(..len)?;
    let value = encoded[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |acc, &b| (acc << 8) | u64::from(b));
    Some((value, len))
}

/// One QUIC variable-length integer being read across chunk boundaries (RFC 9000 §16).
#[derive(Debug, Clone, Copy, Default)]
pub struct PartialVarint {
    value: u64,
    have: u8,
    need: u8,
}

impl PartialVarint {
    /// Whether some bytes of a varint have been read but not all.
    pub fn is_partial(&self) -> bool {
        self.have > 0
    }

    /// Consumes bytes from `input` until the varint completes; returns it and the bytes used.
    pub fn push(&mut self, input: &[u8]) -> (Option<u64>, usize) {
        // The common case: a varint whole in the chunk, read without the byte-wise state.
        if self.have == 0 {
            if let Some((value, used)) = read_varint(input) {
                return (Some(value), used);
            }
        }
        let mut used = 0;
        for &byte in input {
            used += 1;
            if self.have == 0 {
                self.need = 1 << (byte >> 6);
                self.value = u64::from(byte & 0x3f);
            } else {
                self.value = (self.value << 8) | u64::from(byte);
            }
            self.have += 1;
            if self.have == self.need {
                let value = self.value;
                *self = PartialVarint::default();
                return (Some(value), used);
            }
        }
        (None, used)
    }
}
