//! The simulated RNIC seen through the verbs seam: what applications and middleware call.
//!
//! One `HostVerbs` serves one callback of one tenant. It enforces ownership (a tenant names only
//! the QPs, CQs and memory regions it created, as a process does with ibverbs), charges the
//! tenant's CPU under the cost model (the tenant's thread is busy meanwhile: `now()` advances
//! and its posts reach the NIC later), and collects what the world must do after the call.
//!
//! The cost model is `[host.cpu]` ([`CpuConfig`], at the end of this file).

use crate::api::ConfigError;
use crate::nic::{Effects, Nic, NicParams};
use braid_engine::Time;
use braid_verbs::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// What verbs calls asked of the world (carried out after the call returns).
#[derive(Default)]
pub struct HostSink {
    pub timers: Vec<(Time, u64)>,
    pub wakes: Vec<(TenantId, u64)>,
    pub effects: Effects,
}

/// Which tenant owns each resource of a host's NIC (ibverbs objects belong to a process).
#[derive(Debug, Default)]
pub struct Owners {
    /// By CQ number; `u32::MAX` = none.
    pub cq: Vec<TenantId>,
    /// By QP number.
    pub qp: Vec<TenantId>,
    /// By lkey.
    pub mr: HashMap<u32, TenantId>,
    /// Protection domains allocated with `alloc_pd`, by number. A tenant's default PD is not
    /// listed: its number is the tenant's id, below [`PD_BASE`], where allocated ones start.
    pub pd: HashMap<u32, TenantId>,
    /// PDs allocated so far on this host (numbers are never reused).
    pub pds_allocated: u32,
    /// A QP a middleware created inside an application's `create_qp`/`connect_qp` call -> the
    /// application's QP it serves (multipath layers); what measurements attribute its bytes to.
    pub family: HashMap<QpNum, QpNum>,
}

const NONE: TenantId = u32::MAX;

/// The first number of an allocated protection domain; tenants' default PDs are their ids.
pub const PD_BASE: u32 = 0x8000_0000;

impl Owners {
    fn set(v: &mut Vec<TenantId>, i: u32, t: TenantId) {
        let i = i as usize;
        if v.len() <= i {
            v.resize(i + 1, NONE);
        }
        v[i] = t;
    }
    pub fn cq_owner(&self, cq: CqId) -> Option<TenantId> {
        self.cq.get(cq as usize).copied().filter(|&t| t != NONE)
    }
    pub fn qp_owner(&self, qp: QpNum) -> Option<TenantId> {
        self.qp.get(qp as usize).copied().filter(|&t| t != NONE)
    }
    /// The application QP whose traffic `qp` carries: itself, or the one a middleware created it
    /// for.
    pub fn family_head(&self, qp: QpNum) -> QpNum {
        self.family.get(&qp).copied().unwrap_or(qp)
    }
}

/// A tenant's CPU: when its thread is free again, and what it has spent, by layer.
#[derive(Debug, Default, Clone)]
pub struct TenantCpu {
    pub free_at: Time,
    pub total_ps: u64,
    pub by_layer: BTreeMap<&'static str, u64>,
    pub posts: u64,
    pub polls: u64,
}

pub struct HostVerbs<'a> {
    pub nic: &'a mut Nic,
    pub params: &'a NicParams,
    pub caps: &'a Caps,
    pub cost: &'a CpuCost,
    /// When the callback started (the event's time, or later if the tenant's CPU was busy).
    pub start: Time,
    /// CPU time spent in this callback so far.
    pub spent: Time,
    /// Whether spent CPU time delays the tenant (`host.cpu.delay`); accounted either way.
    pub delay: bool,
    pub tenant: TenantId,
    pub owners: &'a mut Owners,
    pub cpu: &'a mut TenantCpu,
    pub sink: &'a mut HostSink,
    /// QPs created in this callback, in order (read by `world::facing`).
    pub created: &'a std::cell::RefCell<Vec<QpNum>>,
    /// The tenant's reserved QP numbers (a lazy flow sender), if any: a number pinned in it is
    /// the one the next `create_qp` creates (`nic/reserve.rs`).
    pub plan: Option<&'a braid_apps::QpPlan>,
}

