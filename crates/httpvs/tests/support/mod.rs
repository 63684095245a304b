//! Set-up shared by the binary's end-to-end tests.
// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// An empty directory `name` under cargo's per-test temp dir, emptied first if an earlier run
/// left it, so a test's files (plans, reports, CA) are its own and kept for a look afterwards.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Starts `httpvs serve ARGS` and reads its banner through the last line it prints for these
/// listeners (the certificate line when TLS is on, else the first address). Returns the
/// server, the rest of its stdout, and the banner.
pub fn spawn_serve(args: &[&str]) -> (Child, BufReader<ChildStdout>, String) {
    let off = |flag: &str| args.windows(2).any(|w| w[0] == flag && w[1] == "off");
    let tls = !off("--https") || !off("--h3");
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("httpvs serve starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let last = if tls { "cert" } else { "://" };
    let mut banner = String::new();
    while !banner.contains(last) {
        if stdout.read_line(&mut banner).expect("banner") == 0 {
            break;
        }
    }
    (child, stdout, banner)
}
