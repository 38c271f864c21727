//! The tenant layer: QP manager, decomposer, reassembler and the completion path.

use super::balance::Balancer;
use super::conn::*;
use super::VirtuosoConfig;
use braid_verbs::rendezvous::SharedBoard;
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

/// Where the layer's own memory lives in the tenant's address space: far above what the
/// applications use, one window per tenant.
const BASE: u64 = 0x6000_0000_0000;
pub(super) const CTRL_SLOTS: u64 = 64;
/// The immediate of a notify: the length with the top bit set.
const NOTIFY_BIT: u32 = 1 << 31;

static PATH_BYTES: [&str; 16] = [
    "path0_bytes", "path1_bytes", "path2_bytes", "path3_bytes", "path4_bytes", "path5_bytes",
    "path6_bytes", "path7_bytes", "path8_bytes", "path9_bytes", "path10_bytes", "path11_bytes",
    "path12_bytes", "path13_bytes", "path14_bytes", "path15_bytes",
];
static PATH_GBPS: [&str; 16] = [
    "path0_cap_gbps", "path1_cap_gbps", "path2_cap_gbps", "path3_cap_gbps", "path4_cap_gbps",
    "path5_cap_gbps", "path6_cap_gbps", "path7_cap_gbps", "path8_cap_gbps", "path9_cap_gbps",
    "path10_cap_gbps", "path11_cap_gbps", "path12_cap_gbps", "path13_cap_gbps",
    "path14_cap_gbps", "path15_cap_gbps",
];
static PATH_TRUNK: [&str; 16] = [
    "path0_trunk", "path1_trunk", "path2_trunk", "path3_trunk", "path4_trunk", "path5_trunk",
    "path6_trunk", "path7_trunk", "path8_trunk", "path9_trunk", "path10_trunk", "path11_trunk",
    "path12_trunk", "path13_trunk", "path14_trunk", "path15_trunk",
];

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Stats {
    mp_ops: u64,
    wrs: u64,
    resends: u64,
    retry_exceeded: u64,
    resets: u64,
    probes: u64,
    split_sends: u64,
    single_sends: u64,
    ctrl_msgs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Path(usize),
    Ctrl,
}

pub struct VirtuosoLayer {
    pub(super) cfg: VirtuosoConfig,
    pub(super) caps: Caps,
    pub(super) board: SharedBoard,
    pub(super) balancer: Box<dyn Balancer>,
    pub(super) base: u64,
    pub(super) cq: Option<CqId>,
    pub(super) probe_src: Option<MemoryRegion>,
    pub(super) conns: Vec<Option<Conn>>,
    pub(super) by_qp: HashMap<QpNum, (usize, Role)>,
    pub(super) pieces: BTreeMap<u64, Piece>,
    pub(super) next_wr: u64,
    /// The application's regions by lkey (their rkey is what an advert names).
    pub(super) mrs: HashMap<u32, MemoryRegion>,
    /// Completions made for the application's CQs, in order.
    pub(super) ready: BTreeMap<CqId, VecDeque<WorkCompletion>>,
    pub(super) armed: BTreeSet<CqId>,
    pub(super) stats: Stats,
    /// Estimates and trunk sizes per peer host.
    pub(super) peers: BTreeMap<u32, Rc<RefCell<PeerPaths>>>,
}

impl VirtuosoLayer {
    pub fn new(cfg: VirtuosoConfig, tenant: TenantId, caps: Caps, board: SharedBoard) -> Self {
        let balancer = cfg.policy.balancer();
        VirtuosoLayer {
            cfg,
            caps,
            board,
            balancer,
            base: BASE + ((tenant as u64 & 0xff) << 40),
            cq: None,
            probe_src: None,
            conns: Vec::new(),
            by_qp: HashMap::new(),
            pieces: BTreeMap::new(),
            next_wr: 1,
            mrs: HashMap::new(),
            ready: BTreeMap::new(),
            armed: BTreeSet::new(),
            stats: Stats::default(),
            peers: BTreeMap::new(),
        }
    }

    pub(super) fn tracking(&self) -> bool {
        self.caps.data_tracking
    }

    pub(super) fn conn_of(&self, qp: QpNum) -> Option<usize> {
        match self.by_qp.get(&qp) {
            Some(&(c, Role::Path(0))) => Some(c),
            _ => None,
        }
    }

