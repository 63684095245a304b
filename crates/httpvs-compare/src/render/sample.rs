//! Made-up results for renderer tests: two conditions, two payloads, every protocol, three repeats.

use crate::machine::MachineFacts;
use crate::measurement::Measurement;
use crate::plan::Plan;
use crate::results::{CellResult, Results, RunResult, Setup, RESULTS_SCHEMA_VERSION};

/// Results shaped like a real default run, with plausible figures.
pub fn results() -> Results {
    let plan = Plan::default_plan();
    let mut cells = Vec::new();
    for (ci, condition) in plan.conditions.iter().take(2).enumerate() {
        for payload in &plan.payloads {
            for (vi, variant) in plan.protocols.iter().enumerate() {
                let base = 10_000.0 * (1.0 + vi as f64 * 0.4) / (1.0 + ci as f64 * 3.0);
                let runs = (0..3)
                    .map(|r| RunResult {
                        summary: measurement(base * (0.97 + 0.03 * r as f64), vi),
                        report: serde_json::json!({"sample": true}),
                        link: None,
                    })
                    .collect();
                cells.push(CellResult {
                    condition: condition.name.clone(),
                    payload: payload.name.clone(),
                    variant: *variant,
                    shape: plan.shapes_for(*variant)[0],
                    runs,
                    failure: None,
                });
            }
        }
    }
    Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        plan,
        machine: MachineFacts::here(),
        setup: Setup {
            target: "embedded server".into(),
            pinning: "server on CPU 0, client on CPU 1".into(),
            server_cpus: vec![0],
            client_cpus: vec![1],
            ..Setup::default()
        },
        cells,
        interrupted: false,
    }
}

fn measurement(rps: f64, vi: usize) -> Measurement {
    let p50 = 64.0 / rps * 1000.0;
    Measurement {
        seconds: 3.0,
        requests_per_sec: rps,
        succeeded: (rps * 3.0) as u64,
        p50_ms: p50,
        p90_ms: p50 * 1.5,
        p99_ms: p50 * 3.0,
        wire_bytes_per_request: 150.0 + 40.0 * vi as f64,
        connections_opened: 64,
        client_cpu: Some(0.6),
        latency_cdf: (0..=20)
            .map(|i| (p50 * (0.5 + i as f64 * 0.15), i as f64 / 20.0))
            .collect(),
        per_second: vec![rps * 0.95, rps * 1.02, rps],
        ..Measurement::default()
    }
}
