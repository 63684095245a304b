//! Runs the matrix: every condition x payload x protocol x shape, each repeated, through a [`CellDriver`].
//!
//! The driver is the seam to the load generator (one repeat of one cell); the [`Progress`] sink
//! is how a live view learns what runs. The runner knows neither sockets nor terminals. A stop
//! flag (set by Ctrl-C) ends the matrix early: the cells that finished are kept, the one in
//! progress is dropped with its finished repeats, since a period cut short is not comparable.

use crate::cpu;
use crate::plan::{Condition, Payload, Plan, Shape};
use crate::results::{CellResult, RunResult};
use crate::variant::Variant;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// What the matrix ran.
#[derive(Debug, Default)]
pub struct MatrixRun {
    /// Every cell that finished all its repeats, in plan order.
    pub cells: Vec<CellResult>,
    /// The cell the stop flag cut short and dropped (`lossy / small / h3 4x32`), if any.
    pub dropped: Option<String>,
    /// Whether the stop flag ended the matrix before its last cell.
    pub interrupted: bool,
}

/// Runs every cell `repeats` times, measuring the client's CPU use (over `client_cpus` CPUs)
/// around each repeat, until `stop` is set.
pub fn run_cells(
    specs: &[CellSpec<'_>],
    repeats: u32,
    client_cpus: usize,
    driver: &mut dyn CellDriver,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> MatrixRun {
    let mut ran = MatrixRun {
        cells: Vec::with_capacity(specs.len()),
        ..MatrixRun::default()
    };
    for (i, spec) in specs.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            ran.interrupted = true;
            break;
        }
        progress.cell_started(i + 1, specs.len(), spec);
        match run_cell(spec, repeats, client_cpus, driver, stop) {
            Some(cell) => {
                progress.cell_finished(&cell);
                ran.cells.push(cell);
            }
            None => {
                progress.note("interrupted: this cell is dropped");
                ran.dropped = Some(spec.name());
                ran.interrupted = true;
                break;
            }
        }
    }
    ran
}

/// Runs one cell's repeats; the first failure ends the cell with its reason. `None` when
/// `stop` was set before every repeat finished: the cell is dropped, repeats and all.
pub fn run_cell(
    spec: &CellSpec<'_>,
    repeats: u32,
    client_cpus: usize,
    driver: &mut dyn CellDriver,
    stop: &AtomicBool,
) -> Option<CellResult> {
    let mut cell = CellResult {
        condition: spec.condition.name.clone(),
        payload: spec.payload.name.clone(),
        variant: spec.variant,
        shape: spec.shape,
        runs: Vec::new(),
        failure: None,
    };
    for _ in 0..repeats {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let cpu = cpu::ClientCpu::start();
        let ran = driver.run(spec);
        if stop.load(Ordering::Relaxed) {
            // The load run saw the stop too and ended early: its figures span a cut period.
            return None;
        }
        match ran {
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
    Some(cell)
}

impl CellSpec<'_> {
    /// `condition / payload / protocol shape`, as the progress lines name a cell.
    pub fn name(&self) -> String {
        format!(
            "{} / {} / {} {}",
            self.condition.name, self.payload.name, self.variant, self.shape
        )
    }
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
        let out = run_cells(
            &specs,
            3,
            1,
            &mut driver,
            &mut Silent,
            &AtomicBool::new(false),
        );
        assert!(!out.interrupted && out.dropped.is_none());
        let out = out.cells;
        let h3 = out.iter().filter(|c| c.variant == Variant::H3).count() as u32;
        assert_eq!(driver.0, (specs.len() as u32 - h3) * 3 + h3);
        assert!(out
            .iter()
            .all(|c| c.variant == Variant::H3 || c.runs.len() == 3));
    }

    /// Sets the stop flag during its `at`-th run, as Ctrl-C does mid-cell.
    struct StopsAt {
        calls: u32,
        at: u32,
        stop: std::sync::Arc<AtomicBool>,
    }

    impl CellDriver for StopsAt {
        fn run(&mut self, _: &CellSpec<'_>) -> Result<RunResult, String> {
            self.calls += 1;
            if self.calls == self.at {
                self.stop.store(true, Ordering::Relaxed);
            }
            Ok(RunResult {
                summary: Measurement::default(),
                report: serde_json::Value::Null,
                link: None,
            })
        }
    }

    #[test]
    fn a_stop_keeps_finished_cells_and_drops_the_one_in_progress() {
        let plan = Plan::default_plan();
        let conditions: Vec<&Condition> = plan.conditions.iter().collect();
        let specs = cells(&plan, &conditions, &plan.protocols);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        // Three repeats a cell: the 8th run is the third cell's second repeat.
        let mut driver = StopsAt {
            calls: 0,
            at: 8,
            stop: stop.clone(),
        };
        let out = run_cells(&specs, 3, 1, &mut driver, &mut Silent, &stop);
        assert!(out.interrupted);
        assert_eq!(out.cells.len(), 2, "two cells finished");
        assert!(out.cells.iter().all(|c| c.runs.len() == 3));
        assert_eq!(out.dropped, Some(specs[2].name()));
        assert_eq!(driver.calls, 8, "nothing ran after the stop");
    }
}
