//! Which network conditions can run here: the emulator needs root and a TUN device.

use crate::plan::{Condition, Plan};
use crate::results::Skipped;

/// Whether the load generator can put its sockets behind an emulated link yet.
const EMULATOR_WIRED: bool = false;

/// Why the network emulator cannot run here, or None when it can.
pub fn emulator_unavailable() -> Option<String> {
    if !EMULATOR_WIRED {
        return Some("the network emulator is not wired into the load generator yet".into());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        return Some("the network emulator needs root (network namespaces and TUN devices)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("the network emulator needs /dev/net/tun, which this machine lacks".into());
    }
    None
}

/// The conditions to run and the ones skipped (with why): without the emulator, only clean ones.
pub fn usable_conditions(plan: &Plan) -> (Vec<&Condition>, Vec<Skipped>) {
    let unavailable = emulator_unavailable();
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    for c in &plan.conditions {
        match (&unavailable, c.is_clean()) {
            (Some(why), false) => skipped.push(Skipped {
                name: c.name.clone(),
                reason: why.clone(),
            }),
            _ => run.push(c),
        }
    }
    (run, skipped)
}
