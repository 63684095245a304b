//! The deterministic netem core of one direction: packet in at time t, packets out at their due times.
//! No sockets, no clock: the caller passes `now`, so tests drive it with a virtual clock.

mod dist;
mod loss;
mod prng;
mod queue;

pub use prng::Prng;

use crate::counters::DirectionCounters;
use crate::impairment::{Chance, Impairment, Rate};
use loss::LossState;
use prng::{Correlated, CorrelatedChance};
use queue::TimedQueue;
use std::time::Duration;

/// A packet leaving the core, with the time it was due.
#[derive(Debug)]
pub struct Transmit {
    /// When the packet should have left.
    pub due: Duration,
    /// The IP packet.
    pub packet: Vec<u8>,
}

/// One direction of emulated link, in netem's order: duplicate, loss, corrupt, queue limit,
/// reorder with gap, delay ± jitter, rate.
#[derive(Debug)]
pub struct NetemCore {
    impairment: Impairment,
    prng: Prng,
    duplicate: CorrelatedChance,
    loss: LossState,
    corrupt: CorrelatedChance,
    reorder: CorrelatedChance,
    delay_source: Correlated,
    /// Packets delayed since the last reordered one (netem's `counter`).
    since_reorder: u32,
    queue: TimedQueue,
    counters: DirectionCounters,
}

impl NetemCore {
    /// A core applying `impairment`, its random choices following from `seed`
    /// (the impairment's own `seed` wins when it has one).
    pub fn new(impairment: &Impairment, seed: u64) -> NetemCore {
        let imp = impairment.clone();
        let reorder = imp.reorder.map_or(Chance::NEVER, |r| r.chance);
        NetemCore {
            prng: Prng::new(imp.seed.unwrap_or(seed)),
            duplicate: CorrelatedChance::new(imp.duplicate.probability, imp.duplicate.correlation),
            loss: LossState::new(imp.loss.as_ref()),
            corrupt: CorrelatedChance::new(imp.corrupt.probability, imp.corrupt.correlation),
            reorder: CorrelatedChance::new(reorder.probability, reorder.correlation),
            delay_source: Correlated::new(imp.delay_correlation),
            since_reorder: 0,
            queue: TimedQueue::default(),
            counters: DirectionCounters::default(),
            impairment: imp,
        }
    }

    /// The impairment this core applies.
    pub fn impairment(&self) -> &Impairment {
        &self.impairment
    }

    /// Takes in a packet that arrived at `now`.
    pub fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        self.counters.packets_in += 1;
        self.counters.bytes_in += packet.len() as u64;
        self.enqueue_one(now, packet, true);
    }

    /// When the next packet is due, if any is held.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.queue.next_due()
    }

    /// The next packet due at or before `now`.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Transmit> {
        let (due, packet) = self.queue.pop_due(now)?;
        self.counters.packets_out += 1;
        self.counters.bytes_out += packet.len() as u64;
        Some(Transmit { due, packet })
    }

    /// Packets held, waiting for their time.
    pub fn held(&self) -> usize {
        self.queue.len()
    }

    /// What happened so far (with `held` as of now).
    pub fn counters(&self) -> DirectionCounters {
        DirectionCounters {
            held: self.queue.len() as u64,
            ..self.counters
        }
    }

    /// netem_enqueue: the copy made by `duplicate` goes through again, without duplication.
    fn enqueue_one(&mut self, now: Duration, mut packet: Vec<u8>, may_duplicate: bool) {
        let mut copies = 1;
        if may_duplicate && self.duplicate.happens(&mut self.prng) {
            // Counted when it fires, even if the loss below then takes one copy: a packet both
            // duplicated and lost goes out once (as in the kernel's netem), and the identity
            // out + held = in + duplicated - lost - queue drops holds for it too.
            self.counters.duplicated += 1;
            copies += 1;
        }
        if self.loss.next_is_lost(&mut self.prng) {
            if self.impairment.ecn && mark_congestion(&mut packet) {
                self.counters.ecn_marked += 1;
            } else {
                self.counters.lost += 1;
                copies -= 1;
            }
        }
        if copies == 0 {
            return;
        }
        if copies > 1 {
            self.enqueue_one(now, packet.clone(), false);
        }
        if self.corrupt.happens(&mut self.prng) && !packet.is_empty() {
            let byte = self.prng.below(packet.len());
            let bit = self.prng.below(8);
            packet[byte] ^= 1 << bit;
            self.counters.corrupted += 1;
        }
        if self.queue.len() >= self.impairment.limit as usize {
            self.counters.queue_drops += 1;
            return;
        }
        self.schedule(now, packet);
    }

    /// Reorder with gap, delay ± jitter, then rate.
    fn schedule(&mut self, now: Duration, packet: Vec<u8>) {
        let gap = self.impairment.reorder.map_or(0, |r| r.gap);
        let delayed =
            gap == 0 || self.since_reorder < gap - 1 || !self.reorder.happens(&mut self.prng);
        if !delayed {
            self.since_reorder = 0;
            self.counters.reordered += 1;
            self.queue.push_front(now, packet);
            return;
        }
        let imp = &self.impairment;
        let delay = dist::sample_delay(
            imp.delay,
            imp.jitter,
            imp.distribution,
            &mut self.delay_source,
            &mut self.prng,
        );
        let mut due = now + delay;
        if let Some(rate) = &imp.rate {
            // The link serializes: a packet starts after the last held one is out (netem's `last`).
            if let Some(latest) = self.queue.latest_due() {
                due = due.max(latest);
            }
            due += transmission_time(packet.len(), rate);
        }
        self.since_reorder = self.since_reorder.saturating_add(1);
        self.queue.push(due, packet);
    }
}

/// Time to put a packet of `len` bytes on the wire (the kernel's `packet_time_ns`).
fn transmission_time(len: usize, rate: &Rate) -> Duration {
    let mut bytes = (len as i64 + rate.packet_overhead as i64).max(0) as u64;
    if rate.cell_size > 0 {
        let cell = rate.cell_size as u64;
        let cells = bytes.div_ceil(cell);
        bytes = cells * (cell as i64 + rate.cell_overhead as i64).max(0) as u64;
    }
    Duration::from_nanos((bytes as u128 * 1_000_000_000 / rate.bytes_per_sec.max(1) as u128) as u64)
}

/// Sets CE on an ECN-capable IPv4/IPv6 packet; false when it is not ECN-capable.
fn mark_congestion(packet: &mut [u8]) -> bool {
    match packet.first().map(|b| b >> 4) {
        Some(4) if packet.len() >= 20 => {
            if packet[1] & 0b11 == 0 {
                return false;
            }
            packet[1] |= 0b11;
            let header_len = ((packet[0] & 0x0f) as usize * 4).clamp(20, packet.len());
            packet[10] = 0;
            packet[11] = 0;
            let sum = ipv4_checksum(&packet[..header_len]);
            packet[10..12].copy_from_slice(&sum.to_be_bytes());
            true
        }
        Some(6) if packet.len() >= 40 => {
            if (packet[1] >> 4) & 0b11 == 0 {
                return false;
            }
            packet[1] |= 0b11 << 4;
            true
        }
        _ => false,
    }
}

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