    pub(super) fn ensure_cq(&mut self, below: &mut dyn Verbs) -> Result<CqId, VerbsError> {
        if let Some(cq) = self.cq {
            return Ok(cq);
        }
        let cq = below.create_cq(1 << 16)?;
        below.req_notify_cq(cq)?;
        let mr = below.reg_mr(self.base, self.cfg.probe.0, Access::LOCAL)?;
        self.probe_src = Some(mr);
        self.cq = Some(cq);
        Ok(cq)
    }

    // ---------------------------------------------------------------- posting

    fn post(
        &mut self,
        below: &mut dyn Verbs,
        c: usize,
        path: usize,
        kind: PieceKind,
        op: u64,
        off: u64,
        len: u64,
    ) {
        let conn = self.conns[c].as_mut().expect("live connection");
        let (qp, mut w) = match kind {
            PieceKind::Probe => {
                let src = self.probe_src.expect("created with the CQ");
                let (addr, rkey) = conn.sink.expect("probes need the peer's sink");
                let mut w = wr(0, SendOp::Write, vec![Sge { addr: src.addr, length: len as u32, lkey: src.lkey }]);
                w.remote_addr = addr;
                w.rkey = rkey;
                (conn.paths[path].qp, w)
            }
            PieceKind::Ctrl => {
                let sg = vec![Sge { addr: conn.ctrl_base + 4096 + off * CTRL_LEN, length: CTRL_LEN as u32, lkey: conn.ctrl_lkey }];
                (conn.ctrl_qp, wr(0, SendOp::Send, sg))
            }
            PieceKind::Notify => {
                let len = conn.op_mut(op).expect("op").len;
                (conn.paths[0].qp, wr(0, SendOp::SendWithImm(len as u32 | NOTIFY_BIT), Vec::new()))
            }
            PieceKind::Single => {
                let o = conn.op_mut(op).expect("op");
                let mut w = o.wr.clone();
                w.signaled = true;
                (conn.paths[path].qp, w)
            }
            PieceKind::Data => {
                let o = conn.op_mut(op).expect("op");
                let sg = sub_sges(&o.wr.sg_list, off, len);
                let (base, rkey) = o.target.unwrap_or((o.wr.remote_addr, o.wr.rkey));
                let code = if o.kind == OpKind::Read { SendOp::Read } else { SendOp::Write };
                let mut w = wr(0, code, sg);
                w.remote_addr = base + off;
                w.rkey = rkey;
                (conn.paths[path].qp, w)
            }
        };
        let id = self.next_wr;
        self.next_wr += 1;
        w.wr_id = id;
        let now = below.now();
        if kind != PieceKind::Ctrl {
            let p = &mut conn.paths[path];
            if p.inflight == 0 {
                p.mark = now;
            }
            p.inflight += 1;
            p.inflight_bytes += len;
        }
        self.pieces.insert(id, Piece { kind, conn: c, op, path, off, len, posted_at: now });
        self.stats.wrs += 1;
        below.charge(Work::WrBuilt(1));
        if below.post_send(qp, w).is_err() {
            // The QP refused it (in Error or Reset): the same as a flush.
            self.on_send_wc(below, id, WcStatus::Flushed);
        }
    }

    pub(super) fn send_ctrl(&mut self, below: &mut dyn Verbs, c: usize, m: Ctrl) {
        let conn = self.conns[c].as_mut().expect("live connection");
        conn.ctrl_out.push_back(m);
        self.flush_ctrl(below, c);
    }

    fn flush_ctrl(&mut self, below: &mut dyn Verbs, c: usize) {
        loop {
            let conn = self.conns[c].as_mut().expect("live connection");
            if !conn.connected || conn.plain || conn.ctrl_free.is_empty() || conn.ctrl_out.is_empty() {
                return;
            }
            let m = conn.ctrl_out.pop_front().unwrap();
            let slot = conn.ctrl_free.pop().unwrap();
            let addr = conn.ctrl_base + 4096 + slot * CTRL_LEN;
            if below.write_local(addr, &m.encode()).is_err() {
                return;
            }
            self.stats.ctrl_msgs += 1;
            self.post(below, c, 0, PieceKind::Ctrl, 0, slot, 0);
        }
    }

