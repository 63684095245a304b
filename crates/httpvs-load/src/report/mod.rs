//! How to show: the report model and its renderings (text, JSON, live line, thresholds).
//!
//! Every rendering reads [`Report`] (or, for the live line, an interval snapshot); none of
//! them touches the statistics themselves.

pub mod build;
pub mod diagnosis;
pub mod format;
pub mod hgrm;
pub mod model;
pub mod progress;
pub mod text;
pub mod thresholds;

pub use model::*;

/// The report as pretty JSON.
pub fn to_json(report: &Report) -> String {
    // Report holds only strings, numbers, options and vectors: serialization cannot fail.
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
