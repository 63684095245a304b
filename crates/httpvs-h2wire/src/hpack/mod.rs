//! HPACK (RFC 7541): the one header-compression codec of httpvs, shared by the owned h2 client
//! (`httpvs_load::protocol::hpack` re-exports it) and the owned h2 server. The client decodes
//! responses with [`Decoder`] and encodes each distinct request once with [`encoder`]; the
//! server encodes its responses with a dynamic table ([`TableEncoder`]); `httpvs trace` decodes
//! both directions with the same [`Decoder`].

pub mod decoder;
pub mod dynamic_table;
pub mod encoder;
pub mod huffman;
pub mod static_table;
pub mod table_encoder;

pub use decoder::Decoder;
pub use table_encoder::TableEncoder;

/// Why a header block could not be decoded (all are HTTP/2 COMPRESSION_ERRORs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// The block ended inside a representation.
    #[error("header block truncated")]
    Truncated,
    /// An integer does not fit the decoder's limits.
    #[error("integer overflow")]
    IntegerOverflow,
    /// An index beyond the static and dynamic tables (or zero).
    #[error("invalid table index {0}")]
    BadIndex(usize),
    /// Invalid Huffman coding (EOS, or bad padding).
    #[error("invalid Huffman coding")]
    Huffman,
    /// A table size update above the limit, or after the first field of a block.
    #[error("invalid dynamic table size update")]
    SizeUpdate,
}

#[cfg(test)]
pub(crate) mod tests;
