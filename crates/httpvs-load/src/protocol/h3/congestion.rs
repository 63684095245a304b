//! Which congestion controller QUIC runs: by default the family this host's TCP runs, so h3 is
//! compared with h1/h2 under the same algorithm, not quinn's Cubic against the kernel's BBR.
//!
//! Why it decides results: under random loss a loss-based controller (Cubic, NewReno) holds a
//! window of about 1.2/sqrt(loss) packets (Mathis et al.), a few packets at 5% loss, over TCP and
//! QUIC alike, while BBR paces at the measured bandwidth. With the kernel on BBR and quinn on its
//! default Cubic, h3 looked 20-50x slower than h2 at 5% loss; that measured the controllers, not
//! the protocols (the README's HTTP/3 section has the figures). The server side (`httpvs-server`'s h3
//! module) makes the same choice.

use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use std::sync::Arc;

/// Where Linux names the default TCP congestion controller of the caller's network namespace.
const KERNEL_TCP_CC: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

/// A congestion controller quinn offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CongestionControl {
    /// CUBIC (RFC 9438): quinn's default and most kernels' TCP default.
    Cubic,
    /// NewReno (RFC 9002 §7), the kernel's `reno`.
    NewReno,
    /// quinn's BBR (a BBRv1 port, marked experimental by quinn), the kernel's `bbr`.
    Bbr,
}

impl CongestionControl {
    /// The controller matching this host's default TCP congestion control, Cubic when it
    /// cannot be read or quinn has no counterpart.
    pub fn like_kernel_tcp() -> Self {
        std::fs::read_to_string(KERNEL_TCP_CC)
            .map(|name| Self::from_kernel_name(&name))
            .unwrap_or(CongestionControl::Cubic)
    }

    /// The quinn controller for a kernel TCP congestion control name (`bbr`, `cubic`, `reno`...).
    pub fn from_kernel_name(name: &str) -> Self {
        match name.trim() {
            n if n.starts_with("bbr") => CongestionControl::Bbr,
            "reno" => CongestionControl::NewReno,
            _ => CongestionControl::Cubic,
        }
    }

    /// The kernel's name for this controller.
    pub fn name(self) -> &'static str {
        match self {
            CongestionControl::Cubic => "cubic",
            CongestionControl::NewReno => "reno",
            CongestionControl::Bbr => "bbr",
        }
    }

    /// quinn's factory for this controller, with quinn's default parameters.
    pub fn factory(self) -> Arc<dyn ControllerFactory + Send + Sync> {
        match self {
            CongestionControl::Cubic => Arc::new(CubicConfig::default()),
            CongestionControl::NewReno => Arc::new(NewRenoConfig::default()),
            CongestionControl::Bbr => Arc::new(BbrConfig::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CongestionControl;

    #[test]
    fn kernel_names_map_to_their_quinn_family() {
        assert_eq!(
            CongestionControl::from_kernel_name("bbr\n"),
            CongestionControl::Bbr
        );
        assert_eq!(
            CongestionControl::from_kernel_name("cubic\n"),
            CongestionControl::Cubic
        );
        assert_eq!(
            CongestionControl::from_kernel_name("reno"),
            CongestionControl::NewReno
        );
        // No quinn counterpart: the common default.
        assert_eq!(
            CongestionControl::from_kernel_name("dctcp"),
            CongestionControl::Cubic
        );
        assert_eq!(CongestionControl::Bbr.name(), "bbr");
    }
}
