//! The rootless layout: without root, the process splits in two before any thread exists. The
//! child enters a user namespace of its own (root there) with a fresh network namespace, where
//! every link is built as usual, with that namespace in the host's place. The parent stays in the
//! host's namespace, makes sockets there on request (the forwarder uses them to reach the host's
//! loopback), forwards signals and exits with the child's status.
//!
//! Everything of ours hangs on the child: its namespaces are owned by its user namespace and die
//! with it; it gets SIGKILL when the parent dies, and the parent ends when the child's end of
//! their channel closes.

pub(crate) mod forward;
mod host_sockets;
mod userns;

use crate::sys::check;
use host_sockets::HostSockets;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// What happened when this process tried to enter the rootless layout.
#[derive(Debug)]
enum State {
    /// We are the child inside the user namespace; the parent makes host sockets for us.
    Inside(HostSockets),
    /// The attempt failed: why, for preflight's message.
    Failed(String),
}

static STATE: OnceLock<State> = OnceLock::new();

/// Enters the rootless layout when it is needed and possible: not root, unprivileged user
/// namespaces allowed, /dev/net/tun readable and writable. Call it first thing in `main`, before
/// any thread starts (a multithreaded process cannot enter a user namespace). Then links work as
/// for root: [`Layout::HostLoopback`](crate::Layout) reaches the host's loopback through a
/// forwarder (TCP and UDP, any port). In the parent this never returns: it serves the child and
/// exits with its status. If entering fails, [`preflight`](crate::preflight) says why.
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

/// Whether this process is the child inside the rootless layout's user namespace.
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

/// Forks. The parent serves host sockets and never returns; the child enters the namespaces.
fn split() -> std::io::Result<HostSockets> {
    let (host_end, child_end) = host_sockets::channel_pair()?;
    // SAFETY: plain getters.
    let (uid, gid, parent) = unsafe { (libc::getuid(), libc::getgid(), libc::getpid()) };
    // SAFETY: the process is single-threaded here (the caller's contract), so the child may
    // run ordinary code.
    let pid = check(unsafe { libc::fork() })?;
    if pid > 0 {
        drop(child_end);
        run_host_side(&host_end, pid);
    }
    drop(host_end);
    // SAFETY: prctl/getppid on ourselves; the parent may have died before the signal was armed.
    unsafe {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
    userns::enter_as_root(uid, gid)?;
    Ok(HostSockets::new(child_end))
}

/// The child's pid, for the parent's signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Passes on signals someone sent the parent with kill(2). Signals from the terminal (Ctrl-C)
/// reach the child directly, as it is in the same process group: passing those on would double them.
extern "C" fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let from_kernel = unsafe { (*info).si_code } == libc::SI_KERNEL;
    let child = CHILD.load(Ordering::Relaxed);
    if !from_kernel && child > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(child, signal) };
    }
}

/// The parent: serve sockets until the child's end closes, then exit with the child's status.
fn run_host_side(channel: &std::os::fd::OwnedFd, child: libc::pid_t) -> ! {
    CHILD.store(child, Ordering::Relaxed);
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installing a handler that only reads an atomic and calls kill.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = pass_on as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    host_sockets::serve(channel);
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(child, &mut status, 0) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    std::process::exit(code)
}
