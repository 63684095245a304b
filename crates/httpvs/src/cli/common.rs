//! Flag values the subcommands share: request headers, durations, CPU lists and receive windows.

use super::usage;
use httpvs_compare::options;
use httpvs_load::protocol::window::ReceiveWindows;
use httpvs_server::query::parse_size;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Stdout for a run's report: a closed pipe (`| head`) is no error, as for any filter; any
/// other failure is kept for the caller to report once the rest is written (a full disk under
/// `> report.txt` lost the measurements and exited 0).
#[derive(Default)]
pub(super) struct Stdout {
    failed: Option<std::io::Error>,
}

impl Stdout {
    /// Writes `text` unless an earlier write failed.
    pub(super) fn put(&mut self, text: &[u8]) {
        use std::io::Write as _;
        if self.failed.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        match out.write_all(text).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => self.failed = Some(e),
            _ => {}
        }
    }

    /// The failure, if a write failed other than on a closed pipe.
    pub(super) fn result(self) -> anyhow::Result<()> {
        match self.failed {
            Some(e) => anyhow::bail!("cannot write to stdout: {e}"),
            None => Ok(()),
        }
    }
}

/// Writes `text` to stdout as [`Stdout`] does.
pub(super) fn to_stdout(text: &[u8]) -> anyhow::Result<()> {
    let mut out = Stdout::default();
    out.put(text);
    out.result()
}

/// Raises this process's open-file limit to its hard limit; returns the limit now in force
/// (`None` when it cannot be read).
pub(super) fn raise_fd_limit() -> Option<u64> {
    // SAFETY: getrlimit/setrlimit on a local struct; failure leaves the limit as it was.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return Some(raised.rlim_cur);
            }
        }
        Some(limit.rlim_cur)
    }
}

/// Whether `path` can be written, checked before a run so a bad path costs no run. Nothing the
/// user had there is changed: an existing file is opened for appending (not emptied), and only
/// a file this check created is removed again (never a device, a symlink or an older file).
pub(super) fn check_writable(flag: &str, path: &std::path::Path) -> anyhow::Result<()> {
    let cannot = |e: std::io::Error| usage(format!("{flag}: cannot write {}: {e}", path.display()));
    // A FIFO (or a device) is asked, not opened: opening a FIFO waits for a reader, and
    // closing it at once would hand that reader its end before anything was written.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|e| cannot(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
        // SAFETY: access() reads the NUL-terminated path only.
        if unsafe { libc::access(c_path.as_ptr(), libc::W_OK) } != 0 {
            return Err(cannot(std::io::Error::last_os_error()));
        }
        return Ok(());
    }
    let existed = std::fs::symlink_metadata(path).is_ok();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(cannot)?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// A file as the kernel knows it (device, inode): `./x` and `x`, a symlink and a hard link to
/// one file are the same; `None` when there is nothing at `path`.
pub(super) fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether two output paths are one file: the same file on disk, or, when one is not there
/// yet, the same file once written (`sub/../x` and `x`, a symlink and the file it names).
pub(super) fn same_path(a: &std::path::Path, b: &std::path::Path) -> bool {
    if let (Some(x), Some(y)) = (file_id(a), file_id(b)) {
        return x == y;
    }
    to_be_written(a) == to_be_written(b)
}

/// The file a write to `path` would make: symlinks followed (a dangling one names the file it
/// would create), the directory resolved, the name kept.
fn to_be_written(path: &std::path::Path) -> std::path::PathBuf {
    let mut path = path.to_path_buf();
    // As the kernel's limit on links followed.
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&path) else {
            break;
        };
        path = match path.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
    }
    let absolute = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|dir| dir.join(name))
            .unwrap_or(absolute.clone()),
        _ => absolute,
    }
}

