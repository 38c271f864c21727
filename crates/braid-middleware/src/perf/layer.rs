//! PeRF's per-tenant layer: the artifact's patched libmlx5 in each process.
//!
//! Every QP of the tenant gets a software queue ([`super::queue::QpQueue`]); what the
//! application posts goes through it to the NIC:
//! - **LMSE**: while a delay-sensitive or message-intensive tenant is active on the host, a large
//!   WRITE or READ is cut into `sub_wr` sub-WRs and after every `sub_wr` bytes of large-message
//!   data the layer posts `sub_wr / zero_wait_unit` 0_WAITs (WAIT on the layer's private CQ with
//!   count 0: it completes at once, but takes a turn of the NIC's WQE scheduler). Alone, a WR goes
//!   down whole (work-conserving).
//! - **MQSE** (software PAUSE/RESUME): only as many of the tenant's QPs as the agent allows post;
//!   a paused QP's WRs wait in its software queue until it gets a slot; slots rotate after
//!   `rotate_wrs` WRs, `rotate_bytes` bytes or `release_after`, or when their holder has nothing
//!   queued.
//! - the token bucket (`rate`, `burst`), and the window of large-message bytes in the NIC
//!   (`sq_bytes`) that keeps splitting prompt.
//!
//! The layer sees the NIC's completions first: on a completion event of a CQ it polls the CQ
//! itself, keeps what the application should see (one completion per signaled application WR,
//! with its `wr_id`) and refills the send queues; the application's `poll_cq` is served from what
//! it kept, and its arming of the CQ is honoured (one event per arming, for new completions).

use super::bucket::Bucket;
use super::classify::Class;
use super::hwpause::{HwPause, Posts};
use super::mqse::Slots;
use super::queue::{opcode_of, splittable, AppMeta, HwEntry, QpQueue};
use super::state::{HostState, UNGATED};
use super::PerfConfig;
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

mod hw;
mod lmse;
mod read;

use hw::post_ctrl;

/// The wake token the agent sends a layer when its tenant's allowance changed.
pub const WAKE_RESCHEDULE: u64 = 0x5045_5246_0001;
/// A layer's wake to itself: completions it made (flushes) wait to be announced.
const WAKE_NOTIFY: u64 = 0x5045_5246_0002;
/// Timer: re-check slots (rotation) and the token bucket.
const TIMER_RESCHEDULE: u64 = 1;

#[derive(Debug, Default)]
struct CqState {
    /// What the application sees of it.
    app: VirtualCq,
    /// The layer armed the CQ below.
    below_armed: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    sub_wrs: u64,
    zero_waits: u64,
    hidden: u64,
    split_msgs: u64,
    bucket_waits: u64,
    converted: u64,
    served: u64,
    read_timeouts: u64,
}

/// The layer PeRF puts in every tenant's stack.
pub struct PerfLayer {
    cfg: PerfConfig,
    tenant: TenantId,
    host: Rc<RefCell<HostState>>,
    qps: BTreeMap<QpNum, QpQueue>,
    /// The QPs with something left to post (`QpQueue::has_work`): what a refill visits, so
    /// that its cost follows the QPs with work, not all of the tenant's.
    work: BTreeSet<QpNum>,
    cqs: BTreeMap<CqId, CqState>,
    /// The CQ 0_WAITs wait on: nothing ever completes on it.
    dummy_cq: Option<CqId>,
    /// MQSE: which QPs may post (software PAUSE).
    mqse: Slots,
    /// MQSE in hardware (`hw_pause`): the managed loopback QP's rotation.
    hwp: Option<HwPause>,
    bucket: Option<Bucket>,
    timer_at: Option<u64>,
    c: Counters,
    /// The tenant's registrations with their protection domains (a converted READ's key is
    /// checked against them).
    mrs: Vec<(MemoryRegion, Access, PdId)>,
    /// The layer's remotely writable regions over READ destinations, by (addr, len), with how
    /// many outstanding converted READs use each (deregistered when the last one ends).
    dest_mrs: BTreeMap<DestKey, (MemoryRegion, u32)>,
    /// Converted READs waiting for their holder's answer, by request id.
    remote_ids: BTreeMap<u32, RemoteRead>,
    /// Each QP's `retry_cnt` (how long a converted READ waits for its holder).
    retry_cnt: BTreeMap<QpNum, u8>,
    /// Each QP's protection domain (the only one its converted READs may use, at either end).
    qp_pd: BTreeMap<QpNum, PdId>,
}

