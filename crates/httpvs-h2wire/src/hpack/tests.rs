//! HPACK checked against RFC 7541 Appendix C, a model of the dynamic table on random blocks,
//! and `loona-hpack` as a second decoder.

use super::encoder::{integer, literal, request_blocks, size_update, string};
use super::static_table::STATIC_TABLE;
use super::{Decoder, HpackError};
use rand::{Rng, SeedableRng};

/// Decoded fields, as owned name and value bytes.
pub(super) type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Bytes from hex digits, spaces and other separators ignored (RFC 7541's examples).
pub(super) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Decodes one block into owned fields.
pub(super) fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, HpackError> {
    let mut out = Vec::new();
    d.decode(block, |n, v| out.push((n.to_vec(), v.to_vec())))?;
    Ok(out)
}

fn fields(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn rfc7541_c2_field_representations() {
    let mut d = Decoder::default();
    let c21 = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode(&mut d, &c21).unwrap(),
        fields(&[("custom-key", "custom-header")])
    );
    assert_eq!(d.table_size(), 55);
    let c22 = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode(&mut d, &c22).unwrap(),
        fields(&[(":path", "/sample/path")])
    );
    let c23 = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(
        decode(&mut d, &c23).unwrap(),
        fields(&[("password", "secret")])
    );
    assert_eq!(
        decode(&mut d, &hex("82")).unwrap(),
        fields(&[(":method", "GET")])
    );
    assert_eq!(d.table_size(), 55);
}

/// C.3 and C.4: three requests sharing one table, without and with Huffman coding.
#[test]
fn rfc7541_c3_c4_requests() {
    let blocks = [
        [
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ],
        [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ],
    ];
    for set in blocks {
        let mut d = Decoder::default();
        let first = decode(&mut d, &hex(set[0])).unwrap();
        assert_eq!(
            first,
            fields(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ])
        );
        assert_eq!(d.table_size(), 57);
        let second = decode(&mut d, &hex(set[1])).unwrap();
        assert_eq!(second[4], fields(&[("cache-control", "no-cache")])[0]);
        assert_eq!(d.table_size(), 110);
        let third = decode(&mut d, &hex(set[2])).unwrap();
        assert_eq!(
            third,
            fields(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value")
            ])
        );
        assert_eq!(d.table_size(), 164);
    }
}

/// C.5 and C.6: three responses in a 256-byte table, with evictions, without and with Huffman.
#[test]
fn rfc7541_c5_c6_responses_with_eviction() {
    let blocks = [
        [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
        ],
        [
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ],
    ];
    for set in blocks {
        let mut d = Decoder::new(256);
        let r1 = decode(&mut d, &hex(set[0])).unwrap();
        assert_eq!(
            r1,
            fields(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com")
            ])
        );
        assert_eq!(d.table_size(), 222);
        let r2 = decode(&mut d, &hex(set[1])).unwrap();
        assert_eq!(r2[0], fields(&[(":status", "307")])[0]);
        assert_eq!(r2[3].1, b"https://www.example.com");
        assert_eq!(d.table_size(), 222);
        let r3 = decode(&mut d, &hex(set[2])).unwrap();
        assert_eq!(
            r3,
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
        assert_eq!(d.table_size(), 215);
    }
}

#[test]
fn request_blocks_index_once_then_refer() {
    let head: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":authority", b"127.0.0.1:8080"),
        (b":path", b"/"),
        (b"user-agent", b"httpvs/0.1"),
    ];
    let blocks = request_blocks(&head, true);
    // Static matches are one byte; the two indexed fields refer to 63 and 62.
    assert_eq!(blocks.steady, [0x82, 0x86, 0x80 | 63, 0x84, 0x80 | 62]);
    assert_eq!(blocks.table_bytes, 10 + 14 + 32 + 10 + 10 + 32);
    let mut d = Decoder::default();
    let expect: Fields = head.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    assert_eq!(decode(&mut d, &blocks.first).unwrap(), expect);
    for _ in 0..3 {
        assert_eq!(decode(&mut d, &blocks.steady).unwrap(), expect);
    }
    let plain = request_blocks(&head, false);
    assert_eq!(plain.first, plain.steady);
    assert_eq!(decode(&mut d, &plain.steady).unwrap(), expect);
}

