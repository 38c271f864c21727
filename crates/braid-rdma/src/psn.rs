//! Initial packet sequence numbers of the real backend's QPs.
//!
//! Each QP sends from a random 24-bit initial PSN (ibverbs' `sq_psn`), as rdma_cm and perftest
//! draw one per QP (perftest: `lrand48() & 0xffffff`): a fixed 0 lets a stale packet of an
//! earlier connection over a reused QPN, or a guessed injection, land in the receive window
//! (ReDMArk, USENIX Security '21). The responder must start from the same number (`rq_psn`),
//! so the PSN travels with the endpoint, as rdma_cm's REQ/REP carry it: [`crate::oob`]'s
//! lines add it, and the receiving side records it here. The book is process-wide because the
//! TCP boards' reader threads learn the peers' PSNs while the NIC, on the event loop's thread,
//! reads them when it connects.

use braid_verbs::QpNum;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// PSNs are 24 bits (the BTH's PSN field).
pub const PSN_MASK: u32 = 0xFF_FFFF;

fn book() -> &'static Mutex<HashMap<(u32, QpNum), u32>> {
    static BOOK: OnceLock<Mutex<HashMap<(u32, QpNum), u32>>> = OnceLock::new();
    BOOK.get_or_init(Default::default)
}

/// A fresh random 24-bit PSN. std's `RandomState` is keyed from the operating system's random
/// source once per process; a counter and the clock make every draw differ.
pub fn draw(qpn: QpNum) -> u32 {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(qpn);
    h.write_u64(DRAWS.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    h.write_u64(now);
    h.finish() as u32 & PSN_MASK
}

/// Records that QP `qpn` of the host with address `host` sends from `psn` (its own QPs when
/// they are created, a peer's when its endpoint arrives).
pub fn record(host: u32, qpn: QpNum, psn: u32) {
    book()
        .lock()
        .expect("psn book")
        .insert((host, qpn), psn & PSN_MASK);
}

/// The initial PSN QP `qpn` of host `host` sends from, if known.
pub fn lookup(host: u32, qpn: QpNum) -> Option<u32> {
    book().lock().expect("psn book").get(&(host, qpn)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_24_bit_and_differ() {
        let d: Vec<u32> = (0..64).map(|i| draw(i % 4)).collect();
        assert!(d.iter().all(|&p| p <= PSN_MASK));
        let mut u = d.clone();
        u.sort_unstable();
        u.dedup();
        // 64 draws from 2^24 values: a repeat has probability ~1.2e-4.
        assert!(u.len() >= 63, "{d:?}");
        assert!(d.iter().any(|&p| p != 0));
    }

    #[test]
    fn the_book_answers_what_was_recorded() {
        record(0x0a00_0001, 77, 0x12_3456);
        assert_eq!(lookup(0x0a00_0001, 77), Some(0x12_3456));
        assert_eq!(lookup(0x0a00_0002, 77), None);
        record(0x0a00_0001, 77, 0x1FF_FFFF);
        assert_eq!(lookup(0x0a00_0001, 77), Some(PSN_MASK), "24 bits kept");
    }
}
