//! The `httpvs` binary: parses flags once, hands validated configs to the libraries, maps errors to one line and an exit code.

/// `eprintln!` that never panics: a closed stderr (`2>&1 | head -1`) must not end a run
/// before its results are written; a line it cannot print is dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see [`say!`]).
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(err) => return cli::usage_error(err),
    };
    if args.wants_emulated_link() {
        // Without root this forks into a user namespace; it must happen before any thread exists.
        httpvs_netem::rootless::enter();
    }
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            say!("httpvs: {}", cli::one_line(&err));
            ExitCode::from(cli::exit_code(&err))
        }
    }
}

/// A closed stdout pipe (`httpvs ... | head`) ends the process quietly with success, as for any
/// Unix filter; any other failure to print (a full disk) ends it with one line and exit 1.
/// SIGPIPE itself stays ignored (Rust's default): resetting it would let a peer that closes its
/// socket kill the server or the load generator, where a write error is the right outcome.
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = message.strip_prefix("failed printing to stdout: ") {
            if why.contains("Broken pipe") {
                std::process::exit(0);
            }
            // Any other failure (a full disk) is one line, not a panic and its backtrace.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("httpvs: cannot write to stdout: {why}\n").as_bytes(),
            );
            std::process::exit(1);
        }
        default_hook(info);
    }));
}
