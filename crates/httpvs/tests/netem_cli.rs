//! `httpvs netem` as a user runs it: profiles, flag errors, a real curl behind the link, exit codes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};

fn httpvs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(args)
        .output()
        .expect("run httpvs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn profiles_are_listed_with_their_netem_strings() {
    let out = httpvs(&["netem", "--profiles"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    for name in ["lan", "wan", "3g", "lossy", "satellite", "severe"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("loss 30%"), "{stdout}");
}

#[test]
fn a_bad_netem_token_is_named_in_one_line() {
    let out = httpvs(&["netem", "--both", "delay 50ms jitterbug 3", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("`jitterbug`"), "{stderr}");
    let out = httpvs(&["netem", "--profile", "moon", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`moon`"));
    let out = httpvs(&["netem", "--both", "delay 5ms"]);
    assert_eq!(out.status.code(), Some(2), "a command is required");
    // A unit-less value's note is for a run that goes ahead: a refusal is its one line alone.
    for args in [
        &["netem", "--both", "delay 20"][..],
        &["netem", "--both", "delay 20", "--", "no-such-program-xyz"],
    ] {
        let out = httpvs(args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    // --profiles runs nothing: beside a spec or a command it would have left them unchecked.
    for args in [
        &["netem", "--profiles", "--both", "delay bad"][..],
        &["netem", "--profiles", "--", "true"],
    ] {
        let out = httpvs(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr.contains("give it alone"), "{args:?}: {stderr}");
    }
    // Both directions name their seed: --seed would be dropped unseen.
    let out = httpvs(&[
        "netem",
        "--both",
        "delay 5ms seed 7",
        "--seed",
        "8",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--seed 8 is not used"),
        "{}",
        text(&out.stderr)
    );
    // --up and --down each replace --both (or --profile): a typo there went unseen.
    for base in [["--both", "delay 20ms jitterbug"], ["--profile", "wan"]] {
        let mut args = vec!["netem", base[0], base[1]];
        args.extend(["--up", "delay 5ms", "--down", "delay 5ms", "--", "true"]);
        let out = httpvs(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let expected = format!("{} is not used", base[0]);
        assert!(stderr.contains(&expected), "{stderr}");
    }
    // --both replaces a profile's two directions: `--profile 3g --both "loss 1%"` ran loss
    // alone, 3g's delay and rates dropped unsaid.
    for extra in [&[][..], &["--up", "delay 5ms"][..]] {
        let mut args = vec!["netem", "--profile", "3g", "--both", "loss 1%"];
        args.extend(extra);
        args.extend(["--", "true"]);
        let out = httpvs(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("--profile is not used: --both"), "{stderr}");
    }
}

/// A direction whose options name a seed draws from it, and the banner says so (it printed
/// only the link's seed, which that direction does not use).
#[test]
fn a_seed_in_the_options_is_the_one_shown() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let out = httpvs(&[
        "netem",
        "--up",
        "delay 1ms seed 3",
        "--down",
        "delay 1ms",
        "--seed",
        "9",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("| seed 3 up (its options), 9 down"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(--seed 9 repeats the same choices)"),
        "{stderr}"
    );
}

/// An MTU QUIC cannot cross is said up front: h3 behind `--mtu 1000` only timed out, while
/// the banner spoke of IPv6 alone.
#[test]
fn an_mtu_below_quic_s_datagrams_is_noted() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let out = httpvs(&["netem", "--mtu", "1000", "--", "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--mtu 1000 is below 1228: QUIC"),
        "{}",
        text(&out.stderr)
    );
    let out = httpvs(&["netem", "--mtu", "1228", "--", "true"]);
    assert!(!text(&out.stderr).contains("QUIC"), "{}", text(&out.stderr));
}

#[test]
fn the_command_exit_code_comes_back() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let out = httpvs(&["netem", "--both", "delay 1ms", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("rejected") && stderr.contains("\nup "),
        "counters printed:\n{stderr}"
    );
    let out = httpvs(&["netem", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(127));
}

/// The command's words go to it as they came, UTF-8 or not: a file name in Latin-1 was
/// refused with clap's "invalid UTF-8 was detected".
#[test]
fn command_words_need_not_be_utf8() {
    use std::os::unix::ffi::OsStrExt;
    if !httpvs_testkit::require_root() {
        return;
    }
    let word = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["netem", "-q", "--both", "delay 1ms", "--", "printf", "%s"])
        .arg(word)
        .output()
        .expect("run httpvs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(out.stdout, b"caf\xe9");
}

/// A script whose `#!` interpreter is missing says so, as a shell's "bad interpreter" (it
/// said "No such file or directory" of a file that is there).
#[test]
fn a_script_with_a_missing_interpreter_says_so() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let script = std::env::temp_dir().join(format!("httpvs-bad-interp-{}.sh", std::process::id()));
    std::fs::write(&script, "#!/nonexistent/interp -x\necho hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = httpvs(&["netem", "-q", "--", script.to_str().unwrap()]);
    let _ = std::fs::remove_file(&script);
    assert_eq!(out.status.code(), Some(127));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "its #! line names /nonexistent/interp, which is not there (bad interpreter)"
        ),
        "{stderr}"
    );
}

/// A command that cannot run is one line and 127, found before any link or banner (so it
/// needs no root).
#[test]
fn a_command_that_does_not_exist_is_one_line_and_127() {
    // After `--` even a word like an option is the command (it read as an unknown option).
    for program in ["no-such-command-httpvs", "/nonexistent/program", "--foo"] {
        let out = httpvs(&["netem", "--both", "delay 1ms", "--", program]);
        assert_eq!(out.status.code(), Some(127), "{program}");
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("cannot run `{program}`")),
            "{stderr}"
        );
    }
    // Found but not runnable: 126, as a shell says.
    let plain = std::env::temp_dir().join(format!("httpvs-netem-plain-{}", std::process::id()));
    std::fs::write(&plain, "not a program").unwrap();
    let dir = std::env::temp_dir();
    for (program, why) in [
        (dir.to_str().unwrap(), "a directory, not a program"),
        (plain.to_str().unwrap(), "not executable"),
    ] {
        let out = httpvs(&["netem", "--both", "delay 1ms", "--", program]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(126), "{program}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
    }
    let _ = std::fs::remove_file(&plain);
    // `--` is optional: the command starts at the first word that is not an option.
    let out = httpvs(&[
        "netem",
        "--both",
        "delay 1ms",
        "no-such-command-httpvs",
        "-x",
    ]);
    assert_eq!(out.status.code(), Some(127));
    // ... so a mistyped option is named as one, not run as a command.
    let out = httpvs(&["netem", "--bth", "delay 1ms", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown option --bth"),
        "{}",
        text(&out.stderr)
    );
    // An impairment given as a flag, as other tools take it, is shown as it goes here.
    let out = httpvs(&["netem", "--delay", "50ms", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(r#"like --both "delay 50ms""#),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn curl_behind_50ms_each_way_sees_a_100ms_connect() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let Some(curl) = httpvs_testkit::require_peer("curl") else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello")
            .unwrap();
    });
    let url = format!("http://127.0.0.1:{port}/");
    let out = httpvs(&[
        "netem",
        "--both",
        "delay 50ms",
        "--seed",
        "1",
        "--",
        curl.to_str().unwrap(),
        "-s",
        "-w",
        " %{time_connect}",
        &url,
    ]);
    server.join().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (body, connect) = stdout.split_once(' ').unwrap();
    assert_eq!(body, "hello");
    let connect: f64 = connect.trim().parse().unwrap();
    assert!(
        connect >= 0.100,
        "connect {connect} s: the link's 100 ms round trip is in it"
    );
    assert!(
        text(&out.stderr).contains("seed 1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn without_root_the_error_says_why_and_what_would_fix_it() {
    if !httpvs_testkit::require_root() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["netem", "--both", "delay 5ms", "--", "true"])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run httpvs as nobody");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("you are not root"), "{stderr}");
    assert!(stderr.contains("run as root"), "{stderr}");
}

#[test]
fn curl_downloads_20mb_intact_through_5_percent_loss() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let Some(curl) = httpvs_testkit::require_peer("curl") else {
        return;
    };
    const SIZE: usize = 20 * 1024 * 1024;
    let body: Vec<u8> = (0..SIZE).map(|i| (i * 13 + i / 65_521) as u8).collect();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = body.clone();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-length: {SIZE}\r\nconnection: close\r\n\r\n");
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(&served).unwrap();
    });
    let file = std::env::temp_dir().join(format!("httpvs-netem-20mb-{}", std::process::id()));
    let url = format!("http://127.0.0.1:{port}/");
    let out = httpvs(&[
        "netem",
        "--both",
        "delay 1ms loss 5%",
        "--seed",
        "5",
        "--",
        curl.to_str().unwrap(),
        "-sS",
        "--max-time",
        "120",
        "-o",
        file.to_str().unwrap(),
        &url,
    ]);
    server.join().unwrap();
    let received = std::fs::read(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(received.len(), SIZE);
    assert!(received == body, "the body arrived changed");
}

/// A UDP server on the wildcard address answers from whatever source the route picks (caddy's
/// QUIC socket does): through the link that must be 127.0.0.1, the address the client dialled,
/// or a connected socket (and a QUIC client) drops the reply as a stranger's.
#[test]
fn a_wildcard_udp_server_answers_from_the_address_dialled() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let echo = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = echo.local_addr().unwrap().port();
    echo.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        if let Ok((n, from)) = echo.recv_from(&mut buf) {
            let _ = echo.send_to(&buf[..n], from);
        }
    });
    // bash's /dev/udp connects its socket: a reply from another address never reaches it.
    let script = format!(
        "exec 3<>/dev/udp/127.0.0.1/{port}; echo hi >&3; read -t 2 -r line <&3; echo \"got $line\""
    );
    let out = httpvs(&[
        "netem",
        "-q",
        "--both",
        "delay 1ms",
        "--",
        "bash",
        "-c",
        &script,
    ]);
    server.join().unwrap();
    // bash reads a datagram a byte at a time: the first byte shows the reply came.
    assert!(text(&out.stdout).starts_with("got h"), "{out:?}");
}

/// A link inside a link is refused up front with what to do instead: it failed in set-up
/// with the kernel's bare "Invalid argument" (the outer link routes 127.0.0.1 through itself).
#[test]
fn a_link_inside_a_link_is_refused_with_the_fix() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_httpvs");
    let out = httpvs(&[
        "netem",
        "-q",
        "--both",
        "delay 1ms",
        "--",
        bin,
        "netem",
        "--both",
        "delay 1ms",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("links do not nest (give one link both impairments"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // An empty mark is no link's: it refused every run with "(httpvs netem, )".
    let out = Command::new(bin)
        .args(["netem", "-q", "--", "true"])
        .env("HTTPVS_NETEM_LINK", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The forwarder's sockets get the raised open-file limit (at 1024, `-c 1500` over [::1] lost
/// a third of its requests); the command keeps the limit it was given.
#[test]
fn netem_raises_its_own_file_limit_and_not_the_command_s() {
    use std::os::unix::process::CommandExt;
    if !httpvs_testkit::require_root() {
        return;
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_httpvs"));
    command.args([
        "netem",
        "-q",
        "--both",
        "delay 1ms",
        "--",
        "sh",
        "-c",
        "ulimit -n; grep 'Max open files' /proc/$PPID/limits",
    ]);
    // SAFETY: setrlimit between fork and exec, on a local struct.
    unsafe {
        command.pre_exec(|| {
            let mut limit: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = limit.rlim_max.min(1000);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let out = command.output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("1000"), "{stdout}");
    let ours: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    // "Max open files SOFT HARD files": raised to the hard limit.
    assert_eq!(ours.get(3), ours.get(4), "{stdout}");
}