/// Refuses an output `path` (`flag`) that is the same file as one of the run's `inputs`.
pub(super) fn refuse_input(
    flag: &str,
    path: &std::path::Path,
    inputs: &[(&str, Option<&std::path::Path>)],
) -> anyhow::Result<()> {
    let Some(out) = file_id(path) else {
        return Ok(()); // not there yet: no input can be it
    };
    for (input_flag, input) in inputs {
        if input.is_some_and(|input| file_id(input) == Some(out)) {
            return Err(usage(format!(
                "{flag} {} is the {input_flag} file: writing there would empty it; give another file",
                path.display()
            )));
        }
    }
    Ok(())
}

/// A CPU list flag like `--cpus 0,2` or `0-3`: every CPU must be one this process may run on
/// (a CPU it cannot use would make pinning fail, or silently do nothing).
pub(super) fn cpu_list(flag: &str, text: &str) -> anyhow::Result<Vec<usize>> {
    let cpus = options::parse_cpus(text).map_err(|e| usage(format!("{flag}: {e}")))?;
    let available = options::available_cpus();
    match cpus.iter().find(|c| !available.contains(c)) {
        Some(c) => Err(usage(format!(
            "{flag}: CPU {c} is not available to this process (it may use {})",
            list_text(&available)
        ))),
        None => Ok(cpus),
    }
}

/// `0-3,6` for [0, 1, 2, 3, 6].
fn list_text(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(match j > i {
            true => format!("{}-{}", cpus[i], cpus[j]),
            false => cpus[i].to_string(),
        });
        i = j + 1;
    }
    parts.join(",")
}

/// One `-H "Name: value"` flag as a header; a bad one is an exit-2 usage error.
pub(super) fn parse_header(h: &str) -> anyhow::Result<(http::HeaderName, http::HeaderValue)> {
    let bad = || usage(format!("invalid header {h:?}: use \"Name: value\""));
    // A pseudo-header's own colon comes first: `:path: /x` split as an empty name.
    if h.strip_prefix(':')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic()))
    {
        return Err(usage(format!(
            "invalid header {h:?}: pseudo-headers come from the URL and -X (:path, :authority, :method)"
        )));
    }
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    if name.trim().is_empty() {
        return Err(usage(format!(
            "invalid header {h:?}: no name before the colon"
        )));
    }
    let name = http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
        // The form is right and the name is not: say what a name may hold.
        usage(format!(
            "invalid header {h:?}: a header name is ASCII letters, digits and !#$%&'*+-.^_`|~"
        ))
    })?;
    let value = http::HeaderValue::from_str(value.trim()).map_err(|_| {
        usage(format!(
            "invalid header {h:?}: a header value is visible ASCII, spaces and tabs"
        ))
    })?;
    if name == http::header::HOST && value.is_empty() {
        // curl reads `-H "Host:"` as "send no Host"; HTTP/1.1 requires one (RFC 9112 §3.2),
        // so every request would get 400 on h1 and 200 on h2, which uses :authority.
        return Err(usage(
            "-H \"Host:\" with no value: HTTP/1.1 needs a Host (httpvs takes it from the URL); give a name, or --connect-to to send the URL's name to another address",
        ));
    }
    if name == http::header::HOST && !is_host_and_port(&value) {
        // h2 and h3 carry Host as :authority, which must be host[:port]; such a value would go
        // out as is on h1 (and get 400) while h2 and h3 fell back to the URL's authority.
        return Err(usage(format!(
            "invalid header {h:?}: a Host is a host name or address with an optional :port"
        )));
    }
    Ok((name, value))
}

/// `host[:port]`: an authority without userinfo (which RFC 9113 forbids in `:authority` and
/// servers answer 400 on HTTP/1.1), with a port of digits if any.
fn is_host_and_port(value: &http::HeaderValue) -> bool {
    let Ok(text) = value.to_str() else {
        return false;
    };
    let Ok(authority) = text.parse::<http::uri::Authority>() else {
        return false;
    };
    // What follows the host: nothing, or `:` and a port of digits (`x:8o` parses).
    let after = text.get(authority.host().len()..).unwrap_or("");
    let port_ok = match after.strip_prefix(':') {
        None => after.is_empty(),
        Some(port) => httpvs_load::config::parse_port(port).is_some(),
    };
    !text.contains('@') && port_ok
}

