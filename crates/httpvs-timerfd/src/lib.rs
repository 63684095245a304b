//! A CLOCK_MONOTONIC timerfd on tokio's reactor: waits to the microsecond, where tokio's timer
//! wakes on 1 ms ticks. The load generator's open-model pacer and the server's `delay=` share it.
//!
//! Where there is no timerfd (not Linux, or no descriptor left), [`TimerFd::new`] fails and the
//! callers fall back to tokio's timer.

use std::io;
use std::time::Duration;

/// A timer on the clock `Instant` reads, armed with times relative to now.
#[derive(Debug)]
pub struct TimerFd(imp::Fd);

impl TimerFd {
    /// A disarmed timer registered with the current tokio runtime.
    pub fn new() -> io::Result<TimerFd> {
        imp::Fd::new().map(TimerFd)
    }

    /// A timer that expires `after` from now.
    pub fn after(after: Duration) -> io::Result<TimerFd> {
        let timer = TimerFd::new()?;
        timer.arm(after)?;
        Ok(timer)
    }

    /// Expires `after` from now, replacing any earlier arming (a zero `after` expires at once).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        self.0.arm(after)
    }

    /// Waits for the next expiry.
    pub async fn expired(&self) -> io::Result<()> {
        self.0.expired().await
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    #[derive(Debug)]
    pub struct Fd(AsyncFd<OwnedFd>);

    impl Fd {
        pub fn new() -> io::Result<Fd> {
            // SAFETY: timerfd_create takes no pointers; a non-negative result is a new
            // descriptor that nothing else owns.
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
            // SAFETY: `fd` is an open descriptor that the AsyncFd owns from here until it is
            // dropped, so it names the same timer for the registration's whole life.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
                .map(Fd)
                .map_err(io::Error::from)
        }

        pub fn arm(&self, after: Duration) -> io::Result<()> {
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: after.as_secs() as libc::time_t,
                    // A zero it_value would disarm the timer: at least 1 ns.
                    tv_nsec: after.subsec_nanos().max(u32::from(after.as_secs() == 0))
                        as libc::c_long,
                },
            };
            // SAFETY: `spec` is a valid itimerspec for the call; the old value is not asked.
            let set = unsafe {
                libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if set < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        pub async fn expired(&self) -> io::Result<()> {
            loop {
                let mut ready = self.0.readable().await?;
                let mut count = [0u8; 8];
                // SAFETY: reads at most 8 bytes into `count`, which is 8 bytes long.
                let n = unsafe {
                    libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len())
                };
                if n == 8 {
                    return Ok(());
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::WouldBlock {
                    return Err(error);
                }
                ready.clear_ready();
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::time::Duration;

    #[derive(Debug)]
    pub struct Fd;

    impl Fd {
        pub fn new() -> io::Result<Fd> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn arm(&self, _after: Duration) -> io::Result<()> {
            Ok(())
        }
        pub async fn expired(&self) -> io::Result<()> {
            std::future::pending().await
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An expiry never comes early, and re-arming replaces the earlier time.
    #[tokio::test(flavor = "current_thread")]
    async fn expiries_never_come_early() {
        let start = Instant::now();
        let timer = TimerFd::after(Duration::from_millis(2)).expect("a timerfd");
        timer.expired().await.expect("it expires");
        assert!(start.elapsed() >= Duration::from_millis(2));
        let rearmed = Instant::now();
        timer.arm(Duration::from_secs(3600)).expect("armed");
        timer.arm(Duration::from_micros(300)).expect("re-armed");
        timer.expired().await.expect("it expires");
        assert!(rearmed.elapsed() >= Duration::from_micros(300));
        assert!(rearmed.elapsed() < Duration::from_secs(3600));
    }
}
