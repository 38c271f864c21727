//! [`FakeNet`]: an in-process network of fake RNICs for unit-testing middleware without the
//! simulator, in the spirit of smoltcp's tests over its Loopback device.
//!
//! It is a small deterministic discrete-event harness. Hosts (addresses `1..=N` by default,
//! more with [`Caps::local_addrs`]) carry tenants: tenant 0 is the host's agent slot, applications
//! are numbered from 1. Every tenant is an [`App`] over its own middleware [`Stack`]; the net
//! starts each one (layers with [`Stack::start_layers`], then the app) and delivers its events —
//! timers, wakes, completion notifications of CQs it armed — through the stack
//! ([`Stack::deliver`], then [`App::on_event`]). Verbs follow ibverbs (and mlx5's cross-channel
//! verbs) as a real NIC does, including the parts that hang a careless consumer: an unarmed CQ
//! never notifies, unsignaled WRs keep their send-queue slots until a later signaled completion
//! is polled, an RNR with `rnr_retry = 7` retries forever, a WAIT counts from the previous WAIT.
//!
//! # Using it in a middleware unit test
//!
//! 1. Build a net: `FakeNet::new(2)` (or [`FakeNet::with_config`] for timing and CPU
//!    models); change a host's capabilities with [`FakeNet::set_caps`] before adding tenants.
//! 2. Add tenants: [`FakeNet::add_tenant`] with an app and the layers under test (top first), or
//!    [`FakeNet::add_tenant_with`] with [`MiddlewareFactory`]s (agent layers go to tenant 0);
//!    [`FakeNet::set_agent`] sets the agent slot's layers by hand.
//! 3. Drive it: [`FakeNet::run`] until nothing is left to do, [`FakeNet::run_until`] a time.
//!    [`FakeNet::call_as`] makes verbs calls as a tenant, through its whole stack, between runs:
//!    handy to script a peer instead of writing an [`App`].
//! 4. Check: completions (poll them as the tenant), bytes ([`FakeNic::read_mem`] via
//!    [`FakeNet::nic`]), QP states ([`FakeNic::qp_attr`]), every verbs call each tenant made
//!    ([`FakeNet::calls`], [`FakeNet::calls_of`]), the events delivered ([`FakeNet::deliveries`]),
//!    CPU charged per tenant and layer ([`FakeNet::cpu`]), the layers' counters.
//! 5. Break things: [`FakeNet::lose_packets`] (the next N packets a QP sends are lost: RC retries
//!    up to `retry_cnt`), [`FakeNet::kill_host`] (a dead peer).
//!
//! ```
//! use braid_verbs::testing::FakeNet;
//! use braid_verbs::*;
//!
//! /// The middleware under test: it makes every send signaled.
//! struct SignalAll;
//! impl Middleware for SignalAll {
//!     fn name(&self) -> &'static str {
//!         "signal_all"
//!     }
//!     fn post_send(&mut self, below: &mut dyn Verbs, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
//!         below.post_send(qp, SendWr { signaled: true, ..wr })
//!     }
//! }
//!
//! /// One end: a CQ, an RC QP and a tracked region of 64 bytes at 0x1000.
//! fn end(v: &mut dyn Verbs) -> Result<(CqId, QpNum, MemoryRegion), VerbsError> {
//!     let cq = v.create_cq(16)?;
//!     let qp = v.create_qp(&QpInit::rc(cq))?;
//!     let mr = v.reg_mr(0x1000, 64, Access::ALL.tracked())?;
//!     Ok((cq, qp, mr))
//! }
//!
//! let mut net = FakeNet::new(2);
//! let a = net.add_tenant(1, Box::new(Idle), vec![Box::new(SignalAll)]);
//! let b = net.add_tenant(2, Box::new(Idle), vec![]);
//! let (cqa, qpa, mra) = net.call_as(1, a, end).unwrap();
//! let (_, qpb, mrb) = net.call_as(2, b, end).unwrap();
//! // What rdma_cm would do: connect both ends.
//! net.call_as(1, a, |v| v.connect_qp(qpa, RemoteQp { host: 2, qpn: qpb, udp_sport: None }))
//!     .unwrap();
//! net.call_as(2, b, |v| v.connect_qp(qpb, RemoteQp { host: 1, qpn: qpa, udp_sport: None }))
//!     .unwrap();
//! net.call_as(1, a, |v| {
//!     v.write_local(0x1000, b"hello")?;
//!     let mut wr = SendWr::new(7, SendOp::Write, vec![Sge { addr: 0x1000, length: 5, lkey: mra.lkey }]);
//!     wr.signaled = false; // SignalAll must turn this into a completion
//!     wr.remote_addr = mrb.addr;
//!     wr.rkey = mrb.rkey;
//!     v.post_send(qpa, wr)
//! })
//! .unwrap();
//! net.run();
//! let mut wcs = Vec::new();
//! net.call_as(1, a, |v| v.poll_cq(cqa, 8, &mut wcs));
//! assert_eq!((wcs.len(), wcs[0].wr_id, wcs[0].status), (1, 7, WcStatus::Success));
//! assert_eq!(net.nic(2).read_mem(b, 0x1000, 5), b"hello");
//! ```
//!
//! # Model
//!
//! Each message (not packet) takes `bytes * 8 / line_rate` on its sender's egress link (FIFO
//! per host) and [`NetConfig::latency_ps`] on the wire; ACKs and NAKs take the latency. A send
//! queue is processed strictly in order: control WRs (WAIT, SEND/RECV_ENABLE, NOP) execute when
//! they reach the head, a blocked WAIT or a not-yet-enabled WR of a managed queue stops
//! everything behind it, data WRs are pipelined and complete in order. RC uses message sequence
//! numbers with go-back-N: a lost message makes the responder drop what follows it until the
//! requester's timer ([`NetConfig::rc_timeout_ps`]) sends it again; an RNR NAK pauses the
//! requester for [`NetConfig::rnr_timeout_ps`].
//!
//! Semantics that follow real NICs rather than the simplest reading (each has a test):
//! cross-channel indices are computed at post time as libmlx5 does (a WAIT waits for the CQ's
//! wait index plus its count, and moves the index there; SEND/RECV_ENABLE likewise per target
//! queue, count 0 means "all posted so far", beyond what is posted is refused); only RC and UC
//! remote access errors are class C/E (RC: both QPs go to Error, UC: silently dropped); a
//! zero-length RDMA operation checks no key (IBA C9-88); destroying a QP or resetting it
//! produces no completions and removes its completions from its CQs (libmlx5 `cq_clean`);
//! `destroy_cq` fails while a QP uses the CQ; `reg_mr` with `remote_write` needs
//! `local_write`; keys and QP numbers differ per host and lkey != rkey, so a key used in the
//! wrong place fails; a responder serves at most `max_dest_rd_atomic` READs at once (NAK
//! Invalid Request beyond); `reg_mr` past [`NetConfig::mr_limits`] fails with ENOMEM; a
//! tenant maps the agent's memory only where the agent granted it (`nic/memory.rs`).
//!
//! # Not modelled
//!
//! - Packets and the fabric: a message is one unit on the wire (losses are counted in MTU
//!   packets, but a message that loses any is lost whole, with no partial placement); no
//!   interleaving between QPs on the link, no switches, congestion, PFC, ECN/DCQCN, receive-side
//!   contention, QP-context cache, WQE processing time or message-rate limits. ACKs take no link
//!   time. Loss injection applies to the requests a QP sends, not to ACKs or READ responses.
//! - RC recovery uses the timeout only (no NAK-sequence-error fast retransmit).
//! - Statuses: a SEND longer than its RECV completes `LocalLengthError` at the responder and
//!   `RemoteInvalidRequest` at the requester (ibverbs: `IBV_WC_LOC_LEN_ERR`,
//!   `IBV_WC_REM_INV_REQ_ERR`), both QPs in Error; local key, bounds and permission errors are refused at post time (`BadKey`) instead of
//!   completing with `IBV_WC_LOC_PROT_ERR`; a UD message above the MTU is refused at post time.
//! - CQ overrun: mlx5 raises a CQ error event; here the completion is dropped and counted.
//! - Atomics, SRQs, memory windows, XRC, the SQD/SQE states, Rtr as a step of its own,
//!   asynchronous events, Q_Keys/P_Keys, multicast, `IBV_EXP_SEND_WAIT_EN_LAST` (every
//!   cross-channel WR advances its index, as if it carried the flag).
//! - Memory: only regions registered with [`Access::track`] keep bytes. A WRITE or SEND from
//!   untracked memory leaves the target unchanged (untracked parts of a partly tracked list read
//!   as zeros); a region deregistered after a WR was posted is not checked again. A UD
//!   receive's GRH is 40 zero bytes.
//! - CPU: work is accounted per tenant and layer (and, with [`NetConfig::cpu_delay`], delays
//!   the tenant), but tenants do not contend for cores.
//! - A dead host stays dead.

