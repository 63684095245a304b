//! Seeded randomness: xoshiro256** (stable across versions, unlike library PRNGs) and netem's correlated draws.

/// A small, fast, seedable generator whose output never changes between httpvs versions.
#[derive(Debug, Clone)]
pub struct Prng {
    state: [u64; 4],
}

impl Prng {
    /// A generator whose whole sequence follows from `seed`.
    pub fn new(seed: u64) -> Prng {
        // SplitMix64 spreads any seed (even 0) over the 256-bit state.
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Prng {
            state: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// The next 32 random bits (netem works in u32 draws).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A uniform index below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// A probability in netem's fixed point: 0 = never, u32::MAX = always.
pub fn to_u32(probability: f64) -> u32 {
    (probability.clamp(0.0, 1.0) * u32::MAX as f64).round() as u32
}

/// netem's correlated random source: each draw leans on the previous one by `rho`.
#[derive(Debug, Clone, Default)]
pub struct Correlated {
    rho: u32,
    /// The previous draw; `None` before the first, which leans on a random value, as the
    /// kernel's `init_crandom` seeds it (leaning on 0 held a link's first packets, its
    /// handshakes, near the bottom of a correlated jitter's range).
    last: Option<u32>,
}

impl Correlated {
    /// A source with correlation `correlation` (0..=1).
    pub fn new(correlation: f64) -> Correlated {
        Correlated {
            rho: to_u32(correlation),
            last: None,
        }
    }

    /// The next draw, as the kernel's `get_crandom`.
    pub fn next(&mut self, prng: &mut Prng) -> u32 {
        let value = prng.next_u32() as u64;
        if self.rho == 0 {
            return value as u32;
        }
        let last = match self.last {
            Some(last) => last,
            None => prng.next_u32(),
        };
        let rho = self.rho as u64 + 1;
        let answer = ((value * ((1u64 << 32) - rho) + last as u64 * rho) >> 32) as u32;
        self.last = Some(answer);
        answer
    }
}

/// A yes/no chance whose outcome repeats the previous one with probability `correlation`.
///
/// The kernel instead averages successive draws, which shrinks small probabilities toward zero
/// (`loss 10% 75%` loses almost nothing); repeating the last outcome keeps the configured mean.
#[derive(Debug, Clone, Default)]
pub struct CorrelatedChance {
    threshold: u32,
    rho: u32,
    /// The previous outcome; `None` before the first, which is a fresh draw (repeating an
    /// initial "no" made a highly correlated chance all but absent for a link's first packets).
    last: Option<bool>,
}

impl CorrelatedChance {
    /// A chance of `probability`, correlated by `correlation` with the previous outcome.
    pub fn new(probability: f64, correlation: f64) -> CorrelatedChance {
        CorrelatedChance {
            threshold: to_u32(probability),
            rho: to_u32(correlation),
            last: None,
        }
    }

    /// The next outcome.
    pub fn happens(&mut self, prng: &mut Prng) -> bool {
        if self.threshold == 0 {
            return false;
        }
        if let Some(last) = self.last {
            if self.rho != 0 && prng.next_u32() < self.rho {
                return last;
            }
        }
        let now = self.threshold >= prng.next_u32();
        self.last = Some(now);
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Prng::new(42);
        let mut b = Prng::new(42);
        let mut c = Prng::new(43);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    /// The first draws of a correlated source spread as uncorrelated ones do: over many seeds,
    /// the first draw's mean is about half the range (leaning on 0, it was about a tenth at
    /// 90%), and a 90%-correlated 50% chance's first outcome is yes about half the time.
    #[test]
    fn correlated_sources_start_anywhere() {
        let seeds = 2_000u64;
        let mut sum = 0.0;
        let mut yes = 0;
        for seed in 0..seeds {
            let mut prng = Prng::new(seed);
            sum += Correlated::new(0.9).next(&mut prng) as f64 / u32::MAX as f64;
            yes += u32::from(CorrelatedChance::new(0.5, 0.9).happens(&mut prng));
        }
        let mean = sum / seeds as f64;
        assert!((0.4..0.6).contains(&mean), "{mean}");
        assert!((800..1200).contains(&yes), "{yes}");
    }

    #[test]
    fn correlation_makes_draws_follow_each_other() {
        let mut prng = Prng::new(1);
        let mut loose = Correlated::new(0.0);
        let mut tight = Correlated::new(0.9);
        let mean_step = |src: &mut Correlated, prng: &mut Prng| {
            let mut prev = src.next(prng) as f64;
            let mut sum = 0.0;
            for _ in 0..10_000 {
                let v = src.next(prng) as f64;
                sum += (v - prev).abs();
                prev = v;
            }
            sum / 10_000.0
        };
        let loose_step = mean_step(&mut loose, &mut prng);
        let tight_step = mean_step(&mut tight, &mut prng);
        assert!(
            tight_step < loose_step / 3.0,
            "{tight_step} vs {loose_step}"
        );
    }
}
