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
}
