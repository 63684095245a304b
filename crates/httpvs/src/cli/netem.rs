//! `httpvs netem`: flags, validation into the library config, and the run of a command behind the link.

use super::{usage, ExitError};
use anyhow::Context;
use httpvs_netem::{Impairment, Link, LinkConfig, Profile, PROFILES};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Instant;

/// Flags of `httpvs netem`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Inside the emulated network, 127.0.0.1:PORT reaches this host's 127.0.0.1:PORT \
through the link ([::1]:PORT too, with nft installed), so `httpvs netem --both \"delay 50ms\" -- curl http://127.0.0.1:8080/` \
sees a 100 ms round trip. Needs root, or (rootless) unprivileged user namespaces and a usable \
/dev/net/tun. Options use netem's syntax (man tc-netem)."
)]
pub struct Args {
    /// netem options for packets from the command to the server, e.g. "delay 50ms 5ms loss 1%".
    #[arg(long, value_name = "NETEM")]
    up: Option<String>,
    /// netem options for packets from the server back to the command.
    #[arg(long, value_name = "NETEM")]
    down: Option<String>,
    /// netem options for both directions (--up and --down override it).
    #[arg(long, value_name = "NETEM")]
    both: Option<String>,
    /// A named network (see --profiles); --both, --up and --down override its directions.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// List the named profiles and exit.
    #[arg(long)]
    profiles: bool,
    /// Seed of the random choices, to repeat a run exactly (default: random, printed at exit).
    #[arg(long)]
    seed: Option<u64>,
    /// MTU of the emulated link in bytes.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(576..=65535))]
    mtu: u32,
    /// Print nothing of our own (no banner, no counters).
    #[arg(long, short)]
    quiet: bool,
    /// The command to run behind the link (after `--`, or simply after the options).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

impl Args {
    /// Whether a link will be built (not for `--profiles` or a missing command).
    pub fn wants_emulated_link(&self) -> bool {
        !self.profiles && !self.command.is_empty()
    }
}

/// Runs `httpvs netem`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.profiles {
        let link_flags = [&args.up, &args.down, &args.both, &args.profile];
        if link_flags.iter().any(|f| f.is_some()) || args.seed.is_some() || !args.command.is_empty()
        {
            // Listed and exited 0, a bad spec beside it went unchecked and a command unrun.
            return Err(usage(
                "--profiles lists the named profiles and runs nothing: give it alone",
            ));
        }
        print_profiles();
        return Ok(ExitCode::SUCCESS);
    }
    let config = link_config(&args)?;
    // The loopback forwarder holds sockets for every connection and flow it carries: at the
    // usual 1024, `-c 1500` over [::1] lost a third of its requests. The command gets the
    // limit it was given (`run_command`).
    let user_files = files_limit();
    super::common::raise_fd_limit();
    let Some((program_os, program_args)) = args.command.split_first() else {
        return Err(usage(
            "give the command to run after `--`, e.g. httpvs netem --both \"delay 50ms\" -- curl http://127.0.0.1:8080/",
        ));
    };
    // Words are passed on as they came, UTF-8 or not (a file name); ours are read as text.
    let program = &*program_os.to_string_lossy();
    // After `--` a word is the command, whatever it looks like (as for a shell's `exec --`).
    if program.starts_with('-') && !follows_double_dash(program_os) {
        // The command starts at the first word that is not one of our options: this one is an
        // option we do not know. An impairment spelled as a flag (`--delay 50ms`, as other
        // tools take it) is shown the way it goes here.
        // The netem parser decides, so the hint knows every keyword it does.
        let spelled = program_args.first().map_or_else(
            || program.trim_start_matches('-').to_string(),
            |value| {
                format!(
                    "{} {}",
                    program.trim_start_matches('-'),
                    value.to_string_lossy()
                )
            },
        );
        if httpvs_netem::Impairment::parse(&spelled).is_ok() {
            return Err(usage(format!(
                "unknown option {program}: impairments go in --up, --down or --both, like --both \"{spelled}\""
            )));
        }
        return Err(usage(format!(
            "unknown option {program} (httpvs netem --help lists them; the command comes after)"
        )));
    }
    // Before the link and its banner: a typo'd command is one line, exit 127 as a shell's (126
    // for one found but not runnable, as a shell says "Permission denied" or "Is a directory").
    let refused = |code, why: &str| {
        Err(anyhow::Error::new(ExitError {
            code,
            message: format!("cannot run `{program}`: {why}"),
        }))
    };
    match lookup(program_os) {
        Lookup::Runnable => {}
        Lookup::NotFound => return refused(127, "not found"),
        Lookup::Directory => return refused(126, "a directory, not a program"),
        Lookup::NotExecutable => return refused(126, "not executable"),
    }
    // After every check that may refuse the run: a refusal is its one line alone.
    if !args.quiet {
        let given = [
            ("--up", &args.up),
            ("--down", &args.down),
            ("--both", &args.both),
        ];
        for (flag, spec) in given {
            for note in spec
                .as_deref()
                .map(Impairment::unitless)
                .unwrap_or_default()
            {
                say!("httpvs netem: note: {flag} {note}");
            }
        }
        if args.mtu < QUIC_MIN_MTU {
            say!(
                "httpvs netem: note: --mtu {} is below {QUIC_MIN_MTU}: QUIC (HTTP/3) needs its \
                 1200-byte datagrams whole (RFC 9000 §14), so no QUIC connection completes",
                args.mtu
            );
        }
    }
    let (up, down) = (config.up.clone(), config.down.clone());
    let link = Link::start(config).context("netem")?;
    // A direction whose options name a `seed` draws from that one, not from the link's.
    let seed = link.seed();
    let (seeds, repeat) = match (up.seed, down.seed) {
        (None, None) => (format!("seed {seed}"), format!("--seed {seed}")),
        (Some(u), None) => (
            format!("seed {u} up (its options), {seed} down"),
            format!("--seed {seed}"),
        ),
        (None, Some(d)) => (
            format!("seed {seed} up, {d} down (its options)"),
            format!("--seed {seed}"),
        ),
        (Some(u), Some(d)) => (
            format!("seed {u} up, {d} down (their options)"),
            "the same options".to_string(),
        ),
    };
    if !args.quiet {
        say!("httpvs netem: up: {up} | down: {down} | {seeds}");
        let via = if httpvs_netem::rootless::is_inside() {
            "rootless: a forwarder at the link's far end carries it on, so the server sees 127.0.0.1"
                .to_string()
        } else {
            format!("client address {}", link.addresses().client)
        };
        say!(
            "httpvs netem: 127.0.0.1:PORT reaches this host's 127.0.0.1:PORT through the link ({via}){}",
            ipv6_note(&link)
        );
    }
    let started = Instant::now();
    let status = run_command(&link, program_os, program_args, user_files);
    let elapsed = started.elapsed();
    // What the command started and left running would keep the namespace (and itself) alive
    // after us: it ends with the command, as a service manager ends a unit's processes.
    let left = link.end_client_processes(std::time::Duration::from_secs(1));
    if left > 0 && !args.quiet {
        say!(
            "httpvs netem: ended {left} process{} the command left running behind the link (SIGTERM, then SIGKILL after 1 s)",
            if left == 1 { "" } else { "es" }
        );
    }
    let status = status?;
    // Let the command's last packets (its FIN, final ACKs) reach the server before the link goes,
    // for up to 2 s (a `delay 5s` link holds them longer), unless Ctrl-C says not to wait.
    link.drain(std::time::Duration::from_secs(2), &CUT_DRAIN);
    if let Some(why) = link.relay_failure() {
        say!(
            "httpvs netem: warning: the link's relay stopped ({why}): that direction carried nothing after it, and its counters stopped there"
        );
    }
    let counters = link.stop();
    if !args.quiet {
        say!(
            "httpvs netem: {:.2} s, {seeds} ({repeat} {} the same choices)",
            elapsed.as_secs_f64(),
            if repeat.starts_with("--seed") {
                "repeats"
            } else {
                "repeat"
            }
        );
        say_raw!("{counters}");
    }
    Ok(ExitCode::from(exit_code(status)))
}

