//! HPACK header blocks of one connection direction (RFC 7541), decoded in wire order.
//!
//! The dynamic table makes every block depend on all earlier ones in the same direction, so a
//! [`BlockDecoder`] must see every HEADERS/PUSH_PROMISE block of its direction, CONTINUATION
//! fragments joined, in order. The decoding itself is the h2 client's own decoder
//! (`protocol::hpack`); its results are checked here against the examples of RFC 7541 Appendix C.

use super::event::Field;
use crate::protocol::hpack::Decoder;

/// Decodes the header blocks of one direction of one connection.
#[derive(Default)]
pub struct BlockDecoder {
    decoder: Decoder,
    /// After a failure the table is unknown: later blocks are not decoded.
    broken: Option<String>,
}

/// One decoded block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Fields in block order.
    pub fields: Vec<Field>,
    /// Names plus values, in bytes (h2load's decoded header size).
    pub decoded_bytes: u64,
}

impl std::fmt::Debug for BlockDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockDecoder")
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl BlockDecoder {
    /// Decodes the next complete block of this direction.
    pub fn decode(&mut self, block: &[u8]) -> Result<Decoded, String> {
        if let Some(why) = &self.broken {
            return Err(format!("not decoded: an earlier block failed ({why})"));
        }
        let mut fields = Vec::new();
        let mut decoded_bytes = 0u64;
        let result = self.decoder.decode(block, |name, value| {
            decoded_bytes += (name.len() + value.len()) as u64;
            fields.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        });
        match result {
            Ok(()) => Ok(Decoded {
                fields,
                decoded_bytes,
            }),
            Err(e) => {
                let why = format!("HPACK: {e}");
                self.broken = Some(why.clone());
                Err(why)
            }
        }
    }
}

/// Fields with pseudo-headers first, otherwise in block order.
pub fn pseudo_first(mut fields: Vec<Field>) -> Vec<Field> {
    fields.sort_by_key(|(name, _)| !name.starts_with(':'));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    fn fields(pairs: &[(&str, &str)]) -> Vec<Field> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 C.3: requests without Huffman coding, sharing one dynamic table.
    #[test]
    fn rfc7541_c3_requests_without_huffman() {
        let mut d = BlockDecoder::default();
        let first = d
            .decode(&hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"))
            .unwrap();
        assert_eq!(
            first.fields,
            fields(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ])
        );
        let second = d
            .decode(&hex("8286 84be 5808 6e6f 2d63 6163 6865"))
            .unwrap();
        assert_eq!(
            second.fields[3],
            (":authority".into(), "www.example.com".into())
        );
        assert_eq!(
            second.fields[4],
            ("cache-control".into(), "no-cache".into())
        );
        let third = d
            .decode(&hex(
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            ))
            .unwrap();
        assert_eq!(
            third.fields,
            fields(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value")
            ])
        );
    }

    /// RFC 7541 C.4: the same requests with Huffman coding.
    #[test]
    fn rfc7541_c4_requests_with_huffman() {
        let mut d = BlockDecoder::default();
        let first = d
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .unwrap();
        assert_eq!(
            first.fields[3],
            (":authority".into(), "www.example.com".into())
        );
        let second = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        assert_eq!(
            second.fields[4],
            ("cache-control".into(), "no-cache".into())
        );
        let third = d
            .decode(&hex(
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ))
            .unwrap();
        assert_eq!(
            third.fields[4],
            ("custom-key".into(), "custom-value".into())
        );
    }

    /// RFC 7541 C.6: responses with Huffman coding and evictions from a 256-byte table.
    #[test]
    fn rfc7541_c6_responses_with_huffman_and_eviction() {
        let mut d = BlockDecoder::default();
        // The example's table is 256 bytes: a size update within the first block sets it here.
        let mut first = hex("3fe1 01");
        first.extend(hex(
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        ));
        let r1 = d.decode(&first).unwrap();
        assert_eq!(
            r1.fields,
            fields(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com")
            ])
        );
        let r2 = d.decode(&hex("4883 640e ff c1 c0 bf")).unwrap();
        assert_eq!(r2.fields[0], (":status".into(), "307".into()));
        assert_eq!(
            r2.fields[3],
            ("location".into(), "https://www.example.com".into())
        );
        let r3 = d
            .decode(&hex(
                "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ))
            .unwrap();
        assert_eq!(
            r3.fields,
            fields(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", "https://www.example.com"),
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
                )
            ])
        );
        assert_eq!(
            r3.decoded_bytes,
            7 + 3 + 13 + 7 + 4 + 29 + 8 + 23 + 16 + 4 + 10 + 56
        );
    }

    #[test]
    fn a_bad_block_stops_later_decoding_with_a_reason() {
        let mut d = BlockDecoder::default();
        assert!(d.decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        let err = d.decode(&hex("82")).unwrap_err();
        assert!(err.contains("earlier block"), "{err}");
    }

    #[test]
    fn pseudo_headers_come_first() {
        let sorted = pseudo_first(fields(&[("server", "x"), (":status", "200"), ("a", "b")]));
        assert_eq!(sorted[0].0, ":status");
        assert_eq!(sorted[1].0, "server");
    }
}
