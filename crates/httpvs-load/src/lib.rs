//! The httpvs load generator: when to send (schedule), how to send (protocol), what to record (stats), how to show (report).
//!
//! Entry point: [`run`] with a [`LoadConfig`] and an [`Observer`] (the live line, compare's
//! series...). It returns a [`report::Report`], or a [`LoadError`] when the run cannot start.

pub mod config;
pub mod connect_to;
pub mod engine;
pub mod error;
pub mod files;
pub mod protocol;
pub mod report;
pub mod schedule;
pub mod stats;
pub mod trace;

pub use config::{LoadConfig, ProtocolChoice, StopAfter, TlsOptions};
pub use engine::{LoadError, ProtocolFactory};
pub use error::ErrorKind;
pub use report::Report;
pub use stats::{IntervalSnapshot, Observer};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs the load described by `config`, reporting each second to `observer`.
pub fn run(config: &LoadConfig, observer: &mut dyn Observer) -> Result<Report, LoadError> {
    run_until(config, observer, Arc::new(AtomicBool::new(false)))
}

/// Like [`run`], but setting `stop` ends the run early (e.g. on Ctrl-C) with a full report.
pub fn run_until(
    config: &LoadConfig,
    observer: &mut dyn Observer,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    engine::builtin::run_builtin(config, observer, stop)
        .map_err(|e| e.given_insecure(config.tls.insecure).given_url(&config.url))
}
