//! Command-line surface: one clap parser per subcommand, each turned into a validated library config.

mod common;
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
    Load(Box<load::Args>),
    /// Run the reference server (HTTP/1.1, h2c, h2 over TLS, HTTP/3).
    Serve(serve::Args),
    /// Run a command behind an emulated network link (delay, loss, rate...).
    Netem(netem::Args),
    /// Compare protocols side by side across concurrency, payload and network conditions.
    Compare(compare::Args),
    /// Show one connection's exchange frame by frame (h1, h2c, h2, h3), like nghttp -v.
    Trace(trace::Args),
}

impl Cli {
    /// Whether the command builds an emulated network link: then, without root, `main` enters
    /// the rootless layout (a user namespace) before any thread starts.
    pub fn wants_emulated_link(&self) -> bool {
        match &self.command {
            Command::Load(args) => args.wants_emulated_link(),
            Command::Netem(args) => args.wants_emulated_link(),
            Command::Compare(args) => args.wants_emulated_link(),
            Command::Serve(_) | Command::Trace(_) => false,
        }
    }
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
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    exit_error(2, message)
}

/// An error that exits with `code`.
pub fn exit_error(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(ExitError {
        code,
        message: message.into(),
    })
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Load(args) => load::run(*args),
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
    // A cause its context already quotes is said once ("set up the TUN device: route ...:
    // Invalid argument: route ...: Invalid argument" said it twice).
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if parts.last().is_some_and(|outer| outer.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ").replace('\n', " ")
}

/// Prints a clap error as one line (help and version print in full) and returns its exit code.
pub fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp => printed(err.print()),
        // The binary's name and version, whichever subcommand asked (clap said `httpvs-load
        // 0.1.0` for `httpvs load --version`).
        ErrorKind::DisplayVersion => {
            use std::io::Write as _;
            let mut out = std::io::stdout();
            printed(
                writeln!(out, "httpvs {}", env!("CARGO_PKG_VERSION")).and_then(|()| out.flush()),
            )
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(2)
        }
        _ => {
            let text = err.to_string();
            let line = plain_value_reason(&clap_one_line(&text));
            // The subcommand as typed (clap's error does not say which one it was parsing).
            let subcommand = std::env::args_os().nth(1).unwrap_or_default();
            match (
                peer_flag_hint(&line, &subcommand.to_string_lossy()),
                clap_tip(&text),
            ) {
                (Some(hint), _) => say!("httpvs: {line}: {hint}"),
                (None, Some(tip)) => say!("httpvs: {line} ({tip}; see --help)"),
                (None, None) => say!("httpvs: {line} (see --help)"),
            }
            ExitCode::from(2)
        }
    }
}

/// Help or the version, printed: a closed pipe is the reader's choice, any other failure (a
/// full disk) one line and exit 1, as for every report.
fn printed(result: std::io::Result<()>) -> ExitCode {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            say!("httpvs: cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

/// For a flag of the peers (h2load, wrk2, oha, hey) that httpvs spells otherwise or leaves
/// out, what to use instead: users bring their commands with them. `load` takes their load
/// flags; `compare` only h2load's duration; elsewhere they have no twin.
fn peer_flag_hint(line: &str, subcommand: &str) -> Option<&'static str> {
    let flag = line
        .strip_prefix("unexpected argument '")?
        .split('\'')
        .next()?;
    let flag = flag.split('=').next().unwrap_or(flag);
    if subcommand == "compare" && flag == "-D" {
        return Some("h2load's -D is --duration here");
    }
    if subcommand == "trace" && matches!(flag, "-n" | "-c" | "--connections") {
        return Some(
            "trace shows one connection: -m N sends N requests on it at once (load's -n is a \
             total, -c its connections)",
        );
    }
    if subcommand != "load" {
        return None;
    }
    Some(match flag {
        "-T" | "--connection-active-timeout" | "-N" | "--connection-inactivity-timeout" => {
            "h2load's connection timeouts have no twin here: --timeout bounds each request, \
             --connect-timeout the connect and handshake"
        }
        "-R" => "wrk2's -R is --rate here (requests per second in total)",
        "-q" => {
            "oha's -q is --rate here (requests per second in total); hey's -q is per worker, \
             so hey's -q 10 -c 50 is --rate 500 -c 50"
        }
        "--latency" | "-U" | "--u_latency" => {
            "wrk's latency flags: the report always has percentiles, a histogram and, in the \
             open model, the uncorrected figures beside the corrected ones; --hgrm FILE (or -) \
             writes wrk2's detailed percentile spectrum"
        }
        "--h2" | "-h2" => "HTTP/2 is -p h2 (TLS) or -p h2c (cleartext) here",
        "-x" | "--proxy" => {
            "httpvs connects straight to the URL's host, as h2load and wrk do (no proxy); \
             --connect-to HOST:PORT sends the connections elsewhere"
        }
        _ => return None,
    })
}

/// Folds clap's message into one line. A message ending in ':' names its subject on the
/// indented lines that follow ("the following required arguments were not provided:\n  --x"),
/// so those are kept, as is an enum flag's `[possible values: ...]`; the usage block is
/// dropped, and a tip is given by [`clap_tip`] for the caller to place.
fn clap_one_line(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut line = first.trim_start_matches("error: ").to_owned();
    if line.ends_with(':') {
        let subjects: Vec<&str> = lines
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect();
        line.push(' ');
        line.push_str(&subjects.join(", "));
    }
    // The values an enum flag takes belong to the error ("invalid value 'foo' for
    // '--h2-engine <ENGINE>'" named none of them).
    if let Some(values) = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("[possible values:"))
    {
        line.push(' ');
        line.push_str(values);
    }
    line
}

