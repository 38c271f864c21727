//! Justitia's pacer: the host's shared state ([`HostState`]: tenants by class, the token bucket,
//! the virtual link capacity) and the agent that drives it ([`JustitiaAgent`], tenant 0): it
//! grants tokens round robin, runs the reference flow to the bandwidth tenants' receiver, and
//! halves or grows the capacity against the latency target.

use super::window::Window;
use super::{Class, JustitiaConfig, WAKE_AGENT, WAKE_GRANT};
use crate::peer_link::PeerLink;
use braid_verbs::rendezvous::{BoardWait, Endpoint, LinkKeys, LinkPhase as Phase};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

/// What the host's tenants and its agent share (one per host, through `HostCtx::shared`).
pub struct HostState {
    cfg: JustitiaConfig,
    /// The line rate in bit/s.
    line: u64,
    /// This host's address.
    me: u32,
    /// Classified tenants (never `Auto`).
    class: BTreeMap<TenantId, Class>,
    /// Hosts the tenants connected QPs to (each gets a pacer link).
    peers: BTreeSet<u32>,
    /// The traffic class of the latency tenants' QPs (`Some(None)`: the NIC's default class),
    /// once a latency tenant has a QP; the reference flow runs in it, because it measures the
    /// latency such a tenant sees, which is set by the queue its packets wait in (Justitia, NSDI
    /// '22, section 4: the reference flow stands for the latency-sensitive applications).
    latency_priority: Option<Option<u8>>,
    /// Hosts bandwidth tenants send to, in the order they appeared; the reference flow goes to
    /// the first (Justitia measures against `server[0]`).
    receivers: Vec<u32>,
    /// (bandwidth + throughput, latency) tenants of each peer, from its INFO messages.
    remote: BTreeMap<u32, (u32, u32)>,
    /// The token bucket's credit in bytes (a token is a chunk's worth; negative: debt).
    credit: f64,
    /// Credit is counted up to this time.
    refill_from: u64,
    /// Tenants waiting for a token, with the bytes of the unit they want to post, served round
    /// robin.
    pending: VecDeque<(TenantId, u64)>,
    granted: BTreeMap<TenantId, Vec<u64>>,
    /// The agent has a wake on its way.
    poked: bool,
    /// When the agent's token timer fires, if armed.
    pub(crate) timer_at: Option<u64>,
    /// The bandwidth tenants' virtual link capacity, bit/s.
    cap: u64,
    /// INFO to send to the peers (the counts changed).
    info_dirty: bool,
    pub(crate) samples: u64,
    pub(crate) misses: u64,
    pub(crate) last_tail_ps: u64,
    pub(crate) tokens_granted: u64,
    /// Credit the full bucket could not hold (bytes): capacity the bandwidth tenants left unused.
    pub(crate) overflow: f64,
}

impl HostState {
    pub fn new(cfg: JustitiaConfig, line: u64, me: u32) -> Self {
        HostState {
            credit: cfg.small_chunk.0 as f64,
            cfg,
            line,
            me,
            class: BTreeMap::new(),
            peers: BTreeSet::new(),
            latency_priority: None,
            receivers: Vec::new(),
            remote: BTreeMap::new(),
            refill_from: 0,
            pending: VecDeque::new(),
            granted: BTreeMap::new(),
            poked: false,
            timer_at: None,
            cap: line,
            info_dirty: false,
            samples: 0,
            misses: 0,
            last_tail_ps: 0,
            tokens_granted: 0,
            overflow: 0.0,
        }
    }

    pub fn cfg(&self) -> &JustitiaConfig {
        &self.cfg
    }
    pub fn line(&self) -> u64 {
        self.line
    }
    /// The bandwidth tenants' virtual link capacity now, bit/s.
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// Local tenants: (bandwidth, throughput, latency).
    pub fn counts(&self) -> (u32, u32, u32) {
        let n = |c: Class| self.class.values().filter(|&&x| x == c).count() as u32;
        (n(Class::Bandwidth), n(Class::Throughput), n(Class::Latency))
    }

