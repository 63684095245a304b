//! Entering a user namespace of our own, with a new network namespace, as root inside it.

use crate::sys::{check, ifconfig};
use std::io;

/// Unshares a user and a network namespace and maps our uid and gid to root in it. The caller
/// must be single-threaded. Afterwards the process holds every capability over the new
/// namespaces (TUN devices, more namespaces, sysctls), none over the host's.
pub fn enter_as_root(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    // SAFETY: unshare changes only this (single-threaded) process.
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) })
        .map_err(|e| io::Error::new(e.kind(), format!("unshare a user namespace: {e}")))?;
    // An unprivileged process may map its gid only after giving up setgroups.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))
        .map_err(|e| io::Error::new(e.kind(), format!("write uid_map: {e}")))?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))
        .map_err(|e| io::Error::new(e.kind(), format!("write gid_map: {e}")))?;
    // Our namespace stands in for the host: its loopback answers (the embedded server binds there).
    ifconfig::bring_up("lo")
}
