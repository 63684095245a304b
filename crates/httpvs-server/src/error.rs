//! Why the server could not start.

use std::net::SocketAddr;
use std::path::PathBuf;

/// A failure to start the server: bad configuration, a listener that cannot bind, a bad certificate.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration cannot work (no listener, zero threads...).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A listener could not bind (address in use, permission...).
    #[error("cannot listen on {addr} ({proto})")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// tcp or udp.
        proto: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A certificate or key file could not be read.
    #[error("cannot read {flag} {}", path.display())]
    ReadCert {
        /// The flag that named it (`--cert`, `--key`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The certificate or key is not usable.
    #[error("unusable TLS certificate or key: {0}")]
    Cert(String),
    /// A worker thread or runtime could not be created.
    #[error("cannot start worker: {0}")]
    Runtime(std::io::Error),
}
