//! One host's RNIC inside [`super::FakeNet`] (QPs, CQs, memory regions, tracked memory) and the
//! transport between hosts (the RC requester/responder state machines, UC and UD).
//!
//! Nothing here calls into a tenant: every effect that reaches one (a completion notification,
//! a QP to look at again) becomes an event in the [`Sched`] queue, so calls never re-enter.

use super::NetConfig;
use crate::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Bytes of the Global Routing Header a UD receive buffer gets in front of the payload.
pub(super) const GRH_BYTES: u64 = 40;
mod memory;
mod verbs;
mod wire;

pub use memory::{MrLimits, MLX5_MAX_MR};

const PAGE: u64 = 4096;

// ---------------------------------------------------------------------------------- the queue

/// What happens at a point in time. Tenant-facing events are handled by the net, the rest by
/// the NICs.
#[derive(Debug)]
pub(super) enum Ev {
    /// Start a tenant (its layers, then its application).
    Start { host: usize, tenant: TenantId },
    /// Deliver an event (timer, wake) to a tenant's stack.
    Deliver {
        host: usize,
        tenant: TenantId,
        event: Event,
    },
    /// An armed CQ fired: tell its owner (if the CQ still exists then).
    Notify { host: usize, cq: CqId },
    /// Look at a QP's send queue again.
    Kick { host: usize, qp: QpNum },
    /// A UC/UD message left the wire: its WR is complete.
    LocalDone {
        host: usize,
        qp: QpNum,
        epoch: u64,
        psn: u64,
    },
    /// A request message reaches its destination.
    Arrive(Box<Msg>),
    /// A response (ACK, NAK, READ data) reaches the requester.
    Reply(Box<Reply>),
    /// The RC retransmission timer.
    Timeout {
        host: usize,
        qp: QpNum,
        epoch: u64,
        gen: u64,
    },
}

/// The event queue: ordered by (time, insertion order), so runs are deterministic.
#[derive(Debug, Default)]
pub(super) struct Sched {
    pub now: u64,
    seq: u64,
    pub queue: BTreeMap<(u64, u64), Ev>,
}

impl Sched {
    /// Schedules `ev` at `at` (never in the past).
    pub fn at(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }
}

/// A request message on the wire (the whole message: the fake does not packetise).
#[derive(Debug)]
pub(super) struct Msg {
    pub src_host: usize,
    pub src_addr: u32,
    pub src_qp: QpNum,
    pub src_epoch: u64,
    pub dst_addr: u32,
    pub dst_qp: QpNum,
    pub qp_type: QpType,
    pub psn: u64,
    pub op: SendOp,
    pub len: u64,
    /// The bytes, when the source memory is tracked.
    pub payload: Option<Vec<u8>>,
    pub remote_addr: u64,
    pub rkey: u32,
}

#[derive(Debug)]
pub(super) enum ReplyKind {
    Ack,
    ReadData(Option<Vec<u8>>),
    Rnr,
    /// NAK: remote access error (rkey, bounds, permissions).
    RemoteAccess,
    /// NAK: invalid request (a SEND longer than the RECV it landed in).
    InvalidRequest,
}

#[derive(Debug)]
pub(super) struct Reply {
    pub host: usize,
    pub qp: QpNum,
    pub epoch: u64,
    pub psn: u64,
    pub kind: ReplyKind,
}

// ---------------------------------------------------------------------------------- memory

/// One tenant's (process's) memory, sparse, zero where never written.
#[derive(Debug, Default)]
pub(super) struct Memory {
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Memory {
    pub fn read(&self, addr: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0u8; len as usize];
        let mut off = 0u64;
        while off < len {
            let a = addr + off;
            let (page, po) = (a / PAGE, a % PAGE);
            let n = (PAGE - po).min(len - off);
            if let Some(p) = self.pages.get(&page) {
                out[off as usize..(off + n) as usize]
                    .copy_from_slice(&p[po as usize..(po + n) as usize]);
            }
            off += n;
        }
        out
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let len = data.len() as u64;
        let mut off = 0u64;
        while off < len {
            let a = addr + off;
            let (page, po) = (a / PAGE, a % PAGE);
            let n = (PAGE - po).min(len - off);
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[po as usize..(po + n) as usize]
                .copy_from_slice(&data[off as usize..(off + n) as usize]);
            off += n;
        }
    }
}

// ---------------------------------------------------------------------------------- objects

