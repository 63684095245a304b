//! netem semantics of the sans-IO core, driven by a virtual clock and checked statistically with fixed seeds.

use httpvs_netem::{Impairment, NetemCore};
use std::time::Duration;

/// A packet leaving the core: its id (first 4 bytes), when it was sent in, and when it came out.
#[derive(Debug, Clone, Copy)]
struct Delivery {
    id: u32,
    sent: Duration,
    out: Duration,
}

/// Feeds `count` packets of `size` bytes, one every `every`, through a core and collects what leaves.
fn drive(
    netem: &str,
    seed: u64,
    count: u32,
    every: Duration,
    size: usize,
) -> (NetemCore, Vec<Delivery>) {
    let imp = Impairment::parse(netem).unwrap();
    let mut core = NetemCore::new(&imp, seed);
    let mut sent_at = Vec::with_capacity(count as usize);
    let mut out = Vec::new();
    let drain = |core: &mut NetemCore, now: Duration, out: &mut Vec<(u32, Duration)>| {
        while let Some(t) = core.poll_transmit(now) {
            assert!(t.due <= now);
            let id = u32::from_be_bytes(t.packet[..4].try_into().unwrap());
            out.push((id, t.due));
        }
    };
    let mut raw = Vec::new();
    for i in 0..count {
        let now = every * i;
        // Everything due before this arrival leaves first, at its own due time.
        while let Some(due) = core.poll_timeout().filter(|d| *d < now) {
            drain(&mut core, due, &mut raw);
        }
        let mut packet = vec![0u8; size.max(4)];
        packet[..4].copy_from_slice(&i.to_be_bytes());
        sent_at.push(now);
        core.enqueue(now, packet);
    }
    while let Some(due) = core.poll_timeout() {
        drain(&mut core, due, &mut raw);
    }
    // A corrupted id cannot be traced back; such packets are left out.
    for (id, t) in raw.into_iter().filter(|(id, _)| *id < count) {
        out.push(Delivery {
            id,
            sent: sent_at[id as usize],
            out: t,
        });
    }
    (core, out)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn assert_near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, want {want} ± {tolerance}"
    );
}

fn identity_holds(core: &NetemCore) {
    let c = core.counters();
    assert_eq!(
        c.packets_out + c.held,
        c.packets_in + c.duplicated - c.lost - c.queue_drops
    );
}

#[test]
fn random_loss_drops_its_share() {
    let (core, out) = drive("loss 10%", 1, 100_000, ms(1), 100);
    let lost = 1.0 - out.len() as f64 / 100_000.0;
    assert_near("loss", lost, 0.10, 0.005);
    assert_eq!(core.counters().lost, 100_000 - out.len() as u64);
    identity_holds(&core);
}

#[test]
fn correlated_loss_keeps_its_mean_but_clusters() {
    let (_, out) = drive("loss 10% 75%", 2, 100_000, ms(1), 100);
    let (lost, burst) = loss_bursts(&out, 100_000);
    assert_near("correlated loss", lost, 0.10, 0.01);
    // Each loss is followed by another with chance 0.75 + 0.25 * 0.1: bursts of about 4.
    assert_near("correlated burst", burst, 1.0 / (1.0 - 0.775), 0.3);
}

/// Runs of consecutive lost ids: (loss fraction, mean burst length).
fn loss_bursts(out: &[Delivery], count: u32) -> (f64, f64) {
    let mut got = vec![false; count as usize];
    for d in out {
        got[d.id as usize] = true;
    }
    let lost = got.iter().filter(|g| !**g).count();
    let bursts = got.windows(2).filter(|w| w[0] && !w[1]).count().max(1);
    (lost as f64 / count as f64, lost as f64 / bursts as f64)
}

#[test]
fn gilbert_elliott_loses_in_bursts() {
    // Bad state 1/(1+10) of the time, left with chance 10%: bursts of 10 on average.
    let (_, out) = drive("loss gemodel 1% 10% 100% 0%", 3, 200_000, ms(1), 64);
    let (lost, burst) = loss_bursts(&out, 200_000);
    assert_near("GE loss", lost, 1.0 / 11.0, 0.01);
    assert_near("GE burst length", burst, 10.0, 1.5);
}

#[test]
fn four_state_model_matches_its_chain() {
    // p13 = 10%, p31 = 90%: Bernoulli-like, 10% loss in bursts of 1/0.9.
    let (_, out) = drive("loss state 10%", 4, 100_000, ms(1), 64);
    let (lost, burst) = loss_bursts(&out, 100_000);
    assert_near("4-state loss", lost, 0.10, 0.01);
    assert_near("4-state burst", burst, 1.0 / 0.9, 0.1);
    // Long bursts: p13 1%, p31 10%, no burst reception: bad 1/11 of the time.
    let (_, out) = drive("loss state 1% 10%", 5, 200_000, ms(1), 64);
    let (lost, burst) = loss_bursts(&out, 200_000);
    assert_near("4-state bursty loss", lost, 1.0 / 11.0, 0.01);
    assert_near("4-state bursty length", burst, 10.0, 1.5);
}