    /// Moves everything that can move: probes, splits, data pieces, SENDs.
    pub(super) fn pump(&mut self, below: &mut dyn Verbs, c: usize) {
        self.flush_ctrl(below, c);
        let now = below.now();
        let tracking = self.tracking();
        let small = self.cfg.small.0;
        let conn = match self.conns[c].as_mut() {
            Some(x) if x.connected && !x.plain => x,
            _ => return,
        };
        // Probes: before the first split, and again when idle once `reprobe` has passed.
        let idle = conn.paths.iter().all(|p| p.inflight == 0) && conn.ops.iter().all(|o| !o.started || o.done);
        let probed_at = conn.peer.borrow().probed_at;
        let due = match probed_at {
            None => self.cfg.capacities.is_none(),
            Some(t) => self.cfg.reprobe.0 > 0 && now.saturating_sub(t) >= self.cfg.reprobe.0 && idle,
        };
        let wants_split = conn.ops.iter().any(|o| !o.started && o.len > small);
        if conn.probing == 0 && due && wants_split && conn.sink.is_some() {
            let live = conn.live();
            let n = live.iter().filter(|u| **u).count() as u32;
            if n == 1 {
                // One path: nothing to balance.
                conn.peer.borrow_mut().probed_at = Some(now);
            } else if n > 1 {
                conn.probing = n;
                conn.peer.borrow_mut().probed_at = Some(now);
                let probe = self.cfg.probe.0;
                for (i, up) in live.into_iter().enumerate() {
                    if up {
                        self.stats.probes += 1;
                        self.post(below, c, i, PieceKind::Probe, 0, 0, probe);
                    }
                }
                return;
            }
        }
        let conn = self.conns[c].as_mut().unwrap();
        if conn.probing > 0 {
            return;
        }
        // Start the operations that can start.
        let est: Vec<Option<f64>> = conn.peer.borrow().est[..conn.paths.len()].iter().map(|e| e.bps).collect();
        let live = conn.live();
        let dynamic = self.balancer.dynamic();
        for i in 0..conn.ops.len() {
            let o = &conn.ops[i];
            if o.started {
                continue;
            }
            let split_send = |o: &Op, adverts: &BTreeMap<u64, (u64, u32, u32)>| -> Option<Option<(u64, u32)>> {
                // Some(Some(target)): split into the advertised buffer; Some(None): one SEND;
                // None: wait for the advert.
                let plain = !matches!(o.wr.op, SendOp::Send) || o.wr.inline || o.len <= small || !tracking;
                if plain {
                    return Some(None);
                }
                let k = o.msg.expect("sends are numbered");
                match adverts.get(&k) {
                    None => None,
                    Some(&(addr, len, rkey)) if len as u64 >= o.len => Some(Some((addr, rkey))),
                    Some(_) => Some(None),
                }
            };
            let seq = o.seq;
            let len = o.len;
            let split = match o.kind {
                OpKind::Send => match split_send(o, &conn.adverts) {
                    None => break, // later SENDs wait too: they consume later RECVs
                    Some(t) => t.map(Some),
                },
                _ => {
                    let plain = len <= small || o.wr.inline || matches!(o.wr.op, SendOp::WriteWithImm(_) | SendOp::Nop);
                    if plain { None } else { Some(None) }
                }
            };
            let o = &mut conn.ops[i];
            o.started = true;
            match split {
                None => {
                    o.single_left = true;
                    if o.kind != OpKind::Send {
                        conn.retry.push_back(seq);
                    }
                }
                Some(target) => {
                    if target.is_some() {
                        o.target = target;
                        o.single_left = true; // the notify
                        self.stats.split_sends += 1;
                    }
                    o.data_left = len;
                    if dynamic || !live.iter().any(|u| *u) {
                        conn.pool.push_back(Range { op: seq, off: 0, len });
                    } else {
                        let shares = self.balancer.split(len, &est, &live);
                        let mut off = 0;
                        for (p, s) in shares.into_iter().enumerate() {
                            if s > 0 {
                                conn.paths[p].queue.push_back(Range { op: seq, off, len: s });
                                off += s;
                            }
                        }
                    }
                }
            }
        }
        // Singles of WRITE/READ on the next live path.
        loop {
            let conn = self.conns[c].as_mut().unwrap();
            let Some(&seq) = conn.retry.front() else { break };
            let live = conn.live();
            let n = live.len();
            let Some(p) = (0..n).map(|k| (conn.rr + k) % n).find(|&k| live[k]) else { break };
            conn.rr = (p + 1) % n;
            conn.retry.pop_front();
            let len = conn.op_mut(seq).map_or(0, |o| o.len);
            self.post(below, c, p, PieceKind::Single, seq, 0, len);
        }
        // Data pieces, one per path per round, round-robin.
        let lossy = self.cfg.lossy;
        let window = if dynamic { self.cfg.window } else { u32::MAX };
        loop {
            let conn = self.conns[c].as_mut().unwrap();
            let n = conn.paths.len();
            let rr = conn.rr;
            let mut posted = false;
            for k in 0..n {
                let p = (rr + k) % n;
                let conn = self.conns[c].as_mut().unwrap();
                let path = &conn.paths[p];
                if !path.up || path.resetting {
                    continue;
                }
                let cap = if lossy { 1 } else { window };
                if path.inflight >= cap {
                    continue;
                }
                let limit = if lossy { conn.peer.borrow().trunk[p].size } else { self.cfg.chunk.0 }.max(1);
                let src = if !conn.pool.is_empty() { None } else { Some(p) };
                let q = match src {
                    None => &mut conn.pool,
                    Some(p) => &mut conn.paths[p].queue,
                };
                let Some(r) = q.front_mut() else { continue };
                let take = r.len.min(limit);
                let piece = Range { op: r.op, off: r.off, len: take };
                r.off += take;
                r.len -= take;
                if r.len == 0 {
                    q.pop_front();
                }
                self.post(below, c, p, PieceKind::Data, piece.op, piece.off, piece.len);
                posted = true;
            }
            if !posted {
                break;
            }
        }
        if let Some(conn) = self.conns[c].as_mut() {
            conn.rr = (conn.rr + 1) % conn.paths.len().max(1);
        }
        self.post_sends(below, c);
    }