/// A model of the dynamic table, to know what each random block must decode to.
#[derive(Default)]
struct Model {
    entries: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    max: usize,
}

impl Model {
    fn size(&self) -> usize {
        self.entries
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum()
    }
    fn evict(&mut self) {
        while self.size() > self.max {
            self.entries.pop_back();
        }
    }
    fn insert(&mut self, n: &[u8], v: &[u8]) {
        self.entries.push_front((n.to_vec(), v.to_vec()));
        if n.len() + v.len() + 32 > self.max {
            self.entries.clear();
        }
        self.evict();
    }
    fn get(&self, index: usize) -> (Vec<u8>, Vec<u8>) {
        if index <= 61 {
            let (n, v) = STATIC_TABLE[index - 1];
            (n.as_bytes().to_vec(), v.as_bytes().to_vec())
        } else {
            self.entries[index - 62].clone()
        }
    }
}

fn random_text(rng: &mut rand::rngs::SmallRng) -> Vec<u8> {
    let len = rng.random_range(0..40);
    if rng.random_bool(0.3) {
        (0..len).map(|_| rng.random()).collect()
    } else {
        (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect()
    }
}

/// One random field in a random representation; appends what it must decode to.
fn random_field(
    rng: &mut rand::rngs::SmallRng,
    model: &mut Model,
    block: &mut Vec<u8>,
) -> (Vec<u8>, Vec<u8>) {
    let known = 61 + model.entries.len();
    match rng.random_range(0..4) {
        0 => {
            let index = rng.random_range(1..=known);
            integer(index, 7, 0x80, block);
            model.get(index)
        }
        kind => {
            let (prefix, pattern) = [(6, 0x40), (4, 0x00), (4, 0x10)][kind - 1];
            let value = random_text(rng);
            let name = if rng.random_bool(0.5) {
                let index = rng.random_range(1..=known);
                integer(index, prefix, pattern, block);
                model.get(index).0
            } else {
                let name = random_text(rng);
                integer(0, prefix, pattern, block);
                string(&name, block);
                name
            };
            string(&value, block);
            if kind == 1 {
                model.insert(&name, &value);
            }
            (name, value)
        }
    }
}

/// Random blocks (every representation, Huffman or not, size updates, evictions) decode to
/// what a model of the table says, and to what `loona-hpack` decodes.
#[test]
fn random_blocks_match_a_model_and_a_second_decoder() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7541);
    for _ in 0..200 {
        let mut d = Decoder::default();
        let mut reference = loona_hpack::Decoder::new();
        let mut model = Model {
            max: 4096,
            ..Model::default()
        };
        for _ in 0..rng.random_range(1..20) {
            let mut block = Vec::new();
            let updated = rng.random_bool(0.1);
            if updated {
                model.max = rng.random_range(0..=4096);
                size_update(model.max, &mut block);
                model.evict();
            }
            // loona-hpack refuses a block that is only a size update (RFC 7541 allows it).
            let least = usize::from(updated);
            let expect: Fields = (0..rng.random_range(least..12))
                .map(|_| random_field(&mut rng, &mut model, &mut block))
                .collect();
            assert_eq!(decode(&mut d, &block).unwrap(), expect);
            assert_eq!(d.table_size(), model.size());
            let mut theirs = Vec::new();
            reference
                .decode_with_cb(&block, |n, v| theirs.push((n.to_vec(), v.to_vec())))
                .unwrap();
            assert_eq!(theirs, expect);
        }
    }
}

