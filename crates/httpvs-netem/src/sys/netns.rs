//! Network namespaces held only by a file descriptor: unnamed, so they vanish with the process.

use super::check;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command};

/// A network namespace, kept alive by this handle (and by any process inside it).
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
}

impl NetNs {
    /// A new, empty namespace. A helper thread unshares into it, so the caller stays where it is.
    pub fn create() -> io::Result<NetNs> {
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: unshare only changes this helper thread's namespace, which ends with it.
                check(unsafe { libc::unshare(libc::CLONE_NEWNET) })?;
                NetNs::of_this_thread()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
        })
    }

    /// The namespace the calling thread is in.
    pub fn of_this_thread() -> io::Result<NetNs> {
        let file = File::open("/proc/thread-self/ns/net")?;
        Ok(NetNs { fd: file.into() })
    }

    /// Runs `f` on a helper thread inside this namespace; sockets it creates stay in it.
    pub fn run<T: Send, F: FnOnce() -> T + Send>(&self, f: F) -> io::Result<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter()?;
                Ok(f())
            })
            .join()
            .map_err(|_| io::Error::other("closure run in the namespace panicked"))?
        })
    }

    /// Moves the calling thread into this namespace.
    fn enter(&self) -> io::Result<()> {
        // SAFETY: setns on a namespace fd we own; it changes only the calling thread.
        check(unsafe { libc::setns(self.fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(|_| ())
    }

    /// Starts `command` inside this namespace. It is killed if the spawning thread dies, so a
    /// killed httpvs leaves no process behind holding the namespace.
    pub fn spawn(&self, command: &mut Command) -> io::Result<Child> {
        use std::os::unix::process::CommandExt;
        let fd = self.fd.as_raw_fd();
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the hook runs between fork and exec and calls only async-signal-safe syscalls.
        unsafe {
            command.pre_exec(move || {
                check(libc::setns(fd, libc::CLONE_NEWNET))?;
                check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
                // httpvs forwards Ctrl-C and SIGTERM to the command, so the command must not
                // inherit them ignored (a shell starts background jobs with SIGINT ignored, and
                // an ignored signal stays ignored across exec).
                for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
                    libc::signal(signal, libc::SIG_DFL);
                }
                // The parent may have died before the death signal was armed.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        command.spawn()
    }

    /// Ends every process still inside this namespace but ours (what a command left running
    /// in the background): SIGTERM, then SIGKILL to those still there after `grace`. Returns
    /// how many it found. A process that forks as it is ended is found on the next pass.
    pub fn end_members(&self, grace: std::time::Duration) -> usize {
        let deadline = std::time::Instant::now() + grace;
        let mut ended = std::collections::HashSet::new();
        loop {
            let members = self.members();
            if members.is_empty() {
                return ended.len();
            }
            let late = std::time::Instant::now() >= deadline;
            for pid in members {
                let signal = if late { libc::SIGKILL } else { libc::SIGTERM };
                if ended.insert(pid) || late {
                    // SAFETY: kill takes no pointers; `pid` was in our namespace a moment ago
                    // (a pid reused since then by another process there is as much ours).
                    unsafe { libc::kill(pid, signal) };
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The processes (but ours) whose network namespace is this one, from /proc.
    fn members(&self) -> Vec<libc::pid_t> {
        use std::os::unix::fs::MetadataExt;
        let id = |path: &str| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let Some(ours) = id(&format!("/proc/self/fd/{}", self.fd.as_raw_fd())) else {
            return Vec::new();
        };
        let me = std::process::id() as libc::pid_t;
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|entry| {
            entry
                .ok()?
                .file_name()
                .to_str()?
                .parse::<libc::pid_t>()
                .ok()
        })
        .filter(|&pid| pid != me && id(&format!("/proc/{pid}/ns/net")) == Some(ours))
        .collect()
    }
}
