//! Checks, before touching anything, whether this process can build an emulated link, and says
//! why not and what would fix it: root (or capabilities), /dev/net/tun, user namespaces.

use crate::error::NetemError;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const TUN_PATH: &str = "/dev/net/tun";

/// Set in the environment of a command run behind a link (`pid N`, the link's process, for the
/// message):
/// a link built in there would route the outer link's 127.0.0.1 again, which the kernel
/// refuses with a bare EINVAL.
pub const INSIDE_LINK: &str = "HTTPVS_NETEM_LINK";

/// What runs without root once the rootless layout is entered, for the messages below.
const ROOTLESS_SCOPE: &str =
    "rootless, `httpvs netem -- CMD`, `httpvs load --net` and `httpvs compare` \
     on its embedded server run in a user namespace of their own";

/// Ok when links can be built here: as root, or inside the rootless layout.
pub fn check() -> Result<(), NetemError> {
    // Empty is no link's mark (each sets its description): an `export HTTPVS_NETEM_LINK=` left
    // in a shell refused every run with "(httpvs netem, )".
    if let Some(outer) = std::env::var_os(INSIDE_LINK).filter(|v| !v.is_empty()) {
        return Err(NetemError::Unavailable {
            why: format!(
                "this runs behind another emulated link (httpvs netem, {}), where 127.0.0.1 is routed through \
                 it, and links do not nest",
                outer.to_string_lossy()
            ),
            fix: "give one link both impairments: add the delays, combine the losses".into(),
        });
    }
    let meta = std::fs::metadata(TUN_PATH).map_err(|_| NetemError::Unavailable {
        why: format!("{TUN_PATH} does not exist"),
        fix:
            "load the tun module (modprobe tun), or start the container with --device /dev/net/tun"
                .into(),
    })?;
    // SAFETY: geteuid has no failure mode. Inside the rootless layout we are root too.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o777;
    let (why, fix) = if !access_rw(TUN_PATH) {
        (
            format!("{TUN_PATH} is {mode:04o} and you are not root"),
            if user_namespaces_allowed() {
                format!(
                    "run as root (sudo), or let your user open {TUN_PATH} (chmod 0666 {TUN_PATH}, the usual default): {ROOTLESS_SCOPE}"
                )
            } else {
                "run as root (sudo); user namespaces are disabled here, so there is no rootless layout".into()
            },
        )
    } else if !user_namespaces_allowed() {
        (
            "you are not root and unprivileged user namespaces are disabled or restricted".into(),
            "run as root (sudo), or allow them (sysctl user.max_user_namespaces=10000 \
             kernel.unprivileged_userns_clone=1 kernel.apparmor_restrict_unprivileged_userns=0)"
                .into(),
        )
    } else if let Some(failure) = crate::rootless::failure() {
        (
            format!("you are not root and the rootless layout failed: {failure}"),
            "run as root (sudo)".into(),
        )
    } else {
        (
            "you are not root".into(),
            format!(
                "run as root (sudo); {ROOTLESS_SCOPE}, but `compare URL` with network conditions needs root"
            ),
        )
    };
    Err(NetemError::Unavailable { why, fix })
}

/// Whether the rootless layout can be tried: user namespaces allowed and /dev/net/tun usable.
pub fn rootless_possible() -> bool {
    access_rw(TUN_PATH) && user_namespaces_allowed()
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
    // Ubuntu 23.10+: AppArmor lets the namespace be made but keeps its capabilities from us.
    let apparmor_ok =
        read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").is_none_or(|v| v != "1");
    max_ok && clone_ok && apparmor_ok
}
