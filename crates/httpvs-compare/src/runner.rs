//! Runs the matrix: every condition x payload x protocol x shape, each repeated, through a [`CellDriver`].
//!
//! The driver is the seam to the load generator (one repeat of one cell); the [`Progress`] sink
//! is how a live view learns what runs. The runner knows neither sockets nor terminals.

use crate::cpu;
use crate::plan::{Condition, Payload, Plan, Shape};
use crate::results::{CellResult, RunResult};
use crate::variant::Variant;
use std::time::Duration;

/// One repeat of one cell, as the driver is asked to run it.
#[derive(Debug, Clone, Copy)]
pub struct CellSpec<'a> {
    /// The network condition.
    pub condition: &'a Condition,
    /// The payload.
    pub payload: &'a Payload,
    /// The protocol.
    pub variant: Variant,
    /// The client shape.
    pub shape: Shape,
    /// Warm-up before the measured period.
    pub warmup: Duration,
    /// The measured period.
    pub duration: Duration,
}

/// Runs one repeat of one cell (the real one drives `httpvs_load::run`).
pub trait CellDriver {
    /// Runs it; an `Err` is one line saying why the cell cannot run at all.
    fn run(&mut self, spec: &CellSpec<'_>) -> Result<RunResult, String>;
}

/// Receives the matrix's progress (the CLI prints a line per cell).
pub trait Progress {
    /// A cell is about to run (`index` counts from 1 up to `total`).
    fn cell_started(&mut self, index: usize, total: usize, spec: &CellSpec<'_>);
    /// A cell finished (all its repeats).
    fn cell_finished(&mut self, cell: &CellResult);
    /// Something worth a line (set-up, skips, tuning).
    fn note(&mut self, line: &str);
}

/// A progress sink that ignores everything.
pub struct Silent;

impl Progress for Silent {
    fn cell_started(&mut self, _: usize, _: usize, _: &CellSpec<'_>) {}
    fn cell_finished(&mut self, _: &CellResult) {}
    fn note(&mut self, _: &str) {}
}

/// The cells a plan runs under `conditions` for `variants`, in table order.
pub fn cells<'a>(
    plan: &'a Plan,
    conditions: &[&'a Condition],
    variants: &[Variant],
) -> Vec<CellSpec<'a>> {
    let mut out = Vec::new();
    for condition in conditions {
        for payload in plan.payloads.iter().filter(|p| condition.runs(&p.name)) {
            for variant in variants {
                for shape in plan.shapes_for(*variant) {
                    out.push(CellSpec {
                        condition,
                        payload,
                        variant: *variant,
                        shape,
                        warmup: plan.warmup.0,
                        duration: plan.duration.0,
                    });
                }
            }
        }
    }
    out
}

/// Runs every cell `repeats` times, measuring the client's CPU use (over `client_cpus` CPUs)
/// around each repeat.
pub fn run_cells(
    specs: &[CellSpec<'_>],
    repeats: u32,
    client_cpus: usize,
    driver: &mut dyn CellDriver,
    progress: &mut dyn Progress,
) -> Vec<CellResult> {
    let mut results = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        progress.cell_started(i + 1, specs.len(), spec);
        let cell = run_cell(spec, repeats, client_cpus, driver);
        progress.cell_finished(&cell);
        results.push(cell);
    }
    results
}

/// Runs one cell's repeats; the first failure ends the cell with its reason.
pub fn run_cell(
    spec: &CellSpec<'_>,
    repeats: u32,
    client_cpus: usize,
    driver: &mut dyn CellDriver,
) -> CellResult {
    let mut cell = CellResult {
        condition: spec.condition.name.clone(),
        payload: spec.payload.name.clone(),
        variant: spec.variant,
        shape: spec.shape,
        runs: Vec::new(),
        failure: None,
    };
    for _ in 0..repeats {
        let cpu = cpu::ClientCpu::start();
        match driver.run(spec) {
            Ok(mut run) => {
                if run.summary.client_cpu.is_none() {
                    run.summary.client_cpu = cpu.finish(client_cpus);
                }
                cell.runs.push(run);
            }
            Err(reason) => {
                cell.failure = Some(reason);
                break;
            }
        }
    }
    cell
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measurement::Measurement;

    struct Counting(u32);

    impl CellDriver for Counting {
        fn run(&mut self, spec: &CellSpec<'_>) -> Result<RunResult, String> {
            self.0 += 1;
            if spec.variant == Variant::H3 {
                return Err("no UDP".into());
            }
            Ok(RunResult {
                summary: Measurement {
                    requests_per_sec: 100.0,
                    ..Measurement::default()
                },
                report: serde_json::Value::Null,
                link: None,
            })
        }
    }

    #[test]
    fn every_cell_runs_its_repeats_and_failures_stop_a_cell() {
        let plan = Plan::default_plan();
        let conditions: Vec<&Condition> = plan.conditions.iter().collect();
        let specs = cells(&plan, &conditions, &plan.protocols);
        // clean, wan, lossy: 2 payloads; severe: small only. Six protocols, one shape each.
        assert_eq!(specs.len(), (2 + 2 + 2 + 1) * 6);
        let mut driver = Counting(0);
        let out = run_cells(&specs, 3, 1, &mut driver, &mut Silent);
        let h3 = out.iter().filter(|c| c.variant == Variant::H3).count() as u32;
        assert_eq!(driver.0, (specs.len() as u32 - h3) * 3 + h3);
        assert!(out
            .iter()
            .all(|c| c.variant == Variant::H3 || c.runs.len() == 3));
    }
}
