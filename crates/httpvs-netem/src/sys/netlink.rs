//! Route netlink requests the ioctls cannot make: a device's queue length inside a user
//! namespace, an IPv6 address, and a route with a preferred source address.

use super::check;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const IFLA_TXQLEN: u16 = 13;
const IFA_LOCAL: u16 = 2;
const IFA_ADDRESS: u16 = 1;
const IFA_F_NODAD: u8 = 0x02;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;

/// One request: a message type, its fixed header and attributes.
struct Request {
    bytes: Vec<u8>,
}

impl Request {
    fn new(kind: u16, extra_flags: u16, header: &[u8]) -> Request {
        let mut bytes = vec![0; 16];
        bytes[4..6].copy_from_slice(&kind.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16 | extra_flags;
        bytes[6..8].copy_from_slice(&flags.to_ne_bytes());
        bytes.extend_from_slice(header);
        Request { bytes }
    }

    fn attribute(mut self, kind: u16, value: &[u8]) -> Request {
        let len = 4 + value.len();
        self.bytes.extend_from_slice(&(len as u16).to_ne_bytes());
        self.bytes.extend_from_slice(&kind.to_ne_bytes());
        self.bytes.extend_from_slice(value);
        self.bytes.resize(self.bytes.len().next_multiple_of(4), 0);
        self
    }

    /// Sends the request in the calling thread's namespace and waits for the kernel's ack.
    fn send(mut self) -> io::Result<()> {
        let len = self.bytes.len() as u32;
        self.bytes[..4].copy_from_slice(&len.to_ne_bytes());
        // SAFETY: plain socket creation; the fd is owned below.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: fresh fd owned by nobody else.
        let sock = unsafe { OwnedFd::from_raw_fd(raw) };
        let fd = sock.as_raw_fd();
        // SAFETY: sending our buffer to the kernel (the default destination of a netlink socket).
        if unsafe { libc::send(fd, self.bytes.as_ptr().cast(), self.bytes.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut answer = [0u8; 256];
        // SAFETY: receiving into our buffer.
        let n = unsafe { libc::recv(fd, answer.as_mut_ptr().cast(), answer.len(), 0) };
        if n < 20 {
            return Err(io::Error::last_os_error());
        }
        // An NLMSG_ERROR answer carries the (negative) errno after the 16-byte header; 0 is the ack.
        let errno = i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]);
        if errno < 0 {
            return Err(io::Error::from_raw_os_error(-errno));
        }
        Ok(())
    }
}

/// The index of interface `name` in the calling thread's namespace.
fn index_of(name: &str) -> io::Result<u32> {
    let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
    // SAFETY: if_nametoindex reads a valid C string.
    match unsafe { libc::if_nametoindex(cname.as_ptr()) } {
        0 => Err(io::Error::last_os_error()),
        index => Ok(index),
    }
}

/// Sets interface `name`'s transmit queue length (RTM_NEWLINK): unlike the ioctl, netlink asks
/// for CAP_NET_ADMIN over the device's namespace only, which a user namespace grants.
pub fn set_tx_queue_len(name: &str, len: u32) -> io::Result<()> {
    let mut ifinfo = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
    ifinfo.extend_from_slice(&(index_of(name)? as i32).to_ne_bytes());
    ifinfo.extend_from_slice(&[0; 8]); // flags, change
    Request::new(libc::RTM_NEWLINK, 0, &ifinfo)
        .attribute(IFLA_TXQLEN, &len.to_ne_bytes())
        .send()
}

/// Adds `addr/prefix` to interface `name`, without duplicate address detection.
pub fn add_ipv6_address(name: &str, addr: Ipv6Addr, prefix: u8) -> io::Result<()> {
    let mut ifaddr = vec![libc::AF_INET6 as u8, prefix, IFA_F_NODAD, 0];
    ifaddr.extend_from_slice(&index_of(name)?.to_ne_bytes());
    let create = (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    Request::new(libc::RTM_NEWADDR, create, &ifaddr)
        .attribute(IFA_LOCAL, &addr.octets())
        .attribute(IFA_ADDRESS, &addr.octets())
        .send()
        .map_err(|e| io::Error::new(e.kind(), format!("add {addr}/{prefix} to {name}: {e}")))
}

/// Routes `dest` (one address) out of interface `name` with `source` as the preferred source
/// address, replacing the route the kernel made for a point-to-point peer.
pub fn replace_ipv4_host_route(dest: Ipv4Addr, name: &str, source: Ipv4Addr) -> io::Result<()> {
    let route = Route {
        family: libc::AF_INET as u8,
        dest: &dest.octets(),
        prefix: 32,
        scope: libc::RT_SCOPE_LINK,
        source: &source.octets(),
    };
    route
        .send(name, libc::NLM_F_CREATE | libc::NLM_F_REPLACE)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("route {dest} dev {name} src {source}: {e}"),
            )
        })
}

/// Routes `dest/prefix` out of interface `name`, with `source` as the preferred source address.
pub fn add_ipv6_route(dest: Ipv6Addr, prefix: u8, name: &str, source: Ipv6Addr) -> io::Result<()> {
    let route = Route {
        family: libc::AF_INET6 as u8,
        dest: &dest.octets(),
        prefix,
        scope: libc::RT_SCOPE_UNIVERSE,
        source: &source.octets(),
    };
    route
        .send(name, libc::NLM_F_CREATE | libc::NLM_F_EXCL)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("add route {dest}/{prefix} dev {name}: {e}"),
            )
        })
}

/// A unicast route in the main table out of one interface, with a preferred source address.
struct Route<'a> {
    family: u8,
    dest: &'a [u8],
    prefix: u8,
    scope: u8,
    source: &'a [u8],
}

impl Route<'_> {
    fn send(&self, name: &str, flags: libc::c_int) -> io::Result<()> {
        // rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags (u32).
        let rtmsg = [
            self.family,
            self.prefix,
            0,
            0,
            libc::RT_TABLE_MAIN,
            libc::RTPROT_BOOT,
            self.scope,
            libc::RTN_UNICAST,
            0,
            0,
            0,
            0,
        ];
        Request::new(libc::RTM_NEWROUTE, flags as u16, &rtmsg)
            .attribute(RTA_DST, self.dest)
            .attribute(RTA_OIF, &index_of(name)?.to_ne_bytes())
            .attribute(RTA_PREFSRC, self.source)
            .send()
    }
}
