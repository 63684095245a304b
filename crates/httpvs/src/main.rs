//! The `httpvs` binary: parses flags once, hands validated configs to the libraries, maps errors to one line and an exit code.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    restore_sigpipe();
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(err) => return cli::usage_error(err),
    };
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("httpvs: {}", cli::one_line(&err));
            ExitCode::from(cli::exit_code(&err))
        }
    }
}

/// A closed stdout pipe (`httpvs ... | head`) ends the process quietly, as for any Unix filter.
fn restore_sigpipe() {
    // SAFETY: setting a signal disposition to SIG_DFL at start, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
