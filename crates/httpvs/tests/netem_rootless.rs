//! The rootless layout as a normal user would run it: each test runs httpvs as `nobody`, with a
//! private 0666 /dev/net/tun bind-mounted in a mount namespace of its own (this machine's is 0600),
//! against servers the test started on the host's loopback: `netem -- curl` shows the added round
//! trip, `load --net` crosses with h1 and h3, `compare` runs a condition on its embedded server,
//! SIGKILL leaves nothing, and without a usable TUN the error is one line naming the fix.
//! Setting up the mount namespace needs root (CI runs as root).

use httpvs_server::{RunningServer, ServeConfig};
use serde_json::Value;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// No run here may take longer; a hung run is killed and the test fails.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

/// Runs as `nobody` after making a private TUN node of the given mode: `$1` = directory (with
/// `dev/` and `work/`), `$2` = mode, then the command.
const AS_NOBODY: &str = r#"dir=$1; mode=$2; shift 2
mount -t tmpfs -o mode=755 none "$dir/dev" && mknod "$dir/dev/tun" c 10 200 &&
chmod "$mode" "$dir/dev/tun" && mount --bind "$dir/dev/tun" /dev/net/tun || exit 97
cd "$dir/work" && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@""#;

/// A directory `nobody` can use: the binary (a copy, as target/ may be closed to other users),
/// `dev/` for the TUN node and a world-writable `work/`.
struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    /// The shared sandbox, or None (with the reason printed) when this machine cannot run it.
    fn get() -> Option<&'static Sandbox> {
        if !httpvs_testkit::require_root() {
            return None;
        }
        if let Some(why) = missing_tools() {
            if httpvs_testkit::peers_required() {
                panic!("rootless tests: {why}");
            }
            eprintln!("skipped: {why}");
            return None;
        }
        static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
        Some(SANDBOX.get_or_init(Sandbox::create))
    }

    /// A fresh directory under the system's temp dir (open to all users, unlike target/ may be).
    fn create() -> Sandbox {
        remove_stale_sandboxes();
        let dir = httpvs_testkit::caddy::unique_temp_dir(SANDBOX_PREFIX).unwrap();
        let mode = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        mode(&dir, 0o755);
        std::fs::create_dir(dir.join("dev")).unwrap();
        std::fs::create_dir(dir.join("work")).unwrap();
        mode(&dir.join("work"), 0o777);
        std::fs::copy(env!("CARGO_BIN_EXE_httpvs"), dir.join("httpvs")).unwrap();
        mode(&dir.join("httpvs"), 0o755);
        Sandbox { dir }
    }

    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// `httpvs ARGS` as nobody, with /dev/net/tun of `tun_mode` ("666" or "600").
    fn httpvs(&self, tun_mode: &str, args: &[&str]) -> Command {
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "sh", "-c", AS_NOBODY])
            .arg("sh")
            .arg(&self.dir)
            .arg(tun_mode)
            .arg(self.dir.join("httpvs"))
            .args(args);
        command
    }

    /// Runs `httpvs ARGS` as nobody with a usable TUN device, within the deadline.
    fn run(&self, args: &[&str]) -> Output {
        run_bounded(self.httpvs("666", args))
    }
}

/// Sandboxes are named `httpvs-netem-rootless-<pid>-...` (see `unique_temp_dir`).
const SANDBOX_PREFIX: &str = "netem-rootless";

/// Removes the sandboxes (each holds a copy of the binary) of earlier test runs that are over.
fn remove_stale_sandboxes() {
    let prefix = format!("httpvs-{SANDBOX_PREFIX}-");
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split('-').next());
        if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Why the rootless tests cannot run here, if they cannot.
fn missing_tools() -> Option<String> {
    for tool in ["unshare", "setpriv"] {
        if httpvs_testkit::which(tool).is_none() && !Path::new("/usr/bin").join(tool).exists() {
            return Some(format!("{tool} (util-linux) not installed"));
        }
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun does not exist".into());
    }
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    if max.trim() == "0" {
        return Some("user namespaces are disabled (user.max_user_namespaces = 0)".into());
    }
    None
}

/// Spawns with piped output, kills the run past the deadline, and returns what it printed.
fn run_bounded(mut command: Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare runs");
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child);
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

