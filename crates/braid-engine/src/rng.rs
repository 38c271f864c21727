//! Seeded random streams. Each component owns its stream, derived from the run's master seed and a
//! stable stream identity (a name and indices), so draws in one component never shift another's.

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// SplitMix64 finaliser: a good 64-bit mixer (seed derivation, hashing).
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derives a seed from a master seed, a stream name and indices (e.g. a node id). Stable across
/// platforms and versions: it is FNV-1a over the name followed by SplitMix mixing.
pub fn derive_seed(master: u64, name: &str, indices: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    let mut s = mix64(master ^ mix64(h));
    for &i in indices {
        s = mix64(s ^ mix64(i.wrapping_add(0x632B_E59B_D9B4_E019)));
    }
    s
}

/// A component's own random stream.
#[derive(Clone, Debug)]
pub struct RngStream {
    rng: Xoshiro256PlusPlus,
}

impl RngStream {
    pub fn new(master: u64, name: &str, indices: &[u64]) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(derive_seed(master, name, indices)),
        }
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        // 53 random mantissa bits.
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform() < p
    }

    /// Uniform integer in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.rng.random_range(0..n)
    }

    /// Exponential with the given mean.
    #[inline]
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = RngStream::new(7, "link", &[3]);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = RngStream::new(7, "link", &[3]);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        let mut c = RngStream::new(7, "link", &[4]);
        assert_ne!(a[0], c.next_u64());
        let mut d = RngStream::new(8, "link", &[3]);
        assert_ne!(a[0], d.next_u64());
    }

    #[test]
    fn uniform_mean_is_one_half() {
        let mut r = RngStream::new(1, "t", &[]);
        let n = 200_000;
        let m: f64 = (0..n).map(|_| r.uniform()).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 0.005, "{m}");
    }
}
