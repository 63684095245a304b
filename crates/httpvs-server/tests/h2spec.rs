//! h2spec (every case of RFC 7540/7541 conformance) against the h2c port and the TLS port, on
//! both HTTP/2 engines (the h2 crate and the owned frame layer).

mod support;

use httpvs_server::{H2Engine, Limits};
use std::process::Command;

/// Cases the server may fail, each with the reason in the README's serve section. None today.
const ALLOWED_FAILURES: &[&str] = &[];

fn run_h2spec(port: u16, tls: bool, engine: H2Engine) {
    let Some(h2spec) = httpvs_testkit::require_peer("h2spec") else {
        return;
    };
    let mut cmd = Command::new(h2spec);
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-o", "5", "-j"]);
    let name = format!("h2spec-{}-{engine:?}", if tls { "tls" } else { "h2c" });
    let junit = support::temp_dir(&name).join("report.xml");
    cmd.arg(&junit);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    let out = cmd.output().expect("h2spec runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains("tests,"))
        .unwrap_or("no summary")
        .to_owned();
    let failures = failed_cases(&std::fs::read_to_string(&junit).unwrap_or_default());
    let unexpected: Vec<&String> = failures
        .iter()
        .filter(|f| !ALLOWED_FAILURES.iter().any(|a| f.contains(a)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{name} ({summary}) failed: {unexpected:#?}\n{}",
        text.lines()
            .skip_while(|l| !l.starts_with("Failures:"))
            .take(80)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        summary.contains(" 0 failed") || !failures.is_empty(),
        "{summary}"
    );
    eprintln!("{name}: {summary}");
}

/// Names of failed test cases from h2spec's JUnit report.
fn failed_cases(junit: &str) -> Vec<String> {
    let mut failed = Vec::new();
    let mut current = String::new();
    for line in junit.lines() {
        let line = line.trim();
        if line.starts_with("<testcase") {
            current = line
                .split("name=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("")
                .to_owned();
            let suite = line
                .split("classname=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("");
            current = format!("{suite} / {current}");
        }
        if line.starts_with("<failure") || line.starts_with("<error") {
            failed.push(current.clone());
        }
    }
    failed
}

#[test]
fn h2spec_passes_on_the_h2c_port() {
    let server = support::server_on(Limits::default(), H2Engine::Hyper);
    run_h2spec(server.http_addr().unwrap().port(), false, H2Engine::Hyper);
}

#[test]
fn h2spec_passes_on_the_tls_port() {
    let server = support::server_on(Limits::default(), H2Engine::Hyper);
    run_h2spec(server.https_addr().unwrap().port(), true, H2Engine::Hyper);
}

#[test]
fn h2spec_passes_on_the_h2c_port_with_the_owned_engine() {
    let server = support::server_on(Limits::default(), H2Engine::Owned);
    run_h2spec(server.http_addr().unwrap().port(), false, H2Engine::Owned);
}

#[test]
fn h2spec_passes_on_the_tls_port_with_the_owned_engine() {
    let server = support::server_on(Limits::default(), H2Engine::Owned);
    run_h2spec(server.https_addr().unwrap().port(), true, H2Engine::Owned);
}
