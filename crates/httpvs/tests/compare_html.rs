//! The HTML report opened in headless Chromium (network off): charts render, no console errors, a screenshot.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::scratch_dir;

const PLAN: &str = r#"
name = "html"
protocols = ["h1", "h1-close", "h1-tls", "h2c", "h2", "h3"]
duration = "300ms"
warmup = "100ms"
repeats = 2
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
[[payloads]]
name = "large"
size = "16k"
[[conditions]]
name = "clean"
"#;

fn chromium(dir: &Path, args: &[&str]) -> Output {
    let browser = httpvs_testkit::which("chromium").expect("checked by require_peer");
    let profile = dir.join(format!("profile-{}", args.len()));
    let _ = std::fs::remove_dir_all(&profile);
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn html_report_renders_offline_in_chromium() {
    if httpvs_testkit::require_peer("chromium").is_none() {
        return;
    }
    let dir = scratch_dir("compare-html");
    std::fs::write(dir.join("plan.toml"), PLAN).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["compare", "--plan", "plan.toml", "--html", "report.html"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = dir.join("report.html");
    let url = format!("file://{}", report.display());

    let dom = chromium(&dir, &["--dump-dom", &url]);
    let html = String::from_utf8_lossy(&dom.stdout);
    let logs = String::from_utf8_lossy(&dom.stderr);
    let charts = html.matches("<svg").count();
    assert!(charts >= 4, "charts in the DOM: {charts}\n{logs}");
    assert!(
        html.contains("<rect") && html.contains("<path d=\"M"),
        "bars and lines drawn"
    );
    assert!(
        html.contains("verdict clean/small:"),
        "tables and verdicts are in the page"
    );
    for line in logs.lines() {
        assert!(!line.contains(":CONSOLE("), "console message: {line}");
        assert!(
            !line.contains("Failed to load resource"),
            "network fetch: {line}"
        );
    }

    let shot = dir.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let arg = format!("--screenshot={}", shot.display());
    let out = chromium(&dir, &[&arg, "--window-size=1100,2400", &url]);
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "screenshot {}: {} bytes\n{}",
        shot.display(),
        size,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("screenshot: {}", shot.display());
}
