//! `drum` and `share`: DRUM's host agent (Shen et al., ToN 2023, §IV) and the QP-sharing
//! baseline SHARE it is compared with (§V).
//!
//! Host-scoped, as DRUM's kernel indirection module is:
//! - one **agent** per host ([`agent`], tenant 0) owns the host's physical resources: one CQ
//!   shared by every connection (the *poller*), the shared RC QPs to each peer host ("pipes",
//!   at most `mux_ratio` connections each), and one pre-registered global memory buffer. Its
//!   *scheduler* fetches work requests from the *virtual request pool* at per-connection WQE
//!   rates x and its poller hands completions to tenants at per-connection CQE rates z, both
//!   decided by a [`decide::RateDecider`] (today a host-local exact solve of the one-sided
//!   problem with `braid_drum`; the online distributed solver plugs in behind the same trait);
//! - one **layer** per tenant ([`layer`], the IO monitor's per-process half) gives the
//!   application its own QPs, CQs and memory regions, all virtual: a QP is a connection (its
//!   number is the connection id carried in `wr_id` locally and in the immediate data remotely),
//!   a CQ is a queue the poller fills, a memory region is a slice of the global buffer with keys
//!   of its own. Its WRs go into the pool, not to the NIC.
//!
//! `share` is the same machinery with the scheduler and poller out of the way: WRs go to the
//! shared QP as soon as they are posted, completions to the tenant as soon as they arrive; posts
//! to one shared QP are serialised by its lock, each holding it for `hold_ns` plus `lock_ns`
//! when another connection of that QP has work outstanding (the lock contention SHARE suffers
//! from, §V test cases 1 and 3).
//!
//! Design, parameters, sources and what differs from the paper: `docs/drum-agent.md`.

pub mod agent;
pub(crate) mod bufs;
pub mod decide;
pub mod fabric;
pub mod fabric_model;
pub(crate) mod fail;
pub(crate) mod imm;
pub mod layer;
pub mod online;
pub mod share;
pub mod state;
pub(crate) mod ud;

use braid_units::{Bytes, Duration};
use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, TenantId, AGENT};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use agent::DrumAgent;
pub use decide::{
    DeciderCtx, DeciderFactory, DeciderKind, Decision, LocalSolve, RateDecider, Stat,
};
pub use layer::DrumLayer;
pub use online::{OnlineDecider, OnlineSolve};
pub use share::ShareConfig;

pub use state::HostState;

/// How the agent treats the pool (DRUM schedules it; SHARE only multiplexes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Rates x and z from the decider; at most `pipe_depth` WRs in flight per shared QP.
    Drum,
    /// Post at once, deliver at once; lock contention charged per post.
    Share,
}

/// What carries a host's connections (`pipe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PipeKind {
    /// Shared RC QPs, `mux_ratio` connections each, to each peer host.
    Rc,
    /// Two-sided traffic on one UD QP per host (segmented, acknowledged, in order per
    /// connection; `ud.rs`); one-sided operations on shared RC QPs.
    Ud,
}

