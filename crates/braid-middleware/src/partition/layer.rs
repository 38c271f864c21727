//! The `partition` layer: one logical RC connection over several member QPs.
//!
//! Every member QP (the application's included) is created on the layer's private CQ, so the
//! layer sees every chunk's completion first; the application's CQs are served from software
//! buffers (its `poll_cq` and `req_notify_cq` of them), with one completion per application WR,
//! in posting order, and a completion event per arming, as ibverbs gives.
//!
//! Sender bookkeeping per message: how many of its chunks completed, how many wait unpinned in
//! the shared queue, and how many are pinned to or outstanding on each member (`on`). The last
//! chunk of a message the receiver must see complete (SEND, *_WITH_IMM) is held until every
//! earlier chunk either completed or sits on the one member it will go to (RC keeps a QP's
//! order), so the receiver's completion still implies that all earlier data was placed.

use super::rx::{Ready, RxState};
use super::wire::*;
use super::{Assign, PartitionConfig, MAX_QPS};
use braid_verbs::rendezvous::{Endpoint, SharedBoard, Side};
use braid_verbs::*;
use std::collections::{BTreeMap, VecDeque};

/// A layer's wake to itself: completions it made outside an event wait to be announced.
const WAKE_NOTIFY: u64 = 0x5041_5254_0001;
/// Layer wr_ids of receive buffers carry this bit (the rest: the buffer's index).
pub(super) const RECV_TAG: u64 = 1 << 62;
/// The unsignaled header SEND that precedes a WRITE_WITH_IMM chunk.
const HDR_TAG: u64 = 1 << 61;
/// Where the layer's own regions live in the host's address space (one 1 TiB window per tenant).
const BASE_ADDR: u64 = 0x5052_0000_0000_0000;
/// Header slots for SEND chunks in flight (32 B each).
const HDR_SLOTS: u32 = 8192;
const PRIVATE_CQ_DEPTH: u32 = 1 << 17;

const CHUNK_NAMES: [&str; MAX_QPS as usize] = [
    "chunks_q0",
    "chunks_q1",
    "chunks_q2",
    "chunks_q3",
    "chunks_q4",
    "chunks_q5",
    "chunks_q6",
    "chunks_q7",
    "chunks_q8",
    "chunks_q9",
    "chunks_q10",
    "chunks_q11",
    "chunks_q12",
    "chunks_q13",
    "chunks_q14",
    "chunks_q15",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A WRITE at the application's remote address plus the offset.
    Write,
    /// A SEND of header + payload into the receiver's buffers.
    Send,
    /// Header SEND, then WRITE_WITH_IMM with the application's imm (the last chunk).
    WriteImm,
    /// The application's WR as it is (READ, NOP): one chunk.
    Whole,
}

#[derive(Debug, Clone)]
struct Chunk {
    id: u32,
    offset: u64,
    len: u64,
    kind: Kind,
    /// The held-back last chunk of a message completing at the receiver.
    fin: bool,
    pin: Option<usize>,
}

struct Msg {
    id: u32,
    wr: SendWr,
    total: u64,
    nchunks: u32,
    completed: u32,
    held: Option<Chunk>,
    /// Chunks waiting in the shared (unpinned) queue.
    unpinned: u32,
    /// Per member: chunks pinned to it (queued) or outstanding on it.
    on: [u32; MAX_QPS as usize],
    opcode: WcOpcode,
}

struct Member {
    qpn: QpNum,
    failed: bool,
    out_bytes: u64,
    out_chunks: u32,
}

pub(super) struct Conn {
    send_cq: CqId,
    recv_cq: CqId,
    sig_all: bool,
    max_send_wr: u32,
    members: Vec<Member>,
    pub(super) peer: Option<RemoteQp>,
    connected: bool,
    error: bool,
    msgs: VecDeque<Msg>,
    shared: VecDeque<Chunk>,
    pinned: Vec<VecDeque<Chunk>>,
    next_id: u32,
    rr: usize,
    pub(super) rx: RxState,
}

impl Conn {
    fn alive(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&m| !self.members[m].failed)
            .collect()
    }
}

struct Inflight {
    app_qp: QpNum,
    member: usize,
    chunk: Chunk,
    slot: Option<u32>,
}

#[derive(Debug, Default)]
struct AppCq {
    armed: bool,
    buf: VecDeque<WorkCompletion>,
    fresh: bool,
}

#[derive(Debug, Default, Clone)]
pub(super) struct Counters {
    pub chunks: [u64; MAX_QPS as usize],
    pub messages: u64,
    pub resent: u64,
    pub member_failures: u64,
    pub conn_errors: u64,
    pub conns_multi: u64,
    pub conns_single: u64,
    pub rx_chunks: u64,
    pub rx_dups: u64,
    pub copied: u64,
    pub slot_waits: u64,
}

