//! Checks, before touching anything, whether this process can build an emulated link, and says
//! why not and what would fix it: root (or capabilities), /dev/net/tun, user namespaces.

use crate::error::NetemError;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const TUN_PATH: &str = "/dev/net/tun";

/// Ok when the host-loopback and namespace layouts can be built here.
pub fn check() -> Result<(), NetemError> {
    let meta = std::fs::metadata(TUN_PATH).map_err(|_| NetemError::Unavailable {
        why: format!("{TUN_PATH} does not exist"),
        fix:
            "load the tun module (modprobe tun), or start the container with --device /dev/net/tun"
                .into(),
    })?;
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o777;
    let tun_usable = access_rw(TUN_PATH);
    let why = if tun_usable {
        "you are not root".to_string()
    } else {
        format!("{TUN_PATH} is {mode:04o} and you are not root")
    };
    let fix = if tun_usable && user_namespaces_allowed() {
        "run as root (sudo): reaching this host's loopback needs root in the host's namespace; \
         a rootless layout inside a user namespace is possible here but not built yet"
    } else if user_namespaces_allowed() {
        "run as root (sudo); a rootless layout would also need a usable /dev/net/tun (chmod 0666 /dev/net/tun)"
    } else {
        "run as root (sudo); user namespaces are disabled, so there is no rootless layout"
    };
    Err(NetemError::Unavailable {
        why,
        fix: fix.into(),
    })
}

fn access_rw(path: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else {
        return false;
    };
    // SAFETY: access with a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) == 0 }
}

/// Whether unprivileged user namespaces are enabled (the rootless route).
pub fn user_namespaces_allowed() -> bool {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let max_ok = read("/proc/sys/user/max_user_namespaces").is_none_or(|v| v != "0");
    let clone_ok = !Path::new("/proc/sys/kernel/unprivileged_userns_clone").exists()
        || read("/proc/sys/kernel/unprivileged_userns_clone").is_some_and(|v| v != "0");
    max_ok && clone_ok
}
