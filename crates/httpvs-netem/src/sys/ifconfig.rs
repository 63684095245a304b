//! Interface set-up by ioctl and sysctl in the calling thread's namespace: address, peer, MTU,
//! queue length, up, routes, and the per-interface knobs that let 127.0.0.1 cross the link.

use super::check;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `struct ifreq`: a name and a 24-byte union.
#[repr(C)]
#[derive(Debug)]
pub struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    /// A request about interface `name`.
    pub fn new(name: &str) -> io::Result<IfReq> {
        if name.len() >= libc::IFNAMSIZ || name.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name `{name}` is too long"),
            ));
        }
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        Ok(req)
    }

    /// The interface name the kernel filled in.
    pub fn name(&self) -> String {
        let end = self
            .name
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.name.len());
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }

    /// Sets the union's first field as a short (flags).
    pub fn set_short(&mut self, v: libc::c_short) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }

    fn short(&self) -> libc::c_short {
        libc::c_short::from_ne_bytes([self.data[0], self.data[1]])
    }

    fn set_int(&mut self, v: libc::c_int) {
        self.data[..4].copy_from_slice(&v.to_ne_bytes());
    }

    fn set_ipv4(&mut self, addr: Ipv4Addr) {
        let sin = sockaddr_in(addr);
        // SAFETY: sockaddr_in is 16 plain bytes and fits in the 24-byte union.
        let bytes: [u8; 16] = unsafe { std::mem::transmute(sin) };
        self.data[..16].copy_from_slice(&bytes);
    }
}