mod nic;
mod tenant_verbs;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_memory;

use nic::{Ev, Msg, Reply, Sched};
pub use nic::{FakeNic, MrLimits, MLX5_MAX_MR};
use tenant_verbs::TenantVerbs;

use super::Call;
use crate::*;
use std::collections::BTreeMap;

/// Timing, limits and models of a [`FakeNet`].
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    /// One-way latency of every message, ACK and NAK (default 2 µs).
    pub latency_ps: u64,
    /// RC retransmission timeout (default 1 ms, about ibverbs `timeout = 8`).
    pub rc_timeout_ps: u64,
    /// How long an RC requester waits after an RNR NAK (default 10 µs).
    pub rnr_timeout_ps: u64,
    /// Largest inline send (the QP's `max_inline_data`; default 256 bytes).
    pub max_inline: u32,
    /// UD receives get the 40-byte GRH in front of the payload, counted in `byte_len`, as raw
    /// ibverbs gives them on RoCE (default false: the seam's UD semantics are the payload alone at
    /// the buffer's start, as the simulator and the real backend, which hides the GRH behind a
    /// scratch SGE, give it; true tests code written against raw ibverbs).
    pub ud_grh: bool,
    /// The CPU cost model charges are accounted under (per tenant and layer).
    pub cpu: CpuCost,
    /// Whether CPU time spent in a callback advances the tenant's `now()` and delays its later
    /// callbacks and posts (default false: accounted only).
    pub cpu_delay: bool,
    /// The tenants of a host share one address space (default false: each tenant is a process
    /// of its own, and the same address in two tenants is two different bytes). True models
    /// memory as the simulator and the real backend see it, one physical memory per host, where
    /// two regions over the same addresses hold the same bytes: what DRUM's agent relies on when
    /// it maps a tenant's region onto a slice of its global buffer. Set it before adding hosts.
    pub host_memory: bool,
    /// Registration limits of every host's NIC (ENOMEM past them; default: mlx5's `max_mr`,
    /// no tenant quota).
    pub mr_limits: MrLimits,
    /// How much simulated time one [`FakeNet::run`] may cover (default 10 s): a guard against
    /// runs that never go idle (periodic timers, RNR retried forever).
    pub horizon_ps: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency_ps: 2_000_000,
            rc_timeout_ps: 1_000_000_000,
            rnr_timeout_ps: 10_000_000,
            max_inline: 256,
            ud_grh: false,
            cpu: CpuCost::default(),
            cpu_delay: false,
            host_memory: false,
            mr_limits: MrLimits::default(),
            horizon_ps: 10_000_000_000_000,
        }
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// No event is left.
    Idle,
    /// [`FakeNet::run_until`] reached its time with events still pending.
    Time,
    /// [`FakeNet::run`] reached [`NetConfig::horizon_ps`] with events still pending.
    Horizon,
}