fn wait_bounded(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            panic!("the rootless run did not finish within {RUN_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn serve() -> RunningServer {
    httpvs_server::start(ServeConfig::loopback_ephemeral()).expect("server starts")
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The sandbox, when curl is installed too (else None, with the reason printed).
fn sandbox_with_curl() -> Option<&'static Sandbox> {
    let sandbox = Sandbox::get()?;
    httpvs_testkit::require_peer("curl")?;
    Some(sandbox)
}

#[test]
fn rootless_netem_puts_curl_behind_the_link_to_the_hosts_loopback() {
    let Some(sandbox) = sandbox_with_curl() else {
        return;
    };
    let server = serve();
    let url = format!("http://{}/?size=2k", server.http_addr().unwrap());
    let out = sandbox.run(&[
        "netem",
        "--both",
        "delay 20ms",
        "--",
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{time_connect}\n",
        &url,
    ]);
    assert_ok(&out, "netem -- curl as nobody");
    let stdout = text(&out.stdout);
    let (code, connect) = stdout.trim().split_once(' ').expect("curl's line");
    assert_eq!(code, "200", "{stdout}");
    let connect: f64 = connect.parse().unwrap();
    // 20 ms each way: the SYN's round trip crosses the link twice. A lower bound only.
    assert!(
        connect >= 0.039,
        "connect {connect}s is below the 40 ms round trip"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("\nup ") && stderr.contains("\ndown "),
        "{stderr}"
    );
}

#[test]
fn rootless_closed_ports_are_refused_so_localhost_falls_back_to_ipv4() {
    let Some(sandbox) = sandbox_with_curl() else {
        return;
    };
    let server = serve(); // 127.0.0.1 only: `localhost` tries [::1] first and must be refused
    let port = server.http_addr().unwrap().port();
    let script = format!(
        "curl -sS -o /dev/null -w '%{{http_code}}\\n' http://localhost:{port}/; \
         curl -sS -o /dev/null http://127.0.0.1:1/; echo \"closed $?\""
    );
    let out = sandbox.run(&[
        "netem",
        "-q",
        "--both",
        "delay 5ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_ok(&out, "curl localhost as nobody");
    let stdout = text(&out.stdout);
    assert_eq!(stdout, "200\nclosed 7\n", "{}", text(&out.stderr));
}

/// Runs `load --net ARGS -o work/NAME.json` as nobody and returns the report.
fn load_report(sandbox: &Sandbox, name: &str, args: &[&str]) -> Value {
    let file = format!("{name}.json");
    let mut all = vec!["load", "--no-progress", "-o", &file];
    all.extend(args);
    let out = sandbox.run(&all);
    assert_ok(&out, &format!("load {args:?} as nobody"));
    let report = std::fs::read_to_string(sandbox.work().join(&file)).expect("report written");
    serde_json::from_str(&report).expect("JSON report")
}

fn u64_at(report: &Value, pointer: &str) -> u64 {
    report
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} in {report:#}"))
}

#[test]
fn rootless_load_net_crosses_the_link_with_h1_and_h3() {
    let Some(sandbox) = Sandbox::get() else {
        return;
    };
    let server = serve();
    let h1 = format!("http://{}/", server.http_addr().unwrap());
    let report = load_report(
        sandbox,
        "h1",
        &["--net", "delay 5ms", "-n", "100", "-c", "2", &h1],
    );
    assert_eq!(u64_at(&report, "/requests/succeeded"), 100, "{report:#}");
    assert!(
        u64_at(&report, "/network/up/packets_out") > 100,
        "{report:#}"
    );
    let h3 = format!("https://{}/", server.h3_addr().unwrap());
    let report = load_report(
        sandbox,
        "h3",
        &[
            "--net",
            "delay 5ms",
            "-p",
            "h3",
            "-k",
            "-n",
            "100",
            "-c",
            "1",
            "-m",
            "4",
            &h3,
        ],
    );
    assert_eq!(u64_at(&report, "/requests/succeeded"), 100, "{report:#}");
    assert!(
        u64_at(&report, "/network/down/packets_out") > 20,
        "{report:#}"
    );
}

#[test]
fn rootless_load_net_reaches_a_server_on_ipv6_loopback() {
    let Some(sandbox) = Sandbox::get() else {
        return;
    };
    if httpvs_testkit::require_peer("nft").is_none() {
        return;
    }
    let config = ServeConfig {
        http: Some(std::net::SocketAddr::from((
            std::net::Ipv6Addr::LOCALHOST,
            0,
        ))),
        https: None,
        h3: None,
        ..ServeConfig::loopback_ephemeral()
    };
    let server = httpvs_server::start(config).expect("server on [::1]");
    let url = format!("http://{}/", server.http_addr().unwrap());
    let report = load_report(
        sandbox,
        "ipv6",
        &["--net", "delay 5ms", "-n", "100", "-c", "2", &url],
    );
    assert_eq!(u64_at(&report, "/requests/succeeded"), 100, "{report:#}");
    assert!(
        u64_at(&report, "/network/up/packets_out") > 100,
        "{report:#}"
    );
}

const PLAN: &str = r#"
name = "rootless"
protocols = ["h1", "h3"]
duration = "500ms"
warmup = "300ms"
repeats = 1
[shapes]
h1 = "2"
h3 = "1x4"
[[payloads]]
name = "small"
size = "1k"
[[conditions]]
name = "wan"
netem = "delay 10ms"
"#;

#[test]
fn rootless_compare_runs_a_network_condition_on_its_embedded_server() {
    let Some(sandbox) = Sandbox::get() else {
        return;
    };
    std::fs::write(sandbox.work().join("plan.toml"), PLAN).unwrap();
    let out = sandbox.run(&[
        "compare",
        "--plan",
        "plan.toml",
        "--json",
        "compare.json",
        "--no-html",
    ]);
    assert_ok(&out, "compare as nobody");
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.work().join("compare.json")).unwrap(),
    )
    .unwrap();
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{json:#}");
    for cell in cells {
        assert!(cell["failure"].is_null(), "{cell}");
        let run = &cell["runs"][0];
        assert!(run["summary"]["succeeded"].as_u64().unwrap() > 0, "{run}");
    }
}

/// Starts `netem --quiet -- sleep MARKER` as nobody in a process group of its own and waits
/// until the sleep runs. An odd duration names our processes among the machine's.
fn start_sleep_behind_link(sandbox: &Sandbox, stderr: Stdio) -> (Child, String) {
    use std::os::unix::process::CommandExt;
    let marker = format!(
        "{}.{}",
        40 + std::process::id() % 50,
        std::process::id() % 997
    );
    let child = sandbox
        .httpvs("666", &["netem", "--", "sleep", &marker])
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while processes_with(&marker) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "sleep never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, marker)
}

#[test]
fn rootless_sigkill_leaves_no_process_behind() {
    let Some(sandbox) = Sandbox::get() else {
        return;
    };
    let (mut child, marker) = start_sleep_behind_link(sandbox, Stdio::null());
    // unshare, sh and setpriv exec in turn: the child is httpvs itself, in its user namespace;
    // its helper in the host namespace and the command carry the marker too.
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    while processes_with(&marker) > 0 {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "a process outlived a SIGKILLed httpvs (its helper or the command)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rootless_ctrl_c_ends_the_command_and_the_counters_are_printed() {
    let Some(sandbox) = Sandbox::get() else {
        return;
    };
    let (mut child, marker) = start_sleep_behind_link(sandbox, Stdio::piped());
    let stderr = drain(child.stderr.take().unwrap());
    // As the terminal does: SIGINT to the whole foreground process group.
    // SAFETY: signalling the process group we just made.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let status = wait_bounded(&mut child);
    let stderr = text(&stderr.join().unwrap());
    assert_eq!(status.code(), Some(130), "128 + SIGINT: {stderr}");
    assert!(stderr.contains("\nup "), "counters printed: {stderr}");
    assert_eq!(processes_with(&marker), 0, "the helper ends with httpvs");
}

/// How many processes have `marker` as an argument (httpvs, its helper, the sleep).
fn processes_with(marker: &str) -> usize {
    let wanted = format!("\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.windows(wanted.len()).any(|w| w == wanted.as_bytes()))
        })
        .count()
}

#[test]
fn without_a_usable_tun_device_the_error_is_one_line_naming_the_fix() {
    let Some(sandbox) = Sandbox::get() else {
        return;
    };
    let out = run_bounded(sandbox.httpvs("600", &["netem", "--both", "delay 1ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/dev/net/tun is 0600 and you are not root"),
        "{stderr}"
    );
    assert!(
        stderr.contains("run as root (sudo)") && stderr.contains("chmod 0666 /dev/net/tun"),
        "{stderr}"
    );
}