/// The least MTU that carries QUIC's smallest allowed datagram, 1200 bytes, over IPv4 (20
/// bytes of IP header, 8 of UDP).
const QUIC_MIN_MTU: u32 = 1228;

/// What the banner says of `[::1]`: carried too, or why not.
fn ipv6_note(link: &Link) -> String {
    match link.ipv6_unavailable() {
        None => "; [::1]:PORT likewise".into(),
        Some(why) => format!("; [::1] is not carried: {why}"),
    }
}

/// Turns the flags into the link's config: profile first, then --both, then --up/--down.
fn link_config(args: &Args) -> anyhow::Result<LinkConfig> {
    if args.up.is_some() && args.down.is_some() {
        // Replaced both ways, it would go unread: a typo in it unseen, its notes printed for
        // options no direction uses.
        let unused = match (&args.both, &args.profile) {
            (Some(_), _) => Some("--both"),
            (None, Some(_)) => Some("--profile"),
            (None, None) => None,
        };
        if let Some(flag) = unused {
            return Err(usage(format!(
                "{flag} is not used: --up and --down each replace it; give --up and --down, \
                 or {flag} with one of them"
            )));
        }
    }
    if args.profile.is_some() && args.both.is_some() {
        // `--profile 3g --both "loss 1%"` read as 3g with loss ran a link of loss alone.
        return Err(usage(
            "--profile is not used: --both replaces both its directions (options are not added \
             to a profile's); give the profile's options with yours in --both (see --profiles), \
             or --up/--down to replace one direction"
                .to_string(),
        ));
    }
    let (mut up, mut down) = (String::new(), String::new());
    if let Some(name) = &args.profile {
        let profile = Profile::find(name).ok_or_else(|| {
            let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            usage(format!(
                "unknown profile `{name}` (known: {})",
                names.join(", ")
            ))
        })?;
        up = profile.up.into();
        down = profile.down.into();
    }
    if let Some(both) = &args.both {
        up.clone_from(both);
        down.clone_from(both);
    }
    if let Some(text) = &args.up {
        up.clone_from(text);
    }
    if let Some(text) = &args.down {
        down.clone_from(text);
    }
    let parse = |flag: &str, text: &str| {
        Impairment::parse(text).map_err(|e| usage(format!("{flag} \"{text}\": {e}")))
    };
    let up_flag = if args.up.is_some() { "--up" } else { "--both" };
    let down_flag = if args.down.is_some() {
        "--down"
    } else {
        "--both"
    };
    let mut config = LinkConfig::new(parse(up_flag, &up)?, parse(down_flag, &down)?);
    if let Some(seed) = args.seed {
        // Each direction's own `seed` wins: with both named, --seed would be dropped unseen.
        if config.up.seed.is_some() && config.down.seed.is_some() {
            return Err(usage(format!(
                "--seed {seed} is not used: both directions name a `seed` in their options; \
                 give the seed in one place"
            )));
        }
        config.seed = seed;
    }
    config.mtu = args.mtu;
    Ok(config)
}

