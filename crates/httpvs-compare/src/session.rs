//! One `httpvs compare` run from start to end: target, pinning, conditions, tuning, the matrix.

use crate::load_driver::{Endpoints, LoadDriver};
use crate::machine::MachineFacts;
use crate::options::Pinning;
use crate::plan::{Payload, Plan};
use crate::results::{Results, Setup, RESULTS_SCHEMA_VERSION};
use crate::runner::{self, Progress};
use crate::variant::Variant;
use crate::{network, probe, tune};
use httpvs_load::TlsOptions;
use httpvs_server::{RunningServer, ServeConfig};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What to compare and how.
#[derive(Debug, Clone)]
pub struct CompareConfig {
    /// The matrix.
    pub plan: Plan,
    /// The user's URL, or None for the embedded server.
    pub target: Option<String>,
    /// Whether the plan came from `--plan` (its payload paths then apply to a user's URL too).
    pub custom_plan: bool,
    /// CPU pinning.
    pub pinning: Pinning,
    /// Search shapes first.
    pub tune: bool,
    /// Accept any certificate from a user's server.
    pub insecure: bool,
    /// Trust this CA for a user's server.
    pub cacert: Option<PathBuf>,
    /// The client certificate to show a user's server that asks for one (`--cert`, `--key`).
    pub client_identity: Option<Arc<httpvs_load::protocol::tls::ClientIdentity>>,
    /// Connect to this host and port instead of the URL's (a user's server).
    pub connect_to: Option<httpvs_load::connect_to::ConnectTo>,
}

/// An error and its causes, "a: b: c" (a bind error's own line names no OS error).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The embedded server did not start.
    #[error("the embedded server did not start: {0}")]
    Server(String),
    /// The user's URL is unusable.
    #[error("{0}")]
    Target(String),
    /// Nothing is left to run (no protocol spoken, no condition possible).
    #[error("{0}")]
    NothingToRun(String),
    /// The stop flag was set (Ctrl-C) while the user's server was being probed.
    #[error(
        "interrupted before the run started (while probing which protocols the server speaks)"
    )]
    Interrupted,
}

/// Runs the comparison and returns every result.
pub fn run(config: &CompareConfig, progress: &mut dyn Progress) -> Result<Results, CompareError> {
    run_until(config, progress, Arc::new(AtomicBool::new(false)))
}

