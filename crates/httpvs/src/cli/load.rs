//! `httpvs load`: flags, validation into the library config, and the run.
//!
//! Flags follow h2load/hey/oha habits. Every value is checked here (or by
//! `LoadConfig::validate`) so a bad flag, URL or file is one line and exit 2 before any load.

mod net;

use super::common::{
    basic_authorization, check_cacert, check_content_length, check_writable, client_identity,
    cpu_list, duration_flag, file_id, interrupt_flag, parse_header, refuse_input, take_userinfo,
    typed_spelling, WindowFlags,
};
use super::usage;
use httpvs_load::config::{parse_url, StopAfter, TlsOptions};
use httpvs_load::report::progress::ProgressLine;
use httpvs_load::report::{self, text, thresholds};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, LoadError, Observer, ProtocolChoice};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `httpvs load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Target URL (http:// or https://); more URLs (or /paths) on the same origin are sent in
    /// turn, as h2load does.
    #[arg(value_name = "URL")]
    urls: Vec<String>,
    /// Read request URLs (or /paths), one per line, from FILE (`-` for stdin), after any given
    /// as arguments; blank lines and lines starting with # are skipped.
    #[arg(short = 'i', long = "input-file", value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// Protocol: h1, h2c, h2, h3 or auto (ALPN for https, h1 for http).
    #[arg(short = 'p', long, value_name = "PROTO", default_value = "auto")]
    protocol: String,
    /// h2load's --h1: the same as -p h1.
    #[arg(long = "h1", hide = true)]
    h1: bool,
    /// Connections, spread over the threads.
    #[arg(short = 'c', long, value_name = "N", allow_negative_numbers = true, default_value_t = httpvs_load::config::DEFAULT_CONNECTIONS)]
    connections: u32,
    /// Concurrent streams per connection (h2/h3); the pipelining depth for h1.
    #[arg(
        short = 'm',
        long,
        value_name = "N",
        allow_negative_numbers = true,
        default_value_t = 1
    )]
    streams: u32,
    /// Worker threads [default: the number of cores].
    #[arg(short = 't', long, value_name = "N", allow_negative_numbers = true)]
    threads: Option<usize>,
    /// Stop after N requests.
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        conflicts_with = "duration",
        allow_negative_numbers = true
    )]
    requests: Option<u64>,
    /// Stop after this long, like 10s or 1m [default: 10s].
    #[arg(
        short = 'z',
        long,
        short_alias = 'D',
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    duration: Option<String>,
    /// Run this long first without counting, like 2s.
    #[arg(
        long,
        alias = "warm-up-time",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    warmup: Option<String>,
    /// Request method (default GET, or POST with -d/--data-file, as curl and h2load).
    #[arg(short = 'X', long, value_name = "METHOD")]
    method: Option<String>,
    /// Request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    #[command(flatten)]
    request_body: super::common::BodyFlags,
    /// A new connection for every request.
    #[arg(long, alias = "disable-keepalive")]
    no_keepalive: bool,
    /// Per-request timeout, like 20s; 0 waits forever.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "20s",
        allow_hyphen_values = true
    )]
    timeout: String,
    /// Bound on TCP connect plus the TLS or QUIC handshake.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    connect_timeout: String,
    /// Accept any TLS certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Client certificate chain (PEM) to show a server that asks for one (mutual TLS), with --key.
    #[arg(long, value_name = "FILE")]
    cert: Option<PathBuf>,
    /// The private key (PEM, unencrypted) of --cert.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// h3: send requests as 0-RTT early data when a session ticket allows (replayable: idempotent only).
    #[arg(long = "0rtt")]
    zero_rtt: bool,
    /// -p auto on https: switch to HTTP/3 when the server advertises it in Alt-Svc.
    #[arg(long)]
    alt_svc: bool,
    #[command(flatten)]
    windows: Box<WindowFlags>,
    /// Open model: this many requests per second in total (latency corrected for coordinated omission).
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Pin worker threads to these CPUs, round-robin (like 0,2 or 0-3).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Run behind an emulated network: a profile (wan, 3g...: `httpvs netem --profiles`), netem
    /// options for both directions ("delay 50ms loss 1%"), or "UP | DOWN". As root, or rootless
    /// where user namespaces allow; the target must be on this host's loopback (127.0.0.1, [::1]
    /// or localhost), which the link reaches unchanged.
    #[arg(long, value_name = "SPEC")]
    net: Option<String>,
    /// Seed of the emulated link's random choices, to repeat them (default: random, in the report).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    net_seed: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write the report to FILE instead of stdout (JSON with --json or a .json name).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// No live progress line on stderr.
    #[arg(long)]
    no_progress: bool,
    /// Exit 1 when a rule is broken, like "error-rate>1%,p99>250ms".
    #[arg(long, value_name = "RULES")]
    fail_on: Option<String>,
    /// Basic authentication, USER:PASSWORD (as hey and oha); user:password@ in the URL does
    /// the same, as curl.
    #[arg(short = 'a', long = "basic-auth", value_name = "USER:PASS")]
    basic_auth: Option<String>,
    /// Also list these latency percentiles, like 33,99.999 (as Fortio's -p)
    #[arg(long, value_name = "LIST", allow_negative_numbers = true)]
    percentiles: Option<String>,
    /// Write one tab-separated row per request to FILE, as h2load's --log-file: start (µs since
    /// the epoch), status (-1 failed), duration µs, then intended start µs, connection, url
    /// index, error, sent µs (the wait for a connection before it went out)
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// Write the latency's percentile spectrum to FILE in HdrHistogram's text form (.hgrm), as
    /// wrk2's --latency prints it, for HdrHistogram's plotter; `-` prints it after the report
    #[arg(long, value_name = "FILE")]
    hgrm: Option<PathBuf>,
    /// Connect to HOST[:PORT] instead of the URL's host and port (as h2load), or
    /// HOST1:PORT1:HOST2:PORT2 (as curl and oha); Host, :authority and TLS keep the URL's name
    #[arg(long, value_name = "HOST[:PORT]")]
    connect_to: Option<String>,
}

impl Args {
    /// Whether the run goes behind an emulated link (`--net`).
    pub fn wants_emulated_link(&self) -> bool {
        self.net.is_some()
    }
}

/// Runs `httpvs load`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    // `-o -` is stdout, as `-i -` is stdin; `--log-file -` writes its rows there (beside a
    // report that -o sends to a file).
    if args.output.as_deref() == Some(std::path::Path::new("-")) {
        args.output = None;
    }
    let mut config = config_from(&args)?;
    let net = match (&args.net, args.net_seed) {
        (Some(spec), seed) => Some(net::NetLink::from_flags(
            spec,
            seed,
            &config.url,
            config.connect_to.as_ref(),
        )?),
        (None, Some(_)) => return Err(usage("--net-seed needs --net SPEC")),
        (None, None) => None,
    };
    ignore_sigpipe();
    check_fd_limit(&config)?;
    if let Some(spec) = &args.net {
        for note in httpvs_netem::Impairment::unitless(spec) {
            say!("httpvs: note: --net {note}");
        }
    }
    let rules = match &args.fail_on {
        Some(spec) => thresholds::parse(spec).map_err(usage)?,
        None => Vec::new(),
    };
    // A rule on p98 is judged on p98 itself, not on the listed percentile above it.
    config
        .percentiles
        .extend(rules.iter().filter_map(|r| r.percentile()));
    let json = args.json
        || args
            .output
            .as_ref()
            .is_some_and(|p| p.extension().is_some_and(|e| e == "json"));
    // Checked before the run, so a path that cannot be written costs no run (and nothing the
    // user had there is emptied by a run that then fails).
    // What the run reads must not be what it writes: -o or --log-file naming an input would
    // empty it (the URL list, the body, the CA) before the run, or after it for the next one.
    let inputs = [
        ("--input-file", args.input_file.as_deref()),
        ("--data-file", args.request_body.data_file.as_deref()),
        ("-d @FILE", args.request_body.at_file()),
        ("--cacert", args.cacert.as_deref()),
        ("--cert", args.cert.as_deref()),
        ("--key", args.key.as_deref()),
    ];
    // `--hgrm -` prints the spectrum after the report, on stdout.
    let hgrm_file = args
        .hgrm
        .as_deref()
        .filter(|p| *p != std::path::Path::new("-"));
    if args.hgrm.is_some() && hgrm_file.is_none() && json && args.output.is_none() {
        return Err(usage(
            "--hgrm -: stdout carries the JSON report; give --hgrm a file, or the report -o FILE",
        ));
    }
    for (flag, path) in [
        ("-o", args.output.as_deref()),
        ("--log-file", args.log_file.as_deref()),
        ("--hgrm", hgrm_file),
    ] {
        if let Some(path) = path {
            refuse_input(flag, path, &inputs)?;
        }
    }
    if let Some(path) = hgrm_file {
        for (flag, other) in [
            ("-o", args.output.as_deref()),
            ("--log-file", args.log_file.as_deref()),
        ] {
            if other.is_some_and(|o| super::common::same_path(o, path)) {
                return Err(usage(format!(
                    "--hgrm and {flag} both name {}: give each its own file",
                    path.display()
                )));
            }
        }
        check_writable("--hgrm", path)?;
    }
    config.spectrum = args.hgrm.is_some();
    if let Some(path) = &args.output {
        check_writable("-o", path)?;
    }
    // Opened before Ctrl-C is taken over: opening a FIFO waits for its reader, and with the
    // run's handler (SA_RESTART) a Ctrl-C there only restarted the wait.
    let log = match &args.log_file {
        Some(path) => Some(open_request_log(path, args.output.as_deref())?),
        None => None,
    };
    let stop = interrupt_flag();
    if let Some(log) = log {
        // `--log-file - | head`: once head has its rows, the run has nothing left to give.
        if log.name() == "-" {
            log.end_run_when_reader_gone(stop.clone());
        }
        config.request_log = Some(log);
    }
    // Not on a terminal that cannot clear a line, nor on one that --log-file - writes rows to.
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    let rows_on_terminal = args.log_file.as_deref() == Some(std::path::Path::new("-"))
        && std::io::stdout().is_terminal();
    let show_progress =
        !args.no_progress && std::io::stderr().is_terminal() && !dumb && !rows_on_terminal;
    let mut progress = config
        .rate
        .map_or_else(ProgressLine::new, ProgressLine::open);
    let mut quiet = Quiet;
    let observer: &mut (dyn Observer + Send) = if show_progress {
        &mut progress
    } else {
        &mut quiet
    };
    let ran = match &net {
        Some(net) => net.run(&config, observer, stop),
        None => httpvs_load::run_until(&config, observer, stop).map_err(setup_error),
    };
    let mut report = ran?;
    report.thresholds = thresholds::evaluate(&rules, &report);
    let rendered = if json {
        report::to_json(&report) + "\n"
    } else {
        text::render(&report)
    };
    let written = match &args.output {
        Some(path) => std::fs::write(path, &rendered)
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => Ok(()),
    };
    if args.output.is_none() || written.is_err() {
        // Without -o, or when the file failed mid-way: the measurements still reach stdout.
        super::common::to_stdout(rendered.as_bytes()).map_err(|e| match &written {
            Err(why) => anyhow::anyhow!("{why}, and {e}"),
            Ok(()) => e,
        })?;
    }
    if let Err(why) = written {
        anyhow::bail!("{why}; the report went to stdout instead");
    }
    let hgrm_failed = match &report.latency_spectrum {
        Some(spectrum) => {
            let text = httpvs_load::report::hgrm::render(spectrum);
            let wrote = match hgrm_file {
                Some(path) => std::fs::write(path, &text)
                    .map_err(|e| format!("cannot write {}: {e}", path.display())),
                None => {
                    // After the report, when it went to stdout too.
                    let gap = if args.output.is_none() { "\n" } else { "" };
                    super::common::to_stdout(format!("{gap}{text}").as_bytes())
                        .map_err(|e| e.to_string())
                }
            };
            if let Err(why) = &wrote {
                say!("httpvs: --hgrm: {why}");
            }
            wrote.is_err()
        }
        None => false,
    };
    // `--log-file - | head`: the reader had what it wanted, as on any closed stdout pipe, and
    // the run ended there (see `end_run_when_reader_gone`).
    let reader_gone = report
        .request_log
        .as_ref()
        .is_some_and(|log| log.reader_closed_stdout());
    // The run's figures stand; the log is what is incomplete, and a script must know: exit 1,
    // unless --fail-on or an interrupt already says more.
    let log_failed = match &report.request_log {
        _ if reader_gone => false,
        Some(log) => match &log.error {
            Some(why) => {
                say!(
                    "httpvs: --log-file: writing failed after {} rows: {why}",
                    log.rows
                );
                true
            }
            None => false,
        },
        None => false,
    };
    if !report.requests.identity_holds {
        anyhow::bail!(
            "accounting identity broken (started != succeeded + failed + cut off): a bug"
        );
    }
    let breached: Vec<&str> = report
        .thresholds
        .iter()
        .filter(|t| t.breached)
        .map(|t| t.rule.as_str())
        .collect();
    if !breached.is_empty() {
        say!("httpvs: --fail-on breached: {}", breached.join(", "));
        return Ok(ExitCode::from(1));
    }
    if report.interrupted && !reader_gone {
        // A partial run must not pass as a whole one (a CI step killed by its timeout).
        return Ok(ExitCode::from(super::common::INTERRUPTED));
    }
    if report.no_http_answer() {
        // Nothing was measured but the wrong URL (http:// to a TLS port), as when the first
        // connection fails; the report above says so too.
        say!("httpvs: {}", httpvs_load::report::text::NOT_HTTP_NOTE);
        return Ok(ExitCode::from(1));
    }
    if log_failed || hgrm_failed {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens the `--log-file` file before the run: a path that cannot be written is one line and
/// exit 2, and costs no run. The file must not be the report's (`-o`, or stdout without it):
/// compared as files (device and inode), so `./x` against `x`, a symlink or a hard link are
/// caught too. It is emptied only once that is known.
fn open_request_log(
    path: &std::path::Path,
    report: Option<&std::path::Path>,
) -> anyhow::Result<std::sync::Arc<httpvs_load::stats::RequestLog>> {
    use std::os::unix::fs::MetadataExt;
    let cannot =
        |e: std::io::Error| usage(format!("--log-file: cannot write {}: {e}", path.display()));
    // `-` is stdout, opened by its path here (and kept as the user wrote it for messages).
    let opened = if path == std::path::Path::new("-") {
        std::path::Path::new("/dev/stdout")
    } else {
        path
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(opened)
        .map_err(cannot)?;
    let log = file.metadata().map_err(cannot)?;
    // The report's file, when it exists (an `-o` file that does not exist yet cannot be this
    // one, which exists now); stdout without -o.
    let report_file = file_id(report.unwrap_or(std::path::Path::new("/proc/self/fd/1")));
    if report_file == Some((log.dev(), log.ino())) {
        let what = match report {
            Some(report) => format!("the -o file ({})", report.display()),
            None => "stdout, where the report goes (give the report -o FILE)".to_string(),
        };
        return Err(usage(format!(
            "--log-file {} is {what}: give them different files",
            path.display()
        )));
    }
    // Our own stdout (`-`, /dev/stdout): opening its path again starts a new file position at
    // 0, and emptying it would wipe what the shell wrote before (`{ ...; httpvs ...; } > f`,
    // `>> ci.log`). The rows go to stdout itself instead, after what is there, never cut back.
    if file_id(std::path::Path::new("/proc/self/fd/1")) == Some((log.dev(), log.ino())) {
        use std::os::fd::AsFd;
        let stdout = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map_err(cannot)?;
        return Ok(httpvs_load::stats::RequestLog::new(
            "-".to_string(),
            Box::new(StdoutLog(std::fs::File::from(stdout))),
        ));
    }
    if log.is_file() {
        file.set_len(0).map_err(cannot)?;
    }
    Ok(httpvs_load::stats::RequestLog::new(
        path.display().to_string(),
        Box::new(file),
    ))
}

/// The request log on our stdout: appended to where the stream stands, and never cut back (a
/// row that failed part-way on a stream stays as it is).
struct StdoutLog(std::fs::File);

impl std::io::Write for StdoutLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl httpvs_load::stats::request_log::LogOutput for StdoutLog {
    fn cut_to(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}

/// Setup errors: the user's input exits 2, an unreachable target exits 1; both one line.
fn setup_error(e: LoadError) -> anyhow::Error {
    if e.is_interrupted() {
        super::exit_error(super::common::INTERRUPTED, e.to_string())
    } else if e.is_usage() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// Turns flags into a validated config; every problem is a one-line usage error.
fn config_from(args: &Args) -> anyhow::Result<LoadConfig> {
    let urls = request_urls(args)?;
    let Some((first, more)) = urls.split_first() else {
        return Err(usage(match &args.input_file {
            Some(path) => format!("--input-file {}: no URL in it", path.display()),
            None => "no URL given: httpvs load URL [URL...], or -i FILE with one per line".into(),
        }));
    };
    // An -i line's error says which line (a bad scheme, another origin).
    let at = |origin: &Option<String>, e: &dyn std::fmt::Display| match origin {
        Some(at) => usage(format!("{at}: {e}")),
        None => usage(e.to_string()),
    };
    let (first, first_at) = first;
    let (first, url_credentials) = take_userinfo(first)?;
    let first = first.as_str();
    if first.starts_with('/') {
        // A /path is taken against the first URL, so the first must be whole.
        let e = format!(
            "{} is a /path, taken against the first URL: give the first as a whole URL \
             (http://host:port/...), as an argument or as the file's first line",
            httpvs_load::config::shown_url(first)
        );
        return Err(at(first_at, &e));
    }
    parse_url(first).map_err(|e| at(first_at, &e))?;
    let mut config = LoadConfig::new(first).map_err(|e| at(first_at, &e))?;
    config.more_urls = more
        .iter()
        .map(|(url, origin)| config.parse_more_url(url).map_err(|e| at(origin, &e)))
        .collect::<Result<_, _>>()?;
    config.protocol = ProtocolChoice::parse(&args.protocol).ok_or_else(|| {
        usage(format!(
            "invalid --protocol {:?}: use h1, h2c, h2, h3 or auto",
            args.protocol
        ))
    })?;
    if args.h1 {
        if !matches!(args.protocol.as_str(), "auto" | "h1") {
            return Err(usage(format!(
                "--h1 (the same as -p h1) conflicts with -p {}",
                args.protocol
            )));
        }
        config.protocol = ProtocolChoice::Fixed(httpvs_load::protocol::ProtocolKind::H1);
    }
    config.connections = args.connections;
    config.streams = args.streams;
    if let Some(t) = args.threads {
        config.threads = t;
    }
    config.stop = match (args.requests, &args.duration) {
        (Some(n), _) => StopAfter::Requests(n),
        (None, Some(d)) => StopAfter::Duration(duration_flag("--duration", d)?),
        (None, None) => StopAfter::Duration(httpvs_load::config::DEFAULT_DURATION),
    };
    if let Some(w) = &args.warmup {
        let spelled = typed_spelling(&["--warmup", "--warm-up-time"]);
        config.warmup = duration_flag(spelled, w)?;
    }
    let with_body = args.request_body.given();
    let method = args
        .method
        .as_deref()
        .unwrap_or(if with_body { "POST" } else { "GET" });
    config.method = http::Method::from_bytes(method.as_bytes())
        .map_err(|_| usage(format!("invalid method {method:?}")))?;
    config.headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<anyhow::Result<_>>()?;
    let credentials = match (&args.basic_auth, url_credentials) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "credentials given twice: -a and user:password@ in the URL".to_string(),
            ))
        }
        (Some(given), None) => Some(given.clone()),
        (None, from_url) => from_url,
    };
    if let Some(credentials) = credentials {
        if config
            .headers
            .iter()
            .any(|(n, _)| n == http::header::AUTHORIZATION)
        {
            return Err(usage(
                "credentials given twice: -a (or user:password@) and -H Authorization".to_string(),
            ));
        }
        config.headers.push(basic_authorization(&credentials)?);
    }
    config.body = args.request_body.body()?;
    check_content_length(&config.headers, &config.body)?;
    config.keepalive = !args.no_keepalive;
    let timeout = duration_flag("--timeout", &args.timeout)?;
    config.timeout = (!timeout.is_zero()).then_some(timeout);
    config.connect_timeout = duration_flag("--connect-timeout", &args.connect_timeout)?;
    if let Some(path) = &args.cacert {
        check_cacert(path)?;
    }
    config.tls = TlsOptions {
        insecure: args.insecure,
        cacert: args.cacert.clone(),
        client_identity: client_identity(args.cert.as_deref(), args.key.as_deref())?,
    };
    config.rate = args.rate;
    config.zero_rtt = args.zero_rtt;
    if args.zero_rtt && !config.method.is_idempotent() {
        // RFC 8470 §2.1: early data can be replayed; only a request that may be repeated goes.
        return Err(usage(format!(
            "--0rtt with {}: 0-RTT early data can be replayed by an attacker, so only idempotent requests may go as 0-RTT (GET, HEAD, PUT, DELETE, OPTIONS, TRACE)",
            config.method
        )));
    }
    if args.no_keepalive
        && config.headers.iter().any(|(name, value)| {
            name == http::header::CONNECTION
                && value.to_str().is_ok_and(|v| {
                    v.split(',')
                        .any(|t| t.trim().eq_ignore_ascii_case("keep-alive"))
                })
        })
    {
        return Err(usage(
            "--no-keepalive with -H 'Connection: keep-alive': one asks for a connection per request, the other to keep it; give one",
        ));
    }
    config.alt_svc = args.alt_svc;
    config.windows = args.windows.windows()?;
    if let Some(list) = &args.cpus {
        config.cpus = Some(cpu_list("--cpus", list)?);
    }
    config.connect_to = args
        .connect_to
        .as_deref()
        .map(httpvs_load::connect_to::ConnectTo::parse)
        .transpose()
        .map_err(usage)?;
    if let Some(list) = &args.percentiles {
        if list.trim().is_empty() {
            return Err(usage(
                "--percentiles: the list is empty (like 50,99.9,99.999)",
            ));
        }
        config.percentiles = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.strip_prefix(['p', 'P'])
                    .unwrap_or(p)
                    .parse::<f64>()
                    .map_err(|_| {
                        usage(format!(
                            "--percentiles: cannot read {p:?} (like 50,99.9,99.999)"
                        ))
                    })
            })
            .collect::<anyhow::Result<_>>()?;
    }
    config
        .validate()
        .map_err(|e| usage(args.windows.as_given(e.to_string())))?;
    Ok(config)
}

/// The most request URLs a run takes: each is a request kept for the whole run.
const MAX_URLS: usize = 100_000;
/// The longest `--input-file` read (100,000 URLs of about 80 bytes each fit).
const MAX_URL_FILE_BYTES: u64 = 64 << 20;

/// The URLs given as arguments, then those of `--input-file`, each with where it came from
/// (`--input-file F:LINE`; none for an argument), for its errors.
fn request_urls(args: &Args) -> anyhow::Result<Vec<(String, Option<String>)>> {
    let mut urls: Vec<(String, Option<String>)> =
        args.urls.iter().map(|u| (u.clone(), None)).collect();
    if let Some(path) = &args.input_file {
        let cannot =
            |e: std::io::Error| usage(format!("cannot read --input-file {}: {e}", path.display()));
        // Bounded: a list longer than this (or /dev/zero) is refused, not read into memory.
        use httpvs_load::files;
        let read = if path.as_os_str() == "-" {
            files::read_to_limit(std::io::stdin(), MAX_URL_FILE_BYTES)
        } else {
            files::read_bounded(path, MAX_URL_FILE_BYTES)
        };
        let text = match read.and_then(files::utf8) {
            Ok(text) => text,
            // Past the limit, or not text: the file's fault, said without "cannot read".
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(usage(format!("--input-file {}: {e}", path.display())));
            }
            Err(e) => return Err(cannot(e)),
        };
        // A byte-order mark, as some editors save UTF-8, is no part of the first URL.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // Checked here, where the line is known: a URL or a /path (taken against the first URL).
            if let Err(e) = line.parse::<http::Uri>() {
                return Err(usage(format!(
                    "--input-file {}:{}: invalid URL {}: {e}",
                    path.display(),
                    number + 1,
                    httpvs_load::config::shown_url(line)
                )));
            }
            let at = format!("--input-file {}:{}", path.display(), number + 1);
            urls.push((line.to_owned(), Some(at)));
        }
    }
    if urls.len() > MAX_URLS {
        return Err(usage(format!(
            "{} URLs given; at most {MAX_URLS} (each is a request kept for the whole run)",
            urls.len()
        )));
    }
    Ok(urls)
}

/// Open files a run needs beyond one per connection and [`FDS_PER_WORKER`]: stdio, the probe
/// connection, an output file.
const FD_SLACK: u64 = 64;

/// Open files each worker thread holds: its runtime's epoll, eventfd and timer, and its watch
/// on the stop bell (measured: 5).
const FDS_PER_WORKER: u64 = 5;

/// Raises the open-file limit as far as it goes; `-c` beyond it is one clear line, not a run
/// whose connects fail as `io` errors.
/// With `--no-keepalive` each of a connection's `-m` requests has a connection of its own.
fn check_fd_limit(config: &LoadConfig) -> anyhow::Result<()> {
    let (connections, streams, keepalive) = (config.connections, config.streams, config.keepalive);
    // Never more workers than connections (as the engine plans them).
    let workers = (config.threads as u64).min(u64::from(connections));
    let (open, shape) = if keepalive {
        (u64::from(connections), format!("-c {connections}"))
    } else {
        (
            u64::from(connections) * u64::from(streams),
            format!("-c {connections} x -m {streams} with --no-keepalive"),
        )
    };
    let need = open
        .saturating_add(FD_SLACK)
        .saturating_add(workers.saturating_mul(FDS_PER_WORKER));
    let lower = if keepalive { "-c" } else { "-c or -m" };
    // A worker's runtime holds files of its own: many threads count.
    let (on, or_threads) = match workers {
        1 => (String::new(), ""),
        n => (format!(" on {n} threads"), " or -t"),
    };
    match super::common::raise_fd_limit() {
        Some(limit) if limit < need => Err(usage(format!(
            "{shape}{on} needs about {need} open files, and this process may open {limit} \
             (ulimit -n): raise the limit or lower {lower}{or_threads}"
        ))),
        _ => Ok(()),
    }
}

/// A server closing a connection we are writing to is a counted event (EPIPE), not a reason
/// to die: `main` restores SIGPIPE's default for `| head`, which would kill a load run.
/// Writes to stdout take a closed pipe for the reader's choice, so `| head` still ends quietly.
fn ignore_sigpipe() {
    // SAFETY: setting a signal disposition; no handler code runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}
