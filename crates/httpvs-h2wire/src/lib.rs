//! HTTP/2 wire pieces shared by the owned client codec (`httpvs-load`) and the owned server
//! connection (`httpvs-server`): HPACK with Huffman, and frame constants, headers and encoding.

pub mod frame;
pub mod hpack;
