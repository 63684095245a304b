//! The httpvs reference server: one process serving HTTP/1.1, h2c, h2 over TLS and HTTP/3, with
//! Fortio-style responses (`size`, `delay`, `status`, `close`, `header`, probability lists) and the
//! limits that decide protocol comparisons (streams, requests per connection, idle, sizes).
//!
//! Tests start it in-process: `start(ServeConfig::loopback_ephemeral())`.

mod authority;
pub mod body;
pub mod cert;
mod config;
mod conn_io;
mod date;
pub mod echo;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod h1;
pub mod h2;
mod h3;
mod io_util;
mod listen;
mod opening;
mod precise_sleep;
pub mod query;
pub mod respond;
mod server;
mod tcp;
mod totals;
mod worker;

pub use config::{H2Engine, Limits, PemFiles, ServeConfig, MAX_THREADS};
pub use error::ServeError;
pub use server::{start, RunningServer};
pub use totals::{ByProto, ByStatus, Failures, Rejections, ServerTotals};