/// A verbs call a tenant made (through its stack's bottom, i.e. what its lowest layer called).
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub at: u64,
    /// The host's primary address.
    pub host: u32,
    pub tenant: TenantId,
    pub call: Call,
    /// Whether the call succeeded (always true for calls without a result).
    pub ok: bool,
}

/// An event the net delivered to the bottom of a tenant's stack (`None`: the tenant's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub at: u64,
    pub host: u32,
    pub tenant: TenantId,
    pub event: Option<Event>,
}

/// CPU a tenant spent, under [`NetConfig::cpu`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantCpu {
    pub total_ps: u64,
    /// By layer: the names layers charge under ([`Verbs::charge_as`]), "app" for the
    /// application, "verbs" for the verbs calls themselves.
    pub by_layer: BTreeMap<&'static str, u64>,
    pub posts: u64,
    pub polls: u64,
}

struct Tenant {
    app: Box<dyn App>,
    layers: Vec<Box<dyn Middleware>>,
    started: bool,
    cpu: TenantCpu,
    free_at: u64,
}

impl Tenant {
    fn new(app: Box<dyn App>, layers: Vec<Box<dyn Middleware>>) -> Self {
        Tenant {
            app,
            layers,
            started: false,
            cpu: TenantCpu::default(),
            free_at: 0,
        }
    }
}

