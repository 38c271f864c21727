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

use super::conn::*;
use super::rx::RxState;
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
pub(super) const HDR_TAG: u64 = 1 << 61;
/// The application's RECVs posted as they are on a connection to a peer without the layer.
const PLAIN_TAG: u64 = 1 << 60;
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

/// The layer `partition` puts in a tenant's stack.
pub struct PartitionLayer {
    pub(super) cfg: PartitionConfig,
    pub(super) board: SharedBoard,
    pub(super) cq: Option<CqId>,
    pub(super) hdr_mr: Option<MemoryRegion>,
    pub(super) free_slots: Vec<u32>,
    pub(super) next_addr: u64,
    pub(super) conns: BTreeMap<QpNum, Conn>,
    pub(super) member_of: BTreeMap<QpNum, (QpNum, usize)>,
    pub(super) app_cqs: BTreeMap<CqId, VirtualCq>,
    pub(super) inflight: BTreeMap<u64, Inflight>,
    pub(super) next_wr: u64,
    /// Receive buffers by index: (application QP, member, address, lkey).
    pub(super) bufs: Vec<(QpNum, usize, u64, u32)>,
    pub(super) wake_pending: bool,
    /// A post the NIC refused for a reason of the WR itself: (application QP, data id, error).
    pub(super) post_error: Option<(QpNum, u32, VerbsError)>,
    /// The application QP and data id `post_send` is posting (the only time a refusal goes
    /// back to the application).
    pub(super) posting: Option<(QpNum, u32)>,
    /// Plain RECVs in the NIC: layer wr_id -> (application QP, the application's wr_id).
    plain_recvs: BTreeMap<u64, (QpNum, u64)>,
    pub(super) c: Counters,
    /// The run's seed: the members' UDP source ports are drawn from it.
    seed: u64,
}

