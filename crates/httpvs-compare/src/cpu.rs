//! Client CPU use around a cell, from /proc/stat: how busy the client's CPUs were while it ran.
//!
//! When the client is pinned, its CPUs' busy time is the client's own; unpinned, it is the whole
//! machine's, which still says when the number measures a saturated machine rather than a protocol.

/// Busy and total jiffies of a set of CPUs at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    busy: u64,
    total: u64,
}

/// Reads the summed times of `cpus` (all CPUs when empty); None where /proc/stat is unreadable.
pub fn sample(cpus: &[usize]) -> Option<CpuTimes> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    Some(parse(&text, cpus))
}

/// The busy fraction (0.0..=1.0) of the CPUs between two samples.
pub fn busy_fraction(before: CpuTimes, after: CpuTimes) -> Option<f64> {
    let total = after.total.checked_sub(before.total)?;
    let busy = after.busy.checked_sub(before.busy)?;
    (total > 0).then(|| busy as f64 / total as f64)
}

fn parse(text: &str, cpus: &[usize]) -> CpuTimes {
    let mut times = CpuTimes::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        let wanted = if cpus.is_empty() {
            name == "cpu"
        } else {
            name.strip_prefix("cpu")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| cpus.contains(&n))
        };
        if !wanted {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is already in user).
        let v: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        let idle = v[3] + v[4];
        let total: u64 = v.iter().sum();
        times.busy += total - idle;
        times.total += total;
    }
    times
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 100 800 0 0 0 0 0 0\n\
cpu0 90 0 10 0 0 0 0 0 0 0\ncpu1 10 0 90 800 0 0 0 0 0 0\nintr 1\n";

    #[test]
    fn sums_chosen_cpus() {
        assert_eq!(
            parse(STAT, &[0]),
            CpuTimes {
                busy: 100,
                total: 100
            }
        );
        assert_eq!(
            parse(STAT, &[]),
            CpuTimes {
                busy: 200,
                total: 1000
            }
        );
        let before = CpuTimes { busy: 0, total: 0 };
        assert_eq!(busy_fraction(before, parse(STAT, &[0, 1])), Some(0.2));
    }

    #[test]
    fn reads_this_machine() {
        assert!(sample(&[]).is_some());
    }
}