fn sockaddr_in(addr: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn sockaddr(addr: Ipv4Addr) -> libc::sockaddr {
    // SAFETY: sockaddr_in and sockaddr are both 16 bytes; this is how the ioctl API passes it.
    unsafe { std::mem::transmute(sockaddr_in(addr)) }
}

/// An AF_INET socket used only as a handle for interface ioctls in the current namespace.
struct ControlSocket(OwnedFd);

impl ControlSocket {
    fn new() -> io::Result<ControlSocket> {
        // SAFETY: plain socket creation; the fd is owned below.
        let raw = check(unsafe {
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: fresh fd owned by nobody else.
        Ok(ControlSocket(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    fn ioctl(&self, request: libc::c_ulong, req: &mut IfReq, what: &str) -> io::Result<()> {
        // SAFETY: every request used here takes a struct ifreq, which IfReq is laid out as.
        check(unsafe { libc::ioctl(self.0.as_raw_fd(), request, req as *mut IfReq) })
            .map(|_| ())
            .map_err(|e| io::Error::new(e.kind(), format!("{what} on {}: {e}", req.name())))
    }
}

/// A point-to-point IPv4 interface: its address, its peer's, and how it is set up.
#[derive(Debug, Clone)]
pub struct PointToPoint {
    /// Interface name.
    pub name: String,
    /// This end's address.
    pub local: Ipv4Addr,
    /// The other end's address.
    pub peer: Ipv4Addr,
    /// MTU in bytes.
    pub mtu: u32,
}

impl PointToPoint {
    /// Configures the interface and brings it up, in the calling thread's namespace.
    /// `route_localnet` lets packets to and from 127.0.0.0/8 cross it.
    pub fn configure(&self) -> io::Result<()> {
        let sock = ControlSocket::new()?;
        // Quiet link: IPv6 without autoconfiguration chatter (no link-local address, so no
        // router solicitations or MLD reports; no duplicate address detection).
        super::ipv6::quiet(&self.name);
        write_sysctl(&format!("net/ipv4/conf/{}/route_localnet", self.name), "1")?;
        write_sysctl(&format!("net/ipv4/conf/{}/rp_filter", self.name), "0")?;
        let mut req = IfReq::new(&self.name)?;
        req.set_ipv4(self.local);
        sock.ioctl(libc::SIOCSIFADDR, &mut req, "set address")?;
        let mut req = IfReq::new(&self.name)?;
        req.set_ipv4(self.peer);
        sock.ioctl(libc::SIOCSIFDSTADDR, &mut req, "set peer address")?;
        let mut req = IfReq::new(&self.name)?;
        req.set_int(self.mtu as libc::c_int);
        sock.ioctl(libc::SIOCSIFMTU, &mut req, "set MTU")?;
        let mut req = IfReq::new(&self.name)?;
        // Room for a burst while the relay is busy: a drop here would be the relay's, not netem's.
        req.set_int(TX_QUEUE_LEN as libc::c_int);
        let ioctl = sock.ioctl(libc::SIOCSIFTXQLEN, &mut req, "set queue length");
        if ioctl
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
        {
            // The ioctl wants CAP_NET_ADMIN over the host (not granted in a user namespace);
            // netlink asks only for it over the device's namespace.
            super::netlink::set_tx_queue_len(&self.name, TX_QUEUE_LEN)?;
        } else {
            ioctl?;
        }
        set_up(&sock, &self.name)
    }
}

/// Queue length of our devices, in packets.
const TX_QUEUE_LEN: u32 = 4096;

/// Brings interface `name` up (e.g. `lo` in a new namespace).
pub fn bring_up(name: &str) -> io::Result<()> {
    set_up(&ControlSocket::new()?, name)
}

fn set_up(sock: &ControlSocket, name: &str) -> io::Result<()> {
    let mut req = IfReq::new(name)?;
    sock.ioctl(libc::SIOCGIFFLAGS, &mut req, "read flags")?;
    let flags = req.short() | libc::IFF_UP as libc::c_short | libc::IFF_RUNNING as libc::c_short;
    req.set_short(flags);
    sock.ioctl(libc::SIOCSIFFLAGS, &mut req, "bring up")
}

/// Routes `dest/prefix` through interface `dev` (no gateway: the link is point to point).
pub fn add_route(dest: Ipv4Addr, prefix: u8, dev: &str) -> io::Result<()> {
    let sock = ControlSocket::new()?;
    let dev_name = std::ffi::CString::new(dev).map_err(io::Error::other)?;
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    // SAFETY: rtentry is plain data; zeroed is a valid starting value.
    let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
    rt.rt_dst = sockaddr(dest);
    rt.rt_genmask = sockaddr(Ipv4Addr::from(mask));
    rt.rt_flags = libc::RTF_UP;
    rt.rt_dev = dev_name.as_ptr() as *mut libc::c_char;
    // SAFETY: SIOCADDRT takes a struct rtentry; `dev_name` outlives the call.
    check(unsafe { libc::ioctl(sock.0.as_raw_fd(), libc::SIOCADDRT, &mut rt) })
        .map(|_| ())
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("add route {dest}/{prefix} dev {dev}: {e}"),
            )
        })
}

/// Writes a sysctl under /proc/sys; `net/...` ones apply to the calling thread's namespace.
pub fn write_sysctl(path: &str, value: &str) -> io::Result<()> {
    std::fs::write(format!("/proc/sys/{path}"), value)
        .map_err(|e| io::Error::new(e.kind(), format!("sysctl {path}={value}: {e}")))
}

/// IPv4 addresses on any interface of the calling thread's namespace.
pub fn addresses_in_use() -> io::Result<Vec<Ipv4Addr>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, freed below with freeifaddrs.
    check(unsafe { libc::getifaddrs(&mut list) })?;
    let mut found = Vec::new();
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` walks the list getifaddrs returned, which stays valid until freed.
        let entry = unsafe { &*cursor };
        for sa in [entry.ifa_addr, entry.ifa_ifu] {
            // SAFETY: a non-null sockaddr of family AF_INET is a sockaddr_in.
            if !sa.is_null() && unsafe { (*sa).sa_family } == libc::AF_INET as libc::sa_family_t {
                let sin = unsafe { &*(sa as *const libc::sockaddr_in) };
                found.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            }
        }
        cursor = entry.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}
