//! `httpvs serve`: flags, validation into the library config, and the run until SIGINT/SIGTERM.

use super::common::cpu_list;
use super::usage;
use httpvs_server::query::parse_size;
use httpvs_server::{H2Engine, Limits, ServeConfig};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `httpvs serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Cleartext TCP listener for HTTP/1.1 and h2c prior knowledge: ADDR, PORT or `off`.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8080",
        allow_negative_numbers = true
    )]
    http: String,
    /// TLS listener for h2 and http/1.1 (by ALPN): ADDR, PORT or `off`.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8443",
        allow_negative_numbers = true
    )]
    https: String,
    /// UDP listener for HTTP/3: ADDR, PORT or `off`.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8443",
        allow_negative_numbers = true
    )]
    h3: String,
    /// PEM certificate chain (with --key); without it a self-signed one for localhost is made.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Write the certificate clients should trust (PEM) to FILE.
    #[arg(long, value_name = "FILE")]
    write_ca: Option<PathBuf>,
    /// Worker threads, each with its own event loop; 1 reproduces a one-core server.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    threads: Option<usize>,
    /// Pin worker threads to these CPUs, round-robin (like 0,2 or 0-3).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// h2 SETTINGS_MAX_CONCURRENT_STREAMS and h3 max bidirectional streams.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = Limits::default().max_streams,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_streams: u32,
    /// Requests per connection: HTTP/1.1 then answers `Connection: close`, h2/h3 send GOAWAY.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    max_requests_per_conn: Option<u64>,
    /// Close connections without I/O for this long (like 30s).
    #[arg(
        long,
        value_name = "DUR",
        default_value = "30s",
        allow_hyphen_values = true
    )]
    idle_timeout: String,
    /// Request header bytes above which the answer is 431 (like 16k).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "16k",
        allow_negative_numbers = true
    )]
    max_header_bytes: String,
    /// Request body bytes above which the answer is 413 (like 8m).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "8m",
        allow_negative_numbers = true
    )]
    max_body_bytes: String,
    /// Open connections above which new ones are closed at once [default: 20000, or fewer if
    /// the open-file limit (ulimit -n) allows fewer].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    max_connections: Option<usize>,
    /// HTTP/2 implementation for h2c and h2: `owned` (httpvs's own frame layer) or `hyper`
    /// (the h2 crate, kept as the reference).
    #[arg(long, value_name = "ENGINE", default_value = "owned", value_parser = ["owned", "hyper"])]
    h2_engine: String,
    /// On SIGINT/SIGTERM, how long in-flight requests may take to finish.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "5s",
        allow_hyphen_values = true
    )]
    grace: String,
}

/// Open files kept out of `--max-connections`: listeners, the runtime's, the QUIC socket,
/// certificate files, the standard streams.
const FD_RESERVE: u64 = 64;

/// Fewer connections at once than this, set by the open-file limit rather than by you, get a
/// note when serve starts.
const FEW_CONNECTIONS: usize = 1000;

/// Signals this soon after the first one that stopped the server are that same stop.
const SAME_STOP: Duration = Duration::from_millis(300);

/// Runs `httpvs serve`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    stop_signals_default();
    let (mut config, grace) = config_from(&args)?;
    if let Some(files) = super::common::raise_fd_limit() {
        // Past the open-file limit accept fails, and new clients hang with nothing counted:
        // the connection limit must come first, with room for listeners and the runtime.
        let room = usize::try_from(files.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
        if config.limits.max_connections > room {
            // Said of a limit you gave; the default just fits what the machine allows, said
            // only when that is few (under `ulimit -n 40` it was 1, and every other client was
            // closed at once with nothing said until the shutdown's totals).
            let room = room.max(1);
            if args.max_connections.is_some() {
                say!(
                    "httpvs serve: --max-connections {} lowered to {room}: this process may open {files} files (ulimit -n)",
                    config.limits.max_connections
                );
            } else if room < FEW_CONNECTIONS {
                say!(
                    "httpvs serve: note: at most {room} connections at once (--max-connections): this process may open {files} files (ulimit -n)"
                );
            }
            config.limits.max_connections = room;
        }
    }
    // A certificate or key file that cannot be read or used is bad input, as a bad flag: exit 2;
    // so is a --write-ca path that cannot be written, found before anything listens. The files
    // are read before Ctrl-C is blocked: a FIFO nobody writes would otherwise hold the process
    // past SIGINT and SIGTERM.
    if let Some(path) = &args.write_ca {
        for (flag, other) in [("--cert", &args.cert), ("--key", &args.key)] {
            if other
                .as_deref()
                .is_some_and(|o| super::common::same_path(o, path))
            {
                return Err(usage(format!(
                    "--write-ca {} is the {flag} file: writing there would replace it; give another file",
                    path.display()
                )));
            }
        }
        super::common::check_writable("--write-ca", path)?;
    }
    if let Some((cert, key)) = &config.cert {
        let (cert, key) = httpvs_server::cert::read_pem_files(cert, key)
            .map_err(|e| usage(format!("{:#}", anyhow::Error::new(e))))?;
        config.cert_pem = Some(httpvs_server::PemFiles { cert, key });
    }
    // Worker threads inherit this mask, so SIGINT/SIGTERM reach only `sigwait` below.
    let signals = block_stop_signals();
    let server = httpvs_server::start(config).map_err(|e| match e {
        httpvs_server::ServeError::ReadCert { .. } | httpvs_server::ServeError::Cert(_) => {
            super::usage(format!("{:#}", anyhow::Error::new(e)))
        }
        other => anyhow::Error::new(other),
    })?;
    if let Some(path) = &args.write_ca {
        std::fs::write(path, server.ca_pem()).map_err(|e| {
            super::usage(format!("--write-ca: cannot write {}: {e}", path.display()))
        })?;
    }
    print_banner(&server, &args);
    wait_for(signals);
    let first = std::time::Instant::now();
    if grace.is_zero() {
        println!("httpvs serve: stopping now (--grace 0: requests in flight are cut off)");
    } else {
        println!("httpvs serve: stopping (grace {grace:?}; a second Ctrl-C stops at once)");
    }
    // A second signal during the grace ends the process now, as a second Ctrl-C does for nginx
    // (`quit` then `stop`): the in-flight requests are abandoned and no totals are printed.
    // One that comes within SAME_STOP of the first is the same stop sent twice (`timeout -s
    // INT` signals the process and its group), not a person pressing Ctrl-C again.
    std::thread::spawn(move || loop {
        wait_for(signals);
        if first.elapsed() < SAME_STOP {
            continue;
        }
        say!("httpvs serve: second signal: stopped without waiting for the grace");
        std::process::exit(i32::from(super::common::INTERRUPTED));
    });
    let totals = server.shutdown(grace);
    println!("{totals}");
    Ok(ExitCode::SUCCESS)
}

