//! The process as a braid host: one `HostCtx` (so that a host-scoped mechanism such as
//! Justitia has one pacer state shared by the process's tenants, one per adopted context), its
//! agent slot (tenant 0's stack, e.g. Justitia's pacer), and the events the layers ask for:
//! timers (`Verbs::set_timer`) and wakes (`Verbs::wake`). The simulator's event loop delivers
//! those; here [`run_due`] does, after every data-path call that went through a layer and from a
//! helper thread ([`spawn_helper`]) while the application is not calling in.
//!
//! Everything here is touched only under the preload's one lock (datapath.rs), as the layers are
//! single-threaded state machines.

use crate::datapath::{lock, Preload};
use braid_verbs::{
    Access, BadWr, Caps, CqId, Event, HostCtx, MemoryRegion, Middleware, QpAttr, QpInit, QpModify,
    QpNum, RecvWr, RemoteQp, SendWr, Stack, TenantId, Verbs, VerbsError, WorkCompletion, AGENT,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The process's clock in picoseconds (the seam's unit), shared by every backend so that a
/// layer's and the agent's `now()` agree.
pub fn now_ps() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64 * 1000
}

/// What a backend was asked to schedule, collected by [`run_due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sched {
    /// `set_timer(at, token)` from the backend's own tenant.
    Timer { at: u64, token: u64 },
    /// `wake(tenant, token)`.
    Wake { tenant: TenantId, token: u64 },
}

/// The backend under the agent slot: a clock, timers and wakes. Objects of the agent's own
/// (Justitia's reference-flow QP, its CQ and probe region) are refused: the agent then runs
/// without a reference flow (its capacity stays at `line_rate`), which docs/preload.md states.
#[derive(Default)]
pub struct AgentVerbs {
    pub sched: Vec<Sched>,
    caps: Caps,
}

const NO_OBJECTS: &str =
    "objects of the agent's own under the preload (the reference flow is not run; issue 32 §2)";

impl Verbs for AgentVerbs {
    fn now(&self) -> u64 {
        now_ps()
    }
    fn local_host(&self) -> u32 {
        0
    }
    fn caps(&self) -> &Caps {
        &self.caps
    }
    fn tenant(&self) -> TenantId {
        AGENT
    }
    fn create_cq(&mut self, _depth: u32) -> Result<CqId, VerbsError> {
        Err(VerbsError::Unsupported(NO_OBJECTS))
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchCq(cq))
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchCq(cq))
    }
    fn create_qp(&mut self, _init: &QpInit) -> Result<QpNum, VerbsError> {
        Err(VerbsError::Unsupported(NO_OBJECTS))
    }
    fn connect_qp(&mut self, qp: QpNum, _remote: RemoteQp) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn modify_qp(&mut self, qp: QpNum, _m: QpModify) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn reg_mr(&mut self, _a: u64, _l: u64, _x: Access) -> Result<MemoryRegion, VerbsError> {
        Err(VerbsError::Unsupported(NO_OBJECTS))
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        Err(VerbsError::BadKey(mr.lkey))
    }
    fn post_send(&mut self, qp: QpNum, _wr: SendWr) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn post_send_list(&mut self, qp: QpNum, _wrs: Vec<SendWr>) -> Result<(), BadWr> {
        Err(BadWr {
            index: 0,
            error: VerbsError::NoSuchQp(qp),
        })
    }
    fn post_recv(&mut self, qp: QpNum, _wr: RecvWr) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn poll_cq(&mut self, _cq: CqId, _max: usize, _out: &mut Vec<WorkCompletion>) -> usize {
        0
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.sched.push(Sched::Timer { at, token });
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.sched.push(Sched::Wake { tenant, token });
    }
}

/// The process's host: its `HostCtx`, agent slot and pending events.
pub struct Host {
    pub ctx: HostCtx,
    pub agent: Vec<Box<dyn Middleware>>,
    pub agent_be: AgentVerbs,
    next_tenant: TenantId,
    /// (when, tenant, token), earliest first.
    timers: BinaryHeap<Reverse<(u64, TenantId, u64)>>,
    wakes: VecDeque<(TenantId, u64)>,
    /// Events delivered (timers, wakes), for the counters.
    pub events: u64,
}

