//! Facts about the machine a comparison ran on: cores, kernel, CPU model, versions.

use serde::{Deserialize, Serialize};

/// The machine and software a comparison ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// CPUs this process may run on.
    pub cores: usize,
    /// CPU model name.
    pub cpu_model: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Host name.
    pub hostname: String,
    /// Total memory, bytes.
    pub memory_bytes: u64,
    /// httpvs version.
    pub httpvs_version: String,
    /// Library versions compare ran with (rustls, quinn, h2...).
    pub libraries: Vec<(String, String)>,
    /// The kernel's TCP congestion control (`bbr`, `cubic`; empty if unknown): the TCP rows'
    /// sockets use it, and h3 follows it. Absent from files of older releases.
    #[serde(default)]
    pub tcp_congestion_control: String,
}

impl MachineFacts {
    /// Reads the facts of this machine (fields it cannot read stay empty).
    pub fn here() -> MachineFacts {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        MachineFacts {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            memory_bytes,
            httpvs_version: env!("CARGO_PKG_VERSION").to_string(),
            libraries: LIBRARIES
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            tcp_congestion_control: read("/proc/sys/net/ipv4/tcp_congestion_control")
                .trim()
                .to_string(),
        }
    }

    /// One line: "2 cores (Intel Xeon ...), Linux 6.1, TCP bbr, 24 GiB, httpvs 0.1.0".
    pub fn one_line(&self) -> String {
        let model = if self.cpu_model.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.cpu_model)
        };
        let tcp = if self.tcp_congestion_control.is_empty() {
            String::new()
        } else {
            format!(", TCP {}", self.tcp_congestion_control)
        };
        format!(
            "{} cores{model}, Linux {}{tcp}, {:.0} GiB, httpvs {}",
            self.cores,
            self.kernel,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.httpvs_version
        )
    }
}

/// The protocol libraries httpvs is built on, as pinned by the workspace.
const LIBRARIES: &[(&str, &str)] = &[
    ("rustls", "0.23"),
    ("quinn", "0.11"),
    ("h3", "0.0.8"),
    ("h2", "0.4"),
    ("hyper", "1"),
];
