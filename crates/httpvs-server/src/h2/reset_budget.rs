//! The rapid-reset guard (CVE-2023-44487) both HTTP/2 engines share: a per-connection budget of
//! streams the client reset before their answer could leave, refilled by streams answered.
//!
//! A stream reset in the very read that opened it (the owned engine), or already reset when the
//! h2 crate hands it over (the hyper engine), is the attack's pattern: the client could not have
//! waited for anything, and the stream never counted against SETTINGS_MAX_CONCURRENT_STREAMS.
//! Each such reset spends one unit; each stream answered earns one back, up to the budget's
//! size. A burst in one read, or one open-and-reset per read spread over time, runs the budget
//! dry and the connection gets GOAWAY ENHANCE_YOUR_CALM; a client that also waits for answers
//! keeps it full. Resets of streams opened in earlier reads (request timeouts, a load run's
//! streams in flight at its end) are not counted: their pending work ends at the reset and the
//! concurrency limit bounded them. (Like Envoy's premature-reset ratio and the h2 crate's
//! pending-accept limit, not a rate over time: nothing here reads a clock.)

/// Resets the client may still make before the connection is cut off.
#[derive(Debug, Clone, Copy)]
pub struct ResetBudget {
    left: usize,
    size: usize,
}

impl ResetBudget {
    /// A full budget of `size` resets (at least 1).
    pub fn new(size: usize) -> ResetBudget {
        let size = size.max(1);
        ResetBudget { left: size, size }
    }

    /// Spends one unit for an early reset; `false` when none was left (cut the connection off).
    pub fn spend(&mut self) -> bool {
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }

    /// `answered` streams were answered: as many units come back, up to the size.
    pub fn earn(&mut self, answered: usize) {
        self.left = self.size.min(self.left.saturating_add(answered));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_allows_its_size_and_refills_up_to_it() {
        let mut budget = ResetBudget::new(3);
        assert!((0..3).all(|_| budget.spend()));
        assert!(!budget.spend());
        budget.earn(1);
        assert!(budget.spend());
        assert!(!budget.spend());
        budget.earn(usize::MAX);
        assert!((0..3).all(|_| budget.spend()));
        assert!(!budget.spend());
        assert!(ResetBudget::new(0).spend(), "a size of 0 still allows one");
    }
}