/// Like [`run`], but setting `stop` (Ctrl-C) ends the matrix early: the results then hold the
/// cells that finished and say they were interrupted. The server and links are torn down alike.
pub fn run_until(
    config: &CompareConfig,
    progress: &mut dyn Progress,
    stop: Arc<AtomicBool>,
) -> Result<Results, CompareError> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut plan = config.plan.clone();
    let mut setup = Setup {
        started_unix,
        ..Setup::default()
    };
    let (target, variants) = match &config.target {
        None => {
            let target = Target::embedded(&plan, &config.pinning)?;
            setup.target = "embedded server (httpvs serve on loopback)".into();
            setup.server_cpus = config.pinning.server.clone();
            setup.client_cpus = config.pinning.client.clone();
            setup.pinning = config.pinning.describe();
            (target, plan.protocols.clone())
        }
        Some(url) => {
            let (target, variants, skipped) = Target::user(url, config, &mut plan, &stop)?;
            setup.target = url.clone();
            setup.client_cpus = config.pinning.client.clone();
            setup.pinning = match config.pinning.client.is_empty() {
                true => "client not pinned".into(),
                false => config.pinning.describe(),
            };
            for s in &skipped {
                progress.note(&format!("skipped {}: {}", s.name, s.reason));
            }
            setup.skipped_protocols = skipped;
            (target, variants)
        }
    };
    if let Some(fallback) = crate::plan::baseline_fallback(plan.baseline(), &variants) {
        progress.note(&format!(
            "baseline: {} does not run here; ratios are to {fallback}",
            plan.baseline()
        ));
        plan.baseline = Some(fallback);
    }
    progress.note(&format!("pinning: {}", setup.pinning));
    let mut driver = LoadDriver {
        endpoints: target.endpoints.clone(),
        client_cpus: config.pinning.client.clone(),
        threads: plan
            .client
            .threads
            .unwrap_or_else(|| client_threads(&config.pinning)),
        timeout: plan.client.timeout.map(|s| s.0),
        link: None,
        stop: stop.clone(),
    };
    let done = |plan: Plan, setup: Setup, cells, interrupted| Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        plan,
        machine: MachineFacts::here(),
        setup: Setup {
            elapsed_seconds: started.elapsed().as_secs_f64(),
            ..setup
        },
        cells,
        interrupted,
    };
    if config.tune {
        progress.note("tuning: trying a few shapes per protocol on the clean link");
        let tuned = tune::tune(
            &mut plan,
            &variants,
            client_threads(&config.pinning),
            &mut driver,
            &stop,
        );
        let Some(tuning) = tuned else {
            setup.dropped = Some("the --tune trials".into());
            drop((driver, target));
            return Ok(done(plan, setup, Vec::new(), true));
        };
        setup.tuning = tuning;
        for t in &setup.tuning {
            progress.note(&format!("tuned {}: {}", t.variant, t.chosen));
        }
    }
    let shapes: Vec<String> = variants
        .iter()
        .map(|v| {
            let s: Vec<String> = plan.shapes_for(*v).iter().map(|s| s.to_string()).collect();
            format!("{v}={}", s.join("|"))
        })
        .collect();
    progress.note(&format!("shapes: {}", shapes.join(" ")));
    let (mut conditions, mut skipped) = network::usable_conditions(&plan);
    let remote = config
        .target
        .as_deref()
        .and_then(|url| remote_host(url, config.connect_to.as_ref()));
    if let Some(host) = &remote {
        // The link's far end is this host's loopback: a remote server is out of its reach.
        let (clean, emulated): (Vec<_>, Vec<_>) =
            conditions.into_iter().partition(|c| c.is_clean());
        conditions = clean;
        skipped.extend(emulated.into_iter().map(|c| crate::results::Skipped {
            name: c.name.clone(),
            reason: format!(
                "the emulated link reaches only this host's loopback, and {host} is not on it"
            ),
        }));
    }
    for (names, reason) in crate::results::grouped(&skipped) {
        progress.note(&format!("skipped {names}: {reason}"));
    }
    setup.skipped_conditions = skipped;
    if conditions.is_empty() {
        return Err(CompareError::NothingToRun(match remote {
            // It said "every one needs the emulator" where the emulator was there.
            Some(host) => format!(
                "no network condition can run against {host}: each needs the emulated link, \
                 which reaches only this host's loopback (add a `clean` condition, or reach \
                 the server through a forward on 127.0.0.1)"
            ),
            None => "no network condition can run here (every one needs the emulator)".into(),
        }));
    }
    let specs = runner::cells(&plan, &conditions, &variants);
    setup.cells_planned = specs.len();
    let ran = runner::run_cells(
        &specs,
        plan.repeats,
        client_threads(&config.pinning),
        &mut driver,
        progress,
        &stop,
    );
    // The last link, then the server: torn down before the report, interrupted or not.
    drop((driver, target));
    setup.dropped = ran.dropped;
    Ok(done(plan, setup, ran.cells, ran.interrupted))
}

/// The host connections to a URL go to (`--connect-to`'s, else the URL's) when it is not this
/// host's loopback, as `load --net` judges it: a URL's remote name sent to 127.0.0.1 runs
/// behind the link.
fn remote_host(
    url: &str,
    connect_to: Option<&httpvs_load::connect_to::ConnectTo>,
) -> Option<String> {
    // As the URL is sent: `127.1` is 127.0.0.1.
    let uri = httpvs_load::config::parse_url(url).ok()?;
    let dialled = httpvs_load::connect_to::ConnectTo::dialled_host(connect_to, &uri).ok()?;
    let host = dialled.trim_start_matches('[').trim_end_matches(']');
    let local = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!local).then(|| host.to_string())
}

/// CPUs the client may use: its pinned ones, or every core.
fn client_threads(pinning: &Pinning) -> usize {
    if pinning.client.is_empty() {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        pinning.client.len()
    }
}

/// The target's endpoints, and the embedded server to shut down at the end.
struct Target {
    endpoints: Endpoints,
    server: Option<RunningServer>,
    /// The embedded server's CA, held open for as long as the clients read it.
    _ca_file: Option<CaFile>,
}

/// The embedded server's CA certificate in an anonymous memory file, named by its
/// `/proc/self/fd` path: it vanishes with the process however that ends (a second Ctrl-C,
/// SIGKILL), where a file in the temp directory stayed behind.
struct CaFile(std::fs::File);