/// `-d` and `--data-file`, as `load` and `trace` take them.
#[derive(clap::Args, Debug)]
pub struct BodyFlags {
    /// Request body (`@FILE` reads FILE; a body may start with `-`, as curl takes it).
    #[arg(
        short = 'd',
        long,
        value_name = "DATA",
        conflicts_with = "data_file",
        allow_hyphen_values = true
    )]
    pub data: Option<String>,
    /// Request body read from FILE.
    #[arg(long, value_name = "FILE")]
    pub data_file: Option<std::path::PathBuf>,
}

impl BodyFlags {
    /// Whether a body was given.
    pub fn given(&self) -> bool {
        self.data.is_some() || self.data_file.is_some()
    }

    /// The file `-d @FILE` reads (not `@-`, stdin).
    pub fn at_file(&self) -> Option<&std::path::Path> {
        self.data
            .as_deref()?
            .strip_prefix('@')
            .filter(|path| *path != "-")
            .map(std::path::Path::new)
    }

    /// The request body (empty without either flag). `-d @FILE` reads FILE (`@-` stdin), as
    /// curl's does.
    pub fn body(&self) -> anyhow::Result<bytes::Bytes> {
        let read = |named: &str, path: &std::path::Path| {
            httpvs_load::files::read_bounded(path, MAX_BODY_FILE_BYTES)
                .map(bytes::Bytes::from)
                .map_err(|e| usage(format!("cannot read {named}: {e}")))
        };
        match (self.data.as_deref(), self.data_file.as_deref()) {
            (Some("@-"), _) => read("-d @- (stdin)", std::path::Path::new("/dev/stdin")),
            (Some(d), _) => match self.at_file() {
                Some(path) => read(&format!("-d {d}"), path),
                None => {
                    check_body_is_meant(d, typed_spelling(&["--data", "-d"]))?;
                    Ok(bytes::Bytes::from(d.to_owned().into_bytes()))
                }
            },
            (None, Some(path)) => read(&format!("--data-file {}", path.display()), path),
            (None, None) => Ok(bytes::Bytes::new()),
        }
    }
}

/// `--window SIZE` and `--connection-window SIZE`, as `load` and `trace` take them. Boxed
/// where they are flattened: `load`'s flags are the largest subcommand's.
#[derive(clap::Args, Debug)]
pub struct WindowFlags {
    /// h2/h3 receive window per stream, like 64k (about h2load's -w 16, which is 2^16-1 =
    /// 65535), 6m or 1g [default: 2^30-1 on h2, as h2load; quinn's 1,250,000 on h3].
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    window: Option<String>,
    /// h2/h3 receive window per connection, like 15m (h2load's -W; at least 65535 on h2, whose
    /// connection window starts there) [default: 2^30-1 on h2, as h2load; no limit on h3].
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    connection_window: Option<String>,
    /// h2load's spelling: a stream window of 2^N-1 bytes (`-w 16` is `--window 65535`).
    #[arg(short = 'w', long = "window-bits", value_name = "N", hide = true)]
    window_bits: Option<u32>,
    /// h2load's spelling: a connection window of 2^N-1 bytes.
    #[arg(
        short = 'W',
        long = "connection-window-bits",
        value_name = "N",
        hide = true
    )]
    connection_window_bits: Option<u32>,
}

