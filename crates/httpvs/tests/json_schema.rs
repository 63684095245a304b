//! `--json` output validates against the published schemas in `docs/schema/` (draft 2020-12):
//! `httpvs load` on h1, h2c and h3 against the embedded server, with failures, 5xx answers,
//! GOAWAY churn, `--fail-on` and the open model so the optional fields appear; and a tiny
//! `httpvs compare`, whose file `--from` reads back and writes again, also once stripped of
//! the fields that files of older releases lack.

mod support;

use httpvs_testkit::schema::{assert_valid, errors, validator, COMPARE_RESULTS, LOAD_REPORT};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use support::scratch_dir;

fn httpvs(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Runs `httpvs load --json ARGS`, checks its report against the schema and returns it.
fn load_report(args: &[&str], expect_exit: i32) -> Value {
    let mut all = vec!["load", "--json"];
    all.extend_from_slice(args);
    let out = httpvs(Path::new("."), &all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(expect_exit), "{args:?}: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stderr}"));
    assert_valid(LOAD_REPORT, &report, &format!("httpvs load {args:?}"));
    report
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn load_reports_on_h1_h2c_and_h3_validate() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let http = format!("http://{}/", server.http_addr().unwrap());
    let h3 = format!("https://127.0.0.1:{}/", server.h3_addr().unwrap().port());

    let r = load_report(
        &[
            &format!("{http}?size=100"),
            "-n",
            "200",
            "-c",
            "2",
            "-t",
            "1",
            "--fail-on",
            "p99>10s,error-rate>50%",
        ],
        0,
    );
    assert_eq!(r["protocol"]["negotiated"], "h1");
    assert_eq!(count(&r["requests"]["succeeded"]), 200);
    assert_eq!(r["thresholds"].as_array().unwrap().len(), 2);

    let log = std::env::temp_dir().join(format!("httpvs-schema-{}.tsv", std::process::id()));
    let hgrm = log.with_extension("hgrm");
    let r = load_report(
        &[
            &http,
            "-p",
            "h2c",
            "-c",
            "2",
            "-m",
            "4",
            "-t",
            "1",
            "-n",
            "300",
            "--log-file",
            log.to_str().unwrap(),
            "--hgrm",
            hgrm.to_str().unwrap(),
        ],
        0,
    );
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&hgrm);
    assert_eq!(count(&r["request_log"]["rows"]), 300);
    assert_eq!(count(&r["latency_spectrum"]["count"]), 300);
    assert_eq!(r["protocol"]["negotiated"], "h2c");
    assert!(count(&r["phases"]["settings"]["count"]) > 0, "{r}");
    assert!(r["wire"]["header_savings"].is_number(), "{r}");

    // --0rtt on keep-alive connections sends nothing early, and the QUIC section says why.
    let r = load_report(
        &[
            &h3, "-p", "h3", "-k", "-c", "1", "-m", "4", "-t", "1", "-n", "200", "--0rtt",
        ],
        0,
    );
    assert_eq!(r["protocol"]["negotiated"], "h3");
    assert!(count(&r["quic"]["datagrams_received"]) > 0, "{r}");
    assert!(r["quic"]["note"].is_string(), "{r}");

    // The open model adds the uncorrected latency, the schedule's lag and a per-second series.
    let r = load_report(
        &[&http, "--rate", "100", "-z", "1s", "-c", "2", "-t", "1"],
        0,
    );
    assert_eq!(r["shape"]["model"], "open");
    assert!(r["latency_uncorrected"].is_object(), "{r}");
    assert!(r["schedule"].is_object(), "{r}");
    assert!(!r["series"].as_array().unwrap().is_empty(), "{r}");
}

