//! `httpvs load --net SPEC`: the whole run behind an emulated link, and the link's report section.
//!
//! The CLI owns the [`Link`]; the load generator knows nothing of netem. Worker threads inherit
//! the network namespace of the thread that starts them, so running `httpvs_load::run_until`
//! inside the link's client namespace puts every socket of the run (TCP and QUIC) behind the
//! link. There, `127.0.0.1:PORT` and `[::1]:PORT` reach this host's through the relay, so the
//! URL is dialled unchanged.

use super::{setup_error, usage};
use anyhow::Context;
use httpvs_load::connect_to::ConnectTo;
use httpvs_load::report::{LinkDirection, Network, Report};
use httpvs_load::{LoadConfig, Observer};
use httpvs_netem::{DirectionCounters, Link, LinkConfig, LinkCounters, PROFILES};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How long packets still inside the link at the end (FINs, last ACKs) may take to arrive.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// A validated `--net` request: the link to build and the spec as the user wrote it.
#[derive(Debug)]
pub struct NetLink {
    spec: String,
    config: LinkConfig,
    /// The target is `[::1]`, which needs the link's IPv6 loopback.
    ipv6: bool,
}

impl NetLink {
    /// Checks `--net`, `--net-seed` and that the target is reachable through a link; every
    /// problem is one usage line (exit 2) before anything is touched.
    pub fn from_flags(
        spec: &str,
        seed: Option<u64>,
        url: &http::Uri,
        connect_to: Option<&ConnectTo>,
    ) -> anyhow::Result<NetLink> {
        if spec.trim().is_empty() {
            // A link that does nothing is a run without --net that costs a relay.
            return Err(usage(format!(
                "--net {spec:?}: give a profile (wan, 3g...: httpvs netem --profiles) or netem options like \"delay 20ms loss 1%\""
            )));
        }
        let config = LinkConfig::parse(spec).map_err(|e| usage(spec_error(spec, &e)))?;
        if config.up.is_clear() && config.down.is_clear() {
            // `|`, `delay 0ms`, `loss 0%`: parsed, and still nothing to emulate.
            return Err(usage(format!(
                "--net {spec:?} changes no packet: give a profile (wan, 3g...: httpvs netem --profiles) or netem options like \"delay 20ms loss 1%\""
            )));
        }
        let config = match seed {
            // A direction's own `seed` wins over --net-seed: with both named, --net-seed was
            // dropped unseen while the report named it as what repeats the run.
            Some(seed) if config.up.seed.is_some() && config.down.seed.is_some() => {
                return Err(usage(format!(
                    "--net-seed {seed} is not used: --net names a `seed` for both \
                     directions; give the seed in one place"
                )));
            }
            Some(seed) => config.with_seed(seed),
            None => config,
        };
        // The link must reach where connections go: `--connect-to`'s host, else the URL's.
        let dial = ConnectTo::dialled_host(connect_to, url).map_err(usage)?;
        let ipv6 = check_target(&dial)?;
        Ok(NetLink {
            spec: spec.to_string(),
            config,
            ipv6,
        })
    }

    /// Starts the link, runs the load inside its client namespace, lets the link drain, and
    /// returns the report with its `network` section.
    pub fn run(
        &self,
        config: &LoadConfig,
        observer: &mut (dyn Observer + Send),
        stop: Arc<AtomicBool>,
    ) -> anyhow::Result<Report> {
        let link = Link::start(self.config.clone()).context("--net")?;
        if let Some(why) = link.ipv6_unavailable().filter(|_| self.ipv6) {
            anyhow::bail!(
                "--net: [::1] does not cross the emulated link here: {why}; use 127.0.0.1"
            );
        }
        let outcome = link
            .run_in_client_ns(|| httpvs_load::run_until(config, observer, stop))
            .context("--net")?;
        // The run's last packets (FINs, final ACKs, QUIC closes) reach their peers before the
        // link goes, and the counters then include them.
        // Drained whether or not the run was interrupted: its counters must include them.
        link.drain(DRAIN_LIMIT, &AtomicBool::new(false));
        if let Some(why) = link.relay_failure() {
            say!(
                "httpvs: warning: --net: the link's relay stopped ({why}): that direction carried nothing after it, and its counters stopped there"
            );
        }
        let seed = link.seed();
        let counters = link.stop();
        let mut report = outcome.map_err(setup_error)?;
        report.network = Some(self.section(seed, counters));
        Ok(report)
    }

