//! `httpvs compare` under a severe-loss condition: the h3 cell completes and its loss counters are non-zero.

mod support;

use std::process::Command;
use support::scratch_dir;

const PLAN: &str = r#"
name = "severe"
protocols = ["h1", "h3"]
duration = "2s"
warmup = "1500ms"
repeats = 1
[shapes]
h1 = "4"
h3 = "2x4"
[[payloads]]
name = "small"
size = "1k"
[[conditions]]
name = "severe"
# Heavy loss on the way back and some on the way out (the client's QUIC stack counts only the
# packets it sent as lost); handshakes get through within the warm-up even when a first flight
# is lost (QUIC's first retransmission timer is about a second).
up = "delay 5ms loss 10%"
down = "delay 5ms loss 25%"
"#;

#[test]
fn severe_loss_h3_completes_with_loss_counted() {
    if let Some(why) = httpvs_compare::network::emulator_unavailable() {
        if httpvs_testkit::peers_required() {
            panic!("CI runs as root with /dev/net/tun, but: {why}");
        }
        eprintln!("skipped: {why}");
        return;
    }
    let dir = scratch_dir("compare-severe");
    std::fs::write(dir.join("plan.toml"), PLAN).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args([
            "compare",
            "--plan",
            "plan.toml",
            "--json",
            "r.json",
            "--no-html",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("verdict severe: "), "{stdout}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let h3 = json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["variant"] == "h3")
        .expect("an h3 cell");
    assert!(h3["failure"].is_null(), "{h3}");
    let run = &h3["runs"][0];
    assert!(run["summary"]["succeeded"].as_u64().unwrap() > 0, "{run}");
    let quic_lost = run["report"]["quic"]["packets_lost"].as_u64().unwrap_or(0);
    let link_lost = run["summary"]["link_packets_lost"].as_u64().unwrap_or(0);
    assert!(link_lost > 0, "the link dropped packets: {}", run["link"]);
    assert!(
        quic_lost > 0,
        "QUIC declared packets lost: {}",
        run["report"]["quic"]
    );
}
