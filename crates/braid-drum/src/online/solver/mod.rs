//! [`HostSolver`]: one host's ADMM (Algorithm 2; Algorithm 1 when it has no two-sided traffic)
//! as a sans-IO state machine. See the module documentation of [`super`] for the round structure.
//!
//! Per pair (sender connection l → CQ row e of this host, coefficient `p = a_e`, value
//! `c = B x_l` carried by the contribution) the coordinator keeps the auxiliary `y` of the
//! sharing splitting `p c = y`, `z_e = Σ y` (the same splitting as [`crate::admm`], with the
//! scaled dual `v_e` shared by the row's pairs):
//!
//! ```text
//!   h   = relax p c + (1 − relax) y
//!   z   = argmin −g(z) + ρ_e/(2 n_e) (z_e − Σ h − n_e v_e)²   over Σ z ≤ C
//!   d   = (Σ h − z_e)/n_e ;  v_e += d ;  y = h − d
//!   reply (ρ_e p², ρ_e p (y − v_e))
//!   x   = argmin −Σ w U(x) + Σ_pairs ρ_e/2 (p B x − y + v_e)²   over Σ x ≤ Q, x ≤ demand
//! ```
//! A connection's own completions are the pair (l = e, p = a, c = x), kept locally.

use super::wire::{Body, Header, Kind, Message, PairKey, WireError};
use super::{ConnRate, LocalInstance, OnlineConfig, Rates, Stats};
use crate::problem::DrumError;
use crate::scalar::Alpha;
use std::collections::{BTreeMap, HashMap, VecDeque};

mod links;
mod steps;

use links::{is_link, LinkRow};

/// Buffered rounds per neighbour and kind beyond which new ones are dropped (bounded memory
/// whatever a peer sends).
const MAX_BUFFERED: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// a solve is due (new instance, first start): the next `handle_timeout` starts it
    Start,
    /// waiting for the contributions of round r until the deadline
    Contribs(u64, u64),
    /// waiting for the replies of round r until the deadline
    Replies(u64, u64),
    /// the last round is being computed (`round_gap_ns`): the next starts at the time given
    Next(u64),
    Idle,
}

#[derive(Clone, Debug)]
struct OutPair {
    host: u32,
    conn: u32,
    frac: f64,
    /// the coordinator's last reply: ρ a², ρ a (y − v) in units of B x
    qa: f64,
    qb: f64,
    have: bool,
}

#[derive(Clone, Debug)]
struct InPair {
    host: u32,
    conn: u32,
    /// last contribution B x received
    val: f64,
    y: f64,
    seen: bool,
    /// y has been initialised (first value seen)
    init: bool,
    /// updated in the current round
    fresh: bool,
}

#[derive(Clone, Debug)]
struct Entry {
    id: u32,
    w: f64,
    a: f64,
    hi: f64,
    x: f64,
    outs: Vec<OutPair>,
    // the connection's own CQ row
    z: f64,
    v: f64,
    /// penalty before the host's adaptive factor; 0 until the row's first z-step
    rho_base: f64,
    curv: f64,
    /// The row's price `ρ v` carried over a change of its pairs (its penalty is chosen again
    /// and `v` rescaled to keep the price); None for a new row (v = 0).
    price: Option<f64>,
    self_y: f64,
    self_init: bool,
    self_qa: f64,
    self_qb: f64,
    ins: Vec<InPair>,
}

#[derive(Clone, Debug, Default)]
struct Nbr {
    /// payloads received and not yet consumed, by round label
    contribs: BTreeMap<u64, Vec<(PairKey, f64)>>,
    replies: BTreeMap<u64, Vec<(PairKey, f64, f64)>>,
    /// label of the last consumed payload of each kind (older ones are discarded)
    got_c: Option<u64>,
    got_r: Option<u64>,
    idle: bool,
    settled: bool,
    epoch: Option<u32>,
}

/// Why a message was not accepted.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageError {
    Wire(WireError),
    /// the message claims to come from this host
    FromSelf(u32),
}

impl std::fmt::Display for MessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageError::Wire(e) => write!(f, "malformed DRUM control message: {e}"),
            MessageError::FromSelf(h) => write!(f, "DRUM control message from host {h} to itself"),
        }
    }
}

impl std::error::Error for MessageError {}

