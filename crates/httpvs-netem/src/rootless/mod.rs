//! The rootless layout: without root, the process splits in two before any thread exists. The
//! process itself enters a user namespace of its own (root there) with a fresh network
//! namespace, where every link is built as usual, with that namespace in the host's place. A
//! forked helper stays in the host's namespace and makes sockets there on request; the forwarder
//! uses them to reach the host's loopback.
//!
//! Nothing outlives the process: its namespaces are owned by its user namespace and die with
//! it; the helper gets SIGKILL when it dies and also ends when their channel closes. Signals
//! and the exit status stay the process's own, as the helper is not in their way.

pub(crate) mod host_sockets;
mod userns;

use crate::sys::check;
use host_sockets::HostSockets;
use std::sync::OnceLock;

/// The signals that stop a run behind a link: `httpvs netem` passes them on to its command and
/// cleans up after it, and the rootless helper ignores them (a group-sent one must not end it
/// before the process is done with it).
pub const STOP_SIGNALS: [libc::c_int; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// What happened when this process tried to enter the rootless layout.
#[derive(Debug)]
enum State {
    /// We are inside the user namespace; the helper makes host sockets for us.
    Inside(HostSockets),
    /// The attempt failed: why, for preflight's message.
    Failed(String),
}

static STATE: OnceLock<State> = OnceLock::new();

/// Enters the rootless layout when it is needed and possible: not root, unprivileged user
/// namespaces allowed, /dev/net/tun readable and writable. Call it first thing in `main`, before
/// any thread starts (a multithreaded process cannot enter a user namespace). Then links work as
/// for root: [`Layout::HostLoopback`](crate::Layout) reaches the host's loopback through a
/// forwarder (TCP and UDP, any port). If entering fails, [`preflight`](crate::preflight) says why.
pub fn enter() {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } == 0 || STATE.get().is_some() {
        return;
    }
    if !crate::preflight::rootless_possible() {
        return;
    }
    let state = match split() {
        Ok(sockets) => State::Inside(sockets),
        Err(e) => State::Failed(e.to_string()),
    };
    let _ = STATE.set(state);
}

/// Whether this process is inside the rootless layout's user namespace.
pub fn is_inside() -> bool {
    matches!(STATE.get(), Some(State::Inside(_)))
}

/// Why entering the rootless layout failed, if it was tried and did.
pub(crate) fn failure() -> Option<&'static str> {
    match STATE.get() {
        Some(State::Failed(why)) => Some(why),
        _ => None,
    }
}

/// The channel to the host side, inside the rootless layout.
pub(crate) fn host_sockets() -> Option<&'static HostSockets> {
    match STATE.get() {
        Some(State::Inside(sockets)) => Some(sockets),
        _ => None,
    }
}

/// Forks a helper that stays in the host's namespace, then enters the user namespace.
fn split() -> std::io::Result<HostSockets> {
    let (ours, helpers) = host_sockets::channel_pair()?;
    // SAFETY: plain getters.
    let (uid, gid, parent) = unsafe { (libc::getuid(), libc::getgid(), libc::getpid()) };
    // SAFETY: the process is single-threaded here (the caller's contract), so the child may
    // run ordinary code.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        drop(ours);
        run_helper(&helpers, parent);
    }
    drop(helpers);
    // On failure `ours` is dropped, the channel closes and the helper ends.
    userns::enter_as_root(uid, gid)?;
    Ok(HostSockets::new(ours))
}

/// The helper: makes host sockets until the channel closes or its parent dies, then exits.
fn run_helper(channel: &std::os::fd::OwnedFd, parent: libc::pid_t) -> ! {
    // SAFETY: prctl, signal, open and dup2 on ourselves; nothing here can touch the parent.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 || libc::getppid() != parent {
            libc::_exit(0);
        }
        // Ctrl-C and friends are for the process, which decides when to stop; the helper
        // must keep serving until then.
        for signal in STOP_SIGNALS {
            libc::signal(signal, libc::SIG_IGN);
        }
        // Hold none of the process's terminal or pipes open: a reader sees its end at its exit.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
    }
    host_sockets::serve(channel);
    // SAFETY: leaving without running the parent's exit handlers or flushing its buffers.
    unsafe { libc::_exit(0) }
}
