//! Start-up sweep of devices left by an earlier httpvs that died (named `hv-<pid>-<n>`).
//! Our devices are non-persistent and vanish with their process, so normally there is nothing.

use crate::sys::tun;
use std::path::Path;

/// Name prefix of the host-side TUN devices.
pub const PREFIX: &str = "hv-";

/// The host-side device name for link `n` of process `pid`.
pub fn device_name(pid: u32, n: u32) -> String {
    format!("{PREFIX}{pid}-{n}")
}

/// Deletes `hv-<pid>-<n>` devices whose process is gone; returns how many.
pub fn sweep_stale_devices() -> usize {
    let Ok(entries) = std::fs::read_dir("/sys/class/net") else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() && tun::delete_persistent(&name).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid in a name of the form `hv-<pid>-<n>`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_pid() {
        assert_eq!(owner_pid(&device_name(4_194_304, 12)), Some(4_194_304));
        assert!(device_name(4_194_304, 999).len() < libc::IFNAMSIZ);
        assert_eq!(owner_pid("eth0"), None);
        assert_eq!(owner_pid("hv-12-x"), None);
    }
}
