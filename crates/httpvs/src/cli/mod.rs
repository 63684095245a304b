//! Command-line surface: one clap parser per subcommand, each turned into a validated library config.

mod compare;
mod load;
mod netem;
mod serve;
mod trace;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Is HTTP/2 or HTTP/3 faster than HTTP/1.1 for this service, on this network, and why?
#[derive(Parser, Debug)]
#[command(name = "httpvs", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate load against a URL with HTTP/1.1, h2c, h2 or HTTP/3 and report what happened.
    Load(load::Args),
    /// Run the reference server (HTTP/1.1, h2c, h2 over TLS, HTTP/3).
    Serve(serve::Args),
    /// Run a command behind an emulated network link (delay, loss, rate...).
    Netem(netem::Args),
    /// Compare protocols side by side across concurrency, payload and network conditions.
    Compare(compare::Args),
    /// Show one connection's exchange frame by frame (h1, h2c, h2, h3), like nghttp -v.
    Trace(trace::Args),
}

/// An error whose exit code is not the default 1.
#[derive(Debug)]
pub struct ExitError {
    /// Process exit code.
    pub code: u8,
    /// One-line message.
    pub message: String,
}

impl std::fmt::Display for ExitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitError {}

/// A usage error: bad flag values, URLs and files exit 2, as clap's own errors do.
#[allow(dead_code)] // used by subcommands as they land
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(ExitError {
        code: 2,
        message: message.into(),
    })
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Load(args) => load::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Netem(args) => netem::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Trace(args) => trace::run(args),
    }
}

/// The exit code for an error: its own when it carries one, else 1.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<ExitError>())
        .map_or(1, |e| e.code)
}

/// An error and its causes on one line.
pub fn one_line(err: &anyhow::Error) -> String {
    format!("{err:#}").replace('\n', " ")
}

/// Prints a clap error as one line (help and version print in full) and returns its exit code.
pub fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(2)
        }
        _ => {
            let text = err.to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            let first = first.trim_start_matches("error: ");
            eprintln!("httpvs: {first} (see --help)");
            ExitCode::from(2)
        }
    }
}

/// The one line an unbuilt subcommand prints; it exits 2.
#[allow(dead_code)] // every subcommand is built now; kept for the next one
pub fn not_built(name: &str) -> anyhow::Result<ExitCode> {
    Err(anyhow::Error::new(ExitError {
        code: 2,
        message: format!("`httpvs {name}` is not built yet"),
    }))
}
