//! An emulated link: a client namespace behind a relay of two TUN devices, the server side being
//! this host (its loopback) or a second namespace. Everything is tied to file descriptors, so
//! nothing outlives the process, even after SIGKILL.

use crate::core::NetemCore;
use crate::counters::LinkCounters;
use crate::error::NetemError;
use crate::impairment::Impairment;
use crate::relay::{PacketWatch, Relay};
use crate::sys::ifconfig::{self, PointToPoint};
use crate::sys::netlink;
use crate::sys::netns::NetNs;
use crate::sys::tun::Tun;
use crate::{ipv6_loopback, loopback_forward, preflight, rootless, sweep};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Name of the TUN device inside a namespace the link made.
pub const NAMESPACE_DEVICE: &str = "netem0";

/// Where the server side of the link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// The host itself: the client reaches this host's 127.0.0.1 through the link (needs root).
    #[default]
    HostLoopback,
    /// A second namespace made for the server; nothing of the host is reachable.
    Namespaces,
}

/// How to build a link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Client to server.
    pub up: Impairment,
    /// Server to client.
    pub down: Impairment,
    /// Seed of the random choices (each direction's own `seed` wins).
    pub seed: u64,
    /// Where the server is.
    pub layout: Layout,
    /// MTU of the link in bytes.
    pub mtu: u32,
}

impl LinkConfig {
    /// A link to this host's loopback with the given impairments, a random seed and MTU 1500.
    pub fn new(up: Impairment, down: Impairment) -> LinkConfig {
        LinkConfig {
            up,
            down,
            seed: random_seed(),
            layout: Layout::HostLoopback,
            mtu: 1500,
        }
    }
}

impl LinkConfig {
    /// A link from one spec, as `--net` takes it: a profile name (`wan`), a netem string for
    /// both directions (`delay 25ms loss 1%`), or `UP | DOWN` (`delay 25ms rate 10mbit | delay 25ms`).
    pub fn parse(spec: &str) -> Result<LinkConfig, NetemError> {
        if let Some(profile) = crate::impairment::Profile::find(spec.trim()) {
            return Ok(LinkConfig::new(
                Impairment::parse(profile.up)?,
                Impairment::parse(profile.down)?,
            ));
        }
        let (up, down) = spec.split_once('|').unwrap_or((spec, spec));
        Ok(LinkConfig::new(
            Impairment::parse(up)?,
            Impairment::parse(down)?,
        ))
    }

    /// The same config with seed `seed`.
    pub fn with_seed(mut self, seed: u64) -> LinkConfig {
        self.seed = seed;
        self
    }

    /// The same config with layout `layout`.
    pub fn with_layout(mut self, layout: Layout) -> LinkConfig {
        self.layout = layout;
        self
    }

    /// The same config with MTU `mtu`.
    pub fn with_mtu(mut self, mtu: u32) -> LinkConfig {
        self.mtu = mtu;
        self
    }
}

/// A seed from the kernel's random source (or the clock if that fails).
pub fn random_seed() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom fills at most 8 bytes of our buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(bytes) >> 1
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }
}

/// The addresses on each end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkAddresses {
    /// The client's address: the source a server sees.
    pub client: Ipv4Addr,
    /// The server side's address on the link (reaches servers bound to 0.0.0.0).
    pub server: Ipv4Addr,
    /// The client's IPv6 address (a unique local address of this link).
    pub client6: Ipv6Addr,
    /// The server side's IPv6 address, where the client's `[::1]` is sent.
    pub server6: Ipv6Addr,
}

/// A running emulated link. Dropping it stops the relay and removes every device and namespace.
#[derive(Debug)]
pub struct Link {
    // Field order is drop order: the relay threads stop before the devices close.
    relay: Relay,
    client_ns: NetNs,
    server_ns: NetNs,
    layout: Layout,
    addresses: LinkAddresses,
    host_device: Option<String>,
    seed: u64,
    /// Why `[::1]` does not cross this link, or None when it does.
    ipv6_unavailable: Option<String>,
}

