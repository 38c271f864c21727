//! DRUM's agent (tenant 0): the shared QPs to each peer host ("pipes"), the scheduler that
//! fetches WRs from the pool at the decided WQE rates and posts them to the pipes, and the
//! poller that busy-polls the one shared CQ and hands completions to the tenants at the decided
//! CQE rates, by connection id (`wr_id` locally, the immediate data for what peers send).

use super::bufs::{Layout, RECV_BIT};
use super::decide::{RateDecider, Stat};
use super::fail::{fail_late_joiners, fail_pipe, Culprit};
use super::imm::{
    post_pooled, post_refusal, Pairing, Posted, Scratch, CTRL_KIND, CTRL_LENGTH, CTRL_REFUSED,
    IMM_APP, IMM_CTRL, IMM_MORE, IMM_SEND,
};
use super::state::{flush, Arrival, HostState, GLOBAL_ADDR};
use super::ud::Ud;
use super::PipeKind;
use super::{Mode, WAKE_AGENT, WAKE_CQE};
use braid_verbs::rendezvous::{BoardWait, Endpoint, LinkKeys, LinkPhase as Phase, SharedBoard};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

mod decision;
mod hooks;
mod pipes;
mod poll;
mod thread;

use thread::Thread;

const T_BOARD: u64 = 1;
const T_TICK: u64 = 2;
const T_UD: u64 = 3;
/// How long the agent waits for a peer's agent on the board before giving up on a pipe.
const BOARD_PATIENCE_PS: u64 = 100_000_000_000;

struct Pipe {
    qp: QpNum,
    phase: Phase,
    /// When each WR in flight was posted, oldest first (an RC QP completes in order): how many
    /// are in flight, and the pipe's round trips, for sizing its depth to the bandwidth-delay
    /// product (`pipe_bdp`).
    sent_ps: VecDeque<u64>,
    /// The shortest post-to-completion time seen on it (u64::MAX: none yet).
    min_rtt_ps: u64,
    /// Round-robin position among its connections.
    rr: usize,
    /// SHARE: when the QP's lock is free again.
    lock_free_at: u64,
    /// Its number in creation order (which receive-buffer slots it uses, `bufs.rs`).
    index: u32,
    /// Its receive-buffer slots keep bytes (a tenant of the host tracks memory).
    tracked: bool,
    /// A companion carrying an application's immediate value that could not be posted right
    /// behind its WR: it goes before anything else (`imm.rs`).
    pending: Option<SendWr>,
    /// A receive flagged `IMM_APP` waiting for its companion: (local connection, arrival).
    pairing: Pairing<(Option<QpNum>, Arrival)>,
    /// WRs the scheduler posted on it in this turn of the pipes (`path_delay`: a pipe keeps
    /// the turn for one WR per connection on it, so a pass is over connections, not pipes).
    turn_served: usize,
}

impl Pipe {
    fn new(qp: QpNum, index: u32) -> Pipe {
        Pipe {
            qp,
            phase: Phase::Published,
            sent_ps: VecDeque::new(),
            min_rtt_ps: u64::MAX,
            rr: 0,
            lock_free_at: 0,
            index,
            tracked: false,
            pending: None,
            pairing: Pairing::default(),
            turn_served: 0,
        }
    }

    /// `n` WRs went onto the shared QP at `now`.
    fn posted(&mut self, n: u32, now: u64) {
        self.sent_ps.extend(std::iter::repeat_n(now, n as usize));
    }

    /// The oldest WR in flight completed at `now`.
    fn completed(&mut self, now: u64) {
        if let Some(t) = self.sent_ps.pop_front() {
            self.min_rtt_ps = self.min_rtt_ps.min(now.saturating_sub(t));
        }
    }

    /// Nothing is in flight any more (the QP failed).
    fn cleared(&mut self) {
        self.sent_ps.clear();
    }

    /// WRs on the shared QP not yet completed.
    fn inflight(&self) -> u32 {
        self.sent_ps.len() as u32
    }

    /// WRs the scheduler keeps in flight: `floor`, or more when the pipe's decided rate needs
    /// more to keep the wire busy. By Little's law a pipe carrying `x` WRs/s whose WRs take
    /// `rtt` from post to completion needs `x * rtt` in flight; a fixed depth below that caps
    /// the pipe at `depth / rtt` whatever the solver decided. `rtt` is the shortest round trip
    /// seen (the queueing-free one: sizing on a loaded round trip would feed the queue it
    /// measures), `gain` the headroom over it (0: the fixed `floor`).
    fn depth(&self, floor: u32, gain: f64, x: f64) -> u32 {
        if gain <= 0.0 || self.min_rtt_ps == u64::MAX {
            return floor;
        }
        let bdp = (gain * x * self.min_rtt_ps as f64 * 1e-12).ceil();
        floor.max(bdp.min(65_536.0) as u32)
    }
}