#[test]
fn duplicate_sends_extra_copies() {
    let (core, out) = drive("duplicate 10%", 6, 50_000, ms(1), 100);
    assert_near("duplicates", out.len() as f64 / 50_000.0 - 1.0, 0.10, 0.01);
    assert_eq!(core.counters().duplicated as usize, out.len() - 50_000);
    identity_holds(&core);
}

/// A packet both duplicated and lost goes out once (the kernel's netem: the loss takes one of
/// the two copies), and the counters still add up: out = in + duplicated - lost.
#[test]
fn duplicate_and_loss_together_keep_the_identity() {
    let (core, out) = drive("loss 30% duplicate 30%", 9, 20_000, ms(1), 100);
    let c = core.counters();
    assert_eq!(out.len() as u64, 20_000 + c.duplicated - c.lost, "{c:?}");
    assert_near("duplicates", c.duplicated as f64 / 20_000.0, 0.30, 0.02);
    // The copy meets the loss again, as in the kernel (it is enqueued once more).
    let offered = (20_000 + c.duplicated) as f64;
    assert_near("losses", c.lost as f64 / offered, 0.30, 0.02);
    identity_holds(&core);
}

#[test]
fn corrupt_flips_exactly_one_bit() {
    let imp = Impairment::parse("corrupt 100%").unwrap();
    let mut core = NetemCore::new(&imp, 7);
    for _ in 0..1000 {
        let original = vec![0x5au8; 200];
        core.enqueue(Duration::ZERO, original.clone());
        let t = core.poll_transmit(Duration::ZERO).unwrap();
        let flipped: u32 = t
            .packet
            .iter()
            .zip(&original)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(flipped, 1);
    }
    let (core, _) = drive("corrupt 20%", 8, 50_000, ms(1), 100);
    assert_near(
        "corrupt",
        core.counters().corrupted as f64 / 50_000.0,
        0.20,
        0.01,
    );
}

#[test]
fn reorder_with_gap_sends_some_ahead() {
    // After each reordered packet, 4 are delayed; then each has a 25% chance: one in 8 on average.
    let (core, out) = drive("delay 10ms reorder 25% gap 5", 9, 80_000, ms(1), 64);
    let early: Vec<&Delivery> = out.iter().filter(|d| d.out == d.sent).collect();
    assert_eq!(early.len() as u64, core.counters().reordered);
    assert_near(
        "reordered share",
        early.len() as f64 / 80_000.0,
        1.0 / 8.0,
        0.01,
    );
    assert!(
        early.windows(2).all(|w| w[1].id - w[0].id >= 5),
        "gap respected"
    );
    assert!(out
        .iter()
        .all(|d| d.out == d.sent || d.out == d.sent + ms(10)));
    let mut by_id = out.clone();
    by_id.sort_by_key(|d| d.id);
    assert!(
        by_id.iter().take(4).all(|d| d.out == d.sent + ms(10)),
        "first gap-1 delayed"
    );
}

/// Mean and standard deviation of delays in milliseconds.
fn delay_stats(out: &[Delivery]) -> (f64, f64) {
    let d: Vec<f64> = out
        .iter()
        .map(|d| (d.out - d.sent).as_secs_f64() * 1e3)
        .collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64;
    (mean, var.sqrt())
}

#[test]
fn jitter_follows_its_distribution() {
    let (_, out) = drive("delay 50ms 10ms", 10, 50_000, ms(1), 64);
    let (mean, sd) = delay_stats(&out);
    assert_near("uniform mean", mean, 50.0, 0.2);
    assert_near("uniform sd", sd, 10.0 / 3f64.sqrt(), 0.2);
    assert!(out
        .iter()
        .all(|d| d.out - d.sent >= ms(40) && d.out - d.sent < ms(60)));

    let (_, out) = drive("delay 50ms 10ms distribution normal", 11, 50_000, ms(1), 64);
    let (mean, sd) = delay_stats(&out);
    assert_near("normal mean", mean, 50.0, 0.2);
    assert_near("normal sd", sd, 10.0, 0.3);
    let within_one_sd = out
        .iter()
        .filter(|d| ((d.out - d.sent).as_secs_f64() * 1e3 - 50.0).abs() < 10.0)
        .count() as f64
        / out.len() as f64;
    assert_near("normal within 1 sd", within_one_sd, 0.6827, 0.01);

    let (_, out) = drive("delay 50ms 10ms distribution pareto", 12, 50_000, ms(1), 64);
    let (mean, _) = delay_stats(&out);
    let mut d: Vec<Duration> = out.iter().map(|d| d.out - d.sent).collect();
    d.sort();
    let median = d[d.len() / 2].as_secs_f64() * 1e3;
    assert_near("pareto mean", mean, 50.0, 0.5);
    assert!(
        median < mean - 2.0,
        "pareto is right-skewed: median {median} mean {mean}"
    );

    let (_, out) = drive(
        "delay 50ms 10ms distribution paretonormal",
        13,
        50_000,
        ms(1),
        64,
    );
    assert_near("paretonormal mean", delay_stats(&out).0, 50.0, 0.5);
}

