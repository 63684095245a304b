//! Non-persistent TUN devices: layer-3 packets, no packet-info header, no offloads; gone when the fd closes.

use super::check;
use super::ifconfig::IfReq;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// An open TUN device. Without `IFF_VNET_HDR` and `TUNSETOFFLOAD` the kernel hands over
/// whole, checksummed packets no larger than the MTU, so each read is one wire packet.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
}

impl Tun {
    /// Creates TUN device `name` in the calling thread's namespace (where /dev/net/tun is opened).
    pub fn create(name: &str) -> io::Result<Tun> {
        let path = CString::new("/dev/net/tun").map_err(io::Error::other)?;
        // SAFETY: open with a valid C string; the returned fd is owned below.
        let raw = check(unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReq::new(name)?;
        req.set_short(IFF_TUN | IFF_NO_PI);
        // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `req` is laid out as.
        check(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) })?;
        set_nonblocking(fd.as_raw_fd())?;
        Ok(Tun { fd })
    }

    /// The raw fd, for poll, read and write.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Whether TUN device `name` in the calling thread's namespace can be deleted by unsetting
/// persistence (only persistent ones linger; ours never are, but older crashed runs may be).
pub fn delete_persistent(name: &str) -> io::Result<()> {
    const TUNSETPERSIST: libc::c_ulong = 0x4004_54cb;
    let tun = Tun::create(name)?;
    // SAFETY: TUNSETPERSIST takes an int argument by value.
    check(unsafe { libc::ioctl(tun.raw_fd(), TUNSETPERSIST, 0 as libc::c_ulong) })?;
    Ok(())
}