/// A READ destination's region: (address, length, protection domain).
type DestKey = (u64, u64, PdId);

/// A converted READ the holder has not answered yet.
#[derive(Debug, Clone, Copy)]
struct RemoteRead {
    qpn: QpNum,
    /// When the requester gives up (RetryExceeded), as the READ's transport would.
    deadline: u64,
    /// Its destination region's key in `dest_mrs`.
    dest: DestKey,
}

impl PerfLayer {
    pub fn new(cfg: PerfConfig, tenant: TenantId, host: Rc<RefCell<HostState>>) -> Self {
        let bucket = cfg.rate.map(|r| Bucket {
            rate_bps: r.0 as f64,
            burst: cfg.burst.0 as f64,
            level: cfg.burst.0 as f64,
            at: 0,
        });
        PerfLayer {
            cfg,
            tenant,
            host,
            qps: BTreeMap::new(),
            work: BTreeSet::new(),
            cqs: BTreeMap::new(),
            dummy_cq: None,
            mqse: Slots::default(),
            hwp: None,
            bucket,
            timer_at: None,
            c: Counters::default(),
            mrs: Vec::new(),
            dest_mrs: BTreeMap::new(),
            remote_ids: BTreeMap::new(),
            retry_cnt: BTreeMap::new(),
            qp_pd: BTreeMap::new(),
        }
    }

    fn dummy_cq(&mut self, below: &mut dyn Verbs) -> Result<CqId, VerbsError> {
        if let Some(c) = self.dummy_cq {
            return Ok(c);
        }
        let c = below.create_cq(1)?;
        self.dummy_cq = Some(c);
        Ok(c)
    }

    /// Publishes a QP's state (and the tenant's) for the agent.
    fn publish(&self, qpn: QpNum, posted_at: Option<u64>) {
        let Some(q) = self.qps.get(&qpn) else { return };
        let mut h = self.host.borrow_mut();
        h.tenant_mut(self.tenant).publish_qp(
            qpn,
            posted_at,
            q.outstanding,
            q.out_bytes,
            q.sw.len() as u32,
        );
    }

    /// Whether `qpn` may post now (MQSE), taking or rotating a slot if it can. QPs whose turn
    /// ended get a signaled 0_WAIT behind their work (the PAUSE mark), whose completion tells
    /// the layer their slot is free.
    fn may_post(&mut self, below: &mut dyn Verbs, qpn: QpNum, now: u64) -> bool {
        let (mut allowed, paused) = {
            let h = self.host.borrow();
            h.tenants
                .get(&self.tenant)
                .map_or((UNGATED, false), |t| (t.allowed_qps, t.bw_paused))
        };
        if self.hwp.is_some() {
            // The limit is enforced in the NIC (`hwpause`); only the tenant-wide pause of
            // bandwidth tenants taking turns stays in software.
            allowed = UNGATED;
        }
        let ok = self
            .mqse
            .may_post(qpn, now, allowed, paused, &mut self.qps, &self.cfg);
        if let Some(at) = self.mqse.timer.take() {
            self.rearm_timer_at(at);
        }
        for q in std::mem::take(&mut self.mqse.new_draining) {
            self.mark_pause(below, q);
        }
        ok
    }

    /// Posts a signaled 0_WAIT behind a paused QP's work unless a signaled WR already ends it.
    fn mark_pause(&mut self, below: &mut dyn Verbs, qpn: QpNum) {
        let Some(cq) = self.dummy_cq else { return };
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if q.hw.back().is_none_or(|e| e.signaled) {
            return;
        }
        let seq = q.next_seq;
        let wr = SendWr::new(seq, SendOp::Wait { cq, count: 0 }, vec![]);
        below.charge(Work::WrBuilt(1));
        if below.post_send(qpn, wr).is_ok() {
            let ord = q.next_ord.saturating_sub(1);
            q.posted(HwEntry {
                seq,
                ord,
                last: false,
                large_bytes: 0,
                signaled: true,
                data: false,
            });
            self.c.zero_waits += 1;
        }
    }

    /// A timer to come back (the stack routes it to this layer).
    fn rearm_timer_at(&mut self, at: u64) {
        self.timer_at = Some(self.timer_at.map_or(at, |t| t.min(at)));
    }

