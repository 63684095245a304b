//! The `/echo` memory budget: how many bytes one connection's echoes may hold together, from
//! their first body byte until the echo has been sent (or refused, or reset).

use crate::config::Limits;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Full-size `/echo` bodies one connection may hold together (64 MiB at the default 8 MiB
/// limit): room for a load of several large uploads at once, not for a client that opens 128
/// streams and never ends their bodies (1 GiB a connection), nor for one that ends them all
/// and never opens its window to their echoes.
const ECHO_BODIES: u64 = 8;

/// The heap one connection's echoes hold together, and how much they may: a request that would
/// pass it gets 413, as a body over the limit does. One per connection, shared by its streams
/// (h2's, h3's request tasks); HTTP/1.1, one request at a time, gives each request its own.
#[derive(Debug)]
pub struct EchoBudget {
    held: AtomicU64,
    most: u64,
}

impl EchoBudget {
    /// An empty budget of [`ECHO_BODIES`] bodies of `limits.max_body_bytes`.
    pub fn new(limits: &Limits) -> EchoBudget {
        EchoBudget {
            held: AtomicU64::new(0),
            most: limits.max_body_bytes.saturating_mul(ECHO_BODIES),
        }
    }

    /// An empty part of the budget, for one request.
    pub fn lease(self: &Arc<Self>) -> EchoLease {
        EchoLease {
            budget: self.clone(),
            held: 0,
        }
    }

    /// Bytes held now, by every lease together.
    #[cfg(test)]
    pub fn held(&self) -> u64 {
        self.held.load(Relaxed)
    }
}

/// One request's part of its connection's [`EchoBudget`]: the capacity of the buffer that holds
/// its echo. It goes with the echo into the response body, and is given back when that is
/// dropped: sent, or cut off by a reset or the connection's end. An echo given back once its
/// body was complete let a client that never read its answers hold 800 MB on one connection.
#[derive(Debug)]
pub struct EchoLease {
    budget: Arc<EchoBudget>,
    held: u64,
}

impl EchoLease {
    /// Grows the part to `bytes` in all, unless the budget has no room for that: `false` then,
    /// and the part stays as it was.
    pub fn hold(&mut self, bytes: u64) -> bool {
        let Some(more) = bytes.checked_sub(self.held).filter(|&n| n > 0) else {
            return true;
        };
        let before = self.budget.held.fetch_add(more, Relaxed);
        if before.saturating_add(more) > self.budget.most {
            self.budget.held.fetch_sub(more, Relaxed);
            return false;
        }
        self.held = bytes;
        true
    }
}

impl Drop for EchoLease {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.held, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_share_the_budget_and_give_it_back_when_dropped() {
        let budget = Arc::new(EchoBudget::new(&Limits {
            max_body_bytes: 100,
            ..Limits::default()
        }));
        let mut a = budget.lease();
        let mut b = budget.lease();
        assert!(a.hold(500));
        assert!(a.hold(300), "a smaller total keeps what is held");
        assert!(b.hold(300));
        assert!(!b.hold(301), "800 in all is the most");
        assert_eq!(budget.held(), 800);
        drop(a);
        assert!(b.hold(700));
        drop(b);
        assert_eq!(budget.held(), 0);
    }
}
