//! `httpvs load`: flags, validation into the library config, and the run.

use std::process::ExitCode;

/// Flags of `httpvs load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Arguments (not built yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// Runs `httpvs load`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_built("load")
}
