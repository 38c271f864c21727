//! Simulated time: integer picoseconds. A u64 covers 213 days, far beyond any run.

pub type Time = u64;

pub const PS: Time = 1;
pub const NS: Time = 1_000;
pub const US: Time = 1_000_000;
pub const MS: Time = 1_000_000_000;
pub const S: Time = 1_000_000_000_000;

/// Time to put `bytes` on a wire of `rate_bps` bit/s, rounded up to the next picosecond
/// (rounding up keeps a link from ever exceeding its rate).
#[inline]
pub fn serialization(bytes: u64, rate_bps: u64) -> Time {
    debug_assert!(rate_bps > 0);
    let bits = bytes as u128 * 8 * S as u128;
    bits.div_ceil(rate_bps as u128) as Time
}

/// Seconds as f64, for reporting only.
#[inline]
pub fn to_secs(t: Time) -> f64 {
    t as f64 / S as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_is_exact() {
        // 1000 bytes at 100 Gbit/s = 80 ns.
        assert_eq!(serialization(1000, 100_000_000_000), 80 * NS);
        // 1 byte at 3 bit/s rounds up.
        assert_eq!(serialization(1, 3), (8 * S).div_ceil(3));
    }
}
