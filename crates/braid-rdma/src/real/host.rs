//! The event loop: drives a host's tenants (an [`App`] over its middleware stack each, plus the
//! agent slot) on a real device exactly as the simulator drives them: `start` once, then
//! completion notifications of armed CQs (from the completion channel), timers (a monotonic
//! clock) and wakes, each delivered up through the tenant's stack to its application.

use super::nic::Nic;
use braid_verbs::*;
use std::cmp::Reverse;
use std::time::{Duration, Instant};

/// One tenant's view of the device: what its stack's bottom calls.
pub struct TenantVerbs<'a> {
    pub nic: &'a mut Nic,
    pub tenant: TenantId,
}

impl Verbs for TenantVerbs<'_> {
    fn now(&self) -> u64 {
        self.nic.now()
    }
    fn local_host(&self) -> u32 {
        self.nic.caps().local_addrs[0]
    }
    fn caps(&self) -> &Caps {
        self.nic.caps()
    }
    fn tenant(&self) -> TenantId {
        self.tenant
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        self.nic.create_cq(self.tenant, depth)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.nic.destroy_cq(self.tenant, cq)
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.nic.req_notify_cq(self.tenant, cq)
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        self.nic.create_qp(self.tenant, init)
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        self.nic.connect_qp(self.tenant, qp, remote)
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        self.nic.modify_qp(self.tenant, qp, m)
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        self.nic.query_qp(self.tenant, qp)
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.nic.destroy_qp(self.tenant, qp)
    }
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError> {
        self.nic.reg_mr(self.tenant, DEFAULT_PD, addr, len, access)
    }
    fn reg_mr_in(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        self.nic.reg_mr(self.tenant, pd, addr, len, access)
    }
    fn alloc_pd(&mut self) -> Result<PdId, VerbsError> {
        self.nic.alloc_pd(self.tenant)
    }
    fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        self.nic.dealloc_pd(self.tenant, pd)
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.nic.dereg_mr(self.tenant, mr)
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.nic
            .post_send_list(self.tenant, qp, std::slice::from_ref(&wr))
            .map_err(|b| b.error)
    }
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        self.nic.post_send_list(self.tenant, qp, &wrs)
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.nic.post_recv(self.tenant, qp, &wr)
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        self.nic.poll_cq(self.tenant, cq, max, out)
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        let p = &mut self.nic.pending;
        p.seq += 1;
        p.timers.push(Reverse((at, p.seq, self.tenant, token)));
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.nic.pending.wakes.push_back((tenant, token));
    }
    fn write_local(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.nic.write_local(self.tenant, addr, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        self.nic.read_local(self.tenant, addr, len)
    }
}

struct Slot {
    app: Box<dyn App>,
    layers: Vec<Box<dyn Middleware>>,
    started: bool,
}

/// How [`Host::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every application is done.
    Done,
    /// The time limit passed first.
    TimedOut,
}

/// A host: one device and its tenants (tenant 0 is the agent slot).
pub struct Host {
    pub nic: Nic,
    slots: Vec<Slot>,
    /// Events delivered, for reports.
    pub events: u64,
    /// Busy polling (perftest's default): instead of sleeping on the completion channel, spin
    /// polling the armed CQs and notify in software (a CQ armed with `req_notify_cq` gets one
    /// [`Event::Completion`] for its next completion, as from the channel). Lower latency, one
    /// core busy; app and middleware code is the same. Set it before the first event.
    pub busy_poll: bool,
}

impl Host {
    pub fn new(nic: Nic) -> Self {
        Host {
            nic,
            slots: vec![Slot {
                app: Box::new(Idle),
                layers: Vec::new(),
                started: false,
            }],
            events: 0,
            busy_poll: false,
        }
    }

    /// The host's context for middleware factories ([`MiddlewareFactory::build`]), with an
    /// in-process out-of-band board: enough for mechanisms whose agents connect within this
    /// process (one host). Across real hosts, use [`Host::ctx_with_board`] with a
    /// [`crate::oob::NetBoard`].
    pub fn ctx(&self) -> HostCtx {
        self.ctx_with_board(braid_verbs::rendezvous::board())
    }

    /// The host's context with the run's board (shared with other hosts, e.g. over TCP).
    pub fn ctx_with_board(&self, board: braid_verbs::rendezvous::SharedBoard) -> HostCtx {
        HostCtx::new(self.nic.caps().local_addrs[0], self.nic.caps().clone())
            .with_board(board)
            .with_shares(self.nic.agent_shares())
    }