impl WindowFlags {
    /// A window error in the spelling the user gave: h2load's `-w N`/`-W N` are checked as
    /// `--window`/`--connection-window` of 2^N-1 bytes, and the line named those instead; a
    /// size typed with a unit (`3g`) is checked in bytes, and the line showed only those.
    pub fn as_given(&self, text: String) -> String {
        let mut text = text;
        for (typed, long) in [
            (&self.window, "--window"),
            (&self.connection_window, "--connection-window"),
        ] {
            let Some(typed) = typed.as_deref() else {
                continue;
            };
            if let Ok(bytes) = parse_size(typed) {
                if typed != bytes.to_string() {
                    text = text.replace(
                        &format!("{long} {bytes}"),
                        &format!("{long} {typed} ({bytes} bytes)"),
                    );
                }
            }
        }
        for (bits, short, long) in [
            (self.window_bits, "-w", "--window"),
            (self.connection_window_bits, "-W", "--connection-window"),
        ] {
            if let Some(n) = bits.filter(|n| (1..=30).contains(n)) {
                let bytes = (1u64 << n) - 1;
                text = text
                    .replace(
                        &format!("{long} {bytes}"),
                        &format!("{short} {n} ({long} {bytes})"),
                    )
                    .replace(&format!("{long} needs"), &format!("{short} needs"));
            }
        }
        text
    }

    /// The sizes (`64k`, `6m`, `65535`; binary multiples, as `serve --max-body-bytes` reads
    /// them); their range and protocol are checked with the rest of the config
    /// (`ReceiveWindows::check`).
    pub(super) fn windows(&self) -> anyhow::Result<ReceiveWindows> {
        let size = |flag: &str, text: &Option<String>| {
            text.as_deref()
                .map(|t| parse_size(t).map_err(|e| usage(format!("{flag}: {e}"))))
                .transpose()
        };
        // h2load's -w/-W: 2^N-1 bytes, N up to 30 (its limit) and at least 1.
        let bits = |flag: &str, n: Option<u32>| match n {
            Some(n @ 1..=30) => Ok(Some((1u64 << n) - 1)),
            Some(n) => Err(usage(format!(
                "{flag} {n}: use 1 to 30 (a window of 2^N-1 bytes)"
            ))),
            None => Ok(None),
        };
        // Checked here, not by clap, whose line would name the hidden `--window-bits`.
        let twice = |short: &str, long: &str| {
            usage(format!(
                "{short} and {long} both set the {} window: give one",
                if long == "--window" {
                    "stream"
                } else {
                    "connection"
                }
            ))
        };
        if self.window_bits.is_some() && self.window.is_some() {
            return Err(twice("-w", "--window"));
        }
        if self.connection_window_bits.is_some() && self.connection_window.is_some() {
            return Err(twice("-W", "--connection-window"));
        }
        Ok(ReceiveWindows {
            stream: match bits("-w", self.window_bits)? {
                Some(w) => Some(w),
                None => size("--window", &self.window)?,
            },
            connection: match bits("-W", self.connection_window_bits)? {
                Some(w) => Some(w),
                None => size("--connection-window", &self.connection_window)?,
            },
        })
    }
}

/// A duration flag like `--timeout 10s`; a bad one is an exit-2 usage error naming the flag.
pub(super) fn duration_flag(flag: &str, s: &str) -> anyhow::Result<Duration> {
    parse_duration(s).ok_or_else(|| {
        usage(format!(
            "invalid {flag} {s:?}: a number with a unit (us, ms, s, m or h; under 31 years; a bare number is seconds), like 500ms, 10s or 1m"
        ))
    })
}