/// `{ kind = "drum", ... }`; every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DrumConfig {
    /// Connections to one peer host per shared QP (the paper: 4 to 10).
    pub mux_ratio: u32,
    /// `"rc"`: shared RC QPs carry everything; `"ud"`: SENDs go on one UD QP per host.
    pub pipe: PipeKind,
    /// `pipe = "ud"`: how long a connection waits for an acknowledgement before sending again.
    pub ud_rto: Duration,
    /// Work requests the scheduler keeps in flight on one shared QP; the rest wait in the pool.
    /// With `pipe_bdp` > 0 this is the floor of a depth sized to the pipe's decided rate.
    pub pipe_depth: u32,
    /// Size each shared QP's depth to the bandwidth-delay product of its decided rate (Little's
    /// law): `max(pipe_depth, ceil(pipe_bdp * x * rtt))`, `x` the sum of its scheduled
    /// connections' WQE rates, `rtt` the shortest post-to-completion time seen on it; 0 = a
    /// fixed `pipe_depth` (which caps a pipe at `pipe_depth / rtt` WRs/s whatever was decided).
    pub pipe_bdp: f64,
    /// The host's WQE capacity Q, work requests per second (the RNIC's message rate).
    pub wqe_rate: f64,
    /// The host's CQE capacity C, completions per second the poller hands out.
    pub cqe_rate: f64,
    /// Utility fairness: alpha = 1 is proportional fairness (log utility); (0, 100].
    pub alpha: f64,
    /// Weight of the CQ utility -beta / z^2 (per connection), z in millions of completions per
    /// second (the unit both deciders solve in).
    pub beta: f64,
    /// This tenant's weight in the utility (tenants of one host may differ).
    pub weight: f64,
    /// Connections scheduled at once (the QP-cache budget k of the top-k selection); 0 = all.
    pub qp_budget: u32,
    /// Rounds a connection may be left out of the top-k before it is forced in (aging).
    pub max_wait: u32,
    /// How often the rates are decided again (also on every connection that arrives or leaves).
    pub solve_interval: Duration,
    /// Token-bucket depth of the WQE and CQE rates, in work requests.
    pub burst: u32,
    /// Largest message a connection may SEND (the agent's receive buffers on shared QPs).
    pub bounce_size: Bytes,
    /// Receive buffers the agent keeps posted on each shared QP.
    pub recvs_per_pipe: u32,
    /// Size of the pre-registered global buffer tenants' regions are sliced from.
    pub global_buffer: Bytes,
    /// CPU per WR of the IO monitor's `verb_convertor` (connection id in and out of wr_id/imm).
    pub convert_ns: f64,
    /// CPU per WR of `qp_map` (global-buffer slice lookup and address translation).
    pub qp_map_ns: f64,
    /// CPU of one rate decision per connection in it (`qp_sche`).
    pub solve_ns_per_conn: f64,
    /// The agent's software path costs time (true), not only counted CPU: its IO monitor and
    /// scheduler thread spends `convert_ns + qp_map_ns + post_ns` on each WR it fetches and
    /// posts (and a local decision's `qp_sche` time), its poller thread `poll_cqe_ns +
    /// convert_ns` on each completion it hands out; a WR or a completion waits while its
    /// thread is busy (`agent/thread.rs`).
    pub path_delay: bool,
    /// The scheduler's post of one WR to a shared QP (`ibv_post_send`: WQE and doorbell).
    pub post_ns: f64,
    /// The poller's processing of one completion taken off the shared CQ.
    pub poll_cqe_ns: f64,
    /// Who decides the rates: `"local"` (the host's own instance, exact), `"online"` (DRUM's
    /// distributed solver with the peers of two-sided traffic, over control QPs) or `"fabric"`
    /// (a coordinator's solve of every host's instance with the fabric's links).
    pub decider: DeciderKind,
    /// The online decider's parameters (used with `decider = "online"`).
    pub online: OnlineDecider,
    /// `decider = "fabric"`: the fraction of each fabric link's capacity the rates may use
    /// (headroom drains a queue built before the coordinator's rates arrived).
    pub link_utilization: f64,
}

impl Default for DrumConfig {
    fn default() -> Self {
        DrumConfig {
            mux_ratio: 5,
            pipe: PipeKind::Rc,
            ud_rto: Duration(100_000_000),
            pipe_depth: 4,
            pipe_bdp: 0.0,
            wqe_rate: 20e6,
            cqe_rate: 20e6,
            alpha: 1.0,
            beta: 0.0,
            weight: 1.0,
            qp_budget: 0,
            max_wait: 4,
            solve_interval: Duration(50_000_000),
            burst: 4,
            bounce_size: Bytes(1 << 20),
            recvs_per_pipe: 64,
            global_buffer: Bytes(1 << 40),
            convert_ns: 30.0,
            qp_map_ns: 20.0,
            solve_ns_per_conn: 50.0,
            // Off by default so that existing scenarios keep their numbers; the §V experiments
            // (experiments/drum/) turn it on.
            path_delay: false,
            // UCX's cost model of ConnectX through verbs, as braid-verbs' `CpuCost` (sources in
            // docs/middleware.md): a post 115 ns, a completion 20 ns.
            post_ns: 115.0,
            poll_cqe_ns: 20.0,
            decider: DeciderKind::Local,
            online: OnlineDecider::default(),
            link_utilization: 0.9,
        }
    }
}

