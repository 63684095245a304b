//! Thin safe wrappers over the Linux calls the relay needs: network namespaces, TUN devices,
//! interface configuration by ioctl, and per-interface sysctls.

pub mod ifconfig;
pub mod ipv6;
pub mod netlink;
pub mod netns;
pub mod tun;

use std::io;

/// The result of a libc call that returns -1 on error.
pub fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