/// Random and truncated input never panics; truncation is an error, never a wrong field.
#[test]
fn garbage_and_truncation_are_errors_not_panics() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(13);
    for _ in 0..3000 {
        let junk: Vec<u8> = (0..rng.random_range(0..64)).map(|_| rng.random()).collect();
        let _ = decode(&mut Decoder::default(), &junk);
    }
    let mut block = Vec::new();
    literal(b"x-long", &[b'v'; 300], 4, 0x00, &mut block);
    for cut in 0..block.len() {
        assert!(decode(&mut Decoder::default(), &block[..cut]).is_err() || cut == 0);
    }
    assert_eq!(
        decode(&mut Decoder::default(), &[0x80]),
        Err(HpackError::BadIndex(0))
    );
    assert_eq!(
        decode(&mut Decoder::default(), &[0x82, 0x20]),
        Err(HpackError::SizeUpdate)
    );
}

/// `decode_checked` judges regular names as HTTP/2 allows them: a literal name each time, a
/// table's as it entered, so a later reference to a bad entry is still bad, and an entry
/// evicted takes its judgement with it.
#[test]
fn checked_decoding_judges_names_once_per_table_entry() {
    assert_eq!(STATIC_TABLE[56].0, "transfer-encoding");
    let mut d = Decoder::default();
    let check = |d: &mut Decoder, block: &[u8]| d.decode_checked(block, |_, _| {}).unwrap();
    // Static :status 200 (index 8) and a lowercase literal name indexed as entry 62.
    let mut good = vec![0x88];
    literal(b"x-ok", b"1", 6, 0x40, &mut good);
    assert!(check(&mut d, &good));
    // An uppercase literal name indexed as the new entry 62; then referred to by index.
    let mut bad = vec![0x88];
    literal(b"X-Bad", b"1", 6, 0x40, &mut bad);
    assert!(!check(&mut d, &bad));
    assert!(!check(&mut d, &[0x88, 0x80 | 62]));
    assert!(check(&mut d, &[0x88, 0x80 | 63]), "x-ok is entry 63 now");
    // The static table's transfer-encoding, and connection-specific literals.
    let mut te = vec![0x88];
    integer(57, 4, 0x00, &mut te);
    string(b"chunked", &mut te);
    assert!(!check(&mut d, &te));
    for name in ["connection", "keep-alive", "upgrade", "proxy-connection"] {
        let mut block = vec![0x88];
        literal(name.as_bytes(), b"x", 4, 0, &mut block);
        assert!(!check(&mut d, &block), "{name}");
    }
    // Eviction by an insert into a full table drops the oldest judgements with their
    // entries: a small table holds one entry, so a good one pushes the bad one out.
    let mut small = Decoder::new(64);
    let mut bad = Vec::new();
    literal(b"X-Bad", b"1", 6, 0x40, &mut bad);
    assert!(!check(&mut small, &bad));
    assert!(!check(&mut small, &[0x80 | 62]));
    let mut good = Vec::new();
    literal(b"x-ok", b"1", 6, 0x40, &mut good);
    assert!(check(&mut small, &good));
    assert!(check(&mut small, &[0x80 | 62]), "the good entry is 62 now");
    assert!(small.decode_checked(&[0x80 | 63], |_, _| {}).is_err());
    // A size update that empties the table forgets the judgements with the entries; the
    // next bad insert is judged afresh and sits at 62 alone.
    let mut emptied = Vec::new();
    size_update(0, &mut emptied);
    size_update(4096, &mut emptied);
    literal(b"X-Bad", b"2", 6, 0x40, &mut emptied);
    assert!(!check(&mut d, &emptied));
    assert!(!check(&mut d, &[0x80 | 62]));
    assert!(
        d.decode_checked(&[0x80 | 63], |_, _| {}).is_err(),
        "one entry left"
    );
    let mut fresh = Vec::new();
    literal(b"x-new", b"1", 6, 0x40, &mut fresh);
    assert!(check(&mut d, &fresh));
    assert!(check(&mut d, &[0x80 | 62]));
    assert!(
        !check(&mut d, &[0x80 | 63]),
        "X-Bad moved to 63 with its judgement"
    );
}