    /// Latency tenants here or at a host our bandwidth tenants send to.
    pub fn latency_present(&self) -> bool {
        self.counts().2 > 0
            || self
                .receivers
                .iter()
                .any(|r| self.remote.get(r).is_some_and(|c| c.1 > 0))
    }

    /// The chunk size bandwidth tenants split into now.
    pub fn chunk(&self) -> u64 {
        if self.latency_present() {
            self.cfg.small_chunk.0
        } else {
            self.cfg.big_chunk.0
        }
    }

    /// Whether the capacity is being controlled: bandwidth tenants beside latency tenants.
    pub fn controlling(&self) -> bool {
        self.counts().0 > 0 && self.latency_present()
    }

    /// The bandwidth tenants' share of the line rate, below which the capacity never goes:
    /// `big / (big + 1)` with all latency tenants counting as one, else `big / (big + latency)`
    /// (latency tenants here and at the receiver).
    pub fn floor(&self) -> u64 {
        let (b, t, l) = self.counts();
        let big = (b + t) as u128;
        let lat = if self.cfg.latency_as_one {
            1
        } else {
            let remote = self
                .receivers
                .first()
                .and_then(|r| self.remote.get(r))
                .map_or(0, |c| c.1);
            (l + remote).max(1) as u128
        };
        (self.line as u128 * big / (big + lat)) as u64
    }

    /// Records a tenant's class; true if it changed.
    pub fn set_class(&mut self, t: TenantId, c: Class) -> bool {
        if self.class.insert(t, c) == Some(c) {
            return false;
        }
        self.info_dirty = true;
        self.settle();
        true
    }

    pub fn class_of(&self, t: TenantId) -> Option<Class> {
        self.class.get(&t).copied()
    }

    /// A latency tenant's QPs use traffic class `priority` (None: the NIC's default). The first
    /// one known sets the reference flow's class: latency tenants in several classes are not
    /// told apart (Justitia has one reference flow per host).
    pub fn set_latency_priority(&mut self, priority: Option<u8>) {
        self.latency_priority.get_or_insert(priority);
    }

    /// The traffic class the reference flow runs in, once known.
    pub fn latency_priority(&self) -> Option<Option<u8>> {
        self.latency_priority
    }

    /// The pacer links may be created: a tenant has been classified (so INFO has something to
    /// say and the latency tenants' class is known if they came first) or a latency tenant's
    /// class is known.
    fn links_wanted(&self) -> bool {
        !self.class.is_empty() || self.latency_priority.is_some()
    }

    /// A tenant connected a QP to `host`; true if it is a new peer.
    pub fn want_peer(&mut self, host: u32) -> bool {
        host != self.me && self.peers.insert(host)
    }

    /// A bandwidth tenant sends to `host`.
    pub fn add_receiver(&mut self, host: u32) {
        if host != self.me && !self.receivers.contains(&host) {
            self.receivers.push(host);
            self.settle();
        }
    }

    /// The host the reference flow measures towards.
    pub fn reference_peer(&self) -> Option<u32> {
        self.receivers.first().copied()
    }

    fn set_remote(&mut self, peer: u32, big: u32, small: u32) {
        self.remote.insert(peer, (big, small));
        self.settle();
    }

    /// Without both classes the capacity is the line rate at once (Justitia's "no small flows").
    fn settle(&mut self) {
        if !self.controlling() {
            self.cap = self.line;
        }
    }

    /// One reference sample: the window's tail `tail_ps` against the target. Halves the capacity
    /// on a miss (never below the floor), adds `increase` on a hit (never above the line).
    pub fn on_sample(&mut self, now: u64, tail_ps: u64) {
        self.refill(now);
        self.samples += 1;
        self.last_tail_ps = tail_ps;
        if !self.controlling() {
            self.cap = self.line;
            return;
        }
        if tail_ps > self.cfg.target.0 {
            self.misses += 1;
            self.cap = (self.cap / 2).max(self.floor());
        } else {
            self.cap = (self.cap + self.cfg.increase.0).min(self.line);
        }
    }