/// The segments of a long SEND received so far, per (peer host, peer's connection id): bytes,
/// and their contents when the receive buffers keep bytes.
type Partial = BTreeMap<(u32, u32), (u64, Option<Vec<u8>>)>;

/// Board key of pipe `g` between hosts `a` and `b` (`ready`: the "connected" record).
fn pipe_key(a: u32, b: u32, g: u32, ready: bool) -> u64 {
    let (lo, hi) = (a.min(b) as u64 & 0xFF_FFFF, a.max(b) as u64 & 0xFF_FFFF);
    (1 << 63) | (0x2D << 56) | ((ready as u64) << 55) | (lo << 31) | (hi << 7) | (g as u64 & 0x7F)
}

/// The host's DRUM agent.
pub struct DrumAgent {
    st: Rc<RefCell<HostState>>,
    decider: Box<dyn RateDecider>,
    name: &'static str,
    board: SharedBoard,
    cq: Option<CqId>,
    layout: Option<Layout>,
    /// `pipe = "ud"`: the host's UD QP (`ud.rs`).
    ud: Option<Ud>,
    ud_timer: Option<u64>,
    /// The scratch area, registered (tracked) once a tenant tracks memory.
    scratch: Scratch,
    pipes: BTreeMap<(u32, u32), Pipe>,
    by_qpn: BTreeMap<QpNum, (u32, u32)>,
    /// Long SENDs being joined (`imm.rs`, `IMM_MORE`).
    partial: Partial,
    /// Waiting on the board for peers' pipes.
    wait: BoardWait,
    tick_at: Option<u64>,
    /// SHARE: the earliest time a shared QP's lock frees for waiting work.
    share_wait: Option<u64>,
    last_solve: u64,
    // counters
    wr_posted: u64,
    cqe_polled: u64,
    cqe_delivered: u64,
    decisions: u64,
    pipe_errors: u64,
    /// Pipes whose QP failed (or that never came up).
    failed_pipes: u64,
    unknown_conn: u64,
    /// Connections failed by a peer agent's control message (a refused WR, a SEND too long).
    peer_refusals: u64,
    cpu_convert_ps: u64,
    cpu_qp_map_ps: u64,
    cpu_solve_ps: u64,
    /// The decider's own work (the online solver's rounds, `RateDecider::take_cpu_ps`).
    cpu_solver_ps: u64,
    active: u64,
    /// `path_delay`: the IO monitor and scheduler's thread, the poller's (`agent/thread.rs`).
    sched: Thread,
    poller: Thread,
    /// The pipe the scheduler serves first next time (it stops mid-pass when its thread is
    /// busy, and every pipe must get its turn).
    pipe_cursor: usize,
    /// The connection the poller serves first next time.
    poll_cursor: QpNum,
}

fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

impl DrumAgent {
    pub fn new(
        st: Rc<RefCell<HostState>>,
        decider: Box<dyn RateDecider>,
        name: &'static str,
    ) -> Self {
        let board = st.borrow().board.clone();
        DrumAgent {
            st,
            decider,
            name,
            board,
            cq: None,
            layout: None,
            ud: None,
            ud_timer: None,
            scratch: None,
            pipes: BTreeMap::new(),
            by_qpn: BTreeMap::new(),
            partial: BTreeMap::new(),
            wait: BoardWait::new(BOARD_PATIENCE_PS),
            tick_at: None,
            share_wait: None,
            last_solve: 0,
            wr_posted: 0,
            cqe_polled: 0,
            cqe_delivered: 0,
            decisions: 0,
            pipe_errors: 0,
            failed_pipes: 0,
            unknown_conn: 0,
            peer_refusals: 0,
            cpu_convert_ps: 0,
            cpu_qp_map_ps: 0,
            cpu_solve_ps: 0,
            cpu_solver_ps: 0,
            active: 0,
            sched: Thread::default(),
            poller: Thread::default(),
            pipe_cursor: 0,
            poll_cursor: 0,
        }
    }

