//! The protocol matrix: composes serve, load and netem into side-by-side comparisons with verdicts.

pub mod plan;
pub mod variant;

pub use plan::{Plan, PlanError};
pub use variant::Variant;