    /// Every layer's counters: (tenant, layer name, counter, value); tenant 0 is the agent slot.
    pub fn counters(&self) -> Vec<(TenantId, &'static str, &'static str, f64)> {
        let mut v = Vec::new();
        for (t, s) in self.slots.iter().enumerate() {
            for l in &s.layers {
                for (k, x) in l.counters() {
                    v.push((t as TenantId, l.name(), k, x));
                }
            }
        }
        v
    }

    /// Puts layers in the agent slot (from [`HostCtx::take_agents`]).
    pub fn set_agent(&mut self, layers: Vec<Box<dyn Middleware>>) {
        self.slots[0].layers = layers;
    }

    /// The id the next [`Host::add_app`] will give (what a factory builds a layer for).
    pub fn next_tenant(&self) -> TenantId {
        self.slots.len() as TenantId
    }

    /// Adds a tenant: an application over its middleware stack (top first). Returns its id.
    pub fn add_app(&mut self, app: Box<dyn App>, layers: Vec<Box<dyn Middleware>>) -> TenantId {
        self.slots.push(Slot {
            app,
            layers,
            started: false,
        });
        (self.slots.len() - 1) as TenantId
    }

    /// Starts every tenant not started yet (the agent slot first; in each, the lowest layer
    /// first, then the application).
    pub fn start(&mut self) {
        self.nic.soft_notify = self.busy_poll;
        for t in 0..self.slots.len() {
            if self.slots[t].started {
                continue;
            }
            let slot = &mut self.slots[t];
            slot.started = true;
            let mut bottom = TenantVerbs {
                nic: &mut self.nic,
                tenant: t as TenantId,
            };
            let mut stack = Stack::new(&mut slot.layers, &mut bottom);
            stack.start_layers();
            slot.app.start(&mut stack);
        }
    }

    fn deliver(&mut self, t: TenantId, ev: Event) {
        let Some(slot) = self.slots.get_mut(t as usize) else {
            return;
        };
        self.events += 1;
        let mut bottom = TenantVerbs {
            nic: &mut self.nic,
            tenant: t,
        };
        let mut stack = Stack::new(&mut slot.layers, &mut bottom);
        let mut up = Vec::new();
        stack.deliver(ev, &mut up);
        for e in up {
            slot.app.on_event(&mut stack, e);
        }
    }

    /// Every application (tenants 1..) is done.
    pub fn all_done(&self) -> bool {
        self.slots[1..].iter().all(|s| s.app.is_done())
    }

    /// Serves events until every application is done or `limit` has passed.
    pub fn run(&mut self, limit: Duration) -> RunEnd {
        self.run_until(limit, |h| h.all_done())
    }

    /// Serves events until `stop` holds (checked after every batch) or `limit` has passed.
    pub fn run_until(&mut self, limit: Duration, mut stop: impl FnMut(&Host) -> bool) -> RunEnd {
        self.start();
        let end = Instant::now() + limit;
        loop {
            if stop(self) {
                return RunEnd::Done;
            }
            if Instant::now() >= end {
                return RunEnd::TimedOut;
            }
            let mut progressed = false;
            // Wakes, then due timers, then completion events.
            while let Some((t, tok)) = self.nic.pending.wakes.pop_front() {
                self.deliver(t, Event::Wake(tok));
                progressed = true;
            }
            let now = self.nic.now();
            while let Some(Reverse((at, _, t, tok))) = self.nic.pending.timers.peek().copied() {
                if at > now {
                    break;
                }
                self.nic.pending.timers.pop();
                self.deliver(t, Event::Timer(tok));
                progressed = true;
            }
            self.nic.soft_notify = self.busy_poll;
            let events = if self.busy_poll {
                self.nic.take_soft_events()
            } else {
                self.nic.take_cq_events()
            };
            for (t, cq) in events {
                self.deliver(t, Event::Completion(cq));
                progressed = true;
            }
            if progressed || !self.nic.pending.wakes.is_empty() || self.busy_poll {
                continue;
            }
            // Sleep on the completion channel until the next timer (at most 10 ms, so the
            // limit and `stop` are checked).
            let next = self
                .nic
                .pending
                .timers
                .peek()
                .map(|Reverse((at, ..))| at.saturating_sub(self.nic.now()) / 1_000_000_000)
                .unwrap_or(10)
                .min(10);
            let mut pfd = libc::pollfd {
                fd: self.nic.event_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, next as i32) };
        }
    }
}
