//! `decider = "online"`: DRUM's distributed solver (Algorithm 1 one-sided, 2 two-sided) inside
//! the host agent, its control messages over RDMA between the agents.
//!
//! [`OnlineSolve`] owns this host's [`HostSolver`] (`braid_drum::online`, sans-IO). From the IO
//! monitor's per-connection statistics it builds the host's [`LocalInstance`]: one connection
//! per active tenant connection (weight from the tenant; demand unbounded while backlogged or
//! while a WR of its waited for a WQE token, else
//! twice its posting rate, with hysteresis; Q and C from `wqe_rate` / `cqe_rate`), with its
//! two-sided traffic toward the peer connection (the fraction of its WRs that complete at the
//! peer: SEND, *_WITH_IMM) and, on the receiving side, the peer connections whose messages
//! arrived. A change of the instance (a connection arrives or leaves, a demand or a fraction
//! moves) is a new epoch, solved warm from the current state (`warm = false`: from scratch).
//!
//! The solver's messages go over the control channel ([`ctrl`]): by default one RC QP per peer
//! host with two-sided traffic, created by the agent and set up through the board as its pipes
//! are; with `ctrl = "ud"` one UD QP per agent ([`ctrl_ud`]), so that a message the fabric drops
//! is lost for the solver. The coordinator window (`window`) and the paper's rule (a late or
//! lost value replaced by the last round's) are the solver's. Every finished round's rates go
//! to the scheduler and poller at once (the agent decides again), and are recorded
//! ([`RoundRecord`], handed to the results as the `drum_rounds` table); `report_gap` adds the
//! gap to the offline optimum of the same instance ([`gap`]). The work of a round is charged
//! to the host's CPU as the agent's `solver` component ([`SolverCpu`]).

mod config;
pub mod ctrl;
pub mod ctrl_ud;
pub mod gap;
pub mod links;
mod observe;
mod rounds;

