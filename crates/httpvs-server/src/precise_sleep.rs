//! `delay=` to the microsecond: tokio's timer wakes on 1 ms ticks (1-2 ms late, and never under
//! a tick), so a delay waits on tokio for all but its last 4 ms and on a one-shot timerfd after.
//!
//! The server is how users check a load generator's percentiles (Fortio's echo server holds its
//! delay to microseconds): `delay=10ms` answered at 11.3 ms, and `delay=250us` at 1.2 ms.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The part of a delay left to the timerfd: more than tokio's lateness (a deadline rounded up to
/// the next 1 ms tick, and the park's timeout rounded up again; measured up to 2.6 ms).
const FINE_PART: Duration = Duration::from_millis(4);

/// Waits until `at`, within microseconds; falls back to tokio's timer if no timerfd can be made.
pub async fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at <= now {
        return;
    }
    if let Some(coarse) = at.checked_sub(FINE_PART) {
        if coarse > now {
            tokio::time::sleep_until(coarse.into()).await;
        }
    }
    let left = at.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    match one_shot(left) {
        Ok(timer) => {
            if timer.readable().await.is_err() {
                tokio::time::sleep_until(at.into()).await;
            }
        }
        Err(_) => tokio::time::sleep_until(at.into()).await,
    }
}

/// Waits `delay`, within microseconds.
pub async fn sleep(delay: Duration) {
    sleep_until(Instant::now() + delay).await;
}

/// A timerfd (CLOCK_MONOTONIC, as `Instant`) that becomes readable `after` from now.
fn one_shot(after: Duration) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: timerfd_create takes no pointers; a non-negative result is a new descriptor that
    // nothing else owns.
    let raw = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just created and is owned here alone.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            // A zero it_value would disarm the timer: at least 1 ns.
            tv_nsec: after.subsec_nanos().max(u32::from(after.as_secs() == 0)) as libc::c_long,
        },
    };
    // SAFETY: `spec` is a valid itimerspec for the call's duration; the old value is not asked.
    if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is an open descriptor that the AsyncFd owns from here until it is dropped,
    // so it stays open and names the same timer for the registration's whole life.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delay never ends early, below a tick and above one (how late it ends is measured by
    /// hand, not asserted: a loaded machine may wake any process late).
    #[tokio::test(flavor = "current_thread")]
    async fn delays_never_end_early() {
        for delay in [Duration::from_micros(250), Duration::from_millis(3)] {
            let mut took = Vec::new();
            for _ in 0..9 {
                let start = Instant::now();
                sleep(delay).await;
                took.push(start.elapsed());
            }
            took.sort();
            assert!(took[0] >= delay, "{delay:?}: woke early: {took:?}");
        }
    }
}