struct Host {
    tenants: Vec<Tenant>,
    ctx: Option<HostCtx>,
}

/// Everything but the tenants' code: what a tenant's verbs calls reach.
struct Core {
    sched: Sched,
    nics: Vec<FakeNic>,
    cfg: NetConfig,
    log: Vec<Logged>,
    delivered: Vec<Delivered>,
    /// Tenants per host.
    tenants: Vec<u32>,
}

impl Core {
    fn host_of(&self, addr: u32) -> Option<usize> {
        self.nics
            .iter()
            .position(|n| n.caps.local_addrs.contains(&addr))
    }

    fn handle_nic(&mut self, ev: Ev) {
        let Core {
            sched, nics, cfg, ..
        } = self;
        match ev {
            Ev::Kick { host, qp } => nics[host].pump(sched, cfg, qp),
            Ev::LocalDone {
                host,
                qp,
                epoch,
                psn,
            } => nics[host].local_done(sched, qp, epoch, psn),
            Ev::Timeout {
                host,
                qp,
                epoch,
                gen,
            } => nics[host].on_timeout(sched, cfg, qp, epoch, gen),
            Ev::Reply(r) => nics[r.host].on_reply(sched, cfg, *r),
            Ev::Arrive(m) => self.arrive(*m),
            Ev::Start { .. } | Ev::Deliver { .. } | Ev::Notify { .. } => {
                unreachable!("tenant events are the net's")
            }
        }
    }

    fn arrive(&mut self, m: Msg) {
        let Some(dst) = self.host_of(m.dst_addr) else {
            return;
        };
        if self.nics[dst].dead {
            return;
        }
        // The sender's QP was reset or destroyed since: what it sent belongs to a past
        // connection (a real responder rejects it by PSN).
        if self.nics[m.src_host].qp_epoch(m.src_qp) != Some(m.src_epoch) {
            return;
        }
        let src_addrs = self.nics[m.src_host].caps.local_addrs.clone();
        let (host, qp, epoch, psn) = (m.src_host, m.src_qp, m.src_epoch, m.psn);
        let Core {
            sched, nics, cfg, ..
        } = self;
        if let Some((at, kind)) = nics[dst].respond(sched, cfg, m, &src_addrs) {
            sched.at(
                at,
                Ev::Reply(Box::new(Reply {
                    host,
                    qp,
                    epoch,
                    psn,
                    kind,
                })),
            );
        }
    }
}

/// An in-process network of fake RNICs with tenants on them; see the [module docs](self).
pub struct FakeNet {
    core: Core,
    hosts: Vec<Host>,
    /// The out-of-band board host agents get through [`HostCtx::board`].
    board: crate::rendezvous::SharedBoard,
}

impl FakeNet {
    /// `hosts` hosts with addresses `1..=hosts` and [`FakeNet::default_caps`].
    pub fn new(hosts: u32) -> Self {
        Self::with_config(hosts, NetConfig::default())
    }

    pub fn with_config(hosts: u32, cfg: NetConfig) -> Self {
        let mut net = FakeNet {
            core: Core {
                sched: Sched::default(),
                nics: Vec::new(),
                cfg,
                log: Vec::new(),
                delivered: Vec::new(),
                tenants: Vec::new(),
            },
            hosts: Vec::new(),
            board: crate::rendezvous::board(),
        };
        for a in 1..=hosts {
            net.add_host(Self::default_caps(a));
        }
        net
    }

    /// A capable NIC: cross-channel, data tracking, source-port control, 4 KiB MTU, 100 Gbit/s,
    /// one address.
    pub fn default_caps(addr: u32) -> Caps {
        Caps {
            cross_channel: true,
            local_addrs: vec![addr],
            sport_control: true,
            data_tracking: true,
            mtu: 4096,
            line_rate_bps: 100_000_000_000,
            max_qp_wr: 1 << 15,
        }
    }

