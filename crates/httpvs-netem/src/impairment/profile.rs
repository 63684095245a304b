//! Named network profiles (`--profile wan`): each expands to a netem string per direction.

/// A named link: what the client's packets meet going up, and the server's coming down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Name given to `--profile`.
    pub name: &'static str,
    /// What it stands for.
    pub about: &'static str,
    /// netem string, client to server.
    pub up: &'static str,
    /// netem string, server to client.
    pub down: &'static str,
}

impl Profile {
    /// The profile called `name`, if there is one.
    pub fn find(name: &str) -> Option<&'static Profile> {
        PROFILES.iter().find(|p| p.name.eq_ignore_ascii_case(name))
    }
}

/// Every named profile, mildest first.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "lan",
        about: "same building: 1 ms RTT",
        up: "delay 0.5ms 0.05ms",
        down: "delay 0.5ms 0.05ms",
    },
    Profile {
        name: "wan",
        about: "across a continent: 40 ms RTT, slight loss",
        up: "delay 20ms 2ms distribution normal loss 0.1%",
        down: "delay 20ms 2ms distribution normal loss 0.1%",
    },
    Profile {
        name: "4g",
        about: "good mobile: 50 ms RTT, 10/30 Mbit/s up/down",
        up: "delay 25ms 5ms distribution normal rate 10mbit",
        down: "delay 25ms 5ms distribution normal rate 30mbit",
    },
    Profile {
        name: "3g",
        about: "regular 3G: 100 ms RTT, 750 kbit/s up, 1.5 Mbit/s down, 1% loss",
        up: "delay 50ms 10ms distribution normal loss 1% rate 750kbit",
        down: "delay 50ms 10ms distribution normal loss 1% rate 1500kbit",
    },
    Profile {
        name: "lossy",
        about: "50 ms RTT with 5% loss each way",
        up: "delay 25ms loss 5%",
        down: "delay 25ms loss 5%",
    },
    Profile {
        name: "bursty",
        about: "50 ms RTT, losses in bursts (Gilbert-Elliott, about 2%)",
        up: "delay 25ms loss gemodel 1% 30% 70% 0.1%",
        down: "delay 25ms loss gemodel 1% 30% 70% 0.1%",
    },
    Profile {
        name: "satellite",
        about: "geostationary: 600 ms RTT, 10/20 Mbit/s, 0.5% loss",
        up: "delay 300ms 10ms loss 0.5% rate 10mbit",
        down: "delay 300ms 10ms loss 0.5% rate 20mbit",
    },
    Profile {
        name: "severe",
        about: "50 ms RTT with 30% loss each way",
        up: "delay 25ms loss 30%",
        down: "delay 25ms loss 30%",
    },
    Profile {
        name: "corrupt",
        about: "20 ms RTT with 20% of packets corrupted each way",
        up: "delay 10ms corrupt 20%",
        down: "delay 10ms corrupt 20%",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Impairment;

    #[test]
    fn every_profile_parses() {
        for p in PROFILES {
            Impairment::parse(p.up).unwrap_or_else(|e| panic!("{} up: {e}", p.name));
            Impairment::parse(p.down).unwrap_or_else(|e| panic!("{} down: {e}", p.name));
        }
        assert_eq!(Profile::find("WAN").map(|p| p.name), Some("wan"));
        assert!(Profile::find("moon").is_none());
    }
}