impl CaFile {
    fn new(pem: &str) -> Result<CaFile, CompareError> {
        use std::io::Write;
        use std::os::fd::FromRawFd;
        // SAFETY: memfd_create with a NUL-terminated name; a non-negative return is a new fd
        // that nothing else owns.
        let fd = unsafe { libc::memfd_create(c"httpvs-compare-ca".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(CompareError::Server(format!("cannot hold its CA: {e}")));
        }
        // SAFETY: `fd` is open and owned by nothing else.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.write_all(pem.as_bytes())
            .map_err(|e| CompareError::Server(format!("cannot hold its CA: {e}")))?;
        Ok(CaFile(file))
    }

    /// A path that opens the file (each load run reads it).
    fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.0.as_raw_fd()))
    }
}

impl Target {
    fn embedded(plan: &Plan, pinning: &Pinning) -> Result<Target, CompareError> {
        let mut serve = ServeConfig::loopback_ephemeral();
        serve.threads = plan.server.threads.unwrap_or(pinning.server.len().max(1));
        serve.cpus = (!pinning.server.is_empty()).then(|| pinning.server.clone());
        serve.limits.max_requests_per_conn = plan.server.max_requests_per_conn;
        if let Some(m) = plan.server.max_streams {
            serve.limits.max_streams = m;
        }
        let server =
            httpvs_server::start(serve).map_err(|e| CompareError::Server(with_causes(&e)))?;
        let ca_file = CaFile::new(&server.ca_pem())?;
        let url = |addr: Option<std::net::SocketAddr>, scheme: &str| {
            addr.map(|a| format!("{scheme}://{a}"))
        };
        let endpoints = Endpoints {
            http: url(server.http_addr(), "http"),
            https: url(server.https_addr(), "https"),
            h3: url(server.h3_addr(), "https"),
            tls: TlsOptions {
                insecure: false,
                cacert: Some(ca_file.path()),
                client_identity: None,
            },
            connect_to: None,
        };
        Ok(Target {
            endpoints,
            server: Some(server),
            _ca_file: Some(ca_file),
        })
    }

    fn user(
        url: &str,
        config: &CompareConfig,
        plan: &mut Plan,
        stop: &Arc<AtomicBool>,
    ) -> Result<(Target, Vec<Variant>, Vec<crate::results::Skipped>), CompareError> {
        let uri =
            httpvs_load::config::parse_url(url).map_err(|e| CompareError::Target(e.to_string()))?;
        let tls = TlsOptions {
            insecure: config.insecure,
            cacert: config.cacert.clone(),
            client_identity: config.client_identity.clone(),
        };
        let endpoints = probe::endpoints(&uri, tls, config.connect_to.clone());
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        aim_at_url(plan, &path, config.custom_plan);
        let (variants, skipped) = probe::probe(&endpoints, &path, &plan.protocols, stop);
        // Ctrl-C during the probe ends it at once (it waited out every protocol's trial).
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(CompareError::Interrupted);
        }
        if variants.is_empty() {
            return Err(CompareError::NothingToRun(nothing_answered(url, &skipped)));
        }
        if !config.custom_plan {
            // The built-in plan's sentence names the embedded server's payloads and every
            // protocol; say what runs here instead.
            let answered: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
            plan.description = crate::plan::run_sentence(
                &format!("{} (what {url} answered)", answered.join(", ")),
                "its own response",
                &plan.conditions,
                "",
            );
        }
        let target = Target {
            endpoints,
            server: None,
            _ca_file: None,
        };
        Ok((target, variants, skipped))
    }
}

/// A plan's payloads made for a user's server at `path` (the URL's path and query): the
/// built-in plan asks for the URL itself; a custom plan's payloads lose `size` (the embedded
/// server's `size=` query), and one at `/` goes to `path`. No network: `--print-plan` shows it.
pub fn aim_at_url(plan: &mut Plan, path: &str, custom_plan: bool) {
    if !custom_plan {
        // The default payloads ask the embedded server for sizes; a user's URL is what it is.
        plan.payloads = vec![Payload {
            name: "url".into(),
            path: path.to_string(),
            size: None,
            method: "GET".into(),
            body: None,
            headers: Vec::new(),
        }];
        for c in &mut plan.conditions {
            c.payloads = None;
        }
    } else {
        // A plan's payloads against a user's server: `size` is the embedded server's (its
        // `size=` query), and a payload at `/` goes to the URL's own path and query.
        for p in &mut plan.payloads {
            p.size = None;
            if p.path == "/" {
                p.path = path.to_string();
            }
        }
    }
}

