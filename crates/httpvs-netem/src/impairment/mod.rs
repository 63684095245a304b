//! What one direction of a link does to packets, in netem's own terms (`delay 50ms 10ms loss 1% ...`).

mod parse;
mod profile;

pub use parse::ParseError;
pub use profile::{Profile, PROFILES};

use std::fmt;
use std::time::Duration;

/// netem's default queue limit, in packets.
pub const DEFAULT_LIMIT: u32 = 1000;

/// The impairment of one direction, as `tc qdisc add ... netem ARGS` would set it.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairment {
    /// Most packets held at once (waiting for their time); more are queue drops.
    pub limit: u32,
    /// Fixed delay added to every packet.
    pub delay: Duration,
    /// Random variation around `delay` (the distribution's scale).
    pub jitter: Duration,
    /// How much each jitter sample depends on the previous one (0..=1).
    pub delay_correlation: f64,
    /// Shape of the jitter.
    pub distribution: Distribution,
    /// Which packets are dropped.
    pub loss: Option<LossModel>,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
    /// Chance of sending a packet twice.
    pub duplicate: Chance,
    /// Chance of flipping one random bit of a packet.
    pub corrupt: Chance,
    /// Send some packets at once, ahead of the delayed ones.
    pub reorder: Option<Reorder>,
    /// Serialization rate of the link.
    pub rate: Option<Rate>,
    /// Seed of this direction's random choices (else the link's).
    pub seed: Option<u64>,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment {
            limit: DEFAULT_LIMIT,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            delay_correlation: 0.0,
            distribution: Distribution::Uniform,
            loss: None,
            ecn: false,
            duplicate: Chance::NEVER,
            corrupt: Chance::NEVER,
            reorder: None,
            rate: None,
            seed: None,
        }
    }
}

impl Impairment {
    /// Parses netem's syntax, e.g. `delay 50ms 10ms 25% distribution normal loss 1% rate 10mbit`.
    pub fn parse(text: &str) -> Result<Impairment, ParseError> {
        parse::parse(text)
    }

    /// What in `text` tc reads with a default unit the writer may not have meant: `delay 20`
    /// is 20 µs, `rate 10` is 10 bit/s. One line each, for a note beside the banner.
    pub fn unitless(text: &str) -> Vec<String> {
        parse::unitless(text)
    }

    /// True when some packets may be dropped or damaged: a loss model that can lose one, or a
    /// chance of corruption (`loss 0%` loses nothing).
    pub fn loses(&self) -> bool {
        self.loss_possible() || self.corrupt.probability > 0.0
    }

    /// True when the loss model can drop a packet.
    fn loss_possible(&self) -> bool {
        match self.loss {
            None => false,
            Some(LossModel::Random(c)) => c.probability > 0.0,
            // Loss states are entered from good reception only.
            Some(LossModel::State { p13, p14, .. }) => p13 > 0.0 || p14 > 0.0,
            Some(LossModel::GilbertElliott {
                p,
                one_minus_h,
                one_minus_k,
                ..
            }) => one_minus_k > 0.0 || (p > 0.0 && one_minus_h > 0.0),
        }
    }

    /// True when packets wait: a fixed delay or jitter.
    pub fn delays(&self) -> bool {
        !self.delay.is_zero() || !self.jitter.is_zero()
    }

    /// True when packets pass untouched and at once (`loss 0%` or `duplicate 0%` included).
    pub fn is_clear(&self) -> bool {
        let clear = Impairment {
            limit: self.limit,
            seed: self.seed,
            ..Impairment::default()
        };
        let never = |c: Chance| c.probability == 0.0;
        let mut what = self.clone();
        if !what.loss_possible() {
            // Nothing to drop, so nothing to mark instead.
            (what.loss, what.ecn) = (None, false);
        }
        if never(what.duplicate) {
            what.duplicate = Chance::NEVER;
        }
        if never(what.corrupt) {
            what.corrupt = Chance::NEVER;
        }
        if what.reorder.is_some_and(|r| never(r.chance)) {
            what.reorder = None;
        }
        if what.jitter.is_zero() {
            // Correlation and distribution shape a jitter there is none of.
            (what.delay_correlation, what.distribution) = (0.0, Distribution::Uniform);
        }
        what == clear
    }
}

/// A probability with netem's optional correlation to the previous draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chance {
    /// Probability, 0..=1.
    pub probability: f64,
    /// Correlation with the previous draw, 0..=1.
    pub correlation: f64,
}

impl Chance {
    /// A chance that never happens.
    pub const NEVER: Chance = Chance {
        probability: 0.0,
        correlation: 0.0,
    };
}

/// The shape of delay jitter; netem's default is uniform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform in delay ± jitter.
    Uniform,
    /// Normal with standard deviation jitter.
    Normal,
    /// Pareto (heavy tail), scaled by jitter.
    Pareto,
    /// Mix of a quarter normal and three quarters pareto.
    ParetoNormal,
}

impl Distribution {
    /// netem's name of the distribution.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::ParetoNormal => "paretonormal",
        }
    }
}