use super::decide::{select_active, DeciderCtx, DeciderFactory, Decision, RateDecider, Stat};
use super::DrumConfig;
use braid_drum::online::{
    Connection, HostSolver, Inbound, LocalInstance, OnlineConfig, Outbound, Stats,
};
use braid_units::{Bytes, Duration};
use braid_verbs::{BuildError, Event, Verbs};
pub use config::{OnlineDecider, SolverThread};
use ctrl::{Ctrl, CtrlKind};
use gap::GapBook;
pub use rounds::{RoundRecord, SolverCpu};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Timer tokens of the decider (the agent's own are small numbers).
const T_SOLVER: u64 = 0x4F_4E4C_0000_0001;
const T_BOARD: u64 = 0x4F_4E4C_0000_0002;
/// Polling the board for a peer's control QP: first after 1 µs, doubling up to 1 ms.
const BOARD_BACKOFF0: u64 = 1_000_000;
const BOARD_BACKOFF_MAX: u64 = 1_000_000_000;
/// Rates travel to the solver in millions per second (the scale its tests use).
const MOPS: f64 = 1e6;
/// The smallest CQEs per WQE declared (`Obs::a`).
const A_FLOOR: f64 = 1.0 / 64.0;
/// A fraction of two-sided WRs is declared again only when it moved by more than this.
const FRAC_STEP: f64 = 0.05;
/// Records kept per host (the oldest are not dropped: recording stops).
const MAX_RECORDS: usize = 1 << 16;

/// What the IO monitor's statistics say of one connection, kept between decisions.
#[derive(Debug, Clone, Copy)]
struct Obs {
    arrivals: u64,
    window: u64,
    backlogged: bool,
    /// ops/s (infinite: none)
    demand: f64,
    frac: f64,
    /// CQEs per WQE (the paper's a, eq. 13), as last declared.
    a: f64,
    receives: bool,
}

/// Counters of solvers discarded by cold restarts.
#[derive(Debug, Clone, Copy, Default)]
struct Base {
    rounds: u64,
    sent: u64,
    bytes: u64,
    recv: u64,
    recv_bytes: u64,
    timeouts: u64,
    stale: u64,
    late: u64,
    unknown: u64,
    malformed: u64,
}

/// (x, z) per connection id, Mops.
type RatesById = BTreeMap<u32, (f64, f64)>;

/// DRUM's online solver as the agent's [`RateDecider`].
pub struct OnlineSolve {
    p: OnlineDecider,
    ocfg: OnlineConfig,
    q: f64,
    c: f64,
    alpha: f64,
    beta: f64,
    k: usize,
    max_wait: u32,
    demand_window: u64,
    me: u32,
    ages: BTreeMap<u32, u32>,
    obs: BTreeMap<u32, Obs>,
    solver: Option<HostSolver>,
    inst: Option<LocalInstance>,
    ctrl: Ctrl,
    book: Option<Rc<RefCell<GapBook>>>,
    armed: Option<u64>,
    board_armed: bool,
    board_backoff: u64,
    applied: Option<(u32, u64)>,
    seen: Option<(u32, u64)>,
    base: Base,
    ep_start: Option<u64>,
    ep_gap: Option<u64>,
    episodes: u64,
    first_ep: u64,
    last_ep: u64,
    max_ep: u64,
    last_ep_gap: f64,
    ep_first_gap: f64,
    last_ep_first_gap: f64,
    records: Vec<RoundRecord>,
    changes: u64,
    errors: u64,
    last_gap: f64,
    /// CPU of the solver's work not yet handed to the agent, and in all (picoseconds).
    cpu_pending_ps: u64,
    cpu_total_ps: u64,
    /// Rounds already charged.
    charged_rounds: u64,
    fabric: Option<links::FabricView>,
    /// `path_delay`: the solver's rounds take time. The rounds run so far are done at
    /// `ready_at` (ps, each costing `cpu.round_ps` after the last); until then the solver's
    /// outputs (new rates, control messages) stay inside and no timeout of it runs. Without
    /// it a one-sided host's whole solve (up to `max_rounds`) takes no time.
    delay: bool,
    ready_at: u64,
    /// `delay`: the last round whose rates are out (its id and the rates).
    released: Option<(u32, u64)>,
    released_rates: RatesById,
    /// `delay`: rounds run and not yet out: when each is computed, its id and rates.
    computing: std::collections::VecDeque<(u64, (u32, u64), RatesById)>,
    /// `delay`: control messages that arrived while the thread was busy, in order.
    inbox: Vec<(u32, Vec<u8>)>,
}

impl OnlineSolve {
    pub fn new(cfg: &DrumConfig, ctx: &DeciderCtx) -> Self {
        let p = cfg.online.clone();
        OnlineSolve {
            ocfg: p.solver_config(),
            q: cfg.wqe_rate,
            c: cfg.cqe_rate,
            alpha: cfg.alpha,
            beta: cfg.beta,
            k: cfg.qp_budget as usize,
            max_wait: cfg.max_wait,
            demand_window: cfg.solve_interval.0,
            me: ctx.host,
            ages: BTreeMap::new(),
            obs: BTreeMap::new(),
            solver: None,
            inst: None,
            ctrl: Ctrl::new(
                ctx.board.clone(),
                ctx.host,
                p.ctrl,
                p.slot.0,
                p.ctrl_recvs,
                p.ctrl_loss,
                p.seed,
            ),
            book: p.report_gap.then(|| gap::book_for(&ctx.board)),
            armed: None,
            board_armed: false,
            board_backoff: BOARD_BACKOFF0,
            applied: None,
            seen: None,
            base: Base::default(),
            ep_start: None,
            ep_gap: None,
            episodes: 0,
            first_ep: 0,
            last_ep: 0,
            max_ep: 0,
            last_ep_gap: f64::NAN,
            ep_first_gap: f64::NAN,
            last_ep_first_gap: f64::NAN,
            records: Vec::new(),
            changes: 0,
            errors: 0,
            last_gap: f64::NAN,
            cpu_pending_ps: 0,
            cpu_total_ps: 0,
            charged_rounds: 0,
            fabric: (p.links == links::OnlineLinks::Fabric)
                .then(|| ctx.fabric.clone())
                .flatten()
                .map(|slot| links::FabricView {
                    slot,
                    util: cfg.link_utilization,
                    sizes: BTreeMap::new(),
                }),
            delay: cfg.path_delay && p.timed_rounds,
            ready_at: 0,
            released: None,
            released_rates: BTreeMap::new(),
            computing: std::collections::VecDeque::new(),
            inbox: Vec::new(),
            p,
        }
    }

    /// The solver's last finished round: (epoch, round).
    fn current_id(&self) -> Option<(u32, u64)> {
        let r = self.solver.as_ref().and_then(|s| s.rates());
        r.map(|r| (r.epoch, r.round))
    }

    /// The id and rates of the solver's last finished round.
    fn current(&self) -> (Option<(u32, u64)>, RatesById) {
        let r = self.solver.as_ref().and_then(|s| s.rates());
        (
            self.current_id(),
            r.map(|r| r.conns.iter().map(|c| (c.id, (c.x, c.z))).collect())
                .unwrap_or_default(),
        )
    }

    /// Whether the solver's thread is still computing the rounds run so far (`delay`).
    fn busy(&self, now_ps: u64) -> bool {
        self.delay && now_ps < self.ready_at
    }

    /// `delay`: lets out the rates of the last round computed by `now_ps` (each round's rates
    /// leave when that round is done, so a solve's rounds change the rates one by one).
    fn release(&mut self, now_ps: u64) {
        if !self.delay {
            return;
        }
        while self.computing.front().is_some_and(|c| c.0 <= now_ps) {
            let (_, id, rates) = self.computing.pop_front().expect("front");
            (self.released, self.released_rates) = (Some(id), rates);
        }
    }

    /// `cost` ps of the solver's work at `now_ps`: the `solver` CPU, and with `delay` time on
    /// the solver's thread (its outputs wait for it).
    fn spend(&mut self, now_ps: u64, cost: u64) {
        self.cpu_pending_ps += cost;
        self.cpu_total_ps += cost;
        if self.delay && cost > 0 {
            self.ready_at = self.ready_at.max(now_ps) + cost;
        }
    }

    /// The solver (after the first decision).
    pub fn solver(&self) -> Option<&HostSolver> {
        self.solver.as_ref()
    }

    /// One record per finished round.
    pub fn records(&self) -> &[RoundRecord] {
        &self.records
    }

    fn stats(&self) -> Stats {
        self.solver
            .as_ref()
            .map(|s| s.stats().clone())
            .unwrap_or_default()
    }

    /// Sum over the connections of a rate of the last round, per second.
    fn rate_total(&self, f: impl Fn(&braid_drum::online::ConnRate) -> f64) -> f64 {
        self.solver
            .as_ref()
            .and_then(|s| s.rates())
            .map_or(0.0, |r| r.conns.iter().map(f).sum::<f64>() * MOPS)
    }

    fn rate_fold(&self, init: f64, f: fn(f64, f64) -> f64) -> f64 {
        match self.solver.as_ref().and_then(|s| s.rates()) {
            Some(r) if !r.conns.is_empty() => r.conns.iter().map(|c| c.x * MOPS).fold(init, f),
            _ => f64::NAN,
        }
    }

    fn rounds(&self) -> u64 {
        self.base.rounds + self.stats().rounds
    }

    /// A new epoch: the solver re-solves warm (or a new one starts cold).
    fn install(&mut self, inst: LocalInstance) {
        self.changes += 1;
        let r0 = self.rounds();
        let ok = match (&mut self.solver, self.p.warm) {
            (Some(s), true) => s.set_instance(inst.clone()).is_ok(),
            _ => {
                let st = self.stats();
                self.base.rounds += st.rounds;
                self.base.sent += st.messages_sent;
                self.base.bytes += st.bytes_sent;
                self.base.recv += st.messages_received;
                self.base.recv_bytes += st.bytes_received;
                self.base.timeouts += st.timeouts;
                self.base.stale += st.stale_values;
                self.base.late += st.late_values;
                self.base.unknown += st.unknown_items;
                self.base.malformed += st.malformed;
                match HostSolver::new(self.me, inst.clone(), self.ocfg.clone()) {
                    Ok(s) => {
                        self.solver = Some(s);
                        self.armed = None;
                        true
                    }
                    Err(_) => false,
                }
            }
        };
        if !ok {
            self.errors += 1;
            return;
        }
        if self.delay {
            // one round per timeout, each taking its cost (`braid_drum::online`'s round gap)
            let gap = self.p.cpu.round_ps(&inst) / 1000;
            if let Some(s) = &mut self.solver {
                s.set_round_gap_ns(gap.max(1));
            }
        }
        self.inst = Some(inst);
        if self.ep_start.is_none() {
            self.ep_start = Some(r0);
            self.ep_gap = None;
            self.ep_first_gap = f64::NAN;
        }
    }

    /// Hands the solver control messages.
    fn handle(&mut self, now_ns: u64, now_ps: u64, got: Vec<(u32, Vec<u8>)>) {
        for (from, b) in got {
            if let Some(s) = &mut self.solver {
                // Malformed bytes are counted by the solver and change nothing.
                let _ = s.handle_message(now_ns, from, &b);
            }
            self.note(now_ps);
        }
    }

    /// Runs the solver's due timeout (first the messages that waited for a busy thread).
    fn pump(&mut self, now_ps: u64) {
        let now_ns = now_ps / 1000;
        if !self.busy(now_ps) && !self.inbox.is_empty() {
            let got = std::mem::take(&mut self.inbox);
            self.handle(now_ns, now_ps, got);
        }
        let busy = self.busy(now_ps);
        if let Some(s) = &mut self.solver {
            if !busy && s.poll_timeout().is_some_and(|t| t <= now_ns) {
                s.handle_timeout(now_ns);
            }
        }
        self.note(now_ps);
    }

    /// Records a finished round and opens or closes a convergence episode.
    fn note(&mut self, now_ps: u64) {
        let rounds = self.rounds();
        if self.solver.is_none() {
            return;
        }
        // Every round run since the last look costs a round of CPU (a one-sided host runs a
        // whole solve inside one timeout).
        if rounds > self.charged_rounds {
            let per = self.inst.as_ref().map_or(0, |i| self.p.cpu.round_ps(i));
            let cost = per * (rounds - self.charged_rounds);
            self.charged_rounds = rounds;
            // One round after the other on the solver's thread (`SolverCpu`'s model).
            self.spend(now_ps, cost);
        }
        let Some(s) = &self.solver else {
            return;
        };
        let idle = s.is_idle();
        let cur = s.rates().map(|r| (r.epoch, r.round));
        let new_round = cur.is_some() && cur != self.seen;
        if new_round && self.delay {
            // out when this round is computed
            let (id, rates) = self.current();
            self.computing
                .push_back((self.ready_at.max(now_ps), id.expect("a round"), rates));
        }
        let Some(s) = &self.solver else {
            return;
        };
        if new_round {
            self.seen = cur;
            let x: BTreeMap<u32, f64> = s
                .rates()
                .map(|r| r.conns.iter().map(|c| (c.id, c.x)).collect())
                .unwrap_or_default();
            let st = s.stats().clone();
            let (epoch, round) = cur.expect("some");
            if let (Some(b), Some(inst)) = (&self.book, &self.inst) {
                let mut b = b.borrow_mut();
                b.register(self.me, inst, x);
                self.last_gap = b.gap();
            }
            if self.records.len() < MAX_RECORDS {
                let b = &self.base;
                let c = &self.ctrl.stats;
                self.records.push(RoundRecord {
                    // `delay`: when the round is computed.
                    t_ps: if self.delay {
                        self.ready_at.max(now_ps)
                    } else {
                        now_ps
                    },
                    host_addr: self.me,
                    epoch,
                    round,
                    iterations: st.iterations,
                    connections: self.inst.as_ref().map_or(0, |i| i.conns.len() as u64),
                    messages: b.sent + st.messages_sent,
                    bytes: b.bytes + st.bytes_sent,
                    messages_received: b.recv + st.messages_received,
                    bytes_received: b.recv_bytes + st.bytes_received,
                    stale_values: b.stale + st.stale_values,
                    late_values: b.late + st.late_values,
                    timeouts: b.timeouts + st.timeouts,
                    ctrl_lost: c.lost,
                    ctrl_injected_losses: c.injected_losses,
                    objective: st.objective,
                    gap: self.last_gap,
                    cpu_ns: self.cpu_total_ps as f64 / 1000.0,
                });
            }
        }
        if !idle && self.ep_start.is_none() {
            self.ep_start = Some(rounds.saturating_sub(new_round as u64));
            self.ep_gap = None;
            self.ep_first_gap = f64::NAN;
        }
        if let Some(st) = self.ep_start {
            if new_round {
                if self.ep_first_gap.is_nan() {
                    self.ep_first_gap = self.last_gap;
                }
                if self.ep_gap.is_none() && self.last_gap <= 1e-3 {
                    self.ep_gap = Some(rounds - st);
                }
            }
            if idle {
                self.last_ep_first_gap = self.ep_first_gap;
                let n = rounds - st;
                self.episodes += 1;
                if self.episodes == 1 {
                    self.first_ep = n;
                }
                self.last_ep = n;
                self.max_ep = self.max_ep.max(n);
                self.last_ep_gap = self.ep_gap.map_or(f64::NAN, |g| g as f64);
                self.ep_start = None;
            }
        }
    }

    /// After anything happened: send what the solver wants sent, set up the control QPs its
    /// peers need, arm its timer.
    fn after(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        self.note(now);
        self.release(now);
        let busy = self.busy(now);
        let Some(s) = &mut self.solver else {
            return;
        };
        let mut out = Vec::new();
        // The messages of rounds still being computed leave when they are done.
        while let Some(m) = (!busy).then(|| s.poll_transmit()).flatten() {
            out.push(m);
        }
        let mut peers: Vec<u32> = self
            .inst
            .iter()
            .flat_map(|i| {
                i.conns
                    .iter()
                    .flat_map(|c| c.out.iter().map(|o| o.host))
                    .chain(i.inbound.iter().map(|b| b.host))
                    .chain(i.conns.iter().flat_map(|c| c.links.iter().map(|u| u.owner)))
            })
            .chain(out.iter().map(|m| m.0))
            .filter(|&h| h != self.me)
            .collect();
        if let Some(f) = &self.fabric {
            // a link owner meets its senders when they offer their control QPs
            peers.extend(self.ctrl.offered(&f.may_senders(self.me)));
        }
        peers.sort_unstable();
        peers.dedup();
        let waiting = self.ctrl.setup(v, &peers);
        let cost = self.p.cpu.message_ps() * out.len() as u64;
        self.spend(now, cost);
        for (to, b) in out {
            if !self.ctrl.send(v, to, b) {
                // No control QP could be made for that peer (counted in ctrl_errors): lost.
                self.ctrl.stats.queue_drops += 1;
            }
        }
        if !waiting {
            self.board_backoff = BOARD_BACKOFF0;
        } else if !self.board_armed {
            self.board_armed = true;
            v.set_timer(now + self.board_backoff, T_BOARD);
            self.board_backoff = (self.board_backoff * 2).min(BOARD_BACKOFF_MAX);
        }
        let due = self.solver.as_ref().and_then(|s| s.poll_timeout());
        // Busy: the next look is when the rounds are done (outputs out, the next timeout).
        let due = if busy {
            Some(self.ready_at)
        } else {
            due.map(|t| t.saturating_mul(1000))
        };
        if let Some(t) = due {
            let at = t.max(now + 1);
            if self.armed.is_none_or(|a| at < a || a <= now) {
                self.armed = Some(at);
                v.set_timer(at, T_SOLVER);
            }
        }
    }
}

impl RateDecider for OnlineSolve {
    fn name(&self) -> &'static str {
        "online_solve"
    }

    fn decide(&mut self, now: u64, stats: &[Stat]) -> Decision {
        let m = stats.len();
        if m == 0 {
            return Decision::default();
        }
        let active = select_active(&mut self.ages, self.k, self.max_wait, stats);
        let inst = self.observe(stats, &active);
        if self.inst.as_ref() != Some(&inst) {
            // Building the solver's instance from the statistics (`build_ns` per connection)
            // is paid when it changed: a decision that finds the same instance (most of those
            // a finished round triggers) hands the solver nothing.
            let cost = self.p.cpu.build_ps(stats.len());
            self.spend(now, cost);
            self.install(inst);
        }
        self.pump(now);
        let rates = if self.delay {
            self.release(now);
            self.applied = self.released;
            self.released_rates.clone()
        } else {
            let (id, rates) = self.current();
            self.applied = id;
            rates
        };
        let n_act = active.iter().filter(|&&a| a).count().max(1) as f64;
        let mut d = Decision {
            x: vec![0.0; m],
            z: vec![0.0; m],
            active: active.clone(),
            objective: self.stats().objective,
        };
        for (i, s) in stats.iter().enumerate() {
            if !active[i] {
                continue;
            }
            let (x, z) = match rates.get(&s.conn) {
                Some(&(x, z)) => (x * MOPS, z * MOPS),
                None => (self.q / n_act, self.c / n_act),
            };
            d.x[i] = x;
            d.z[i] = z;
        }
        d
    }

    fn start(&mut self, v: &mut dyn Verbs) {
        self.ctrl.start(v);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, e: &Event) -> bool {
        match *e {
            Event::Completion(cq) if Some(cq) == self.ctrl.cq() => {
                let got = self.ctrl.poll(v);
                let now_ns = v.now() / 1000;
                let cost = self.p.cpu.message_ps() * got.len() as u64;
                self.spend(v.now(), cost);
                if self.busy(v.now()) {
                    // The thread is computing rounds: the messages wait for it.
                    self.inbox.extend(got);
                } else {
                    self.handle(now_ns, v.now(), got);
                }
                self.pump(v.now());
                self.after(v);
                true
            }
            Event::Timer(T_SOLVER) => {
                self.armed = None;
                self.pump(v.now());
                self.after(v);
                true
            }
            Event::Timer(T_BOARD) => {
                self.board_armed = false;
                self.after(v);
                true
            }
            _ => false,
        }
    }

    fn drive(&mut self, v: &mut dyn Verbs) {
        self.after(v);
    }

    fn wants_decide(&self) -> bool {
        let cur = if self.delay {
            self.released
        } else {
            self.current_id()
        };
        cur.is_some() && cur != self.applied
    }

    fn tables(&self) -> Vec<braid_verbs::LayerTable> {
        vec![rounds::table(&self.records)]
    }

    fn take_cpu_ps(&mut self) -> Option<u64> {
        Some(std::mem::take(&mut self.cpu_pending_ps))
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let st = self.stats();
        let b = &self.base;
        let c = &self.ctrl.stats;
        let gap = match &self.book {
            Some(bk) => bk.borrow_mut().gap(),
            None => f64::NAN,
        };
        vec![
            ("online_rounds", self.rounds() as f64),
            ("online_iterations", st.iterations as f64),
            ("online_solves", st.solves as f64),
            ("online_epochs", self.changes as f64),
            ("online_episodes", self.episodes as f64),
            ("online_first_episode_rounds", self.first_ep as f64),
            ("online_last_episode_rounds", self.last_ep as f64),
            ("online_max_episode_rounds", self.max_ep as f64),
            ("online_last_episode_rounds_to_1e3", self.last_ep_gap),
            ("online_last_episode_first_gap", self.last_ep_first_gap),
            (
                "online_settled",
                self.solver
                    .as_ref()
                    .is_some_and(|s| s.is_idle() && !st.gave_up) as u8 as f64,
            ),
            ("online_gave_up", st.gave_up as u8 as f64),
            ("online_messages", (b.sent + st.messages_sent) as f64),
            ("online_bytes", (b.bytes + st.bytes_sent) as f64),
            (
                "online_messages_received",
                (b.recv + st.messages_received) as f64,
            ),
            ("online_timeouts", (b.timeouts + st.timeouts) as f64),
            ("online_stale_values", (b.stale + st.stale_values) as f64),
            ("online_late_values", (b.late + st.late_values) as f64),
            (
                "online_unknown_items",
                (b.unknown + st.unknown_items) as f64,
            ),
            ("online_malformed", (b.malformed + st.malformed) as f64),
            ("online_objective", st.objective),
            ("online_x_total", self.rate_total(|c| c.x)),
            ("online_z_total", self.rate_total(|c| c.z)),
            ("online_x_min", self.rate_fold(f64::INFINITY, f64::min)),
            ("online_x_max", self.rate_fold(0.0, f64::max)),
            ("online_gap", gap),
            ("online_errors", self.errors as f64),
            ("online_cpu_ns", self.cpu_total_ps as f64 / 1000.0),
            ("ctrl_qps", c.qps as f64),
            ("ctrl_qps_ready", c.qps_ready as f64),
            ("ctrl_posted", c.posted as f64),
            ("ctrl_posted_bytes", c.posted_bytes as f64),
            ("ctrl_received", c.received as f64),
            ("ctrl_injected_losses", c.injected_losses as f64),
            ("ctrl_queue_drops", c.queue_drops as f64),
            ("ctrl_oversize", c.oversize as f64),
            ("ctrl_errors", c.errors as f64),
            ("ctrl_segments", c.segments as f64),
            ("ctrl_lost", c.lost as f64),
            ("ctrl_bad_segments", c.bad_segments as f64),
        ]
    }
}

#[cfg(test)]
mod tests;