impl PartitionLayer {
    pub fn new(cfg: PartitionConfig, tenant: TenantId, board: SharedBoard, seed: u64) -> Self {
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
            post_error: None,
            posting: None,
            plain_recvs: BTreeMap::new(),
            c: Counters::default(),
            seed,
        }
    }

    /// Bytes of address space for a region of the layer's own.
    pub(super) fn alloc(&mut self, len: u64) -> u64 {
        let a = self.next_addr;
        self.next_addr += (len + 4095) & !4095;
        a
    }

    pub(super) fn private_cq(&mut self, below: &mut dyn Verbs) -> Result<CqId, VerbsError> {
        if let Some(c) = self.cq {
            return Ok(c);
        }
        let c = below.create_cq(PRIVATE_CQ_DEPTH)?;
        below.req_notify_cq(c)?;
        self.cq = Some(c);
        Ok(c)
    }

    pub(super) fn slot(&mut self, below: &mut dyn Verbs) -> Option<(u32, u64, u32)> {
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
        self.app_cqs.entry(cq).or_default().push(wc);
    }

    /// Announces fresh completions of armed CQs: into `up` inside an event, else by a wake to
    /// ourselves (delivered after the current call).
    pub(super) fn announce(&mut self, below: &mut dyn Verbs, up: Option<&mut Vec<Event>>) {
        match up {
            Some(up) => {
                for (&cq, c) in self.app_cqs.iter_mut() {
                    if c.take_event(false) {
                        up.push(Event::Completion(cq));
                    }
                }
            }
            None => {
                let any = self.app_cqs.values().any(VirtualCq::event_due);
                if any && !self.wake_pending {
                    self.wake_pending = true;
                    below.wake(below.tenant(), WAKE_NOTIFY);
                }
            }
        }
    }

    /// Drains the private CQ and acts on everything in it.
    pub(super) fn drain(&mut self, below: &mut dyn Verbs, up: Option<&mut Vec<Event>>) {
        let Some(cq) = self.cq else { return };
        let mut wcs = Vec::new();
        if poll_and_rearm(below, cq, &mut wcs).is_err() {
            while below.poll_cq(cq, 256, &mut wcs) > 0 {}
        }
        let mut touched: Vec<QpNum> = Vec::new();
        for wc in &wcs {
            let t = if wc.wr_id & PLAIN_TAG != 0 {
                self.on_plain_recv_wc(wc)
            } else if wc.wr_id & RECV_TAG != 0 {
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
            ("rx_reordered", self.c.rx_reordered as f64),
            ("copied_bytes", self.c.copied as f64),
            ("slot_waits", self.c.slot_waits as f64),
        ]);
        v
    }

    fn req_notify_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        below.req_notify_cq(cq)?;
        // (The application may arm a CQ before it creates the QPs that use it.)
        self.app_cqs.entry(cq).or_default().arm_for_new();
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
            let addrs = &below.caps().local_addrs;
            let mut b = self.board.borrow_mut();
            // A member's entry carries its own source address (the peer's member i connects
            // to it when paths come from addresses: see `connect_qp`).
            let ep = |qpn, i: u32| Endpoint {
                host: addrs
                    .get(mk(i).local_addr as usize)
                    .copied()
                    .unwrap_or(host),
                qpn,
                addr: 0,
                rkey: 0,
            };
            b.publish(
                board_key(host, app_qp, 0),
                Side::Client,
                Endpoint {
                    host,
                    ..ep(members.len() as u32, 0)
                },
            );
            for (i, &q) in members.iter().enumerate().skip(1) {
                b.publish(
                    board_key(host, app_qp, i as u32),
                    Side::Client,
                    ep(q, i as u32),
                );
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
                plain: false,
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
        let (plain, peers) = {
            let b = self.board.borrow();
            let count = b.lookup(board_key(remote.host, remote.qpn, 0), Side::Client);
            let n = count.map_or(1, |e| e.qpn as usize);
            let mut peers = vec![(remote.qpn, remote.host)];
            for i in 1..n.min(conn.members.len()) {
                match b.lookup(board_key(remote.host, remote.qpn, i as u32), Side::Client) {
                    Some(e) => peers.push((e.qpn, e.host)),
                    None => break,
                }
            }
            (count.is_none(), peers)
        };
        // Without UDP source-port control the members' paths come from addresses (one subnet
        // per path, routed by address): member i goes to the peer's member i at the peer's
        // address i, so both ends of the path use the same subnet (a real NIC also drops packets
        // whose addresses are not the QP's own pair). With port control the peer's primary
        // address serves every member, as before.
        let by_addr = !below.caps().sport_control && self.cfg.spread_addrs;
        let seed = self.seed;
        let sport = |i: usize| Some(member_sport(seed, host, qp, i as u32));
        below.connect_qp(
            qp,
            RemoteQp {
                udp_sport: remote.udp_sport.or(sport(0)),
                ..remote
            },
        )?;
        let mut used = 1;
        for (i, &(pq, paddr)) in peers.iter().enumerate().skip(1) {
            let mq = self.conns[&qp].members[i].qpn;
            let r = RemoteQp {
                host: if by_addr { paddr } else { remote.host },
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
        conn.plain = plain;
        if used > 1 {
            self.c.conns_multi += 1;
        } else {
            self.c.conns_single += 1;
        }
        for q in extra {
            self.member_of.remove(&q);
            let _ = below.destroy_qp(q);
        }
        if plain {
            // A peer without the layer sends plain SENDs: the application's RECVs go to the NIC.
            let recvs: Vec<RecvWr> = self
                .conns
                .get_mut(&qp)
                .expect("checked")
                .rx
                .app_recvs
                .drain(..)
                .collect();
            for r in recvs {
                self.post_plain_recv(below, qp, r)?;
            }
        } else if !self.conns[&qp].rx.app_recvs.is_empty() {
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
            c.retain(|w| w.qp_num != qp);
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
                    c.retain(|w| w.qp_num != qp);
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
        // A peer without the layer gets the WR as it is (no chunk headers it could not parse).
        let kind = if conn.plain { Kind::Whole } else { kind };
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
            posted: 0,
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
        self.post_error = None;
        self.posting = Some((qp, id));
        self.progress(below, qp);
        self.posting = None;
        if let Some((q, bad, e)) = self.post_error.take() {
            if q == qp && bad == id {
                if let Some(conn) = self.conns.get_mut(&qp) {
                    let fresh = conn
                        .msgs
                        .back()
                        .is_some_and(|x| x.id == id && x.posted == 0);
                    if fresh && !conn.error {
                        // Refused before anything of it went out: take it back, as if never
                        // posted (ibv_post_send's error return).
                        conn.msgs.pop_back();
                        conn.shared.retain(|c| c.id != id);
                        conn.pinned
                            .iter_mut()
                            .for_each(|p| p.retain(|c| c.id != id));
                        conn.next_id = id;
                        self.c.messages -= 1;
                        return Err(e);
                    }
                }
            }
        }
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
        if conn.plain && conn.connected {
            return self.post_plain_recv(below, qp, wr);
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
        let n = self.app_cqs.get_mut(&cq).expect("checked").poll(max, out);
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
                if c.is_armed() {
                    c.disarm();
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
    fn post_plain_recv(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        let id = PLAIN_TAG | self.next_wr;
        self.next_wr += 1;
        below.post_recv(
            qp,
            RecvWr {
                wr_id: id,
                sg_list: wr.sg_list,
            },
        )?;
        self.plain_recvs.insert(id, (qp, wr.wr_id));
        Ok(())
    }

    /// A plain RECV completed: to the application's CQ with its own wr_id.
    fn on_plain_recv_wc(&mut self, wc: &WorkCompletion) -> Option<QpNum> {
        let (qp, wr_id) = self.plain_recvs.remove(&wc.wr_id)?;
        let cq = self.conns.get(&qp)?.recv_cq;
        self.push_app(
            cq,
            WorkCompletion {
                wr_id,
                qp_num: qp,
                ..*wc
            },
        );
        Some(qp)
    }
}