    fn flush_timer(&mut self, below: &mut dyn Verbs) {
        if let Some(at) = self.timer_at.take() {
            below.set_timer(at.max(below.now()), TIMER_RESCHEDULE);
        }
    }

    /// Keeps `work` in step with the QP's queue.
    fn sync_work(&mut self, qpn: QpNum) {
        if self.qps.get(&qpn).is_some_and(|q| q.has_work()) {
            self.work.insert(qpn);
        } else {
            self.work.remove(&qpn);
        }
    }

    /// Posts what the QP's software queue may post now. An error from posting the first part of
    /// application WR `first_of` is returned (the WR is taken back by the caller).
    fn refill(
        &mut self,
        below: &mut dyn Verbs,
        qpn: QpNum,
        first_of: Option<u64>,
    ) -> Result<(), VerbsError> {
        let r = self.refill_qp(below, qpn, first_of);
        self.sync_work(qpn);
        r
    }

    /// Refills the QPs that may post (slots freed by one may go to another). Ungated, that is
    /// every QP with work. Gated (the agent limits the tenant's active QPs), only the slot
    /// holders and the first paused QP can post (the others wait their turn, `Slots`), so only
    /// they are visited, then the next first while the first gets a slot; every QP with work
    /// is visited once when gating starts, so that each joins the queue of paused QPs.
    fn refill_all(&mut self, below: &mut dyn Verbs) {
        self.hw_rotate(below);
        let gated = {
            let h = self.host.borrow();
            h.tenants
                .get(&self.tenant)
                .is_some_and(|t| t.allowed_qps != UNGATED || t.bw_paused)
        };
        if gated && self.mqse.gated() {
            for qpn in self.mqse.holders() {
                if self.work.contains(&qpn) {
                    let _ = self.refill(below, qpn, None);
                    self.publish(qpn, None);
                }
            }
            // The first paused QP, while each gets a slot (bounded by the QPs waiting).
            for _ in 0..self.mqse.waiting_len() {
                let Some(qpn) = self.mqse.first_waiting() else {
                    break;
                };
                if self.work.contains(&qpn) {
                    let _ = self.refill(below, qpn, None);
                    self.publish(qpn, None);
                } else {
                    // Nothing left to post: it leaves the queue on its next decision.
                    self.mqse.drop_waiting(qpn);
                    continue;
                }
                if self.mqse.first_waiting() == Some(qpn) {
                    break;
                }
            }
        } else {
            let order: Vec<QpNum> = self.work.iter().copied().collect();
            for qpn in order {
                if self.work.contains(&qpn) {
                    let _ = self.refill(below, qpn, None);
                    self.publish(qpn, None);
                }
            }
        }
        self.flush_timer(below);
        let cqs: Vec<CqId> = self.cqs.keys().copied().collect();
        for cq in cqs {
            self.arm_if_needed(below, cq);
        }
    }

    /// A completion made by the layer itself (a flush): queued for the application, announced
    /// by a wake to ourselves if it armed the CQ.
    fn deliver_local(&mut self, below: &mut dyn Verbs, cq: CqId, wc: WorkCompletion) {
        if self.cqs.entry(cq).or_default().app.push(wc) {
            below.wake(self.tenant, WAKE_NOTIFY);
        }
    }

