//! Network emulation: a deterministic netem core (packet in at t, packets out at their times) and a TUN relay shell.

pub mod core;
mod counters;
mod error;
pub mod impairment;
mod link;
mod preflight;
mod relay;
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
