//! The per-request timeout without a timer per request: each stream keeps one `Sleep` and
//! re-arms it only when it fires before the current request's deadline.
//!
//! A stream's requests start in order, so every new deadline is later than the armed one. The
//! timer therefore never fires late: it fires at some earlier request's deadline, sees that the
//! current one is not due, and moves to it. That is one re-arm per timeout period per stream
//! instead of an insert and a removal in the timer wheel for every request.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Instant;
use tokio::time::Sleep;

/// Runs `work` until `deadline`; `None` if the deadline came first.
pub async fn within<F: Future>(
    mut timer: Pin<&mut Sleep>,
    deadline: Instant,
    work: F,
) -> Option<F::Output> {
    let deadline = tokio::time::Instant::from_std(deadline);
    if timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    let mut work = pin!(work);
    poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        // Fired: at this request's deadline (timed out) or at an earlier one (move on).
        while timer.as_mut().poll(cx).is_ready() {
            if timer.deadline() >= deadline {
                return Poll::Ready(None);
            }
            timer.as_mut().reset(deadline);
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn later_deadlines_reuse_the_timer_and_late_work_times_out() {
        let mut timer = pin!(tokio::time::sleep(Duration::from_secs(3600)));
        let limit = Duration::from_millis(100);
        for _ in 0..5 {
            let start = tokio::time::Instant::now().into_std();
            let quick = within(timer.as_mut(), start + limit, async { 7 }).await;
            assert_eq!(quick, Some(7));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let start = tokio::time::Instant::now();
        let slow = within(
            timer.as_mut(),
            (start + limit).into_std(),
            tokio::time::sleep(Duration::from_secs(1)),
        )
        .await;
        assert_eq!(slow, None);
        // The paused clock makes this exact: the timeout fires at its deadline, not later.
        let waited = tokio::time::Instant::now() - start;
        assert!(waited >= limit && waited < limit * 2, "{waited:?}");
    }
}
