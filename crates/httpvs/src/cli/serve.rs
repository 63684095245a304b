//! `httpvs serve`: flags, validation into the library config, and the run.

use std::process::ExitCode;

/// Flags of `httpvs serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Arguments (not built yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// Runs `httpvs serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_built("serve")
}