    /// SENDs (single or notify) go on path 0 in message order, each after every byte of the
    /// operations before it and of its own has landed (the order ibverbs gives on one QP).
    fn post_sends(&mut self, below: &mut dyn Verbs, c: usize) {
        loop {
            let conn = self.conns[c].as_mut().unwrap();
            if !conn.paths[0].up || conn.paths[0].resetting {
                return;
            }
            let mut barrier = true;
            let mut next = None;
            for o in conn.ops.iter() {
                if o.kind == OpKind::Send && !o.send_posted && o.started {
                    if barrier && o.data_left == 0 {
                        next = Some((o.seq, o.target.is_some(), o.len));
                    }
                    break;
                }
                if !o.started {
                    break;
                }
                let settled = o.done || (o.kind == OpKind::Send && o.send_posted)
                    || (o.data_left == 0 && !o.single_left);
                barrier &= settled;
            }
            let Some((seq, split, len)) = next else { return };
            conn.op_mut(seq).unwrap().send_posted = true;
            if split {
                self.post(below, c, 0, PieceKind::Notify, seq, 0, 0);
            } else {
                self.stats.single_sends += 1;
                self.post(below, c, 0, PieceKind::Single, seq, 0, len);
            }
        }
    }

    // ---------------------------------------------------------------- completions

