//! Request heads as HPACK blocks, encoded once per distinct request on a connection.
//!
//! The first distinct head of a connection is indexed: its first use adds its fields to the
//! server's dynamic table and later uses refer to them by index (as h2load's requests do).
//! Any other head (several URLs) names the fields it shares with that one by the same indexes,
//! `:authority` and `user-agent` among them, and sends the rest (its `:path`) as literals
//! without indexing, so the table never changes under the indexed head. A server table smaller
//! than the indexed head turns indexing off.

use super::request_template::build_template;
use crate::protocol::h1::same_uri;
use crate::protocol::hpack::encoder::{block_against, request_blocks, RequestBlocks};
use crate::protocol::hpack::static_table::find_exact;
use crate::protocol::RequestSpec;
use http::{HeaderName, HeaderValue, Method, Uri};

/// A run uses one request (or a handful); more distinct ones than this are re-encoded.
const CACHED_HEADS: usize = 8;

#[derive(Debug)]
struct Entry {
    method: Method,
    uri: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body_len: usize,
    /// The h2 head as name/value pairs, pseudo-headers first.
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    blocks: RequestBlocks,
    first_sent: bool,
}

impl Entry {
    fn matches(&self, req: &RequestSpec) -> bool {
        self.body_len == req.body.len()
            && self.method == req.method
            && same_uri(&self.uri, &req.uri)
            && self.headers == req.headers
    }
}

/// The encoded heads of one connection.
#[derive(Debug, Default)]
pub struct HeadBlocks {
    entries: Vec<Entry>,
    /// Whether a head has been chosen to live in the server's table.
    indexed_chosen: bool,
    /// Table bytes the indexed head added once its first block went out.
    indexed_bytes: usize,
    /// The fields the indexed head added to the server's table (oldest first), once its first
    /// block went out: what other heads may name by index.
    table: Vec<(Vec<u8>, Vec<u8>)>,
    next_evict: usize,
}

impl HeadBlocks {
    /// The block to send now for `req`, given the server's table size `table_limit`.
    pub fn block(&mut self, req: &RequestSpec, table_limit: usize) -> &[u8] {
        let at = match self.entries.iter().position(|e| e.matches(req)) {
            Some(at) => at,
            None => self.add(req, table_limit),
        };
        let entry = &mut self.entries[at];
        if entry.first_sent {
            &entry.blocks.steady
        } else {
            entry.first_sent = true;
            if entry.blocks.table_bytes > 0 {
                self.indexed_bytes = entry.blocks.table_bytes;
                self.table = entry
                    .fields
                    .iter()
                    .filter(|(n, v)| find_exact(n, v).is_none())
                    .cloned()
                    .collect();
            }
            &entry.blocks.first
        }
    }

    /// The server's table shrank to `limit`: an indexed head that no longer fits is
    /// re-encoded without indexing (the caller sends a size update first).
    pub fn table_shrunk(&mut self, limit: usize) {
        if self.indexed_bytes <= limit {
            return;
        }
        // The indexed head, and every head that names its fields, go back to literals.
        for entry in &mut self.entries {
            entry.blocks = encode(&entry.fields, false);
        }
        self.indexed_bytes = 0;
        self.table.clear();
    }

    fn add(&mut self, req: &RequestSpec, table_limit: usize) -> usize {
        let fields = head_fields(req);
        let mut blocks = if self.table.is_empty() {
            encode(&fields, !self.indexed_chosen)
        } else {
            against(&fields, &self.table)
        };
        if blocks.table_bytes > table_limit {
            blocks = encode(&fields, false);
        }
        self.indexed_chosen |= blocks.table_bytes > 0;
        let entry = Entry {
            method: req.method.clone(),
            uri: req.uri.clone(),
            headers: req.headers.clone(),
            body_len: req.body.len(),
            fields,
            blocks,
            first_sent: false,
        };
        if self.entries.len() < CACHED_HEADS {
            self.entries.push(entry);
            return self.entries.len() - 1;
        }
        // Never evict the indexed head: its steady block depends on the table it filled.
        let mut at = self.next_evict;
        while self.entries[at].blocks.table_bytes > 0 {
            at = (at + 1) % CACHED_HEADS;
        }
        self.next_evict = (at + 1) % CACHED_HEADS;
        self.entries[at] = entry;
        at
    }
}

/// A head's blocks naming what it shares with the indexed head's `table` entries by index.
fn against(fields: &[(Vec<u8>, Vec<u8>)], table: &[(Vec<u8>, Vec<u8>)]) -> RequestBlocks {
    let block = block_against(&refs(fields), &refs(table));
    RequestBlocks {
        first: block.clone(),
        steady: block,
        table_bytes: 0,
    }
}