/// clap's tip below its error, if any ("a similar argument exists: '--connections'"), for the
/// same line.
fn clap_tip(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("tip: "))
        .find_map(|tip| {
            // "to pass '-1' as a value, use '-- -1'": past `--` it is the URL, not the flag's
            // value; `--flag=-1` is what passes it. clap says it of every unknown flag too
            // (`--bogus`), where it is no advice at all: the next tip, if any, is.
            let Some(rest) = tip.strip_prefix("to pass '") else {
                return Some(tip.to_string());
            };
            let arg = rest.split('\'').next().unwrap_or("");
            let looks_like_a_flag = arg
                .trim_start_matches('-')
                .starts_with(|c: char| c.is_ascii_alphabetic());
            (!looks_like_a_flag)
                .then(|| "a value starting with '-' goes as --flag=VALUE".to_string())
        })
}

/// Says in words why a number was refused, where clap passes on the parser's own message
/// ("invalid digit found in string" for `-1` or `1.5`, "-1 is not in 0..=4294967295").
fn plain_value_reason(line: &str) -> String {
    let Some(rest) = line.strip_prefix("invalid value '") else {
        return line.to_owned();
    };
    let Some((value, rest)) = rest.split_once('\'') else {
        return line.to_owned();
    };
    let Some((arg, reason)) = rest.split_once("': ") else {
        return line.to_owned();
    };
    let negative = value.starts_with('-') && value[1..].parse::<f64>().is_ok();
    let plain = match reason {
        _ if negative && (reason.contains(" is not in ") || reason.contains("invalid digit")) => {
            "it cannot be negative".to_owned()
        }
        "invalid digit found in string" => "expected a whole number".to_owned(),
        "invalid float literal" | "cannot parse float from empty string" => {
            "expected a number".to_owned()
        }
        "cannot parse integer from empty string" => "expected a whole number".to_owned(),
        "number too large to fit in target type" => "too large".to_owned(),
        _ => match reason.split_once(" is not in ") {
            Some((_, range)) => match range.split_once("..=") {
                // Past the type's top: "expected 0 to 4294967295" read as if 0 were fine, where
                // the flag's own check then refuses it.
                Some((_, high))
                    if matches!(
                        (value.parse::<u128>(), high.parse::<u128>()),
                        (Ok(v), Ok(h)) if v > h
                    ) =>
                {
                    format!("too large (at most {high})")
                }
                Some((low, high)) => format!("expected {low} to {high}"),
                None => reason.to_owned(),
            },
            None => reason.to_owned(),
        },
    };
    format!("invalid value '{value}'{arg}': {plain}")
}

#[cfg(test)]
mod tests {
    use super::{clap_one_line, clap_tip, one_line, plain_value_reason};

    /// A cause its context already quotes is said once; other causes all are.
    #[test]
    fn a_quoted_cause_is_said_once() {
        let inner = std::io::Error::other("route 198.18.0.2: Invalid argument");
        let err = anyhow::Error::new(inner)
            .context("set up the TUN device: route 198.18.0.2: Invalid argument")
            .context("netem");
        assert_eq!(
            one_line(&err),
            "netem: set up the TUN device: route 198.18.0.2: Invalid argument"
        );
        let err = anyhow::Error::new(std::io::Error::other("refused")).context("connect");
        assert_eq!(one_line(&err), "connect: refused");
    }

