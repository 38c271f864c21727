//! Memory regions carved from the host's tracked memory, and the tenants' local reads and
//! writes of it (checked against what each tenant registered).

use super::*;

impl Nic {
    /// Registers `[addr, addr + len)` of tenant `t`'s address space in its protection domain
    /// `pd` (an ibv_pd of its own).
    pub fn reg_mr(
        &mut self,
        t: TenantId,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let ibv_pd = self.ibv_pd(t, pd)?;
        // Agent memory only where the agent granted it to this tenant (`memory::space_of`).
        let space =
            crate::memory::space_of(t, addr, len, self.mem.get(&AGENT), &self.shares.borrow());
        let real = self
            .mem
            .entry(space)
            .or_default()
            .acquire(addr, len)
            .map_err(VerbsError::InvalidArgument)?;
        let mut flags = 0;
        if access.local_write {
            flags |= IBV_ACCESS_LOCAL_WRITE;
        }
        if access.remote_write {
            flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
        }
        if access.remote_read {
            flags |= IBV_ACCESS_REMOTE_READ;
        }
        // SAFETY: real..real+len is memory we own; the IOVA is the seam address.
        let mr = unsafe {
            sys::ibv_reg_mr_iova(
                ibv_pd.as_ptr(),
                real as *mut libc::c_void,
                len.max(1) as usize,
                addr,
                flags as i32,
            )
        };
        let Some(mr) = NonNull::new(mr) else {
            self.mem.entry(space).or_default().release(addr, len);
            return Err(VerbsError::InvalidArgument("ibv_reg_mr_iova failed"));
        };
        // SAFETY: a valid MR.
        let (lkey, rkey) = unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
        self.mrs.insert(
            lkey,
            Mr {
                mr,
                owner: t,
                pd,
                space,
                addr,
                len,
            },
        );
        Ok(MemoryRegion {
            addr,
            len,
            lkey,
            rkey,
        })
    }

    pub fn dereg_mr(&mut self, t: TenantId, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.own_lkey(t, mr.lkey)?;
        let m = self.mrs.remove(&mr.lkey).expect("owned");
        // SAFETY: an MR we registered.
        unsafe { sys::ibv_dereg_mr(m.mr.as_ptr()) };
        self.mem.entry(m.space).or_default().release(m.addr, m.len);
        Ok(())
    }

    pub fn write_local(&mut self, t: TenantId, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        let space = self.owns_range(t, addr, data.len() as u64)?;
        self.mem
            .entry(space)
            .or_default()
            .write(addr, data)
            .map_err(VerbsError::InvalidArgument)
    }

    pub fn read_local(&self, t: TenantId, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        let space = self.owns_range(t, addr, len)?;
        self.mem
            .get(&space)
            .ok_or("address outside registered memory")
            .and_then(|m| m.read(addr, len))
            .map_err(VerbsError::InvalidArgument)
    }

    /// Whose memory holds `[addr, addr + len)` of tenant `t` (which must have registered it):
    /// its own, or the host agent's shared memory.
    pub(super) fn owns_range(
        &self,
        t: TenantId,
        addr: u64,
        len: u64,
    ) -> Result<TenantId, VerbsError> {
        self.mrs
            .values()
            .find(|m| m.owner == t && addr >= m.addr && addr + len <= m.addr + m.len)
            .map(|m| m.space)
            .ok_or(VerbsError::InvalidArgument(
                "address range outside this tenant's registered memory",
            ))
    }
}