impl Link {
    /// Builds the namespaces and devices and starts the relay.
    pub fn start(config: LinkConfig) -> Result<Link, NetemError> {
        preflight::check()?;
        if !rootless::is_inside() {
            // Inside the rootless layout /sys shows the host's devices, which are not ours to touch.
            sweep::sweep_stale_devices();
        }
        let here =
            NetNs::of_this_thread().map_err(|e| NetemError::setup("open this namespace", e))?;
        let host_device = match config.layout {
            Layout::HostLoopback => Some(next_host_device_name()),
            Layout::Namespaces => None,
        };
        let addresses = pick_addresses(&here, config.layout)?;
        let client_ns =
            NetNs::create().map_err(|e| NetemError::setup("create the client's namespace", e))?;
        let server_ns = match config.layout {
            Layout::HostLoopback => here,
            Layout::Namespaces => NetNs::create()
                .map_err(|e| NetemError::setup("create the server's namespace", e))?,
        };
        let client_tun = client_side(&client_ns, addresses, config.mtu)?;
        let server_name = host_device.clone();
        let server_tun = server_side(&server_ns, server_name.as_deref(), addresses, config.mtu)?;
        let ipv6_unavailable = match &server_name {
            // The kernel refuses IPv6 on a device whose MTU is below IPv6's minimum.
            Some(_) if config.mtu < 1280 => Some(format!(
                "IPv6 needs an MTU of at least 1280 (--mtu {})",
                config.mtu
            )),
            Some(device) => ipv6_across(&client_ns, &server_ns, device, addresses),
            None => Some("IPv6 loopback crosses only links to this host's loopback".into()),
        };
        let up = NetemCore::new(&config.up, config.seed);
        let down = NetemCore::new(&config.down, config.seed ^ 0x5bd1_e995_d0c5_a1f3);
        let relay = Relay::start(
            Arc::new(client_tun),
            Arc::new(server_tun),
            up,
            down,
            config.mtu,
            host_loopback_forward(config.layout, ipv6_unavailable.is_none())?,
        )
        .map_err(|e| NetemError::setup("start the relay threads", e))?;
        Ok(Link {
            relay,
            client_ns,
            server_ns,
            layout: config.layout,
            addresses,
            host_device,
            seed: config.seed,
            ipv6_unavailable,
        })
    }

    /// Runs `f` on a thread inside the client's namespace. Sockets it creates stay there, so
    /// their traffic crosses the link even when used later from any thread (e.g. by tokio).
    pub fn run_in_client_ns<T: Send, F: FnOnce() -> T + Send>(
        &self,
        f: F,
    ) -> Result<T, NetemError> {
        self.client_ns.run(f).map_err(NetemError::Namespace)
    }

    /// Runs `f` inside the server side's namespace (this host's own one for [`Layout::HostLoopback`]).
    pub fn run_in_server_ns<T: Send, F: FnOnce() -> T + Send>(
        &self,
        f: F,
    ) -> Result<T, NetemError> {
        self.server_ns.run(f).map_err(NetemError::Namespace)
    }

    /// Starts `command` in the client's namespace; it is killed if the calling thread exits first.
    pub fn spawn_in_client_ns(&self, command: &mut Command) -> std::io::Result<Child> {
        command.env(
            crate::preflight::INSIDE_LINK,
            format!("pid {}", std::process::id()),
        );
        self.client_ns.spawn(command)
    }

    /// Ends what is still running in the client's namespace (a command's background jobs):
    /// SIGTERM, then SIGKILL after `grace`; returns how many processes there were.
    pub fn end_client_processes(&self, grace: std::time::Duration) -> usize {
        self.client_ns.end_members(grace)
    }

    /// Starts `command` in the server side's namespace.
    pub fn spawn_in_server_ns(&self, command: &mut Command) -> std::io::Result<Child> {
        self.server_ns.spawn(command)
    }

    /// Counters of both directions so far.
    pub fn counters(&self) -> LinkCounters {
        self.relay.counters()
    }

    /// When a direction's relay stopped on its own (its device went away, a poll error), which
    /// and why: from then on that direction carries nothing and its counters stand still.
    pub fn relay_failure(&self) -> Option<String> {
        self.relay.failure()
    }

    /// The addresses on the link.
    pub fn addresses(&self) -> LinkAddresses {
        self.addresses
    }

    /// Where the server is.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The host-side TUN device's name (host-loopback layout only).
    pub fn host_device(&self) -> Option<&str> {
        self.host_device.as_deref()
    }

    /// Why `[::1]:PORT` does not reach this host's `[::1]:PORT` through this link (e.g. `nft`
    /// is not installed, or the layout is [`Layout::Namespaces`]), or None when it does.
    pub fn ipv6_unavailable(&self) -> Option<&str> {
        self.ipv6_unavailable.as_deref()
    }