impl HostVerbs<'_> {
    fn spend(&mut self, layer: &'static str, w: Work) {
        let ps = self.cost.ps(w);
        if ps == 0 {
            return;
        }
        if self.delay {
            self.spent += ps;
        }
        self.cpu.total_ps += ps;
        *self.cpu.by_layer.entry(layer).or_default() += ps;
    }
    fn own_qp(&self, qp: QpNum) -> Result<(), VerbsError> {
        match self.owners.qp_owner(qp) {
            Some(t) if t == self.tenant => Ok(()),
            _ => Err(VerbsError::NoSuchQp(qp)),
        }
    }
    fn own_cq(&self, cq: CqId) -> Result<(), VerbsError> {
        match self.owners.cq_owner(cq) {
            Some(t) if t == self.tenant => Ok(()),
            _ => Err(VerbsError::NoSuchCq(cq)),
        }
    }
    /// What a send WR names belongs to this tenant: the CQs and QPs of cross-channel WRs,
    /// the memory of its scatter-gather list.
    fn check_wr(&self, wr: &SendWr) -> Result<(), VerbsError> {
        match wr.op {
            SendOp::Wait { cq, .. } => self.own_cq(cq)?,
            SendOp::SendEnable { qp: t, .. } | SendOp::RecvEnable { qp: t, .. } => {
                self.own_qp(t)?
            }
            _ => {}
        }
        if !wr.inline {
            for s in &wr.sg_list {
                if s.length > 0 && self.owners.mr.get(&s.lkey) != Some(&self.tenant) {
                    return Err(VerbsError::BadKey(s.lkey));
                }
            }
        }
        Ok(())
    }
    /// The host-wide number of this tenant's protection domain `pd`.
    fn pd(&self, pd: PdId) -> Result<u32, VerbsError> {
        if pd == DEFAULT_PD {
            debug_assert!(self.tenant < PD_BASE);
            return Ok(self.tenant);
        }
        match self.owners.pd.get(&pd) {
            Some(&t) if t == self.tenant => Ok(pd),
            _ => Err(VerbsError::InvalidArgument(
                "pd: no such protection domain of this tenant (alloc_pd)",
            )),
        }
    }
    /// Whether `[addr, addr + len)` lies in a region of this tenant that keeps its bytes.
    fn tracked_range(&self, addr: u64, len: u64) -> Result<(), VerbsError> {
        let mut mine = self
            .nic
            .mem
            .regions_holding(self.tenant, addr, len)
            .peekable();
        if mine.peek().is_none() {
            return Err(VerbsError::InvalidArgument(
                "address range outside this tenant's registered memory",
            ));
        }
        if mine.any(|(_, tracked)| tracked) {
            Ok(())
        } else {
            Err(VerbsError::Unsupported(
                "memory contents are not tracked: register the region with Access::track (or set nic.data_check)",
            ))
        }
    }
}

