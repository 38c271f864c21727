//! Registered memory of one host. Sizes and keys always; real bytes for the regions registered
//! with [`Access::track`], and for every region when the scenario asks for data checking
//! (`nic.data_check`), so tests can verify that every byte lands at the right address.
//!
//! Each tenant has its own address space, as each process has its own on a real host: a region
//! belongs to the tenant that registered it, and an address means a byte of that tenant's memory
//! only. Two tenants registering the same addresses get two sets of bytes. Every region also
//! belongs to one protection domain (a host-wide number, see `hostverbs.rs`); a remote access is
//! allowed only through a region of the PD of the QP it arrived on.
//!
//! One exception, shared memory: the host agent shares parts of its memory with tenants,
//! explicitly, one share per tenant and range ([`braid_verbs::AgentShares`]; DRUM shares each
//! tenant's slice of its global buffer with that tenant only, as a shared-memory segment its
//! agent maps into one process). A tenant's region inside one of the agent's regions and inside
//! a share for that tenant is a mapping of that memory: the agent and the tenant see the same
//! bytes. Anywhere else (another tenant's slice, the agent's own buffers) the same addresses are
//! the tenant's private memory.

use braid_verbs::{Access, MemoryRegion, Sge, ShareSlot, TenantId, VerbsError, AGENT};

struct Region {
    mr: MemoryRegion,
    access: Access,
    /// Whose address space the region's addresses are in.
    space: TenantId,
    /// Its protection domain (host-wide number).
    pd: u32,
    data: Option<Vec<u8>>,
    /// A tenant's region inside one of the host agent's: shared memory.
    shared: bool,
}

/// Why a local scatter-gather element is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SgeFault {
    /// Unknown lkey, or the element lies outside its region: the post fails.
    Invalid(VerbsError),
    /// The lkey's region is in another protection domain than the QP's: the WR is accepted and
    /// completes with a local protection error (IBV_WC_LOC_PROT_ERR).
    OtherPd,
}

/// Registration limits (`nic.max_mr`, `nic.tenant_max_mr`, `nic.tenant_max_pinned`), each 0
/// for unlimited. The host agent's own registrations count towards the NIC's `max_mr` only.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegLimits {
    pub max_mr: u64,
    pub tenant_max_mr: u64,
    pub tenant_max_pinned: u64,
}

#[derive(Default)]
pub struct Memory {
    regions: Vec<Region>,
    next_key: u32,
    /// Every region keeps its bytes (`nic.data_check`).
    pub track_data: bool,
    /// Regions that keep their bytes (so the NIC skips all payload work while there are none).
    tracked: usize,
    /// What the host agent shares with which tenant.
    pub shares: ShareSlot,
    limits: RegLimits,
    /// Registrations refused by a limit (the `mr_refused` counter).
    pub refused: u64,
}

impl Memory {
    pub fn new(track_data: bool) -> Self {
        Memory {
            regions: Vec::new(),
            next_key: 0x100,
            track_data,
            tracked: 0,
            shares: ShareSlot::default(),
            limits: RegLimits::default(),
            refused: 0,
        }
    }

    pub fn with_limits(mut self, limits: RegLimits) -> Self {
        self.limits = limits;
        self
    }

    /// ibv_reg_mr's ENOMEM: the NIC's memory-region table is full, or the tenant's quota of
    /// regions or pinned bytes would be exceeded.
    fn check_limits(&self, space: TenantId, len: u64) -> Result<(), VerbsError> {
        let l = self.limits;
        if l.max_mr > 0 && self.regions.len() as u64 >= l.max_mr {
            return Err(VerbsError::NoMemory(
                "the NIC's memory-region table is full (nic.max_mr)",
            ));
        }
        if space == AGENT || (l.tenant_max_mr == 0 && l.tenant_max_pinned == 0) {
            return Ok(());
        }
        let (mut count, mut pinned) = (0u64, 0u64);
        for r in self.regions.iter().filter(|r| r.space == space) {
            count += 1;
            pinned += r.mr.len;
        }
        if l.tenant_max_mr > 0 && count >= l.tenant_max_mr {
            return Err(VerbsError::NoMemory(
                "the tenant's memory-region quota is used up (nic.tenant_max_mr)",
            ));
        }
        if l.tenant_max_pinned > 0 && pinned.saturating_add(len) > l.tenant_max_pinned {
            return Err(VerbsError::NoMemory(
                "the tenant's pinned-memory limit would be exceeded (nic.tenant_max_pinned)",
            ));
        }
        Ok(())
    }

