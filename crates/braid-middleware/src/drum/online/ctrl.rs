//! The online decider's control channel, on a CQ of its own. `ctrl = "rc"` (the default): one
//! RC QP per peer host it shares two-sided traffic with, set up through the run's board as the
//! agent's pipes are (publish, connect, post receives, publish "ready"). Messages
//! (`braid_drum::online::wire`) travel as SENDs from fixed-size slots of a tracked memory region
//! per peer; a message waits in a short queue while the peer's QP is not ready or its send slots
//! are busy. RC retransmits what the fabric drops: a loss only delays a message.
//! `ctrl = "ud"` ([`super::ctrl_ud`]): one UD QP per agent, messages segmented to the MTU, lost
//! on the wire when the fabric drops a segment, the losses counted by the receiver.
//!
//! Loss injection (`ctrl_loss`, either kind): a message is dropped before it is posted, with a
//! seeded draw per message: an explicit injection, on top of whatever the fabric loses.

use super::ctrl_ud::UdCtrl;
use braid_verbs::rendezvous::{Endpoint, SharedBoard, Side};
use braid_verbs::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// `online.ctrl`: what carries the solver's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CtrlKind {
    /// An RC QP per peer host: reliable (the fabric's losses are retransmitted, delaying the
    /// message).
    #[default]
    Rc,
    /// One UD QP per agent: a message the fabric drops is lost for the solver.
    Ud,
}

/// By hand, so that a bad value names the key (the middleware table's own error handling
/// would otherwise take serde's "unknown variant" for an unknown middleware).
impl<'de> Deserialize<'de> for CtrlKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "rc" => Ok(CtrlKind::Rc),
            "ud" => Ok(CtrlKind::Ud),
            _ => Err(serde::de::Error::custom(format!(
                "online.ctrl: expected \"rc\" or \"ud\", got {s:?}"
            ))),
        }
    }
}

/// Where the control regions live in the agent's address space (one per peer, consecutive).
const CTRL_ADDR: u64 = 0x0C00_0000_0000_0000;
/// Receive WRs carry this bit in their wr_id; the low bits are the slot.
const RECV_BIT: u64 = 1 << 63;
/// Messages held per peer while it is not ready or its send slots are busy (the oldest goes).
const MAX_QUEUED: usize = 16;
/// How long to wait for a peer's agent on the board before giving up on its control QP.
const BOARD_PATIENCE_PS: u64 = 100_000_000_000;

/// Board key of the control QP between hosts `a` and `b` (`ready`: the "connected" record).
fn ctrl_key(a: u32, b: u32, ready: bool) -> u64 {
    let (lo, hi) = (a.min(b) as u64 & 0xFF_FFFF, a.max(b) as u64 & 0xFF_FFFF);
    (1 << 63) | (0x2F << 56) | ((ready as u64) << 55) | (lo << 31) | (hi << 7)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Published,
    Connected,
    Ready,
    Failed,
}

struct Peer {
    qp: QpNum,
    mr: MemoryRegion,
    phase: Phase,
    free: Vec<u32>,
    queue: VecDeque<Vec<u8>>,
}

/// What the channel counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CtrlStats {
    pub qps: u64,
    pub qps_ready: u64,
    /// Messages posted on a control QP, and their bytes.
    pub posted: u64,
    pub posted_bytes: u64,
    /// Messages received from the control QPs.
    pub received: u64,
    /// Dropped by the loss injection.
    pub injected_losses: u64,
    /// Dropped because the queue of a peer not ready (or busy) was full, or the peer failed.
    pub queue_drops: u64,
    /// Larger than a slot: not sent.
    pub oversize: u64,
    /// Verbs errors (QP creation, posts, failed QPs).
    pub errors: u64,
    /// UD: segments posted (a message takes one per MTU).
    pub segments: u64,
    /// UD: messages from peers the receiver found missing (sequence numbers skipped, or a
    /// message left incomplete by a newer one).
    pub lost: u64,
    /// UD: segments refused (bad header, stale or duplicate).
    pub bad_segments: u64,
}

