//! Loss decisions: independent (correlated) loss, the 4-state Markov model and Gilbert-Elliott, as netem draws them.

use super::prng::{to_u32, CorrelatedChance, Prng};
use crate::impairment::LossModel;

/// The state of one direction's loss generator.
#[derive(Debug, Clone)]
pub enum LossState {
    /// No loss configured.
    None,
    /// `loss P [CORR]`.
    Random(CorrelatedChance),
    /// `loss state ...`: thresholds and the current state.
    FourState {
        /// p13, p31, p32, p23, p14 in fixed point.
        p: [u32; 5],
        /// Current state of the chain.
        state: FourState,
    },
    /// `loss gemodel ...`: thresholds and whether the channel is bad.
    GilbertElliott {
        /// p (good to bad), fixed point.
        p: u32,
        /// r (bad to good).
        r: u32,
        /// h (chance of delivery in the bad state).
        h: u32,
        /// 1-k (chance of loss in the good state).
        one_minus_k: u32,
        /// Channel in the bad state.
        bad: bool,
    },
}

/// The four states of netem's GI loss model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FourState {
    /// 1: packets received, in a gap.
    TxInGap,
    /// 2: packets received, in a burst.
    TxInBurst,
    /// 3: packets lost, in a burst.
    LostInBurst,
    /// 4: isolated loss, in a gap.
    LostInGap,
}

impl LossState {
    /// The generator for `model`.
    pub fn new(model: Option<&LossModel>) -> LossState {
        match model {
            None => LossState::None,
            Some(LossModel::Random(c)) => {
                LossState::Random(CorrelatedChance::new(c.probability, c.correlation))
            }
            Some(LossModel::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            }) => LossState::FourState {
                p: [*p13, *p31, *p32, *p23, *p14].map(to_u32),
                state: FourState::TxInGap,
            },
            Some(LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }) => LossState::GilbertElliott {
                p: to_u32(*p),
                r: to_u32(*r),
                h: to_u32(1.0 - one_minus_h),
                one_minus_k: to_u32(*one_minus_k),
                bad: false,
            },
        }
    }

    /// Whether the next packet is lost (the kernel's `loss_event`).
    pub fn next_is_lost(&mut self, prng: &mut Prng) -> bool {
        match self {
            LossState::None => false,
            LossState::Random(chance) => chance.happens(prng),
            LossState::FourState { p, state } => four_state(p, state, prng.next_u32()),
            LossState::GilbertElliott {
                p,
                r,
                h,
                one_minus_k,
                bad,
            } => {
                if *bad {
                    if prng.next_u32() < *r {
                        *bad = false;
                    }
                    prng.next_u32() > *h
                } else {
                    if prng.next_u32() < *p {
                        *bad = true;
                    }
                    prng.next_u32() < *one_minus_k
                }
            }
        }
    }
}

/// One step of the GI chain, with contiguous ranges (the kernel's 2026 fix of its boundary gaps).
fn four_state(p: &[u32; 5], state: &mut FourState, rnd: u32) -> bool {
    let [p13, p31, p32, p23, p14] = p.map(u64::from);
    let rnd = u64::from(rnd);
    match *state {
        FourState::TxInGap => {
            if rnd < p14 {
                *state = FourState::LostInGap;
                true
            } else if rnd < p13 + p14 {
                *state = FourState::LostInBurst;
                true
            } else {
                false
            }
        }
        FourState::TxInBurst => {
            if rnd < p23 {
                *state = FourState::LostInBurst;
                true
            } else {
                false
            }
        }
        FourState::LostInBurst => {
            if rnd < p32 {
                *state = FourState::TxInBurst;
                false
            } else if rnd < p31 + p32 {
                *state = FourState::TxInGap;
                false
            } else {
                true
            }
        }
        FourState::LostInGap => {
            *state = FourState::TxInGap;
            false
        }
    }
}