/// The interpreter a script's `#!` line names, when running it failed as "not found" while
/// the script itself is there.
fn bad_interpreter(program: &OsStr, e: &std::io::Error) -> Option<String> {
    use std::io::Read as _;
    if e.kind() != std::io::ErrorKind::NotFound {
        return None;
    }
    let path = match program.as_bytes().contains(&b'/') {
        true => std::path::PathBuf::from(program),
        false => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())?,
    };
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interpreter = String::from_utf8_lossy(line);
    interpreter.split_whitespace().next().map(str::to_string)
}

/// Whether `program` is the first word after a `--` on the command line (clap drops the `--`).
fn follows_double_dash(program: &OsStr) -> bool {
    let words: Vec<std::ffi::OsString> = std::env::args_os().collect();
    words
        .iter()
        .position(|w| w == "--")
        .and_then(|i| words.get(i + 1))
        .is_some_and(|next| next == program)
}

fn print_profiles() {
    for p in PROFILES {
        println!("{:<10} {}", p.name, p.about);
        if p.up == p.down {
            println!("{:<10} both: {}", "", p.up);
        } else {
            println!("{:<10} up:   {}", "", p.up);
            println!("{:<10} down: {}", "", p.down);
        }
    }
}

/// The child's pid while it runs, for the signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Set by a signal that comes once the command has ended: stop waiting for the link to drain.
static CUT_DRAIN: AtomicBool = AtomicBool::new(false);