#[derive(Debug)]
struct Mr {
    owner: TenantId,
    /// Its protection domain, as its owner names it (numbers are unique on the host, and
    /// [`DEFAULT_PD`] is each tenant's own: compare together with the owner).
    pd: PdId,
    addr: u64,
    len: u64,
    access: Access,
    rkey: u32,
    /// It maps the host agent's memory (inside an agent region and a grant for its owner when
    /// registered; it keeps the mapping until deregistered, as an mmap outlives shm_unlink).
    shared: bool,
}

impl Mr {
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }
}

/// A completion queue entry plus what polling it frees in its work queue.
#[derive(Debug)]
struct Cqe {
    wc: WorkCompletion,
    slot: Slot,
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Polling a send completion frees its WR and every earlier one (ibverbs' sq tail).
    Send {
        qp: QpNum,
        epoch: u64,
        seq: u64,
    },
    Recv {
        qp: QpNum,
        epoch: u64,
    },
}

#[derive(Debug)]
struct Cq {
    owner: TenantId,
    depth: u32,
    entries: VecDeque<Cqe>,
    armed: bool,
    /// Completions ever produced (what WAIT counts).
    total: u64,
    overruns: u64,
    /// The cumulative wait index (mlx5 `wait_index`): where the last WAIT posted on this CQ
    /// left it.
    wait_index: u64,
    /// QPs whose WAIT watches this CQ.
    waiters: BTreeSet<QpNum>,
}

#[derive(Debug)]
struct SendWqe {
    /// Index among the WRs posted to this queue since creation or the last reset.
    seq: u64,
    wr: SendWr,
    signaled: bool,
    bytes: u64,
    /// Inline data, copied at post time.
    inline_data: Option<Vec<u8>>,
    /// When the WR reaches the NIC (post time plus the poster's CPU time, if modelled).
    ready_at: u64,
    /// WAIT: the absolute completion count it waits for. SEND/RECV_ENABLE: the absolute index
    /// up to which it enables.
    target: u64,
    /// RC/UC/UD data WRs: the message sequence number, assigned at first transmission.
    psn: Option<u64>,
    /// Transmitted in the current round (a go-back clears it).
    sent: bool,
    tx_end: u64,
    /// Executed (control WRs), acknowledged (RC) or on the wire (UC/UD): ready to complete.
    done: bool,
    /// An lkey of its scatter-gather list is in another PD than the QP's: it completes
    /// IBV_WC_LOC_PROT_ERR when the NIC reaches it.
    loc_prot: bool,
}

#[derive(Debug)]
struct RecvWqe {
    seq: u64,
    wr: RecvWr,
}

#[derive(Debug)]
struct Qp {
    owner: TenantId,
    init: QpInit,
    state: QpState,
    remote: Option<RemoteQp>,
    src_addr: u32,
    sport: u16,
    /// Bumped by reset: events of an earlier incarnation are ignored.
    epoch: u64,
    /// Posted, not yet completed.
    sq: VecDeque<SendWqe>,
    /// Index in `sq` of the next WR to process.
    cursor: usize,
    rq: VecDeque<RecvWqe>,
    sq_posted: u64,
    /// WRs whose slot has been given back (by polling a later send completion).
    sq_freed: u64,
    rq_posted: u64,
    rq_freed: u64,
    /// Post-time enable indices (mlx5 head_en_index) and what has been executed.
    send_en_index: u64,
    send_enabled: u64,
    recv_en_index: u64,
    recv_enabled: u64,
    next_psn: u64,
    /// Responder: the next PSN it accepts.
    expected_psn: u64,
    /// Responder: replies leave in order.
    last_reply_at: u64,
    /// Responder: when the READs it is serving have sent their responses, one per READ
    /// resource in use (at most `max_dest_rd_atomic`).
    reads_served_until: Vec<u64>,
    retry_left: u8,
    rnr_left: u8,
    timer_gen: u64,
    timer_armed: bool,
    /// After an RNR NAK: sending resumes then.
    paused_until: u64,
    /// Fault injection: this many more packets this QP sends are lost.
    lose_next: u64,
}

impl Qp {
    fn attr(&self, qpn: QpNum) -> QpAttr {
        QpAttr {
            qpn,
            qp_type: self.init.qp_type,
            state: self.state,
            local_addr: self.src_addr,
            udp_sport: self.sport,
            remote: self.remote,
            retry_cnt: self.init.retry_cnt,
            rnr_retry: self.init.rnr_retry,
            cross_channel: self.init.is_cross_channel(),
            send_cq: self.init.send_cq,
            recv_cq: self.init.recv_cq,
            send_outstanding: self.sq.len() as u32,
        }
    }
    /// The RC timer deadline for a transmitted WR.
    fn deadline(w: &SendWqe, cfg: &NetConfig, caps: &Caps) -> u64 {
        let resp = if matches!(w.wr.op, SendOp::Read) {
            ser_ps(caps, w.bytes)
        } else {
            0
        };
        w.tx_end + 2 * cfg.latency_ps + resp + cfg.rc_timeout_ps
    }
}

fn ser_ps(caps: &Caps, bytes: u64) -> u64 {
    if caps.line_rate_bps == 0 {
        return 0;
    }
    (bytes as u128 * 8 * 1_000_000_000_000 / caps.line_rate_bps as u128) as u64
}

fn wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
        SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
        SendOp::Read => WcOpcode::Read,
        SendOp::Wait { .. } => WcOpcode::Wait,
        SendOp::SendEnable { .. } => WcOpcode::SendEnable,
        SendOp::RecvEnable { .. } => WcOpcode::RecvEnable,
        SendOp::Nop => WcOpcode::Nop,
    }
}