    /// The seed in use, to repeat a run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Waits until no packet is inside the link (both directions), at most `limit` and until
    /// `stop` is set (Ctrl-C): packets still in flight when a client finishes (its FIN, the
    /// last ACKs) reach their peers.
    pub fn drain(&self, limit: std::time::Duration, stop: &std::sync::atomic::AtomicBool) {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline
            && !stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            let c = self.counters();
            if c.up.held == 0 && c.down.held == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Stops the link and returns the final counters.
    pub fn stop(self) -> LinkCounters {
        let counters = self.counters();
        drop(self);
        counters
    }
}

/// The forwarder a host-loopback link needs: rootless, our namespace stands in for the host and
/// 127.0.0.1 must be carried on to the host's; and `[::1]` always needs it (see `ipv6_loopback`).
fn host_loopback_forward(
    layout: Layout,
    ipv6: bool,
) -> Result<Option<Arc<dyn PacketWatch>>, NetemError> {
    if layout != Layout::HostLoopback {
        return Ok(None);
    }
    let host = match rootless::host_sockets() {
        Some(helper) => helper,
        None if ipv6 => &rootless::host_sockets::DIRECT,
        None => return Ok(None),
    };
    let forward = loopback_forward::shared(host)
        .map_err(|e| NetemError::setup("start the forwarder to the host's loopback", e))?;
    Ok(Some(forward))
}

/// Sets up `[::1]` across a host-loopback link; returns why it is not carried, if it is not.
fn ipv6_across(
    client_ns: &NetNs,
    server_ns: &NetNs,
    server_device: &str,
    addresses: LinkAddresses,
) -> Option<String> {
    let server = server_ns
        .run(|| ipv6_loopback::server_side(server_device, addresses.server6))
        .and_then(|r| r);
    if let Err(e) = server {
        return Some(format!("IPv6 on the link: {e}"));
    }
    ipv6_loopback::client_side(
        client_ns,
        NAMESPACE_DEVICE,
        addresses.client6,
        addresses.server6,
    )
}

/// The client's TUN device, in its namespace whose lo stays down: 127.0.0.0/8 is then not local
/// there and is routed over the link.
fn client_side(ns: &NetNs, addresses: LinkAddresses, mtu: u32) -> Result<Tun, NetemError> {
    let client = PointToPoint {
        name: NAMESPACE_DEVICE.into(),
        local: addresses.client,
        peer: addresses.server,
        mtu,
    };
    ns.run(|| -> std::io::Result<Tun> {
        let tun = Tun::create(&client.name)?;
        client.configure()?;
        ifconfig::add_route(Ipv4Addr::new(127, 0, 0, 0), 8, &client.name)?;
        Ok(tun)
    })
    .and_then(|r| r)
    .map_err(|e| NetemError::setup("set up the client's TUN device", e))
}

/// The server side's TUN device: `host_device` on this host, or `netem0` in a namespace of
/// our own (whose lo is brought up, so its 127.0.0.1 answers).
fn server_side(
    ns: &NetNs,
    host_device: Option<&str>,
    addresses: LinkAddresses,
    mtu: u32,
) -> Result<Tun, NetemError> {
    let own_namespace = host_device.is_none();
    let server = PointToPoint {
        name: host_device.unwrap_or(NAMESPACE_DEVICE).into(),
        local: addresses.server,
        peer: addresses.client,
        mtu,
    };
    ns.run(|| -> std::io::Result<Tun> {
        let tun = Tun::create(&server.name)?;
        server.configure()?;
        if own_namespace {
            ifconfig::bring_up("lo")?;
        }
        // Replies to the client leave from 127.0.0.1, the address it dialled, even from a
        // server bound to the wildcard that lets the route pick its source (caddy's QUIC
        // socket): from the link's own address they would reach a QUIC client as packets from
        // a stranger, and be dropped.
        netlink::replace_ipv4_host_route(addresses.client, &server.name, Ipv4Addr::LOCALHOST)?;
        Ok(tun)
    })
    .and_then(|r| r)
    .map_err(|e| NetemError::setup("set up the server side's TUN device", e))
}

/// `hv-<pid>-<n>`: unique per link in this process, and traceable to it by the sweep.
fn next_host_device_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    sweep::device_name(std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A /30 in 198.18.0.0/15 (RFC 2544, set aside for benchmarks) that no interface here uses.
fn pick_addresses(here: &NetNs, layout: Layout) -> Result<LinkAddresses, NetemError> {
    let in_use = match layout {
        Layout::HostLoopback => here
            .run(ifconfig::addresses_in_use)
            .and_then(|r| r)
            .map_err(|e| NetemError::setup("list this host's addresses", e))?,
        Layout::Namespaces => Vec::new(),
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(64) + NEXT.fetch_add(1, Ordering::Relaxed);
    const BLOCKS: u32 = 1 << 15; // /30 blocks in a /15
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    for i in 0..BLOCKS {
        let block = base + ((start.wrapping_add(i)) % BLOCKS) * 4;
        let server = Ipv4Addr::from(block + 1);
        let client = Ipv4Addr::from(block + 2);
        if !in_use.contains(&server) && !in_use.contains(&client) {
            let (client6, server6) = crate::ipv6_loopback::addresses(server);
            return Ok(LinkAddresses {
                client,
                server,
                client6,
                server6,
            });
        }
    }
    Err(NetemError::setup(
        "find a free address block in 198.18.0.0/15",
        std::io::Error::other("all in use"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_specs_read_profiles_netem_and_pairs() {
        let wan = LinkConfig::parse("wan").unwrap();
        assert_eq!(wan.up.delay, std::time::Duration::from_millis(20));
        let both = LinkConfig::parse("delay 5ms loss 1%").unwrap();
        assert_eq!(both.up, both.down);
        let pair = LinkConfig::parse("delay 5ms rate 1mbit | delay 7ms").unwrap();
        assert!(pair.up.rate.is_some() && pair.down.rate.is_none());
        assert_eq!(pair.down.delay, std::time::Duration::from_millis(7));
        let err = LinkConfig::parse("delay 5ms | dleay 7ms").unwrap_err();
        assert!(err.to_string().contains("`dleay`"), "{err}");
        let config = LinkConfig::parse("").unwrap().with_seed(3).with_mtu(9000);
        assert!(config.up.is_clear() && config.seed == 3 && config.mtu == 9000);
    }
}