/// A stop signal that came while the command was being started (its pid not yet in
/// [`CHILD`]): whoever takes it, the handler or `run_command`, passes it on, once.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // A signal the terminal sent (Ctrl-C, Ctrl-\, hang-up) went to its whole foreground
        // process group, the command included: passing it on would deliver it twice, and a
        // second Ctrl-C means "force quit" to many programs. Only signals sent to us alone
        // (kill PID, a supervisor's SIGTERM) are passed on.
        // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
        let from_terminal = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
        if !from_terminal {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(pid, signal) };
        }
    } else {
        CUT_DRAIN.store(true, Ordering::Relaxed);
        // Between the spawn and the pid's store the command runs but cannot be reached (it
        // slept its 30 s out): keep the signal, and if the pid came meanwhile, send it now.
        PENDING.store(signal, Ordering::SeqCst);
        let pid = CHILD.load(Ordering::SeqCst);
        if pid > 0 {
            let pending = PENDING.swap(0, Ordering::SeqCst);
            if pending != 0 {
                // SAFETY: kill is async-signal-safe.
                unsafe { libc::kill(pid, pending) };
            }
        }
    }
}

/// Whether `signal` is ignored (SIG_IGN) in this process.
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a query (no new action) into a zeroed struct of the right type.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// The open-file limit this process was started with.
fn files_limit() -> Option<libc::rlimit> {
    // SAFETY: getrlimit fills a local struct.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0).then_some(limit)
    }
}

/// Runs the command in the client's namespace with the open-file limit `user_files` (ours is
/// raised for the forwarder); signals meant for us go to it, so Ctrl-C ends the command and
/// we still print the counters and clean up.
fn run_command(
    link: &Link,
    program: &OsStr,
    args: &[OsString],
    user_files: Option<libc::rlimit>,
) -> anyhow::Result<ExitStatus> {
    // Passed on to the command (those a terminal sends reach it directly); any of them ends
    // httpvs's own wait too, so the link is always taken down. SIGKILL cannot be caught.
    for signal in httpvs_netem::rootless::STOP_SIGNALS {
        // One ignored when we started (`nohup`, `trap "" INT`) stays ignored, for the command
        // too, as a shell would leave it: a handler here would be reset to the default at exec.
        if ignored(signal) {
            continue;
        }
        // SAFETY: installing a handler that only reads an atomic, the siginfo it is given,
        // and calls kill; the sigaction struct is fully initialised.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = forward_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    let mut command = Command::new(program);
    command.args(args);
    if let Some(limit) = user_files {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and reads a struct copied into the closure.
        unsafe {
            command.pre_exec(move || {
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                Ok(())
            });
        }
    }
    let mut child = link.spawn_in_client_ns(&mut command).map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        // The program was found (checked before the link), so "not found" is its `#!`
        // interpreter's, as a shell says "bad interpreter".
        let why = match bad_interpreter(program, &e) {
            Some(interpreter) => {
                format!("its #! line names {interpreter}, which is not there (bad interpreter)")
            }
            None => e.to_string(),
        };
        anyhow::Error::new(ExitError {
            code,
            message: format!("cannot run `{}`: {why}", program.to_string_lossy()),
        })
    })?;
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    // A signal that came while it started.
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, pending) };
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{}`", program.to_string_lossy()));
    CHILD.store(0, Ordering::SeqCst);
    status
}

/// What `execvp` would make of a command name.
#[derive(Debug, PartialEq, Eq)]
enum Lookup {
    Runnable,
    NotFound,
    Directory,
    NotExecutable,
}

/// Looks `program` up as `execvp` would: a path as it is, a bare name in PATH.
fn lookup(program: &OsStr) -> Lookup {
    use std::os::unix::fs::PermissionsExt;
    let at = |p: &std::path::Path| match std::fs::metadata(p) {
        Err(_) => Lookup::NotFound,
        Ok(m) if m.is_dir() => Lookup::Directory,
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Lookup::Runnable,
        Ok(_) => Lookup::NotExecutable,
    };
    if program.as_bytes().contains(&b'/') {
        return at(std::path::Path::new(program));
    }
    // execvp's own default when PATH is unset; it skips directories and files it cannot run.
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    let found: Vec<Lookup> = std::env::split_paths(&path)
        .map(|dir| at(&dir.join(program)))
        .collect();
    if found.contains(&Lookup::Runnable) {
        Lookup::Runnable
    } else if found.contains(&Lookup::NotExecutable) {
        Lookup::NotExecutable
    } else {
        Lookup::NotFound
    }
}

/// The command's exit code, or 128 + signal as a shell reports it.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => (128 + signal) as u8,
        _ => 1,
    }
}