    /// The bucket's depth in bytes: `max_tokens` chunks.
    fn depth(&self) -> f64 {
        (self.cfg.max_tokens as u64 * self.chunk()) as f64
    }

    /// Credit a unit of `need` bytes must find in the bucket: a token's worth at most (a WR that
    /// cannot be split goes on one token and leaves the bucket in debt).
    fn threshold(&self, need: u64) -> f64 {
        need.min(self.chunk()) as f64
    }

    fn refill(&mut self, now: u64) {
        if now > self.refill_from {
            let gained = (now - self.refill_from) as f64 * self.cap as f64 / 8e12;
            let full = self.credit + gained;
            self.credit = full.min(self.depth());
            self.overflow += full - self.credit;
            self.refill_from = now;
        }
    }

    /// Takes `need` bytes of credit at once if nobody is waiting and the bucket holds a token.
    pub fn try_take(&mut self, now: u64, need: u64) -> bool {
        if !self.pending.is_empty() {
            return false;
        }
        self.refill(now);
        if self.credit >= self.threshold(need) {
            self.credit -= need as f64;
            self.tokens_granted += 1;
            true
        } else {
            false
        }
    }

    /// Queues `t` for a token of `need` bytes; true if the agent must be woken to serve it.
    pub fn request(&mut self, t: TenantId, need: u64) -> bool {
        if !self.pending.iter().any(|p| p.0 == t) {
            self.pending.push_back((t, need));
        }
        self.timer_at.is_none() && self.poke()
    }

    /// The tokens (their sizes in bytes) the agent granted `t`.
    pub fn take_granted(&mut self, t: TenantId) -> Vec<u64> {
        self.granted.remove(&t).unwrap_or_default()
    }

    /// Returns unused credit to the bucket.
    pub fn give_back(&mut self, bytes: u64) {
        self.credit = (self.credit + bytes as f64).min(self.depth());
    }

    /// Whether a wake to the agent is needed (one at a time).
    pub fn poke(&mut self) -> bool {
        !std::mem::replace(&mut self.poked, true)
    }

    /// Grants tokens to waiting tenants in turn while the bucket has them; returns who got one
    /// and when the next is due if someone still waits.
    fn serve(&mut self, now: u64) -> (Vec<TenantId>, Option<u64>) {
        self.refill(now);
        let mut woken = Vec::new();
        while let Some(&(t, need)) = self.pending.front() {
            if self.credit < self.threshold(need) {
                break;
            }
            self.pending.pop_front();
            self.credit -= need as f64;
            self.tokens_granted += 1;
            self.granted.entry(t).or_default().push(need);
            if !woken.contains(&t) {
                woken.push(t);
            }
        }
        let next = self.pending.front().map(|&(_, need)| {
            let short = self.threshold(need) - self.credit;
            now + ((short * 8e12 / self.cap.max(1) as f64).ceil() as u64).max(1)
        });
        (woken, next)
    }
}

const T_TOKENS: u64 = 1;
const T_BOARD: u64 = 2;
const T_PROBE: u64 = 3;
const PROBE_ID: u64 = 1;
const INFO_ID: u64 = 2;
const RELINK_ID: u64 = 3;
const RECVS: u32 = 16;
/// An immediate whose upper half is all ones asks the peer for a new generation of the link
/// (the lower half); INFO's bandwidth count stays below it.
const RELINK: u32 = 0xFFFF_0000;
/// Where the agent's 64-byte region lives in the host's address space (probe target and source).
const AGENT_ADDR: u64 = 0x4A55_0000_0000_0000;