fn config_from(args: &Args) -> anyhow::Result<(ServeConfig, Duration)> {
    // The flags' durations, as load's: a bare number is seconds, and hours are taken (the
    // query's parser, for ?delay=, read `--idle-timeout 30` as 30 ms and refused `1h`).
    let duration = |flag: &str, v: &str| super::common::duration_flag(&format!("--{flag}"), v);
    let size = |flag: &str, v: &str| parse_size(v).map_err(|e| usage(format!("--{flag}: {e}")));
    if size("max-header-bytes", &args.max_header_bytes)? == 0 {
        // No request head fits in 0 bytes: every answer would be 431.
        return Err(usage("--max-header-bytes must be at least 1"));
    }
    let limits = Limits {
        max_streams: args.max_streams,
        max_requests_per_conn: args.max_requests_per_conn,
        idle_timeout: duration("idle-timeout", &args.idle_timeout)?,
        max_header_bytes: size("max-header-bytes", &args.max_header_bytes)? as usize,
        max_body_bytes: size("max-body-bytes", &args.max_body_bytes)?,
        max_connections: args
            .max_connections
            .unwrap_or(Limits::default().max_connections),
        ..Limits::default()
    };
    if limits.idle_timeout < std::time::Duration::from_millis(1) {
        // QUIC counts its idle timeout in whole milliseconds (under 1 ms is 0: none at all),
        // and no handshake finishes in less.
        return Err(usage(
            "--idle-timeout must be at least 1ms (QUIC counts it in milliseconds)",
        ));
    }
    if args.max_requests_per_conn == Some(0) {
        return Err(usage("--max-requests-per-conn must be at least 1"));
    }
    if args.max_connections == Some(0) {
        return Err(usage("--max-connections must be at least 1"));
    }
    let threads = args.threads.unwrap_or(ServeConfig::default().threads);
    if threads == 0 {
        return Err(usage("--threads must be at least 1"));
    }
    if threads > httpvs_server::MAX_THREADS {
        // Each thread listens on its own sockets: thousands run out of files before they serve.
        return Err(usage(format!(
            "--threads {threads} is more than {}",
            httpvs_server::MAX_THREADS
        )));
    }
    let config = ServeConfig {
        http: listen_addr("http", &args.http)?,
        https: listen_addr("https", &args.https)?,
        h3: listen_addr("h3", &args.h3)?,
        cert: args.cert.clone().zip(args.key.clone()),
        cert_pem: None,
        threads,
        cpus: args
            .cpus
            .as_deref()
            .map(|c| cpu_list("--cpus", c))
            .transpose()?,
        limits,
        h2_engine: match args.h2_engine.as_str() {
            "owned" => H2Engine::Owned,
            _ => H2Engine::Hyper,
        },
    };
    if config.http.is_none() && config.https.is_none() && config.h3.is_none() {
        return Err(usage("--http, --https and --h3 are all off"));
    }
    // Both TCP: the second bind failed with "Address already in use", which reads as another
    // process's doing. (--h3 is UDP and may share --https's port, as the README's examples do.)
    if let (Some(http), Some(https)) = (config.http, config.https) {
        if http == https && http.port() != 0 {
            return Err(usage(format!(
                "--http and --https both name {http}: give each its own port"
            )));
        }
    }
    Ok((config, duration("grace", &args.grace)?))
}