    /// Everything the agent does when woken, notified or ticked.
    fn service(&mut self, v: &mut dyn Verbs) {
        self.setup_pipes(v);
        self.track_buffers(v);
        self.fail_late_joiners();
        if self.st.borrow().mode == Mode::Drum {
            self.maybe_decide(v);
            self.decider.drive(v);
            self.charge_decider(v);
        }
        self.send_ctrl(v);
        self.schedule(v);
        self.ud_service(v);
        self.release(v);
        self.arm_tick(v);
    }

    /// Fetches WRs from the pool into the pipes: round robin over each pipe's connections, at
    /// most `pipe_depth` in flight (DRUM), each connection within its WQE rate.
    fn schedule(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let (mode, floor, gain, burst, mux, bounce) = (
            st.mode,
            st.cfg.pipe_depth,
            st.cfg.pipe_bdp,
            st.cfg.burst as f64,
            st.cfg.mux_ratio as usize,
            st.cfg.bounce_size.0,
        );
        let (convert, qp_map) = (ps(st.cfg.convert_ns), ps(st.cfg.qp_map_ns));
        let (lock, hold) = (ps(st.lock.0), ps(st.lock.1));
        // The thread's time per WR it fetches, converts and posts (SHARE posts in the tenants'
        // threads: none).
        let per_wr = if st.cfg.path_delay && mode == Mode::Drum {
            convert + qp_map + ps(st.cfg.post_ns)
        } else {
            0
        };
        if !self.sched.free(now) {
            return;
        }
        let mut lock_wait: Option<u64> = None;
        let keys: Vec<(u32, u32)> = self.pipes.keys().copied().collect();
        let n_pipes = keys.len();
        let start = self.pipe_cursor % n_pipes.max(1);
        let mut last_served = None;
        for i in 0..n_pipes {
            if !self.sched.free(now) {
                break;
            }
            let pi = (start + i) % n_pipes;
            let (peer, gi) = keys[pi];
            let pipe = self.pipes.get_mut(&keys[pi]).expect("listed");
            if pipe.phase != Phase::Ready {
                continue;
            }
            let Some(list) = st.to_peer.get(&peer) else {
                continue;
            };
            let lo = gi as usize * mux;
            let members: Vec<QpNum> = list.iter().skip(lo).take(mux).copied().collect();
            if members.is_empty() {
                continue;
            }
            // The pipe's decided rate: its scheduled connections' WQE rates.
            let x: f64 = members
                .iter()
                .filter_map(|q| st.conns.get(q))
                .filter(|c| c.active)
                .map(|c| c.x)
                .sum();
            let depth = pipe.depth(floor, gain, x);
            if let Some(w) = pipe.pending.take() {
                if v.post_send(pipe.qp, w.clone()).is_err() {
                    pipe.pending = Some(w);
                    continue;
                }
            }
            let mut idle_rounds = 0;
            let mut k = pipe.rr;
            while idle_rounds < members.len() {
                if mode == Mode::Drum && pipe.inflight() >= depth {
                    break;
                }
                if mode == Mode::Share && pipe.lock_free_at > now {
                    // Another thread holds the shared QP's lock.
                    let has_work = members
                        .iter()
                        .any(|q| st.conns.get(q).is_some_and(|c| !c.pool.is_empty()));
                    if has_work {
                        lock_wait =
                            Some(lock_wait.map_or(pipe.lock_free_at, |w| w.min(pipe.lock_free_at)));
                    }
                    break;
                }
                let vq = members[k % members.len()];
                k += 1;
                let refused = st.refused_now(vq);
                let Some(c) = st.conns.get_mut(&vq) else {
                    idle_rounds += 1;
                    continue;
                };
                if c.pool.is_empty() || c.state != QpState::Rts || c.halted || c.ud_turn(true) {
                    idle_rounds += 1;
                    continue;
                }
                // The rest of a long SEND already started: no new WQE token.
                let started = c.pool.front().is_some_and(|p| p.sent > 0);
                if mode == Mode::Drum && !started {
                    if !c.active {
                        idle_rounds += 1;
                        continue;
                    }
                    refill(c, now, burst);
                    if c.x_tokens < 1.0 {
                        c.note_token_wait();
                        idle_rounds += 1;
                        continue;
                    }
                }
                let mut p = c.pool.pop_front().expect("non-empty");
                p.fail = p.fail.or(refused);
                if let Some(status) = p.fail {
                    // The peer's NIC would refuse it: a control message goes in its place and
                    // tells the peer's agent (its end goes to Error, as the responder's QP
                    // would); when it completes, the WR completes with the error and the
                    // connection goes to Error, behind what it has on the shared QP.
                    if post_refusal(v, pipe.qp, vq, c, &p, status) {
                        pipe.posted(1, now);
                        self.wr_posted += 1;
                        idle_rounds = 0;
                        self.sched.run(now, per_wr);
                        last_served = Some((pi, members.len()));
                        pipe.turn_served += 1;
                        if !self.sched.free(now) {
                            break;
                        }
                        continue;
                    }
                    c.pool.push_front(p);
                    break;
                }
                v.charge(Work::Ns((convert + qp_map) / 1000));
                self.cpu_convert_ps += convert;
                self.cpu_qp_map_ps += qp_map;
                let posted = post_pooled(v, pipe.qp, vq, c, &p, self.scratch, bounce);
                match posted {
                    Posted::Part(_) | Posted::Yes(..) => {
                        if mode == Mode::Drum && p.sent == 0 {
                            c.x_tokens -= 1.0;
                        }
                        let n = match posted {
                            Posted::Part(bytes) => {
                                p.sent += bytes;
                                c.pool.push_front(p);
                                1
                            }
                            Posted::Yes(n, pending) => {
                                pipe.pending = pending;
                                n
                            }
                            Posted::No => unreachable!("matched above"),
                        };
                        pipe.posted(n, now);
                        self.wr_posted += n as u64;
                        idle_rounds = 0;
                        self.sched.run(now, per_wr);
                        last_served = Some((pi, members.len()));
                        pipe.turn_served += 1;
                        if mode == Mode::Share {
                            let contended = members.iter().any(|&q| {
                                q != vq && st.conns.get(&q).is_some_and(|c| c.outstanding() > 0)
                            });
                            let extra = if contended { lock } else { 0 };
                            pipe.lock_free_at = now + hold + extra;
                            st.lock_ps += extra;
                        }
                        if pipe.pending.is_some() || !self.sched.free(now) {
                            break;
                        }
                    }
                    Posted::No => {
                        // The shared QP is full or broken: try again on its next completion.
                        c.pool.push_front(p);
                        break;
                    }
                }
            }
            pipe.rr = k % members.len();
        }
        // The next call starts at the pipe served last while it has had fewer WRs this turn
        // than it has connections, then at the next: the scheduler's round robin is over the
        // host's connections (the paper's scheduler fetches per application), one WR each,
        // whichever pipe carries them.
        if let Some((pi, members)) = last_served {
            let pipe = self.pipes.get_mut(&keys[pi]).expect("listed");
            if pipe.turn_served >= members {
                pipe.turn_served = 0;
                self.pipe_cursor = pi + 1;
            } else {
                self.pipe_cursor = pi;
            }
        }
        if let Some(t) = lock_wait {
            self.share_wait = Some(self.share_wait.map_or(t, |w| w.min(t)));
        }
    }

