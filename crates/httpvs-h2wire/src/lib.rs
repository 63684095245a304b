//! HTTP/2 wire pieces shared by the owned client codec (`httpvs-load`) and the owned server
//! connection (`httpvs-server`): HPACK with Huffman, frame constants, headers and encoding, and
//! maps keyed by stream id; and HTTP/3's one shared piece, QUIC's variable-length integers.

pub mod frame;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod hpack;
pub mod stream_id;
pub mod varint;
