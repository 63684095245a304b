//! `httpvs load --hgrm`: the latency's percentile spectrum in HdrHistogram's text form, as
//! wrk2's `--latency` prints it, agreeing with the report it came with.

use std::process::{Command, Output};

fn httpvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("load")
        .args(args)
        .output()
        .expect("httpvs runs")
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("httpvs-hgrm-{}-{name}", std::process::id()))
}

/// One tick: value (ms), quantile, samples at or below.
fn ticks(text: &str) -> Vec<(f64, f64, u64)> {
    text.lines()
        .skip(2) // the column names and a blank line
        .take_while(|l| !l.starts_with("#["))
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(c.len(), 4, "{l:?}");
            (
                c[0].parse().unwrap(),
                c[1].parse().unwrap(),
                c[2].parse().unwrap(),
            )
        })
        .collect()
}

/// Half the requests take 200 ms at the server and half answer at once: the spectrum's 50%
/// tick is a fast one and every tick above it a slow one, its count is the report's, and its
/// values climb to the report's max.
#[test]
fn the_spectrum_splits_where_the_latency_does_and_agrees_with_the_report() {
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let base = format!("http://{}", server.http_addr().unwrap());
    for proto in ["h1", "h2c"] {
        let hgrm = temp(&format!("{proto}.hgrm"));
        let json = temp(&format!("{proto}.json"));
        let out = httpvs(&[
            &format!("{base}/"),
            &format!("{base}/?delay=200ms"),
            "-p",
            proto,
            "-c",
            "2",
            "-t",
            "1",
            "-n",
            "20",
            "--hgrm",
            hgrm.to_str().unwrap(),
            "-o",
            json.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let text = std::fs::read_to_string(&hgrm).unwrap();
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let _ = std::fs::remove_file(&hgrm);
        let _ = std::fs::remove_file(&json);
        assert_eq!(report["requests"]["succeeded"], 20, "{report}");

        let t = ticks(&text);
        assert_eq!(t.last().unwrap().1, 1.0, "{text}");
        assert_eq!(t.last().unwrap().2, 20, "{text}");
        assert!(
            t.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1),
            "{text}"
        );
        let half = t.iter().position(|x| x.1 == 0.5).unwrap();
        assert_eq!(t[half].2, 10, "{text}");
        assert!(t[half].0 < 200.0, "{text}");
        assert!(t[half + 1..].iter().all(|x| x.0 >= 200.0), "{text}");
        let max_ms = report["latency"]["max_us"].as_f64().unwrap() / 1000.0;
        assert!((t.last().unwrap().0 - max_ms).abs() < 0.001, "{text}");
        assert!(text.ends_with("SubBuckets     =         2048]\n"), "{text}");
        assert!(text.contains("Total count    =           20]"), "{text}");
        // The JSON carries the same ticks in µs.
        let rows = report["latency_spectrum"]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), t.len(), "{report}");
    }
}

/// `--hgrm -` prints the spectrum after the text report; it cannot share stdout with the JSON
/// report, nor a file with -o or --log-file.
#[test]
fn hgrm_to_stdout_follows_the_report_and_refuses_to_mix_with_json() {
    let mut config = httpvs_server::ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = httpvs_server::start(config).unwrap();
    let url = format!("http://{}/", server.http_addr().unwrap());
    let out = httpvs(&[&url, "-c", "1", "-n", "5", "--hgrm", "-"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report_end = stdout.find("Connections").unwrap();
    let spectrum = stdout.find("Value   ").unwrap();
    assert!(report_end < spectrum, "{stdout}");
    assert!(
        stdout.contains("Total count    =            5]"),
        "{stdout}"
    );

    let out = httpvs(&[&url, "-n", "5", "--json", "--hgrm", "-"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--hgrm -: stdout carries the JSON report"),
        "{err}"
    );

    let same = temp("same");
    let out = httpvs(&[
        &url,
        "-n",
        "5",
        "-o",
        same.to_str().unwrap(),
        "--hgrm",
        same.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--hgrm and -o both name"),
        "{out:?}"
    );
    assert!(!same.exists());
}