    fn on_send_wc(&mut self, below: &mut dyn Verbs, id: u64, status: WcStatus) {
        let Some(pc) = self.pieces.remove(&id) else { return };
        let now = below.now();
        let probe = self.cfg.probe.0;
        let ewma = self.cfg.ewma;
        let lossy = self.cfg.lossy;
        let Some(conn) = self.conns[pc.conn].as_mut() else { return };
        if pc.kind == PieceKind::Ctrl {
            conn.ctrl_free.push(pc.off);
            return;
        }
        let peer = conn.peer.clone();
        let mut peer = peer.borrow_mut();
        let path = &mut conn.paths[pc.path];
        path.inflight = path.inflight.saturating_sub(1);
        path.inflight_bytes = path.inflight_bytes.saturating_sub(pc.len);
        if status == WcStatus::Success {
            match pc.kind {
                PieceKind::Probe => {
                    peer.est[pc.path].probe(pc.len, now - pc.posted_at);
                    conn.probing = conn.probing.saturating_sub(1);
                    if conn.probing == 0 {
                        peer.probed_at = Some(now);
                    }
                }
                PieceKind::Data => {
                    path.bytes += pc.len;
                    if lossy {
                        peer.trunk[pc.path].success(pc.len);
                    }
                    if pc.len >= probe / 2 {
                        peer.est[pc.path].sample(pc.len, now - pc.posted_at.max(path.mark), ewma);
                    }
                    path.mark = now;
                    if let Some(o) = conn.op_mut(pc.op) {
                        o.data_left -= pc.len;
                    }
                }
                PieceKind::Single | PieceKind::Notify => {
                    if pc.kind == PieceKind::Single {
                        path.bytes += pc.len;
                    }
                    if let Some(o) = conn.op_mut(pc.op) {
                        o.single_left = false;
                    }
                }
                PieceKind::Ctrl => unreachable!(),
            }
            return;
        }
        // A failure. The path's QP is in Error: its pieces are re-sent, it is reset.
        let transient = matches!(status, WcStatus::RetryExceeded | WcStatus::Flushed) && !conn.closed;
        if status == WcStatus::RetryExceeded {
            self.stats.retry_exceeded += 1;
            if lossy {
                peer.trunk[pc.path].failure(pc.len);
            }
        }
        drop(peer);
        if transient {
            self.requeue(pc);
        } else {
            let conn = self.conns[pc.conn].as_mut().unwrap();
            if pc.kind == PieceKind::Probe {
                conn.probing = conn.probing.saturating_sub(1);
            } else if let Some(o) = conn.op_mut(pc.op) {
                // The application's error (an rkey, a RECV too small): the operation fails.
                if o.status == WcStatus::Success {
                    o.status = status;
                }
                o.data_left = 0;
                o.single_left = false;
                o.send_posted = true;
            }
        }
        if !self.conns[pc.conn].as_ref().unwrap().closed {
            self.fail_path(below, pc.conn, pc.path, true);
        }
    }

    /// A piece that did not complete goes back: data to the pool (any path takes it), a SEND
    /// to be posted again in order, a probe is dropped.
    fn requeue(&mut self, pc: Piece) {
        let conn = self.conns[pc.conn].as_mut().unwrap();
        match pc.kind {
            PieceKind::Data => {
                self.stats.resends += 1;
                conn.pool.push_front(Range { op: pc.op, off: pc.off, len: pc.len });
            }
            PieceKind::Single | PieceKind::Notify => {
                self.stats.resends += 1;
                if let Some(o) = conn.op_mut(pc.op) {
                    if o.kind == OpKind::Send {
                        o.send_posted = false;
                    } else {
                        conn.retry.push_front(pc.op);
                    }
                }
            }
            PieceKind::Probe => conn.probing = conn.probing.saturating_sub(1),
            PieceKind::Ctrl => conn.ctrl_free.push(pc.off),
        }
    }

    /// Path `p` failed: take its pieces back, reset its QP and (when `ask`) ask the peer to
    /// reset its end; without a control channel the path stays down.
    fn fail_path(&mut self, below: &mut dyn Verbs, c: usize, p: usize, ask: bool) {
        let conn = self.conns[c].as_mut().unwrap();
        if conn.paths[p].resetting && ask {
            return;
        }
        let ids: Vec<u64> = self
            .pieces
            .iter()
            .filter(|(_, x)| x.conn == c && x.path == p && x.kind != PieceKind::Ctrl)
            .map(|(k, _)| *k)
            .collect();
        for id in ids {
            let pc = self.pieces.remove(&id).unwrap();
            self.requeue(pc);
        }
        let conn = self.conns[c].as_mut().unwrap();
        let path = &mut conn.paths[p];
        path.inflight = 0;
        path.inflight_bytes = 0;
        let q: Vec<Range> = path.queue.drain(..).collect();
        conn.pool.extend(q);
        let qp = path.qp;
        if !self.caps.data_tracking {
            conn.paths[p].up = false;
            return;
        }
        conn.paths[p].resetting = true;
        self.stats.resets += 1;
        let _ = below.modify_qp(qp, QpModify::Reset);
        if ask {
            self.send_ctrl(below, c, Ctrl::ResetReq { path: p as u8 });
        }
    }