fn wc(wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u64, qp: QpNum) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode,
        byte_len,
        imm: None,
        qp_num: qp,
        src_host: 0,
        src_qp: 0,
    }
}

// ---------------------------------------------------------------------------------- the NIC

/// One host's fake RNIC: what [`super::FakeNet::nic`] lets a test inspect.
#[derive(Debug)]
pub struct FakeNic {
    pub(super) index: usize,
    pub(super) caps: Caps,
    pub(super) dead: bool,
    cqs: BTreeMap<CqId, Cq>,
    qps: BTreeMap<QpNum, Qp>,
    /// By lkey.
    mrs: BTreeMap<u32, Mr>,
    /// rkey -> lkey.
    rkeys: BTreeMap<u32, u32>,
    mem: BTreeMap<TenantId, Memory>,
    /// Protection domains allocated with `alloc_pd` -> their tenant.
    pds: BTreeMap<PdId, TenantId>,
    next_pd: PdId,
    /// [`super::NetConfig::host_memory`]: the host's tenants share one address space.
    pub(super) host_memory: bool,
    /// What the host agent shares with which tenant (`memory.rs`).
    shares: ShareSlot,
    pub(super) mr_limits: MrLimits,
    mr_refused: u64,
    next_cq: CqId,
    next_qp: u32,
    next_mr: u32,
    /// When the egress link is free again.
    link_free: u64,
}

/// The inspection side, for tests (no ownership checks).
impl FakeNic {
    /// The host's primary address.
    pub fn addr(&self) -> u32 {
        self.caps.local_addrs[0]
    }
    pub fn caps(&self) -> &Caps {
        &self.caps
    }
    pub fn is_dead(&self) -> bool {
        self.dead
    }
    /// What `query_qp` would answer to its owner.
    pub fn qp_attr(&self, qp: QpNum) -> Option<QpAttr> {
        self.qps.get(&qp).map(|q| q.attr(qp))
    }
    pub fn qp_owner(&self, qp: QpNum) -> Option<TenantId> {
        self.qps.get(&qp).map(|q| q.owner)
    }
    /// RECVs posted to `qp` and not yet consumed or flushed.
    pub fn recv_outstanding(&self, qp: QpNum) -> Option<usize> {
        self.qps.get(&qp).map(|q| q.rq.len())
    }
    pub fn cq_owner(&self, cq: CqId) -> Option<TenantId> {
        self.cqs.get(&cq).map(|c| c.owner)
    }
    /// Completions waiting in `cq`.
    pub fn cq_len(&self, cq: CqId) -> Option<usize> {
        self.cqs.get(&cq).map(|c| c.entries.len())
    }
    /// Completions `cq` has ever produced (what a WAIT counts).
    pub fn cq_total(&self, cq: CqId) -> Option<u64> {
        self.cqs.get(&cq).map(|c| c.total)
    }
    /// Completions lost because `cq` was full.
    pub fn cq_overruns(&self, cq: CqId) -> Option<u64> {
        self.cqs.get(&cq).map(|c| c.overruns)
    }
    pub fn cq_armed(&self, cq: CqId) -> Option<bool> {
        self.cqs.get(&cq).map(|c| c.armed)
    }
    /// Bytes of `tenant`'s memory, tracked or not (zero where nothing was written).
    pub fn read_mem(&self, tenant: TenantId, addr: u64, len: u64) -> Vec<u8> {
        match self.mem.get(&self.space_at(tenant, addr, len)) {
            Some(m) => m.read(addr, len),
            None => vec![0; len as usize],
        }
    }
}