pub struct Ctrl {
    board: SharedBoard,
    me: u32,
    slot: u64,
    recvs: u32,
    sends: u32,
    loss: f64,
    rng: u64,
    cq: Option<CqId>,
    peers: BTreeMap<u32, Peer>,
    by_qp: BTreeMap<QpNum, u32>,
    next_region: u64,
    since: Option<u64>,
    kind: CtrlKind,
    ud: Option<UdCtrl>,
    pub stats: CtrlStats,
}

/// splitmix64: the loss draws (seeded per host; no dependency for one generator).
fn next_u64(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Ctrl {
    pub fn new(
        board: SharedBoard,
        me: u32,
        kind: CtrlKind,
        slot: u64,
        recvs: u32,
        loss: f64,
        seed: u64,
    ) -> Self {
        Ctrl {
            kind,
            ud: None,
            board,
            me,
            slot,
            recvs,
            sends: recvs,
            loss,
            rng: seed ^ (me as u64).wrapping_mul(0xA076_1D64_78BD_642F),
            cq: None,
            peers: BTreeMap::new(),
            by_qp: BTreeMap::new(),
            next_region: CTRL_ADDR,
            since: None,
            stats: CtrlStats::default(),
        }
    }

    pub fn cq(&self) -> Option<CqId> {
        self.cq
    }

    pub fn start(&mut self, v: &mut dyn Verbs) {
        match v.create_cq(1 << 14) {
            Ok(cq) => {
                let _ = v.req_notify_cq(cq);
                self.cq = Some(cq);
                if self.kind == CtrlKind::Ud {
                    let sends = self.sends;
                    let len = UdCtrl::region_len(self.recvs, sends, v.caps().mtu);
                    match UdCtrl::start(
                        v,
                        self.board.clone(),
                        cq,
                        self.next_region,
                        self.recvs,
                        sends,
                    ) {
                        Ok(u) => {
                            self.stats.qps += 1;
                            self.ud = Some(u);
                        }
                        Err(_) => self.stats.errors += 1,
                    }
                    self.next_region += len.div_ceil(1 << 20) * (1 << 20);
                }
            }
            Err(_) => self.stats.errors += 1,
        }
    }

    /// The UD QP (`ctrl = "ud"`), if made.
    pub fn ud_qp(&self) -> Option<QpNum> {
        self.ud.as_ref().map(|u| u.qp())
    }

    /// `ctrl = "ud"`: looks the peers up; true while some are not on the board yet.
    fn setup_ud(&mut self, v: &mut dyn Verbs, peers: &[u32]) -> bool {
        let Some(u) = self.ud.as_mut() else {
            return false;
        };
        let waiting = u.setup(v, peers, &mut self.stats);
        let now = v.now();
        if !waiting {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        if now.saturating_sub(since) > BOARD_PATIENCE_PS {
            u.give_up(&mut self.stats);
            return false;
        }
        true
    }

    /// Creates and connects the control QPs to `peers`; true while some wait for their peer
    /// (call again later).
    pub fn setup(&mut self, v: &mut dyn Verbs, peers: &[u32]) -> bool {
        if self.kind == CtrlKind::Ud {
            return self.setup_ud(v, peers);
        }
        let Some(cq) = self.cq else {
            return false;
        };
        let me = self.me;
        let mut waiting = false;
        for &peer in peers {
            let side = if me < peer {
                Side::Client
            } else {
                Side::Server
            };
            if !self.peers.contains_key(&peer) {
                let len = (self.recvs + self.sends) as u64 * self.slot;
                let mr = match v.reg_mr(self.next_region, len, Access::LOCAL.tracked()) {
                    Ok(mr) => mr,
                    Err(_) => {
                        self.stats.errors += 1;
                        continue;
                    }
                };
                self.next_region += len.div_ceil(1 << 20) * (1 << 20);
                let init = QpInit {
                    max_send_wr: self.sends,
                    max_recv_wr: self.recvs,
                    ..QpInit::rc(cq)
                };
                let Ok(qp) = v.create_qp(&init) else {
                    self.stats.errors += 1;
                    let _ = v.dereg_mr(&mr);
                    continue;
                };
                let ep = Endpoint {
                    host: me,
                    qpn: qp,
                    addr: 0,
                    rkey: 0,
                };
                self.board
                    .borrow_mut()
                    .publish(ctrl_key(me, peer, false), side, ep);
                self.peers.insert(
                    peer,
                    Peer {
                        qp,
                        mr,
                        phase: Phase::Published,
                        free: (0..self.sends).rev().collect(),
                        queue: VecDeque::new(),
                    },
                );
                self.by_qp.insert(qp, peer);
                self.stats.qps += 1;
            }
            let p = self.peers.get_mut(&peer).expect("just made");
            if p.phase == Phase::Published {
                let found = self
                    .board
                    .borrow()
                    .lookup(ctrl_key(me, peer, false), side.peer());
                match found {
                    Some(ep) => {
                        if v.connect_qp(p.qp, ep.remote()).is_err() {
                            p.phase = Phase::Failed;
                            self.stats.errors += 1;
                            continue;
                        }
                        for i in 0..self.recvs {
                            let _ = v.post_recv(p.qp, recv_wr(&p.mr, self.slot, i));
                        }
                        p.phase = Phase::Connected;
                        let ready = Endpoint {
                            host: me,
                            qpn: p.qp,
                            addr: 0,
                            rkey: 0,
                        };
                        self.board
                            .borrow_mut()
                            .publish(ctrl_key(me, peer, true), side, ready);
                    }
                    None => waiting = true,
                }
            }
            if p.phase == Phase::Connected {
                let ok = self
                    .board
                    .borrow()
                    .lookup(ctrl_key(me, peer, true), side.peer())
                    .is_some();
                if ok {
                    p.phase = Phase::Ready;
                    self.stats.qps_ready += 1;
                } else {
                    waiting = true;
                }
            }
        }
        let ready: Vec<u32> = peers
            .iter()
            .copied()
            .filter(|h| self.peers.get(h).is_some_and(|p| p.phase == Phase::Ready))
            .collect();
        for h in ready {
            self.pump(v, h);
        }
        let now = v.now();
        if !waiting {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        if now.saturating_sub(since) > BOARD_PATIENCE_PS {
            for p in self.peers.values_mut() {
                if matches!(p.phase, Phase::Published | Phase::Connected) {
                    p.phase = Phase::Failed;
                    self.stats.errors += 1;
                    self.stats.queue_drops += p.queue.len() as u64;
                    p.queue.clear();
                }
            }
            return false;
        }
        true
    }

    /// The `candidates` (not yet set up here) whose agents have published a control QP toward
    /// this host: a link owner learns its senders this way (they set up first).
    pub fn offered(&self, candidates: &[u32]) -> Vec<u32> {
        let b = self.board.borrow();
        candidates
            .iter()
            .copied()
            .filter(|&p| p != self.me && !self.peers.contains_key(&p))
            .filter(|&p| {
                let side = if self.me < p {
                    Side::Client
                } else {
                    Side::Server
                };
                b.lookup(ctrl_key(self.me, p, false), side.peer()).is_some()
            })
            .collect()
    }

    /// Sends `bytes` to `peer` (or queues it until its QP is ready and a slot free). Returns
    /// false when the peer has no control QP yet (the caller sets it up and calls again).
    pub fn send(&mut self, v: &mut dyn Verbs, peer: u32, bytes: Vec<u8>) -> bool {
        if self.loss > 0.0 {
            let u = (next_u64(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
            if u < self.loss {
                self.stats.injected_losses += 1;
                return true;
            }
        }
        if bytes.len() as u64 > self.slot {
            self.stats.oversize += 1;
            return true;
        }
        if self.kind == CtrlKind::Ud {
            let Some(u) = self.ud.as_mut() else {
                return false;
            };
            if u.segments(bytes.len()).is_none() {
                self.stats.oversize += 1;
                return true;
            }
            u.send(v, peer, bytes, &mut self.stats);
            return true;
        }
        let Some(p) = self.peers.get_mut(&peer) else {
            return false;
        };
        if p.phase == Phase::Failed {
            self.stats.queue_drops += 1;
            return true;
        }
        if p.queue.len() >= MAX_QUEUED {
            p.queue.pop_front();
            self.stats.queue_drops += 1;
        }
        p.queue.push_back(bytes);
        if p.phase == Phase::Ready {
            self.pump(v, peer);
        }
        true
    }

    /// Posts what waits for `peer` into its free send slots.
    fn pump(&mut self, v: &mut dyn Verbs, peer: u32) {
        let slot = self.slot;
        let recvs = self.recvs;
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        while p.phase == Phase::Ready && !p.queue.is_empty() {
            let Some(&i) = p.free.last() else {
                return;
            };
            let bytes = p.queue.pop_front().expect("non-empty");
            let addr = p.mr.addr + (recvs + i) as u64 * slot;
            if v.write_local(addr, &bytes).is_err() {
                self.stats.errors += 1;
                continue;
            }
            let wr = SendWr::new(
                i as u64,
                SendOp::Send,
                vec![Sge {
                    addr,
                    length: bytes.len() as u32,
                    lkey: p.mr.lkey,
                }],
            );
            match v.post_send(p.qp, wr) {
                Ok(()) => {
                    p.free.pop();
                    self.stats.posted += 1;
                    self.stats.posted_bytes += bytes.len() as u64;
                }
                Err(_) => {
                    self.stats.errors += 1;
                    p.queue.push_front(bytes);
                    return;
                }
            }
        }
    }

    /// Polls the control CQ: frees the slots of finished sends and returns the messages that
    /// arrived, (peer, bytes), in completion order (their receives are posted again).
    pub fn poll(&mut self, v: &mut dyn Verbs) -> Vec<(u32, Vec<u8>)> {
        let Some(cq) = self.cq else {
            return Vec::new();
        };
        let mut wcs = Vec::new();
        if poll_and_rearm(v, cq, &mut wcs).is_err() {
            self.stats.errors += 1;
        }
        let mut got = Vec::new();
        let mut freed = Vec::new();
        for wc in wcs {
            if let Some(u) = self.ud.as_mut().filter(|u| u.qp() == wc.qp_num) {
                if let Some(m) = u.on_completion(v, &wc, &mut self.stats) {
                    got.push(m);
                }
                continue;
            }
            let Some(&peer) = self.by_qp.get(&wc.qp_num) else {
                continue;
            };
            let p = self.peers.get_mut(&peer).expect("indexed");
            if wc.status != WcStatus::Success {
                if p.phase != Phase::Failed {
                    p.phase = Phase::Failed;
                    self.stats.errors += 1;
                    self.stats.queue_drops += p.queue.len() as u64;
                    p.queue.clear();
                }
                continue;
            }
            if wc.wr_id & RECV_BIT != 0 {
                let i = (wc.wr_id & 0xFFFF_FFFF) as u32;
                let addr = p.mr.addr + i as u64 * self.slot;
                match v.read_local(addr, wc.byte_len) {
                    Ok(b) => {
                        self.stats.received += 1;
                        got.push((peer, b));
                    }
                    Err(_) => self.stats.errors += 1,
                }
                if v.post_recv(p.qp, recv_wr(&p.mr, self.slot, i)).is_err() {
                    self.stats.errors += 1;
                }
            } else {
                p.free.push(wc.wr_id as u32);
                freed.push(peer);
            }
        }
        freed.dedup();
        for h in freed {
            self.pump(v, h);
        }
        got
    }

    /// The control QP of `peer`, if made (tests).
    pub fn qp_of(&self, peer: u32) -> Option<QpNum> {
        self.peers.get(&peer).map(|p| p.qp)
    }
}

fn recv_wr(mr: &MemoryRegion, slot: u64, i: u32) -> RecvWr {
    RecvWr {
        wr_id: RECV_BIT | i as u64,
        sg_list: vec![Sge {
            addr: mr.addr + i as u64 * slot,
            length: slot as u32,
            lkey: mr.lkey,
        }],
    }
}