    /// Connects path `p` again after a reset (and re-posts the application's RECVs on path 0,
    /// which the reset dropped).
    fn reconnect(&mut self, below: &mut dyn Verbs, c: usize, p: usize) {
        let conn = self.conns[c].as_mut().unwrap();
        let remote = RemoteQp { host: conn.peer_host, qpn: conn.paths[p].peer_qp, udp_sport: None };
        let qp = conn.paths[p].qp;
        let _ = below.modify_qp(qp, QpModify::Reset);
        if below.connect_qp(qp, remote).is_err() {
            return;
        }
        conn.paths[p].resetting = false;
        conn.paths[p].up = true;
        if p == 0 {
            let recvs: Vec<RecvWr> = conn.recvs.iter().map(|r| r.wr.clone()).collect();
            for r in recvs {
                let _ = below.post_recv(qp, r);
            }
        }
    }

    fn on_ctrl(&mut self, below: &mut dyn Verbs, c: usize, m: Ctrl) {
        match m {
            Ctrl::Advert { k, addr, len, rkey } => {
                let conn = self.conns[c].as_mut().unwrap();
                if k >= conn.msgs_retired {
                    conn.adverts.insert(k, (addr, len, rkey));
                }
            }
            Ctrl::ResetReq { path } => {
                let p = path as usize;
                if p < self.conns[c].as_ref().unwrap().paths.len() {
                    self.fail_path(below, c, p, false);
                    self.reconnect(below, c, p);
                    self.send_ctrl(below, c, Ctrl::ResetAck { path });
                }
            }
            Ctrl::ResetAck { path } => {
                let p = path as usize;
                let conn = self.conns[c].as_ref().unwrap();
                if p < conn.paths.len() && conn.paths[p].resetting {
                    self.reconnect(below, c, p);
                }
            }
        }
    }

