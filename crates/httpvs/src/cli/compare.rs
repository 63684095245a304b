//! `httpvs compare`: flags, validation into the library config, and the run.

use anyhow::Context;
use httpvs_compare::options::{self, Pinning};
use httpvs_compare::plan::{Plan, Span};
use httpvs_compare::render;
use httpvs_compare::runner::{CellSpec, Progress};
use httpvs_compare::session::{self, CompareConfig};
use httpvs_compare::{Results, Variant};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `httpvs compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Compare protocols on your server instead of the embedded one (probes which it speaks).
    url: Option<String>,
    /// Run this plan (TOML) instead of the default matrix.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Print the plan (the default matrix, or the one --plan, --quick and the narrowing flags
    /// make) and exit.
    #[arg(long)]
    print_plan: bool,
    /// Under a minute: one short repeat of the first payload, each protocol at its first shape.
    #[arg(long)]
    quick: bool,
    /// Client shapes per protocol, CONNECTIONS or CONNECTIONSxSTREAMS: h2c=8x60,h1=120.
    #[arg(long, value_name = "SPEC")]
    shape: Option<String>,
    /// Search a small grid of shapes per protocol first, and run each at its best (a larger
    /// shape must beat a smaller one by over 5%).
    #[arg(long)]
    tune: bool,
    /// Ratios are against this protocol (default h1).
    #[arg(long, value_name = "PROTOCOL")]
    baseline: Option<String>,
    /// Only these protocols: h1,h1-close,h1-tls,h2c,h2,h3.
    #[arg(long, value_name = "LIST")]
    protocols: Option<String>,
    /// Only these conditions of the plan, by name, in this order: clean,wan.
    #[arg(long, value_name = "LIST")]
    conditions: Option<String>,
    /// Repeats per cell (overrides the plan).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeats: Option<u32>,
    /// Measured period per repeat (overrides the plan), e.g. 2s.
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    duration: Option<String>,
    /// Warm-up per repeat (overrides the plan), e.g. 500ms.
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    warmup: Option<String>,
    /// Pin the embedded server to these CPUs (default: the first half).
    #[arg(long, value_name = "LIST")]
    server_cpus: Option<String>,
    /// Pin the client to these CPUs (default: the other half).
    #[arg(long, value_name = "LIST")]
    client_cpus: Option<String>,
    /// Pin nothing.
    #[arg(long, conflicts_with_all = ["server_cpus", "client_cpus"])]
    no_pin: bool,
    /// Write every cell's full load report, the plan and machine facts as JSON (`-` for
    /// stdout, the table then going to stderr).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the HTML report here (default: httpvs-compare-DATE.html in this directory).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write no HTML report.
    #[arg(long, conflicts_with = "html")]
    no_html: bool,
    /// Re-render a results file written by --json instead of running (the flags that shape a
    /// run are refused with it: the file holds the measurements, and ratios and verdicts are
    /// worked out again from them; --print-plan prints the file's plan).
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "url", "plan", "quick", "shape", "tune", "baseline", "protocols", "conditions",
        "repeats", "duration", "warmup", "server_cpus", "client_cpus", "no_pin", "insecure",
        "cacert", "cert", "key", "connect_to",
    ])]
    from: Option<PathBuf>,
    /// Accept any certificate from your server (https URLs).
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Trust this CA (PEM) for your server.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Client certificate chain (PEM) to show your server if it asks for one (mutual TLS), with
    /// --key.
    #[arg(long, value_name = "FILE", requires = "url")]
    cert: Option<PathBuf>,
    /// The private key (PEM, unencrypted) of --cert.
    #[arg(long, value_name = "FILE", requires = "url")]
    key: Option<PathBuf>,
    /// With a URL: connect to HOST[:PORT] instead of its host and port (as load's), keeping
    /// the URL's name for Host, :authority and TLS
    #[arg(long, value_name = "HOST[:PORT]", requires = "url")]
    connect_to: Option<String>,
}

impl Args {
    /// Whether this run may emulate networks: on the embedded server only (a user's server on
    /// the host's loopback is out of the rootless layout's reach for clean conditions).
    pub fn wants_emulated_link(&self) -> bool {
        self.url.is_none() && !self.print_plan && self.from.is_none()
    }
}

/// Open files a compare needs beyond its connections: stdio, the outputs, the probes, and
/// the runtimes of the client's workers and of the embedded server (4 files each).
const FD_SLACK: u64 = 128;

/// The plan's largest cell within the open-file limit (raised to the hard limit first), or one
/// line and exit 2 before anything runs: past it, connections failed as `io` and the verdicts
/// blamed lost handshakes.
fn check_fd_limit(config: &httpvs_compare::session::CompareConfig) -> anyhow::Result<()> {
    use httpvs_compare::variant::Variant;
    let cell = |variant: &Variant, shape: &httpvs_compare::plan::Shape| {
        let connections = u64::from(shape.connections);
        match variant {
            // Each of a connection's requests in flight has its own connection.
            Variant::H1Close => connections * u64::from(shape.streams),
            _ => connections,
        }
    };
    let mut largest = config
        .plan
        .shapes
        .iter()
        .flat_map(|(variant, shapes)| shapes.0.iter().map(move |shape| cell(variant, shape)))
        .max()
        .unwrap_or(0);
    if config.tune {
        let tried = config.plan.protocols.iter().flat_map(|variant| {
            httpvs_compare::tune::candidates(*variant)
                .into_iter()
                .map(move |shape| cell(variant, &shape))
        });
        largest = largest.max(tried.max().unwrap_or(0));
    }
    // The embedded server, in this process, holds the other end of each connection.
    let ends = if config.target.is_none() { 2 } else { 1 };
    let need = largest.saturating_mul(ends).saturating_add(FD_SLACK);
    match super::common::raise_fd_limit() {
        Some(limit) if limit < need => {
            let server = match ends {
                2 => " (and the embedded server as many)",
                _ => "",
            };
            Err(super::usage(format!(
                "the plan's largest cell opens {largest} connections{server}: about {need} open \
                 files, and this process may open {limit} (ulimit -n): raise the limit or give \
                 smaller shapes (--shape or --plan)"
            )))
        }
        _ => Ok(()),
    }
}

/// For a protocol that cannot run on a URL: the scheme it needs, and those that run on the
/// URL's (`https`: whether it is https://).
fn scheme_choices(https: bool) -> (&'static str, &'static str) {
    match https {
        true => ("http://", "h1-tls, h2 or h3"),
        false => ("https://", "h1, h1-close or h2c"),
    }
}

/// Runs `httpvs compare`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let (true, Some(path)) = (args.print_plan, &args.from) {
        // The plan the results were measured with.
        let results = Results::read(path).map_err(super::usage)?;
        let text = results
            .plan
            .to_toml()
            .map_err(|e| anyhow::anyhow!("cannot print the plan: {e}"))?;
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    if args.print_plan {
        // Every flag is checked as a run would check it (`--server-cpus 99` printed the plan
        // and exited 0, then failed the run with 2). Built once: a plan read from a pipe
        // (`--plan <(cmd)`) can be read only once.
        let config = config(&args)?;
        let narrowed = args.plan.is_some()
            || args.quick
            || args.shape.is_some()
            || args.protocols.is_some()
            || args.baseline.is_some()
            || args.conditions.is_some()
            || args.repeats.is_some()
            || args.duration.is_some()
            || args.warmup.is_some();
        if let Some(url) = &args.url {
            // Against your server: its payloads as they would go; the protocols are probed.
            let mut plan = aimed_plan(&config).unwrap_or(config.plan);
            if !config.custom_plan {
                let protocols: Vec<String> = plan.protocols.iter().map(|v| v.to_string()).collect();
                plan.description = httpvs_compare::plan::run_sentence(
                    &format!("those of {} that {url} answers", protocols.join(", ")),
                    "its own response",
                    &plan.conditions,
                    "",
                );
            }
            let text = plan
                .to_toml()
                .map_err(|e| anyhow::anyhow!("cannot print the plan: {e}"))?;
            println!(
                "# The plan against {url}: compare probes it first and runs the protocols it answers."
            );
            print!("{text}");
        } else if narrowed {
            // The plan as the other flags make it, which is what would run.
            let plan = config.plan;
            let text = plan
                .to_toml()
                .map_err(|e| anyhow::anyhow!("cannot print the plan: {e}"))?;
            print!("{text}");
        } else {
            print!("{}", httpvs_compare::plan::DEFAULT_PLAN);
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Checked before the matrix runs: a path that cannot be written must not cost the run, and
    // no output may overwrite an input or the other output (the results JSON is what --from
    // reads back; an HTML report written over it lost it).
    let json_to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    // `--html -` is stdout too, as `--json -` (it wrote a file named `-`); not both.
    let html_to_stdout = args.html.as_deref() == Some(std::path::Path::new("-"));
    if json_to_stdout && html_to_stdout && !args.no_html {
        return Err(super::usage(
            "--json - and --html - both name stdout: give one of them a file",
        ));
    }
    let inputs = [
        ("--from", args.from.as_deref()),
        ("--plan", args.plan.as_deref()),
        ("--cacert", args.cacert.as_deref()),
        ("--cert", args.cert.as_deref()),
        ("--key", args.key.as_deref()),
    ];
    if let Some(path) = args.json.as_deref().filter(|_| !json_to_stdout) {
        super::common::refuse_input("--json", path, &inputs)?;
        super::common::check_writable("--json", path)?;
    }
    if !args.no_html {
        let default = || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            PathBuf::from(options::default_report_name(now))
        };
        let html = args.html.clone().unwrap_or_else(default);
        if !html_to_stdout {
            super::common::refuse_input("--html", &html, &inputs)?;
        }
        if let Some(json) = args.json.as_deref().filter(|_| !json_to_stdout) {
            if super::common::same_path(json, &html) {
                return Err(super::usage(format!(
                    "--json and --html both name {}: give each its own file",
                    html.display()
                )));
            }
        }
        if !html_to_stdout {
            super::common::check_writable("--html", &html)?;
        }
    }
    let results = match &args.from {
        Some(path) => Results::read(path).map_err(super::usage)?,
        None => {
            let config = config(&args)?;
            check_fd_limit(&config)?;
            if args.url.is_none() {
                // Allowed (contention may be what you measure), but never by accident.
                if let Some(line) = config.pinning.overlap_warning() {
                    say!("httpvs: warning: {line}");
                }
            }
            if let Some(line) = same_requests(&config) {
                say!("httpvs: warning: {line}");
            }
            let mut progress = Lines::default();
            // The first Ctrl-C ends the matrix: the finished cells are still shown and written.
            let stop = super::common::interrupt_flag();
            session::run_until(&config, &mut progress, stop).map_err(|e| match e {
                // Ctrl-C while probing the URL: 130, as load's interrupted set-up.
                session::CompareError::Interrupted => {
                    super::exit_error(super::common::INTERRUPTED, e.to_string())
                }
                e => anyhow::anyhow!("{e}"),
            })?
        }
    };
    // An interrupt that cut the matrix exits 130 (128 + SIGINT, as a shell reports ^C), after
    // the report; a re-rendered interrupted file (--from) is not itself interrupted.
    let code = match results.interrupted && args.from.is_none() {
        true => ExitCode::from(super::common::INTERRUPTED),
        false => ExitCode::SUCCESS,
    };
    // With `--json -` (or `--html -`) stdout carries the file alone and the table goes to
    // stderr.
    let mut stdout = super::common::Stdout::default();
    let table_to_stderr = json_to_stdout || (html_to_stdout && !args.no_html);
    let screen = |stdout: &mut super::common::Stdout, text: &str| {
        if table_to_stderr {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        } else {
            stdout.put(text.as_bytes());
        }
    };
    screen(&mut stdout, &render::text::render(&results));
    if json_to_stdout {
        let text = results
            .to_json()
            .map_err(|e| anyhow::anyhow!("cannot write the JSON: {e}"))?;
        stdout.put(format!("{text}\n").as_bytes());
    } else if let Some(path) = &args.json {
        results
            .write(path)
            .with_context(|| format!("--json: cannot write {}", path.display()))?;
        screen(&mut stdout, &format!("\nJSON: {}\n", path.display()));
    }
    if !args.no_html {
        let path = args.html.clone().unwrap_or_else(|| {
            PathBuf::from(options::default_report_name(results.setup.started_unix))
        });
        if html_to_stdout {
            stdout.put(render::html::render(&results).as_bytes());
        } else {
            std::fs::write(&path, render::html::render(&results))
                .with_context(|| format!("--html: cannot write {}", path.display()))?;
            screen(&mut stdout, &format!("\nreport: {}\n", path.display()));
        }
    }
    // The files are written; a report that did not reach stdout fails the run.
    stdout.result()?;
    // A run that could not measure what it set out to is a failure a script must see: cells
    // that did not run (a server gone mid-matrix), or no table with a winner (every row
    // failing, or error pages only). Written files and tables come first.
    if code == ExitCode::SUCCESS && args.from.is_none() {
        if let Some(why) = incomplete(&results) {
            say!("httpvs: {why}");
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(code)
}

/// A plan's payloads that send one and the same request to a user's server: `size=` is the
/// embedded server's, so `plans/default.toml`'s small and large both ask for the URL.
fn same_requests(config: &CompareConfig) -> Option<String> {
    let url = config.target.as_deref()?;
    let plan = aimed_plan(config)?;
    let key = |p: &httpvs_compare::plan::Payload| {
        (p.path.clone(), p.method.clone(), p.body, p.headers.clone())
    };
    let payloads = &plan.payloads;
    let twins: Vec<&str> = payloads
        .iter()
        .filter(|p| payloads.iter().filter(|q| key(q) == key(p)).count() > 1)
        .map(|p| p.name.as_str())
        .collect();
    (!twins.is_empty()).then(|| {
        format!(
            "payloads {} send the same request to {url} (a payload's size is the embedded \
             server's ?size=, left off for your server): their tables will measure the same",
            twins.join(", ")
        )
    })
}

/// The plan as it goes to the config's URL (`session::aim_at_url`), when it has one.
fn aimed_plan(config: &CompareConfig) -> Option<Plan> {
    let uri = httpvs_load::config::parse_url(config.target.as_deref()?).ok()?;
    let mut plan = config.plan.clone();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    httpvs_compare::session::aim_at_url(&mut plan, path, config.custom_plan);
    Some(plan)
}

/// Why a finished matrix did not measure what it was asked to, if so (exit 1).
fn incomplete(results: &Results) -> Option<String> {
    if let Some(line) = results.not_run_line() {
        return Some(format!("{line}; exit 1"));
    }
    let records = render::verdict_records(results);
    (!records.is_empty() && records.iter().all(|r| r.verdict.fastest.is_none()))
        .then(|| "no table has a verdict (see each table's line); exit 1".to_string())
}

/// Turns flags into the library's config; every bad value is one line and exit 2.
fn config(args: &Args) -> anyhow::Result<CompareConfig> {
    // The URL's scheme, once checked: which protocols can run on it.
    let mut https = None;
    if let Some(url) = &args.url {
        // load's -H is not compare's: say what compare takes instead.
        let authority = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next());
        if authority.is_some_and(|a| a.contains('@')) {
            return Err(super::usage(
                "user:password@ in the URL is not taken by compare: give a --plan whose payloads carry an Authorization header",
            ));
        }
        let uri = httpvs_load::config::parse_url(url).map_err(|e| super::usage(e.to_string()))?;
        https = Some(uri.scheme_str() == Some("https"));
    }
    let mut plan = match &args.plan {
        Some(path) => Plan::load(path).map_err(|e| super::usage(e.to_string()))?,
        None => Plan::default_plan(),
    };
    if args.quick {
        plan = plan.quick();
    }
    let shaped: Vec<Variant> = match &args.shape {
        Some(spec) => {
            let shapes = options::parse_shape_overrides(spec)
                .map_err(|e| super::usage(format!("--shape: {e}")))?;
            let named = shapes.keys().copied().collect();
            options::apply_shapes(&mut plan, shapes);
            named
        }
        None => Vec::new(),
    };
    if let Some(list) = &args.protocols {
        plan.protocols =
            parse_list::<Variant>(list).map_err(|e| super::usage(format!("--protocols: {e}")))?;
        // The plan's baseline left out by --protocols: h1-tls for h1 if chosen, else the
        // first chosen (as when the target cannot run it).
        if let Some(fallback) = plan
            .baseline
            .and_then(|b| httpvs_compare::plan::baseline_fallback(b, &plan.protocols))
        {
            plan.baseline = Some(fallback);
        }
        // None of them can run on the URL's scheme: a usage error, said before any probe (it
        // was exit 1, "answered none of the protocols", of protocols never tried).
        if let (Some(url), Some(https)) = (&args.url, https) {
            if plan.protocols.iter().all(|v| v.tls() != https) {
                let (needs, others) = scheme_choices(https);
                return Err(super::usage(format!(
                    "--protocols {list}: {} an {needs} URL; for {url} choose among {others}",
                    if plan.protocols.len() == 1 {
                        "needs"
                    } else {
                        "each needs"
                    }
                )));
            }
        }
    }
    if let Some(b) = &args.baseline {
        let baseline: Variant = b
            .parse()
            .map_err(|e| super::usage(format!("--baseline: {e}")))?;
        // One the URL's scheme rules out, as --protocols refuses such a list (it ran, with a
        // note that the ratios were to another row).
        if let (Some(url), Some(https)) = (&args.url, https) {
            if baseline.tls() != https {
                let (needs, others) = scheme_choices(https);
                return Err(super::usage(format!(
                    "--baseline {b}: needs an {needs} URL; for {url} choose among {others}"
                )));
            }
        }
        plan.baseline = Some(baseline);
    }
    if let Some(list) = &args.conditions {
        let names: Vec<&str> = list.split(',').map(str::trim).collect();
        if let Some(bad) = names
            .iter()
            .find(|n| !plan.conditions.iter().any(|c| &c.name == *n))
        {
            let known: Vec<&str> = plan.conditions.iter().map(|c| c.name.as_str()).collect();
            return Err(super::usage(format!(
                "--conditions: '{bad}' is not a condition of the plan ({})",
                known.join(", ")
            )));
        }
        if let Some((_, twice)) = names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
        {
            return Err(super::usage(format!(
                "--conditions: '{twice}' is listed twice"
            )));
        }
        // In the order given, as --protocols orders the rows.
        let mut chosen = Vec::with_capacity(names.len());
        for name in &names {
            if let Some(c) = plan.conditions.iter().find(|c| c.name == *name) {
                chosen.push(c.clone());
            }
        }
        plan.conditions = chosen;
    }
    if let Some(n) = args.repeats {
        plan.repeats = n;
    }
    if args.quick || args.protocols.is_some() || args.conditions.is_some() {
        // The plan's own sentence would name what no longer runs (the reports show it).
        plan.description = narrowed_description(&plan, args.quick, args.duration.is_none());
    }
    if let Some(d) = &args.duration {
        plan.duration = d
            .parse::<Span>()
            .map_err(|e| super::usage(format!("--duration: {e}")))?;
    }
    if let Some(d) = &args.warmup {
        plan.warmup = d
            .parse::<Span>()
            .map_err(|e| super::usage(format!("--warmup: {e}")))?;
    }
    plan.validate("flags")
        .map_err(|e| super::usage(flag_error(&e)))?;
    // A shape for a protocol that does not run would be silently dropped.
    if let Some(idle) = shaped.iter().find(|v| !plan.protocols.contains(v)) {
        return Err(super::usage(format!(
            "--shape {idle}=...: {idle} is not among the protocols that run ({})",
            plan.protocols
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if args.tune && args.shape.is_some() {
        // Tuning replaces every protocol's shape: the one given would run nowhere.
        return Err(super::usage(
            "--tune picks each protocol's shape itself, so --shape would be dropped: give one of them",
        ));
    }
    if args.tune && !plan.conditions.iter().any(|c| c.is_clean()) {
        // It would print "tuning..." and then tune nothing.
        return Err(super::usage(
            "--tune tries its shapes on the clean link, and this plan has none: add clean to --conditions",
        ));
    }
    if let Some(path) = &args.cacert {
        // A usage error before any probe, as `load` says it: a file that is not there, or
        // holds no certificate (probing with it would blame the server).
        super::common::check_cacert(path)?;
        if !args.insecure {
            httpvs_load::protocol::tls::client_config(false, Some(path), &[])
                .map_err(|e| super::usage(format!("--cacert: {e}")))?;
        }
    }
    Ok(CompareConfig {
        plan,
        target: args.url.clone(),
        custom_plan: args.plan.is_some(),
        pinning: pinning(args)?,
        tune: args.tune,
        insecure: args.insecure,
        cacert: args.cacert.clone(),
        client_identity: super::common::client_identity(args.cert.as_deref(), args.key.as_deref())?,
        connect_to: args
            .connect_to
            .as_deref()
            .map(httpvs_load::connect_to::ConnectTo::parse)
            .transpose()
            .map_err(super::usage)?,
    })
}

/// What a narrowed plan runs, in one sentence: its protocols, payloads and links. `short`:
/// `--quick`'s own duration holds (not one given with `--duration`).
fn narrowed_description(plan: &Plan, quick: bool, short: bool) -> String {
    let short = if short { " short" } else { "" };
    let protocols: Vec<String> = plan.protocols.iter().map(|v| v.to_string()).collect();
    // Those some chosen condition runs (`severe` runs `small` only).
    let payloads: Vec<&str> = plan
        .payloads
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| {
            plan.conditions.iter().any(|c| {
                c.payloads
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|o| o == name))
            })
        })
        .collect();
    httpvs_compare::plan::run_sentence(
        &protocols.join(", "),
        &format!("{} responses", payloads.join(", ")),
        &plan.conditions,
        &match (quick, plan.repeats) {
            (false, _) => String::new(),
            (true, 1) => format!(" (--quick: one{short} repeat each)"),
            (true, n) => format!(" (--quick: {n}{short} repeats each)"),
        },
    )
}

fn pinning(args: &Args) -> anyhow::Result<Pinning> {
    if args.no_pin {
        return Ok(Pinning {
            turned_off: true,
            ..Pinning::default()
        });
    }
    let parse = super::common::cpu_list;
    if args.url.is_some() {
        // Your server runs where you started it: only the client is ours to pin, if asked.
        if args.server_cpus.is_some() {
            return Err(super::usage(
                "--server-cpus pins the embedded server; with a URL, pin your server yourself (--client-cpus pins the client)",
            ));
        }
        let client = match &args.client_cpus {
            Some(c) => parse("--client-cpus", c)?,
            None => Vec::new(),
        };
        return Ok(Pinning {
            client,
            ..Pinning::default()
        });
    }
    let available = options::available_cpus();
    let mut pin = Pinning::split(&available);
    if let Some(s) = &args.server_cpus {
        pin.server = parse("--server-cpus", s)?;
        if args.client_cpus.is_none() {
            pin.client = available
                .iter()
                .copied()
                .filter(|c| !pin.server.contains(c))
                .collect();
        }
    }
    if let Some(c) = &args.client_cpus {
        pin.client = parse("--client-cpus", c)?;
        if args.server_cpus.is_none() {
            pin.server = available
                .iter()
                .copied()
                .filter(|c| !pin.client.contains(c))
                .collect();
        }
    }
    Ok(pin)
}

fn parse_list<T: std::str::FromStr<Err = String>>(text: &str) -> Result<Vec<T>, String> {
    text.split(',').map(|s| s.trim().parse()).collect()
}

/// Prints one line per cell to stderr as the matrix runs.
#[derive(Default)]
struct Lines {
    started: Option<std::time::Instant>,
}

impl Progress for Lines {
    fn cell_started(&mut self, index: usize, total: usize, spec: &CellSpec<'_>) {
        let start = *self.started.get_or_insert_with(std::time::Instant::now);
        say_raw!(
            "[{index:>3}/{total}] {:>4.0}s  {} / {} / {} {} ... ",
            start.elapsed().as_secs_f64(),
            spec.condition.name,
            spec.payload.name,
            spec.variant,
            spec.shape
        );
    }

    fn cell_finished(&mut self, cell: &httpvs_compare::results::CellResult) {
        let row = cell.row();
        match &row.failure {
            Some(f) => say!("did not run: {f}"),
            None => say!(
                "{} req/s, p99 {}",
                render::format::thousands(row.rps.median),
                render::format::millis(row.p99_ms)
            ),
        }
    }

    fn note(&mut self, line: &str) {
        say!("{line}");
    }
}

/// A plan error found once the flags were applied, named by the flag that sets its field
/// (`--protocols: 'h1' is listed twice`), or by the field when no flag sets it.
fn flag_error(e: &httpvs_compare::plan::PlanError) -> String {
    let field = e.field.as_str();
    let flag = match field.split(['.', '[']).next().unwrap_or(field) {
        "protocols" => "--protocols",
        "baseline" => "--baseline",
        "shapes" => "--shape",
        "conditions" => "--conditions",
        "repeats" => "--repeats",
        "duration" => "--duration",
        "warmup" => "--warmup",
        _ => return format!("{field}: {}", e.message),
    };
    format!("{flag}: {}", e.message)
}
