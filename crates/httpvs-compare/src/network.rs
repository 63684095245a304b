//! Which network conditions can run here: the emulator needs root and a TUN device.

use crate::plan::{Condition, Plan};
use crate::results::Skipped;

/// Why the network emulator cannot run here (one line, with what would fix it), or None.
pub fn emulator_unavailable() -> Option<String> {
    httpvs_netem::preflight().err().map(|e| e.to_string())
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