/// `off`, `PORT` (on 127.0.0.1), `HOST:PORT` or `[V6]:PORT`.
fn listen_addr(flag: &str, value: &str) -> anyhow::Result<Option<SocketAddr>> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    if let Some(port) = httpvs_load::config::parse_port(value) {
        return Ok(Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
    }
    if let Some(port) = value
        .strip_prefix("localhost:")
        .and_then(httpvs_load::config::parse_port)
    {
        return Ok(Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
    }
    value
        .parse::<SocketAddr>()
        .map(Some)
        .map_err(|_| usage(format!("--{flag}: `{value}` is not ADDR:PORT, PORT or off")))
}

fn print_banner(server: &httpvs_server::RunningServer, args: &Args) {
    println!("httpvs serve: listening");
    if let Some(a) = server.http_addr() {
        println!("  http   http://{a}/   HTTP/1.1 and h2c (prior knowledge)");
    }
    if let Some(a) = server.https_addr() {
        println!("  https  https://{a}/  h2 and http/1.1 by ALPN");
    }
    if let Some(a) = server.h3_addr() {
        println!("  h3     https://{a}/  HTTP/3 over UDP");
    }
    let origin = if args.cert.is_some() {
        "from --cert"
    } else {
        "self-signed for localhost, 127.0.0.1, ::1"
    };
    if server.https_addr().is_some() || server.h3_addr().is_some() {
        println!("  cert   SHA-256 {}  ({origin})", server.fingerprint());
    }
    if let Some(path) = &args.write_ca {
        println!("  ca     written to {}", path.display());
    }
}

/// The signals that stop serve (after its grace).
const STOP_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// SIGINT and SIGTERM back to their default action. A shell script's `httpvs serve &` starts
/// with SIGINT ignored (a non-interactive shell ignores it for background jobs), and an ignored
/// signal is discarded even while blocked: `sigwait` never saw it, so serve could not be
/// stopped by it, nor while it waited on a certificate FIFO.
fn stop_signals_default() {
    for signal in STOP_SIGNALS {
        // SAFETY: setting a standard signal's disposition to SIG_DFL, before any thread starts.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a zeroed sigset_t owned here.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in STOP_SIGNALS {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for(signals: libc::sigset_t) {
    let mut received: libc::c_int = 0;
    // SAFETY: `signals` is a valid set blocked in every thread; sigwait only writes `received`.
    unsafe {
        libc::sigwait(&signals, &mut received);
    }
}