    /// Registers a region in address space 0 and protection domain 0 (the host agent's default
    /// PD); what a NIC used without tenants (unit tests) does.
    pub fn register(
        &mut self,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        self.register_in(0, 0, addr, len, access)
    }

    /// Registers `[addr, addr + len)` of tenant `space`'s address space in protection domain `pd`.
    pub fn register_in(
        &mut self,
        space: TenantId,
        pd: u32,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        if let Err(e) = self.check_limits(space, len) {
            self.refused += 1;
            return Err(e);
        }
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
        let shared = space != AGENT
            && self.shares.borrow().covers(space, addr, len)
            && self.pick(addr, len, |r| r.space == AGENT).is_some();
        let data = tracked.then(|| vec![0u8; len as usize]);
        self.tracked += tracked as usize;
        self.regions.push(Region {
            mr,
            access,
            space,
            pd,
            data,
            shared,
        });
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

    /// The protection domain of the region with `lkey`.
    pub fn pd_of(&self, lkey: u32) -> Option<u32> {
        self.by_lkey(lkey).map(|r| r.pd)
    }

    /// Whether any region is in protection domain `pd` (ibv_dealloc_pd's EBUSY).
    pub fn pd_in_use(&self, pd: u32) -> bool {
        self.regions.iter().any(|r| r.pd == pd)
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

    /// [`Memory::check_sge`], and that its region is in protection domain `pd` (the QP's).
    pub fn check_sge_in(&self, sge: &Sge, pd: u32) -> Result<(), SgeFault> {
        self.check_sge(sge).map_err(SgeFault::Invalid)?;
        match self.pd_of(sge.lkey) {
            Some(p) if p == pd => Ok(()),
            _ => Err(SgeFault::OtherPd),
        }
    }

    /// Checks a remote access that arrived on a QP of protection domain `pd` against rkey, PD,
    /// bounds and permissions.
    pub fn check_remote(&self, pd: u32, rkey: u32, addr: u64, len: u64, write: bool) -> bool {
        self.regions.iter().any(|r| {
            r.mr.rkey == rkey
                && r.pd == pd
                && addr >= r.mr.addr
                && addr + len <= r.mr.addr + r.mr.len
                && if write {
                    r.access.remote_write
                } else {
                    r.access.remote_read
                }
        })
    }

    /// A region that `which` accepts holding `[addr, addr + len)`; a tracked one if several do.
    fn pick(&self, addr: u64, len: u64, which: impl Fn(&Region) -> bool) -> Option<usize> {
        let inside =
            |r: &Region| which(r) && addr >= r.mr.addr && addr + len <= r.mr.addr + r.mr.len;
        self.regions
            .iter()
            .position(|r| r.data.is_some() && inside(r))
            .or_else(|| self.regions.iter().position(inside))
    }

    /// The region holding the bytes of `[addr, addr + len)` of address space `space`: one of
    /// its own; in shared memory (the agent's, or a tenant's mapping of it), any region over
    /// the shared memory.
    fn region_at(&self, space: TenantId, addr: u64, len: u64) -> Option<usize> {
        let shm = |r: &Region| r.space == AGENT || r.shared;
        if space == AGENT {
            return self.pick(addr, len, shm);
        }
        let i = self.pick(addr, len, |r| r.space == space)?;
        if self.regions[i].shared {
            return self.pick(addr, len, shm).or(Some(i));
        }
        Some(i)
    }

    /// Whether any region keeps its bytes.
    #[inline]
    pub fn any_tracked(&self) -> bool {
        self.tracked > 0
    }

    /// Whether `[addr, addr + len)` of `space` lies in a region that keeps its bytes.
    #[inline]
    pub fn is_tracked(&self, space: TenantId, addr: u64, len: u64) -> bool {
        self.tracked > 0
            && self
                .region_at(space, addr, len)
                .is_some_and(|i| self.regions[i].data.is_some())
    }

    /// Whether any element of a scatter-gather list of `space` lies in a tracked region (its
    /// bytes then travel with the packets; untracked parts read as zeros).
    #[inline]
    pub fn sges_tracked(&self, space: TenantId, sges: &[Sge]) -> bool {
        self.tracked > 0
            && sges
                .iter()
                .any(|s| s.length > 0 && self.is_tracked(space, s.addr, s.length as u64))
    }

    /// The regions of `space` holding `[addr, addr + len)`, with whether each keeps its bytes.
    pub fn regions_holding(
        &self,
        space: TenantId,
        addr: u64,
        len: u64,
    ) -> impl Iterator<Item = (MemoryRegion, bool)> + '_ {
        self.regions
            .iter()
            .filter(move |r| {
                r.space == space && addr >= r.mr.addr && addr + len <= r.mr.addr + r.mr.len
            })
            .map(|r| (r.mr, r.data.is_some()))
    }

    /// Reads `len` bytes at `addr` of whichever address space registered it (the first tracked
    /// region holding it): an inspector for tests and measurements, which know the address of
    /// one tenant's buffer. The NIC and the tenants read with [`Memory::read_in`].
    pub fn read(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        let inside = |r: &Region| addr >= r.mr.addr && addr + len <= r.mr.addr + r.mr.len;
        let i = self
            .regions
            .iter()
            .position(|r| r.data.is_some() && inside(r))
            .or_else(|| self.regions.iter().position(inside))
            .ok_or(VerbsError::InvalidWr("address outside registered memory"))?;
        Ok(self.bytes(i, addr, len))
    }

    fn bytes(&self, i: usize, addr: u64, len: u64) -> Vec<u8> {
        let r = &self.regions[i];
        match &r.data {
            Some(d) => {
                let off = (addr - r.mr.addr) as usize;
                d[off..off + len as usize].to_vec()
            }
            None => vec![0; len as usize],
        }
    }

    /// Reads `len` bytes at `addr` of `space` (registered memory only; zeroes when data is not
    /// tracked).
    pub fn read_in(&self, space: TenantId, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        let i = self
            .region_at(space, addr, len)
            .ok_or(VerbsError::InvalidWr("address outside registered memory"))?;
        Ok(self.bytes(i, addr, len))
    }

    /// Writes `bytes` at `addr` of `space`.
    pub fn write_in(&mut self, space: TenantId, addr: u64, bytes: &[u8]) -> Result<(), VerbsError> {
        let i = self
            .region_at(space, addr, bytes.len() as u64)
            .ok_or(VerbsError::InvalidWr("address outside registered memory"))?;
        let r = &mut self.regions[i];
        if let Some(d) = &mut r.data {
            let off = (addr - r.mr.addr) as usize;
            d[off..off + bytes.len()].copy_from_slice(bytes);
        }
        Ok(())
    }

    /// Gathers `len` bytes starting `offset` bytes into the concatenation of `sges` (of `space`).
    pub fn gather(&self, space: TenantId, sges: &[Sge], offset: u64, len: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len as usize);
        for (addr, n) in spans(sges, offset, len) {
            out.extend(
                self.read_in(space, addr, n)
                    .unwrap_or_else(|_| vec![0; n as usize]),
            );
        }
        out
    }