fn encode(fields: &[(Vec<u8>, Vec<u8>)], indexing: bool) -> RequestBlocks {
    request_blocks(&refs(fields), indexing)
}

/// The fields as borrowed name/value pairs, as the encoder takes them.
fn refs(fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
    fields
        .iter()
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect()
}

/// The h2 head of `req` (the same head the reference client sends), pseudo-headers first.
fn head_fields(req: &RequestSpec) -> Vec<(Vec<u8>, Vec<u8>)> {
    let head = build_template(req);
    let uri = head.uri();
    let pseudo = [
        (":method", head.method().as_str()),
        (":scheme", uri.scheme_str().unwrap_or("http")),
        (":authority", uri.authority().map_or("", |a| a.as_str())),
        (":path", uri.path_and_query().map_or("/", |p| p.as_str())),
    ];
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = pseudo
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    for (name, value) in head.headers() {
        fields.push((name.as_str().as_bytes().to_vec(), value.as_bytes().to_vec()));
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::hpack::Decoder;

    fn spec(path: &str) -> RequestSpec {
        RequestSpec {
            method: Method::GET,
            uri: format!("http://127.0.0.1:8080{path}").parse().unwrap(),
            headers: vec![],
            body: bytes::Bytes::new(),
        }
    }

    fn decode(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(block, |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .unwrap();
        out
    }

    #[test]
    fn first_head_is_indexed_others_are_literal_and_all_decode() {
        let mut heads = HeadBlocks::default();
        let mut server = Decoder::default();
        let (a, b) = (spec("/a"), spec("/b"));
        let first = heads.block(&a, 4096).to_vec();
        let steady = heads.block(&a, 4096).to_vec();
        assert!(steady.len() < first.len() / 3, "{steady:?} vs {first:?}");
        let other = heads.block(&b, 4096).to_vec();
        for block in [&first, &steady, &other, &steady] {
            let fields = decode(&mut server, block);
            assert_eq!(fields[0], (":method".into(), "GET".into()));
            assert_eq!(fields[2], (":authority".into(), "127.0.0.1:8080".into()));
            assert!(fields.iter().any(|(n, _)| n == "user-agent"));
        }
        assert_eq!(decode(&mut server, &other)[3].1, "/b");
        assert_eq!(decode(&mut server, &steady)[3].1, "/a");
        // The other head names :authority and user-agent by index: only its :path is literal.
        let plain = encode(&head_fields(&b), false).steady;
        assert!(other.len() + 20 < plain.len(), "{other:?} vs {plain:?}");
    }

    /// Many URLs on one connection: every head decodes to its own path and the shared fields,
    /// and the table the server keeps is only the first head's, whatever the order.
    #[test]
    fn many_heads_share_the_indexed_heads_fields() {
        let mut heads = HeadBlocks::default();
        let mut server = Decoder::default();
        for round in 0..3 {
            for i in 0..20 {
                let path = format!("/item/{i}?round={}", round % 2);
                let fields = decode(&mut server, heads.block(&spec(&path), 4096));
                assert_eq!(fields[3], (":path".into(), path.clone()));
                assert_eq!(fields[2], (":authority".into(), "127.0.0.1:8080".into()));
                assert!(fields.iter().any(|(n, _)| n == "user-agent"), "{fields:?}");
            }
        }
        // The table shrinks under them: every head goes back to literals and still decodes.
        heads.table_shrunk(10);
        let mut small = Decoder::new(0);
        for i in [0, 7, 19] {
            let path = format!("/item/{i}?round=0");
            let fields = decode(&mut small, heads.block(&spec(&path), 10));
            assert_eq!(fields[3].1, path);
        }
    }

    #[test]
    fn a_small_server_table_turns_indexing_off() {
        let mut heads = HeadBlocks::default();
        let first = heads.block(&spec("/"), 0).to_vec();
        assert_eq!(heads.block(&spec("/"), 0), first.as_slice());
        let mut heads = HeadBlocks::default();
        heads.block(&spec("/"), 4096);
        let steady = heads.block(&spec("/"), 4096).to_vec();
        heads.table_shrunk(10);
        let plain = heads.block(&spec("/"), 10).to_vec();
        assert!(plain.len() > steady.len());
        let mut server = Decoder::new(0);
        assert_eq!(decode(&mut server, &plain)[3].1, "/");
    }
}
