//! The table encoder against RFC 7541 Appendix C.6, our decoder and `loona-hpack`: eviction,
//! a table of size 0, size updates after SETTINGS changes, and many random responses.

use super::TableEncoder;
use crate::hpack::dynamic_table::entry_size;
use crate::hpack::encoder::size_update;
use crate::hpack::tests::{hex, Fields};
use crate::hpack::Decoder;
use rand::{Rng, SeedableRng};

/// One response head: `:status` then `fields`, all indexed where they may be.
fn encode(enc: &mut TableEncoder, status: u16, fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    enc.begin_block(&mut out);
    enc.status(status, &mut out);
    for (n, v) in fields {
        enc.field(n, v, true, &mut out);
    }
    out
}

fn decode(d: &mut Decoder, block: &[u8]) -> Fields {
    crate::hpack::tests::decode(d, block).expect("our blocks decode")
}

fn expected(status: u16, fields: &[(&[u8], &[u8])]) -> Fields {
    let mut all = vec![(b":status".to_vec(), status.to_string().into_bytes())];
    all.extend(fields.iter().map(|(n, v)| (n.to_vec(), v.to_vec())));
    all
}

/// C.6: the same three responses in a 256-byte table, with the same evictions. The second
/// block differs from the RFC's only in "307" (Huffman is no shorter, so we send it raw).
#[test]
fn rfc7541_c6_responses_encode_as_the_rfc_does() {
    let mut enc = TableEncoder::new();
    enc.set_peer_limit(256);
    let mut d = Decoder::new(256);
    let location: &[u8] = b"https://www.example.com";
    let r1: [(&[u8], &[u8]); 3] = [
        (b"cache-control", b"private"),
        (b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
        (b"location", location),
    ];
    let first = encode(&mut enc, 302, &r1);
    let mut update = Vec::new();
    size_update(256, &mut update);
    assert_eq!(first[..update.len()], update);
    let c61 = "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3";
    assert_eq!(first[update.len()..], hex(c61));
    assert_eq!(decode(&mut d, &first), expected(302, &r1));
    assert_eq!((enc.table_size(), d.table_size()), (222, 222));

    let second = encode(&mut enc, 307, &r1);
    assert_eq!(second, hex("4803 3330 37c1 c0bf"));
    assert_eq!(decode(&mut d, &second), expected(307, &r1));
    assert_eq!((enc.table_size(), d.table_size()), (222, 222));

    let cookie: &[u8] = b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    let r3: [(&[u8], &[u8]); 5] = [
        (b"cache-control", b"private"),
        (b"date", b"Mon, 21 Oct 2013 20:13:22 GMT"),
        (b"location", location),
        (b"content-encoding", b"gzip"),
        (b"set-cookie", cookie),
    ];
    let third = encode(&mut enc, 200, &r3);
    let c63 = "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07";
    assert_eq!(third, hex(c63));
    assert_eq!(decode(&mut d, &third), expected(200, &r3));
    assert_eq!((enc.table_size(), d.table_size()), (215, 215));
}

#[test]
fn a_repeated_head_is_a_few_bytes_and_can_be_sent_again_while_the_table_stays() {
    let mut enc = TableEncoder::new();
    let mut d = Decoder::default();
    let head: [(&[u8], &[u8]); 3] = [
        (b"content-type", b"text/plain"),
        (b"content-length", b"18"),
        (b"date", b"Thu, 01 Jan 1970 00:00:00 GMT"),
    ];
    let first = encode(&mut enc, 200, &head);
    let moved = enc.generation();
    let steady = encode(&mut enc, 200, &head);
    // :status 200 from the static table, then the three entries by index.
    assert_eq!(steady, [0x88, 0x80 | 64, 0x80 | 63, 0x80 | 62]);
    assert_eq!(
        enc.generation(),
        moved,
        "an all-indexed block changes nothing"
    );
    assert_eq!(encode(&mut enc, 200, &head), steady);
    for block in [&first, &steady, &steady] {
        assert_eq!(decode(&mut d, block), expected(200, &head));
    }
    let sizes = [(12, 10), (14, 2), (4, 29)].map(|(n, v)| n + v + 32);
    assert_eq!(enc.table_size(), sizes.iter().sum::<usize>());
    assert_eq!(d.table_size(), enc.table_size());
    // A status outside the static table enters the table too.
    let unavailable = encode(&mut enc, 503, &head);
    assert_eq!(encode(&mut enc, 503, &head), [0x80 | 62, 0xc1, 0xc0, 0xbf]);
    assert_eq!(decode(&mut d, &unavailable), expected(503, &head));
}

/// Entries leave oldest first (size = name + value + 32), a field whose entry is gone goes as a
/// literal again, and the decoder's table stays the encoder's to the byte.
#[test]
fn eviction_is_oldest_first_and_the_decoder_follows() {
    let mut enc = TableEncoder::new();
    enc.set_peer_limit(200);
    let mut d = Decoder::default();
    // Each entry: 4 + 24 + 32 = 60 bytes; three fit in 200, a fourth evicts the first.
    let value = |c: u8| [c; 24];
    let (a, b, c, e) = (value(b'a'), value(b'b'), value(b'c'), value(b'e'));
    for (i, v) in [&a, &b, &c].into_iter().enumerate() {
        let block = encode(&mut enc, 200, &[(b"x-v1", v)]);
        assert_eq!(decode(&mut d, &block), expected(200, &[(b"x-v1", v)]));
        assert_eq!(enc.table_size(), 60 * (i + 1));
    }
    assert_eq!(entry_size(b"x-v1", &a), 60);
    let block = encode(&mut enc, 200, &[(b"x-v1", &e)]);
    assert_eq!(decode(&mut d, &block), expected(200, &[(b"x-v1", &e)]));
    assert_eq!((enc.table_size(), enc.table_len()), (180, 3));
    assert_eq!(d.table_size(), 180);
    // `b` is still there (one byte), `a` was evicted (a literal, which evicts `b` in turn).
    assert_eq!(encode(&mut enc, 200, &[(b"x-v1", &b)]).len(), 2);
    let again = encode(&mut enc, 200, &[(b"x-v1", &a)]);
    assert_eq!(again[1] & 0xc0, 0x40, "a literal with indexing: {again:?}");
    assert!(again.len() > 10, "{again:?}");
    assert_eq!(decode(&mut d, &again), expected(200, &[(b"x-v1", &a)]));
    assert_eq!(
        decode(&mut d, &encode(&mut enc, 200, &[(b"x-v1", &c)]))[1].1,
        c
    );
    assert_eq!(d.table_size(), enc.table_size());
    // A field over half the table is sent without indexing and evicts nothing.
    let big = [b'z'; 80];
    let before = enc.table_size();
    let block = encode(&mut enc, 200, &[(b"x-big", &big)]);
    assert_eq!(block[1] & 0xf0, 0x00, "literal without indexing");
    assert_eq!(decode(&mut d, &block)[1].1, big);
    assert_eq!((enc.table_size(), d.table_size()), (before, before));
}

#[test]
fn a_table_of_size_zero_indexes_nothing_after_the_update() {
    let head: [(&[u8], &[u8]); 2] = [(b"content-type", b"text/plain"), (b"server", b"x")];
    let mut enc = TableEncoder::new();
    let mut d = Decoder::default();
    decode(&mut d, &encode(&mut enc, 200, &head));
    assert!(d.table_size() > 0);
    enc.set_peer_limit(0);
    let first = encode(&mut enc, 200, &head);
    assert_eq!(first[0], 0x20, "size update to 0 first: {first:?}");
    assert_eq!(decode(&mut d, &first), expected(200, &head));
    assert_eq!((enc.table_size(), d.table_size()), (0, 0));
    let second = encode(&mut enc, 200, &head);
    assert_eq!(second[..], first[1..], "no update again, literals only");
    assert_eq!(decode(&mut d, &second), expected(200, &head));
    // A client whose table is 0 from its first SETTINGS.
    let mut enc = TableEncoder::new();
    enc.set_peer_limit(0);
    let mut d = Decoder::new(0);
    for _ in 0..3 {
        assert_eq!(
            decode(&mut d, &encode(&mut enc, 200, &head)),
            expected(200, &head)
        );
        assert_eq!(enc.table_len(), 0);
    }
}

#[test]
fn settings_changes_are_signalled_at_the_next_block_only_when_the_size_changes() {
    let head: [(&[u8], &[u8]); 1] = [(b"content-type", b"text/plain")];
    let update = |sizes: &[usize]| {
        let mut out = Vec::new();
        for &s in sizes {
            size_update(s, &mut out);
        }
        out
    };
    let mut enc = TableEncoder::new();
    let plain = encode(&mut enc, 200, &head);
    // The default again, or more than we use: nothing to signal.
    for limit in [4096, 65_536] {
        enc.set_peer_limit(limit);
        assert_eq!(encode(&mut enc, 200, &head), [0x88, 0x80 | 62]);
    }
    enc.set_peer_limit(1024);
    let block = encode(&mut enc, 200, &head);
    assert!(block.starts_with(&update(&[1024])), "{block:?}");
    assert_eq!(encode(&mut enc, 200, &head), [0x88, 0x80 | 62]);
    // Down to 0 and back before a block: the smallest and the last, in that order (§4.2).
    enc.set_peer_limit(0);
    enc.set_peer_limit(4096);
    let block = encode(&mut enc, 200, &head);
    assert_eq!(block, [update(&[0, 4096]), plain.clone()].concat());
    // Down twice: the last is the smallest, one update.
    enc.set_peer_limit(2048);
    enc.set_peer_limit(512);
    assert!(encode(&mut enc, 200, &head).starts_with(&update(&[512])));
    // Each block decodes, and the tables agree.
    let mut enc = TableEncoder::new();
    let mut d = Decoder::default();
    for limit in [4096, 100, 0, 300, 4096, 50, 8192] {
        enc.set_peer_limit(limit);
        for _ in 0..2 {
            assert_eq!(
                decode(&mut d, &encode(&mut enc, 200, &head)),
                expected(200, &head)
            );
            assert_eq!(d.table_size(), enc.table_size());
        }
    }
}

/// A value from a small pool (so values repeat), or a fresh one now and then.
fn value(rng: &mut rand::rngs::SmallRng, pool: &[&[u8]]) -> Vec<u8> {
    if rng.random_bool(0.1) {
        let len = rng.random_range(0..60);
        (0..len).map(|_| rng.random_range(b' '..=b'~')).collect()
    } else {
        pool[rng.random_range(0..pool.len())].to_vec()
    }
}

/// Many connections of many responses: statuses, sizes and dates that vary, extra fields,
/// SETTINGS changes between blocks. Every block decodes to its fields with our decoder and
/// `loona-hpack`, the tables agree, and a block that moved nothing is the same when repeated.
#[test]
fn random_responses_round_trip_through_two_decoders() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(9113);
    let statuses = [200, 200, 200, 204, 404, 503, 431, 302];
    let lengths: [&[u8]; 5] = [b"18", b"100", b"1024", b"0", b"3145728"];
    let dates: Vec<Vec<u8>> = (0..40)
        .map(|s| format!("Thu, 01 Jan 1970 00:00:{s:02} GMT").into_bytes())
        .collect();
    let extras: [&[u8]; 4] = [
        b"x-test",
        b"server",
        b"cache-control",
        b"x-a-much-longer-name",
    ];
    let mut indexed_bytes = 0;
    let mut encoded_bytes = 0;
    for _ in 0..60 {
        let mut enc = TableEncoder::new();
        let mut ours = Decoder::default();
        let mut theirs = loona_hpack::Decoder::new();
        let mut second = 0;
        for _ in 0..rng.random_range(1..120) {
            if rng.random_bool(0.03) {
                enc.set_peer_limit(rng.random_range(0..=5000));
            }
            second += usize::from(rng.random_bool(0.1));
            let status = statuses[rng.random_range(0..statuses.len())];
            let mut fields: Fields = vec![
                (b"content-type".to_vec(), b"text/plain".to_vec()),
                (b"content-length".to_vec(), value(&mut rng, &lengths)),
                (b"date".to_vec(), dates[second % dates.len()].clone()),
            ];
            for _ in 0..rng.random_range(0..3) {
                let name = extras[rng.random_range(0..extras.len())].to_vec();
                fields.push((name, value(&mut rng, &[b"hello", b"no-cache", b"x"])));
            }
            let refs: Vec<(&[u8], &[u8])> = fields
                .iter()
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .collect();
            let before = enc.generation();
            let block = encode(&mut enc, status, &refs);
            let want = expected(status, &refs);
            assert_eq!(decode(&mut ours, &block), want);
            let mut got = Vec::new();
            theirs
                .decode_with_cb(&block, |n, v| got.push((n.to_vec(), v.to_vec())))
                .expect("loona-hpack decodes our block");
            assert_eq!(got, want);
            assert_eq!(ours.table_size(), enc.table_size());
            assert!(enc.table_size() <= enc.max_table_size());
            if enc.generation() == before {
                assert_eq!(encode(&mut enc, status, &refs), block);
                assert_eq!(decode(&mut ours, &block), want);
                theirs.decode_with_cb(&block, |_, _| {}).expect("decodes");
            }
            indexed_bytes += block.len();
            encoded_bytes += want.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>();
        }
    }
    // Repeats are most of the traffic: far under half the plain bytes.
    assert!(
        indexed_bytes * 4 < encoded_bytes,
        "{indexed_bytes} vs {encoded_bytes}"
    );
}

#[test]
fn statuses_outside_the_static_table_are_written_in_decimal() {
    let mut digits = [0u8; 5];
    for (n, text) in [(0u16, "0"), (7, "7"), (431, "431"), (65535, "65535")] {
        let len = super::decimal(n, &mut digits);
        assert_eq!(&digits[..len], text.as_bytes());
    }
}