/// The board key of the pacer connection between two hosts (`ready`: the "connected" record)
/// in generation `generation` (0: the link's first QP; then its re-class legs).
fn board_key(a: u32, b: u32, ready: bool, generation: u32) -> u64 {
    let (lo, hi) = (a.min(b) as u64 & 0xFF_FFFF, a.max(b) as u64 & 0xFF_FFFF);
    (1 << 63)
        | (0x4A << 56)
        | ((ready as u64) << 55)
        | (lo << 31)
        | (hi << 7)
        | (generation as u64 & 0x7F)
}

/// The keys of the link between `me` and `peer` in generation `generation`.
fn link_keys(me: u32, peer: u32, generation: u32) -> LinkKeys {
    LinkKeys::between(
        me,
        peer,
        board_key(me, peer, false, generation),
        board_key(me, peer, true, generation),
    )
}

/// The host's pacer (tenant 0's layer).
pub struct JustitiaAgent {
    st: Rc<RefCell<HostState>>,
    board: rendezvous::SharedBoard,
    cq: Option<CqId>,
    mr: Option<MemoryRegion>,
    links: BTreeMap<u32, PeerLink>,
    window: Window,
    /// The outstanding probe: (peer, QP, posted at).
    probe: Option<(u32, QpNum, u64)>,
    /// The class of the QP the last probe went on (`Some(None)`: the NIC's default).
    probe_class: Option<Option<u8>>,
    /// Legs made to move the reference flow into the latency tenants' class (ours and at a
    /// peer's request).
    relinks: u32,
    probe_timer: bool,
    /// Waiting on the board for peers' pacers.
    wait: BoardWait,
    peers_missing: u32,
    link_errors: u32,
    /// The board's patience ran out while links waited for a tenant here to be classified.
    gate_gave_up: bool,
}

impl JustitiaAgent {
    pub fn new(st: Rc<RefCell<HostState>>, board: rendezvous::SharedBoard) -> Self {
        let window = Window::new(st.borrow().cfg().window as usize);
        let patience = st.borrow().cfg().board_patience.0;
        JustitiaAgent {
            st,
            board,
            cq: None,
            mr: None,
            links: BTreeMap::new(),
            window,
            probe: None,
            probe_class: None,
            relinks: 0,
            probe_timer: false,
            wait: BoardWait::new(patience),
            peers_missing: 0,
            link_errors: 0,
            gate_gave_up: false,
        }
    }

    /// Everything the agent does when woken or when a timer fires.
    fn service(&mut self, v: &mut dyn Verbs) {
        self.setup_links(v);
        let now = v.now();
        let (woken, next) = self.st.borrow_mut().serve(now);
        for t in woken {
            v.wake(t, WAKE_GRANT);
        }
        let arm = {
            let mut s = self.st.borrow_mut();
            match (next, s.timer_at) {
                (Some(n), None) => {
                    s.timer_at = Some(n);
                    Some(n)
                }
                _ => None,
            }
        };
        if let Some(n) = arm {
            v.set_timer(n, T_TOKENS);
        }
        self.send_relinks(v);
        self.send_info(v);
        self.maybe_probe(v);
    }

