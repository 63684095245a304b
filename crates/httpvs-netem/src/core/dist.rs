//! Jitter distributions as netem's tables: standard-shaped values scaled by 8192, indexed by a random draw.

use super::prng::{Correlated, Prng};
use crate::impairment::Distribution;
use std::sync::OnceLock;
use std::time::Duration;

/// netem's fixed-point scale of table values.
const DIST_SCALE: i64 = 8192;
/// Entries per table.
const TABLE_SIZE: usize = 4096;

/// A delay sample: `mu` ± `sigma` shaped by `dist`, as the kernel's `tabledist` (never below zero).
pub fn sample_delay(
    mu: Duration,
    sigma: Duration,
    dist: Distribution,
    correlated: &mut Correlated,
    prng: &mut Prng,
) -> Duration {
    let mu = mu.as_nanos() as i64;
    let sigma = sigma.as_nanos() as i64;
    if sigma == 0 {
        return Duration::from_nanos(mu.max(0) as u64);
    }
    let rnd = correlated.next(prng) as i64;
    let value = match dist {
        // Scaling instead of the kernel's `rnd % 2σ` keeps jitters above 2 s uniform too.
        Distribution::Uniform => ((rnd as i128 * 2 * sigma as i128) >> 32) as i64 + mu - sigma,
        _ => {
            let table = table(dist);
            let t = table[rnd as usize % table.len()] as i64;
            let mut x = (sigma % DIST_SCALE) * t;
            x += if x >= 0 {
                DIST_SCALE / 2
            } else {
                -DIST_SCALE / 2
            };
            x / DIST_SCALE + (sigma / DIST_SCALE) * t + mu
        }
    };
    Duration::from_nanos(value.max(0) as u64)
}

fn table(dist: Distribution) -> &'static [i16] {
    static NORMAL: OnceLock<Vec<i16>> = OnceLock::new();
    static PARETO: OnceLock<Vec<i16>> = OnceLock::new();
    static PARETO_NORMAL: OnceLock<Vec<i16>> = OnceLock::new();
    match dist {
        Distribution::Normal => NORMAL.get_or_init(|| scaled(&normal_quantiles())),
        Distribution::Pareto => PARETO.get_or_init(|| scaled(&pareto_quantiles())),
        Distribution::ParetoNormal => {
            PARETO_NORMAL.get_or_init(|| scaled(&pareto_normal_quantiles()))
        }
        Distribution::Uniform => &[],
    }
}

fn scaled(values: &[f64]) -> Vec<i16> {
    values
        .iter()
        .map(|v| (v * DIST_SCALE as f64).round().clamp(-32767.0, 32767.0) as i16)
        .collect()
}

fn grid(i: usize, n: usize) -> f64 {
    (i as f64 + 0.5) / n as f64
}

/// Standard normal quantiles at evenly spaced probabilities.
fn normal_quantiles() -> Vec<f64> {
    (0..TABLE_SIZE)
        .map(|i| inverse_normal(grid(i, TABLE_SIZE)))
        .collect()
}

/// iproute2's pareto table: shape 3, shifted to mean 0 and scaled by 4/3.
fn pareto_quantiles() -> Vec<f64> {
    (0..TABLE_SIZE)
        .map(|i| {
            let u = 1.0 - grid(i, TABLE_SIZE);
            (u.powf(-1.0 / 3.0) - 1.5) * 4.0 / 3.0
        })
        .collect()
}

/// iproute2's paretonormal table: at each probability, a quarter of the normal quantile plus
/// three quarters of the pareto one, both taken at that same probability (the two move
/// together: the tail is the pareto's, scaled by 3/4). Not the distribution of the sum of
/// independent draws, which has a lighter tail (its largest entry 9σ against about 15σ).
fn pareto_normal_quantiles() -> Vec<f64> {
    let normal = normal_quantiles();
    let pareto = pareto_quantiles();
    normal
        .iter()
        .zip(&pareto)
        .map(|(n, p)| 0.25 * n + 0.75 * p)
        .collect()
}

/// Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9).
fn inverse_normal(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_table_has_unit_spread() {
        let t = normal_quantiles();
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        let var = t.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / t.len() as f64;
        assert!(mean.abs() < 1e-6);
        assert!((var.sqrt() - 1.0).abs() < 0.01, "sd {}", var.sqrt());
        assert!((inverse_normal(0.975) - 1.959_964).abs() < 1e-5);
    }
}