/// The layer `partition` puts in a tenant's stack.
pub struct PartitionLayer {
    pub(super) cfg: PartitionConfig,
    board: SharedBoard,
    cq: Option<CqId>,
    hdr_mr: Option<MemoryRegion>,
    free_slots: Vec<u32>,
    next_addr: u64,
    pub(super) conns: BTreeMap<QpNum, Conn>,
    member_of: BTreeMap<QpNum, (QpNum, usize)>,
    app_cqs: BTreeMap<CqId, AppCq>,
    inflight: BTreeMap<u64, Inflight>,
    next_wr: u64,
    /// Receive buffers by index: (application QP, member, address, lkey).
    pub(super) bufs: Vec<(QpNum, usize, u64, u32)>,
    wake_pending: bool,
    pub(super) c: Counters,
}

impl PartitionLayer {
    pub fn new(cfg: PartitionConfig, tenant: TenantId, board: SharedBoard) -> Self {
        PartitionLayer {
            cfg,
            board,
            cq: None,
            hdr_mr: None,
            free_slots: Vec::new(),
            next_addr: BASE_ADDR + ((tenant as u64 & 0xFFF) << 40),
            conns: BTreeMap::new(),
            member_of: BTreeMap::new(),
            app_cqs: BTreeMap::new(),
            inflight: BTreeMap::new(),
            next_wr: 1,
            bufs: Vec::new(),
            wake_pending: false,
            c: Counters::default(),
        }
    }

    /// Bytes of address space for a region of the layer's own.
    pub(super) fn alloc(&mut self, len: u64) -> u64 {
        let a = self.next_addr;
        self.next_addr += (len + 4095) & !4095;
        a
    }

    fn private_cq(&mut self, below: &mut dyn Verbs) -> Result<CqId, VerbsError> {
        if let Some(c) = self.cq {
            return Ok(c);
        }
        let c = below.create_cq(PRIVATE_CQ_DEPTH)?;
        below.req_notify_cq(c)?;
        self.cq = Some(c);
        Ok(c)
    }

    fn slot(&mut self, below: &mut dyn Verbs) -> Option<(u32, u64, u32)> {
        if self.hdr_mr.is_none() {
            let addr = self.alloc(HDR_SLOTS as u64 * HDR);
            let mr = below
                .reg_mr(addr, HDR_SLOTS as u64 * HDR, Access::LOCAL.tracked())
                .ok()?;
            self.hdr_mr = Some(mr);
            self.free_slots = (0..HDR_SLOTS).rev().collect();
        }
        let mr = self.hdr_mr.expect("registered");
        let s = self.free_slots.pop()?;
        Some((s, mr.addr + s as u64 * HDR, mr.lkey))
    }

    /// A completion for the application's CQ `cq`.
    pub(super) fn push_app(&mut self, cq: CqId, wc: WorkCompletion) {
        let c = self.app_cqs.entry(cq).or_default();
        c.buf.push_back(wc);
        if c.armed {
            c.fresh = true;
        }
    }

    /// Announces fresh completions of armed CQs: into `up` inside an event, else by a wake to
    /// ourselves (delivered after the current call).
    fn announce(&mut self, below: &mut dyn Verbs, up: Option<&mut Vec<Event>>) {
        match up {
            Some(up) => {
                for (&cq, c) in self.app_cqs.iter_mut() {
                    if c.armed && c.fresh {
                        c.armed = false;
                        c.fresh = false;
                        up.push(Event::Completion(cq));
                    }
                }
            }
            None => {
                let any = self.app_cqs.values().any(|c| c.armed && c.fresh);
                if any && !self.wake_pending {
                    self.wake_pending = true;
                    below.wake(below.tenant(), WAKE_NOTIFY);
                }
            }
        }
    }

    // ------------------------------------------------------------------ sender

    /// Releases held last chunks, posts what the windows allow, reports finished messages.
    fn progress(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        self.release_finals(app_qp);
        self.pump(below, app_qp);
        self.report(app_qp);
    }

    fn release_finals(&mut self, app_qp: QpNum) {
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        if conn.error || !conn.connected {
            return;
        }
        let mut mask = 0u32;
        let mut released: Vec<(usize, Chunk)> = Vec::new();
        for i in 0..conn.msgs.len() {
            let msg = &conn.msgs[i];
            for (m, &k) in msg.on.iter().enumerate() {
                if k > 0 {
                    mask |= 1 << m;
                }
            }
            if msg.unpinned > 0 {
                break;
            }
            if msg.held.is_none() {
                continue;
            }
            if mask.count_ones() > 1 {
                break;
            }
            let target = if mask == 0 {
                // Nothing earlier is unfinished: the least loaded member.
                let alive = conn.alive();
                match alive.iter().min_by_key(|&&m| conn.members[m].out_bytes) {
                    Some(&m) => m,
                    None => break,
                }
            } else {
                mask.trailing_zeros() as usize
            };
            if conn.members[target].failed {
                break;
            }
            let msg = &mut conn.msgs[i];
            let mut h = msg.held.take().expect("checked");
            h.pin = Some(target);
            msg.on[target] += 1;
            mask |= 1 << target;
            released.push((target, h));
        }
        for (m, h) in released {
            conn.pinned[m].push_back(h);
        }
    }

