//! `httpvs compare` end to end: a quick tiny matrix on the embedded server, bad plans, `--from`.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::scratch_dir;

/// Every protocol, a tiny shape, a clean and a lossy link: a few seconds of bounded load.
const TINY_PLAN: &str = r#"
name = "tiny"
protocols = ["h1", "h1-close", "h1-tls", "h2c", "h2", "h3"]
duration = "500ms"
warmup = "100ms"
repeats = 1
[shapes]
h1 = "4"
h1-close = "2"
h1-tls = "4"
h2c = "2x4"
h2 = "2x4"
h3 = "2x4"
[[payloads]]
name = "small"
size = "100"
[[conditions]]
name = "clean"
[[conditions]]
name = "lossy"
netem = "delay 5ms loss 2%"
"#;

/// The clean link only, one repeat of 400 ms after a 100 ms warm-up: a few seconds at most.
const ONE_SHORT_CLEAN_RUN: [&str; 8] = [
    "--conditions",
    "clean",
    "--repeats",
    "1",
    "--duration",
    "400ms",
    "--warmup",
    "100ms",
];

fn httpvs(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn quick_tiny_matrix_has_every_protocol_a_verdict_and_every_cell_in_json() {
    let dir = scratch_dir("compare-quick");
    std::fs::write(dir.join("tiny.toml"), TINY_PLAN).unwrap();
    let out = httpvs(
        &dir,
        &[
            "compare",
            "--quick",
            "--plan",
            "tiny.toml",
            "--json",
            "r.json",
            "--html",
            "r.html",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let clean = stdout
        .split("\n== ")
        .find(|t| t.starts_with("clean"))
        .unwrap_or_else(|| panic!("no clean table:\n{stdout}"));
    for proto in ["h1", "h1-close", "h1-tls", "h2c", "h2", "h3"] {
        let row = clean
            .lines()
            .find(|l| l.split_whitespace().next() == Some(proto))
            .unwrap_or_else(|| panic!("no {proto} row:\n{clean}"));
        assert!(!row.contains("did not run"), "{row}");
    }
    assert!(stdout.contains("verdict clean: "), "{stdout}");
    assert!(stdout.trim_end().ends_with("report: r.html"), "{stdout}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let ran = 2 - json["setup"]["skipped_conditions"]
        .as_array()
        .unwrap()
        .len();
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6 * ran);
    for cell in cells {
        let runs = cell["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{cell}");
        assert_eq!(
            runs[0]["report"]["schema_version"], 1,
            "full load report kept"
        );
        if cell["condition"] == "clean" {
            assert!(
                runs[0]["summary"]["succeeded"].as_u64().unwrap() > 0,
                "{cell}"
            );
        }
    }
    assert_eq!(json["plan"]["name"], "tiny");
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);

    let again = httpvs(
        &dir,
        &["compare", "--from", "r.json", "--html", "again.html"],
    );
    assert!(again.status.success(), "{}", text(&again.stderr));
    let table = |s: &str| {
        let s = s.split("\n\nJSON:").next().unwrap_or("");
        s.split("\n\nreport:").next().unwrap_or("").to_string()
    };
    assert_eq!(
        table(&text(&again.stdout)),
        table(&stdout),
        "--from re-renders the same tables"
    );
    assert!(dir.join("again.html").is_file());

    // The results file is what --from reads: no output may be written over it.
    for args in [
        &["compare", "--from", "r.json", "--html", "r.json"][..],
        &[
            "compare",
            "--from",
            "r.json",
            "--json",
            "./r.json",
            "--no-html",
        ][..],
    ] {
        let out = httpvs(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains("is the --from file"),
            "{}",
            text(&out.stderr)
        );
    }
    let kept = std::fs::read_to_string(dir.join("r.json")).unwrap();
    assert!(kept.starts_with('{'), "r.json was overwritten");

    // --print-plan with --from prints the plan the file was measured with.
    let plan = httpvs(&dir, &["compare", "--from", "r.json", "--print-plan"]);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(
        text(&plan.stdout).contains("name = \"tiny\""),
        "{}",
        text(&plan.stdout)
    );

    // A damaged results file says where it is damaged (it said only "invalid type: null,
    // expected f64").
    let at = kept.find("\"p50_ms\": ").unwrap() + "\"p50_ms\": ".len();
    let end = at + kept[at..].find([',', '\n']).unwrap();
    let damaged = format!("{}null{}", &kept[..at], &kept[end..]);
    std::fs::write(dir.join("damaged.json"), damaged).unwrap();
    let out = httpvs(&dir, &["compare", "--from", "damaged.json", "--no-html"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let line = text(&out.stderr);
    assert!(line.contains("damaged.json: invalid type: null"), "{line}");
    assert!(line.contains(" at line "), "{line}");

    // `--json -`: stdout is the JSON alone, the table goes to stderr.
    let piped = httpvs(
        &dir,
        &["compare", "--from", "r.json", "--json", "-", "--no-html"],
    );
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    let json: serde_json::Value = serde_json::from_slice(&piped.stdout).expect("JSON on stdout");
    assert_eq!(json["plan"]["name"], "tiny");
    assert!(text(&piped.stderr).contains("verdict clean: "));
    assert!(!dir.join("-").exists(), "a file named - was written");
    // `--html -` likewise: the report on stdout, no file named `-`.
    let piped = httpvs(&dir, &["compare", "--from", "r.json", "--html", "-"]);
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    assert!(
        text(&piped.stdout).starts_with("<!DOCTYPE html>"),
        "{}",
        text(&piped.stdout)
    );
    assert!(text(&piped.stderr).contains("verdict clean: "));
    assert!(!dir.join("-").exists(), "a file named - was written");
}

#[test]
fn bad_plan_gets_one_line_naming_the_field() {
    let dir = scratch_dir("compare-bad-plan");
    let bad = TINY_PLAN.replace("h2c = \"2x4\"", "h2c = \"2y4\"");
    std::fs::write(dir.join("bad.toml"), bad).unwrap();
    let out = httpvs(&dir, &["compare", "--plan", "bad.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("httpvs: bad.toml:"), "{stderr}");
    assert!(
        stderr.contains("shapes.h2c: '2y4' is not a shape"),
        "{stderr}"
    );

    let typo = TINY_PLAN.replace("repeats = 1", "repeets = 1");
    std::fs::write(dir.join("typo.toml"), typo).unwrap();
    let out = httpvs(&dir, &["compare", "--plan", "typo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("repeets"), "{stderr}");

    // load's --net "UP | DOWN" in a plan: the line, and the keys a plan uses instead.
    let piped = TINY_PLAN.replace("delay 5ms loss 2%", "delay 5ms | delay 10ms");
    std::fs::write(dir.join("piped.toml"), piped).unwrap();
    let out = httpvs(&dir, &["compare", "--plan", "piped.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("httpvs: piped.toml:21: conditions[1].netem: `|` splits \"UP | DOWN\""),
        "{stderr}"
    );
    assert!(stderr.contains("up = \"...\""), "{stderr}");

    let out = httpvs(&dir, &["compare", "--plan", "missing.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.toml: cannot read this --plan"));
    // A load report is named as one (it read "missing field `plan`").
    std::fs::write(
        dir.join("load.json"),
        r#"{"schema_version": 1, "tool": "httpvs 0.1.0", "requests": {}}"#,
    )
    .unwrap();
    let out = httpvs(&dir, &["compare", "--from", "load.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("load.json: a report of httpvs load --json, not results"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_flags_get_one_line() {
    let dir = scratch_dir("compare-bad-flags");
    std::fs::write(dir.join("tiny-not-pem.toml"), "name = \"x\"\n").unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    // A symlink to a file not written yet.
    let _ = std::os::unix::fs::symlink("a.json", dir.join("b.json"));
    for (args, words) in [
        (
            vec!["compare", "--shape", "h2c=8y60"],
            "--shape: '8y60' is not a shape",
        ),
        (
            vec!["compare", "--protocols", "h1,spdy"],
            "--protocols: 'spdy' is not a protocol",
        ),
        // Tuning replaces the shape given: it ran at the tuned one, unsaid.
        (
            vec!["compare", "--tune", "--shape", "h1=8"],
            "--tune picks each protocol's shape itself, so --shape would be dropped",
        ),
        (
            vec!["compare", "--conditions", "mars"],
            "--conditions: 'mars' is not a condition",
        ),
        // Found once the flags are applied: named by the flag, not as "flags: protocols".
        (
            vec!["compare", "--protocols", "h1,h1"],
            "httpvs: --protocols: 'h1' is listed twice",
        ),
        (
            vec!["compare", "--conditions", "clean,wan,clean"],
            "httpvs: --conditions: 'clean' is listed twice",
        ),
        // No protocol listed can run on the URL's scheme: said before any probe (exit 1).
        (
            vec!["compare", "https://127.0.0.1:1/", "--protocols", "h1"],
            "--protocols h1: needs an http:// URL; for https://127.0.0.1:1/ choose among h1-tls",
        ),
        // A baseline the URL rules out, as a protocol list (it ran, with a note on stderr).
        (
            vec!["compare", "http://127.0.0.1:1/", "--baseline", "h2"],
            "--baseline h2: needs an https:// URL; for http://127.0.0.1:1/ choose among h1,",
        ),
        (
            vec!["compare", "--from", "nothing.json"],
            "cannot read --from nothing.json",
        ),
        // h2load's -D, with compare's spelling (it named load's -z, which compare lacks).
        (
            vec!["compare", "-D", "5s"],
            "unexpected argument '-D' found: h2load's -D is --duration here",
        ),
        // --print-plan checks the flags a run would (it printed and exited 0).
        (
            vec!["compare", "--print-plan", "--server-cpus", "4095"],
            "--server-cpus: CPU 4095",
        ),
        (
            vec!["compare", "--json", "-", "--html", "-"],
            "--json - and --html - both name stdout",
        ),
        // A re-rendered file keeps its ratios: a flag that would change them is refused.
        (
            vec!["compare", "--from", "r.json", "--baseline", "h2c"],
            "'--from <FILE>' cannot be used with '--baseline <PROTOCOL>'",
        ),
        // Before any probe: no "answered none of the protocols".
        (
            vec![
                "compare",
                "--cacert",
                "/nonexistent",
                "https://127.0.0.1:1/",
            ],
            "--cacert /nonexistent: no such file",
        ),
        (
            vec!["compare", "--duration", "-1s"],
            "--duration: '-1s' is not a duration",
        ),
        (
            vec!["compare", "--warmup", "-1s"],
            "--warmup: '-1s' is not a duration",
        ),
        (vec!["compare", "--quick", "notaurl"], "invalid URL"),
        (
            vec!["compare", "--quick", "http://127.0.0.1:99999/"],
            "port \"99999\"",
        ),
        // Found before the matrix runs, not after it.
        (
            vec!["compare", "--quick", "--json", "/nonexistent/dir/r.json"],
            "--json: cannot write /nonexistent/dir/r.json",
        ),
        (
            vec!["compare", "--quick", "--html", "/nonexistent/dir/r.html"],
            "--html: cannot write /nonexistent/dir/r.html",
        ),
        (
            vec![
                "compare",
                "--cacert",
                "tiny-not-pem.toml",
                "https://localhost:1/",
            ],
            "--cacert: no certificate found in CA file tiny-not-pem.toml",
        ),
        (
            vec!["compare", "--protocols", "h1", "--shape", "h2c=8x60"],
            "--shape h2c=...: h2c is not among the protocols that run (h1)",
        ),
        (
            vec!["compare", "--shape", "h2c=4x16,4x16"],
            "--shape: h2c=4x16 is listed twice",
        ),
        (
            vec!["compare", "--tune", "--conditions", "wan"],
            "--tune tries its shapes on the clean link, and this plan has none",
        ),
        (
            vec!["compare", "--server-cpus", "0", "http://127.0.0.1:1/"],
            "--server-cpus pins the embedded server",
        ),
        (
            vec!["compare", "--quick", "--json", "same", "--html", "./same"],
            "--json and --html both name ./same",
        ),
        // Neither exists yet: the paths are resolved as the writes would (the HTML report
        // overwrote the JSON).
        (
            vec![
                "compare",
                "--quick",
                "--json",
                "sub/../x.json",
                "--html",
                "x.json",
            ],
            "--json and --html both name x.json",
        ),
        (
            vec!["compare", "--quick", "--json", "a.json", "--html", "b.json"],
            "--json and --html both name b.json",
        ),
    ] {
        let out = httpvs(&dir, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(words), "{stderr}");
    }
}

/// With a URL the server is the user's: the client is not pinned unless asked (it used to be
/// pinned to half the CPUs, as if the embedded server held the other half).
#[test]
fn a_url_run_leaves_the_client_unpinned_unless_asked() {
    let dir = scratch_dir("compare-url-pinning");
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let base = [
        &["compare", "--protocols", "h1"][..],
        &ONE_SHORT_CLEAN_RUN,
        &["--json", "-", "--no-html"],
    ]
    .concat();
    for (extra, pinning) in [
        (&[][..], "client not pinned"),
        (&["--client-cpus", "0"][..], "client pinned to CPU 0"),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.push(&url);
        let out = httpvs(&dir, &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(json["setup"]["pinning"], pinning, "{extra:?}");
        // The plan's sentence says what ran against the URL, not the embedded server's plan.
        let description = json["plan"]["description"].as_str().unwrap_or("");
        assert_eq!(
            description,
            format!("h1 (what {url} answered); its own response; on clean.")
        );
    }
}

/// With other flags, --print-plan prints the plan they make (what would run), and it reads back.
#[test]
fn print_plan_follows_the_other_flags() {
    let dir = scratch_dir("compare-print-plan-narrowed");
    let args = [
        "compare",
        "--print-plan",
        "--quick",
        "--protocols",
        "h2c,h3",
    ];
    let out = httpvs(&dir, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("protocols = [\"h2c\", \"h3\"]"), "{plan}");
    assert!(plan.contains("repeats = 1"), "{plan}");
    // The reports' subtitle says what runs, not what the default plan would have.
    assert!(
        plan.contains(
            "description = \"h2c, h3; small responses; on clean, wan, lossy, severe (--quick"
        ),
        "{plan}"
    );
    // --repeats overrides --quick's one repeat, and the sentence says so.
    let out = httpvs(
        &dir,
        &["compare", "--print-plan", "--quick", "--repeats", "3"],
    );
    assert!(
        text(&out.stdout).contains("(--quick: 3 short repeats each)"),
        "{}",
        text(&out.stdout)
    );
    // With --duration the repeats are not short; `severe` runs only the small payload.
    let out = httpvs(
        &dir,
        &[
            "compare",
            "--print-plan",
            "--quick",
            "--duration",
            "5s",
            "--conditions",
            "severe",
        ],
    );
    let plan = text(&out.stdout);
    assert!(
        plan.contains("small responses; on severe (--quick: one repeat each)"),
        "{plan}"
    );
    let out = httpvs(&dir, &["compare", "--print-plan", "--conditions", "severe"]);
    let plan = text(&out.stdout);
    assert!(plan.contains("; small responses; on severe."), "{plan}");
    // A plan file without a name is named by its file, not left blank in the reports' title.
    std::fs::write(
        dir.join("unnamed-plan.toml"),
        TINY_PLAN.replace("name = \"tiny\"\n", ""),
    )
    .unwrap();
    let out = httpvs(
        &dir,
        &["compare", "--plan", "unnamed-plan.toml", "--print-plan"],
    );
    assert!(
        text(&out.stdout).starts_with("name = \"unnamed-plan\""),
        "{}",
        text(&out.stdout)
    );
    // h1 is not chosen: the ratios go to h1-tls when it is.
    let args = ["compare", "--print-plan", "--protocols", "h2,h1-tls"];
    let out = httpvs(&dir, &args);
    assert!(
        text(&out.stdout).contains("baseline = \"h1-tls\""),
        "{}",
        text(&out.stdout)
    );
    std::fs::write(dir.join("narrowed.toml"), &plan).unwrap();
    let out = httpvs(
        &dir,
        &["compare", "--plan", "narrowed.toml", "--print-plan"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), plan);
}

/// With a URL, --print-plan prints the plan aimed at it (what would run after the probe): the
/// built-in payloads become one request for the URL itself, without the embedded server's
/// `size=`, and a custom plan's payload at `/` takes the URL's path. Nothing is sent.
#[test]
fn print_plan_with_a_url_prints_the_plan_aimed_at_it() {
    let dir = scratch_dir("compare-print-plan-url");
    // Port 9 (discard) on loopback: nothing listens, and nothing is sent.
    let url = "http://127.0.0.1:9/api/items?page=2";
    let out = httpvs(&dir, &["compare", url, "--print-plan"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("path = \"/api/items?page=2\""), "{plan}");
    assert!(!plan.contains("size ="), "{plan}");
    assert!(plan.contains("compare probes it first"), "{plan}");
    assert!(
        plan.contains("that http://127.0.0.1:9/api/items?page=2 answers"),
        "{plan}"
    );
    std::fs::write(dir.join("url.toml"), &plan).unwrap();
    let out = httpvs(&dir, &["compare", "--plan", "url.toml", "--print-plan"]);
    assert!(
        out.status.success(),
        "the printed plan parses: {}",
        text(&out.stderr)
    );
    std::fs::write(dir.join("tiny.toml"), TINY_PLAN).unwrap();
    let out = httpvs(
        &dir,
        &["compare", url, "--plan", "tiny.toml", "--print-plan"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("path = \"/api/items?page=2\""), "{plan}");
    assert!(!plan.contains("size ="), "{plan}");
}

/// `--connect-to` sends a URL's connections to another address, as load's does: a name the
/// machine cannot resolve is measured at the server's address (the SNI hint for h3 names it).
#[test]
fn connect_to_sends_the_urls_connections_elsewhere() {
    let dir = scratch_dir("compare-connect-to");
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let addr = server.http_addr().unwrap().to_string();
    let out = httpvs(
        &dir,
        &[
            &[
                "compare",
                "http://unresolvable.test/",
                "--connect-to",
                &addr,
                "--protocols",
                "h1",
            ][..],
            &ONE_SHORT_CLEAN_RUN,
            &["--no-html", "--json", "-"],
        ]
        .concat(),
    );
    // Exit 1 is a matrix with no verdict: a busy machine can leave the one row too thin to
    // rank (fewer than 3 completions per connection), which is not what this test is about.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let succeeded = &json["cells"][0]["runs"][0]["report"]["requests"]["succeeded"];
    assert!(
        succeeded.as_u64().is_some_and(|n| n > 0),
        "{}",
        json["cells"]
    );
    // Only with a URL.
    let out = httpvs(&dir, &["compare", "--connect-to", &addr, "--print-plan"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A matrix that measured nothing worth a verdict exits 1 after its tables and files: every
/// response an error page (a wrong path, a failing server) ranks no row.
#[test]
fn no_table_with_a_verdict_exits_1() {
    let dir = scratch_dir("compare-no-verdict");
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/?status=500", server.http_addr().unwrap());
    let out = httpvs(
        &dir,
        &[
            &["compare", &url, "--protocols", "h1,h2c"][..],
            &ONE_SHORT_CLEAN_RUN,
            &["--json", "r.json", "--no-html"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no table has a verdict"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("verdict clean: no verdict"),
        "{}",
        text(&out.stdout)
    );
    assert!(dir.join("r.json").exists(), "the results are still written");
}

/// The default plan's small and large payloads differ only by the embedded server's `size=`:
/// against your URL both ask for the same thing, and compare says so before it runs.
#[test]
fn payloads_that_send_the_same_request_to_a_url_are_warned_about() {
    let dir = scratch_dir("compare-same-payloads");
    std::fs::write(
        dir.join("default.toml"),
        include_str!("../../../plans/default.toml"),
    )
    .unwrap();
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(
        &dir,
        &[
            "compare",
            &url,
            "--plan",
            "default.toml",
            "--protocols",
            "h1",
            "--conditions",
            "clean",
            "--repeats",
            "1",
            "--duration",
            "100ms",
            "--warmup",
            "50ms",
            "--no-html",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("httpvs: warning: payloads small, large send the same request to"),
        "{stderr}"
    );
}

#[test]
fn print_plan_prints_the_default_matrix() {
    let dir = scratch_dir("compare-print-plan");
    let out = httpvs(&dir, &["compare", "--print-plan"]);
    assert!(out.status.success());
    let plan = text(&out.stdout);
    assert!(
        plan.contains("protocols = [\"h1\", \"h1-close\", \"h1-tls\", \"h2c\", \"h2\", \"h3\"]")
    );
    std::fs::write(dir.join("default.toml"), &plan).unwrap();
    let out = httpvs(
        &dir,
        &["compare", "--plan", "default.toml", "--protocols", "nope"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "the printed plan parses; only the flag is wrong"
    );
}

/// Overlapping --server-cpus and --client-cpus run (contention may be the point), with a
/// one-line warning, and the report's pinning line says what they share.
#[test]
fn overlapping_pinning_is_warned_about_and_reported() {
    let dir = scratch_dir("compare-overlap");
    let one_cell =
        "name = \"one\"\nprotocols = [\"h1\"]\nduration = \"100ms\"\nwarmup = \"50ms\"\n\
                    repeats = 1\n[shapes]\nh1 = \"1\"\n[[payloads]]\nname = \"small\"\n\
                    [[conditions]]\nname = \"clean\"\n";
    std::fs::write(dir.join("one.toml"), one_cell).unwrap();
    let out = httpvs(
        &dir,
        &[
            "compare",
            "--plan",
            "one.toml",
            "--server-cpus",
            "0",
            "--client-cpus",
            "0",
            "--no-html",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("httpvs: warning: "))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("--server-cpus and --client-cpus share CPU 0"),
        "{stderr}"
    );
    let first = stdout.lines().next().unwrap_or("");
    assert!(
        first.ends_with("server pinned to CPU 0, client to CPU 0 (sharing CPU 0)"),
        "{stdout}"
    );
}

/// Ctrl-C while compare probes a URL (here a port that accepts and never answers) ends it at
/// once with 130 and one line; it waited out every protocol's trial (about 22 s), then
/// exited 1 saying the server answered none.
#[test]
fn ctrl_c_while_probing_a_url_ends_at_once() {
    let dir = scratch_dir("compare-probe-interrupt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["compare", &url, "--no-html"])
        .args(ONE_SHORT_CLEAN_RUN)
        .current_dir(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let signalled = std::time::Instant::now();
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("httpvs: interrupted before the run started (while probing"),
        "{stderr}"
    );
    // The trial under way ends with the stop, not after every trial's 5 s (a bound far from
    // either, not a speed figure).
    assert!(took < std::time::Duration::from_secs(15), "{took:?}");
    drop(listener);
}

/// `--print-plan` reads a plan from a pipe as a run does: once (it read it twice, and the
/// second read of `--plan <(cmd)` found nothing); its times read back as they were.
#[test]
fn print_plan_reads_a_piped_plan_once_and_prints_times_that_read_back() {
    use std::io::Write as _;
    let dir = scratch_dir("compare-print-piped");
    let plan = TINY_PLAN.replace("warmup = \"100ms\"", "warmup = \"1500us\"");
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["compare", "--plan", "/dev/stdin", "--print-plan"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.contains("warmup = \"1500us\""), "{printed}");
    std::fs::write(dir.join("again.toml"), &printed).unwrap();
    let again = httpvs(&dir, &["compare", "--plan", "again.toml", "--print-plan"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), printed);
}

/// A plan whose largest cell needs more open files than the process may have is one line and
/// exit 2 before anything runs: under `ulimit -n 64` the default plan ran, its h1 cells opened
/// 23 of 64 connections, h1-close failed every request as `io`, and the verdicts blamed
/// handshakes lost on the link.
#[test]
fn a_plan_beyond_the_open_file_limit_is_refused_up_front() {
    let dir = scratch_dir("compare-fd-limit");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 200 && exec {} compare --no-html",
            env!("CARGO_BIN_EXE_httpvs")
        ))
        .current_dir(&dir)
        .output()
        .expect("sh runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "httpvs: the plan's largest cell opens 64 connections (and the embedded server as many): \
         about 256 open files, and this process may open 200 (ulimit -n): raise the limit or \
         give smaller shapes (--shape or --plan)"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// Aimed at a server off this host's loopback, the emulated conditions are skipped, and with
/// none left the one line says why: it read "every one needs the emulator" where the emulator
/// was there, and "is elsewhere" of this host's own address.
#[test]
fn a_server_off_loopback_runs_no_emulated_condition_and_says_why() {
    // This host's address on its default route, if it has one (no packet is sent).
    let Some(ip) = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").and_then(|()| s.local_addr()))
        .ok()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
    else {
        return;
    };
    let config = httpvs_server::ServeConfig {
        http: Some(std::net::SocketAddr::new(ip, 0)),
        https: None,
        h3: None,
        ..httpvs_server::ServeConfig::loopback_ephemeral()
    };
    let server = httpvs_server::start(config).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let dir = scratch_dir("compare-off-loopback");
    let out = httpvs(
        &dir,
        &[
            "compare",
            &url,
            "--protocols",
            "h1",
            "--conditions",
            "wan",
            "--no-html",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("no network condition can run against {ip}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("and {ip} is not on it")),
        "{stderr}"
    );
}