impl FakeNic {
    pub(super) fn new(index: usize, caps: Caps) -> Self {
        FakeNic {
            index,
            caps,
            dead: false,
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            mrs: BTreeMap::new(),
            rkeys: BTreeMap::new(),
            mem: BTreeMap::new(),
            pds: BTreeMap::new(),
            next_pd: DEFAULT_PD + 1,
            host_memory: false,
            shares: ShareSlot::default(),
            mr_limits: MrLimits::default(),
            mr_refused: 0,
            next_cq: 1,
            next_qp: 0,
            next_mr: 0,
            link_free: 0,
        }
    }

    pub(super) fn qp_epoch(&self, qp: QpNum) -> Option<u64> {
        self.qps.get(&qp).map(|q| q.epoch)
    }

    pub(super) fn write_mem(&mut self, tenant: TenantId, addr: u64, data: &[u8]) {
        let k = self.space_at(tenant, addr, data.len() as u64);
        self.mem.entry(k).or_default().write(addr, data);
    }

    pub(super) fn lose(&mut self, qp: QpNum, n: u64) -> bool {
        match self.qps.get_mut(&qp) {
            Some(q) => {
                q.lose_next += n;
                true
            }
            None => false,
        }
    }

    // ------------------------------------------------------------------ ownership

    fn own_qp(&self, tenant: TenantId, qp: QpNum) -> Result<&Qp, VerbsError> {
        self.qps
            .get(&qp)
            .filter(|q| q.owner == tenant)
            .ok_or(VerbsError::NoSuchQp(qp))
    }
    fn own_qp_mut(&mut self, tenant: TenantId, qp: QpNum) -> Result<&mut Qp, VerbsError> {
        self.qps
            .get_mut(&qp)
            .filter(|q| q.owner == tenant)
            .ok_or(VerbsError::NoSuchQp(qp))
    }
    fn own_cq(&self, tenant: TenantId, cq: CqId) -> Result<&Cq, VerbsError> {
        self.cqs
            .get(&cq)
            .filter(|c| c.owner == tenant)
            .ok_or(VerbsError::NoSuchCq(cq))
    }

    /// Whether `tenant` registered [addr, addr+len) in a tracked region (with host memory: any
    /// tenant of the host, since they share the bytes).
    fn tracked(&self, tenant: TenantId, addr: u64, len: u64) -> bool {
        self.mrs.values().any(|m| {
            (m.owner == tenant || self.host_memory) && m.access.track && m.covers(addr, len)
        })
    }

    /// Whether `tenant` itself registered [addr, addr+len) in a tracked region.
    pub(super) fn owns_tracked(&self, tenant: TenantId, addr: u64, len: u64) -> bool {
        self.mrs
            .values()
            .any(|m| m.owner == tenant && m.access.track && m.covers(addr, len))
    }

    /// Checks a local scatter-gather list at post time: every non-empty element lies in a
    /// region of `tenant` with that lkey (with local write access when the NIC writes into it).
    fn check_sges(&self, tenant: TenantId, sges: &[Sge], write: bool) -> Result<(), VerbsError> {
        for s in sges.iter().filter(|s| s.length > 0) {
            let ok = self.mrs.get(&s.lkey).is_some_and(|m| {
                m.owner == tenant
                    && m.covers(s.addr, s.length as u64)
                    && (!write || m.access.local_write)
            });
            if !ok {
                return Err(VerbsError::BadKey(s.lkey));
            }
        }
        Ok(())
    }

    /// Whether every non-empty element of a (checked) scatter-gather list of `tenant` uses a
    /// region of protection domain `pd`.
    fn sges_in_pd(&self, tenant: TenantId, pd: PdId, sges: &[Sge]) -> bool {
        sges.iter().filter(|s| s.length > 0).all(|s| {
            self.mrs
                .get(&s.lkey)
                .is_some_and(|m| m.owner == tenant && m.pd == pd)
        })
    }

    /// `tenant`'s protection domain `pd` exists.
    fn own_pd(&self, tenant: TenantId, pd: PdId) -> Result<(), VerbsError> {
        if pd == DEFAULT_PD || self.pds.get(&pd) == Some(&tenant) {
            Ok(())
        } else {
            Err(VerbsError::InvalidArgument(
                "pd: no such protection domain of this tenant (alloc_pd)",
            ))
        }
    }