    /// Hands waiting completions to their tenants, each connection within its CQE rate.
    fn release(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        let mut woken = BTreeSet::new();
        {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let (mode, burst) = (st.mode, st.cfg.burst as f64);
            // The poller's time per completion it hands out: take it off the shared CQ, find
            // its connection (`verb_convertor` on wr_id or the immediate data).
            let per_cqe = if st.cfg.path_delay && mode == Mode::Drum {
                ps(st.cfg.poll_cqe_ns) + ps(st.cfg.convert_ns)
            } else {
                0
            };
            let waiting = std::mem::take(&mut st.has_done);
            // From the connection after the one served last: a busy poller hands out one
            // completion per turn, and the lowest connection ids must not always go first.
            let cur = self.poll_cursor;
            let waiting: Vec<QpNum> = waiting
                .range(cur..)
                .chain(waiting.range(..cur))
                .copied()
                .collect();
            let mut keep = Vec::new();
            for vq in waiting {
                let Some(c) = st.conns.get_mut(&vq) else {
                    continue;
                };
                if c.done.is_empty() {
                    continue;
                }
                if mode == Mode::Drum {
                    refill(c, now, burst);
                }
                while let Some(wc) = c.done.front() {
                    if !self.poller.free(now) {
                        break;
                    }
                    // Errors are not paced.
                    let paced = mode == Mode::Drum && wc.status == WcStatus::Success;
                    if paced && c.z_tokens < 1.0 {
                        break;
                    }
                    let wc = c.done.pop_front().expect("non-empty");
                    if paced {
                        c.z_tokens -= 1.0;
                    }
                    let cq = match wc.opcode {
                        WcOpcode::Recv | WcOpcode::RecvWithImm => c.recv_cq,
                        _ => c.send_cq,
                    };
                    st.inbox.entry(c.tenant).or_default().push((cq, wc));
                    woken.insert(c.tenant);
                    self.cqe_delivered += 1;
                    self.poller.run(now, per_cqe);
                    self.poll_cursor = vq.wrapping_add(1);
                }
                if !c.done.is_empty() {
                    keep.push(vq);
                }
            }
            st.has_done.extend(keep);
            st.dirty = false;
        }
        for t in woken {
            v.wake(t, WAKE_CQE);
        }
    }

