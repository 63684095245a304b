//! Network emulation: a deterministic netem core (packet in at t, packets out at their times) and a TUN relay shell.

pub mod core;
mod counters;
pub mod impairment;

pub use crate::core::{NetemCore, Transmit};
pub use counters::{DirectionCounters, LinkCounters};
pub use impairment::{
    Chance, Distribution, Impairment, LossModel, ParseError, Profile, Rate, Reorder, PROFILES,
};
