//! The RNIC's QP-context cache: LRU over QP numbers with a fixed capacity. A miss means the
//! context must be fetched over PCIe; the caller charges the stall.

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct QpCache {
    capacity: usize,
    /// qpn -> last-use stamp, and stamp -> qpn for finding the least recently used.
    stamp_of: Vec<u64>,
    by_stamp: BTreeMap<u64, u32>,
    clock: u64,
    pub hits: u64,
    pub misses: u64,
}

const ABSENT: u64 = u64::MAX;

impl QpCache {
    /// `capacity` 0 = unlimited (every access hits, nothing is tracked).
    pub fn new(capacity: u32) -> Self {
        QpCache {
            capacity: capacity as usize,
            ..Default::default()
        }
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Touches `qpn`; returns true on a hit. On a miss the context is loaded, evicting the least
    /// recently used one when full.
    #[inline]
    pub fn access(&mut self, qpn: u32) -> bool {
        if self.capacity == 0 {
            self.hits += 1;
            return true;
        }
        self.access_lru(qpn)
    }

    fn access_lru(&mut self, qpn: u32) -> bool {
        let i = qpn as usize;
        if i >= self.stamp_of.len() {
            self.stamp_of.resize(i + 1, ABSENT);
        }
        self.clock += 1;
        let old = self.stamp_of[i];
        let hit = old != ABSENT;
        if hit {
            self.by_stamp.remove(&old);
            self.hits += 1;
        } else {
            self.misses += 1;
            if self.by_stamp.len() >= self.capacity {
                let (&s, &victim) = self
                    .by_stamp
                    .iter()
                    .next()
                    .expect("full cache has an entry");
                self.by_stamp.remove(&s);
                self.stamp_of[victim as usize] = ABSENT;
            }
        }
        self.stamp_of[i] = self.clock;
        self.by_stamp.insert(self.clock, qpn);
        hit
    }

    pub fn forget(&mut self, qpn: u32) {
        if let Some(&s) = self.stamp_of.get(qpn as usize) {
            if s != ABSENT {
                self.by_stamp.remove(&s);
                self.stamp_of[qpn as usize] = ABSENT;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent() {
        let mut c = QpCache::new(2);
        assert!(!c.access(1));
        assert!(!c.access(2));
        assert!(c.access(1));
        assert!(!c.access(3)); // evicts 2
        assert!(c.access(1));
        assert!(!c.access(2));
        assert_eq!((c.hits, c.misses), (2, 4));
    }

    #[test]
    fn round_robin_over_more_qps_than_capacity_always_misses() {
        // The thrashing both DRUM and MP-RDMA measure: cyclic access to n > capacity contexts.
        let mut c = QpCache::new(8);
        for _ in 0..10 {
            for q in 0..9 {
                c.access(q);
            }
        }
        assert_eq!(c.hits, 0);
        let mut c = QpCache::new(8);
        for _ in 0..10 {
            for q in 0..8 {
                c.access(q);
            }
        }
        assert_eq!(c.misses, 8);
    }
}
