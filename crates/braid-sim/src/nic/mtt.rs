//! The RNIC's memory translation and protection cache (`[nic.mtt]`): what the NIC keeps on chip
//! of the memory protection table (MPT, one entry per memory region: its bounds, access flags and
//! protection domain) and the memory translation table (MTT, one entry per page of a region: the
//! page's bus address). Both tables live in host memory (ConnectX's "ICM"); the NIC caches the
//! entries it used recently, and a remote access whose entries are not cached waits for them to
//! be fetched over PCIe. A tenant that touches many regions, or a large registered footprint in
//! small pages, evicts the entries every other tenant needs, and the one receive pipeline they
//! share stalls on its misses ("Understanding RDMA microarchitecture resources for performance
//! isolation", NSDI '23 (Husky): wide access across many MRs causes ICM cache misses that slow
//! other tenants).
//!
//! Modelled at the responder, on the receive pipeline, where a remote key is resolved: a WRITE's
//! data packet looks up its rkey's MPT entry and the MTT entry of the page it lands in; a READ
//! request looks up the MPT entry and every page the READ covers (the responder's DMA reads
//! them). The requester's local keys (SGEs) and a SEND's receive buffer are not modelled.
//!
//! Off by default (`entries = 0`): no source gives a ConnectX cache size in entries
//! (docs/scenario.md, "Memory translation cache"), and off keeps every result as before.

use braid_topo::units::{Bytes, Duration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MttConfig {
    /// Translation entries (MPT and MTT together) the NIC caches, 0 = no cache modelled (every
    /// lookup free, the default: no public figure for a ConnectX cache size was found).
    pub entries: u32,
    /// Bytes one MTT entry translates (the page size the region was registered with): 4 KiB,
    /// the x86 base page that ibv_reg_mr pins by default.
    pub page: Bytes,
    /// Cost of a miss: a PCIe read round trip during which the receive pipeline stalls. Absent:
    /// `nic.qp_cache_miss`, the same PCIe round trip for a QP context.
    pub miss: Option<Duration>,
}

impl Default for MttConfig {
    fn default() -> Self {
        MttConfig {
            entries: 0,
            page: Bytes(4096),
            miss: None,
        }
    }
}

impl MttConfig {
    /// One clear line naming the key for a value the model cannot use.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.page.0 == 0 || !self.page.0.is_power_of_two() {
            return Err((
                "nic.mtt.page",
                format!(
                    "expected a power of two of bytes (e.g. \"4KiB\" or \"2MiB\"), got {}",
                    self.page.0
                ),
            ));
        }
        Ok(())
    }

    /// The cache this config describes, with `qp_cache_miss` as the miss cost when none is given.
    pub fn build(&self, qp_cache_miss: Duration) -> MttCache {
        MttCache {
            capacity: self.entries as usize,
            page_shift: self.page.0.max(1).trailing_zeros(),
            miss_ps: self.miss.unwrap_or(qp_cache_miss).0,
            stamp_of: HashMap::new(),
            by_stamp: BTreeMap::new(),
            clock: 0,
            hits: 0,
            misses: 0,
        }
    }
}

/// An LRU cache of translation entries. Keys: an MPT entry is its rkey; an MTT entry is its
/// rkey and page number (a region's pages are its own entries, as each MR has its own MTT
/// segment).
#[derive(Debug, Default)]
pub struct MttCache {
    capacity: usize,
    page_shift: u32,
    miss_ps: u64,
    /// key -> last-use stamp, and stamp -> key for finding the least recently used (a map
    /// ordered by stamp: eviction never depends on hash order).
    stamp_of: HashMap<u64, u64>,
    by_stamp: BTreeMap<u64, u64>,
    clock: u64,
    pub hits: u64,
    pub misses: u64,
}

/// MPT keys set the top bit; MTT keys hold the rkey above 40 bits of page number.
const MPT: u64 = 1 << 63;
const PAGE_BITS: u32 = 40;

impl MttCache {
    #[inline]
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Looks up what an access of `len` bytes at `addr` through `rkey` needs (its region's MPT
    /// entry, then one MTT entry per page it touches) and returns the time its misses cost.
    pub fn access(&mut self, rkey: u32, addr: u64, len: u64) -> u64 {
        let mut cost = 0;
        if !self.touch(MPT | rkey as u64) {
            cost += self.miss_ps;
        }
        let first = addr >> self.page_shift;
        let last = (addr + len.max(1) - 1) >> self.page_shift;
        for page in first..=last {
            let key = (rkey as u64) << PAGE_BITS | (page & ((1 << PAGE_BITS) - 1));
            if !self.touch(key) {
                cost += self.miss_ps;
            }
        }
        cost
    }

    /// Touches one entry; true on a hit. A miss loads it, evicting the least recently used
    /// entry when full.
    fn touch(&mut self, key: u64) -> bool {
        self.clock += 1;
        let hit = match self.stamp_of.insert(key, self.clock) {
            Some(old) => {
                self.by_stamp.remove(&old);
                self.hits += 1;
                true
            }
            None => {
                self.misses += 1;
                if self.by_stamp.len() >= self.capacity {
                    let (_, victim) = self.by_stamp.pop_first().expect("a full cache");
                    self.stamp_of.remove(&victim);
                }
                false
            }
        };
        self.by_stamp.insert(self.clock, key);
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: u32, page: u64) -> MttCache {
        MttConfig {
            entries,
            page: Bytes(page),
            miss: Some(Duration(1_000)),
        }
        .build(Duration(0))
    }

    #[test]
    fn a_write_needs_its_regions_entry_and_one_entry_per_page() {
        // By the tables' definition: one MPT entry per region, one MTT entry per page. 10 KiB
        // from the start of a 4 KiB page touches 3 pages: 4 misses cold, 0 warm.
        let mut c = cache(16, 4096);
        assert_eq!(c.access(7, 0, 10 * 1024), 4_000);
        assert_eq!(c.access(7, 0, 10 * 1024), 0);
        assert_eq!((c.hits, c.misses), (4, 4));
        // A page straddled by 2 bytes is two pages.
        assert_eq!(c.access(7, 3 * 4096 - 1, 2), 1_000);
        // Huge pages: the same 10 KiB is one MTT entry.
        let mut h = cache(16, 2 << 20);
        assert_eq!(h.access(7, 0, 10 * 1024), 2_000);
    }

    #[test]
    fn cycling_over_more_regions_than_entries_always_misses() {
        // LRU's worst case, the attacker's pattern: 9 regions of one page each need 18 entries.
        let mut c = cache(16, 4096);
        for _ in 0..5 {
            for mr in 0..9 {
                c.access(mr, 0, 8);
            }
        }
        assert_eq!(c.hits, 0);
        let mut c = cache(18, 4096);
        for _ in 0..5 {
            for mr in 0..9 {
                c.access(mr, 0, 8);
            }
        }
        assert_eq!(c.misses, 18);
    }

    #[test]
    fn the_miss_cost_defaults_to_the_qp_context_round_trip() {
        let mut c = MttConfig {
            entries: 4,
            ..Default::default()
        }
        .build(Duration(1_000_000));
        assert_eq!(c.access(1, 0, 1), 2_000_000);
    }

    #[test]
    fn bad_page_sizes_are_refused_by_key() {
        for page in [0, 3000] {
            let e = MttConfig {
                page: Bytes(page),
                ..Default::default()
            }
            .validate()
            .unwrap_err();
            assert_eq!(e.0, "nic.mtt.page");
        }
    }
}
