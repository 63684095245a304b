//! HPACK's Huffman code (RFC 7541 Appendix B): an encoder, and a decoder that walks the code
//! tree four bits at a time through a table built once from the code lengths.
//!
//! The code is canonical, so the 257 code lengths (256 octets and EOS) fix every code word;
//! the tests check a few words against Appendix B and whole strings against Appendix C.

use super::HpackError;
use std::sync::OnceLock;

/// Code length in bits of each symbol 0..=255 and EOS (256), from RFC 7541 Appendix B.
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const EOS: u16 = 256;

/// One decoding step: the state after a nibble, and the octet it completed, if any.
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    next: u8,
    /// bit 0: emits `symbol`; bit 1: the nibble ran into EOS or off the tree (an error).
    flags: u8,
    symbol: u8,
}

const EMITS: u8 = 1;
const FAILS: u8 = 2;

struct Tables {
    codes: [u32; 257],
    /// 16 steps per internal node of the code tree (node 0 is the root).
    steps: Vec<Step>,
    /// Whether ending in this state is valid padding: a prefix of EOS shorter than 8 bits.
    accepting: Vec<bool>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(build_tables)
}

/// Canonical code words: shorter codes first, ties in symbol order, each one more than the last.
fn canonical_codes() -> [u32; 257] {
    let mut order: Vec<u16> = (0..257).collect();
    order.sort_by_key(|&s| (CODE_LENGTHS[s as usize], s));
    let mut codes = [0u32; 257];
    let (mut code, mut prev_len) = (0u32, CODE_LENGTHS[order[0] as usize]);
    for (i, &s) in order.iter().enumerate() {
        let len = CODE_LENGTHS[s as usize];
        if i > 0 {
            code = (code + 1) << (len - prev_len);
        }
        prev_len = len;
        codes[s as usize] = code;
    }
    codes
}

/// A child of a tree node: another internal node, or a symbol.
#[derive(Clone, Copy)]
enum Child {
    Missing,
    Node(u16),
    Leaf(u16),
}

fn build_tables() -> Tables {
    let codes = canonical_codes();
    // The binary tree: internal nodes with two children each.
    let mut tree: Vec<[Child; 2]> = vec![[Child::Missing; 2]];
    for sym in 0..257u16 {
        let (code, len) = (codes[sym as usize], CODE_LENGTHS[sym as usize]);
        let mut node = 0usize;
        for depth in (0..len).rev() {
            let bit = ((code >> depth) & 1) as usize;
            if depth == 0 {
                tree[node][bit] = Child::Leaf(sym);
            } else {
                node = match tree[node][bit] {
                    Child::Node(n) => n as usize,
                    _ => {
                        tree.push([Child::Missing; 2]);
                        let n = tree.len() - 1;
                        tree[node][bit] = Child::Node(n as u16);
                        n
                    }
                };
            }
        }
    }
    // Which nodes lie on EOS's all-ones path, and at what depth.
    let mut accepting = vec![false; tree.len()];
    let (mut node, mut depth) = (0usize, 0);
    while depth < 8 {
        accepting[node] = true;
        match tree[node][1] {
            Child::Node(n) => node = n as usize,
            _ => break,
        }
        depth += 1;
    }
    let mut steps = vec![Step::default(); tree.len() * 16];
    for (state, _) in tree.iter().enumerate() {
        for nibble in 0..16u8 {
            let mut step = Step::default();
            let mut node = state;
            for shift in (0..4).rev() {
                match tree[node][((nibble >> shift) & 1) as usize] {
                    Child::Node(n) => node = n as usize,
                    Child::Leaf(EOS) | Child::Missing => {
                        step.flags |= FAILS;
                        break;
                    }
                    Child::Leaf(sym) => {
                        step.flags |= EMITS;
                        step.symbol = sym as u8;
                        node = 0;
                    }
                }
            }
            step.next = node as u8;
            steps[state * 16 + nibble as usize] = step;
        }
    }
    Tables {
        codes,
        steps,
        accepting,
    }
}

/// Decodes `input` and appends the octets to `out`.
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let t = tables();
    let mut state = 0usize;
    for &byte in input {
        for nibble in [byte >> 4, byte & 0xf] {
            let step = t.steps[state * 16 + nibble as usize];
            if step.flags & FAILS != 0 {
                return Err(HpackError::Huffman);
            }
            if step.flags & EMITS != 0 {
                out.push(step.symbol);
            }
            state = step.next as usize;
        }
    }
    if t.accepting[state] {
        Ok(())
    } else {
        Err(HpackError::Huffman)
    }
}

/// The length of `input` once Huffman-coded.
pub fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input
        .iter()
        .map(|&b| CODE_LENGTHS[b as usize] as usize)
        .sum();
    bits.div_ceil(8)
}

/// Appends the Huffman coding of `input` to `out`, padded with the most significant bits of EOS.
pub fn encode(input: &[u8], out: &mut Vec<u8>) {
    let codes = &tables().codes;
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in input {
        let len = u32::from(CODE_LENGTHS[b as usize]);
        acc = (acc << len) | u64::from(codes[b as usize]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_words_match_appendix_b() {
        let codes = canonical_codes();
        // ' ' (32), '0' (48), 'a' (97), 0 and EOS, as RFC 7541 Appendix B lists them.
        assert_eq!((codes[32], CODE_LENGTHS[32]), (0x14, 6));
        assert_eq!((codes[48], CODE_LENGTHS[48]), (0x0, 5));
        assert_eq!((codes[97], CODE_LENGTHS[97]), (0x3, 5));
        assert_eq!((codes[0], CODE_LENGTHS[0]), (0x1ff8, 13));
        assert_eq!((codes[256], CODE_LENGTHS[256]), (0x3fff_ffff, 30));
    }

    #[test]
    fn rfc7541_c4_www_example_com() {
        let coded = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut out = Vec::new();
        decode(&coded, &mut out).unwrap();
        assert_eq!(out, b"www.example.com");
        let mut again = Vec::new();
        encode(b"www.example.com", &mut again);
        assert_eq!(again, coded);
        assert_eq!(encoded_len(b"www.example.com"), coded.len());
    }

    #[test]
    fn every_octet_string_round_trips() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(41);
        for _ in 0..2000 {
            let input: Vec<u8> = (0..rng.random_range(0..60)).map(|_| rng.random()).collect();
            let mut coded = Vec::new();
            encode(&input, &mut coded);
            assert_eq!(coded.len(), encoded_len(&input));
            let mut out = Vec::new();
            decode(&coded, &mut out).unwrap();
            assert_eq!(out, input);
        }
    }

    #[test]
    fn bad_padding_and_eos_are_errors() {
        // Eight ones of padding is more than the 7 allowed.
        assert_eq!(decode(&[0xff], &mut Vec::new()), Err(HpackError::Huffman));
        // Padding of zeros is not a prefix of EOS: '0' is 00000, then 000 is not padding.
        assert_eq!(decode(&[0x00], &mut Vec::new()), Err(HpackError::Huffman));
        // EOS itself, 30 ones, is an error even when complete.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xfc], &mut Vec::new()),
            Err(HpackError::Huffman)
        );
        // Random bytes never panic.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        for _ in 0..2000 {
            let junk: Vec<u8> = (0..rng.random_range(0..20)).map(|_| rng.random()).collect();
            let _ = decode(&junk, &mut Vec::new());
        }
    }
}
