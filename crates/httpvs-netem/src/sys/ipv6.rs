//! IPv6 on the link's devices: quiet (no autoconfiguration traffic in the counters), with
//! unique local addresses set by the link.

use super::ifconfig::write_sysctl;

/// Before the device comes up: no link-local address (so no router solicitations or MLD
/// reports, which need one), no duplicate address detection, no router advertisements taken.
pub fn quiet(device: &str) {
    for (knob, value) in [
        ("addr_gen_mode", "1"),
        ("accept_dad", "0"),
        ("router_solicitations", "0"),
        ("accept_ra", "0"),
        ("disable_ipv6", "0"),
    ] {
        // A kernel without IPv6 has none of these; the link is then IPv4 only.
        let _ = write_sysctl(&format!("net/ipv6/conf/{device}/{knob}"), value);
    }
}