    /// Creates, publishes and connects the pacer links the tenants' peers call for.
    fn setup_links(&mut self, v: &mut dyn Verbs) {
        let (Some(cq), Some(mr)) = (self.cq, self.mr) else {
            return;
        };
        let reclass_to = self.st.borrow().latency_priority();
        if self.wait.idle()
            && self.st.borrow().peers.len() == self.links.len()
            && self
                .links
                .values()
                .all(|l| l.settled() && reclass_to.is_none_or(|c| !l.wants_reclass(c)))
        {
            // Nothing new, nothing waiting (the common case: every token's service).
            return;
        }
        // The link's QP carries the reference flow, whose class is the latency tenants': it is
        // created once a tenant is classified (a QP's class is fixed when it is created), or at
        // once when the peer's pacer waits for it (this host then only answers probes).
        let gate_open = self.st.borrow().links_wanted();
        let probe_class = self.st.borrow().latency_priority().flatten();
        let mut gated = false;
        let me = v.local_host();
        let keys = |p| link_keys(me, p, 0);
        let wanted: Vec<u32> = self.st.borrow().peers.iter().copied().collect();
        for p in wanted {
            if self.links.contains_key(&p) {
                continue;
            }
            let k = keys(p);
            if !gate_open && self.board.borrow().lookup(k.conn, k.side.peer()).is_none() {
                gated = true;
                continue;
            }
            let init = QpInit {
                max_send_wr: 1024,
                max_recv_wr: 2 * RECVS,
                priority: probe_class,
                ..QpInit::rc(cq)
            };
            let Ok(qp) = v.create_qp(&init) else {
                self.link_errors += 1;
                continue;
            };
            let ep = Endpoint {
                host: me,
                qpn: qp,
                addr: mr.addr,
                rkey: mr.rkey,
            };
            keys(p).publish(&self.board, ep);
            self.links
                .insert(p, PeerLink::published_in(p, qp, probe_class));
        }
        // Re-class: the latency tenants' class became known after a link was made in another
        // (a tenant classified late, after a bandwidth tenant): the reference flow moves to a
        // leg in that class (`peer_link`), whose generation the peer learns on the link.
        if let Some(class) = reclass_to {
            let stale: Vec<u32> = self
                .links
                .iter()
                .filter(|(_, l)| l.wants_reclass(class))
                .map(|(&p, _)| p)
                .collect();
            for p in stale {
                let g = self.links[&p].next_generation();
                self.open_leg(v, p, g, class, false);
            }
        }
        // Gated links wait for the peer only as long as the board's patience: then only a
        // classification here (which wakes the agent) creates them.
        let mut waiting = gated && !self.gate_gave_up;
        let mut became_ready = false;
        for (&p, l) in self.links.iter_mut() {
            let ep = Endpoint {
                host: me,
                qpn: l.qp,
                addr: mr.addr,
                rkey: mr.rkey,
            };
            let was = l.phase;
            let step = l.advance(v, &self.board, keys(p), ep, |v, _| {
                for i in 0..RECVS {
                    let _ = v.post_recv(
                        ep.qpn,
                        RecvWr {
                            wr_id: i as u64,
                            sg_list: vec![],
                        },
                    );
                }
            });
            match step {
                Ok(w) => waiting |= w,
                Err(_) => self.link_errors += 1,
            }
            became_ready |= was != Phase::Ready && l.phase == Phase::Ready;
            let ours = |qp| Endpoint {
                host: me,
                qpn: qp,
                addr: mr.addr,
                rkey: mr.rkey,
            };
            let (w, errors) = l.advance_legs(v, &self.board, |g| link_keys(me, p, g), ours);
            waiting |= w;
            self.link_errors += errors.len() as u32;
        }
        if became_ready {
            // The new peer learns our counts.
            self.st.borrow_mut().info_dirty = true;
        }
        if self.wait.after_pass(v, waiting, T_BOARD) {
            self.gate_gave_up |= gated;
            // The peer runs no pacer: give up on what is still waiting.
            for l in self.links.values_mut() {
                if l.give_up() {
                    self.peers_missing += 1;
                }
            }
        }
    }

    /// Creates a leg of the link to `peer` in `class` under generation `generation` and
    /// publishes its endpoint (`asked`: the peer asked for it).
    fn open_leg(
        &mut self,
        v: &mut dyn Verbs,
        peer: u32,
        generation: u32,
        class: Option<u8>,
        asked: bool,
    ) {
        let (Some(cq), Some(mr)) = (self.cq, self.mr) else {
            return;
        };
        let init = QpInit {
            max_send_wr: 1024,
            max_recv_wr: 1,
            priority: class,
            ..QpInit::rc(cq)
        };
        let Ok(qp) = v.create_qp(&init) else {
            self.link_errors += 1;
            return;
        };
        let me = v.local_host();
        link_keys(me, peer, generation).publish(
            &self.board,
            Endpoint {
                host: me,
                qpn: qp,
                addr: mr.addr,
                rkey: mr.rkey,
            },
        );
        if let Some(l) = self.links.get_mut(&peer) {
            l.reclass(qp, class, generation, asked);
            self.relinks += 1;
        }
    }