impl DrumConfig {
    pub(crate) fn check(&self) -> Result<(), BuildError> {
        let bad = |k: &str, m: &str| Err(BuildError::new(k, m));
        if self.mux_ratio == 0 || self.mux_ratio > 4096 {
            return bad("mux_ratio", "expected 1 to 4096 connections per shared QP");
        }
        if !(self.link_utilization > 0.0 && self.link_utilization <= 1.0) {
            return bad("link_utilization", "expected a fraction in (0, 1]");
        }
        if self.pipe_depth == 0 {
            return bad("pipe_depth", "expected at least 1 work request");
        }
        if !(self.pipe_bdp.is_finite() && (0.0..=64.0).contains(&self.pipe_bdp)) {
            return bad(
                "pipe_bdp",
                "expected a gain from 0 (fixed pipe_depth) to 64 over the bandwidth-delay product",
            );
        }
        for (k, v) in [("wqe_rate", self.wqe_rate), ("cqe_rate", self.cqe_rate)] {
            if !(v.is_finite() && v > 0.0) {
                return bad(k, "expected a positive number of operations per second");
            }
        }
        // The solvers' range: beyond it x^(1-alpha) leaves double precision even in Mops.
        if !(self.alpha.is_finite()
            && self.alpha > 0.0
            && self.alpha <= braid_drum::problem::MAX_ALPHA)
        {
            return bad(
                "alpha",
                &format!(
                    "expected a number in (0, {}]",
                    braid_drum::problem::MAX_ALPHA
                ),
            );
        }
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return bad("beta", "expected a number >= 0");
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return bad("weight", "expected a positive number");
        }
        if self.solve_interval.0 == 0 {
            return bad("solve_interval", "expected a positive duration");
        }
        if self.burst == 0 {
            return bad("burst", "expected at least 1 work request");
        }
        if self.bounce_size.0 == 0 || self.bounce_size.0 > u32::MAX as u64 {
            return bad("bounce_size", "expected 1 B to 4 GiB");
        }
        if self.recvs_per_pipe == 0 {
            return bad("recvs_per_pipe", "expected at least 1");
        }
        if self.global_buffer.0 < (1 << 20) || self.global_buffer.0 > (1 << 56) {
            return bad("global_buffer", "expected 1 MiB to 64 PiB");
        }
        if self.pipe == PipeKind::Ud && ud::area(0, self.global_buffer.0).is_none() {
            return bad(
                "global_buffer",
                "expected at least 34 MiB with pipe = \"ud\" (the UD QP's buffers)",
            );
        }
        if self.ud_rto.0 == 0 {
            return bad("ud_rto", "expected a positive duration");
        }
        if self.bounce_size.0 > self.global_buffer.0 / 4 {
            return bad(
                "bounce_size",
                "expected at most a quarter of global_buffer (the receive buffers live in its upper half)",
            );
        }
        for (k, v) in [
            ("convert_ns", self.convert_ns),
            ("qp_map_ns", self.qp_map_ns),
            ("solve_ns_per_conn", self.solve_ns_per_conn),
            ("post_ns", self.post_ns),
            ("poll_cqe_ns", self.poll_cqe_ns),
        ] {
            // At most a second: beyond, a WR's cost in picoseconds would overflow a run's clock.
            if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                return bad(k, "expected a number of nanoseconds from 0 to 1e9");
            }
        }
        self.online.check()?;
        Ok(())
    }

    /// The host-wide part of the config (all but the tenant's weight): tenants of one host must
    /// agree on it.
    pub(crate) fn host_part(&self) -> DrumConfig {
        DrumConfig {
            weight: 1.0,
            ..self.clone()
        }
    }
}

/// Builds the tenant's layer and, on the host's first tenant, the agent.
pub(crate) fn build(
    cfg: &DrumConfig,
    mode: Mode,
    lock: (f64, f64),
    host: &mut HostCtx,
    tenant: TenantId,
    name: &'static str,
) -> Result<Box<dyn Middleware>, BuildError> {
    cfg.check()?;
    if tenant == AGENT {
        return Err(BuildError::new(
            "",
            format!("{name} is a tenant's layer; its agent joins the agent slot by itself"),
        ));
    }
    let Some(board) = host.board().cloned() else {
        return Err(BuildError::missing_cap(
            "an out-of-band board for its agents' shared QPs and memory slices (HostCtx::board)",
            name,
        ));
    };
    let me = host
        .caps()
        .local_addrs
        .first()
        .copied()
        .unwrap_or(host.host());
    let (state, first) =
        host.shared(|| HostState::new(cfg.host_part(), mode, lock, me, board.clone()));
    {
        let s = state.borrow();
        if s.cfg != cfg.host_part() || s.mode != mode || s.lock != lock {
            return Err(BuildError::new(
                "",
                format!(
                    "the tenants of a host must give {name} the same parameters (only `weight` may differ): one agent serves the host"
                ),
            ));
        }
    }
    if first {
        state.borrow_mut().shares = host.agent_shares();
        let ctx = DeciderCtx {
            board: board.clone(),
            host: me,
            caps: host.caps().clone(),
            fabric: if (cfg.decider == DeciderKind::Fabric
                || cfg.decider == DeciderKind::Online
                    && cfg.online.links == online::links::OnlineLinks::Fabric)
                && mode == Mode::Drum
            {
                fabric_model::ask(host)
            } else {
                None
            },
        };
        let decider = if mode == Mode::Drum {
            cfg.decider.factory(cfg).build(cfg, &ctx)?
        } else {
            Box::new(LocalSolve::new(cfg))
        };
        host.add_agent(Box::new(DrumAgent::new(state.clone(), decider, name)));
    }
    Ok(Box::new(DrumLayer::new(state, tenant, cfg.weight, name)))
}

impl MiddlewareFactory for DrumConfig {
    fn name(&self) -> &'static str {
        "drum"
    }
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        build(self, Mode::Drum, (0.0, 0.0), host, tenant, "drum")
    }
}

/// Wake token for a tenant's layer: completions are waiting in its inbox.
pub(crate) const WAKE_CQE: u64 = 0x4452_554D_0001;
/// Wake token for the agent: the pool or the connections changed.
pub(crate) const WAKE_AGENT: u64 = 0x4452_554D_0002;

#[cfg(test)]
mod tests;