/// One host's online DRUM solver.
pub struct HostSolver {
    host: u32,
    cfg: OnlineConfig,
    inst: LocalInstance,
    al: Alpha,
    ents: Vec<Entry>,
    /// fabric link rows this host owns
    links: Vec<LinkRow>,
    /// (sender host, sender conn, row) → (entry, inbound index)
    in_index: HashMap<(u32, u32, u32), (usize, usize)>,
    /// (receiver host, sender conn, row) → (entry, outbound index)
    out_index: HashMap<(u32, u32, u32), (usize, usize)>,
    in_hosts: Vec<u32>,
    out_hosts: Vec<u32>,
    /// hosts dropped from `out_hosts` by the last change, told so by one empty contribution
    retired: Vec<u32>,
    nbrs: BTreeMap<u32, Nbr>,
    phase: Phase,
    round: u64,
    /// highest round seen in any message (a Lamport clock for the start of a new solve)
    heard: u64,
    /// the round a peer is in at the latest: a contribution labelled L means round L, a reply
    /// labelled L that the peer waits for round L + 1's contributions next
    ahead: u64,
    epoch: u32,
    now: u64,
    lam: f64,
    mu: f64,
    /// the host's residual-balancing factor on its rows' penalties
    factor: f64,
    settled_run: u32,
    settled: bool,
    /// relative primal residual and z change of the last z-step
    r_rel: f64,
    dz_rel: f64,
    outq: VecDeque<(u32, Vec<u8>)>,
    rates: Option<Rates>,
    stats: Stats,
}

/// A row as a cold start has it: no penalty, price or CQ state yet; its rate `x` cut to the
/// demand.
fn new_row(c: &super::Connection, x: f64, outs: Vec<OutPair>, ins: Vec<InPair>) -> Entry {
    Entry {
        id: c.id,
        w: c.weight,
        a: c.a,
        hi: c.demand,
        x: x.min(c.demand),
        outs,
        z: 0.0,
        v: 0.0,
        rho_base: 0.0,
        curv: f64::NAN,
        price: None,
        self_y: 0.0,
        self_init: false,
        self_qa: 0.0,
        self_qb: 0.0,
        ins,
    }
}

/// A new demand that changes whether the row's demand bound binds: it cuts the rate the row
/// had, or the old bound was binding (the rate at it) and the bound moved. A demand that moves
/// far above the rate changes nothing of the row's solve and keeps its state.
fn demand_moves_row(e: &Entry, demand: f64) -> bool {
    if demand == e.hi {
        return false;
    }
    let was_bound = e.hi.is_finite() && e.x >= e.hi * (1.0 - 1e-9);
    was_bound || e.x > demand
}

fn rel(num2: f64, den2: f64) -> f64 {
    if num2 == 0.0 {
        0.0
    } else {
        (num2 / den2.max(1e-300)).sqrt()
    }
}

impl HostSolver {
    /// A solver for host `host_id` (validates the instance and the configuration). The first
    /// solve starts at the first [`HostSolver::handle_timeout`] (`poll_timeout` is due at once).
    pub fn new(host_id: u32, inst: LocalInstance, cfg: OnlineConfig) -> Result<Self, DrumError> {
        cfg.validate()?;
        inst.validate(host_id)?;
        let mut s = HostSolver {
            host: host_id,
            al: Alpha::new(inst.alpha),
            cfg,
            inst: LocalInstance {
                conns: Vec::new(),
                inbound: Vec::new(),
                links: Vec::new(),
                ..inst.clone()
            },
            ents: Vec::new(),
            links: Vec::new(),
            in_index: HashMap::new(),
            out_index: HashMap::new(),
            in_hosts: Vec::new(),
            out_hosts: Vec::new(),
            retired: Vec::new(),
            nbrs: BTreeMap::new(),
            phase: Phase::Start,
            round: 0,
            heard: 0,
            ahead: 0,
            epoch: 0,
            now: 0,
            lam: 0.0,
            mu: 0.0,
            factor: 1.0,
            settled_run: 0,
            settled: false,
            r_rel: f64::INFINITY,
            dz_rel: f64::INFINITY,
            outq: VecDeque::new(),
            rates: None,
            stats: Stats::default(),
        };
        s.install(inst);
        Ok(s)
    }

    pub fn host(&self) -> u32 {
        self.host
    }

