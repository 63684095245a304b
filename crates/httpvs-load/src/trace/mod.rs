//! `httpvs trace`: one connection, N requests at once, shown event by event (frames for h2,
//! messages for h1, streams and frame headers for h3), tapped from the load generator's own
//! protocol code, never a second implementation.
//!
//! Producers: `h1_stream` (plaintext tap), `h2_frames` (plaintext tap + the h2 frame tap +
//! HPACK), `h3_streams` (the h3 tap's observer). They record [`event::TraceEvent`]s into a
//! [`recorder::Recorder`]; `text` and `json` print them; `summary` adds the last line.

pub mod event;
pub mod failure;
pub mod h1_stream;
pub mod h2_frames;
pub mod h3_streams;
pub mod hpack;
pub mod json;
pub mod names;
pub mod recorder;
pub mod run;
pub mod summary;
pub mod text;
pub mod tls_version;

pub use run::{run, run_live, TraceConfig};

use crate::protocol::ProtocolKind;

/// A finished trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The protocol traced (after `-p auto`).
    pub protocol: ProtocolKind,
    /// Events in time order.
    pub events: Vec<event::TraceEvent>,
    /// The summary numbers.
    pub summary: summary::Summary,
    /// Why the trace failed (connection error, failed requests), as one line.
    pub failure: Option<String>,
    /// Ctrl-C stopped it: it shows what it saw until then.
    pub interrupted: bool,
    /// How many of `events`, from the first, were already printed as they came
    /// ([`run::run_live`]); the renderers print the rest.
    pub shown_live: usize,
}