impl Verbs for HostVerbs<'_> {
    fn now(&self) -> u64 {
        self.start + self.spent
    }
    /// A host's primary address is its node id (what packets carry).
    fn local_host(&self) -> u32 {
        self.nic.host
    }
    fn caps(&self) -> &Caps {
        self.caps
    }
    fn tenant(&self) -> TenantId {
        self.tenant
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        self.spend("verbs", Work::Control);
        let cq = self.nic.create_cq(depth);
        Owners::set(&mut self.owners.cq, cq, self.tenant);
        Ok(cq)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.own_cq(cq)?;
        self.nic.destroy_cq(cq)?;
        Owners::set(&mut self.owners.cq, cq, NONE);
        Ok(())
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.own_cq(cq)?;
        self.nic.req_notify_cq(cq)
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        self.own_cq(init.send_cq)?;
        self.own_cq(init.recv_cq)?;
        let pd = self.pd(init.pd)?;
        if init.is_cross_channel() && !self.caps.cross_channel {
            return Err(VerbsError::Unsupported(
                "cross-channel QPs (nic.cross_channel = false)",
            ));
        }
        // A reserved QP's creation was accounted when its numbers were reserved
        // (`lazy_flows::reserve_at_start`).
        let qp = match self.plan.and_then(|p| p.pin.get().map(|n| (p, n))) {
            Some((p, n)) if !p.holds(n) => {
                return Err(VerbsError::InvalidArgument(
                    "a pinned QP number outside the tenant's reservation",
                ))
            }
            Some((_, n)) => self.nic.create_qp_at(init, self.params, n)?,
            None => {
                self.spend("verbs", Work::Control);
                self.nic.create_qp(init, self.params)?
            }
        };
        self.nic.set_qp_domain(qp, self.tenant, pd);
        Owners::set(&mut self.owners.qp, qp, self.tenant);
        self.created.borrow_mut().push(qp);
        Ok(qp)
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        self.own_qp(qp)?;
        if !self.plan.is_some_and(|p| p.holds(qp)) {
            self.spend("verbs", Work::Control);
        }
        self.nic.connect_qp(qp, remote)
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        self.own_qp(qp)?;
        self.spend("verbs", Work::Control);
        self.nic
            .modify_qp(qp, m, self.params, &mut self.sink.effects)
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        self.own_qp(qp)?;
        self.nic.query_qp(qp)
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.own_qp(qp)?;
        self.nic.destroy_qp(qp, &mut self.sink.effects)?;
        Owners::set(&mut self.owners.qp, qp, NONE);
        Ok(())
    }
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError> {
        self.reg_mr_in(DEFAULT_PD, addr, len, access)
    }
    /// The region is in this tenant's address space: the same addresses registered by another
    /// tenant are other bytes.
    fn reg_mr_in(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let pd = self.pd(pd)?;
        self.spend("verbs", Work::Control);
        let mr = self
            .nic
            .mem
            .register_in(self.tenant, pd, addr, len, access)?;
        self.owners.mr.insert(mr.lkey, self.tenant);
        Ok(mr)
    }
    fn alloc_pd(&mut self) -> Result<PdId, VerbsError> {
        self.spend("verbs", Work::Control);
        let pd = PD_BASE
            .checked_add(self.owners.pds_allocated)
            .filter(|&n| n != u32::MAX)
            .ok_or(VerbsError::Unsupported("protection domains exhausted"))?;
        self.owners.pds_allocated += 1;
        self.owners.pd.insert(pd, self.tenant);
        Ok(pd)
    }
    fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        if pd == DEFAULT_PD {
            return Err(VerbsError::InvalidState(
                "the default protection domain lives as long as the tenant",
            ));
        }
        let n = self.pd(pd)?;
        if self.nic.pd_in_use(n) {
            return Err(VerbsError::InvalidState(
                "protection domain still used by a QP or memory region (EBUSY)",
            ));
        }
        self.owners.pd.remove(&n);
        Ok(())
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        if self.owners.mr.get(&mr.lkey) != Some(&self.tenant) {
            return Err(VerbsError::BadKey(mr.lkey));
        }
        self.nic.mem.deregister(mr)?;
        self.owners.mr.remove(&mr.lkey);
        Ok(())
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.own_qp(qp)?;
        self.check_wr(&wr)?;
        self.spend("verbs", Work::Post);
        self.cpu.posts += 1;
        let at = self.now();
        self.nic
            .post_send(qp, wr, at, self.params, &mut self.sink.effects)
    }
    /// One call and one doorbell: the provider writes every WQE, then rings once, so the CPU
    /// cost is [`Work::PostList`] and the NIC sees all of the list at the same moment (when the
    /// tenant's thread has built it). Posted in order up to the first refused WR.
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        if wrs.is_empty() {
            return Ok(());
        }
        self.own_qp(qp).map_err(|error| BadWr { index: 0, error })?;
        self.spend("verbs", Work::PostList(wrs.len() as u32));
        self.cpu.posts += 1;
        let at = self.now();
        for (index, wr) in wrs.into_iter().enumerate() {
            self.check_wr(&wr)
                .and_then(|()| {
                    self.nic
                        .post_send(qp, wr, at, self.params, &mut self.sink.effects)
                })
                .map_err(|error| BadWr { index, error })?;
        }
        Ok(())
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.own_qp(qp)?;
        for s in &wr.sg_list {
            if s.length > 0 && self.owners.mr.get(&s.lkey) != Some(&self.tenant) {
                return Err(VerbsError::BadKey(s.lkey));
            }
        }
        self.spend("verbs", Work::Post);
        self.cpu.posts += 1;
        self.nic.post_recv(qp, wr, &mut self.sink.effects)
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        if self.own_cq(cq).is_err() {
            return 0;
        }
        let n = self.nic.poll_cq(cq, max, out);
        self.spend("verbs", Work::Poll(n as u32));
        self.cpu.polls += 1;
        n
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.sink.timers.push((at, token));
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.sink.wakes.push((tenant, token));
    }
    fn charge_as(&mut self, layer: &'static str, work: Work) {
        self.spend(layer, work);
    }
    fn write_local(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.tracked_range(addr, data.len() as u64)?;
        self.spend("verbs", Work::Copy(data.len() as u64));
        self.nic.mem.write_in(self.tenant, addr, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        self.tracked_range(addr, len)?;
        self.nic.mem.read_in(self.tenant, addr, len)
    }
}

