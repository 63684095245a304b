//! `--tune`: a short trial of a few shapes per protocol on the clean condition, keeping the fastest.

use crate::plan::{Plan, Shape, ShapeList};
use crate::results::TuneChoice;
use crate::runner::{run_cell, CellDriver, CellSpec};
use crate::variant::Variant;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The shapes tried for a protocol: connection counts for h1, connections x streams for h2/h3.
pub fn candidates(variant: Variant) -> Vec<Shape> {
    let grid: &[(u32, u32)] = if variant.multiplexed() {
        &[(1, 128), (4, 32), (8, 64), (16, 16)]
    } else {
        &[(16, 1), (64, 1), (256, 1)]
    };
    grid.iter()
        .map(|&(connections, streams)| Shape {
            connections,
            streams,
        })
        .collect()
}

/// Tries every candidate of every protocol once, sets the plan's shapes to the winners, and
/// returns what it chose. A winner must beat a smaller shape by more than 5% to be chosen.
/// `None` when `stop` was set: the trials were cut short and the plan is left as it was.
pub fn tune(
    plan: &mut Plan,
    variants: &[Variant],
    client_cpus: usize,
    driver: &mut dyn CellDriver,
    stop: &AtomicBool,
) -> Option<Vec<TuneChoice>> {
    let Some(condition) = plan.conditions.iter().find(|c| c.is_clean()).cloned() else {
        return Some(Vec::new());
    };
    let payload = plan.payloads[0].clone();
    let mut choices = Vec::new();
    for &variant in variants {
        let mut tried = Vec::new();
        for shape in candidates(variant) {
            let spec = CellSpec {
                condition: &condition,
                payload: &payload,
                variant,
                shape,
                warmup: Duration::from_millis(200),
                duration: plan.duration.0.min(Duration::from_millis(500)),
            };
            let cell = run_cell(&spec, 1, client_cpus, driver, stop)?;
            tried.push((shape, cell.row().rps.median));
        }
        let mut best = tried[0];
        for &(shape, rps) in &tried[1..] {
            if rps > best.1 * 1.05 {
                best = (shape, rps);
            }
        }
        choices.push(TuneChoice {
            variant,
            chosen: best.0,
            candidates: tried,
        });
    }
    for choice in &choices {
        plan.shapes
            .insert(choice.variant, ShapeList(vec![choice.chosen]));
    }
    Some(choices)
}
