//! The client's own CPU use around a cell: this process's CPU time less that of the threads that
//! outlive the cell (the embedded server, the link's relay), over the client's CPUs.
//!
//! Load workers are threads that start and end inside the cell, so their time is in the
//! process total but in no surviving thread; other programs on the machine do not count.

use std::collections::HashMap;
use std::time::Instant;

/// CPU times at the start of a cell.
#[derive(Debug, Clone)]
pub struct ClientCpu {
    wall: Instant,
    process: f64,
    threads: HashMap<u32, f64>,
}

impl ClientCpu {
    /// Samples now.
    pub fn start() -> ClientCpu {
        ClientCpu {
            wall: Instant::now(),
            process: process_seconds(),
            threads: thread_seconds(),
        }
    }

    /// The client's busy fraction of `cpus` CPUs since the start (None when nothing could be read).
    pub fn finish(&self, cpus: usize) -> Option<f64> {
        let wall = self.wall.elapsed().as_secs_f64();
        let client = self.client_seconds()?;
        (wall > 0.0).then(|| (client / (wall * cpus.max(1) as f64)).min(1.0))
    }

    /// CPU seconds the client used since the start.
    pub fn client_seconds(&self) -> Option<f64> {
        let process = process_seconds() - self.process;
        let now = thread_seconds();
        if now.is_empty() {
            return None;
        }
        // Threads alive at both ends are not the cell's workers: take their share out.
        let survivors: f64 = now
            .iter()
            .filter_map(|(tid, t)| self.threads.get(tid).map(|before| (t - before).max(0.0)))
            .sum();
        Some((process - survivors).max(0.0))
    }
}

/// User + system CPU seconds of the whole process, exited threads included.
fn process_seconds() -> f64 {
    // SAFETY: a zeroed rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU seconds of each live thread of this process, by thread id.
fn thread_seconds() -> HashMap<u32, f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(t) = parse_stat_ticks(&stat) {
            out.insert(tid, t as f64 / ticks);
        }
    }
    out
}

/// utime + stime (clock ticks) from a `/proc/.../stat` line; the name may hold spaces and parens.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime 14 and stime 15 (1-based over the whole line).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_thread_stat() {
        let line = "42 (httpvs (x) 1) S 1 1 1 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_ticks(line), Some(300));
    }

    #[test]
    fn counts_a_thread_that_ends_inside_the_window() {
        let cpu = ClientCpu::start();
        std::thread::spawn(|| {
            // Spin until this thread has used 100 ms of CPU, however busy the machine is.
            let mut x = 0u64;
            while thread_cpu_seconds() < 0.1 {
                x = x.wrapping_mul(31).wrapping_add(1);
            }
            std::hint::black_box(x);
        })
        .join()
        .unwrap();
        let used = cpu.client_seconds().unwrap();
        assert!(used >= 0.08, "{used}");
    }

    fn thread_cpu_seconds() -> f64 {
        // SAFETY: a zeroed timespec is valid; clock_gettime fills it.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: a valid clock id and pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
    }
}
