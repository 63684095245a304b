//! Test support: finds real peers (curl, nginx, caddy, h2load, h2spec) and skips or fails clearly without them, and checks `--json` output against `docs/schema/`.

pub mod caddy;
pub mod nginx;
pub mod schema;

use std::path::PathBuf;

/// Whether a missing peer must fail the test run (set by `scripts/test` when `CI=true`).
pub fn peers_required() -> bool {
    std::env::var_os("HTTPVS_REQUIRE_PEERS").is_some_and(|v| v != "0")
}

/// Finds `name` on PATH. Without it: in CI the test panics; elsewhere it prints
/// "skipped: NAME not installed" and returns `None` so the test can return early.
pub fn require_peer(name: &str) -> Option<PathBuf> {
    if let Some(path) = which(name) {
        return Some(path);
    }
    if peers_required() {
        panic!("{name} is not installed, and CI requires every peer (run scripts/install-peers)");
    }
    eprintln!("skipped: {name} not installed");
    None
}

/// Finds an executable on PATH (and in ~/go/bin, where `go install` puts h2spec).
pub fn which(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// Whether this process runs as root, which the netem tests need (TUN devices, namespaces).
/// Without it: in CI the test panics; elsewhere it prints "skipped: netem tests need root".
pub fn require_root() -> bool {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if peers_required() {
        panic!("netem tests need root, and CI requires them (run scripts/test as root)");
    }
    eprintln!("skipped: netem tests need root");
    false
}
