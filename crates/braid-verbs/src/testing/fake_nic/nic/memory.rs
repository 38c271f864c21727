//! Whose bytes a tenant's address names, and how many regions it may register: the fake NIC's
//! half of the rules braid-sim's `memory.rs` keeps, with the same meaning.
//!
//! Shared memory: the host agent shares parts of its memory with tenants explicitly, one grant
//! per tenant and range ([`AgentShares`], handed to mechanisms through
//! [`HostCtx::agent_shares`]). A tenant's region that lies inside one of the agent's regions
//! and inside a grant for that tenant, when it is registered, maps the agent's bytes (a
//! shared-memory segment mapped into that one process). Anywhere else the same addresses are
//! the tenant's own memory, so a tenant reaches another tenant's part of the agent's memory by
//! no address. [`super::super::NetConfig::host_memory`] (one address space per host) overrides
//! all of this.
//!
//! Registration limits: ibv_reg_mr fails with ENOMEM when the device's memory-region table is
//! full (`max_mr`), or when the tenant's quota is used up: the RDMA cgroup's `hca_object` count
//! and RLIMIT_MEMLOCK's pinned bytes. The host agent's own registrations count towards the
//! device's table only.

use super::*;

/// What `ibv_devinfo -v` reports as `max_mr` on mlx5 devices (ConnectX-4 to 7): 2^24 regions
/// (quoted in openucx/ucx issues 5291 and 10317; braid-sim's `nic.max_mr` default).
pub const MLX5_MAX_MR: u64 = 1 << 24;

/// Registration limits of a fake NIC, each 0 for unlimited (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrLimits {
    /// Regions the NIC holds at once, every tenant's and the agent's together.
    pub max_mr: u64,
    /// Regions one tenant (not the agent) holds at once.
    pub tenant_max_mr: u64,
    /// Bytes one tenant (not the agent) has registered at once.
    pub tenant_max_pinned: u64,
}

impl Default for MrLimits {
    fn default() -> Self {
        MrLimits {
            max_mr: MLX5_MAX_MR,
            tenant_max_mr: 0,
            tenant_max_pinned: 0,
        }
    }
}

impl FakeNic {
    /// ibv_reg_mr's ENOMEM for `len` more bytes of `tenant`'s, if a limit forbids them.
    pub(super) fn check_mr_limits(&self, tenant: TenantId, len: u64) -> Result<(), VerbsError> {
        let l = self.mr_limits;
        if l.max_mr > 0 && self.mrs.len() as u64 >= l.max_mr {
            return Err(VerbsError::NoMemory(
                "the NIC's memory-region table is full (max_mr)",
            ));
        }
        if tenant == AGENT {
            return Ok(());
        }
        let (mut count, mut pinned) = (0u64, 0u64);
        for m in self.mrs.values().filter(|m| m.owner == tenant) {
            count += 1;
            pinned = pinned.saturating_add(m.len);
        }
        if l.tenant_max_mr > 0 && count >= l.tenant_max_mr {
            return Err(VerbsError::NoMemory(
                "the tenant's memory-region quota is used up (tenant_max_mr)",
            ));
        }
        if l.tenant_max_pinned > 0 && pinned.saturating_add(len) > l.tenant_max_pinned {
            return Err(VerbsError::NoMemory(
                "the tenant's pinned-memory limit would be exceeded (tenant_max_pinned)",
            ));
        }
        Ok(())
    }

    /// Whether a region of `tenant` over `[addr, addr + len)`, registered now, maps the host
    /// agent's memory: the agent registered memory holding the range and granted it to
    /// `tenant`.
    pub(super) fn maps_agent_memory(&self, tenant: TenantId, addr: u64, len: u64) -> bool {
        tenant != AGENT
            && self.shares.borrow().covers(tenant, addr, len)
            && self
                .mrs
                .values()
                .any(|m| m.owner == AGENT && m.covers(addr, len))
    }

    /// The address space holding `tenant`'s bytes at `[addr, addr + len)`: the host's (one
    /// address space per host), the agent's (inside a region of the tenant's that maps shared
    /// memory), or the tenant's own.
    pub(super) fn space_at(&self, tenant: TenantId, addr: u64, len: u64) -> TenantId {
        let shared = || {
            self.mrs
                .values()
                .any(|m| m.owner == tenant && m.shared && m.covers(addr, len))
        };
        if self.host_memory || tenant == AGENT || shared() {
            AGENT
        } else {
            tenant
        }
    }

    /// Registrations refused by a limit (what braid-sim counts as `mr_refused`).
    pub fn mr_refused(&self) -> u64 {
        self.mr_refused
    }

    /// The host's agent-memory grants (what [`HostCtx::agent_shares`] hands mechanisms).
    pub fn agent_shares(&self) -> ShareSlot {
        self.shares.clone()
    }
}