/// Which of a flag's long spellings the command line used last (`spellings[0]` when none is
/// found), so an error names the flag as the user typed it: h2load users write --warm-up-time.
pub(super) fn typed_spelling(spellings: &[&'static str]) -> &'static str {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    last_spelling(&args, spellings)
}

fn last_spelling(args: &[String], spellings: &[&'static str]) -> &'static str {
    args.iter()
        .rev()
        .find_map(|arg| {
            let name = arg.split('=').next().unwrap_or(arg);
            spellings.iter().find(|s| **s == name).copied()
        })
        .unwrap_or(spellings[0])
}

/// "500ms", "10s", "1.5m", "1h", "800us"; a bare number is seconds.
pub(super) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let secs = value * scale;
    (0.0..1e9)
        .contains(&secs)
        .then(|| Duration::from_secs_f64(secs))
}

/// The exit status of a run stopped by Ctrl-C, SIGTERM or SIGHUP (a shell's 128 + SIGINT), after
/// its report: a partial run must not pass as a whole one.
pub(super) const INTERRUPTED: u8 = 130;

/// The flag the first Ctrl-C (or SIGTERM, or SIGHUP) sets: the run stops and reports what it did
/// (`load`, `compare`, `trace`). A second one kills the process, unless it came within 300 ms of
/// the first: then it is the same stop sent twice (`timeout` signals the command, then its
/// process group).
pub(super) fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    // CLOCK_MONOTONIC ns of the first signal, 0 before it.
    static FIRST: AtomicU64 = AtomicU64::new(0);
    fn monotonic_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime is async-signal-safe and writes only `ts`.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
            .max(1)
    }
    extern "C" fn on_signal(signal: libc::c_int) {
        let now = monotonic_ns();
        let first = FIRST.load(Ordering::Relaxed);
        if first == 0 {
            FIRST.store(now, Ordering::Relaxed);
            if let Some(flag) = FLAG.get() {
                flag.store(true, Ordering::Relaxed);
            }
            // The workers look at the flag every 100 ms; the bell wakes them now.
            httpvs_load::engine::stop_bell::ring();
            return;
        }
        // `timeout` signals its command and then the command's process group, and a shell's
        // hang-up reaches the group too: a signal right after the first is the same stop sent
        // twice, which must not kill the run before its report (7 runs in 20 lost it).
        if now.saturating_sub(first) < SAME_STOP_NS {
            return;
        }
        // A second Ctrl-C: leave at once, as the default action does.
        // SAFETY: signal() and raise() are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    let flag = FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    // Before the handlers: they ring it.
    httpvs_load::engine::stop_bell::install();
    // Ctrl-C, SIGTERM as `timeout` and service managers send it, and SIGHUP as a closed
    // terminal or ssh session sends it: each ends the run with its report, so a long compare
    // still writes its JSON and HTML (a hang-up used to kill it with nothing written; `netem`
    // already passes SIGHUP on as a stop).
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing a handler that only reads the clock, stores to atomics, writes
        // to the stop bell's eventfd and calls signal() and raise().
        unsafe {
            libc::signal(
                signal,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    flag
}

/// Signals this soon after the first are the same stop sent twice (as `serve` takes them).
const SAME_STOP_NS: u64 = 300_000_000;

/// Splits `user:password@` off a URL's authority, as curl does (percent-escapes decoded):
/// the URL without it, and the credentials.
pub(super) fn take_userinfo(url: &str) -> anyhow::Result<(String, Option<String>)> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return Ok((url.to_string(), None));
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return Ok((url.to_string(), None));
    };
    let without = format!("{}{}", &url[..scheme_end], &rest[at + 1..]);
    // The password stays out of the error line.
    let mut userinfo = percent_decode(&rest[..at]).ok_or_else(|| {
        usage(format!(
            "invalid URL {without:?} with user:password@: a bad %-escape in its user part"
        ))
    })?;
    // `user@` is a user with an empty password, as curl takes it.
    if !userinfo.contains(':') {
        userinfo.push(':');
    }
    Ok((without, Some(userinfo)))
}

/// Decodes %XX escapes (two hex digits each); `None` for a broken escape or bytes that are
/// not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The `Authorization: Basic` header for `USER:PASSWORD`.
pub(super) fn basic_authorization(
    credentials: &str,
) -> anyhow::Result<(http::HeaderName, http::HeaderValue)> {
    use base64::Engine;
    if !credentials.contains(':') {
        return Err(usage(
            "-a needs USER:PASSWORD (a colon between them; the password may be empty)".to_string(),
        ));
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    let value = http::HeaderValue::from_str(&format!("Basic {encoded}"))
        .map_err(|e| usage(format!("-a: {e}")))?;
    Ok((http::header::AUTHORIZATION, value))
}

/// `--cert` and `--key`, the client certificate shown to a server that asks for one (mutual
/// TLS): both or neither, read and checked as a pair the way `serve --cert` reads its own (the
/// file at fault named, an encrypted key said to be one), so a bad pair is one line before any
/// connection.
pub(super) fn client_identity(
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
) -> anyhow::Result<Option<Arc<httpvs_load::protocol::tls::ClientIdentity>>> {
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(usage("--cert needs --key, the certificate's private key")),
        (None, Some(_)) => return Err(usage("--key needs --cert, the certificate it belongs to")),
        (Some(cert), Some(key)) => (cert, key),
    };
    // With its cause, as serve says it: "cannot read --cert x.pem: No such file or directory".
    let said = |e: httpvs_server::ServeError| usage(format!("{:#}", anyhow::Error::new(e)));
    let (cert_pem, key_pem) = httpvs_server::cert::read_pem_files(cert, key).map_err(said)?;
    let pair =
        httpvs_server::cert::ServerCert::from_pem(&cert_pem, &key_pem, cert, key).map_err(said)?;
    let (chain, key) = pair.into_parts();
    Ok(Some(Arc::new(httpvs_load::protocol::tls::ClientIdentity {
        chain,
        key,
    })))
}

/// `--cacert` names a regular file (its PEM is read later): a usage error says what it is not.
pub(super) fn check_cacert(path: &std::path::Path) -> anyhow::Result<()> {
    let why = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            return httpvs_load::protocol::tls::check_ca_file(path)
                .map_err(|e| usage(format!("--cacert: {e}")));
        }
        Ok(meta) if meta.is_dir() => "a directory, not a PEM file",
        // Every connection's TLS set-up reads it again, which a pipe allows once.
        Ok(_) => {
            "not a regular file (a PEM file of CA certificates; it is read again for each \
             client set-up, which a pipe or <(cmd) cannot be: save it to a file)"
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such file",
        Err(_) => "cannot be read",
    };
    Err(usage(format!("--cacert {}: {why}", path.display())))
}

/// The largest `--data-file` (one copy is shared by every request).
const MAX_BODY_FILE_BYTES: u64 = 256 << 20;

/// `-d VALUE` is the body itself here, as in curl, hey and oha. Two peers spell other things
/// `-d`: wrk's `-d 2s` is a duration, and h2load's `-d FILE` (or `-`) posts a file. Such a
/// value would go out as a 2-byte body without a word, so it is refused with the way to say
/// either.
fn check_body_is_meant(data: &str, spelled: &str) -> anyhow::Result<()> {
    let has_unit = data.ends_with(|c: char| c.is_ascii_alphabetic());
    if spelled == "-d" && has_unit && parse_duration(data).is_some() {
        return Err(usage(format!(
            "-d {data:?} would be the request body (-d is the body, as in curl, hey and oha); wrk's -d DURATION is -z {data} here; to send the body {data}, use --data {data}"
        )));
    }
    // h2load spells its file `-d` and `--data` alike: the refusal names the spelling typed.
    if data == "-" {
        return Err(usage(format!(
            "{spelled} \"-\" would be the request body ({spelled} is the body, as in curl, hey and oha); to send stdin as h2load's {spelled} - does, use -d @-"
        )));
    }
    if data.len() < 4096 && std::path::Path::new(data).is_file() {
        return Err(usage(format!(
            "{spelled} {data:?} would be the request body ({spelled} is the body, as in curl, hey and oha); to send a file as h2load's {spelled} does, use -d @{data} or --data-file {data}"
        )));
    }
    Ok(())
}

/// A `-H Content-Length` that disagrees with the body would leave the server waiting for bytes
/// that never come (or reading the next request as body): every request would fail the same
/// way. httpvs sets the length itself; one that agrees is taken as given.
pub(super) fn check_content_length(
    headers: &[(http::HeaderName, http::HeaderValue)],
    body: &[u8],
) -> anyhow::Result<()> {
    let named = |wanted: &http::HeaderName| headers.iter().find(|(n, _)| n == wanted);
    if let Some((_, value)) = named(&http::header::TRANSFER_ENCODING) {
        // HTTP/1.1 sends the body in chunks then; h2 and h3 have no Transfer-Encoding and
        // leave the header out.
        if !httpvs_load::protocol::h1::ends_in_chunked(value.as_bytes()) {
            let text = String::from_utf8_lossy(value.as_bytes());
            return Err(usage(format!(
                "-H Transfer-Encoding: {text} must end in chunked (RFC 9112 §6.1), or leave it out (httpvs sets Content-Length)"
            )));
        }
        if named(&http::header::CONTENT_LENGTH).is_some() {
            return Err(usage(
                "-H Transfer-Encoding and -H Content-Length together: give one (a server must refuse both, RFC 9112 §6.1)",
            ));
        }
    }
    for (name, value) in headers {
        if name == http::header::CONTENT_LENGTH
            && value.as_bytes() != body.len().to_string().as_bytes()
        {
            return Err(usage(format!(
                "-H Content-Length: {} disagrees with the body's {} bytes: leave it out (httpvs sets it)",
                String::from_utf8_lossy(value.as_bytes()),
                body.len()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5m"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("ten"), None);
        assert_eq!(parse_duration("5y"), None);
    }

    /// A Host h2 and h3 can carry as :authority, as h1 servers take it: no userinfo, a
    /// numeric port.
    #[test]
    fn a_host_header_is_host_and_port() {
        let host = |v: &str| parse_header(&format!("Host: {v}")).is_ok();
        for good in ["x", "example.com:8080", "[::1]:80", "127.0.0.1"] {
            assert!(host(good), "{good}");
        }
        for bad in ["a b", "a@b", "user:pw@x", "x:8o", "x/y"] {
            assert!(!host(bad), "{bad}");
        }
    }

    #[test]
    fn errors_name_the_spelling_typed_last() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let both = ["--warmup", "--warm-up-time"];
        assert_eq!(
            last_spelling(&args(&["--warm-up-time", "1x"]), &both),
            "--warm-up-time"
        );
        assert_eq!(
            last_spelling(&args(&["--warm-up-time=1x"]), &both),
            "--warm-up-time"
        );
        let later = args(&["--warm-up-time", "1s", "--warmup", "1x"]);
        assert_eq!(last_spelling(&later, &both), "--warmup");
        assert_eq!(last_spelling(&args(&["-z", "1s"]), &both), "--warmup");
    }

    /// h2load posts a file by `-d FILE` and `--data FILE` alike: the refusal says the spelling
    /// typed (it said `-d` after `--data ca.pem`).
    #[test]
    fn a_body_that_names_a_file_is_refused_in_the_spelling_typed() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        for spelled in ["--data", "-d"] {
            let err = check_body_is_meant(file, spelled).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{spelled} \"")), "{err}");
            assert!(err.contains(&format!("h2load's {spelled} does")), "{err}");
            let err = check_body_is_meant("-", spelled).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{spelled} \"-\"")), "{err}");
        }
        // wrk's `-d 2s` is refused only as `-d`: `--data 2s` is a body of "2s".
        assert!(check_body_is_meant("2s", "-d").is_err());
        assert!(check_body_is_meant("2s", "--data").is_ok());
    }

    #[test]
    fn cpu_lists_are_checked_against_this_machine() {
        assert_eq!(list_text(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(cpu_list("--cpus", "0").ok(), Some(vec![0]));
        assert!(cpu_list("--cpus", "3-1").is_err());
        let err = cpu_list("--cpus", "4095").unwrap_err().to_string();
        assert!(err.contains("CPU 4095 is not available"), "{err}");
    }
}
