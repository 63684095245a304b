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

/// The tried shape to keep: from the fewest requests in flight up, a shape replaces the one
/// kept only when it beats it by more than 5%, so a near tie keeps the smaller shape. (The
/// candidates run in their grid's order, where 8x64 comes before 16x16: taken in that order,
/// 16x16 needed the margin against the larger 8x64.)
fn choose(tried: &[(Shape, f64)]) -> (Shape, f64) {
    let mut by_size = tried.to_vec();
    // Stable: shapes of equal in-flight keep the grid's order.
    by_size.sort_by_key(|(s, _)| u64::from(s.connections) * u64::from(s.streams));
    let mut best = by_size[0];
    for &(shape, rps) in &by_size[1..] {
        if rps > best.1 * 1.05 {
            best = (shape, rps);
        }
    }
    best
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
            let row = cell.row();
            // Ordered and kept by what ran (`Shape::ran`): with a limit of 8, 8x64 (ran 8x8)
            // counted as larger than 16x16 (ran 16x8), and the tuned 16x16 then ran as 16x8.
            tried.push((shape.ran(row.streams_capped), row.rps.median));
        }
        let best = choose(&tried);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A near tie keeps the shape with fewer requests in flight, whatever order the grid tried
    /// them in: 16x16 (256) within 5% of 8x64 (512) is kept.
    /// Under a server's stream limit the trials are the shapes that ran, and so is the choice.
    #[test]
    fn trials_are_the_shapes_the_stream_limit_let_run() {
        let s = |connections, streams| Shape {
            connections,
            streams,
        };
        assert_eq!(s(8, 64).ran(Some(8)), s(8, 8));
        assert_eq!(s(16, 16).ran(None), s(16, 16));
        // 16x8 (128 in flight) within 5% of 8x8 (64): the smaller is kept.
        let tried = [
            (s(8, 64).ran(Some(8)), 200.0),
            (s(16, 16).ran(Some(8)), 205.0),
        ];
        assert_eq!(choose(&tried).0, s(8, 8));
    }

    #[test]
    fn a_near_tie_keeps_the_smaller_shape() {
        let s = |connections, streams| Shape {
            connections,
            streams,
        };
        let tried = [
            (s(1, 128), 100.0),
            (s(4, 32), 150.0),
            (s(8, 64), 200.0),
            (s(16, 16), 195.0),
        ];
        assert_eq!(choose(&tried).0, s(16, 16));
        // More than 5% ahead, the larger one is chosen.
        let tried = [(s(16, 16), 180.0), (s(8, 64), 200.0)];
        assert_eq!(choose(&tried).0, s(8, 64));
        // Equal in flight: the grid's first, unless beaten by more than 5%.
        let tried = [(s(1, 128), 100.0), (s(4, 32), 104.0)];
        assert_eq!(choose(&tried).0, s(1, 128));
    }
}