    /// Adds a host with these capabilities; returns its primary address (`caps.local_addrs[0]`).
    pub fn add_host(&mut self, caps: Caps) -> u32 {
        assert!(
            !caps.local_addrs.is_empty(),
            "a host needs at least one address"
        );
        for a in &caps.local_addrs {
            assert!(self.core.host_of(*a).is_none(), "address {a} is taken");
        }
        let addr = caps.local_addrs[0];
        let idx = self.core.nics.len();
        let mut nic = FakeNic::new(idx, caps);
        nic.host_memory = self.core.cfg.host_memory;
        nic.mr_limits = self.core.cfg.mr_limits;
        self.core.nics.push(nic);
        self.core.tenants.push(1);
        self.hosts.push(Host {
            tenants: vec![Tenant::new(Box::new(Idle), Vec::new())],
            ctx: None,
        });
        let now = self.core.sched.now;
        self.core.sched.at(
            now,
            Ev::Start {
                host: idx,
                tenant: AGENT,
            },
        );
        addr
    }

    /// The hosts' primary addresses.
    pub fn hosts(&self) -> Vec<u32> {
        self.core.nics.iter().map(|n| n.addr()).collect()
    }

    fn idx(&self, host: u32) -> usize {
        self.core
            .host_of(host)
            .unwrap_or_else(|| panic!("no host has address {host}"))
    }

    pub fn caps(&self, host: u32) -> &Caps {
        &self.core.nics[self.idx(host)].caps
    }

    /// Replaces a host's capabilities (before adding its tenants). An empty `local_addrs`
    /// keeps the host's addresses; otherwise the host is known by the new first one.
    pub fn set_caps(&mut self, host: u32, mut caps: Caps) {
        let i = self.idx(host);
        if caps.local_addrs.is_empty() {
            caps.local_addrs = self.core.nics[i].caps.local_addrs.clone();
        }
        for a in &caps.local_addrs {
            assert!(
                !matches!(self.core.host_of(*a), Some(h) if h != i),
                "address {a} is taken"
            );
        }
        self.core.nics[i].caps = caps;
    }

    pub fn config(&self) -> &NetConfig {
        &self.core.cfg
    }

    pub fn config_mut(&mut self) -> &mut NetConfig {
        &mut self.core.cfg
    }

    /// Adds an application with its middleware layers (top first) to `host`; it starts at the
    /// current time, in the next run.
    pub fn add_tenant(
        &mut self,
        host: u32,
        app: Box<dyn App>,
        layers: Vec<Box<dyn Middleware>>,
    ) -> TenantId {
        let i = self.idx(host);
        let id = self.hosts[i].tenants.len() as TenantId;
        self.hosts[i].tenants.push(Tenant::new(app, layers));
        self.core.tenants[i] += 1;
        let now = self.core.sched.now;
        self.core.sched.at(
            now,
            Ev::Start {
                host: i,
                tenant: id,
            },
        );
        id
    }

    /// Adds an application whose layers the factories build (the first on top), as the world
    /// does: through the host's [`HostCtx`], whose agent layers join the agent slot (which must
    /// not have started yet).
    pub fn add_tenant_with(
        &mut self,
        host: u32,
        app: Box<dyn App>,
        factories: &[&dyn MiddlewareFactory],
    ) -> Result<TenantId, BuildError> {
        let i = self.idx(host);
        let id = self.hosts[i].tenants.len() as TenantId;
        let caps = self.core.nics[i].caps.clone();
        let addr = self.core.nics[i].addr();
        let shares = self.core.nics[i].agent_shares();
        let h = &mut self.hosts[i];
        let board = &self.board;
        let ctx = h.ctx.get_or_insert_with(|| {
            HostCtx::new(addr, caps)
                .with_board(board.clone())
                .with_shares(shares)
        });
        let built: Result<Vec<_>, _> = factories.iter().map(|f| f.build(ctx, id)).collect();
        let agents = ctx.take_agents();
        if !agents.is_empty() {
            let agent = &mut h.tenants[AGENT as usize];
            assert!(
                !agent.started,
                "agent layers must be added before the agent slot starts (the first run)"
            );
            agent.layers.extend(agents);
        }
        Ok(self.add_tenant(host, app, built?))
    }

