//! The tenant layer: QP manager, decomposer, reassembler and the completion path.

use super::balance::Balancer;
use super::conn::*;
use super::VirtuosoConfig;
use braid_verbs::rendezvous::SharedBoard;
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Where the layer's own memory lives in the tenant's address space: far above what the
/// applications use, one window per tenant.
const BASE: u64 = 0x6000_0000_0000;
pub(super) const CTRL_SLOTS: u64 = 64;
/// The immediate of a notify: the length with the top bit set.
pub(super) const NOTIFY_BIT: u32 = 1 << 31;

static PATH_BYTES: [&str; 16] = [
    "path0_bytes",
    "path1_bytes",
    "path2_bytes",
    "path3_bytes",
    "path4_bytes",
    "path5_bytes",
    "path6_bytes",
    "path7_bytes",
    "path8_bytes",
    "path9_bytes",
    "path10_bytes",
    "path11_bytes",
    "path12_bytes",
    "path13_bytes",
    "path14_bytes",
    "path15_bytes",
];
static PATH_GBPS: [&str; 16] = [
    "path0_cap_gbps",
    "path1_cap_gbps",
    "path2_cap_gbps",
    "path3_cap_gbps",
    "path4_cap_gbps",
    "path5_cap_gbps",
    "path6_cap_gbps",
    "path7_cap_gbps",
    "path8_cap_gbps",
    "path9_cap_gbps",
    "path10_cap_gbps",
    "path11_cap_gbps",
    "path12_cap_gbps",
    "path13_cap_gbps",
    "path14_cap_gbps",
    "path15_cap_gbps",
];
static PATH_TRUNK: [&str; 16] = [
    "path0_trunk",
    "path1_trunk",
    "path2_trunk",
    "path3_trunk",
    "path4_trunk",
    "path5_trunk",
    "path6_trunk",
    "path7_trunk",
    "path8_trunk",
    "path9_trunk",
    "path10_trunk",
    "path11_trunk",
    "path12_trunk",
    "path13_trunk",
    "path14_trunk",
    "path15_trunk",
];

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Stats {
    pub(super) mp_ops: u64,
    pub(super) wrs: u64,
    pub(super) resends: u64,
    pub(super) retry_exceeded: u64,
    pub(super) resets: u64,
    pub(super) probes: u64,
    pub(super) split_sends: u64,
    pub(super) single_sends: u64,
    pub(super) ctrl_msgs: u64,
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
    /// The application's CQs as it sees them (its completions of MP_ operations).
    pub(super) ready: BTreeMap<CqId, VirtualCq>,
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

    /// Builds and posts one WR of `kind` for operation `op` (bytes `[off, off + len)`) on path
    /// `path` of connection `c` (the control QP for `Ctrl`, whose `off` is its ring slot).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post(
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
                let mut w = wr(
                    0,
                    SendOp::Write,
                    vec![Sge {
                        addr: src.addr,
                        length: len as u32,
                        lkey: src.lkey,
                    }],
                );
                w.remote_addr = addr;
                w.rkey = rkey;
                (conn.paths[path].qp, w)
            }
            PieceKind::Ctrl => {
                let sg = vec![Sge {
                    addr: conn.ctrl_base + 4096 + off * CTRL_LEN,
                    length: CTRL_LEN as u32,
                    lkey: conn.ctrl_lkey,
                }];
                (conn.ctrl_qp, wr(0, SendOp::Send, sg))
            }
            PieceKind::Notify => {
                let len = conn.op_mut(op).expect("op").len;
                (
                    conn.paths[0].qp,
                    wr(0, SendOp::SendWithImm(len as u32 | NOTIFY_BIT), Vec::new()),
                )
            }
            PieceKind::Single => {
                let o = conn.op_mut(op).expect("op");
                let mut w = o.wr.clone();
                w.signaled = true;
                (conn.paths[path].qp, w)
            }
            PieceKind::Data => {
                let o = conn.op_mut(op).expect("op");
                let sg = slice_sges(&o.wr.sg_list, off, len);
                let (base, rkey) = o.target.unwrap_or((o.wr.remote_addr, o.wr.rkey));
                let code = if o.kind == OpKind::Read {
                    SendOp::Read
                } else {
                    SendOp::Write
                };
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
        self.pieces.insert(
            id,
            Piece {
                kind,
                conn: c,
                op,
                path,
                off,
                len,
                posted_at: now,
            },
        );
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

    pub(super) fn flush_ctrl(&mut self, below: &mut dyn Verbs, c: usize) {
        loop {
            let conn = self.conns[c].as_mut().expect("live connection");
            if !conn.connected
                || conn.plain
                || conn.ctrl_free.is_empty()
                || conn.ctrl_out.is_empty()
            {
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
        let idle =
            conn.paths.iter().all(|p| p.inflight == 0) && conn.ops.iter().all(|o| !o.started);
        let probed_at = conn.peer.borrow().probed_at;
        let due = match probed_at {
            None => self.cfg.capacities.is_none(),
            Some(t) => {
                self.cfg.reprobe.0 > 0 && now.saturating_sub(t) >= self.cfg.reprobe.0 && idle
            }
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
        let est: Vec<Option<f64>> = conn.peer.borrow().est[..conn.paths.len()]
            .iter()
            .map(|e| e.bps)
            .collect();
        let live = conn.live();
        let dynamic = self.balancer.dynamic();
        for i in 0..conn.ops.len() {
            let o = &conn.ops[i];
            if o.started {
                continue;
            }
            let split_send = |o: &Op,
                              adverts: &BTreeMap<u64, (u64, u32, u32)>|
             -> Option<Option<(u64, u32)>> {
                // Some(Some(target)): split into the advertised buffer; Some(None): one SEND;
                // None: wait for the advert.
                let plain =
                    !matches!(o.wr.op, SendOp::Send) || o.wr.inline || o.len <= small || !tracking;
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
                    let plain = len <= small
                        || o.wr.inline
                        || matches!(o.wr.op, SendOp::WriteWithImm(_) | SendOp::Nop);
                    if plain {
                        None
                    } else {
                        Some(None)
                    }
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
                        conn.pool.push_back(Range {
                            op: seq,
                            off: 0,
                            len,
                        });
                    } else {
                        let shares = self.balancer.split(len, &est, &live);
                        let mut off = 0;
                        for (p, s) in shares.into_iter().enumerate() {
                            if s > 0 {
                                conn.paths[p].queue.push_back(Range {
                                    op: seq,
                                    off,
                                    len: s,
                                });
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
            let Some(&seq) = conn.retry.front() else {
                break;
            };
            let live = conn.live();
            let n = live.len();
            let Some(p) = (0..n).map(|k| (conn.rr + k) % n).find(|&k| live[k]) else {
                break;
            };
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
                let limit = if lossy {
                    conn.peer.borrow().trunk[p].size
                } else {
                    self.cfg.chunk.0
                }
                .max(1);
                let src = if !conn.pool.is_empty() { None } else { Some(p) };
                let q = match src {
                    None => &mut conn.pool,
                    Some(p) => &mut conn.paths[p].queue,
                };
                let Some(r) = q.front_mut() else { continue };
                let take = r.len.min(limit);
                let piece = Range {
                    op: r.op,
                    off: r.off,
                    len: take,
                };
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
    pub(super) fn post_sends(&mut self, below: &mut dyn Verbs, c: usize) {
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
                let settled = (o.kind == OpKind::Send && o.send_posted)
                    || (o.data_left == 0 && !o.single_left);
                barrier &= settled;
            }
            let Some((seq, split, len)) = next else {
                return;
            };
            conn.op_mut(seq).unwrap().send_posted = true;
            if split {
                self.post(below, c, 0, PieceKind::Notify, seq, 0, 0);
            } else {
                self.stats.single_sends += 1;
                self.post(below, c, 0, PieceKind::Single, seq, 0, len);
            }
        }
    }

    pub(super) fn stats_op(&mut self) {
        self.stats.mp_ops += 1;
    }

    /// Tells the application its CQs have completions, once per arming.
    pub(super) fn notify(&mut self, up: &mut Vec<Event>) {
        for (&cq, q) in self.ready.iter_mut() {
            // Whatever waits counts as news: the progress that called this just moved it.
            if q.take_event(true) {
                up.push(Event::Completion(cq));
            }
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
            let bytes: u64 = conns
                .iter()
                .filter_map(|c| c.paths.get(i))
                .map(|p| p.bytes)
                .sum();
            v.push((PATH_BYTES[i], bytes as f64));
            let est = self
                .peers
                .values()
                .find_map(|p| p.borrow().est.get(i).and_then(|e| e.bps));
            v.push((PATH_GBPS[i], est.unwrap_or(0.0) / 1e9));
            if self.cfg.lossy {
                let t = self
                    .peers
                    .values()
                    .filter_map(|p| p.borrow().trunk.get(i).map(|t| t.size))
                    .max()
                    .unwrap_or(0);
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
}
