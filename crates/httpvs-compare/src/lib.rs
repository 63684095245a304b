//! The protocol matrix: composes serve, load and netem into side-by-side comparisons with verdicts.
//!
//! [`plan`] says what to run; [`session::run`] starts the target, probes, tunes and runs the
//! matrix through [`runner`] (the [`load_driver`] calls `httpvs_load::run` per repeat); the
//! [`results`] are folded into rows and [`verdict`]s and shown by [`render`] as text and HTML.

pub mod cpu;
mod from_report;
pub mod load_driver;
pub mod machine;
pub mod measurement;
pub mod network;
pub mod options;
pub mod plan;
pub mod probe;
pub mod render;
pub mod results;
pub mod runner;
pub mod session;
pub mod tune;
pub mod variant;
pub mod verdict;

pub use plan::{Plan, PlanError};
pub use results::Results;
pub use session::{CompareConfig, CompareError};
pub use variant::Variant;