    pub fn instance(&self) -> &LocalInstance {
        &self.inst
    }

    /// Replace the instance (connections, capacities, weights, demands): a new epoch, solved
    /// warm from the current state of the connections (and rows, and pairs) that remain; if a
    /// demand bound starts or stops binding, the rows start over from the rates (see `install`).
    pub fn set_instance(&mut self, inst: LocalInstance) -> Result<(), DrumError> {
        inst.validate(self.host)?;
        if inst.alpha != self.inst.alpha {
            return Err(DrumError::new(
                "alpha",
                "cannot change between epochs (it is the same on every host)",
            ));
        }
        self.install(inst);
        self.epoch = self.epoch.wrapping_add(1);
        self.begin_change();
        let label = self.round.max(self.heard).saturating_add(1);
        for h in std::mem::take(&mut self.retired) {
            self.send(h, Kind::Contrib, label, Body::Contrib(Vec::new()));
        }
        Ok(())
    }

    /// Replace the connections only (an arrival or a departure): see [`HostSolver::set_instance`].
    pub fn set_connections(
        &mut self,
        conns: Vec<super::Connection>,
        inbound: Vec<super::Inbound>,
    ) -> Result<(), DrumError> {
        let inst = LocalInstance {
            conns,
            inbound,
            ..self.inst.clone()
        };
        self.set_instance(inst)
    }

    /// A new measured demand (upper bound on the WQE rate) of one connection: a warm re-solve.
    pub fn update_demand(&mut self, conn: u32, demand: f64) -> Result<(), DrumError> {
        let mut inst = self.inst.clone();
        let c = inst
            .conns
            .iter_mut()
            .find(|c| c.id == conn)
            .ok_or_else(|| {
                DrumError::new(
                    "conn",
                    format!("host {} has no connection {conn}", self.host),
                )
            })?;
        c.demand = demand;
        self.set_instance(inst)
    }

    fn begin_change(&mut self) {
        if self.cfg.reset_penalty {
            // the balancing factor suited the end of the last solve; the scaled duals keep
            // their prices (u = ρ v)
            let f = self.factor;
            self.ents.iter_mut().for_each(|e| e.v *= f);
            self.factor = 1.0;
        }
        self.settled_run = 0;
        self.settled = false;
        if self.phase == Phase::Idle {
            self.phase = Phase::Start;
        } else if self.phase != Phase::Start {
            // mid-solve: the rounds go on with the new instance, counted as a new solve
            self.stats.solves += 1;
            self.stats.iterations = 0;
        }
    }