#[test]
fn load_reports_with_failures_validate() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let addr = server.http_addr().unwrap();
    let h3_port = server.h3_addr().unwrap().port();

    // h1: a fifth of the answers take 2 s against a 100 ms timeout, a third are 503s; the
    // broken rule sets exit 1 and is reported.
    let r = load_report(
        &[
            &format!("http://{addr}/?status=503:30&delay=1ms:80,2s:20"),
            "-n",
            "60",
            "-c",
            "4",
            "-t",
            "1",
            "--timeout",
            "100ms",
            "--fail-on",
            "error-rate>0%",
        ],
        1,
    );
    assert!(count(&r["requests"]["failed"]) > 0, "{r}");
    let kinds: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"request_timeout"), "{kinds:?}");
    assert!(r["status_codes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["code"] == 503));
    assert_eq!(r["thresholds"][0]["breached"], true);

    // h2c: GOAWAY after one answer in ten churns connections and retries the requests above it.
    let r = load_report(
        &[
            &format!("http://{addr}/?close=1:10"),
            "-p",
            "h2c",
            "-c",
            "1",
            "-m",
            "4",
            "-t",
            "1",
            "-n",
            "200",
        ],
        0,
    );
    assert!(
        count(&r["connections"]["closed_by_server"]["goaway"]) > 0,
        "{r}"
    );
    assert!(r["connections"]["diagnosis"].is_string(), "{r}");

    // h3: 500s and churn over QUIC.
    let r = load_report(
        &[
            &format!("https://127.0.0.1:{h3_port}/?status=500:50&close=1:10"),
            "-p",
            "h3",
            "-k",
            "-c",
            "1",
            "-m",
            "2",
            "-t",
            "1",
            "-n",
            "100",
        ],
        0,
    );
    assert!(r["status_codes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["code"] == 500));
    assert!(count(&r["connections"]["opened"]) > 1, "{r}");
}

/// Every protocol kind the embedded server speaks, a 5xx share, a clean and a lossy link (the
/// lossy one is skipped, and says so in `setup`, where netem cannot run): a few seconds.
const TINY_PLAN: &str = r#"
name = "schema"
protocols = ["h1", "h2c", "h3"]
duration = "300ms"
warmup = "100ms"
repeats = 1
[shapes]
h1 = "2"
h2c = "1x2"
h3 = "1x2"
[[payloads]]
name = "small"
path = "/?status=503:20"
size = "100"
[[conditions]]
name = "clean"
[[conditions]]
name = "lossy"
netem = "delay 5ms loss 2%"
"#;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn compare_results_validate_and_read_back() {
    let dir = scratch_dir("compare-schema");
    std::fs::write(dir.join("tiny.toml"), TINY_PLAN).unwrap();
    let args = [
        "compare",
        "--quick",
        "--plan",
        "tiny.toml",
        "--json",
        "r.json",
        "--no-html",
    ];
    let out = httpvs(&dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results = read_json(&dir.join("r.json"));
    assert_valid(COMPARE_RESULTS, &results, "httpvs compare --json");
    let cells = results["cells"].as_array().unwrap();
    assert!(cells.len() >= 3, "{results}");
    assert!(!results["verdicts"].as_array().unwrap().is_empty());
    let non_2xx = &cells[0]["runs"][0]["summary"]["non_2xx"];
    assert!(non_2xx["503"].as_u64().is_some(), "{non_2xx}");

    // --from reads the file and writes it again, still valid.
    let out = httpvs(
        &dir,
        &[
            "compare",
            "--from",
            "r.json",
            "--json",
            "again.json",
            "--no-html",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_valid(
        COMPARE_RESULTS,
        &read_json(&dir.join("again.json")),
        "--from",
    );

    // A file without the fields the schema calls optional (those older releases did not
    // write) is valid, and --from still reads it.
    let old = strip_optional(results);
    assert_valid(COMPARE_RESULTS, &old, "a file without optional fields");
    std::fs::write(dir.join("old.json"), old.to_string()).unwrap();
    let out = httpvs(&dir, &["compare", "--from", "old.json", "--no-html"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("verdict clean"));
}

/// Drops every field the compare schema (and the load schema, in each report) lists as optional.
fn strip_optional(mut v: Value) -> Value {
    let remove = |o: &mut Value, keys: &[&str]| {
        for k in keys {
            o.as_object_mut().unwrap().remove(*k);
        }
    };
    remove(&mut v, &["interrupted", "verdicts"]);
    remove(&mut v["setup"], &["cells_planned", "dropped"]);
    for cell in v["cells"].as_array_mut().unwrap() {
        remove(cell, &["failure"]);
        for run in cell["runs"].as_array_mut().unwrap() {
            remove(run, &["link"]);
            remove(
                &mut run["summary"],
                &[
                    "started",
                    "cut_off",
                    "warmup_cut_off",
                    "errors",
                    "non_2xx",
                    "streams_capped",
                    "latency_cdf",
                    "per_second",
                    "per_second_at",
                ],
            );
            let report = &mut run["report"];
            remove(report, &["interrupted", "network", "thresholds"]);
            remove(&mut report["requests"], &["from_warmup"]);
            remove(&mut report["phases"], &["settings"]);
            remove(&mut report["connections"], &["probes"]);
        }
    }
    v
}

#[test]
fn the_schemas_reject_what_httpvs_does_not_write() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let good = load_report(&[&url, "-n", "20", "-c", "1"], 0);
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut r = good.clone();
        f(&mut r);
        errors(LOAD_REPORT, &r)
    };
    assert!(!broken(&|r| r["schema_version"] = 2.into()).is_empty());
    assert!(!broken(&|r| r["requests"]["surprise"] = 1.into()).is_empty());
    assert!(!broken(&|r| r["latency"]["p50_us"] = 1.into()).is_empty());
    assert!(!broken(&|r| r["wire"]["sent"] = (-1).into()).is_empty());
    assert!(!broken(&|r| r["protocol"]["negotiated"] = "h4".into()).is_empty());
    assert!(!broken(&|r| {
        r.as_object_mut().unwrap().remove("connections");
    })
    .is_empty());
}

/// Every property of both schemas says what it is (and its unit): the schemas are the docs.
#[test]
fn every_schema_property_is_described() {
    fn walk(node: &Value, path: &str, missing: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for (name, prop) in props {
                        if prop.get("description").and_then(Value::as_str).is_none() {
                            missing.push(format!("{path}.{name}"));
                        }
                    }
                }
                for (key, child) in map {
                    walk(child, &format!("{path}/{key}"), missing);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, path, missing)),
            _ => {}
        }
    }
    for file in [LOAD_REPORT, COMPARE_RESULTS] {
        validator(file);
        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(httpvs_testkit::schema::path(file)).unwrap(),
        )
        .unwrap();
        let mut missing = Vec::new();
        walk(&schema, "", &mut missing);
        assert!(missing.is_empty(), "{file}: no description: {missing:?}");
    }
}