    /// The report's network section.
    fn section(&self, seed: u64, counters: LinkCounters) -> Network {
        Network {
            spec: self.spec.clone(),
            seed,
            mtu: self.config.mtu,
            up: direction(self.config.up.to_string(), &counters.up),
            down: direction(self.config.down.to_string(), &counters.down),
        }
    }
}

fn direction(netem: String, c: &DirectionCounters) -> LinkDirection {
    LinkDirection {
        netem,
        packets_in: c.packets_in,
        bytes_in: c.bytes_in,
        packets_out: c.packets_out,
        bytes_out: c.bytes_out,
        lost: c.lost,
        duplicated: c.duplicated,
        corrupted: c.corrupted,
        reordered: c.reordered,
        queue_drops: c.queue_drops,
        ecn_marked: c.ecn_marked,
        late: c.late,
        rejected: c.rejected,
        held: c.held,
    }
}

/// `--net "SPEC": <what is wrong>`, naming the profiles when the spec looks like a mistyped one.
fn spec_error(spec: &str, e: &httpvs_netem::NetemError) -> String {
    let one_word = !spec.trim().is_empty()
        && spec
            .trim()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    let hint = if one_word {
        let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        format!("; or a profile: {}", names.join(", "))
    } else {
        String::new()
    };
    format!("--net {spec:?}: {e}{hint}")
}

/// The link reaches only this host's loopback (127.0.0.0/8 and [::1]): anything else would not
/// be reached. Returns whether the target is IPv6.
fn check_target(host: &str) -> anyhow::Result<bool> {
    let loopback_v4 = host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
    if loopback_v4 || host.eq_ignore_ascii_case("localhost") {
        return Ok(false);
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback()) {
        return Ok(true);
    }
    Err(usage(format!(
        "--net reaches only this host's loopback (127.0.0.0/8 and [::1]) through the emulated \
         link, not {host}: run the server on 127.0.0.1 or [::1] and load http(s)://127.0.0.1:PORT/"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn specs_and_targets_are_checked_before_any_link() {
        let local = uri("http://127.0.0.1:8080/");
        let net = NetLink::from_flags("wan", Some(7), &local, None).unwrap();
        assert_eq!(net.config.seed, 7);
        let both = NetLink::from_flags("delay 5ms loss 1%", None, &local, None).unwrap();
        assert_eq!(both.config.up, both.config.down);
        assert!(NetLink::from_flags(
            "delay 5ms | delay 7ms",
            None,
            &uri("http://localhost/"),
            None
        )
        .is_ok());
        let err = NetLink::from_flags("delay 5ms jitterbug", None, &local, None).unwrap_err();
        assert!(err.to_string().contains("`jitterbug`"), "{err}");
        for nothing in [" ", "|", " | ", "delay 0ms", "delay 0ms | loss 0%"] {
            let err = NetLink::from_flags(nothing, None, &local, None).unwrap_err();
            assert!(err.to_string().contains("give a profile"), "{err}");
        }
        let err = NetLink::from_flags("wna", None, &local, None).unwrap_err();
        assert!(err.to_string().contains("profile: lan, wan"), "{err}");
        for far in [
            "http://10.0.0.1/",
            "http://[::2]:80/",
            "https://example.com/",
        ] {
            let err = NetLink::from_flags("wan", None, &uri(far), None).unwrap_err();
            assert!(
                err.to_string().contains("127.0.0.0/8 and [::1]"),
                "{far}: {err}"
            );
        }
        let v6 = NetLink::from_flags("wan", None, &uri("http://[::1]:8080/"), None).unwrap();
        assert!(v6.ipv6 && !net.ipv6);
        // --connect-to: the link must reach where connections go, whatever the URL names.
        let rule = |r: &str| httpvs_load::connect_to::ConnectTo::parse(r).unwrap();
        let named = uri("https://svc.example/");
        let via = NetLink::from_flags("wan", None, &named, Some(&rule("[::1]:8443"))).unwrap();
        assert!(via.ipv6);
        let err = NetLink::from_flags("wan", None, &local, Some(&rule("10.0.0.1:80"))).unwrap_err();
        assert!(err.to_string().contains("not 10.0.0.1"), "{err}");
    }
}