    /// The net's out-of-band board (what [`HostCtx::board`] gives the factories).
    pub fn board(&self) -> &crate::rendezvous::SharedBoard {
        &self.board
    }

    /// Sets the agent slot's (tenant 0's) layers, top first, before it starts.
    pub fn set_agent(&mut self, host: u32, layers: Vec<Box<dyn Middleware>>) {
        let i = self.idx(host);
        let agent = &mut self.hosts[i].tenants[AGENT as usize];
        assert!(!agent.started, "the agent slot has started already");
        agent.layers = layers;
    }

    /// Replaces the agent slot's application ([`Idle`] by default), before it starts.
    pub fn set_agent_app(&mut self, host: u32, app: Box<dyn App>) {
        let i = self.idx(host);
        let agent = &mut self.hosts[i].tenants[AGENT as usize];
        assert!(!agent.started, "the agent slot has started already");
        agent.app = app;
    }

    /// The current time in picoseconds.
    pub fn now(&self) -> u64 {
        self.core.sched.now
    }

    /// Handles the next event; false if there is none.
    pub fn step(&mut self) -> bool {
        let Some(((at, _), ev)) = self.core.sched.queue.pop_first() else {
            return false;
        };
        self.core.sched.now = at;
        self.handle(ev);
        true
    }

