//! How each worker gets its own protocol instance (h3 needs one QUIC endpoint per thread).

use super::setup::LoadError;
use crate::protocol::{Protocol, ProtocolKind, Target};

/// Makes one [`Protocol`] per worker thread, inside that thread's runtime.
pub trait ProtocolFactory: Send + Sync + 'static {
    /// The protocol made.
    type Protocol: Protocol;
    /// Which protocol this is, for the report.
    fn kind(&self) -> ProtocolKind;
    /// A new instance for the calling thread (inside its runtime).
    fn make(&self, target: &Target) -> Result<Self::Protocol, LoadError>;
}