    /// The next time a token makes progress possible, if something waits for one.
    fn arm_tick(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        let st = self.st.borrow();
        let mut next: Option<u64> = self.share_wait.take();
        let mut at = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        let conns = if st.mode == Mode::Drum {
            st.conns.values()
        } else {
            Default::default()
        };
        // A busy thread takes its next WR or completion when it is free.
        if st.conns.values().any(|c| !c.pool.is_empty()) && !self.sched.free(now) {
            at(self.sched.free_at());
        }
        if !st.has_done.is_empty() && !self.poller.free(now) {
            at(self.poller.free_at());
        }
        if st.resolve_soon && st.mode == Mode::Drum && !st.conns.is_empty() {
            // A connection turned two-sided: the next periodic decision takes it (SHARE
            // decides nothing; without connections there is nothing to decide).
            at(self.last_solve + st.cfg.solve_interval.0);
        }
        for c in conns {
            let waits_x = !c.pool.is_empty() && c.active && c.x_tokens < 1.0 && c.x > 0.0;
            if waits_x {
                at(now + ((1.0 - c.x_tokens) / c.x * 1e12).ceil() as u64);
            }
            let waits_z = c
                .done
                .front()
                .is_some_and(|w| w.status == WcStatus::Success)
                && c.z_tokens < 1.0
                && c.z > 0.0;
            if waits_z {
                at(now + ((1.0 - c.z_tokens) / c.z * 1e12).ceil() as u64);
            }
            if !c.pool.is_empty() && !c.active {
                // Left out of the top-k: the next decision may take it in.
                at(self.last_solve + st.cfg.solve_interval.0);
            }
        }
        drop(st);
        if let Some(n) = next {
            let n = n.max(now + 1);
            if self.tick_at.is_none_or(|t| n < t || t <= now) {
                self.tick_at = Some(n);
                v.set_timer(n, T_TICK);
            }
        }
    }
}

fn refill(c: &mut super::state::Conn, now: u64, burst: f64) {
    let dt = now.saturating_sub(c.refilled) as f64 * 1e-12;
    c.refilled = now;
    c.x_tokens = (c.x_tokens + dt * c.x).min(burst);
    c.z_tokens = (c.z_tokens + dt * c.z).min(burst);
}

