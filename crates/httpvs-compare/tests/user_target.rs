//! Comparing a user's server: compare probes which protocols it speaks, runs those, and lists
//! the others as skipped with why. The "user's server" here is the real reference server with
//! some listeners turned off.

use httpvs_compare::options::Pinning;
use httpvs_compare::runner::Silent;
use httpvs_compare::session::{self, CompareConfig};
use httpvs_compare::{Plan, Variant};
use httpvs_server::ServeConfig;

const PLAN: &str = r#"
protocols = ["h1", "h1-close", "h1-tls", "h2c", "h2", "h3"]
duration = "200ms"
warmup = "100ms"
repeats = 1
[shapes]
h1 = "2"
h1-close = "2"
h1-tls = "2"
h2c = "1x4"
h2 = "1x4"
h3 = "1x4"
[[payloads]]
name = "small"
[[conditions]]
name = "clean"
"#;

fn config(url: String, insecure: bool) -> CompareConfig {
    CompareConfig {
        plan: Plan::parse(PLAN, "test plan").unwrap(),
        target: Some(url),
        custom_plan: false,
        pinning: Pinning::default(),
        tune: false,
        insecure,
        cacert: None,
        client_identity: None,
        connect_to: None,
    }
}

#[test]
fn cleartext_url_runs_h1_and_h2c_and_says_why_tls_is_skipped() {
    let mut serve = ServeConfig::loopback_ephemeral();
    serve.https = None;
    serve.h3 = None;
    let server = httpvs_server::start(serve).unwrap();
    let url = format!("http://{}/?size=10", server.http_addr().unwrap());
    let results = session::run(&config(url, false), &mut Silent).unwrap();
    let ran: Vec<Variant> = results.cells.iter().map(|c| c.variant).collect();
    assert_eq!(ran, [Variant::H1, Variant::H1Close, Variant::H2c]);
    assert!(results
        .cells
        .iter()
        .all(|c| c.runs[0].summary.succeeded > 0));
    let skipped: Vec<&str> = results
        .setup
        .skipped_protocols
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(skipped, ["h1-tls", "h2", "h3"]);
    assert!(results.setup.skipped_protocols[0]
        .reason
        .contains("give an https:// URL"));
    assert_eq!(results.plan.payloads[0].path, "/?size=10");
    server.shutdown(std::time::Duration::from_secs(1));
}

/// A plan of one's own against a URL: a payload at `/` asks for the URL's path and query, and
/// the embedded server's `size` is not sent. They went to `/?size=100`, the URL's path lost.
#[test]
fn a_custom_plan_against_a_url_keeps_its_path_and_sends_no_size() {
    let mut serve = ServeConfig::loopback_ephemeral();
    serve.https = None;
    serve.h3 = None;
    let server = httpvs_server::start(serve).unwrap();
    let url = format!("http://{}/?size=10", server.http_addr().unwrap());
    let mut config = config(url, false);
    config.custom_plan = true;
    config.plan.protocols = vec![Variant::H1];
    config.plan.payloads[0].size = "100".parse().ok();
    let results = session::run(&config, &mut Silent).unwrap();
    assert_eq!(results.plan.payloads[0].path, "/?size=10");
    assert_eq!(results.plan.payloads[0].size, None);
    let run = &results.cells[0].runs[0];
    assert!(run.summary.succeeded > 0);
    let asked = run.report["target"]["url"].as_str().unwrap_or("");
    assert!(asked.ends_with("/?size=10"), "{asked}");
    server.shutdown(std::time::Duration::from_secs(1));
}

#[test]
fn tls_url_without_quic_skips_h3_after_a_trial() {
    let mut serve = ServeConfig::loopback_ephemeral();
    serve.h3 = None;
    let server = httpvs_server::start(serve).unwrap();
    let url = format!("https://{}/", server.https_addr().unwrap());
    let results = session::run(&config(url, true), &mut Silent).unwrap();
    let ran: Vec<Variant> = results.cells.iter().map(|c| c.variant).collect();
    assert_eq!(ran, [Variant::H1Tls, Variant::H2]);
    let h3 = results
        .setup
        .skipped_protocols
        .iter()
        .find(|s| s.name == "h3")
        .expect("h3 skipped");
    assert!(
        !h3.reason.contains("give an"),
        "h3 was tried: {}",
        h3.reason
    );
    server.shutdown(std::time::Duration::from_secs(1));
}

/// A server that accepts and never answers: the probe's line says what it waited for, without
/// load's `--connect-timeout`, which compare does not have.
#[test]
fn a_silent_server_s_probe_line_names_no_flag_compare_lacks() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url: http::Uri = format!("http://{}/", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let endpoints = httpvs_compare::probe::endpoints(&url, Default::default(), None);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ran, skipped) = httpvs_compare::probe::probe(&endpoints, "/", &[Variant::H2c], &stop);
    assert!(ran.is_empty());
    let reason = &skipped[0].reason;
    assert!(reason.contains("not ready within 3s"), "{reason}");
    assert!(!reason.contains("--connect-timeout"), "{reason}");
    drop(listener);
}