/// How packets are chosen for loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    /// Independent loss (with optional correlation): `loss random P [CORR]`.
    Random(Chance),
    /// Four-state Markov model: `loss state p13 [p31 [p32 [p23 [p14]]]]`.
    State {
        /// Good reception to burst loss.
        p13: f64,
        /// Burst loss to good reception.
        p31: f64,
        /// Burst loss to burst reception.
        p32: f64,
        /// Burst reception to burst loss.
        p23: f64,
        /// Good reception to isolated loss.
        p14: f64,
    },
    /// Gilbert-Elliott: `loss gemodel p [r [1-h [1-k]]]`.
    GilbertElliott {
        /// Good to bad.
        p: f64,
        /// Bad to good.
        r: f64,
        /// Loss probability in the bad state.
        one_minus_h: f64,
        /// Loss probability in the good state.
        one_minus_k: f64,
    },
}

/// Gap-based reordering: `reorder P [CORR] [gap N]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reorder {
    /// Chance that an eligible packet skips the delay.
    pub chance: Chance,
    /// Every packet after `gap - 1` delayed ones is eligible.
    pub gap: u32,
}

/// Link rate: `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Bytes per second.
    pub bytes_per_sec: u64,
    /// Bytes added to (or removed from) each packet's size, e.g. link-layer headers.
    pub packet_overhead: i32,
    /// Cell size for cell-based links such as ATM (0 = none).
    pub cell_size: u32,
    /// Bytes added to each cell.
    pub cell_overhead: i32,
}

impl fmt::Display for Impairment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.limit != DEFAULT_LIMIT {
            parts.push(format!("limit {}", self.limit));
        }
        if !self.delay.is_zero() || !self.jitter.is_zero() {
            let mut s = format!("delay {}", show_time(self.delay));
            if !self.jitter.is_zero() {
                s += &format!(" {}", show_time(self.jitter));
                if self.delay_correlation > 0.0 {
                    s += &format!(" {}", show_percent(self.delay_correlation));
                }
                if self.distribution != Distribution::Uniform {
                    s += &format!(" distribution {}", self.distribution.name());
                }
            }
            parts.push(s);
        }
        if let Some(loss) = &self.loss {
            parts.push(show_loss(loss));
        }
        if self.ecn {
            parts.push("ecn".into());
        }
        if self.duplicate.probability > 0.0 {
            parts.push(format!("duplicate {}", show_chance(&self.duplicate)));
        }
        if self.corrupt.probability > 0.0 {
            parts.push(format!("corrupt {}", show_chance(&self.corrupt)));
        }
        if let Some(r) = &self.reorder {
            let gap = if r.gap > 1 {
                format!(" gap {}", r.gap)
            } else {
                String::new()
            };
            parts.push(format!("reorder {}{gap}", show_chance(&r.chance)));
        }
        if let Some(rate) = &self.rate {
            parts.push(show_rate(rate));
        }
        if let Some(seed) = self.seed {
            parts.push(format!("seed {seed}"));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

fn show_loss(loss: &LossModel) -> String {
    match loss {
        LossModel::Random(c) => format!("loss {}", show_chance(c)),
        LossModel::State {
            p13,
            p31,
            p32,
            p23,
            p14,
        } => format!(
            "loss state {} {} {} {} {}",
            show_percent(*p13),
            show_percent(*p31),
            show_percent(*p32),
            show_percent(*p23),
            show_percent(*p14)
        ),
        LossModel::GilbertElliott {
            p,
            r,
            one_minus_h,
            one_minus_k,
        } => format!(
            "loss gemodel {} {} {} {}",
            show_percent(*p),
            show_percent(*r),
            show_percent(*one_minus_h),
            show_percent(*one_minus_k)
        ),
    }
}

fn show_rate(rate: &Rate) -> String {
    let bits = rate.bytes_per_sec * 8;
    let mut s = if bits.is_multiple_of(1_000_000_000_000) {
        format!("rate {}tbit", bits / 1_000_000_000_000)
    } else if bits.is_multiple_of(1_000_000_000) {
        format!("rate {}gbit", bits / 1_000_000_000)
    } else if bits.is_multiple_of(1_000_000) {
        format!("rate {}mbit", bits / 1_000_000)
    } else if bits.is_multiple_of(1000) {
        format!("rate {}kbit", bits / 1000)
    } else {
        format!("rate {bits}bit")
    };
    if rate.packet_overhead != 0 || rate.cell_size != 0 {
        s += &format!(" {}", rate.packet_overhead);
    }
    if rate.cell_size != 0 {
        s += &format!(" {} {}", rate.cell_size, rate.cell_overhead);
    }
    s
}

fn show_chance(c: &Chance) -> String {
    if c.correlation > 0.0 {
        format!(
            "{} {}",
            show_percent(c.probability),
            show_percent(c.correlation)
        )
    } else {
        show_percent(c.probability)
    }
}

pub(crate) fn show_percent(p: f64) -> String {
    let pct = p * 100.0;
    let text = format!("{pct:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

fn show_time(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}