    fn on_wc(&mut self, below: &mut dyn Verbs, wc: WorkCompletion) {
        let Some(&(c, role)) = self.by_qp.get(&wc.qp_num) else { return };
        let is_recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvWithImm);
        let Some(conn) = self.conns[c].as_mut() else { return };
        if conn.plain {
            let cq = if is_recv { conn.recv_cq } else { conn.send_cq };
            self.ready.entry(cq).or_default().push_back(wc);
            return;
        }
        match (role, is_recv) {
            (Role::Ctrl, true) => {
                if wc.status != WcStatus::Success {
                    return;
                }
                let addr = conn.ctrl_base + (wc.wr_id % CTRL_SLOTS) * CTRL_LEN;
                let m = below.read_local(addr, CTRL_LEN).ok().and_then(|b| Ctrl::decode(&b));
                let lkey = conn.ctrl_lkey;
                let _ = below.post_recv(
                    wc.qp_num,
                    RecvWr { wr_id: wc.wr_id, sg_list: vec![Sge { addr, length: CTRL_LEN as u32, lkey }] },
                );
                if let Some(m) = m {
                    self.on_ctrl(below, c, m);
                }
            }
            (Role::Path(0), true) => {
                // Flushes of a path being reset are not the application's: its RECVs are
                // posted again when the path reconnects.
                if wc.status == WcStatus::Flushed && (conn.paths[0].resetting || !conn.closed) {
                    return;
                }
                let Some(r) = conn.recvs.pop_front() else { return };
                let mut out = wc;
                out.wr_id = r.wr.wr_id;
                out.qp_num = conn.app_qp;
                if r.advertised
                    && wc.status == WcStatus::Success
                    && wc.opcode == WcOpcode::RecvWithImm
                    && wc.byte_len == 0
                    && matches!(wc.imm, Some(i) if i & NOTIFY_BIT != 0)
                {
                    out.byte_len = (wc.imm.unwrap() & !NOTIFY_BIT) as u64;
                    out.imm = None;
                    out.opcode = WcOpcode::Recv;
                }
                let cq = conn.recv_cq;
                self.ready.entry(cq).or_default().push_back(out);
            }
            (_, true) => {}
            (_, false) => self.on_send_wc(below, wc.wr_id, wc.status),
        }
    }

    /// Retires finished operations in order: one completion each for the application.
    fn retire(&mut self, c: usize) {
        let Some(conn) = self.conns[c].as_mut() else { return };
        while let Some(o) = conn.ops.front() {
            let finished = o.started && o.data_left == 0 && !o.single_left && (o.kind != OpKind::Send || o.send_posted);
            if !finished {
                break;
            }
            let o = conn.ops.pop_front().unwrap();
            if o.kind == OpKind::Send {
                conn.msgs_retired += 1;
                let stale: Vec<u64> = conn.adverts.range(..conn.msgs_retired).map(|(k, _)| *k).collect();
                for k in stale {
                    conn.adverts.remove(&k);
                }
            }
            if o.wr.signaled || conn.sig_all || o.status != WcStatus::Success {
                let wc = WorkCompletion {
                    wr_id: o.wr.wr_id,
                    status: o.status,
                    opcode: match o.kind {
                        OpKind::Write => WcOpcode::Write,
                        OpKind::Read => WcOpcode::Read,
                        OpKind::Send => WcOpcode::Send,
                    },
                    byte_len: o.len,
                    imm: None,
                    qp_num: conn.app_qp,
                    src_host: 0,
                    src_qp: 0,
                };
                self.ready.entry(conn.send_cq).or_default().push_back(wc);
            }
        }
    }

    pub(super) fn stats_op(&mut self) {
        self.stats.mp_ops += 1;
    }

    /// Tells the application its CQs have completions, once per arming.
    pub(super) fn notify(&mut self, up: &mut Vec<Event>) {
        let ready: Vec<CqId> = self
            .ready
            .iter()
            .filter(|(cq, q)| !q.is_empty() && self.armed.contains(*cq))
            .map(|(cq, _)| *cq)
            .collect();
        for cq in ready {
            self.armed.remove(&cq);
            up.push(Event::Completion(cq));
        }
    }

    pub(super) fn counter_list(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        let mut v = vec![
            ("mp_ops", s.mp_ops as f64),
            ("wrs", s.wrs as f64),
            ("resends", s.resends as f64),
            ("retry_exceeded", s.retry_exceeded as f64),
            ("resets", s.resets as f64),
            ("probes", s.probes as f64),
            ("split_sends", s.split_sends as f64),
            ("single_sends", s.single_sends as f64),
            ("ctrl_msgs", s.ctrl_msgs as f64),
        ];
        let conns: Vec<&Conn> = self.conns.iter().flatten().filter(|c| !c.plain).collect();
        v.push(("conns", conns.len() as f64));
        let n = conns.iter().map(|c| c.paths.len()).max().unwrap_or(0);
        let mut tsum = 0.0;
        let mut tcount = 0.0;
        for i in 0..n {
            let bytes: u64 = conns.iter().filter_map(|c| c.paths.get(i)).map(|p| p.bytes).sum();
            v.push((PATH_BYTES[i], bytes as f64));
            let est = self.peers.values().find_map(|p| p.borrow().est.get(i).and_then(|e| e.bps));
            v.push((PATH_GBPS[i], est.unwrap_or(0.0) / 1e9));
            if self.cfg.lossy {
                let t = self.peers.values().filter_map(|p| p.borrow().trunk.get(i).map(|t| t.size)).max().unwrap_or(0);
                v.push((PATH_TRUNK[i], t as f64));
                tsum += t as f64;
                tcount += 1.0;
            }
        }
        if self.cfg.lossy && tcount > 0.0 {
            v.push(("trunk_sum", tsum));
            v.push(("trunk_avg", tsum / tcount));
        }
        v
    }

    /// Polls the layer's CQ and acts on everything in it.
    pub(super) fn progress(&mut self, below: &mut dyn Verbs, rearm: bool) {
        let Some(cq) = self.cq else { return };
        let mut wcs = Vec::new();
        if rearm {
            let _ = poll_and_rearm(below, cq, &mut wcs);
        } else {
            while below.poll_cq(cq, 256, &mut wcs) > 0 {}
        }
        let mut touched = BTreeSet::new();
        for wc in wcs {
            if let Some(&(c, _)) = self.by_qp.get(&wc.qp_num) {
                touched.insert(c);
            }
            self.on_wc(below, wc);
        }
        for c in touched {
            if self.conns[c].is_some() {
                self.pump(below, c);
                self.retire(c);
                self.pump(below, c);
            }
        }
    }
}
