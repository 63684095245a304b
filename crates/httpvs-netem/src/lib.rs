//! Network emulation: a deterministic netem core (packet in at t, packets out at their times) and a TUN relay shell.
//!
//! The kernel netem qdisc is not needed: packets cross a userspace relay between two TUN
//! devices, one in a client network namespace and one on the server side (this host, or a
//! second namespace), and meet netem's impairments on the way, in netem's order and syntax.
//!
//! # Layers
//! - [`Impairment`]: one direction's netem options, parsed from netem's own syntax
//!   (`delay 50ms 10ms distribution normal loss 1% rate 10mbit`); [`PROFILES`] names common links.
//! - [`NetemCore`]: the sans-IO core. `enqueue(now, packet)`, `poll_timeout()`,
//!   `poll_transmit(now)`; no clock, no sockets, a seeded PRNG, so a run repeats exactly.
//! - [`Link`]: namespaces, TUN devices and the relay threads (one per direction, real-time
//!   priority when allowed, nanosecond sleeps). Everything hangs on file descriptors: nothing is
//!   left after exit, SIGINT or SIGKILL.
//!
//! # Address mapping
//! Inside the client namespace, **`127.0.0.1:PORT` reaches the server side's `127.0.0.1:PORT`
//! through the link** (the namespace's own loopback is down and 127.0.0.0/8 is routed over the
//! link, with `route_localnet` on both TUN devices). So a client dials the very URL it would dial
//! without emulation. With [`Layout::HostLoopback`] the server side is this host; with
//! [`Layout::Namespaces`] it is a second namespace where the server must be started
//! ([`Link::run_in_server_ns`]). The server sees connections from
//! [`LinkAddresses::client`]; the server side's link address [`LinkAddresses::server`] also
//! works, for servers bound to `0.0.0.0`. `[::1]:PORT` reaches the host's `[::1]:PORT` too (on
//! host-loopback links, where `nft` is installed; see [`Link::ipv6_unavailable`]), through a
//! forwarder at the server end, as Linux lets no ::1 packet cross a device. Nothing else is
//! routed: no DNS, no internet.
//!
//! # Without root
//! [`rootless::enter`], called first thing in `main`, moves a non-root process into a user
//! namespace of its own when unprivileged user namespaces are allowed and /dev/net/tun is usable.
//! Its new network namespace then stands in for the host, and links are built there as for root.
//! For [`Layout::HostLoopback`] a forwarder at the link's far end carries TCP connections and UDP
//! flows on to the host's loopback, with sockets a helper left in the host's namespace makes: the
//! impairment stays on the link and the server sees connections from 127.0.0.1. The forwarder
//! asks the host's kernel (sock_diag) whether a TCP port listens before it stands in for it, so a
//! closed port is refused as it would be without emulation.
//!
//! # Putting a load generator behind the link
//! A thread can enter a namespace, create sockets and leave: the sockets stay in it. So a
//! tokio client makes its sockets with [`Link::run_in_client_ns`] and uses them as usual:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use httpvs_netem::{Impairment, Link, LinkConfig};
//! let netem = Impairment::parse("delay 25ms loss 1%")?;
//! let link = Link::start(LinkConfig::new(netem.clone(), netem))?; // needs root
//! // TCP: an unconnected socket made in the namespace, connected from tokio.
//! let socket = link.run_in_client_ns(tokio::net::TcpSocket::new_v4)??;
//! let stream = socket.connect("127.0.0.1:8080".parse()?).await?;
//! // UDP (e.g. a quinn endpoint for HTTP/3): a std socket made in the namespace.
//! let udp = link.run_in_client_ns(|| std::net::UdpSocket::bind("0.0.0.0:0"))??;
//! # drop((stream, udp));
//! println!("{}", link.counters()); // per direction: in, out, lost, dup, corrupt, reorder, qdrop, late
//! # Ok(()) }
//! ```
//!
//! For a `--net SPEC` flag, [`LinkConfig::parse`] reads a profile name (`wan`), a netem string
//! for both directions (`delay 25ms loss 1%`), or `UP | DOWN`. A whole run can also go behind the
//! link: threads inherit the namespace of the thread that starts them, so
//! `link.run_in_client_ns(|| run_load(config))` puts every worker's sockets there.
//!
//! Make one socket per connection this way (a namespace switch costs one short-lived thread,
//! tens of microseconds, outside any timed section). [`Link::spawn_in_client_ns`] runs a
//! whole command behind the link instead; the child is killed if the spawning thread dies.
//! [`preflight`] says, before anything is touched, whether a link can be built here and why not.

pub mod core;
mod counters;
mod error;
pub mod impairment;
mod ipv6_loopback;
mod link;
mod loopback_forward;
mod preflight;
mod relay;
pub mod rootless;
mod sweep;
mod sys;

pub use crate::core::{NetemCore, Transmit};
pub use counters::{DirectionCounters, LinkCounters};
pub use error::NetemError;
pub use impairment::{
    Chance, Distribution, Impairment, LossModel, ParseError, Profile, Rate, Reorder, PROFILES,
};
pub use link::{random_seed, Layout, Link, LinkAddresses, LinkConfig, NAMESPACE_DEVICE};
pub use preflight::check as preflight;
