//! Registered memory of one host. Sizes and keys always; real bytes for the regions registered
//! with [`Access::track`], and for every region when the scenario asks for data checking
//! (`nic.data_check`), so tests can verify that every byte lands at the right address.

use braid_verbs::{Access, MemoryRegion, Sge, VerbsError};

struct Region {
    mr: MemoryRegion,
    access: Access,
    data: Option<Vec<u8>>,
}

#[derive(Default)]
pub struct Memory {
    regions: Vec<Region>,
    next_key: u32,
    /// Every region keeps its bytes (`nic.data_check`).
    pub track_data: bool,
    /// Regions that keep their bytes (so the NIC skips all payload work while there are none).
    tracked: usize,
}

impl Memory {
    pub fn new(track_data: bool) -> Self {
        Memory {
            regions: Vec::new(),
            next_key: 0x100,
            track_data,
            tracked: 0,
        }
    }

    pub fn register(
        &mut self,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let tracked = self.track_data || access.track;
        if tracked && len > (1 << 32) {
            return Err(VerbsError::InvalidWr(
                "tracked (data-checked) regions are limited to 4 GiB",
            ));
        }
        let key = self.next_key;
        self.next_key += 1;
        let mr = MemoryRegion {
            addr,
            len,
            lkey: key,
            rkey: key | 0x8000_0000,
        };
        let data = tracked.then(|| vec![0u8; len as usize]);
        self.tracked += tracked as usize;
        self.regions.push(Region { mr, access, data });
        Ok(mr)
    }

    pub fn deregister(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        let i = self
            .regions
            .iter()
            .position(|r| r.mr.lkey == mr.lkey)
            .ok_or(VerbsError::BadKey(mr.lkey))?;
        let r = self.regions.swap_remove(i);
        self.tracked -= r.data.is_some() as usize;
        Ok(())
    }

    fn by_lkey(&self, lkey: u32) -> Option<&Region> {
        self.regions.iter().find(|r| r.mr.lkey == lkey)
    }

    /// Checks that a local SGE lies inside its region.
    pub fn check_sge(&self, sge: &Sge) -> Result<(), VerbsError> {
        let r = self.by_lkey(sge.lkey).ok_or(VerbsError::BadKey(sge.lkey))?;
        if sge.addr < r.mr.addr || sge.addr + sge.length as u64 > r.mr.addr + r.mr.len {
            return Err(VerbsError::InvalidWr(
                "scatter-gather element outside its memory region",
            ));
        }
        Ok(())
    }

    /// Checks a remote access against rkey, bounds and permissions.
    pub fn check_remote(&self, rkey: u32, addr: u64, len: u64, write: bool) -> bool {
        self.regions.iter().any(|r| {
            r.mr.rkey == rkey
                && addr >= r.mr.addr
                && addr + len <= r.mr.addr + r.mr.len
                && if write {
                    r.access.remote_write
                } else {
                    r.access.remote_read
                }
        })
    }

    /// The region holding `[addr, addr + len)`; a tracked one if several do.
    fn region_at(&self, addr: u64, len: u64) -> Option<usize> {
        let inside = |r: &Region| addr >= r.mr.addr && addr + len <= r.mr.addr + r.mr.len;
        self.regions
            .iter()
            .position(|r| r.data.is_some() && inside(r))
            .or_else(|| self.regions.iter().position(inside))
    }

    /// Whether any region keeps its bytes.
    #[inline]
    pub fn any_tracked(&self) -> bool {
        self.tracked > 0
    }

    /// Whether `[addr, addr + len)` lies in a region that keeps its bytes.
    pub fn is_tracked(&self, addr: u64, len: u64) -> bool {
        self.tracked > 0
            && self
                .region_at(addr, len)
                .is_some_and(|i| self.regions[i].data.is_some())
    }

    /// Whether any element of a scatter-gather list lies in a tracked region (its bytes then
    /// travel with the packets; untracked parts read as zeros).
    pub fn sges_tracked(&self, sges: &[Sge]) -> bool {
        self.tracked > 0
            && sges
                .iter()
                .any(|s| s.length > 0 && self.is_tracked(s.addr, s.length as u64))
    }

    /// The regions holding `[addr, addr + len)`, with whether each keeps its bytes.
    pub fn regions_holding(
        &self,
        addr: u64,
        len: u64,
    ) -> impl Iterator<Item = (MemoryRegion, bool)> + '_ {
        self.regions
            .iter()
            .filter(move |r| addr >= r.mr.addr && addr + len <= r.mr.addr + r.mr.len)
            .map(|r| (r.mr, r.data.is_some()))
    }

    /// Reads `len` bytes at `addr` (registered memory only; zeroes when data is not tracked).
    pub fn read(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        let i = self
            .region_at(addr, len)
            .ok_or(VerbsError::InvalidWr("address outside registered memory"))?;
        let r = &self.regions[i];
        match &r.data {
            Some(d) => {
                let off = (addr - r.mr.addr) as usize;
                Ok(d[off..off + len as usize].to_vec())
            }
            None => Ok(vec![0; len as usize]),
        }
    }

    pub fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), VerbsError> {
        let i = self
            .region_at(addr, bytes.len() as u64)
            .ok_or(VerbsError::InvalidWr("address outside registered memory"))?;
        let r = &mut self.regions[i];
        if let Some(d) = &mut r.data {
            let off = (addr - r.mr.addr) as usize;
            d[off..off + bytes.len()].copy_from_slice(bytes);
        }
        Ok(())
    }

    /// Gathers `len` bytes starting `offset` bytes into the concatenation of `sges`.
    pub fn gather(&self, sges: &[Sge], offset: u64, len: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len as usize);
        for (addr, n) in spans(sges, offset, len) {
            out.extend(self.read(addr, n).unwrap_or_else(|_| vec![0; n as usize]));
        }
        out
    }

    /// Scatters `bytes` starting `offset` bytes into the concatenation of `sges`.
    pub fn scatter(&mut self, sges: &[Sge], offset: u64, bytes: &[u8]) {
        let mut at = 0usize;
        for (addr, n) in spans(sges, offset, bytes.len() as u64) {
            let _ = self.write(addr, &bytes[at..at + n as usize]);
            at += n as usize;
        }
    }
}

/// The (address, length) pieces of `[offset, offset + len)` within a scatter-gather list.
pub fn spans(sges: &[Sge], mut offset: u64, mut len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for s in sges {
        let l = s.length as u64;
        if offset >= l {
            offset -= l;
            continue;
        }
        let n = (l - offset).min(len);
        out.push((s.addr + offset, n));
        len -= n;
        offset = 0;
        if len == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_gather_across_elements() {
        let mut m = Memory::new(true);
        let mr = m.register(1000, 100, Access::ALL).unwrap();
        let sges = [
            Sge {
                addr: 1000,
                length: 10,
                lkey: mr.lkey,
            },
            Sge {
                addr: 1050,
                length: 10,
                lkey: mr.lkey,
            },
        ];
        m.scatter(&sges, 5, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(m.read(1005, 5).unwrap(), vec![1, 2, 3, 4, 5]);
        assert_eq!(m.read(1050, 3).unwrap(), vec![6, 7, 8]);
        assert_eq!(m.gather(&sges, 5, 8), vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(m.check_remote(mr.rkey, 1090, 10, true));
        assert!(!m.check_remote(mr.rkey, 1095, 10, true));
    }
}