    fn pump(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        let window = self.cfg.window.0;
        loop {
            let mut posted = false;
            let n = match self.conns.get(&app_qp) {
                Some(c) if c.connected && !c.error => c.members.len(),
                _ => return,
            };
            for m in 0..n {
                let conn = self.conns.get_mut(&app_qp).expect("checked");
                let mb = &conn.members[m];
                if mb.failed || (mb.out_chunks > 0 && mb.out_bytes >= window) {
                    continue;
                }
                let from_pinned = !conn.pinned[m].is_empty();
                let Some(ch) = (if from_pinned {
                    conn.pinned[m].front()
                } else {
                    conn.shared.front()
                }) else {
                    continue;
                };
                let ch = ch.clone();
                match self.post_chunk(below, app_qp, m, &ch) {
                    Ok(true) => {
                        let conn = self.conns.get_mut(&app_qp).expect("checked");
                        if from_pinned {
                            conn.pinned[m].pop_front();
                        } else {
                            conn.shared.pop_front();
                            if let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) {
                                msg.unpinned -= 1;
                                msg.on[m] += 1;
                            }
                        }
                        posted = true;
                    }
                    Ok(false) => {} // no header slot free now
                    Err(_) => {
                        // The member refused the post: it is in Error; its chunks move on.
                        self.member_failed(below, app_qp, m, WcStatus::Flushed);
                        posted = true;
                        break;
                    }
                }
                if self.conns.get(&app_qp).is_none_or(|c| c.error) {
                    return;
                }
            }
            if !posted {
                return;
            }
        }
    }

    /// Posts one chunk on member `m`. Ok(false): no header slot is free (retry later).
    fn post_chunk(
        &mut self,
        below: &mut dyn Verbs,
        app_qp: QpNum,
        m: usize,
        ch: &Chunk,
    ) -> Result<bool, VerbsError> {
        let needs_slot = matches!(ch.kind, Kind::Send | Kind::WriteImm);
        let slot = if needs_slot {
            match self.slot(below) {
                Some(s) => Some(s),
                None => {
                    self.c.slot_waits += 1;
                    return Ok(false);
                }
            }
        } else {
            None
        };
        let conn = self.conns.get(&app_qp).expect("checked");
        let msg = conn
            .msgs
            .iter()
            .find(|x| x.id == ch.id)
            .expect("a queued chunk's message is unreported");
        let qpn = conn.members[m].qpn;
        let app = &msg.wr;
        let wr_id = self.next_wr;
        self.next_wr += 1;
        let payload = slice_sges(&app.sg_list, ch.offset, ch.len);
        let imm = match app.op {
            SendOp::SendWithImm(i) | SendOp::WriteWithImm(i) => Some(i),
            _ => None,
        };
        let hdr = |flags: u16| Header {
            flags,
            id: ch.id,
            total: msg.total,
            offset: ch.offset,
            len: ch.len as u32,
            imm: imm.unwrap_or(0),
        };
        let mut wrs = Vec::with_capacity(2);
        match ch.kind {
            Kind::Write => {
                let mut w = SendWr::new(wr_id, SendOp::Write, payload);
                w.remote_addr = app.remote_addr + ch.offset;
                w.rkey = app.rkey;
                wrs.push(w);
            }
            Kind::Send => {
                let (_, addr, lkey) = slot.expect("taken");
                let flags = if imm.is_some() { F_IMM } else { 0 };
                below.write_local(addr, &hdr(flags).encode())?;
                let mut sg = vec![Sge {
                    addr,
                    length: HDR as u32,
                    lkey,
                }];
                sg.extend(payload);
                wrs.push(SendWr::new(wr_id, SendOp::Send, sg));
            }
            Kind::WriteImm => {
                let (_, addr, lkey) = slot.expect("taken");
                below.write_local(addr, &hdr(F_WRITE_IMM).encode())?;
                let mut h = SendWr::new(
                    wr_id | HDR_TAG,
                    SendOp::Send,
                    vec![Sge {
                        addr,
                        length: HDR as u32,
                        lkey,
                    }],
                );
                h.signaled = false;
                wrs.push(h);
                let mut w = SendWr::new(wr_id, SendOp::WriteWithImm(imm.unwrap_or(0)), payload);
                w.remote_addr = app.remote_addr + ch.offset;
                w.rkey = app.rkey;
                wrs.push(w);
            }
            Kind::Whole => {
                let mut w = app.clone();
                w.wr_id = wr_id;
                wrs.push(w);
            }
        }
        let n = wrs.len();
        for (i, mut w) in wrs.into_iter().enumerate() {
            if i + 1 == n {
                w.signaled = true;
            }
            if ch.kind != Kind::Whole {
                w.inline = app.inline;
                w.fence = app.fence;
            }
            below.charge(Work::WrBuilt(1));
            if let Err(e) = below.post_send(qpn, w) {
                if let Some((s, _, _)) = slot {
                    self.free_slots.push(s);
                }
                return Err(e);
            }
        }
        self.inflight.insert(
            wr_id,
            Inflight {
                app_qp,
                member: m,
                chunk: ch.clone(),
                slot: slot.map(|s| s.0),
            },
        );
        let mb = &mut self.conns.get_mut(&app_qp).expect("checked").members[m];
        mb.out_bytes += ch.len;
        mb.out_chunks += 1;
        Ok(true)
    }

    /// Queues a chunk again (its member failed): a held last chunk is held again; a static
    /// chunk goes to the next surviving member; a dynamic one to the shared queue.
    fn requeue(&mut self, app_qp: QpNum, mut ch: Chunk) {
        let st = self.cfg.assign == Assign::Static;
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        let alive = conn.alive();
        let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) else {
            return;
        };
        if ch.fin {
            ch.pin = None;
            msg.held = Some(ch);
        } else if st && !alive.is_empty() {
            let m = alive[conn.rr % alive.len()];
            conn.rr += 1;
            ch.pin = Some(m);
            msg.on[m] += 1;
            conn.pinned[m].push_back(ch);
        } else {
            ch.pin = None;
            msg.unpinned += 1;
            conn.shared.push_front(ch);
        }
    }

    /// Member `m` is in Error: drop it and move its queued chunks; with nobody left (or
    /// `resend = false`) the logical connection fails.
    fn member_failed(&mut self, below: &mut dyn Verbs, app_qp: QpNum, m: usize, status: WcStatus) {
        let resend = self.cfg.resend;
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        if conn.members[m].failed {
            return;
        }
        conn.members[m].failed = true;
        self.c.member_failures += 1;
        let queued: Vec<Chunk> = conn.pinned[m].drain(..).collect();
        for ch in &queued {
            if let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) {
                msg.on[m] -= 1;
            }
        }
        let qpn = conn.members[m].qpn;
        let none_left = conn.alive().is_empty();
        // Make sure its outstanding chunks come back (flushed) to be re-sent.
        let _ = below.modify_qp(qpn, QpModify::Error);
        if none_left || !resend {
            self.fail_conn(below, app_qp, status, None);
            return;
        }
        for ch in queued {
            self.requeue(app_qp, ch);
        }
    }

    /// The logical connection fails: every unreported message completes with an error (the
    /// failing one with `status`, the rest flushed), RECVs are flushed, members go to Error.
    fn fail_conn(
        &mut self,
        below: &mut dyn Verbs,
        app_qp: QpNum,
        status: WcStatus,
        failing: Option<u32>,
    ) {
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        if conn.error {
            return;
        }
        conn.error = true;
        self.c.conn_errors += 1;
        conn.shared.clear();
        for p in conn.pinned.iter_mut() {
            p.clear();
        }
        for mb in conn.members.iter_mut() {
            if !mb.failed {
                mb.failed = true;
                let _ = below.modify_qp(mb.qpn, QpModify::Error);
            }
        }
        let (send_cq, recv_cq, peer) = (conn.send_cq, conn.recv_cq, conn.peer);
        let msgs: Vec<Msg> = conn.msgs.drain(..).collect();
        let recvs: Vec<RecvWr> = conn.rx.app_recvs.drain(..).collect();
        let mut first = true;
        for msg in msgs {
            let st = if failing == Some(msg.id) || (failing.is_none() && first) {
                status
            } else {
                WcStatus::Flushed
            };
            first = false;
            self.push_app(send_cq, app_wc(msg.wr.wr_id, st, msg.opcode, 0, app_qp));
        }
        for r in recvs {
            let mut wc = app_wc(r.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, app_qp);
            if let Some(p) = peer {
                (wc.src_host, wc.src_qp) = (p.host, p.qpn);
            }
            self.push_app(recv_cq, wc);
        }
    }

    /// Reports finished messages from the front, in posting order.
    fn report(&mut self, app_qp: QpNum) {
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        let mut out = Vec::new();
        while conn
            .msgs
            .front()
            .is_some_and(|m| m.completed == m.nchunks && m.held.is_none())
        {
            let msg = conn.msgs.pop_front().expect("checked");
            if msg.wr.signaled || conn.sig_all {
                out.push(app_wc(
                    msg.wr.wr_id,
                    WcStatus::Success,
                    msg.opcode,
                    msg.total,
                    app_qp,
                ));
            }
        }
        let cq = conn.send_cq;
        for wc in out {
            self.push_app(cq, wc);
        }
    }

    fn on_send_wc(&mut self, below: &mut dyn Verbs, wc: &WorkCompletion) -> Option<QpNum> {
        if wc.wr_id & HDR_TAG != 0 {
            // A WRITE_WITH_IMM's header: only an error shows; the chunk behind it is flushed
            // and handled on its own completion.
            return None;
        }
        let inf = self.inflight.remove(&wc.wr_id)?;
        if let Some(s) = inf.slot {
            self.free_slots.push(s);
        }
        let (app_qp, m) = (inf.app_qp, inf.member);
        let conn = self.conns.get_mut(&app_qp)?;
        let mb = &mut conn.members[m];
        mb.out_bytes -= inf.chunk.len;
        mb.out_chunks -= 1;
        let msg = conn.msgs.iter_mut().find(|x| x.id == inf.chunk.id)?;
        msg.on[m] -= 1;
        if wc.status == WcStatus::Success {
            msg.completed += 1;
            self.c.chunks[m] += 1;
            return Some(app_qp);
        }
        if conn.error {
            return Some(app_qp);
        }
        let retryable = matches!(
            wc.status,
            WcStatus::RetryExceeded | WcStatus::RnrRetryExceeded | WcStatus::Flushed
        );
        if !retryable || !self.cfg.resend {
            // The application's fault (remote access) or no re-sending: its WR fails.
            let id = inf.chunk.id;
            self.fail_conn(below, app_qp, wc.status, Some(id));
            return Some(app_qp);
        }
        let others = conn.alive().iter().any(|&k| k != m);
        if !others {
            let id = inf.chunk.id;
            self.fail_conn(below, app_qp, wc.status, Some(id));
            return Some(app_qp);
        }
        self.member_failed(below, app_qp, m, wc.status);
        if self.conns.get(&app_qp).is_some_and(|c| !c.error) {
            self.c.resent += 1;
            self.requeue(app_qp, inf.chunk);
        }
        Some(app_qp)
    }

    /// Drains the private CQ and acts on everything in it.
    fn drain(&mut self, below: &mut dyn Verbs, up: Option<&mut Vec<Event>>) {
        let Some(cq) = self.cq else { return };
        let mut wcs = Vec::new();
        if poll_and_rearm(below, cq, &mut wcs).is_err() {
            while below.poll_cq(cq, 256, &mut wcs) > 0 {}
        }
        let mut touched: Vec<QpNum> = Vec::new();
        for wc in &wcs {
            let t = if wc.wr_id & RECV_TAG != 0 {
                self.on_recv_wc(below, wc)
            } else {
                self.on_send_wc(below, wc)
            };
            if let Some(q) = t {
                if !touched.contains(&q) {
                    touched.push(q);
                }
            }
        }
        for q in touched {
            self.progress(below, q);
            self.deliver_ready(below, q);
        }
        self.announce(below, up);
    }

    // ------------------------------------------------------------------ receiver

    /// Posts the layer's receive buffers on every member of `app_qp` (once the application
    /// shows it uses RECVs and the connection is up).
    fn ensure_bufs(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        let per = self.cfg.recv_buffers as u64;
        let size = HDR + self.cfg.chunk.0;
        let Some(conn) = self.conns.get(&app_qp) else {
            return;
        };
        if conn.rx.bufs_posted || !conn.connected || conn.error {
            return;
        }
        let n = conn.members.len() as u64;
        let addr = self.alloc(n * per * size);
        let Ok(mr) = below.reg_mr(addr, n * per * size, Access::LOCAL.tracked()) else {
            return;
        };
        self.conns.get_mut(&app_qp).expect("checked").rx.bufs_posted = true;
        for m in 0..n as usize {
            for j in 0..per {
                let a = addr + (m as u64 * per + j) * size;
                let idx = self.bufs.len();
                self.bufs.push((app_qp, m, a, mr.lkey));
                self.repost(below, idx);
            }
        }
    }

    pub(super) fn repost(&mut self, below: &mut dyn Verbs, idx: usize) {
        let (app_qp, m, addr, lkey) = self.bufs[idx];
        let Some(conn) = self.conns.get(&app_qp) else {
            return;
        };
        let mb = &conn.members[m];
        if mb.failed {
            return;
        }
        let wr = RecvWr {
            wr_id: RECV_TAG | idx as u64,
            sg_list: vec![Sge {
                addr,
                length: (HDR + self.cfg.chunk.0) as u32,
                lkey,
            }],
        };
        let _ = below.post_recv(mb.qpn, wr);
    }

    /// Hands complete messages to the application's posted RECVs, in order.
    fn deliver_ready(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        loop {
            let Some(conn) = self.conns.get_mut(&app_qp) else {
                return;
            };
            if conn.rx.ready.is_empty() || conn.rx.app_recvs.is_empty() {
                return;
            }
            let r: Ready = conn.rx.ready.pop_front().expect("checked");
            let recv = conn.rx.app_recvs.pop_front().expect("checked");
            let (cq, peer) = (conn.recv_cq, conn.peer);
            let cap: u64 = recv.sg_list.iter().map(|s| s.length as u64).sum();
            let mut status = WcStatus::Success;
            if let Some(data) = &r.data {
                if r.total > cap {
                    status = WcStatus::LocalLengthError;
                } else {
                    // The reassembled message goes into the application's buffer: a copy.
                    let mut off = 0usize;
                    for s in &recv.sg_list {
                        if off >= data.len() {
                            break;
                        }
                        let k = (s.length as usize).min(data.len() - off);
                        let _ = below.write_local(s.addr, &data[off..off + k]);
                        off += k;
                    }
                    below.charge(Work::Copy(r.total));
                    self.c.copied += r.total;
                }
            }
            let op = if r.imm.is_some() {
                WcOpcode::RecvWithImm
            } else {
                WcOpcode::Recv
            };
            let mut wc = app_wc(recv.wr_id, status, op, r.total, app_qp);
            wc.imm = r.imm;
            if let Some(p) = peer {
                (wc.src_host, wc.src_qp) = (p.host, p.qpn);
            }
            self.push_app(cq, wc);
        }
    }

    pub(super) fn read_local_charged(
        &mut self,
        below: &mut dyn Verbs,
        addr: u64,
        len: u64,
    ) -> Option<Vec<u8>> {
        below.read_local(addr, len).ok()
    }
}

