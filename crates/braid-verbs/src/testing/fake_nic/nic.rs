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
    addr: u64,
    len: u64,
    access: Access,
    rkey: u32,
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
        match self.mem.get(&tenant) {
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
        self.mem.entry(tenant).or_default().write(addr, data);
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

    /// Whether `tenant` registered [addr, addr+len) in a tracked region.
    fn tracked(&self, tenant: TenantId, addr: u64, len: u64) -> bool {
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
                        .get(&tenant)
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

    // ------------------------------------------------------------------ verbs

    pub(super) fn create_cq(&mut self, tenant: TenantId, depth: u32) -> Result<CqId, VerbsError> {
        if depth == 0 {
            return Err(VerbsError::InvalidArgument("a CQ needs at least one entry"));
        }
        let id = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(
            id,
            Cq {
                owner: tenant,
                depth,
                entries: VecDeque::new(),
                armed: false,
                total: 0,
                overruns: 0,
                wait_index: 0,
                waiters: BTreeSet::new(),
            },
        );
        Ok(id)
    }

    pub(super) fn destroy_cq(&mut self, tenant: TenantId, cq: CqId) -> Result<(), VerbsError> {
        self.own_cq(tenant, cq)?;
        if self
            .qps
            .values()
            .any(|q| q.init.send_cq == cq || q.init.recv_cq == cq)
        {
            // ibv_destroy_cq fails with EBUSY while a QP uses the CQ.
            return Err(VerbsError::InvalidState("the CQ is still used by a QP"));
        }
        self.cqs.remove(&cq);
        Ok(())
    }

    pub(super) fn req_notify_cq(&mut self, tenant: TenantId, cq: CqId) -> Result<(), VerbsError> {
        self.own_cq(tenant, cq)?;
        self.cqs.get_mut(&cq).expect("owned").armed = true;
        Ok(())
    }

    pub(super) fn poll_cq(
        &mut self,
        tenant: TenantId,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        if self.own_cq(tenant, cq).is_err() {
            return 0;
        }
        let c = self.cqs.get_mut(&cq).expect("owned");
        let n = max.min(c.entries.len());
        let polled: Vec<Cqe> = c.entries.drain(..n).collect();
        for e in polled {
            match e.slot {
                Slot::Send { qp, epoch, seq } => {
                    if let Some(q) = self.qps.get_mut(&qp).filter(|q| q.epoch == epoch) {
                        q.sq_freed = q.sq_freed.max(seq + 1);
                    }
                }
                Slot::Recv { qp, epoch } => {
                    if let Some(q) = self.qps.get_mut(&qp).filter(|q| q.epoch == epoch) {
                        q.rq_freed += 1;
                    }
                }
            }
            out.push(e.wc);
        }
        n
    }

    pub(super) fn create_qp(
        &mut self,
        tenant: TenantId,
        init: &QpInit,
    ) -> Result<QpNum, VerbsError> {
        self.own_cq(tenant, init.send_cq)?;
        self.own_cq(tenant, init.recv_cq)?;
        if init.is_cross_channel() && !self.caps.cross_channel {
            return Err(VerbsError::Unsupported(
                "cross-channel QPs (this NIC has caps.cross_channel = false)",
            ));
        }
        let src_addr = *self.caps.local_addrs.get(init.local_addr as usize).ok_or(
            VerbsError::InvalidArgument("local_addr is not an index into caps.local_addrs"),
        )?;
        if init.max_send_wr > self.caps.max_qp_wr || init.max_recv_wr > self.caps.max_qp_wr {
            return Err(VerbsError::InvalidArgument(
                "max_send_wr/max_recv_wr above caps.max_qp_wr",
            ));
        }
        if init.retry_cnt > 7 || init.rnr_retry > 7 {
            return Err(VerbsError::InvalidArgument(
                "retry_cnt and rnr_retry are 3-bit (0-7)",
            ));
        }
        // QP numbers: 24 bits, the host's index + 1 above the low 16, so that a local QPN used
        // as a remote one is caught.
        let qpn = ((self.index as u32 + 1) << 16) | (self.next_qp & 0xffff);
        self.next_qp += 1;
        let sport = 49152 + ((qpn.wrapping_mul(2654435761) >> 16) % 16384) as u16;
        self.qps.insert(
            qpn,
            Qp {
                owner: tenant,
                init: init.clone(),
                state: QpState::Init,
                remote: None,
                src_addr,
                sport,
                epoch: 0,
                sq: VecDeque::new(),
                cursor: 0,
                rq: VecDeque::new(),
                sq_posted: 0,
                sq_freed: 0,
                rq_posted: 0,
                rq_freed: 0,
                send_en_index: 0,
                send_enabled: 0,
                recv_en_index: 0,
                recv_enabled: 0,
                next_psn: 0,
                expected_psn: 0,
                last_reply_at: 0,
                retry_left: init.retry_cnt,
                rnr_left: init.rnr_retry,
                timer_gen: 0,
                timer_armed: false,
                paused_until: 0,
                lose_next: 0,
            },
        );
        Ok(qpn)
    }

    pub(super) fn connect_qp(
        &mut self,
        tenant: TenantId,
        qpn: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let sport_control = self.caps.sport_control;
        let q = self.own_qp_mut(tenant, qpn)?;
        if !matches!(q.state, QpState::Init | QpState::Reset) {
            return Err(VerbsError::InvalidState(
                "connect_qp needs a QP in Init or Reset (modify it to Reset first)",
            ));
        }
        if q.init.qp_type != QpType::Ud {
            q.remote = Some(remote);
            if let (true, Some(p)) = (sport_control, remote.udp_sport) {
                q.sport = p;
            }
        }
        q.state = QpState::Rts;
        q.retry_left = q.init.retry_cnt;
        q.rnr_left = q.init.rnr_retry;
        Ok(())
    }

    pub(super) fn modify_qp(
        &mut self,
        s: &mut Sched,
        tenant: TenantId,
        qpn: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        let sport_control = self.caps.sport_control;
        let q = self.own_qp_mut(tenant, qpn)?;
        match m {
            QpModify::Error => self.enter_error(s, qpn),
            QpModify::Reset => {
                // Queues emptied without completions; indices back to zero (as libmlx5's
                // init_qp_indices); whatever is in flight belongs to the old incarnation.
                q.state = QpState::Reset;
                q.remote = None;
                q.epoch += 1;
                q.sq.clear();
                q.rq.clear();
                q.cursor = 0;
                q.sq_posted = 0;
                q.sq_freed = 0;
                q.rq_posted = 0;
                q.rq_freed = 0;
                q.send_en_index = 0;
                q.send_enabled = 0;
                q.recv_en_index = 0;
                q.recv_enabled = 0;
                q.next_psn = 0;
                q.expected_psn = 0;
                q.last_reply_at = 0;
                q.timer_armed = false;
                q.timer_gen += 1;
                q.paused_until = 0;
                // libmlx5 cleans the QP's completions out of its CQs on the way to Reset.
                let (scq, rcq) = (q.init.send_cq, q.init.recv_cq);
                for cq in [scq, rcq] {
                    if let Some(c) = self.cqs.get_mut(&cq) {
                        c.entries.retain(|e| e.wc.qp_num != qpn);
                        c.waiters.remove(&qpn);
                    }
                }
            }
            QpModify::UdpSport(p) => {
                // Without sport control the call is accepted and has no effect (Caps docs).
                if sport_control {
                    q.sport = p;
                }
            }
        }
        Ok(())
    }

    pub(super) fn query_qp(&self, tenant: TenantId, qpn: QpNum) -> Result<QpAttr, VerbsError> {
        Ok(self.own_qp(tenant, qpn)?.attr(qpn))
    }

    pub(super) fn destroy_qp(&mut self, tenant: TenantId, qpn: QpNum) -> Result<(), VerbsError> {
        let q = self.own_qp(tenant, qpn)?;
        let (scq, rcq) = (q.init.send_cq, q.init.recv_cq);
        // No completions for what was outstanding; the QP's completions still in its CQs are
        // removed (libmlx5's cq_clean on destroy).
        self.qps.remove(&qpn);
        for cq in [scq, rcq] {
            if let Some(c) = self.cqs.get_mut(&cq) {
                c.entries.retain(|e| e.wc.qp_num != qpn);
                c.waiters.remove(&qpn);
            }
        }
        Ok(())
    }

    pub(super) fn reg_mr(
        &mut self,
        tenant: TenantId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        if len == 0 || addr.checked_add(len).is_none() {
            return Err(VerbsError::InvalidArgument(
                "a memory region needs 1..2^64-addr bytes",
            ));
        }
        if access.remote_write && !access.local_write {
            // ibv_reg_mr: REMOTE_WRITE requires LOCAL_WRITE (EINVAL).
            return Err(VerbsError::InvalidArgument(
                "remote_write needs local_write",
            ));
        }
        if access.track && !self.caps.data_tracking {
            return Err(VerbsError::Unsupported(
                "memory contents are not tracked (caps.data_tracking = false)",
            ));
        }
        let n = self.next_mr;
        self.next_mr += 1;
        // Keys carry the host, so a key used on the wrong host fails; lkey != rkey, so one
        // used for the other fails.
        let base = ((self.index as u32 & 0xff) << 24) | ((n & 0xf_ffff) << 4);
        let (lkey, rkey) = (base | 0x1, base | 0x2);
        self.mrs.insert(
            lkey,
            Mr {
                owner: tenant,
                addr,
                len,
                access,
                rkey,
            },
        );
        self.rkeys.insert(rkey, lkey);
        Ok(MemoryRegion {
            addr,
            len,
            lkey,
            rkey,
        })
    }

    pub(super) fn dereg_mr(
        &mut self,
        tenant: TenantId,
        mr: &MemoryRegion,
    ) -> Result<(), VerbsError> {
        match self.mrs.get(&mr.lkey) {
            Some(m) if m.owner == tenant => {
                self.rkeys.remove(&m.rkey);
                self.mrs.remove(&mr.lkey);
                Ok(())
            }
            _ => Err(VerbsError::BadKey(mr.lkey)),
        }
    }

    pub(super) fn post_send(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        tenant: TenantId,
        qpn: QpNum,
        wr: SendWr,
        ready_at: u64,
    ) -> Result<(), VerbsError> {
        let q = self.own_qp(tenant, qpn)?;
        if !matches!(q.state, QpState::Rts | QpState::Error) {
            return Err(VerbsError::InvalidState(
                "post_send needs a connected QP (RTS)",
            ));
        }
        let bytes = wr.len();
        let qp_type = q.init.qp_type;
        let cross = q.init.is_cross_channel();
        match wr.op {
            SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. } => {
                if !self.caps.cross_channel {
                    return Err(VerbsError::Unsupported(
                        "cross-channel WRs (caps.cross_channel = false)",
                    ));
                }
                if !cross {
                    return Err(VerbsError::InvalidWr(
                        "WAIT/SEND_ENABLE/RECV_ENABLE need a QP created with cross_channel",
                    ));
                }
            }
            SendOp::Send | SendOp::SendWithImm(_) => {
                if qp_type == QpType::Ud {
                    if wr.ud_dest.is_none() {
                        return Err(VerbsError::InvalidWr("a UD send needs ud_dest"));
                    }
                    if bytes > self.caps.mtu as u64 {
                        return Err(VerbsError::InvalidWr("a UD message is at most one MTU"));
                    }
                }
            }
            SendOp::Write | SendOp::WriteWithImm(_) => {
                if qp_type == QpType::Ud {
                    return Err(VerbsError::InvalidWr("UD QPs only SEND"));
                }
            }
            SendOp::Read => {
                if qp_type != QpType::Rc {
                    return Err(VerbsError::InvalidWr("only RC QPs READ"));
                }
                if wr.inline {
                    return Err(VerbsError::InvalidWr("a READ cannot be inline"));
                }
            }
            SendOp::Nop => {}
        }
        if wr.op.carries_data() {
            if wr.inline {
                if bytes > cfg.max_inline as u64 {
                    return Err(VerbsError::InvalidWr(
                        "inline data above the NIC's inline limit",
                    ));
                }
            } else {
                self.check_sges(tenant, &wr.sg_list, matches!(wr.op, SendOp::Read))?;
            }
        }
        if q.sq_posted - q.sq_freed >= q.init.max_send_wr as u64 {
            return Err(VerbsError::QueueFull);
        }
        // Post-time indices of the cross-channel WRs (libmlx5 computes them in post_send).
        let target = match wr.op {
            SendOp::Wait { cq, count } => {
                let c = self.own_cq(tenant, cq)?;
                c.wait_index + count as u64
            }
            SendOp::SendEnable { qp, count } => {
                let t = self.own_qp(tenant, qp)?;
                if !t.init.managed_send {
                    return Err(VerbsError::InvalidWr(
                        "SEND_ENABLE of a QP without managed_send",
                    ));
                }
                let idx = if count == 0 {
                    t.sq_posted
                } else {
                    t.send_en_index + count as u64
                };
                if idx > t.sq_posted {
                    return Err(VerbsError::InvalidWr(
                        "SEND_ENABLE beyond the WRs posted to the target queue",
                    ));
                }
                idx
            }
            SendOp::RecvEnable { qp, count } => {
                let t = self.own_qp(tenant, qp)?;
                if !t.init.managed_recv {
                    return Err(VerbsError::InvalidWr(
                        "RECV_ENABLE of a QP without managed_recv",
                    ));
                }
                let idx = if count == 0 {
                    t.rq_posted
                } else {
                    t.recv_en_index + count as u64
                };
                if idx > t.rq_posted {
                    return Err(VerbsError::InvalidWr(
                        "RECV_ENABLE beyond the RECVs posted to the target queue",
                    ));
                }
                idx
            }
            _ => 0,
        };
        // Accepted: commit.
        match wr.op {
            SendOp::Wait { cq, .. } => self.cqs.get_mut(&cq).expect("checked").wait_index = target,
            SendOp::SendEnable { qp, .. } => {
                self.qps.get_mut(&qp).expect("checked").send_en_index = target
            }
            SendOp::RecvEnable { qp, .. } => {
                self.qps.get_mut(&qp).expect("checked").recv_en_index = target
            }
            _ => {}
        }
        let inline_data = if wr.inline && wr.op.carries_data() {
            Some(
                self.gather(tenant, &wr.sg_list)
                    .unwrap_or_else(|| vec![0; bytes as usize]),
            )
        } else {
            None
        };
        let q = self.qps.get_mut(&qpn).expect("owned");
        let seq = q.sq_posted;
        q.sq_posted += 1;
        if q.state == QpState::Error {
            let c = wc(wr.wr_id, WcStatus::Flushed, wc_opcode(&wr.op), 0, qpn);
            let slot = Slot::Send {
                qp: qpn,
                epoch: q.epoch,
                seq,
            };
            let cq = q.init.send_cq;
            self.push_cqe(s, cq, c, slot);
            return Ok(());
        }
        let signaled = wr.signaled || q.init.sq_sig_all;
        q.sq.push_back(SendWqe {
            seq,
            wr,
            signaled,
            bytes,
            inline_data,
            ready_at,
            target,
            psn: None,
            sent: false,
            tx_end: 0,
            done: false,
        });
        s.at(
            ready_at,
            Ev::Kick {
                host: self.index,
                qp: qpn,
            },
        );
        Ok(())
    }

    pub(super) fn post_recv(
        &mut self,
        s: &mut Sched,
        tenant: TenantId,
        qpn: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        let q = self.own_qp(tenant, qpn)?;
        if q.state == QpState::Reset {
            return Err(VerbsError::InvalidState("post_recv on a QP in Reset"));
        }
        self.check_sges(tenant, &wr.sg_list, true)?;
        if q.rq_posted - q.rq_freed >= q.init.max_recv_wr as u64 {
            return Err(VerbsError::QueueFull);
        }
        let q = self.qps.get_mut(&qpn).expect("owned");
        let seq = q.rq_posted;
        q.rq_posted += 1;
        if q.state == QpState::Error {
            let c = wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn);
            let slot = Slot::Recv {
                qp: qpn,
                epoch: q.epoch,
            };
            let cq = q.init.recv_cq;
            self.push_cqe(s, cq, c, slot);
            return Ok(());
        }
        q.rq.push_back(RecvWqe { seq, wr });
        Ok(())
    }

    pub(super) fn write_local(
        &mut self,
        tenant: TenantId,
        addr: u64,
        data: &[u8],
    ) -> Result<(), VerbsError> {
        self.check_tracked(tenant, addr, data.len() as u64)?;
        self.write_mem(tenant, addr, data);
        Ok(())
    }

    pub(super) fn read_local(
        &self,
        tenant: TenantId,
        addr: u64,
        len: u64,
    ) -> Result<Vec<u8>, VerbsError> {
        self.check_tracked(tenant, addr, len)?;
        Ok(self.read_mem(tenant, addr, len))
    }

    fn check_tracked(&self, tenant: TenantId, addr: u64, len: u64) -> Result<(), VerbsError> {
        if !self.caps.data_tracking {
            return Err(VerbsError::Unsupported(
                "memory contents are not tracked (caps.data_tracking = false)",
            ));
        }
        if !self.tracked(tenant, addr, len) {
            return Err(VerbsError::Unsupported(
                "not inside one of this tenant's regions registered with Access::track",
            ));
        }
        Ok(())
    }

    // ------------------------------------------------------------------ requester

    /// Processes `qp`'s send queue as far as it can go now: executes control WRs, puts data
    /// WRs on the wire, stops at a blocked WAIT, a WR not enabled yet, or the end.
    pub(super) fn pump(&mut self, s: &mut Sched, cfg: &NetConfig, qpn: QpNum) {
        if self.dead {
            return;
        }
        let host = self.index;
        let now = s.now;
        loop {
            let Some(q) = self.qps.get_mut(&qpn) else {
                return;
            };
            if q.state != QpState::Rts || q.paused_until > now {
                return;
            }
            let cursor = q.cursor;
            let managed = q.init.managed_send;
            let send_enabled = q.send_enabled;
            let Some(w) = q.sq.get_mut(cursor) else {
                return;
            };
            if managed && w.seq >= send_enabled {
                return;
            }
            if w.ready_at > now {
                s.at(w.ready_at, Ev::Kick { host, qp: qpn });
                return;
            }
            if w.done || w.sent {
                q.cursor += 1;
                continue;
            }
            let op = w.wr.op;
            if !op.carries_data() {
                let target = w.target;
                match op {
                    SendOp::Wait { cq, .. } => match self.cqs.get_mut(&cq) {
                        Some(c) if c.total >= target => {}
                        Some(c) => {
                            c.waiters.insert(qpn);
                            return;
                        }
                        // The CQ was destroyed: the WAIT never completes.
                        None => return,
                    },
                    SendOp::SendEnable { qp: t, .. } => {
                        if let Some(tq) = self.qps.get_mut(&t) {
                            tq.send_enabled = tq.send_enabled.max(target);
                            s.at(now, Ev::Kick { host, qp: t });
                        }
                    }
                    SendOp::RecvEnable { qp: t, .. } => {
                        if let Some(tq) = self.qps.get_mut(&t) {
                            tq.recv_enabled = tq.recv_enabled.max(target);
                        }
                    }
                    _ => {}
                }
                let q = self.qps.get_mut(&qpn).expect("still here");
                q.sq[cursor].done = true;
                q.cursor += 1;
                self.retire(s, qpn);
                continue;
            }
            self.transmit(s, cfg, qpn);
        }
    }

    /// Puts the data WR at the cursor on the wire.
    fn transmit(&mut self, s: &mut Sched, cfg: &NetConfig, qpn: QpNum) {
        let host = self.index;
        let now = s.now;
        let mtu = self.caps.mtu.max(1) as u64;
        let q = self.qps.get(&qpn).expect("pumped");
        let w = &q.sq[q.cursor];
        let owner = q.owner;
        let payload = match w.wr.op {
            SendOp::Read => None,
            _ => match &w.inline_data {
                Some(d) => Some(d.clone()),
                None => self.gather(owner, &w.wr.sg_list),
            },
        };
        let (bytes, is_read) = (w.bytes, matches!(w.wr.op, SendOp::Read));
        let ser = if is_read {
            0
        } else {
            ser_ps(&self.caps, bytes)
        };
        let start = now.max(self.link_free);
        let end = start + ser;
        self.link_free = end;
        let npkts = if is_read {
            1
        } else {
            bytes.div_ceil(mtu).max(1)
        };
        let caps = self.caps.clone();
        let q = self.qps.get_mut(&qpn).expect("pumped");
        let lost_pkts = q.lose_next.min(npkts);
        q.lose_next -= lost_pkts;
        let cursor = q.cursor;
        let psn = match q.sq[cursor].psn {
            Some(p) => p,
            None => {
                let p = q.next_psn;
                q.next_psn += 1;
                q.sq[cursor].psn = Some(p);
                p
            }
        };
        let w = &mut q.sq[cursor];
        w.sent = true;
        w.tx_end = end;
        q.cursor += 1;
        let dst = match q.init.qp_type {
            QpType::Ud => w.wr.ud_dest,
            _ => q.remote,
        };
        if lost_pkts == 0 {
            if let Some(d) = dst {
                s.at(
                    end + cfg.latency_ps,
                    Ev::Arrive(Box::new(Msg {
                        src_host: host,
                        src_addr: q.src_addr,
                        src_qp: qpn,
                        src_epoch: q.epoch,
                        dst_addr: d.host,
                        dst_qp: d.qpn,
                        qp_type: q.init.qp_type,
                        psn,
                        op: w.wr.op,
                        len: bytes,
                        payload,
                        remote_addr: w.wr.remote_addr,
                        rkey: w.wr.rkey,
                    })),
                );
            }
        }
        match q.init.qp_type {
            QpType::Rc => {
                if !q.timer_armed {
                    let deadline = Qp::deadline(&q.sq[cursor], cfg, &caps);
                    q.timer_armed = true;
                    q.timer_gen += 1;
                    let (epoch, gen) = (q.epoch, q.timer_gen);
                    s.at(
                        deadline,
                        Ev::Timeout {
                            host,
                            qp: qpn,
                            epoch,
                            gen,
                        },
                    );
                }
            }
            _ => s.at(
                end,
                Ev::LocalDone {
                    host,
                    qp: qpn,
                    epoch: q.epoch,
                    psn,
                },
            ),
        }
    }

    pub(super) fn local_done(&mut self, s: &mut Sched, qpn: QpNum, epoch: u64, psn: u64) {
        let Some(q) = self.qps.get_mut(&qpn).filter(|q| q.epoch == epoch) else {
            return;
        };
        if q.state != QpState::Rts {
            return;
        }
        if let Some(w) = q.sq.iter_mut().find(|w| w.psn == Some(psn)) {
            w.done = true;
        }
        self.retire(s, qpn);
    }

    /// Goes back to the WR at `idx`: it and every data WR after it are sent again.
    fn go_back(q: &mut Qp, idx: usize) {
        for w in q.sq.iter_mut().skip(idx) {
            if w.wr.op.carries_data() && !w.done {
                w.sent = false;
            }
        }
        q.cursor = idx.min(q.cursor);
    }

    /// (Re)arms the RC timer for the oldest WR on the wire, or disarms it.
    fn rearm(&mut self, s: &mut Sched, cfg: &NetConfig, qpn: QpNum) {
        let host = self.index;
        let caps = &self.caps;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.timer_gen += 1;
        let oldest =
            q.sq.iter()
                .find(|w| w.wr.op.carries_data() && w.sent && !w.done);
        match oldest {
            Some(w) => {
                let at = Qp::deadline(w, cfg, caps).max(s.now + cfg.rc_timeout_ps);
                q.timer_armed = true;
                let (epoch, gen) = (q.epoch, q.timer_gen);
                s.at(
                    at,
                    Ev::Timeout {
                        host,
                        qp: qpn,
                        epoch,
                        gen,
                    },
                );
            }
            None => q.timer_armed = false,
        }
    }

    pub(super) fn on_reply(&mut self, s: &mut Sched, cfg: &NetConfig, r: Reply) {
        if self.dead {
            return;
        }
        let now = s.now;
        let Some(q) = self.qps.get_mut(&r.qp).filter(|q| q.epoch == r.epoch) else {
            return;
        };
        if q.state != QpState::Rts {
            return;
        }
        let Some(idx) =
            q.sq.iter()
                .position(|w| w.wr.op.carries_data() && w.psn == Some(r.psn))
        else {
            // Already complete: a duplicate.
            return;
        };
        let qpn = r.qp;
        match r.kind {
            ReplyKind::Ack | ReplyKind::ReadData(_) => {
                if q.sq[idx].done {
                    return;
                }
                if let ReplyKind::ReadData(Some(d)) = r.kind {
                    let (owner, sges) = (q.owner, q.sq[idx].wr.sg_list.clone());
                    self.scatter(owner, &sges, &d);
                }
                let q = self.qps.get_mut(&qpn).expect("present");
                // Cumulative: everything up to it has been executed by the responder.
                for w in q.sq.iter_mut().take(idx + 1) {
                    if w.wr.op.carries_data() && w.psn.is_some() {
                        w.done = true;
                    }
                }
                q.retry_left = q.init.retry_cnt;
                q.rnr_left = q.init.rnr_retry;
                self.rearm(s, cfg, qpn);
                self.retire(s, qpn);
            }
            ReplyKind::Rnr => {
                if q.init.rnr_retry < 7 {
                    if q.rnr_left == 0 {
                        self.fail_at(s, qpn, idx, WcStatus::RnrRetryExceeded);
                        return;
                    }
                    q.rnr_left -= 1;
                }
                for w in q.sq.iter_mut().take(idx) {
                    w.done = true;
                }
                Self::go_back(q, idx);
                q.paused_until = now + cfg.rnr_timeout_ps;
                q.timer_armed = false;
                q.timer_gen += 1;
                let at = q.paused_until;
                s.at(
                    at,
                    Ev::Kick {
                        host: self.index,
                        qp: qpn,
                    },
                );
                self.retire(s, qpn);
            }
            ReplyKind::RemoteAccess | ReplyKind::InvalidRequest => {
                // The seam has no REM_INV_REQ status; a SEND too long for its RECV reports as
                // a remote access error too (the requester's QP goes to Error either way).
                self.fail_at(s, qpn, idx, WcStatus::RemoteAccessError);
            }
        }
    }

    pub(super) fn on_timeout(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        qpn: QpNum,
        epoch: u64,
        gen: u64,
    ) {
        if self.dead {
            return;
        }
        let Some(q) = self.qps.get_mut(&qpn).filter(|q| q.epoch == epoch) else {
            return;
        };
        if q.state != QpState::Rts || !q.timer_armed || q.timer_gen != gen {
            return;
        }
        q.timer_armed = false;
        let Some(idx) =
            q.sq.iter()
                .position(|w| w.wr.op.carries_data() && w.sent && !w.done)
        else {
            return;
        };
        if q.retry_left == 0 {
            self.fail_at(s, qpn, idx, WcStatus::RetryExceeded);
            return;
        }
        q.retry_left -= 1;
        Self::go_back(q, idx);
        self.pump(s, cfg, qpn);
    }

    // ------------------------------------------------------------------ responder

    /// Processes a request that reached QP `m.dst_qp` of this NIC. `src_ok` says whether the
    /// message comes from the QP the destination is connected to (RC/UC). Returns the reply to
    /// send (RC only) and when it reaches the requester.
    pub(super) fn respond(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        m: Msg,
        src_addrs: &[u32],
    ) -> Option<(u64, ReplyKind)> {
        let now = s.now;
        let lat = cfg.latency_ps;
        let qpn = m.dst_qp;
        let q = self.qps.get_mut(&qpn)?;
        if q.init.qp_type != m.qp_type || !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return None;
        }
        if m.qp_type != QpType::Ud {
            let r = q.remote?;
            if r.qpn != m.src_qp || !src_addrs.contains(&r.host) {
                return None;
            }
        }
        let rc = m.qp_type == QpType::Rc;
        // Replies leave a responder QP in order (an ACK never overtakes READ data).
        fn reply_at(q: &mut Qp, t: u64) -> u64 {
            let t = t.max(q.last_reply_at);
            q.last_reply_at = t;
            t
        }
        if rc {
            if m.psn > q.expected_psn {
                // Out of sequence (an earlier message was lost): dropped; the requester's
                // timer recovers.
                return None;
            }
            if m.psn < q.expected_psn && !matches!(m.op, SendOp::Read) {
                // A duplicate: acknowledged again, not executed again.
                let t = reply_at(q, now + lat);
                return Some((t, ReplyKind::Ack));
            }
        }
        let owner = q.owner;
        let needs_recv = matches!(
            m.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
        );
        if needs_recv {
            let usable =
                q.rq.front()
                    .is_some_and(|r| !q.init.managed_recv || r.seq < q.recv_enabled);
            if !usable {
                return if rc {
                    let t = reply_at(q, now + lat);
                    Some((t, ReplyKind::Rnr))
                } else {
                    None
                };
            }
        }
        let (recv_cq, epoch) = (q.init.recv_cq, q.epoch);
        let is_rdma = matches!(m.op, SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read);
        // A zero-length RDMA operation checks no key (IBA C9-88).
        if is_rdma && m.len > 0 {
            let read = matches!(m.op, SendOp::Read);
            let ok = self
                .rkeys
                .get(&m.rkey)
                .and_then(|l| self.mrs.get(l))
                .is_some_and(|mr| {
                    mr.owner == owner
                        && mr.covers(m.remote_addr, m.len)
                        && if read {
                            mr.access.remote_read
                        } else {
                            mr.access.remote_write
                        }
                });
            if !ok {
                if !rc {
                    // UC: the message is silently dropped (class E).
                    return None;
                }
                // Class C: NAK, and the responder's QP goes to Error too.
                let q = self.qps.get_mut(&qpn).expect("present");
                if needs_recv {
                    let r = q.rq.pop_front().expect("usable");
                    let mut c = wc(
                        r.wr.wr_id,
                        WcStatus::RemoteAccessError,
                        WcOpcode::RecvWithImm,
                        0,
                        qpn,
                    );
                    c.src_host = m.src_addr;
                    c.src_qp = m.src_qp;
                    self.push_cqe(s, recv_cq, c, Slot::Recv { qp: qpn, epoch });
                }
                let q = self.qps.get_mut(&qpn).expect("present");
                let t = reply_at(q, now + lat);
                self.enter_error(s, qpn);
                return Some((t, ReplyKind::RemoteAccess));
            }
        }
        let grh = if m.qp_type == QpType::Ud && cfg.ud_grh {
            GRH_BYTES
        } else {
            0
        };
        let q = self.qps.get_mut(&qpn).expect("present");
        if matches!(m.op, SendOp::Send | SendOp::SendWithImm(_)) {
            let r = q.rq.front().expect("usable");
            let cap: u64 = r.wr.sg_list.iter().map(|s| s.length as u64).sum();
            if m.len + grh > cap {
                let r = q.rq.pop_front().expect("usable");
                let mut c = wc(
                    r.wr.wr_id,
                    WcStatus::LocalLengthError,
                    WcOpcode::Recv,
                    m.len + grh,
                    qpn,
                );
                c.src_host = m.src_addr;
                c.src_qp = m.src_qp;
                let t = reply_at(q, now + lat);
                self.push_cqe(s, recv_cq, c, Slot::Recv { qp: qpn, epoch });
                if rc {
                    self.enter_error(s, qpn);
                    return Some((t, ReplyKind::InvalidRequest));
                }
                return None;
            }
        }
        // Execute.
        let mut read_data = None;
        match m.op {
            SendOp::Write | SendOp::WriteWithImm(_) => {
                if let Some(d) = &m.payload {
                    if self.tracked(owner, m.remote_addr, m.len) {
                        self.write_mem(owner, m.remote_addr, d);
                    }
                }
            }
            SendOp::Read if m.len > 0 && self.tracked(owner, m.remote_addr, m.len) => {
                read_data = Some(self.read_mem(owner, m.remote_addr, m.len));
            }
            _ => {}
        }
        let q = self.qps.get_mut(&qpn).expect("present");
        if needs_recv {
            let r = q.rq.pop_front().expect("usable");
            let (opcode, imm, byte_len) = match m.op {
                SendOp::Send => (WcOpcode::Recv, None, m.len + grh),
                SendOp::SendWithImm(i) => (WcOpcode::RecvWithImm, Some(i), m.len + grh),
                SendOp::WriteWithImm(i) => (WcOpcode::RecvWithImm, Some(i), m.len),
                _ => unreachable!("only these consume a RECV"),
            };
            if matches!(m.op, SendOp::Send | SendOp::SendWithImm(_)) {
                // UD: the GRH (zeros here) fills the first 40 bytes of the buffer.
                let data = match &m.payload {
                    Some(p) => Some([vec![0u8; grh as usize], p.clone()].concat()),
                    None if grh > 0 => Some(vec![0u8; grh as usize]),
                    None => None,
                };
                if let Some(d) = data {
                    self.scatter(owner, &r.wr.sg_list, &d);
                }
            }
            let mut c = wc(r.wr.wr_id, WcStatus::Success, opcode, byte_len, qpn);
            c.imm = imm;
            c.src_host = m.src_addr;
            c.src_qp = m.src_qp;
            self.push_cqe(s, recv_cq, c, Slot::Recv { qp: qpn, epoch });
        }
        if !rc {
            return None;
        }
        let q = self.qps.get_mut(&qpn).expect("present");
        if m.psn == q.expected_psn {
            q.expected_psn += 1;
        }
        if matches!(m.op, SendOp::Read) {
            let start = now.max(self.link_free);
            let end = start + ser_ps(&self.caps, m.len);
            self.link_free = end;
            let q = self.qps.get_mut(&qpn).expect("present");
            let t = reply_at(q, end + lat);
            Some((t, ReplyKind::ReadData(read_data)))
        } else {
            let t = reply_at(q, now + lat);
            Some((t, ReplyKind::Ack))
        }
    }
}