    /// The bytes a scatter-gather list names, if any of it is tracked (untracked parts read as
    /// zeros); None if nothing is tracked.
    fn gather(&self, tenant: TenantId, sges: &[Sge]) -> Option<Vec<u8>> {
        let any = sges
            .iter()
            .any(|s| s.length > 0 && self.tracked(tenant, s.addr, s.length as u64));
        if !any {
            return None;
        }
        let mut out = Vec::new();
        for s in sges {
            let len = s.length as u64;
            if self.tracked(tenant, s.addr, len) {
                out.extend(
                    self.mem
                        .get(&self.space_at(tenant, s.addr, len))
                        .map_or_else(|| vec![0; len as usize], |m| m.read(s.addr, len)),
                );
            } else {
                out.resize(out.len() + len as usize, 0);
            }
        }
        Some(out)
    }

    /// Writes `data` across a scatter-gather list, into its tracked parts only.
    fn scatter(&mut self, tenant: TenantId, sges: &[Sge], data: &[u8]) {
        let mut off = 0usize;
        for s in sges {
            if off >= data.len() {
                break;
            }
            let n = (s.length as usize).min(data.len() - off);
            if self.tracked(tenant, s.addr, n as u64) {
                self.write_mem(tenant, s.addr, &data[off..off + n]);
            }
            off += n;
        }
    }

    // ------------------------------------------------------------------ completions

    fn push_cqe(&mut self, s: &mut Sched, cq: CqId, wc: WorkCompletion, slot: Slot) {
        let host = self.index;
        let Some(c) = self.cqs.get_mut(&cq) else {
            return;
        };
        c.total += 1;
        if c.entries.len() as u64 >= c.depth as u64 {
            c.overruns += 1;
        } else {
            c.entries.push_back(Cqe { wc, slot });
        }
        if c.armed {
            c.armed = false;
            s.at(s.now, Ev::Notify { host, cq });
        }
        for qp in std::mem::take(&mut c.waiters) {
            s.at(s.now, Ev::Kick { host, qp });
        }
    }

    /// Completes done WRs at the head of `qp`'s send queue, in order.
    fn retire(&mut self, s: &mut Sched, qpn: QpNum) {
        loop {
            let Some(q) = self.qps.get_mut(&qpn) else {
                return;
            };
            if !q.sq.front().is_some_and(|w| w.done) {
                return;
            }
            let w = q.sq.pop_front().expect("front exists");
            q.cursor = q.cursor.saturating_sub(1);
            if w.signaled {
                let byte_len = if w.wr.op.carries_data() { w.bytes } else { 0 };
                let c = wc(
                    w.wr.wr_id,
                    WcStatus::Success,
                    wc_opcode(&w.wr.op),
                    byte_len,
                    qpn,
                );
                let slot = Slot::Send {
                    qp: qpn,
                    epoch: q.epoch,
                    seq: w.seq,
                };
                let cq = q.init.send_cq;
                self.push_cqe(s, cq, c, slot);
            }
        }
    }

    /// Moves a QP to Error: every outstanding send WR, then every RECV, completes Flushed.
    fn enter_error(&mut self, s: &mut Sched, qpn: QpNum) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.state = QpState::Error;
        q.timer_armed = false;
        q.timer_gen += 1;
        q.cursor = 0;
        let sq = std::mem::take(&mut q.sq);
        let rq = std::mem::take(&mut q.rq);
        let (scq, rcq, epoch) = (q.init.send_cq, q.init.recv_cq, q.epoch);
        for w in sq {
            let c = wc(w.wr.wr_id, WcStatus::Flushed, wc_opcode(&w.wr.op), 0, qpn);
            let slot = Slot::Send {
                qp: qpn,
                epoch,
                seq: w.seq,
            };
            self.push_cqe(s, scq, c, slot);
        }
        for r in rq {
            let c = wc(r.wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn);
            self.push_cqe(s, rcq, c, Slot::Recv { qp: qpn, epoch });
        }
    }

    /// Completes the WR at `idx` with an error status (every WR before it is done), flushes
    /// the rest and moves the QP to Error.
    fn fail_at(&mut self, s: &mut Sched, qpn: QpNum, idx: usize, status: WcStatus) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        for w in q.sq.iter_mut().take(idx) {
            w.done = true;
        }
        self.retire(s, qpn);
        let q = self.qps.get_mut(&qpn).expect("retire keeps the QP");
        if let Some(w) = q.sq.pop_front() {
            let c = wc(w.wr.wr_id, status, wc_opcode(&w.wr.op), 0, qpn);
            let slot = Slot::Send {
                qp: qpn,
                epoch: q.epoch,
                seq: w.seq,
            };
            let cq = q.init.send_cq;
            self.push_cqe(s, cq, c, slot);
        }
        self.enter_error(s, qpn);
    }
}
