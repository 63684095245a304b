//! `[::1]` across the link. Linux drops packets to or from ::1 that arrive on any device but
//! `lo`, and refuses to NAT a packet to ::1 after it arrived on one, so ::1 cannot cross as
//! 127.0.0.1 does. Instead each end of the link gets a unique local address (fd68:7676::/32);
//! in the client's namespace an nft rule rewrites ::1 to the server end's address (replies are
//! rewritten back, so the client sees ::1), and at the server end the loopback forwarder binds
//! that address and port and carries connections and datagrams on to the host's `[::1]:PORT`.

use crate::sys::netlink;
use crate::sys::netns::NetNs;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};

/// First two groups of every link's IPv6 addresses.
const PREFIX: [u16; 2] = [0xfd68, 0x7676];

/// The IPv6 addresses of a link whose IPv4 server end is `server_v4`: `(client, server)`,
/// in a /64 of their own derived from the IPv4 block, so links never share one.
pub fn addresses(server_v4: Ipv4Addr) -> (Ipv6Addr, Ipv6Addr) {
    let block = u32::from(server_v4);
    let at = |host| {
        Ipv6Addr::new(
            PREFIX[0],
            PREFIX[1],
            (block >> 16) as u16,
            block as u16,
            0,
            0,
            0,
            host,
        )
    };
    (at(2), at(1))
}

/// Whether `addr` is the server end of some link (the forwarder's IPv6 destinations).
pub fn is_link_server_end(addr: Ipv6Addr) -> bool {
    let s = addr.segments();
    s[0] == PREFIX[0] && s[1] == PREFIX[1] && s[4..] == [0, 0, 0, 1]
}

/// Sets up the client's end inside `ns`: its address, the nft rule and the route for ::1.
/// Returns why IPv6 loopback is not carried, if it is not (e.g. `nft` is not installed).
pub fn client_side(ns: &NetNs, device: &str, client: Ipv6Addr, server: Ipv6Addr) -> Option<String> {
    let address = ns
        .run(|| netlink::add_ipv6_address(device, client, 64))
        .and_then(|r| r);
    if let Err(e) = address {
        return Some(format!("IPv6 on the link: {e}"));
    }
    // The rule before the route: without the route, ::1 is unreachable at once, never sent raw.
    if let Err(why) = rewrite_loopback(ns, server) {
        return Some(why);
    }
    let route = ns
        .run(|| netlink::add_ipv6_route(Ipv6Addr::LOCALHOST, 128, device, client))
        .and_then(|r| r);
    route.err().map(|e| format!("IPv6 on the link: {e}"))
}

/// The server end's address on `device`, in the calling thread's namespace.
pub fn server_side(device: &str, server: Ipv6Addr) -> std::io::Result<()> {
    netlink::add_ipv6_address(device, server, 64)
}

/// Loads the client namespace's nft rule: ::1 becomes the server end's address.
fn rewrite_loopback(ns: &NetNs, server: Ipv6Addr) -> Result<(), String> {
    let rules = format!(
        "table ip6 httpvs_netem {{\n  chain output {{\n    type nat hook output priority -100;\n    \
         ip6 daddr ::1 dnat to {server}\n  }}\n}}\n"
    );
    let mut command = Command::new("nft");
    command
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = ns
        .spawn(&mut command)
        .map_err(|e| format!("IPv6 loopback across the link needs nft (nftables): {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(rules.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| format!("nft: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or("failed");
    Err(format!("nft in the client's namespace: {first}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_link_has_its_own_prefix() {
        let (client, server) = addresses(Ipv4Addr::new(198, 18, 4, 1));
        assert_eq!(server, "fd68:7676:c612:401::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(client, "fd68:7676:c612:401::2".parse::<Ipv6Addr>().unwrap());
        assert!(is_link_server_end(server));
        assert!(!is_link_server_end(client));
        assert!(!is_link_server_end(Ipv6Addr::LOCALHOST));
        let (_, other) = addresses(Ipv4Addr::new(198, 18, 4, 5));
        assert_ne!(server, other);
    }
}
