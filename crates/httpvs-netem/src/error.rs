//! Errors of the netem library: why a link could not be set up, and what would fix it.

use std::io;

/// What went wrong starting or using an emulated link.
#[derive(Debug, thiserror::Error)]
pub enum NetemError {
    /// A netem string did not parse.
    #[error(transparent)]
    Parse(#[from] crate::impairment::ParseError),
    /// This machine or user cannot run the emulation; `fix` says what would.
    #[error("network emulation is not possible here: {why} ({fix})")]
    Unavailable {
        /// What is missing.
        why: String,
        /// What would make it work.
        fix: String,
    },
    /// A set-up step failed.
    #[error("network emulation set-up failed: {step}: {source}")]
    Setup {
        /// The step, e.g. "create the client's TUN device".
        step: &'static str,
        /// The system error.
        source: io::Error,
    },
    /// Running code or a command inside one of the link's namespaces failed.
    #[error("cannot run inside the emulated network: {0}")]
    Namespace(io::Error),
}

impl NetemError {
    /// A set-up error; lack of permission becomes `Unavailable` with a fix.
    pub(crate) fn setup(step: &'static str, source: io::Error) -> NetemError {
        if source.kind() == io::ErrorKind::PermissionDenied {
            let fix = if crate::rootless::is_inside() {
                "the rootless layout's user namespace was refused it (a security module may \
                 restrict user namespaces); run as root (sudo)"
            } else {
                "run as root, or in a container with CAP_NET_ADMIN and CAP_SYS_ADMIN (e.g. docker run --cap-add NET_ADMIN --cap-add SYS_ADMIN --device /dev/net/tun)"
            };
            return NetemError::Unavailable {
                why: format!("{step}: {source}"),
                fix: fix.into(),
            };
        }
        NetemError::Setup { step, source }
    }
}