/// `[host]`: the hosts' CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields, default)]
pub struct HostConfig {
    pub cpu: CpuConfig,
}

/// `[host.cpu]`: what verbs calls and middleware work cost a tenant's thread (nanoseconds), and
/// whether that time delays the tenant. Defaults (UCX's cost model): docs/middleware.md, "CPU cost".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CpuConfig {
    /// One post_send / post_recv call (a doorbell).
    pub post_ns: f64,
    /// One poll_cq call.
    pub poll_ns: f64,
    /// Each completion a poll returns.
    pub poll_cqe_ns: f64,
    /// Each work request a middleware builds (splits, injects).
    pub wr_build_ns: f64,
    /// Copy bandwidth in GB/s.
    pub copy_gbps: f64,
    /// Create/connect/modify/register calls.
    pub control_ns: f64,
    /// The tenant's thread is busy for the time it spends: its posts reach the NIC later. With
    /// false (the default, so that the calibrated anchors stay as they were), CPU time is only
    /// accounted and reported.
    pub delay: bool,
}

impl Default for CpuConfig {
    fn default() -> Self {
        let c = braid_verbs::CpuCost::default();
        CpuConfig {
            post_ns: c.post_ns,
            poll_ns: c.poll_ns,
            poll_cqe_ns: c.poll_cqe_ns,
            wr_build_ns: c.wr_build_ns,
            copy_gbps: c.copy_bytes_per_ns,
            control_ns: c.control_ns,
            delay: false,
        }
    }
}

impl CpuConfig {
    pub fn cost(&self) -> braid_verbs::CpuCost {
        braid_verbs::CpuCost {
            post_ns: self.post_ns,
            poll_ns: self.poll_ns,
            poll_cqe_ns: self.poll_cqe_ns,
            wr_build_ns: self.wr_build_ns,
            copy_bytes_per_ns: self.copy_gbps,
            control_ns: self.control_ns,
        }
    }
}

impl HostConfig {
    /// Range checks of `[host]` (keys relative to it).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.cpu.validate().map_err(|e| e.nested("cpu"))
    }
}

impl CpuConfig {
    /// Range checks of `[host.cpu]` (keys relative to it).
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (k, v) in [
            ("post_ns", self.post_ns),
            ("poll_ns", self.poll_ns),
            ("poll_cqe_ns", self.poll_cqe_ns),
            ("wr_build_ns", self.wr_build_ns),
            ("control_ns", self.control_ns),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ConfigError::new(k, "expected nanoseconds >= 0"));
            }
        }
        if !(self.copy_gbps > 0.0) {
            return Err(ConfigError::new(
                "copy_gbps",
                "expected a bandwidth in GB/s > 0",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    /// The defaults (UCX's cost model) pass; each bad value is named under `[host]`.
    #[test]
    fn cpu_costs_are_checked_and_named() {
        assert_eq!(HostConfig::default().validate(), Ok(()));
        let mut h = HostConfig::default();
        h.cpu.poll_ns = -1.0;
        assert_eq!(
            h.validate().unwrap_err().under("host").path,
            "host.cpu.poll_ns"
        );
        let mut h = HostConfig::default();
        h.cpu.copy_gbps = 0.0;
        assert_eq!(h.validate().unwrap_err().key, "cpu.copy_gbps");
    }
}