    /// Handles every event up to time `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: u64) -> Stop {
        while let Some(&(at, _)) = self.core.sched.queue.keys().next() {
            if at > t {
                self.core.sched.now = self.core.sched.now.max(t);
                return Stop::Time;
            }
            self.step();
        }
        self.core.sched.now = self.core.sched.now.max(t);
        Stop::Idle
    }

    /// Handles events until none is left (the clock stays at the last one), or until
    /// [`NetConfig::horizon_ps`] has passed.
    pub fn run(&mut self) -> Stop {
        let limit = self.core.sched.now.saturating_add(self.core.cfg.horizon_ps);
        loop {
            match self.core.sched.queue.keys().next() {
                None => return Stop::Idle,
                Some(&(at, _)) if at > limit => return Stop::Horizon,
                Some(_) => {
                    self.step();
                }
            }
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Start { host, tenant } => self.dispatch(host, tenant, None),
            Ev::Deliver {
                host,
                tenant,
                event,
            } => self.dispatch(host, tenant, Some(event)),
            Ev::Notify { host, cq } => {
                if let Some(owner) = self.core.nics[host].cq_owner(cq) {
                    self.dispatch(host, owner, Some(Event::Completion(cq)));
                }
            }
            other => self.core.handle_nic(other),
        }
    }

    /// Runs a tenant's start (`None`) or one event through its stack and app.
    fn dispatch(&mut self, host: usize, tenant: TenantId, event: Option<Event>) {
        if self.core.nics[host].dead {
            return;
        }
        let now = self.core.sched.now;
        let Some(t) = self.hosts[host].tenants.get_mut(tenant as usize) else {
            return;
        };
        if self.core.cfg.cpu_delay && t.free_at > now {
            // The tenant's thread is still busy: the event waits for it.
            let ev = match event {
                None => Ev::Start { host, tenant },
                Some(event) => Ev::Deliver {
                    host,
                    tenant,
                    event,
                },
            };
            let at = t.free_at;
            self.core.sched.at(at, ev);
            return;
        }
        let addr = self.core.nics[host].addr();
        self.core.delivered.push(Delivered {
            at: now,
            host: addr,
            tenant,
            event,
        });
        let Tenant {
            app,
            layers,
            started,
            cpu,
            free_at,
        } = t;
        let mut bottom = TenantVerbs {
            core: &mut self.core,
            cpu,
            host,
            tenant,
            start: now,
            spent: 0,
        };
        {
            let mut stack = Stack::new(layers, &mut bottom);
            match event {
                None => {
                    stack.start_layers();
                    app.start(&mut stack);
                }
                Some(e) => {
                    let mut out = Vec::new();
                    stack.deliver(e, &mut out);
                    for e in out {
                        app.on_event(&mut stack, e);
                    }
                }
            }
        }
        *free_at = bottom.start + bottom.spent;
        if event.is_none() {
            *started = true;
        }
    }

    /// Runs `f` as tenant `tenant` of `host`, through its whole stack (as if its application
    /// made the calls), at the current time. Calls are logged like any other.
    pub fn call_as<R>(
        &mut self,
        host: u32,
        tenant: TenantId,
        f: impl FnOnce(&mut dyn Verbs) -> R,
    ) -> R {
        let i = self.idx(host);
        let now = self.core.sched.now;
        let t = self.hosts[i]
            .tenants
            .get_mut(tenant as usize)
            .unwrap_or_else(|| panic!("host {host} has no tenant {tenant}"));
        let mut bottom = TenantVerbs {
            core: &mut self.core,
            cpu: &mut t.cpu,
            host: i,
            tenant,
            start: now.max(t.free_at),
            spent: 0,
        };
        let r = {
            let mut stack = Stack::new(&mut t.layers, &mut bottom);
            f(&mut stack)
        };
        t.free_at = bottom.start + bottom.spent;
        r
    }

    /// The next `n` packets QP `qp` of `host` sends are lost (a message of k packets uses k).
    pub fn lose_packets(&mut self, host: u32, qp: QpNum, n: u32) {
        let i = self.idx(host);
        assert!(
            self.core.nics[i].lose(qp, n as u64),
            "host {host} has no QP {qp}"
        );
    }

    /// The host dies now: its NIC neither sends nor answers, its tenants get no more events.
    pub fn kill_host(&mut self, host: u32) {
        let i = self.idx(host);
        self.core.nics[i].dead = true;
    }

    /// A host's NIC, to inspect.
    pub fn nic(&self, host: u32) -> &FakeNic {
        &self.core.nics[self.idx(host)]
    }

    /// Writes a tenant's memory directly (test setup; no tracking needed).
    pub fn write_mem(&mut self, host: u32, tenant: TenantId, addr: u64, data: &[u8]) {
        let i = self.idx(host);
        self.core.nics[i].write_mem(tenant, addr, data);
    }

    /// Every verbs call every tenant made, in order.
    pub fn calls(&self) -> &[Logged] {
        &self.core.log
    }

    /// The calls one tenant made, in order.
    pub fn calls_of(&self, host: u32, tenant: TenantId) -> Vec<Call> {
        let host = self.nic(host).addr();
        self.core
            .log
            .iter()
            .filter(|l| l.host == host && l.tenant == tenant)
            .map(|l| l.call.clone())
            .collect()
    }

    /// Every start and event delivered to a tenant's stack, in order.
    pub fn deliveries(&self) -> &[Delivered] {
        &self.core.delivered
    }

    /// The events delivered to one tenant's stack, in order (starts left out).
    pub fn events_of(&self, host: u32, tenant: TenantId) -> Vec<Event> {
        let host = self.nic(host).addr();
        self.core
            .delivered
            .iter()
            .filter(|d| d.host == host && d.tenant == tenant)
            .filter_map(|d| d.event)
            .collect()
    }

    /// CPU a tenant spent.
    pub fn cpu(&self, host: u32, tenant: TenantId) -> &TenantCpu {
        &self.hosts[self.idx(host)].tenants[tenant as usize].cpu
    }

    /// A tenant's layers' counters, top to bottom: (layer, counter, value).
    pub fn counters(&self, host: u32, tenant: TenantId) -> Vec<(&'static str, &'static str, f64)> {
        self.hosts[self.idx(host)].tenants[tenant as usize]
            .layers
            .iter()
            .flat_map(|l| {
                let n = l.name();
                l.counters().into_iter().map(move |(k, v)| (n, k, v))
            })
            .collect()
    }

    /// A tenant's layers' tables (`Middleware::tables`), top to bottom.
    pub fn tables(&self, host: u32, tenant: TenantId) -> Vec<crate::LayerTable> {
        self.hosts[self.idx(host)].tenants[tenant as usize]
            .layers
            .iter()
            .flat_map(|l| l.tables())
            .collect()
    }

    /// Whether every application (agent slots included) says it is done.
    pub fn all_done(&self) -> bool {
        self.hosts
            .iter()
            .flat_map(|h| &h.tenants)
            .all(|t| t.app.is_done())
    }
}
