//! `delay=` to the microsecond: tokio's timer wakes on 1 ms ticks (1-2 ms late, and never under
//! a tick), so a delay waits on tokio for all but its last 4 ms and on a one-shot timerfd after.
//!
//! The server is how users check a load generator's percentiles (Fortio's echo server holds its
//! delay to microseconds): `delay=10ms` answered at 11.3 ms, and `delay=250us` at 1.2 ms.

use httpvs_timerfd::TimerFd;
use std::time::{Duration, Instant};

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
    match TimerFd::after(left) {
        Ok(timer) => {
            if timer.expired().await.is_err() {
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