    /// Asks each peer, on the link's first QP, to make the legs we made (a 0-byte
    /// WRITE_WITH_IMM, `RELINK | generation`).
    fn send_relinks(&mut self, v: &mut dyn Verbs) {
        for link in self.links.values_mut().filter(|l| l.is_ready()) {
            let r = link.remote().expect("a ready link knows its peer");
            for g in link.take_unannounced() {
                let mut wr = SendWr::new(RELINK_ID, SendOp::WriteWithImm(RELINK | g), vec![]);
                wr.remote_addr = r.addr;
                wr.rkey = r.rkey;
                if v.post_send(link.qp, wr).is_err() {
                    self.link_errors += 1;
                }
            }
        }
    }

    /// Tells every connected peer how many bandwidth (+ throughput) and latency tenants we have.
    fn send_info(&mut self, v: &mut dyn Verbs) {
        let (b, t, l) = {
            let mut s = self.st.borrow_mut();
            if !s.info_dirty {
                return;
            }
            s.info_dirty = false;
            s.counts()
        };
        let imm = ((b + t).min(0xFFFE) << 16) | l.min(0xFFFF);
        for link in self.links.values().filter(|l| l.is_ready()) {
            let r = link.remote().expect("a ready link knows its peer");
            let mut wr = SendWr::new(INFO_ID, SendOp::WriteWithImm(imm), vec![]);
            wr.remote_addr = r.addr;
            wr.rkey = r.rkey;
            let _ = v.post_send(link.qp, wr);
        }
    }

    /// Posts the next reference WRITE if none is outstanding and a receiver's link is ready.
    fn maybe_probe(&mut self, v: &mut dyn Verbs) {
        if self.probe.is_some() || self.probe_timer {
            return;
        }
        let Some(peer) = self.st.borrow().reference_peer() else {
            return;
        };
        let (Some(link), Some(mr)) = (self.links.get(&peer), self.mr) else {
            return;
        };
        // The newest ready QP in the latency tenants' class (a leg once re-classed).
        let Some((qp, class)) = link.class_qp() else {
            return;
        };
        let r = if qp == link.qp {
            link.remote()
        } else {
            link.legs()
                .iter()
                .find(|l| l.qp == qp)
                .and_then(|l| l.remote())
        }
        .expect("a ready QP knows its peer");
        let size = self.st.borrow().cfg().probe_size.0 as u32;
        let sge = Sge {
            addr: mr.addr + 32,
            length: size,
            lkey: mr.lkey,
        };
        let mut wr = SendWr::new(PROBE_ID, SendOp::Write, vec![sge]);
        wr.inline = true;
        wr.remote_addr = r.addr;
        wr.rkey = r.rkey;
        let at = v.now();
        if v.post_send(qp, wr).is_ok() {
            self.probe = Some((peer, qp, at));
            self.probe_class = Some(class);
        } else {
            self.link_errors += 1;
        }
    }