    /// Scatters `bytes` starting `offset` bytes into the concatenation of `sges` (of `space`).
    pub fn scatter(&mut self, space: TenantId, sges: &[Sge], offset: u64, bytes: &[u8]) {
        let mut at = 0usize;
        for (addr, n) in spans(sges, offset, bytes.len() as u64) {
            let _ = self.write_in(space, addr, &bytes[at..at + n as usize]);
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
        m.scatter(0, &sges, 5, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(m.read(1005, 5).unwrap(), vec![1, 2, 3, 4, 5]);
        assert_eq!(m.read(1050, 3).unwrap(), vec![6, 7, 8]);
        assert_eq!(m.gather(0, &sges, 5, 8), vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(m.check_remote(0, mr.rkey, 1090, 10, true));
        assert!(!m.check_remote(0, mr.rkey, 1095, 10, true));
    }

    /// The ibverbs rule: an rkey is honoured only for a request that arrived on a QP of the
    /// region's protection domain.
    #[test]
    fn a_remote_access_needs_the_regions_protection_domain() {
        let mut m = Memory::new(false);
        let mr = m.register_in(7, 7, 1000, 100, Access::ALL).unwrap();
        assert!(m.check_remote(7, mr.rkey, 1000, 100, false));
        assert!(!m.check_remote(8, mr.rkey, 1000, 100, false));
        assert!(!m.check_remote(8, mr.rkey, 1000, 100, true));
        let sge = Sge {
            addr: 1000,
            length: 10,
            lkey: mr.lkey,
        };
        assert_eq!(m.check_sge_in(&sge, 7), Ok(()));
        assert_eq!(m.check_sge_in(&sge, 8), Err(SgeFault::OtherPd));
    }

    /// Two tenants registering the same addresses have two sets of bytes.
    #[test]
    fn each_tenant_has_its_own_address_space() {
        let mut m = Memory::new(true);
        m.register_in(1, 1, 4096, 64, Access::ALL).unwrap();
        m.register_in(2, 2, 4096, 64, Access::ALL).unwrap();
        m.write_in(1, 4100, b"secret").unwrap();
        assert_eq!(m.read_in(2, 4100, 6).unwrap(), vec![0; 6]);
        m.write_in(2, 4100, b"XXXXXX").unwrap();
        assert_eq!(m.read_in(1, 4100, 6).unwrap(), b"secret".to_vec());
        assert!(
            m.read_in(3, 4100, 6).is_err(),
            "tenant 3 registered nothing"
        );
    }

    /// ibv_reg_mr fails ENOMEM past the device's `max_mr` (all tenants together) and past a
    /// tenant's quota of regions or pinned bytes; a deregistration frees its slot.
    #[test]
    fn registration_limits_refuse_with_enomem() {
        let mut m = Memory::new(false).with_limits(RegLimits {
            max_mr: 4,
            tenant_max_mr: 2,
            tenant_max_pinned: 0,
        });
        let a = m.register_in(1, 1, 0, 64, Access::ALL).unwrap();
        m.register_in(1, 1, 64, 64, Access::ALL).unwrap();
        assert!(matches!(
            m.register_in(1, 1, 128, 64, Access::ALL),
            Err(VerbsError::NoMemory(_))
        ));
        // Another tenant still has its quota.
        m.register_in(2, 2, 0, 64, Access::ALL).unwrap();
        m.register_in(2, 2, 64, 64, Access::ALL).unwrap();
        // The NIC's table (4) is full now, for every tenant and the agent.
        assert!(matches!(
            m.register_in(3, 3, 0, 64, Access::ALL),
            Err(VerbsError::NoMemory(_))
        ));
        assert!(m.register_in(AGENT, AGENT, 0, 64, Access::ALL).is_err());
        m.deregister(&a).unwrap();
        m.register_in(3, 3, 0, 64, Access::ALL).unwrap();
        assert_eq!(m.refused, 3);

        let mut m = Memory::new(false).with_limits(RegLimits {
            max_mr: 0,
            tenant_max_mr: 0,
            tenant_max_pinned: 100,
        });
        m.register_in(1, 1, 0, 60, Access::ALL).unwrap();
        assert!(m.register_in(1, 1, 60, 41, Access::ALL).is_err());
        m.register_in(1, 1, 60, 40, Access::ALL).unwrap();
    }

    /// The host agent's memory is shared where it shares it: a tenant's region inside a share
    /// maps the agent's bytes (DRUM's global buffer), whichever of them keeps the bytes; other
    /// tenants' is not.
    #[test]
    fn the_host_agents_memory_is_shared_with_its_tenants() {
        let mut m = Memory::new(false);
        m.register_in(AGENT, AGENT, 1 << 20, 1 << 16, Access::ALL.tracked())
            .unwrap();
        m.shares.borrow_mut().grant(5, (1 << 20) + 4096, 4096);
        m.register_in(5, 5, (1 << 20) + 4096, 4096, Access::LOCAL.tracked())
            .unwrap();
        m.write_in(AGENT, (1 << 20) + 4100, b"from the agent")
            .unwrap();
        assert_eq!(
            m.read_in(5, (1 << 20) + 4100, 14).unwrap(),
            b"from the agent"
        );
        m.write_in(5, (1 << 20) + 4096, b"tenant").unwrap();
        assert_eq!(m.read_in(AGENT, (1 << 20) + 4096, 6).unwrap(), b"tenant");
        assert!(m.is_tracked(5, (1 << 20) + 4096, 6));
        // A tenant's memory is not shared with other tenants.
        m.register_in(6, 6, 1 << 30, 4096, Access::ALL.tracked())
            .unwrap();
        m.register_in(7, 7, 1 << 30, 4096, Access::ALL.tracked())
            .unwrap();
        m.write_in(6, 1 << 30, b"six").unwrap();
        assert_eq!(m.read_in(7, 1 << 30, 3).unwrap(), vec![0; 3]);
    }

    /// A tenant that registers agent memory nobody shared with it (another tenant's slice, or
    /// the agent's own buffers) gets its own bytes: it reads nothing of theirs and writes
    /// nothing into them.
    #[test]
    fn agent_memory_not_shared_with_a_tenant_is_its_own() {
        let base = 1u64 << 20;
        let mut m = Memory::new(false);
        m.register_in(AGENT, AGENT, base, 1 << 16, Access::ALL.tracked())
            .unwrap();
        m.shares.borrow_mut().grant(5, base, 4096);
        m.register_in(5, 5, base, 4096, Access::LOCAL.tracked())
            .unwrap();
        m.write_in(5, base, b"tenant five").unwrap();
        m.write_in(AGENT, base + 8192, b"agent's own").unwrap();
        // Tenant 6 maps tenant 5's slice and the agent's buffer by address.
        m.register_in(6, 6, base, 1 << 16, Access::LOCAL.tracked())
            .unwrap();
        assert_eq!(m.read_in(6, base, 11).unwrap(), vec![0; 11]);
        assert_eq!(m.read_in(6, base + 8192, 11).unwrap(), vec![0; 11]);
        m.write_in(6, base, b"XXXXXXXXXXX").unwrap();
        assert_eq!(m.read_in(5, base, 11).unwrap(), b"tenant five");
        assert_eq!(m.read_in(AGENT, base, 11).unwrap(), b"tenant five");
        // A share ends at its bounds: a region of tenant 5 reaching past it is private.
        m.write_in(AGENT, base + 4096, b"next").unwrap();
        m.register_in(5, 5, base + 4096, 4096, Access::LOCAL.tracked())
            .unwrap();
        assert_eq!(m.read_in(5, base + 4096, 4).unwrap(), vec![0; 4]);
    }
}
