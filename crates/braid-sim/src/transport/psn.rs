//! 24-bit packet sequence numbers on the wire (the BTH's PSN field), and their mapping to the
//! 32-bit sequence a QP counts internally.
//!
//! Inside the NIC every connection direction numbers its packets from 0 upwards (32 bits, never
//! wrapping in a run), so the transports compare PSNs as plain integers. On the wire a packet
//! carries `(internal + initial PSN) mod 2^24`, the initial PSN drawn per QP from the run's seed
//! as real NICs draw it at random (rdma_cm picks it; ibverbs' `sq_psn`/`rq_psn`). A receiver
//! maps a wire PSN back to the internal number nearest to a reference it holds (its expected
//! PSN, or what it has acknowledged), by the IBTA's modulo-2^24 rule: a PSN up to 2^23 behind
//! the reference is behind it (a duplicate), anything else is ahead. So a packet from another
//! QP of the peer's host (ReDMArk's injection) lands at a random place of that window, as on
//! hardware, while the connection's own packets map back exactly.

/// PSNs are 24 bits.
pub const PSN_BITS: u32 = 24;
pub const PSN_MASK: u32 = (1 << PSN_BITS) - 1;
const HALF: i32 = 1 << (PSN_BITS - 1);

/// `a - b` modulo 2^24, as a signed distance in [-2^23, 2^23): negative when `a` is behind `b`.
#[inline]
pub fn psn_diff(a: u32, b: u32) -> i32 {
    let d = (a.wrapping_sub(b) & PSN_MASK) as i32;
    if d >= HALF {
        d - (1 << PSN_BITS)
    } else {
        d
    }
}

/// Whether `a` is behind `b` modulo 2^24.
#[inline]
pub fn psn_lt(a: u32, b: u32) -> bool {
    psn_diff(a, b) < 0
}

/// `internal + base` as the wire carries it.
#[inline]
pub fn to_wire(internal: u32, base: u32) -> u32 {
    internal.wrapping_add(base) & PSN_MASK
}

/// The internal PSN of `wire` (sent with initial PSN `base`) nearest to the internal `near`:
/// `near` plus the modulo-2^24 distance. None when that lies before the connection's first
/// PSN (a duplicate of nothing).
#[inline]
pub fn from_wire(wire: u32, base: u32, near: u32) -> Option<u32> {
    let d = psn_diff(wire.wrapping_sub(base), near);
    let v = near as i64 + d as i64;
    u32::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_distance_wraps_at_2_pow_24() {
        assert_eq!(psn_diff(0, PSN_MASK), 1);
        assert_eq!(psn_diff(PSN_MASK, 0), -1);
        assert_eq!(psn_diff(5, 3), 2);
        assert!(psn_lt(PSN_MASK - 2, 1));
        assert!(!psn_lt(1, PSN_MASK - 2));
        // Half the space behind, half ahead.
        assert_eq!(psn_diff(1 << 23, 0), -(1 << 23));
        assert_eq!(psn_diff((1 << 23) - 1, 0), (1 << 23) - 1);
        assert_eq!(to_wire(10, PSN_MASK - 4), 5);
    }

    proptest! {
        /// A connection's own packets map back exactly, wherever the initial PSN puts them on
        /// the 24-bit circle (across the wrap included), from any reference within 2^23.
        #[test]
        fn own_packets_round_trip(base in 0u32..=PSN_MASK, psn in 0u32..(1 << 30),
                                  off in -(1i64 << 23) + 1..(1i64 << 23)) {
            let near = (psn as i64 + off).clamp(0, u32::MAX as i64) as u32;
            let d = psn as i64 - near as i64;
            prop_assume!(d > -(1i64 << 23) && d < (1i64 << 23));
            prop_assert_eq!(from_wire(to_wire(psn, base), base, near), Some(psn));
        }

        /// The modulo order agrees with the integer order within half the space, and is
        /// antisymmetric.
        #[test]
        fn order_is_the_integer_order_within_half_the_space(a in 0u32..=PSN_MASK,
                                                            d in 1u32..(1 << 23)) {
            let b = (a + d) & PSN_MASK;
            prop_assert!(psn_lt(a, b));
            prop_assert!(!psn_lt(b, a));
            prop_assert_eq!(psn_diff(b, a), d as i32);
            prop_assert_eq!(psn_diff(a, b), -(d as i32));
        }
    }
}
