//! Fuzzing entry for HPACK: a peer's header blocks, and the table encoder fed what they decode to.

use crate::hpack::{huffman, Decoder, TableEncoder};

/// Decodes `data` as two header blocks on one connection (the first byte picks where the
/// first ends and, with the second, the table size the peer allows), then encodes every field
/// that decoded with the table encoder and decodes that with a fresh decoder, as the peer
/// would; and Huffman-codes `data` both ways. Panics only where a round trip changes bytes.
pub fn hpack(data: &[u8]) {
    let [split, limit, data @ ..] = data else {
        return;
    };
    let limit = usize::from(*limit) * 32;
    let at = (usize::from(*split) * 2).min(data.len());
    let mut decoder = Decoder::new(limit);
    let mut encoder = TableEncoder::new();
    encoder.set_peer_limit(limit);
    let mut peer = Decoder::new(limit);
    for block in [&data[..at], &data[at..]] {
        let mut fields = Vec::new();
        if decoder
            .decode(block, |n, v| fields.push((n.to_vec(), v.to_vec())))
            .is_err()
        {
            break;
        }
        let mut encoded = Vec::new();
        encoder.begin_block(&mut encoded);
        for (i, (name, value)) in fields.iter().enumerate() {
            encoder.field(name, value, i % 2 == 0, &mut encoded);
        }
        let mut again = Vec::new();
        peer.decode(&encoded, |n, v| again.push((n.to_vec(), v.to_vec())))
            .expect("the table encoder's block decodes");
        assert_eq!(again, fields, "fields changed through the table encoder");
    }
    let mut coded = Vec::new();
    huffman::encode(data, &mut coded);
    assert_eq!(coded.len(), huffman::encoded_len(data), "encoded_len");
    let mut decoded = Vec::new();
    huffman::decode(&coded, &mut decoded).expect("Huffman output decodes");
    assert_eq!(decoded, data, "Huffman round trip");
    let _ = huffman::decode(data, &mut decoded);
}