fn app_wc(wr_id: u64, status: WcStatus, opcode: WcOpcode, len: u64, qp: QpNum) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode,
        byte_len: len,
        imm: None,
        qp_num: qp,
        src_host: 0,
        src_qp: 0,
    }
}

fn opcode_of(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
        SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
        SendOp::Read => WcOpcode::Read,
        _ => WcOpcode::Nop,
    }
}

impl Middleware for PartitionLayer {
    fn name(&self) -> &'static str {
        "partition"
    }

    fn start(&mut self, below: &mut dyn Verbs) {
        let _ = self.private_cq(below);
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v: Vec<(&'static str, f64)> = (0..self.cfg.qps as usize)
            .map(|i| (CHUNK_NAMES[i], self.c.chunks[i] as f64))
            .collect();
        v.extend([
            ("chunks", self.c.chunks.iter().sum::<u64>() as f64),
            ("messages", self.c.messages as f64),
            ("resent", self.c.resent as f64),
            ("member_failures", self.c.member_failures as f64),
            ("conn_errors", self.c.conn_errors as f64),
            ("conns_multi", self.c.conns_multi as f64),
            ("conns_single", self.c.conns_single as f64),
            ("rx_chunks", self.c.rx_chunks as f64),
            ("rx_dups", self.c.rx_dups as f64),
            ("copied_bytes", self.c.copied as f64),
            ("slot_waits", self.c.slot_waits as f64),
        ]);
        v
    }

    fn req_notify_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        below.req_notify_cq(cq)?;
        // (The application may arm a CQ before it creates the QPs that use it.)
        let c = self.app_cqs.entry(cq).or_default();
        c.armed = true;
        c.fresh = false;
        Ok(())
    }

    fn create_qp(&mut self, below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        if init.qp_type != QpType::Rc {
            return below.create_qp(init);
        }
        let pcq = self.private_cq(below)?;
        let naddr = below.caps().local_addrs.len().max(1) as u32;
        let mut depth = init.max_send_wr;
        let cap = below.caps().max_qp_wr;
        if cap > 0 {
            depth = depth.min(cap);
        }
        let mk = |i: u32| QpInit {
            send_cq: pcq,
            recv_cq: pcq,
            sq_sig_all: false,
            max_send_wr: depth,
            max_recv_wr: init.max_recv_wr.max(self.cfg.recv_buffers * 2),
            local_addr: if self.cfg.spread_addrs {
                ((init.local_addr as u32 + i) % naddr) as u8
            } else {
                init.local_addr
            },
            ..init.clone()
        };
        let app_qp = below.create_qp(&mk(0))?;
        let mut members = vec![app_qp];
        for i in 1..self.cfg.qps {
            match below.create_qp(&mk(i)) {
                Ok(q) => members.push(q),
                Err(_) => break, // fewer members: still a working connection
            }
        }
        let host = below.local_host();
        {
            let mut b = self.board.borrow_mut();
            let ep = |qpn| Endpoint {
                host,
                qpn,
                addr: 0,
                rkey: 0,
            };
            b.publish(
                board_key(host, app_qp, 0),
                Side::Client,
                ep(members.len() as u32),
            );
            for (i, &q) in members.iter().enumerate().skip(1) {
                b.publish(board_key(host, app_qp, i as u32), Side::Client, ep(q));
            }
        }
        for (i, &q) in members.iter().enumerate() {
            self.member_of.insert(q, (app_qp, i));
        }
        self.app_cqs.entry(init.send_cq).or_default();
        self.app_cqs.entry(init.recv_cq).or_default();
        let n = members.len();
        self.conns.insert(
            app_qp,
            Conn {
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                sig_all: init.sq_sig_all,
                max_send_wr: init.max_send_wr,
                members: members
                    .into_iter()
                    .map(|qpn| Member {
                        qpn,
                        failed: false,
                        out_bytes: 0,
                        out_chunks: 0,
                    })
                    .collect(),
                peer: None,
                connected: false,
                error: false,
                msgs: VecDeque::new(),
                shared: VecDeque::new(),
                pinned: (0..n).map(|_| VecDeque::new()).collect(),
                next_id: 0,
                rr: 0,
                rx: RxState::default(),
            },
        );
        Ok(app_qp)
    }

    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let Some(conn) = self.conns.get(&qp) else {
            return below.connect_qp(qp, remote);
        };
        let host = below.local_host();
        // How many members the peer has (none published: it does not run the layer).
        let peers = {
            let b = self.board.borrow();
            let n = b
                .lookup(board_key(remote.host, remote.qpn, 0), Side::Client)
                .map_or(1, |e| e.qpn as usize);
            let mut peers = vec![remote.qpn];
            for i in 1..n.min(conn.members.len()) {
                match b.lookup(board_key(remote.host, remote.qpn, i as u32), Side::Client) {
                    Some(e) => peers.push(e.qpn),
                    None => break,
                }
            }
            peers
        };
        let sport = |i: usize| Some(member_sport(host, qp, i as u32));
        below.connect_qp(
            qp,
            RemoteQp {
                udp_sport: remote.udp_sport.or(sport(0)),
                ..remote
            },
        )?;
        let mut used = 1;
        for (i, &pq) in peers.iter().enumerate().skip(1) {
            let mq = self.conns[&qp].members[i].qpn;
            let r = RemoteQp {
                host: remote.host,
                qpn: pq,
                udp_sport: sport(i),
            };
            if below.connect_qp(mq, r).is_err() {
                break;
            }
            used += 1;
        }
        // Members beyond what both ends have are not needed.
        let conn = self.conns.get_mut(&qp).expect("checked");
        let extra: Vec<QpNum> = conn.members.drain(used..).map(|m| m.qpn).collect();
        conn.pinned.truncate(used);
        conn.peer = Some(remote);
        conn.connected = true;
        if used > 1 {
            self.c.conns_multi += 1;
        } else {
            self.c.conns_single += 1;
        }
        for q in extra {
            self.member_of.remove(&q);
            let _ = below.destroy_qp(q);
        }
        if !self.conns[&qp].rx.app_recvs.is_empty() {
            self.ensure_bufs(below, qp);
        }
        Ok(())
    }

    fn destroy_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<(), VerbsError> {
        let Some(conn) = self.conns.get(&qp) else {
            return below.destroy_qp(qp);
        };
        below.destroy_qp(qp)?;
        let others: Vec<QpNum> = conn.members.iter().skip(1).map(|m| m.qpn).collect();
        for q in others {
            let _ = below.destroy_qp(q);
            self.member_of.remove(&q);
        }
        self.member_of.remove(&qp);
        self.conns.remove(&qp);
        self.inflight.retain(|_, f| f.app_qp != qp);
        for c in self.app_cqs.values_mut() {
            c.buf.retain(|w| w.qp_num != qp);
        }
        Ok(())
    }

    fn modify_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        if !self.conns.contains_key(&qp) {
            return below.modify_qp(qp, m);
        }
        match m {
            QpModify::Error => {
                self.fail_conn(below, qp, WcStatus::Flushed, None);
                let _ = below.modify_qp(qp, QpModify::Error);
                self.announce(below, None);
            }
            QpModify::Reset => {
                let conn = self.conns.get_mut(&qp).expect("checked");
                let qpns: Vec<QpNum> = conn.members.iter().map(|m| m.qpn).collect();
                for &q in &qpns {
                    below.modify_qp(q, QpModify::Reset)?;
                }
                for mb in conn.members.iter_mut() {
                    (mb.failed, mb.out_bytes, mb.out_chunks) = (false, 0, 0);
                }
                conn.msgs.clear();
                conn.shared.clear();
                conn.pinned.iter_mut().for_each(|p| p.clear());
                (conn.connected, conn.error, conn.peer) = (false, false, None);
                conn.rx = RxState::default();
                self.inflight.retain(|_, f| f.app_qp != qp);
                self.bufs.retain(|b| b.0 != qp);
                for c in self.app_cqs.values_mut() {
                    c.buf.retain(|w| w.qp_num != qp);
                }
            }
            QpModify::UdpSport(_) => below.modify_qp(qp, m)?,
        }
        Ok(())
    }

    fn query_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<QpAttr, VerbsError> {
        let mut a = below.query_qp(qp)?;
        if let Some(c) = self.conns.get(&qp) {
            // The logical QP's state, not member 0's.
            a.state = if c.error {
                QpState::Error
            } else if c.connected {
                QpState::Rts
            } else {
                a.state
            };
            a.send_cq = c.send_cq;
            a.recv_cq = c.recv_cq;
            a.send_outstanding = c.msgs.len() as u32;
            a.remote = c.peer.or(a.remote);
        }
        Ok(a)
    }

    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        let chunk = self.cfg.chunk.0;
        let st = self.cfg.assign == Assign::Static;
        let Some(conn) = self.conns.get_mut(&qp) else {
            return below.post_send(qp, wr);
        };
        if matches!(
            wr.op,
            SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. }
        ) {
            return Err(VerbsError::Unsupported(
                "cross-channel work requests on a partitioned QP",
            ));
        }
        if conn.error {
            // A QP in Error: the WR completes flushed at once (ibverbs).
            let cq = conn.send_cq;
            let op = opcode_of(&wr.op);
            self.push_app(cq, app_wc(wr.wr_id, WcStatus::Flushed, op, 0, qp));
            self.announce(below, None);
            return Ok(());
        }
        if !conn.connected {
            return Err(VerbsError::InvalidState("QP is not connected"));
        }
        if conn.msgs.len() >= conn.max_send_wr as usize {
            return Err(VerbsError::QueueFull);
        }
        let total = wr.len();
        let (kind, fin_kind) = match wr.op {
            SendOp::Write => (Kind::Write, None),
            SendOp::WriteWithImm(_) => (Kind::Write, Some(Kind::WriteImm)),
            SendOp::Send | SendOp::SendWithImm(_) => (Kind::Send, Some(Kind::Send)),
            _ => (Kind::Whole, None),
        };
        let whole = kind == Kind::Whole || wr.inline;
        let nchunks = if whole {
            1
        } else {
            total.div_ceil(chunk).max(1) as u32
        };
        let id = conn.next_id;
        conn.next_id = conn.next_id.wrapping_add(1);
        let mut msg = Msg {
            id,
            opcode: opcode_of(&wr.op),
            wr,
            total,
            nchunks,
            completed: 0,
            held: None,
            unpinned: 0,
            on: [0; MAX_QPS as usize],
        };
        let alive = conn.alive();
        for k in 0..nchunks {
            let offset = k as u64 * chunk;
            let len = if whole {
                total
            } else {
                chunk.min(total - offset.min(total))
            };
            let last = k + 1 == nchunks;
            let mut ch = Chunk {
                id,
                offset,
                len,
                kind: if last { fin_kind.unwrap_or(kind) } else { kind },
                fin: last && fin_kind.is_some(),
                pin: None,
            };
            if whole {
                ch.kind = if kind == Kind::Whole {
                    Kind::Whole
                } else {
                    fin_kind.unwrap_or(kind)
                };
            }
            if ch.fin {
                msg.held = Some(ch);
            } else if st && !alive.is_empty() {
                let m = alive[conn.rr % alive.len()];
                conn.rr += 1;
                ch.pin = Some(m);
                msg.on[m] += 1;
                conn.pinned[m].push_back(ch);
            } else {
                msg.unpinned += 1;
                conn.shared.push_back(ch);
            }
        }
        conn.msgs.push_back(msg);
        self.c.messages += 1;
        self.progress(below, qp);
        self.announce(below, None);
        Ok(())
    }

    fn post_recv(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        let Some(conn) = self.conns.get_mut(&qp) else {
            return below.post_recv(qp, wr);
        };
        if conn.error {
            let cq = conn.recv_cq;
            self.push_app(
                cq,
                app_wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qp),
            );
            self.announce(below, None);
            return Ok(());
        }
        conn.rx.app_recvs.push_back(wr);
        self.ensure_bufs(below, qp);
        self.deliver_ready(below, qp);
        self.announce(below, None);
        Ok(())
    }

    fn poll_cq(
        &mut self,
        below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        if !self.app_cqs.contains_key(&cq) {
            return below.poll_cq(cq, max, out);
        }
        self.drain(below, None);
        let c = self.app_cqs.get_mut(&cq).expect("checked");
        let n = max.min(c.buf.len());
        out.extend(c.buf.drain(..n));
        if c.buf.is_empty() {
            c.fresh = false;
        }
        // QPs the layer does not manage (UD, UC) may share the CQ.
        n + if n < max {
            below.poll_cq(cq, max - n, out)
        } else {
            0
        }
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Completion(cq) if Some(cq) == self.cq => self.drain(below, Some(up)),
            Event::Completion(cq) if self.app_cqs.contains_key(&cq) => {
                // An unmanaged QP's completion on the application's CQ.
                let c = self.app_cqs.get_mut(&cq).expect("checked");
                if c.armed {
                    c.armed = false;
                    c.fresh = false;
                    up.push(event);
                }
            }
            Event::Wake(WAKE_NOTIFY) => {
                self.wake_pending = false;
                self.drain(below, Some(up));
            }
            e => up.push(e),
        }
    }
}

impl PartitionLayer {
    /// A receive completion on a member (see `rx.rs`).
    fn on_recv_wc(&mut self, below: &mut dyn Verbs, wc: &WorkCompletion) -> Option<QpNum> {
        let idx = (wc.wr_id & !RECV_TAG) as usize;
        let &(app_qp, m, addr, _) = self.bufs.get(idx)?;
        if wc.status != WcStatus::Success {
            return Some(app_qp); // flushed: the member failed; nothing to repost
        }
        self.on_chunk_received(below, app_qp, m, addr, wc);
        self.repost(below, idx);
        Some(app_qp)
    }
}