    /// Polls `cq` below until it is empty, keeping what the application sees. Returns whether
    /// new application-visible completions arrived.
    fn drain(&mut self, below: &mut dyn Verbs, cq: CqId) -> bool {
        let mut raw = Vec::new();
        while below.poll_cq(cq, 64, &mut raw) > 0 {}
        if raw.is_empty() {
            return false;
        }
        let mut fresh = false;
        let mut touched = BTreeSet::new();
        for wc in raw {
            if wc.opcode == WcOpcode::SendEnable && wc.status == WcStatus::Success {
                if let Some(h) = self.hwp.as_mut() {
                    h.enable_ran(wc.qp_num);
                }
            }
            let is_recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvWithImm);
            let q = match self.qps.get_mut(&wc.qp_num) {
                Some(q) if !is_recv && q.send_cq == cq => q,
                _ => {
                    self.cqs.entry(cq).or_default().app.extend([wc]);
                    fresh = true;
                    continue;
                }
            };
            let failed = wc.status != WcStatus::Success;
            let mut apps = Vec::new();
            q.on_cqe(&wc, &mut apps);
            if apps.is_empty() {
                self.c.hidden += 1;
            } else {
                fresh = true;
                self.cqs.entry(cq).or_default().app.extend(apps);
            }
            if failed && q.failed && q.has_work() {
                let mut out = Vec::new();
                q.flush_sw(&mut out);
                fresh |= !out.is_empty();
                self.cqs.entry(cq).or_default().app.extend(out);
            }
            touched.insert(wc.qp_num);
        }
        for qpn in touched {
            if self.qps.get(&qpn).is_some_and(|q| q.failed) {
                // A failed QP's WAIT and SEND_ENABLE are flushed: hand its place on.
                self.hw_forget(below, qpn);
            }
            self.answer_served(below, qpn);
            // A converted READ refused by its holder fails the QP (once).
            if self
                .qps
                .get(&qpn)
                .is_some_and(|q| q.refused && !q.moved_to_error)
            {
                let out_before = self.cqs.get(&cq).map_or(0, |c| c.app.len());
                self.fail_if_refused(below, qpn);
                fresh |= self.cqs.get(&cq).map_or(0, |c| c.app.len()) > out_before;
            }
            self.sync_work(qpn);
            self.publish(qpn, None);
        }
        fresh
    }

    /// Keeps `cq` armed below while the application waits on it or the layer has work to refill
    /// on its completions (polling again after arming, as ibverbs requires).
    fn arm_if_needed(&mut self, below: &mut dyn Verbs, cq: CqId) -> bool {
        let mut fresh = false;
        loop {
            if self.cqs.get(&cq).is_some_and(|c| c.below_armed) {
                return fresh;
            }
            // (A QP may wait for another's completions: a slot held by a draining QP.)
            // Serving WRITEs (READ conversion) are answered on their completion.
            let need = self.cqs.get(&cq).is_some_and(|c| c.app.is_armed())
                || (!self.work.is_empty()
                    && self
                        .qps
                        .values()
                        .any(|q| q.send_cq == cq && q.hw_signaled > 0))
                || self.qps.values().any(|q| q.send_cq == cq && q.serving > 0);
            let c = self.cqs.entry(cq).or_default();
            if !need {
                return fresh;
            }
            if below.req_notify_cq(cq).is_err() {
                return fresh;
            }
            c.below_armed = true;
            if !self.drain(below, cq) {
                return fresh;
            }
            fresh = true;
        }
    }
}