    /// Build the entries of `inst`, keeping the state of those that remain.
    fn install(&mut self, inst: LocalInstance) {
        let mut old: HashMap<u32, Entry> = self.ents.drain(..).map(|e| (e.id, e)).collect();
        let fresh_x = inst.q_cap / inst.conns.len().max(1) as f64;
        // A demand bound that starts or stops binding on any row moves the host's capacity
        // prices and with them every row's share: all the rows restart (see below), not only
        // the changed ones (those alone: 7,289 rounds in test case 4 at a decision every
        // 50 µs, against 5,137 cold and 3,965 so).
        let restart = inst.conns.iter().any(|c| {
            old.get(&c.id)
                .is_some_and(|p| demand_moves_row(p, c.demand))
        });
        let mut ents = Vec::with_capacity(inst.conns.len());
        for c in &inst.conns {
            let prev = old.remove(&c.id);
            let outs: Vec<OutPair> = c
                .out
                .iter()
                .map(|o| (o.host, o.conn, o.frac))
                .chain(
                    c.links
                        .iter()
                        .map(|u| (u.owner, u.link | super::wire::LINK_BIT, u.coef)),
                )
                .map(|(host, conn, frac)| {
                    let kept = prev
                        .as_ref()
                        .and_then(|p| p.outs.iter().find(|q| q.host == host && q.conn == conn));
                    OutPair {
                        host,
                        conn,
                        frac,
                        qa: kept.map_or(0.0, |q| q.qa),
                        qb: kept.map_or(0.0, |q| q.qb),
                        have: kept.is_some_and(|q| q.have),
                    }
                })
                .collect();
            let ins: Vec<InPair> = inst
                .inbound
                .iter()
                .filter(|b| b.row == c.id)
                .map(|b| {
                    let kept = prev
                        .as_ref()
                        .and_then(|p| p.ins.iter().find(|q| q.host == b.host && q.conn == b.conn));
                    match kept {
                        Some(k) => k.clone(),
                        None => InPair {
                            host: b.host,
                            conn: b.conn,
                            val: 0.0,
                            y: 0.0,
                            seen: false,
                            init: false,
                            fresh: false,
                        },
                    }
                })
                .collect();
            let e = match prev {
                Some(p) if restart => {
                    // A row's penalty was the curvature at the row sum it was first seen
                    // with, and its price the CQ utility's marginal there; a demand bound
                    // that starts or stops binding moves the row sums (and with β/z² the
                    // curvature as their fourth power), so both are stale and far off the new
                    // optimum's (kept, the re-solve took 423 rounds against 131 cold in
                    // tests/online.rs, and stopped 3 % off the optimum). The row starts over
                    // as a new one: its penalty from the new row sum, its price 0, as a cold
                    // start has them. Its rate starts where it was, raised to the cold start's
                    // equal split (a lifted bound lets it rise) and cut to the demand: not
                    // lowered to the equal split, far from where the solve had brought it
                    // (restarting from it only the rows whose bound binds nowhere took
                    // 3,000 rounds there, against 3 kept).
                    let mut ins = ins;
                    for q in &mut ins {
                        q.y = 0.0;
                        q.init = false;
                    }
                    new_row(c, p.x.max(fresh_x), outs, ins)
                }
                Some(p) => {
                    // A row that gains or loses its remote pairs (one-sided <-> two-sided)
                    // gets the penalty of its new kind; its price is kept.
                    let was = p.ins.is_empty() && p.outs.iter().all(|o| is_link(o.conn));
                    let is = ins.is_empty() && outs.iter().all(|o| is_link(o.conn));
                    let (rho_base, curv, price) = if was != is && p.rho_base > 0.0 {
                        (0.0, f64::NAN, Some(self.factor * p.rho_base * p.v))
                    } else {
                        (p.rho_base, p.curv, p.price)
                    };
                    Entry {
                        w: c.weight,
                        a: c.a,
                        hi: c.demand,
                        x: p.x.min(c.demand),
                        outs,
                        ins,
                        rho_base,
                        curv,
                        price,
                        ..p
                    }
                }
                None => new_row(c, fresh_x, outs, ins),
            };
            ents.push(e);
        }
        self.ents = ents;
        self.in_index.clear();
        self.out_index.clear();
        let mut oh = Vec::new();
        for (k, e) in self.ents.iter().enumerate() {
            for (t, p) in e.ins.iter().enumerate() {
                self.in_index.insert((p.host, p.conn, e.id), (k, t));
            }
            for (t, p) in e.outs.iter().enumerate() {
                self.out_index.insert((p.host, e.id, p.conn), (k, t));
                if p.host != self.host {
                    oh.push(p.host);
                }
            }
        }
        oh.sort_unstable();
        oh.dedup();
        // a host this one no longer sends to may keep link pairs learnt from it: one empty
        // contribution tells it (a CQ row's peer learns the change from its own agent)
        // (sent by `set_instance` once the new epoch is open, so that it wakes the peer)
        self.retired = self
            .out_hosts
            .iter()
            .copied()
            .filter(|h| oh.binary_search(h).is_err())
            .collect();
        self.out_hosts = oh;
        self.install_links(&inst.links);
        self.refresh_in_hosts();
        for h in &self.out_hosts {
            self.nbrs.entry(*h).or_default();
        }
        self.inst = inst;
    }

    /// The next control message to send, if any.
    pub fn poll_transmit(&mut self) -> Option<(u32, Vec<u8>)> {
        self.outq.pop_front()
    }

