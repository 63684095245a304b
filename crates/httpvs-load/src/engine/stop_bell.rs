//! A stop that reaches every worker at once: a signal handler rings an eventfd that each
//! worker's runtime watches, where the workers otherwise look at the stop flag every 100 ms.
//!
//! In those 100 ms a run went on starting requests after Ctrl-C or SIGTERM. When the server
//! died with the same stop (a script's Ctrl-C reaches both, `timeout` kills a process group),
//! they failed as `refused` by the thousand, and the responses in flight failed as truncated
//! where the report counts them cut off. The bell is never read: once rung, it stays readable
//! for every worker of every run in the process, which is what a stop is.
//!
//! [`ring`] is async-signal-safe: an atomic load and a `write(2)`. Without [`install`] (a
//! library user with a stop flag of its own) it does nothing, and the 100 ms look remains.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The bell's eventfd, or -1 before [`install`].
static BELL: AtomicI32 = AtomicI32::new(-1);

/// Makes the bell (once per process; later calls keep the first). Call it before installing
/// a signal handler that calls [`ring`].
pub fn install() {
    if BELL.load(Ordering::Acquire) >= 0 {
        return;
    }
    // SAFETY: eventfd takes no pointers; a failure returns -1, which leaves the bell unmade.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return;
    }
    if BELL
        .compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Another thread made one first.
        // SAFETY: `fd` was opened above and is not shared.
        unsafe { libc::close(fd) };
    }
}

/// Rings the bell: every worker watching it wakes. Async-signal-safe.
pub fn ring() {
    let fd = BELL.load(Ordering::Acquire);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to the eventfd, which is never closed once
        // installed. A full counter (EAGAIN) means it is already rung.
        unsafe { libc::write(fd, std::ptr::addr_of!(one).cast(), 8) };
    }
}

/// A worker's watch on the bell, registered with its runtime (`None` without a bell, or if
/// the registration failed: the worker then only looks at the flag). Each listener holds a
/// duplicate of the bell's descriptor: one epoll takes a descriptor once, and a runtime may
/// watch the bell for more than one run.
pub struct Listener(Option<AsyncFd<OwnedFd>>);

impl Listener {
    /// Watches the bell from the current runtime.
    pub fn watch() -> Listener {
        let fd = BELL.load(Ordering::Acquire);
        if fd < 0 {
            return Listener(None);
        }
        // SAFETY: the bell is open for the process's life; dup takes no pointers.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Listener(None);
        }
        // SAFETY: `dup` was just made and is owned here alone.
        let owned = unsafe { OwnedFd::from_raw_fd(dup) };
        // SAFETY: the AsyncFd owns `owned` until it is dropped, so the registration names the
        // same open file for its whole life.
        Listener(unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }.ok())
    }

    /// Completes once the bell has rung (at once if it already had); never without a bell.
    pub async fn rung(&self) {
        match &self.0 {
            // Readiness is not cleared: the bell stays rung for the next look too.
            Some(bell) => {
                let _ = bell.readable().await;
            }
            None => std::future::pending().await,
        }
    }

    /// Stops watching (a bell rung for another run's stop must not wake this one in a loop).
    pub fn stop_listening(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every listener wakes on one ring, and stays woken; nothing here waits on a clock.
    #[test]
    fn one_ring_wakes_every_listener_for_good() {
        install();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .unwrap();
            runtime.block_on(async {
                let (a, b) = (Listener::watch(), Listener::watch());
                assert!(a.0.is_some() && b.0.is_some());
                ring();
                a.rung().await;
                b.rung().await;
                a.rung().await;
                // A listener made after the ring sees it too.
                Listener::watch().rung().await;
            });
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("every listener woke");
    }
}