impl Middleware for DrumAgent {
    fn name(&self) -> &'static str {
        self.name
    }

    fn start(&mut self, v: &mut dyn Verbs) {
        let len = self.st.borrow().cfg.global_buffer.0;
        let Ok(cq) = v.create_cq(1 << 22) else {
            self.pipe_errors += 1;
            return;
        };
        let _ = v.req_notify_cq(cq);
        self.cq = Some(cq);
        match v.reg_mr(GLOBAL_ADDR, len, Access::ALL) {
            Ok(mr) => {
                let s = self.st.borrow();
                self.layout = Some(Layout::new(&mr, s.cfg.bounce_size.0, s.cfg.recvs_per_pipe));
                let (ud, rto) = (s.cfg.pipe == PipeKind::Ud, s.cfg.ud_rto.0);
                drop(s);
                self.st.borrow_mut().global = Some(mr);
                if ud {
                    let area = super::ud::area(mr.addr, mr.len).expect("checked with the config");
                    match Ud::start(v, cq, &mr, area, rto, self.board.clone()) {
                        Ok(u) => self.ud = Some(u),
                        Err(_) => self.pipe_errors += 1,
                    }
                }
            }
            Err(_) => self.pipe_errors += 1,
        }
        self.decider.start(v);
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let st = self.st.borrow();
        let mut v = vec![
            ("connections", st.conns.len() as f64),
            ("pipes", self.pipes.len() as f64),
            (
                "pipes_ready",
                self.pipes
                    .values()
                    .filter(|p| p.phase == Phase::Ready)
                    .count() as f64,
            ),
            ("pipe_errors", self.pipe_errors as f64),
            ("pipes_failed", self.failed_pipes as f64),
            ("wr_posted", self.wr_posted as f64),
            ("cqe_polled", self.cqe_polled as f64),
            ("cqe_delivered", self.cqe_delivered as f64),
            ("decisions", self.decisions as f64),
            ("active", self.active as f64),
            ("unknown_conn", self.unknown_conn as f64),
            ("peer_refusals", self.peer_refusals as f64),
            // Busy polling occupies one core (the paper's Fig. 17(c)); the other costs are
            // what the agent's thread spends beside it.
            (
                "poller_cores",
                if st.mode == Mode::Drum { 1.0 } else { 0.0 },
            ),
            ("cpu_ns_verb_convertor", self.cpu_convert_ps as f64 / 1000.0),
            ("cpu_ns_qp_map", self.cpu_qp_map_ps as f64 / 1000.0),
            ("cpu_ns_qp_sche", self.cpu_solve_ps as f64 / 1000.0),
            ("cpu_ns_solver", self.cpu_solver_ps as f64 / 1000.0),
            // `path_delay`: how long each of the agent's threads was busy.
            ("busy_ns_scheduler", self.sched.busy_ps() as f64 / 1000.0),
            ("busy_ns_poller", self.poller.busy_ps() as f64 / 1000.0),
            ("lock_ns", st.lock_ps as f64 / 1000.0),
            (
                "ud_segments",
                self.ud.as_ref().map_or(0, |u| u.segments) as f64,
            ),
            (
                "ud_retransmits",
                self.ud.as_ref().map_or(0, |u| u.retransmits) as f64,
            ),
            ("ud_acks", self.ud.as_ref().map_or(0, |u| u.acks) as f64),
            (
                "ud_dropped",
                self.ud.as_ref().map_or(0, |u| u.dropped) as f64,
            ),
        ];
        v.extend(self.decider.counters());
        v
    }

    fn tables(&self) -> Vec<LayerTable> {
        self.decider.tables()
    }

    fn on_event(&mut self, v: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        if self.decider.on_event(v, &event) {
            self.service(v);
            return;
        }
        match event {
            Event::Wake(WAKE_AGENT) => self.service(v),
            Event::Timer(T_BOARD) => {
                self.wait.fired();
                self.service(v);
            }
            Event::Timer(T_UD) => {
                self.ud_timer = None;
                if let Some(ud) = self.ud.as_mut() {
                    ud.on_timer(v.now(), &mut self.st.borrow_mut());
                }
                self.service(v);
            }
            Event::Timer(T_TICK) => {
                // Only the armed tick disarms: a superseded one (an earlier tick replaced it)
                // firing later must not, or every such firing would arm one more timer beside
                // the one already pending and the ticks would multiply over a run.
                if self.tick_at.is_some_and(|t| t <= v.now()) {
                    self.tick_at = None;
                }
                self.service(v);
            }
            Event::Completion(cq) if Some(cq) == self.cq => {
                self.poll(v);
                self.service(v);
            }
            e => up.push(e),
        }
    }
}

#[cfg(test)]
mod depth_tests {
    use super::*;

    /// Little's law: a pipe deciding 10 M WRs/s over a 3 µs round trip keeps 30 in flight.
    #[test]
    fn a_pipe_is_as_deep_as_its_rate_times_its_shortest_round_trip() {
        let mut p = Pipe::new(1, 0);
        // No round trip seen yet: the floor.
        assert_eq!(p.depth(4, 1.0, 10e6), 4);
        p.posted(2, 0);
        p.completed(3_000_000);
        p.completed(5_000_000);
        assert_eq!((p.inflight(), p.min_rtt_ps), (0, 3_000_000));
        assert_eq!(p.depth(4, 0.0, 10e6), 4, "gain 0: the fixed depth");
        assert_eq!(p.depth(4, 1.0, 10e6), 30);
        assert_eq!(p.depth(4, 2.0, 10e6), 60);
        assert_eq!(p.depth(4, 1.0, 1e6), 4, "3 WRs cover it: the floor");
        p.posted(3, 6_000_000);
        p.cleared();
        assert!(p.inflight() == 0 && p.sent_ps.is_empty());
    }
}
