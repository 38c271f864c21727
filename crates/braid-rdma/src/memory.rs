//! The memory behind registered regions on a real NIC.
//!
//! The verbs seam lets applications choose the addresses of their regions (`reg_mr(addr, len)`)
//! as they do in the simulator, where memory is an address space of its own. On a real NIC the
//! backend allocates real memory for each range and registers it with `ibv_reg_mr_iova`, the
//! range's seam address as its I/O virtual address: the NIC then resolves every local SGE and
//! every remote address in seam addresses, and the bytes live in the allocation. Two
//! registrations of the same range (or of a range inside a registered one) share its bytes, as
//! two `ibv_reg_mr` of one buffer do.
//!
//! Each tenant has memory of its own; the host agent's is shared with a tenant only where the
//! agent granted it ([`braid_verbs::AgentShares`], DRUM's slice of its global buffer for one
//! tenant): see [`space_of`].

use braid_verbs::{AgentShares, TenantId, AGENT};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;

const ALIGN: usize = 4096;

struct Segment {
    len: u64,
    ptr: *mut u8,
    refs: u32,
}

impl Segment {
    fn layout(len: u64) -> Layout {
        Layout::from_size_align((len as usize).max(1), ALIGN).expect("segment layout")
    }
}

/// Real memory for seam address ranges.
#[derive(Default)]
pub struct Memory {
    segs: BTreeMap<u64, Segment>,
}

impl Memory {
    /// The segment (start) holding all of `[addr, addr + len)`.
    fn holding(&self, addr: u64, len: u64) -> Option<u64> {
        let (&start, s) = self.segs.range(..=addr).next_back()?;
        (addr + len <= start + s.len).then_some(start)
    }

    /// Real memory for `[addr, addr + len)`, allocated (zeroed) unless a registered range
    /// already holds it; counts one more registration on it. A range that overlaps registered
    /// memory without lying inside one registration is refused.
    pub fn acquire(&mut self, addr: u64, len: u64) -> Result<*mut u8, &'static str> {
        if addr.checked_add(len).is_none() || len > isize::MAX as u64 {
            return Err("address range overflows");
        }
        if let Some(start) = self.holding(addr, len) {
            let s = self.segs.get_mut(&start).expect("found");
            s.refs += 1;
            // SAFETY: addr - start + len <= s.len, inside the allocation.
            return Ok(unsafe { s.ptr.add((addr - start) as usize) });
        }
        let end = addr + len;
        let overlaps = self
            .segs
            .range(..end)
            .next_back()
            .is_some_and(|(&s, seg)| s + seg.len > addr);
        if overlaps {
            return Err(
                "the range overlaps registered memory without lying inside one registered range",
            );
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(Segment::layout(len)) };
        if ptr.is_null() {
            return Err("out of memory");
        }
        self.segs.insert(addr, Segment { len, ptr, refs: 1 });
        Ok(ptr)
    }

    /// One registration of `[addr, addr + len)` fewer; the memory is freed with the last one.
    pub fn release(&mut self, addr: u64, len: u64) {
        let Some(start) = self.holding(addr, len) else {
            return;
        };
        let s = self.segs.get_mut(&start).expect("found");
        s.refs -= 1;
        if s.refs == 0 {
            let s = self.segs.remove(&start).expect("found");
            // SAFETY: allocated in acquire with this layout.
            unsafe { dealloc(s.ptr, Segment::layout(s.len)) };
        }
    }

    /// The real address of `[addr, addr + len)`, if registered memory holds it.
    pub fn real(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let start = self.holding(addr, len)?;
        // SAFETY: inside the allocation (holding checked the bounds).
        Some(unsafe { self.segs[&start].ptr.add((addr - start) as usize) })
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), &'static str> {
        let p = self
            .real(addr, data.len() as u64)
            .ok_or("address range outside registered memory")?;
        // SAFETY: p..p+len lies inside one allocation we own.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    pub fn read(&self, addr: u64, len: u64) -> Result<Vec<u8>, &'static str> {
        let p = self
            .real(addr, len)
            .ok_or("address range outside registered memory")?;
        let mut v = vec![0u8; len as usize];
        // SAFETY: as in write.
        unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len as usize) };
        Ok(v)
    }
}

/// Whose memory a registration of `[addr, addr + len)` by `tenant` maps: the host agent's
/// (shared memory, `agent` its registered memory) when the agent's memory holds the range and
/// the agent granted it to `tenant`; otherwise the tenant's own. A range the agent granted to
/// another tenant, or never granted, is the tenant's private memory at the same addresses.
pub fn space_of(
    tenant: TenantId,
    addr: u64,
    len: u64,
    agent: Option<&Memory>,
    shares: &AgentShares,
) -> TenantId {
    let shared = tenant != AGENT
        && shares.covers(tenant, addr, len)
        && agent.is_some_and(|m| m.real(addr, len).is_some());
    if shared {
        AGENT
    } else {
        tenant
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        for (_, s) in std::mem::take(&mut self.segs) {
            // SAFETY: allocated in acquire with this layout.
            unsafe { dealloc(s.ptr, Segment::layout(s.len)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_inside_a_registration_share_its_bytes() {
        let mut m = Memory::default();
        let a = m.acquire(0x1000, 100).unwrap();
        let b = m.acquire(0x1010, 10).unwrap();
        assert_eq!(b as usize - a as usize, 0x10);
        m.write(0x1010, b"hello").unwrap();
        assert_eq!(m.read(0x1000 + 16, 5).unwrap(), b"hello");
        // Partial overlap is refused; outside ranges are not readable.
        assert!(m.acquire(0x1050, 100).is_err());
        assert!(m.read(0x1060, 8).is_err());
        // Freed with the last registration only.
        m.release(0x1010, 10);
        assert_eq!(m.read(0x1010, 5).unwrap(), b"hello");
        m.release(0x1000, 100);
        assert!(m.read(0x1010, 5).is_err());
        // A fresh registration is zeroed.
        m.acquire(0x1000, 16).unwrap();
        assert_eq!(m.read(0x1000, 16).unwrap(), vec![0; 16]);
    }

    #[test]
    fn a_tenant_maps_agent_memory_only_where_granted_to_it() {
        let mut agent = Memory::default();
        agent.acquire(0x10_000, 8192).unwrap();
        let mut shares = AgentShares::default();
        shares.grant(1, 0x10_000, 4096);
        shares.grant(2, 0x11_000, 4096);
        let at = |t, addr, len, s: &AgentShares| space_of(t, addr, len, Some(&agent), s);
        // Its own grant: the agent's bytes.
        assert_eq!(at(1, 0x10_000, 4096, &shares), AGENT);
        assert_eq!(at(2, 0x11_100, 16, &shares), AGENT);
        // Another tenant's grant, or across two grants: its own memory.
        assert_eq!(at(1, 0x11_000, 4096, &shares), 1);
        assert_eq!(at(2, 0x10_000, 16, &shares), 2);
        assert_eq!(at(1, 0x10_000, 8192, &shares), 1);
        // No agent memory behind a grant: its own.
        shares.grant(1, 0x40_000, 4096);
        assert_eq!(at(1, 0x40_000, 4096, &shares), 1);
        assert_eq!(space_of(1, 0x10_000, 16, None, &shares), 1);
        // Revoked: its own again (for registrations made afterwards).
        shares.revoke(1, 0x10_000, 4096);
        assert_eq!(at(1, 0x10_000, 4096, &shares), 1);
        // The agent's own registrations are the agent's.
        assert_eq!(at(AGENT, 0x10_000, 16, &shares), AGENT);
    }
}
