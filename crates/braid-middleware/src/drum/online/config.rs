//! `online = { ... }`: the online decider's parameters, checked, and the factory that builds
//! the decider from them.

use super::*;

/// `online = { ... }` in a drum config: the online decider's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OnlineDecider {
    /// The coordinator window: how long a half-round waits for its peers' values before it
    /// goes on with the last round's.
    pub window: Duration,
    /// ADMM over-relaxation, in [1, 2).
    pub relax: f64,
    /// Penalty of a row with two-sided senders: this times the median curvature of the host's
    /// rows.
    pub rho_scale: f64,
    /// Relative tolerance of the solver's stop test.
    pub eps: f64,
    /// Settled rounds in a row (own and neighbours') before a host goes idle.
    pub quiet_rounds: u32,
    /// Rounds of one solve before it stops unsettled.
    pub max_rounds: u32,
    /// Re-solve a changed instance from the current state (false: from scratch).
    pub warm: bool,
    /// Cap each connection's rate at its measured demand (false: every connection unbounded).
    pub demand: bool,
    /// A measured demand is applied only when it moved by more than this fraction.
    pub demand_tolerance: f64,
    /// Compute the gap to the offline optimum of the same instance every round (needs every
    /// agent of the run in one process: a simulation and test aid).
    pub report_gap: bool,
    /// What carries the solver's messages: `"rc"` (an RC QP per peer host; the fabric's losses
    /// are retransmitted) or `"ud"` (one UD QP per agent; a message the fabric drops is lost).
    pub ctrl: CtrlKind,
    /// Probability that a control message is dropped before it is posted: an explicit loss
    /// injection, on top of whatever the fabric loses (with either `ctrl`).
    pub ctrl_loss: f64,
    /// Seed of the loss injection (mixed with the host's address).
    pub seed: u64,
    /// Size of one control message slot (the largest message).
    pub slot: Bytes,
    /// Receive (and send) slots per control QP.
    pub ctrl_recvs: u32,
    /// The CPU a round of the solver costs (the agent's `solver` component).
    pub cpu: SolverCpu,
    /// `"fabric"`: the fabric's links in the instance, their rows kept by owner hosts
    /// ([`links`]); `"none"`: the NICs' capacities only.
    pub links: links::OnlineLinks,
    /// With `path_delay`: the solver's rounds take time (one after the other at `cpu`'s cost;
    /// their rates and messages held until computed) on the thread `thread` names. On by
    /// default since the solver has a thread of its own (issue 31 §2, docs/drum-agent.md);
    /// false: the rounds cost CPU only, their outputs leave at once.
    pub timed_rounds: bool,
    /// Where the timed rounds run: `"own"` (default: a thread of the solver's own, a CPU
    /// resource beside the IO monitor and scheduler's, so tenants' WRs never wait behind a
    /// round) or `"scheduler"` (the scheduler's thread: WRs wait behind the rounds).
    pub thread: SolverThread,
}

/// `online.thread`: which of the agent's threads runs the solver's timed rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SolverThread {
    #[default]
    Own,
    Scheduler,
}

impl Default for OnlineDecider {
    fn default() -> Self {
        let o = OnlineConfig::default();
        OnlineDecider {
            window: Duration(o.window_ns * 1000),
            relax: o.relax,
            rho_scale: o.rho_scale,
            eps: o.eps,
            quiet_rounds: o.quiet_rounds,
            max_rounds: o.max_rounds,
            warm: true,
            demand: true,
            demand_tolerance: 0.25,
            report_gap: false,
            ctrl: CtrlKind::Rc,
            ctrl_loss: 0.0,
            seed: 1,
            slot: Bytes(4096),
            ctrl_recvs: 32,
            cpu: SolverCpu::default(),
            links: links::OnlineLinks::None,
            timed_rounds: true,
            thread: SolverThread::Own,
        }
    }
}

impl OnlineDecider {
    pub(super) fn solver_config(&self) -> OnlineConfig {
        OnlineConfig {
            window_ns: (self.window.0 / 1000).max(1),
            relax: self.relax,
            rho_scale: self.rho_scale,
            eps: self.eps,
            quiet_rounds: self.quiet_rounds,
            max_rounds: self.max_rounds,
            ..OnlineConfig::default()
        }
    }

    pub(crate) fn check(&self) -> Result<(), BuildError> {
        let bad = |k: &str, m: String| Err(BuildError::new(format!("online.{k}"), m));
        if self.window.0 < 1000 {
            return bad("window", "expected a duration of at least 1ns".into());
        }
        if let Err(e) = self.solver_config().validate() {
            return bad(&e.param, e.msg);
        }
        if !(self.demand_tolerance.is_finite() && self.demand_tolerance >= 0.0) {
            return bad("demand_tolerance", "expected a fraction >= 0".into());
        }
        if !(self.ctrl_loss.is_finite() && (0.0..1.0).contains(&self.ctrl_loss)) {
            return bad("ctrl_loss", "expected a probability in [0, 1)".into());
        }
        if !(64..=1 << 20).contains(&self.slot.0) {
            return bad("slot", "expected 64 B to 1 MiB".into());
        }
        if !(1..=4096).contains(&self.ctrl_recvs) {
            return bad("ctrl_recvs", "expected 1 to 4096".into());
        }
        self.cpu.check()?;
        if self.report_gap && self.links == links::OnlineLinks::Fabric {
            return bad(
                "report_gap",
                "not available with links = \"fabric\" (the gap book's offline cut has no links)"
                    .into(),
            );
        }
        Ok(())
    }
}

impl DeciderFactory for OnlineDecider {
    fn build(
        &self,
        cfg: &DrumConfig,
        ctx: &DeciderCtx,
    ) -> Result<Box<dyn RateDecider>, BuildError> {
        self.check()?;
        if !ctx.caps.data_tracking {
            return Err(BuildError::missing_cap(
                "memory whose contents travel (Caps::data_tracking), for its control messages",
                "drum's online decider",
            ));
        }
        if self.links == links::OnlineLinks::Fabric && ctx.fabric.is_none() {
            return Err(BuildError::new(
                "online.links",
                "\"fabric\" needs a backend that knows the fabric's links (the simulator); use \"none\"",
            ));
        }
        Ok(Box::new(OnlineSolve::new(cfg, ctx)))
    }
}