impl Middleware for PerfLayer {
    fn name(&self) -> &'static str {
        "perf"
    }

    fn start(&mut self, below: &mut dyn Verbs) {
        let _ = self.dummy_cq(below);
        if self.cfg.hw_pause && below.caps().cross_channel {
            let _ = self.start_hw_pause(below);
        }
        if let Some(b) = self.bucket.as_mut() {
            b.at = below.now();
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let h = self.host.borrow();
        let t = h.tenants.get(&self.tenant);
        vec![
            ("sub_wrs", self.c.sub_wrs as f64),
            ("zero_waits", self.c.zero_waits as f64),
            ("split_msgs", self.c.split_msgs as f64),
            (
                "pauses",
                (self.mqse.pauses + self.hwp.as_ref().map_or(0, |h| h.pauses)) as f64,
            ),
            (
                "resumes",
                (self.mqse.resumes + self.hwp.as_ref().map_or(0, |h| h.resumes)) as f64,
            ),
            ("hidden", self.c.hidden as f64),
            ("bucket_waits", self.c.bucket_waits as f64),
            ("reads_converted", self.c.converted as f64),
            ("reads_served", self.c.served as f64),
            ("read_timeouts", self.c.read_timeouts as f64),
            ("class_changes", t.map_or(0.0, |t| t.class_changes as f64)),
            ("class", t.map_or(0.0, |t| t.class.code())),
            ("qp_limit", h.qp_limit as f64),
        ]
    }

    fn create_cq(&mut self, below: &mut dyn Verbs, depth: u32) -> Result<CqId, VerbsError> {
        // Room for the sub-WRs' and 0_WAITs' completions besides the application's.
        let cq = below.create_cq(depth.saturating_mul(2).max(256))?;
        self.cqs.insert(cq, CqState::default());
        Ok(cq)
    }

    fn destroy_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        below.destroy_cq(cq)?;
        self.cqs.remove(&cq);
        Ok(())
    }

    fn req_notify_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        if !self.cqs.contains_key(&cq) {
            return below.req_notify_cq(cq);
        }
        let c = self.cqs.get_mut(&cq).expect("checked");
        c.app.arm();
        if !c.below_armed {
            below.req_notify_cq(cq)?;
            c.below_armed = true;
        }
        Ok(())
    }

    fn create_qp(&mut self, below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        let mut i = init.clone();
        // 0_WAITs need a cross-channel QP; the queue holds the sub-WRs and 0_WAITs too.
        i.cross_channel = true;
        let per_window = (self.cfg.sq_bytes.0 / self.cfg.sub_wr.0 + 1)
            * (self.cfg.zero_waits_per_sub_wr() as u64 + 1);
        let mut depth = (init.max_send_wr as u64 + per_window + 64).min(u32::MAX as u64) as u32;
        let cap = below.caps().max_qp_wr;
        if cap > 0 {
            depth = depth.min(cap);
        }
        i.max_send_wr = depth.max(init.max_send_wr.min(if cap > 0 { cap } else { u32::MAX }));
        let qpn = below.create_qp(&i)?;
        self.dummy_cq(below)?;
        // The QP's list of 0_WAITs, built once (the artifact links its `dummy` array when the
        // QP is created) and posted whole after each sub-WR.
        below.charge(Work::WrBuilt(self.cfg.zero_waits_per_sub_wr()));
        self.qps.insert(
            qpn,
            QpQueue::new(
                qpn,
                init.send_cq,
                init.recv_cq,
                init.sq_sig_all,
                init.max_send_wr,
            ),
        );
        self.cqs.entry(init.send_cq).or_default();
        self.cqs.entry(init.recv_cq).or_default();
        self.retry_cnt.insert(qpn, init.retry_cnt);
        self.qp_pd.insert(qpn, init.pd);
        self.host.borrow_mut().tenant_mut(self.tenant).add_qp(qpn);
        Ok(qpn)
    }

    fn reg_mr(
        &mut self,
        below: &mut dyn Verbs,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let m = below.reg_mr(addr, len, access)?;
        self.mrs.push((m, access, DEFAULT_PD));
        Ok(m)
    }

    fn dereg_mr(&mut self, below: &mut dyn Verbs, mr: &MemoryRegion) -> Result<(), VerbsError> {
        below.dereg_mr(mr)?;
        self.mrs.retain(|(m, _, _)| m.lkey != mr.lkey);
        Ok(())
    }

    fn reg_mr_in(
        &mut self,
        below: &mut dyn Verbs,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let m = below.reg_mr_in(pd, addr, len, access)?;
        self.mrs.push((m, access, pd));
        Ok(m)
    }

    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        below.connect_qp(qp, remote)?;
        if let Some(q) = self.qps.get_mut(&qp) {
            q.peer = Some((remote.host, remote.qpn));
            // The agent connects to the peer's agent (if it runs PeRF) for READ conversion.
            let new = {
                let mut h = self.host.borrow_mut();
                h.read.enabled
                    && remote.host != below.local_host()
                    && h.read.wanted.insert(remote.host)
            };
            if new {
                below.wake(AGENT, crate::perf::read::WAKE_AGENT_READ);
            }
        }
        Ok(())
    }

    fn destroy_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<(), VerbsError> {
        below.destroy_qp(qp)?;
        // Its converted READs end with it (a late answer finds no owner).
        self.drop_remote_reads(below, qp);
        self.retry_cnt.remove(&qp);
        self.qp_pd.remove(&qp);
        self.qps.remove(&qp);
        self.hw_forget(below, qp);
        self.work.remove(&qp);
        self.mqse.forget(qp);
        let mut h = self.host.borrow_mut();
        h.tenant_mut(self.tenant).remove_qp(qp);
        Ok(())
    }

    fn modify_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        below.modify_qp(qp, m)?;
        if let Some(q) = self.qps.get_mut(&qp) {
            match m {
                QpModify::Error => {
                    q.failed = true;
                    let mut out = Vec::new();
                    q.flush_sw(&mut out);
                    let cq = q.send_cq;
                    for wc in out {
                        self.deliver_local(below, cq, wc);
                    }
                    self.hw_forget(below, qp);
                }
                QpModify::Reset => {
                    let (s, r, all, max) = (q.send_cq, q.recv_cq, q.sig_all, q.app_max_send_wr);
                    *q = QpQueue::new(qp, s, r, all, max);
                    // Its queued WAIT / SEND_ENABLE are gone with its queue.
                    self.hw_forget(below, qp);
                }
                QpModify::UdpSport(_) => {}
            }
            self.sync_work(qp);
            self.publish(qp, None);
        }
        Ok(())
    }

    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        let now = below.now();
        let large_msg = self.cfg.large_msg.0;
        let Some(q) = self.qps.get_mut(&qp) else {
            return below.post_send(qp, wr);
        };
        if q.failed {
            return Err(VerbsError::InvalidState("QP is in the error state"));
        }
        if q.app_outstanding() >= q.app_max_send_wr {
            return Err(VerbsError::QueueFull);
        }
        let bytes = wr.len();
        let data = wr.op.carries_data();
        let large = data && bytes >= large_msg;
        // Classification inputs: the EWMA of sizes and the sticky bandwidth flag.
        if data {
            let mut h = self.host.borrow_mut();
            let t = h.tenant_mut(self.tenant);
            t.avg_size = if t.avg_size == 0.0 {
                bytes as f64
            } else {
                0.5 * t.avg_size + 0.5 * bytes as f64
            };
            // Bandwidth-intensive from this post on (the class follows at once; the agent's
            // samples decide between the other two).
            if large && wr.op != SendOp::Read && !t.bw_send {
                t.bw_send = true;
                if t.class != Class::BandwidthIntensive {
                    t.class = Class::BandwidthIntensive;
                    t.class_changes += 1;
                }
            }
        }
        let was_idle = !q.has_work();
        let ord = q.push(wr, large);
        self.publish(qp, Some(now));
        let r = self.refill(below, qp, was_idle.then_some(ord));
        if let Err(e) = r {
            // Rejected by the NIC: take it back, as if never posted.
            let q = self.qps.get_mut(&qp).expect("exists");
            if let Some(i) = q.sw.iter().position(|a| a.ord == ord) {
                let a = q.sw.remove(i).expect("index");
                q.outstanding -= 1;
                q.out_bytes -= a.bytes;
                q.next_ord -= 1;
            }
            self.sync_work(qp);
            self.publish(qp, None);
            return Err(e);
        }
        self.publish(qp, None);
        // (The artifact's daemon checks the leader's budget continuously: here on each post,
        // so that the hand-over is queued behind exactly the leader's budget of WRs.)
        self.hw_rotate(below);
        self.flush_timer(below);
        if let Some(cq) = self.qps.get(&qp).map(|q| q.send_cq) {
            if self.arm_if_needed(below, cq) {
                self.cqs.entry(cq).or_default().app.mark_fresh();
            }
        }
        Ok(())
    }

    /// An application's list goes through the software queue WR by WR (each may be cut,
    /// queued or paused); the first refused one stops it, as ibverbs' `bad_wr`.
    fn post_send_list(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wrs: Vec<SendWr>,
    ) -> Result<(), BadWr> {
        for (index, wr) in wrs.into_iter().enumerate() {
            self.post_send(below, qp, wr)
                .map_err(|error| BadWr { index, error })?;
        }
        Ok(())
    }

    fn poll_cq(
        &mut self,
        below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        if !self.cqs.contains_key(&cq) {
            return below.poll_cq(cq, max, out);
        }
        if self.drain(below, cq) {
            self.refill_all(below);
        }
        self.cqs.get_mut(&cq).expect("checked").app.poll(max, out)
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Completion(cq) if self.cqs.contains_key(&cq) => {
                self.cqs.get_mut(&cq).expect("checked").below_armed = false;
                let mut fresh = self.drain(below, cq);
                self.refill_all(below);
                fresh |= self.arm_if_needed(below, cq);
                if self
                    .cqs
                    .get_mut(&cq)
                    .expect("checked")
                    .app
                    .take_event(fresh)
                {
                    up.push(Event::Completion(cq));
                }
            }
            Event::Wake(crate::perf::read::WAKE_LAYER_READ) => self.on_read_wake(below),
            Event::Timer(TIMER_RESCHEDULE) | Event::Wake(WAKE_RESCHEDULE) => {
                self.expire_reads(below);
                self.refill_all(below);
            }
            Event::Wake(WAKE_NOTIFY) => {
                for (&cq, c) in self.cqs.iter_mut() {
                    if c.app.take_event(false) {
                        up.push(Event::Completion(cq));
                    }
                }
            }
            e => up.push(e),
        }
    }
}