impl Host {
    pub fn new(line_rate_bps: u64) -> Self {
        let caps = Caps {
            line_rate_bps,
            ..Caps::default()
        };
        Host {
            ctx: HostCtx::new(0, caps).with_board(braid_verbs::rendezvous::board()),
            agent: Vec::new(),
            agent_be: AgentVerbs::default(),
            next_tenant: AGENT + 1,
            timers: BinaryHeap::new(),
            wakes: VecDeque::new(),
            events: 0,
        }
    }
    /// A new tenant id (one per adopted context).
    pub fn tenant(&mut self) -> TenantId {
        let t = self.next_tenant;
        self.next_tenant += 1;
        t
    }
    /// Moves the agents a factory just added into the agent slot and starts them.
    pub fn take_agents(&mut self) {
        let new = self.ctx.take_agents();
        if new.is_empty() {
            return;
        }
        let from = self.agent.len();
        self.agent.extend(new);
        let mut s = Stack::new(&mut self.agent[from..], &mut self.agent_be);
        s.start_layers();
    }
    /// The earliest timer, if any.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }
    fn collect(&mut self, tenant: TenantId, sched: &mut Vec<Sched>) {
        for s in sched.drain(..) {
            match s {
                Sched::Timer { at, token } => self.timers.push(Reverse((at, tenant, token))),
                Sched::Wake { tenant, token } => self.wakes.push_back((tenant, token)),
            }
        }
    }
}

/// At most this many events per call, so that a layer that keeps waking itself cannot hold the
/// lock for ever (the rest wait for the next call or the helper thread).
const MAX_EVENTS: usize = 4096;

/// Delivers every wake and every timer that is due, to the stack of the tenant they are for.
pub fn run_due(st: &mut Preload) {
    let Preload { ctxs, host, .. } = st;
    let Some(h) = host.as_mut() else { return };
    let mut out = Vec::new();
    for _ in 0..MAX_EVENTS {
        for cx in ctxs.iter_mut() {
            if !cx.backend.sched.is_empty() {
                let t = cx.backend.tenant;
                h.collect(t, &mut cx.backend.sched);
            }
        }
        if !h.agent_be.sched.is_empty() {
            let mut s = std::mem::take(&mut h.agent_be.sched);
            h.collect(AGENT, &mut s);
        }
        let (tenant, ev) = if let Some((t, tok)) = h.wakes.pop_front() {
            (t, Event::Wake(tok))
        } else if h.next_timer().is_some_and(|at| at <= now_ps()) {
            let Some(Reverse((_, t, tok))) = h.timers.pop() else {
                break;
            };
            (t, Event::Timer(tok))
        } else {
            return;
        };
        h.events += 1;
        out.clear();
        if tenant == AGENT {
            Stack::new(&mut h.agent, &mut h.agent_be).deliver(ev, &mut out);
        } else if let Some(cx) = ctxs.iter_mut().find(|c| c.backend.tenant == tenant) {
            Stack::new(&mut cx.layers, &mut cx.backend).deliver(ev, &mut out);
        }
        // What reaches the top is for the application, which polls its CQs itself (a
        // completion a layer made up is found at its next ibv_poll_cq).
    }
}

/// Starts (once per process) the thread that delivers timers and wakes while the application
/// is not calling in: a paced tenant's held WRs go out when its tokens come, even if it only
/// waits on its CQ.
pub fn spawn_helper() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let r = std::thread::Builder::new()
            .name("braid-preload".into())
            .spawn(|| loop {
                let wait_ps = {
                    let mut st = lock();
                    run_due(&mut st);
                    st.host
                        .as_ref()
                        .and_then(|h| h.next_timer())
                        .map(|at| at.saturating_sub(now_ps()))
                };
                // At most 1 ms between looks (wakes posted from the application's own calls
                // are delivered in those calls; this covers timers).
                let ps = wait_ps.unwrap_or(1_000_000_000).clamp(1_000_000, 1_000_000_000);
                std::thread::sleep(Duration::from_nanos(ps / 1000));
            });
        if let Err(e) = r {
            eprintln!("braid-preload: cannot start the helper thread ({e}): timers are delivered only when the application calls in");
        }
    });
}
