//! Set-up shared by the binary's end-to-end tests.

use std::path::{Path, PathBuf};

/// An empty directory `name` under cargo's per-test temp dir, emptied first if an earlier run
/// left it, so a test's files (plans, reports, CA) are its own and kept for a look afterwards.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
