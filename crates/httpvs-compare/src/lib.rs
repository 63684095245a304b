//! The protocol matrix: composes serve, load and netem into side-by-side comparisons with verdicts.

pub mod cpu;
pub mod machine;
pub mod measurement;
pub mod plan;
pub mod render;
pub mod results;
pub mod runner;
pub mod variant;
pub mod verdict;

pub use plan::{Plan, PlanError};
pub use results::Results;
pub use variant::Variant;
