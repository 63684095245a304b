//! How a run is divided among workers: connections and `-n` requests per worker.

/// Splits `total` into `parts` shares that differ by at most one (earlier parts get the extra).
pub fn split_evenly(total: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// What each worker gets: its connections and, in the closed model with `-n`, its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPlan {
    /// Connections per worker.
    pub connections: Vec<u64>,
    /// Closed model `-n`: requests per worker, in proportion to its connections.
    pub requests: Option<Vec<u64>>,
}

impl RunPlan {
    /// Divides `connections` (and `requests`, if any) over `workers`.
    pub fn new(connections: u32, workers: usize, requests: Option<u64>) -> RunPlan {
        let per_worker = split_evenly(u64::from(connections), workers);
        // Requests follow connections: each connection's share, summed per worker, so a worker
        // with more connections does not finish early and leave them idle.
        let requests = requests.map(|n| {
            let per_conn = split_evenly(n, connections as usize);
            let mut shares = Vec::with_capacity(workers);
            let mut next = 0usize;
            for &c in &per_worker {
                let c = c as usize;
                shares.push(per_conn[next..next + c].iter().sum());
                next += c;
            }
            shares
        });
        RunPlan {
            connections: per_worker,
            requests,
        }
    }

    /// The open model's lanes of worker `index`: its connections' numbers over the run,
    /// `start..end` (see `WorkerSchedule::open`).
    pub fn lanes(&self, index: usize) -> (u64, u64) {
        let start: u64 = self.connections[..index].iter().sum();
        (start, start + self.connections[index])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        assert_eq!(split_evenly(10, 3), vec![4, 3, 3]);
        let p = RunPlan::new(5, 2, Some(1001));
        assert_eq!(p.connections, vec![3, 2]);
        let r = p.requests.unwrap();
        assert_eq!(r.iter().sum::<u64>(), 1001);
        assert_eq!(r, vec![601, 400]);
    }
}