    /// When [`HostSolver::handle_timeout`] is next due (a deadline already past means now).
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Start => Some(self.now),
            Phase::Contribs(_, d) | Phase::Replies(_, d) | Phase::Next(d) => Some(d),
            Phase::Idle => None,
        }
    }

    /// The rates of the last completed round (None before the first).
    pub fn rates(&self) -> Option<&Rates> {
        self.rates.as_ref()
    }

    /// The last round's rates of one connection.
    pub fn rate(&self, conn: u32) -> Option<ConnRate> {
        self.rates
            .as_ref()?
            .conns
            .iter()
            .find(|c| c.id == conn)
            .copied()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// No solve in progress (settled, or gave up) and none due.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    pub fn round(&self) -> u64 {
        self.round
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    pub fn handle_timeout(&mut self, now_ns: u64) {
        self.now = self.now.max(now_ns);
        match self.phase {
            Phase::Start => self.start_solve(),
            Phase::Next(at) if self.now >= at => self.next_round(),
            _ => {}
        }
        self.advance(true);
    }

    /// A control message from `from_host`. Malformed bytes are an error (counted, no state
    /// change); items naming pairs this host does not know are ignored (counted).
    pub fn handle_message(
        &mut self,
        now_ns: u64,
        from_host: u32,
        bytes: &[u8],
    ) -> Result<(), MessageError> {
        self.now = self.now.max(now_ns);
        let msg = match Message::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(MessageError::Wire(e));
            }
        };
        if from_host == self.host {
            self.stats.malformed += 1;
            return Err(MessageError::FromSelf(from_host));
        }
        self.stats.messages_received += 1;
        self.stats.bytes_received += bytes.len() as u64;
        let Message { header, body } = msg;
        let r = header.round;
        self.heard = self.heard.max(r);
        self.ahead = self.ahead.max(match header.kind {
            Kind::Reply => r.saturating_add(1),
            _ => r,
        });
        let nbr = self.nbrs.entry(from_host).or_default();
        let new_epoch = nbr.epoch.is_some_and(|e| e != header.epoch);
        nbr.epoch = Some(header.epoch);
        if new_epoch {
            self.settled_run = 0;
        }
        let regular = match body {
            Body::Idle => {
                nbr.idle = true;
                nbr.settled = true;
                false
            }
            Body::Contrib(items) => {
                nbr.idle = false;
                nbr.settled = header.settled;
                if nbr.got_c.is_some_and(|g| r <= g) {
                    self.stats.late_values += items.len() as u64;
                } else if nbr.contribs.len() < MAX_BUFFERED || nbr.contribs.contains_key(&r) {
                    nbr.contribs.insert(r, items);
                }
                true
            }
            Body::Reply(items) => {
                nbr.idle = false;
                nbr.settled = header.settled;
                if nbr.got_r.is_some_and(|g| r <= g) {
                    self.stats.late_values += items.len() as u64;
                } else if nbr.replies.len() < MAX_BUFFERED || nbr.replies.contains_key(&r) {
                    nbr.replies.insert(r, items);
                }
                true
            }
        };
        let wake = regular && self.phase == Phase::Idle && (!header.settled || new_epoch);
        if regular && self.phase == Phase::Idle && !wake {
            // a settled neighbour's last values: take them now, so that nothing stale waits
            // in the buffers to pass for a fresh message of a later solve
            let n = self.nbrs.get_mut(&from_host).unwrap();
            if let Some((l, items)) = n.contribs.pop_last() {
                n.got_c = Some(l);
                n.contribs.clear();
                self.apply_contribs(from_host, items);
            }
            let n = self.nbrs.get_mut(&from_host).unwrap();
            if let Some((l, items)) = n.replies.pop_last() {
                n.got_r = Some(l);
                n.replies.clear();
                self.apply_replies(from_host, items);
            }
        }
        if wake {
            // a neighbour is still moving (or has a new instance): join it at its round
            self.stats.solves += 1;
            self.stats.iterations = 0;
            self.settled_run = 0;
            if header.kind == Kind::Contrib {
                self.start_round(r);
            } else {
                self.round = r;
                self.phase = Phase::Replies(r, self.now.saturating_add(self.cfg.window_ns));
            }
        }
        self.advance(false);
        Ok(())
    }

    fn start_solve(&mut self) {
        self.stats.solves += 1;
        self.stats.iterations = 0;
        self.stats.gave_up = false;
        self.settled_run = 0;
        // join a solve the neighbours have already begun, else start past every round heard
        let pending = self
            .nbrs
            .values()
            .flat_map(|n| n.contribs.keys().chain(n.replies.keys()))
            .copied()
            .filter(|&r| r > self.round)
            .min();
        let r = pending.unwrap_or(self.round.max(self.heard).saturating_add(1));
        self.start_round(r);
    }

    fn send(&mut self, to: u32, kind: Kind, round: u64, body: Body) {
        let m = Message {
            header: Header {
                kind,
                settled: self.settled,
                epoch: self.epoch,
                round,
            },
            body,
        };
        let b = m.encode();
        self.stats.messages_sent += 1;
        self.stats.bytes_sent += b.len() as u64;
        if kind != Kind::Idle && !self.settled {
            // an idle neighbour wakes on an unsettled message: wait for its answer again
            if let Some(n) = self.nbrs.get_mut(&to) {
                n.idle = false;
            }
        }
        self.outq.push_back((to, b));
    }

    /// Round r, first half: send this host's contributions, wait for its senders'.
    fn start_round(&mut self, r: u64) {
        self.round = r;
        // one pass over the pairs, each to its host's message (in the entries' order, as a
        // pass per host gave them: that was hosts × pairs of work per round)
        let mut per: Vec<Vec<(PairKey, f64)>> = vec![Vec::new(); self.out_hosts.len()];
        for e in &self.ents {
            for o in &e.outs {
                if let Ok(t) = self.out_hosts.binary_search(&o.host) {
                    per[t].push(((e.id, o.conn), o.frac * e.x));
                }
            }
        }
        for (t, items) in per.into_iter().enumerate() {
            let h = self.out_hosts[t];
            self.send(h, Kind::Contrib, r, Body::Contrib(items));
        }
        self.own_link_contribs();
        self.phase = Phase::Contribs(r, self.now.saturating_add(self.cfg.window_ns));
    }

    fn advance(&mut self, timer: bool) {
        loop {
            match self.phase {
                Phase::Contribs(r, dl) => {
                    let ready = self.in_hosts.iter().all(|h| {
                        let n = &self.nbrs[h];
                        n.idle || n.contribs.last_key_value().is_some_and(|(l, _)| *l >= r)
                    });
                    if !(ready || timer && self.now >= dl) {
                        return;
                    }
                    if !ready {
                        self.stats.timeouts += 1;
                    }
                    self.z_round(r);
                    self.phase = Phase::Replies(r, self.now.saturating_add(self.cfg.window_ns));
                }
                Phase::Replies(r, dl) => {
                    let ready = self.out_hosts.iter().all(|h| {
                        let n = &self.nbrs[h];
                        n.idle || n.replies.last_key_value().is_some_and(|(l, _)| *l >= r)
                    });
                    if !(ready || timer && self.now >= dl) {
                        return;
                    }
                    if !ready {
                        self.stats.timeouts += 1;
                    }
                    self.x_round(r);
                    self.end_round(r);
                }
                Phase::Start | Phase::Next(_) | Phase::Idle => return,
            }
        }
    }

    fn end_round(&mut self, r: u64) {
        let nbrs_ok = self
            .in_hosts
            .iter()
            .chain(&self.out_hosts)
            .all(|h| self.nbrs[h].idle || self.nbrs[h].settled);
        let done = self.settled_run >= self.cfg.quiet_rounds && nbrs_ok;
        let give_up = self.stats.iterations >= self.cfg.max_rounds as u64;
        if done || give_up {
            self.stats.gave_up = !done;
            if let Some(rt) = &mut self.rates {
                rt.settled = done;
            }
            let mut all: Vec<u32> = self
                .in_hosts
                .iter()
                .chain(&self.out_hosts)
                .copied()
                .collect();
            all.sort_unstable();
            all.dedup();
            for h in all {
                self.send(h, Kind::Idle, r, Body::Idle);
            }
            self.phase = Phase::Idle;
        } else if self.cfg.round_gap_ns > 0 {
            // the round just run is being computed: the next starts when it is done
            self.phase = Phase::Next(self.now.saturating_add(self.cfg.round_gap_ns));
        } else {
            self.next_round();
        }
    }

    /// Sets `round_gap_ns` (the time a round's computation takes), from the next round on.
    pub fn set_round_gap_ns(&mut self, ns: u64) {
        self.cfg.round_gap_ns = ns;
    }

    fn next_round(&mut self) {
        // labels follow the round the peers are in (a Lamport clock): a host one label
        // behind would make every half-round wait out the window (each side waiting for
        // the other's next message)
        self.start_round(self.round.saturating_add(1).max(self.ahead));
    }
}