#[test]
fn correlated_jitter_moves_slowly() {
    let (_, out) = drive("delay 50ms 10ms 90%", 14, 20_000, ms(5), 64);
    let mut by_id = out.clone();
    by_id.sort_by_key(|d| d.id);
    let step: f64 = by_id
        .windows(2)
        .map(|w| {
            ((w[1].out - w[1].sent).as_secs_f64() - (w[0].out - w[0].sent).as_secs_f64()).abs()
        })
        .sum::<f64>()
        / by_id.len() as f64;
    // Uncorrelated uniform over 20 ms steps by 6.7 ms on average.
    assert!(step * 1e3 < 2.0, "mean step {} ms", step * 1e3);
}

#[test]
fn rate_serializes_packets() {
    // 1250-byte packets at 10 Mbit/s take 1 ms each: a burst of 1000 drains in exactly 1 s.
    let (core, out) = drive("rate 10mbit", 15, 1000, Duration::ZERO, 1250);
    assert_eq!(out.len(), 1000);
    for (i, d) in out.iter().enumerate() {
        assert_eq!(d.id as usize, i, "order kept");
        assert_eq!(d.out, ms(i as u64 + 1));
    }
    assert_eq!(core.counters().queue_drops, 0);
    // With overhead 250 bytes each packet takes 1.2 ms.
    let (_, out) = drive("rate 10mbit 250", 15, 10, Duration::ZERO, 1250);
    assert_eq!(out.last().unwrap().out, Duration::from_micros(12_000));
    // Offered below the rate, packets only pay their own serialization.
    let (_, out) = drive("delay 5ms rate 10mbit", 15, 100, ms(2), 1250);
    assert!(out.iter().all(|d| d.out - d.sent == ms(6)));
}

#[test]
fn queue_limit_drops_the_excess() {
    let (core, out) = drive("rate 10mbit limit 100", 16, 150, Duration::ZERO, 1250);
    assert_eq!(out.len(), 100);
    assert_eq!(core.counters().queue_drops, 50);
    identity_holds(&core);
}

#[test]
fn same_seed_same_run() {
    let netem = "delay 20ms 5ms loss 5% duplicate 2% reorder 10% gap 3 corrupt 1%";
    let key = |out: &[Delivery]| out.iter().map(|d| (d.id, d.out)).collect::<Vec<_>>();
    let (_, a) = drive(netem, 99, 5000, ms(1), 64);
    let (_, b) = drive(netem, 99, 5000, ms(1), 64);
    let (_, c) = drive(netem, 100, 5000, ms(1), 64);
    assert_eq!(key(&a), key(&b));
    assert_ne!(key(&a), key(&c));
}

#[test]
fn clear_link_passes_everything_at_once() {
    let (core, out) = drive("", 17, 1000, ms(1), 64);
    assert!(out.iter().all(|d| d.out == d.sent));
    assert_eq!(core.counters().packets_out, 1000);
}

#[test]
fn ecn_marks_capable_packets_instead_of_dropping() {
    let imp = Impairment::parse("loss 100% ecn").unwrap();
    let mut core = NetemCore::new(&imp, 18);
    // An IPv4 header with ECT(0), and one that is not ECN-capable.
    let mut ect = vec![0u8; 40];
    ect[0] = 0x45;
    ect[1] = 0b10;
    let mut plain = ect.clone();
    plain[1] = 0;
    core.enqueue(Duration::ZERO, ect);
    core.enqueue(Duration::ZERO, plain);
    let out = core
        .poll_transmit(Duration::ZERO)
        .expect("the ECN-capable packet passes");
    assert_eq!(out.packet[1] & 0b11, 0b11, "marked CE");
    let sum = out.packet[..20]
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(c[1]))
        .sum::<u32>();
    assert_eq!(
        (sum & 0xffff) + (sum >> 16),
        0xffff,
        "header checksum still valid"
    );
    assert!(
        core.poll_transmit(Duration::ZERO).is_none(),
        "the other one is lost"
    );
    assert_eq!((core.counters().ecn_marked, core.counters().lost), (1, 1));
}

#[test]
fn random_netem_strings_never_panic_and_round_trip() {
    let words = [
        "delay",
        "10ms",
        "1ms",
        "25%",
        "distribution",
        "normal",
        "pareto",
        "loss",
        "random",
        "state",
        "gemodel",
        "1%",
        "30%",
        "duplicate",
        "corrupt",
        "reorder",
        "gap",
        "5",
        "rate",
        "10mbit",
        "14",
        "limit",
        "100",
        "ecn",
        "seed",
        "7",
        "bogus",
        "-3",
        "1e9",
        "%",
        "0.5",
        "",
    ];
    let mut prng = httpvs_netem::core::Prng::new(19);
    for _ in 0..20_000 {
        let n = prng.below(8);
        let text: Vec<&str> = (0..n).map(|_| words[prng.below(words.len())]).collect();
        let text = text.join(" ");
        if let Ok(imp) = Impairment::parse(&text) {
            let again = Impairment::parse(&imp.to_string())
                .unwrap_or_else(|e| panic!("`{text}` -> `{imp}` does not parse: {e}"));
            assert_eq!(again.to_string(), imp.to_string(), "{text}");
        }
    }
}