    fn on_completions(&mut self, v: &mut dyn Verbs, cq: CqId) {
        let now = v.now();
        let mut wcs = Vec::new();
        if poll_and_rearm(v, cq, &mut wcs).is_err() {
            return;
        }
        for wc in wcs {
            let Some((&peer, _)) = self.links.iter().find(|(_, l)| l.owns(wc.qp_num)) else {
                continue;
            };
            if wc.status != WcStatus::Success {
                if let Some(l) = self.links.get_mut(&peer) {
                    if l.fail_qp(wc.qp_num) {
                        self.link_errors += 1;
                    }
                }
                if self.probe.is_some_and(|p| p.1 == wc.qp_num) {
                    self.probe = None;
                }
                continue;
            }
            match wc.opcode {
                WcOpcode::RecvWithImm => {
                    let link = self.links.get_mut(&peer).expect("found");
                    let mut leg = None;
                    if link.from_peer(&wc) {
                        let imm = wc.imm.unwrap_or(0);
                        if imm & RELINK == RELINK {
                            let g = imm & !RELINK;
                            leg = link.wants_generation(g).then_some(g);
                        } else {
                            self.st
                                .borrow_mut()
                                .set_remote(peer, imm >> 16, imm & 0xFFFF);
                        }
                    } else {
                        self.link_errors += 1;
                    }
                    // (A forged message consumed a receive too.)
                    let qp = wc.qp_num;
                    if let Some(g) = leg {
                        // The peer moved its end into another class: our end of the new
                        // generation, in our own reference flow's class.
                        let class = self.st.borrow().latency_priority().flatten();
                        self.open_leg(v, peer, g, class, true);
                    }
                    let _ = v.post_recv(
                        qp,
                        RecvWr {
                            wr_id: 0,
                            sg_list: vec![],
                        },
                    );
                }
                WcOpcode::Write
                    if wc.wr_id == PROBE_ID && self.probe.is_some_and(|p| p.1 == wc.qp_num) =>
                {
                    if let Some((_, _, at)) = self.probe.take() {
                        self.window.push(now.saturating_sub(at));
                        let q = self.st.borrow().cfg().percentile;
                        let tail = self.window.quantile(q);
                        self.st.borrow_mut().on_sample(now, tail);
                        let iv = self.st.borrow().cfg().probe_interval.0;
                        if iv > 0 {
                            self.probe_timer = true;
                            v.set_timer((at + iv).max(now), T_PROBE);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

impl Middleware for JustitiaAgent {
    fn name(&self) -> &'static str {
        "justitia"
    }

    fn start(&mut self, below: &mut dyn Verbs) {
        if let Ok(cq) = below.create_cq(4096) {
            if below.req_notify_cq(cq).is_ok() {
                self.cq = Some(cq);
            }
        }
        self.mr = below.reg_mr(AGENT_ADDR, 64, Access::ALL).ok();
        self.st.borrow_mut().refill_from = below.now();
        self.service(below);
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Wake(WAKE_AGENT) => {
                self.st.borrow_mut().poked = false;
                self.service(below);
            }
            Event::Timer(T_TOKENS) => {
                self.st.borrow_mut().timer_at = None;
                self.service(below);
            }
            Event::Timer(T_BOARD) => {
                self.wait.fired();
                self.service(below);
            }
            Event::Timer(T_PROBE) => {
                self.probe_timer = false;
                self.maybe_probe(below);
            }
            Event::Completion(cq) if Some(cq) == self.cq => {
                self.on_completions(below, cq);
                self.service(below);
            }
            e => up.push(e),
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = self.st.borrow();
        let (b, t, l) = s.counts();
        let ready = self.links.values().filter(|l| l.is_ready()).count();
        vec![
            ("capacity_gbps", s.capacity() as f64 / 1e9),
            ("target_misses", s.misses as f64),
            ("samples", s.samples as f64),
            ("tail_us", s.last_tail_ps as f64 / 1e6),
            ("chunk_bytes", s.chunk() as f64),
            ("tokens_granted", s.tokens_granted as f64),
            ("unused_mb", s.overflow / 1e6),
            ("bandwidth_tenants", b as f64),
            ("throughput_tenants", t as f64),
            ("latency_tenants", l as f64),
            ("links_ready", ready as f64),
            ("peers_missing", self.peers_missing as f64),
            ("link_errors", self.link_errors as f64),
            (
                "probe_class",
                self.probe_class.map_or(-1.0, |c| c.map_or(-2.0, f64::from)),
            ),
            ("relinks", self.relinks as f64),
        ]
    }
}