    #[test]
    fn refused_numbers_say_why_in_words() {
        let cases = [
            (
                "invalid value '-1' for '--connections <N>': -1 is not in 0..=4294967295",
                "invalid value '-1' for '--connections <N>': it cannot be negative",
            ),
            (
                "invalid value '-2' for '--threads <N>': invalid digit found in string",
                "invalid value '-2' for '--threads <N>': it cannot be negative",
            ),
            (
                "invalid value '1.5' for '--requests <N>': invalid digit found in string",
                "invalid value '1.5' for '--requests <N>': expected a whole number",
            ),
            (
                "invalid value '5000000000' for '--streams <N>': 5000000000 is not in 0..=4294967295",
                "invalid value '5000000000' for '--streams <N>': too large (at most 4294967295)",
            ),
            (
                "invalid value 'abc' for '--rate <R>': invalid float literal",
                "invalid value 'abc' for '--rate <R>': expected a number",
            ),
            (
                "invalid value '' for '--rate <R>': cannot parse float from empty string",
                "invalid value '' for '--rate <R>': expected a number",
            ),
            (
                "invalid value 'x' for '--mtu <MTU>': 70000 is not in 576..=65535",
                "invalid value 'x' for '--mtu <MTU>': expected 576 to 65535",
            ),
        ];
        for (clap, ours) in cases {
            assert_eq!(plain_value_reason(clap), ours);
        }
        let other = "unexpected argument '--bogus' found";
        assert_eq!(plain_value_reason(other), other);
    }

    #[test]
    fn peer_flags_say_what_to_use_instead() {
        use super::peer_flag_hint;
        let line = |f: &str| format!("unexpected argument '{f}' found");
        let hint = |f: &str| peer_flag_hint(&line(f), "load");
        assert!(hint("-T").is_some_and(|h| h.contains("--timeout")));
        assert!(hint("-R").is_some_and(|h| h.contains("--rate")));
        assert!(hint("--connection-inactivity-timeout=5").is_some());
        assert_eq!(hint("--bogus"), None);
        // Load's flags have no twin in trace; compare takes h2load's duration its own way.
        assert_eq!(peer_flag_hint(&line("-R"), "trace"), None);
        assert_eq!(
            peer_flag_hint(&line("-D"), "compare"),
            Some("h2load's -D is --duration here")
        );
    }

    #[test]
    fn required_arguments_are_named_on_the_one_line() {
        let text = "error: the following required arguments were not provided:\n  --net <SPEC>\n\nUsage: httpvs load --net <SPEC> <URL>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_one_line(text),
            "the following required arguments were not provided: --net <SPEC>"
        );
    }

    /// An enum flag's values and clap's tip stay on the one line (they were dropped).
    #[test]
    fn possible_values_and_tips_are_kept() {
        let text = "error: invalid value 'foo' for '--h2-engine <ENGINE>'\n  [possible values: owned, hyper]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_one_line(text),
            "invalid value 'foo' for '--h2-engine <ENGINE>' [possible values: owned, hyper]"
        );
        let text = "error: unexpected argument '--conections' found\n\n  tip: a similar argument exists: '--connections'\n\nUsage: httpvs load <URL>\n";
        assert_eq!(
            clap_tip(text).as_deref(),
            Some("a similar argument exists: '--connections'")
        );
        // Past `--` a value is the URL: the tip that sent `-d -- -1` there says `--flag=`.
        let text = "error: unexpected argument '-1' found

  tip: to pass '-1' as a value, use '-- -1'

Usage: httpvs load <URL>
";
        assert_eq!(
            clap_tip(text).as_deref(),
            Some("a value starting with '-' goes as --flag=VALUE")
        );
        // An unknown flag gets no such tip: it is no value.
        let text = "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a value, use '-- --bogus'\n\nUsage: httpvs load <URL>\n";
        assert_eq!(clap_tip(text), None);
        assert_eq!(
            super::peer_flag_hint("unexpected argument '-n' found", "trace"),
            Some(
                "trace shows one connection: -m N sends N requests on it at once (load's -n \
                 is a total, -c its connections)"
            )
        );
    }

    #[test]
    fn a_plain_error_keeps_its_first_line() {
        let text = "error: unexpected argument '--bogus' found\n\n  tip: ...\n\nUsage: httpvs load <URL>\n";
        assert_eq!(clap_one_line(text), "unexpected argument '--bogus' found");
    }
}
