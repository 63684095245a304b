//! Nothing of ours is left after `httpvs netem` ends by SIGKILL or SIGINT: no namespace, TUN
//! device, nft table or child process; and what the command itself starts in the background
//! ends with it (on its exit, or when SIGTERM ends it).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `httpvs netem -- sleep SECONDS` and waits until its host device exists.
fn start_netem(sleep_arg: &str) -> (Child, String) {
    start_netem_ignoring(sleep_arg, None)
}

/// [`start_netem`], with `ignored` set to SIG_IGN in httpvs from its start (as `nohup` does).
fn start_netem_ignoring(sleep_arg: &str, ignored: Option<libc::c_int>) -> (Child, String) {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(env!("CARGO_BIN_EXE_httpvs"));
    command
        .args(["netem", "--both", "delay 1ms", "--", "sleep", sleep_arg])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(signal) = ignored {
        // SAFETY: signal() is async-signal-safe, as a pre_exec hook must be.
        unsafe {
            command.pre_exec(move || {
                libc::signal(signal, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    let child = command.spawn().expect("start httpvs netem");
    let device = format!("hv-{}-0", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new(&format!("/sys/class/net/{device}")).exists() {
        assert!(Instant::now() < deadline, "device {device} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    // And until the command runs, so its fate is checked too.
    while processes_with(sleep_arg).is_empty() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, device)
}

fn command_output(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(_) => String::new(),
    }
}

/// Processes whose command line starts with `sleep SLEEP_ARG` (not httpvs itself, whose command
/// line holds the same words: waiting for it instead would let a signal arrive before httpvs
/// installed its handlers).
fn processes_with(sleep_arg: &str) -> Vec<String> {
    let needle = format!("sleep {sleep_arg}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.starts_with(&needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

/// Waits (briefly) until the device and the sleeping child are gone, then checks every listing.
fn assert_nothing_left(pid: u32, device: &str, sleep_arg: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while (Path::new(&format!("/sys/class/net/{device}")).exists()
        || !processes_with(sleep_arg).is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ours = format!("hv-{pid}-");
    let links = command_output("ip", &["link"]);
    assert!(!links.contains(&ours), "TUN device left:\n{links}");
    let netns = command_output("ip", &["netns", "list"]);
    assert!(
        !netns.contains("httpvs") && !netns.contains(&pid.to_string()),
        "{netns}"
    );
    let tables = command_output("nft", &["list", "tables"]);
    assert!(!tables.contains("httpvs"), "nft table left:\n{tables}");
    assert!(
        processes_with(sleep_arg).is_empty(),
        "the command outlived httpvs"
    );
}

#[test]
fn sigkill_leaves_nothing_behind() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let sleep_arg = "30.4711";
    let (mut child, device) = start_netem(sleep_arg);
    let pid = child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert_nothing_left(pid, &device, sleep_arg);
}

#[test]
fn sigint_ends_the_command_and_prints_counters() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let sleep_arg = "30.4712";
    let (child, device) = start_netem(sleep_arg);
    let pid = child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "sleep killed by SIGINT: 128 + 2"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rejected"), "counters printed:\n{stderr}");
    assert_nothing_left(pid, &device, sleep_arg);
}

/// A signal ignored when httpvs started stays ignored, by httpvs and by its command, as a
/// shell leaves it: under `nohup`, httpvs's handler took SIGHUP and passed it on, and the
/// command ended with 129.
#[test]
fn a_signal_ignored_from_the_start_stays_ignored() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let sleep_arg = "1.4715";
    let (child, _) = start_netem_ignoring(sleep_arg, Some(libc::SIGHUP));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// `sh -c` jobs the command leaves running (one ignoring SIGTERM) end with it: they would keep
/// the namespace alive, and themselves running, after httpvs.
#[test]
fn background_jobs_end_with_the_command() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let script = "sleep 30.4713 & (trap '' TERM; exec sleep 30.4714) & exit 3";
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["netem", "--both", "delay 1ms", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "the command's own status");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ended 2 processes"), "{stderr}");
    for sleep_arg in ["30.4713", "30.4714"] {
        assert!(
            processes_with(sleep_arg).is_empty(),
            "{sleep_arg} outlived httpvs"
        );
    }
}

/// SIGTERM (as `timeout` and service managers send it) ends the command, and the child the
/// command was waiting for is ended too.
#[test]
fn sigterm_ends_what_the_command_started() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let sleep_arg = "30.4715";
    let child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["netem", "-q", "--both", "delay 1ms", "--", "sh", "-c"])
        .arg(format!("sleep {sleep_arg}; true"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(sleep_arg).is_empty() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "sh killed by SIGTERM: 128 + 15"
    );
    assert_nothing_left(pid, &format!("hv-{pid}-0"), sleep_arg);
}

/// A signal httpvs has no other use for (SIGUSR1 here) is passed on too, so the link and what
/// the command left running are still taken down; it used to kill httpvs outright and leave
/// the command's background jobs holding the namespace.
#[test]
fn other_signals_are_passed_on_and_cleaned_up_after() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let sleep_arg = "30.5813";
    let child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["netem", "-q", "--both", "delay 1ms", "--", "sh", "-c"])
        .arg(format!("sleep {sleep_arg} & sleep {sleep_arg}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(sleep_arg).len() < 2 {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(138),
        "sh killed by SIGUSR1: 128 + 10"
    );
    assert_nothing_left(pid, &format!("hv-{pid}-0"), sleep_arg);
}