/// The one line for a target that answered no protocol: each cause once, with the protocols
/// it stopped (a refused port or an untrusted certificate stops several the same way), then
/// the protocols the URL's scheme leaves out.
fn nothing_answered(url: &str, skipped: &[crate::results::Skipped]) -> String {
    let mut causes: Vec<(&str, Vec<&str>)> = Vec::new();
    let (mut need_http, mut need_https) = (Vec::new(), Vec::new());
    for s in skipped {
        let name = s.name.as_str();
        if s.reason.starts_with("the URL is https://") {
            need_http.push(name);
            continue;
        }
        if s.reason.starts_with("the URL is http://") {
            need_https.push(name);
            continue;
        }
        // "no HTTP/1.1 answer: connection refused: ..." and "no answer to the h2c preface:
        // connection refused: ..." have one cause.
        let cause = match s.reason.split_once(": ") {
            Some((head, rest)) if head.starts_with("no ") => rest,
            _ => s.reason.as_str(),
        };
        match causes.iter_mut().find(|(c, _)| *c == cause) {
            Some((_, names)) => names.push(name),
            None => causes.push((cause, vec![name])),
        }
    }
    let mut parts: Vec<String> = causes
        .into_iter()
        .map(|(cause, names)| format!("{}: {cause}", names.join(", ")))
        .collect();
    let need = |names: &[&str]| if names.len() == 1 { "needs" } else { "need" };
    if !need_http.is_empty() {
        let verb = need(&need_http);
        parts.push(format!("{} {verb} an http:// URL", need_http.join(", ")));
    }
    if !need_https.is_empty() {
        let verb = need(&need_https);
        parts.push(format!("{} {verb} an https:// URL", need_https.join(", ")));
    }
    format!("{url} answered none of the protocols: {}", parts.join("; "))
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown(Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{nothing_answered, remote_host};
    use crate::results::Skipped;

    /// Each cause once, with the protocols it stopped: a refused port used to be repeated for
    /// h1, h1-close and h2c, in a line of 700 characters.
    #[test]
    fn a_target_that_answers_nothing_names_each_cause_once() {
        let refused = "connection refused: 127.0.0.1:1 — is the server running?";
        let skipped = |list: &[(&str, String)]| -> Vec<Skipped> {
            list.iter()
                .map(|(name, reason)| Skipped {
                    name: (*name).into(),
                    reason: reason.clone(),
                })
                .collect()
        };
        let https = "the URL is http://; give an https:// URL to compare TLS and QUIC".to_string();
        let line = nothing_answered(
            "http://127.0.0.1:1/",
            &skipped(&[
                ("h1", format!("no HTTP/1.1 answer: {refused}")),
                ("h1-close", format!("no HTTP/1.1 answer: {refused}")),
                ("h1-tls", https.clone()),
                (
                    "h2c",
                    format!("no answer to the h2c prior-knowledge preface: {refused}"),
                ),
                ("h2", https.clone()),
                ("h3", https),
            ]),
        );
        assert_eq!(
            line,
            format!(
                "http://127.0.0.1:1/ answered none of the protocols: h1, h1-close, h2c: \
                 {refused}; h1-tls, h2, h3 need an https:// URL"
            )
        );
    }
    use crate::plan::baseline_fallback;
    use crate::variant::Variant;

    #[test]
    fn a_baseline_that_does_not_run_falls_back() {
        use Variant::*;
        assert_eq!(baseline_fallback(H1, &[H1, H2c]), None);
        assert_eq!(baseline_fallback(H1, &[H1Tls, H2, H3]), Some(H1Tls));
        assert_eq!(baseline_fallback(H1, &[H2, H3]), Some(H2));
        assert_eq!(baseline_fallback(H2c, &[H2, H1]), Some(H2));
    }

    #[test]
    fn loopback_targets_are_local() {
        assert_eq!(remote_host("http://127.0.0.1:8080/", None), None);
        assert_eq!(remote_host("https://[::1]:8443/", None), None);
        assert_eq!(remote_host("http://127.1:8080/", None), None);
        assert_eq!(remote_host("https://localhost/", None), None);
        assert_eq!(
            remote_host("https://example.com/", None).as_deref(),
            Some("example.com")
        );
        // Where `--connect-to` sends the connections counts, as for `load --net`.
        let to = |rule: &str| httpvs_load::connect_to::ConnectTo::parse(rule).unwrap();
        let local = to("127.0.0.1:8443");
        assert_eq!(remote_host("https://example.com/", Some(&local)), None);
        let away = to("192.0.2.1:443");
        assert_eq!(
            remote_host("https://localhost/", Some(&away)).as_deref(),
            Some("192.0.2.1")
        );
    }
}
