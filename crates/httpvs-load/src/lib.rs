//! The httpvs load generator: when to send (schedule), how to send (protocol), what to record (stats), how to show (report).

pub mod error;
pub mod protocol;

pub use error::ErrorKind;
