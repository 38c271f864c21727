//! `justitia`: Justitia (Zhang, Tan, Stephens, Chowdhury, NSDI '22), software multi-tenancy for
//! RDMA by splitting and pacing bandwidth tenants against a latency target, and its relaxed
//! variant Justitia_R (PeRF's baseline: the same mechanism with a 15 µs target).
//!
//! The mechanism is host-scoped, as Justitia's pacer daemon is:
//! - one **agent** per host ([`agent`], tenant 0's stack, the pacer) owns the token bucket whose
//!   rate is the bandwidth tenants' *virtual link capacity*, a **reference flow** (back-to-back
//!   signaled inline 16 B WRITEs on its own RC QP, in the latency tenants' traffic class, to the
//!   pacer of the host the bandwidth tenants send to) whose windowed 99th-percentile latency it
//!   compares with the target, halving the capacity on a miss (never below the bandwidth
//!   tenants' share) and adding to it when the target is met; it also tells its peers how many bandwidth and latency tenants it has (Justitia's
//!   receiver-side `INFO` messages);
//! - one **layer** per tenant ([`layer`], the patched libmlx5) classifies its tenant, splits a
//!   bandwidth tenant's messages into chunks (5,000 B while latency tenants are present, 1 MB
//!   otherwise), posts each chunk only with a token, hides the chunks' completions (one
//!   completion per signaled application WR, with its `wr_id`), gives a throughput tenant a batch
//!   of 1,800 WRs per token, and passes a latency tenant's WRs through untouched.
//!
//! Justitia_R is `{ kind = "justitia", target = "15us" }`: one kind, the target is a parameter.
//! Parameters, defaults, sources and where braid differs: `docs/justitia.md`.

pub mod agent;
pub mod layer;
mod window;

use braid_units::{Bytes, Duration, Rate};
use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, TenantId, AGENT};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use agent::{HostState, JustitiaAgent};
pub use layer::JustitiaLayer;

/// What a tenant is to Justitia (its `isSmall`: 0 bandwidth, 1 latency, 2 throughput).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Inferred from what the tenant posts: bandwidth once it posts a data WR larger than
    /// `large_message`, latency otherwise (never throughput: declare it).
    Auto,
    /// Small messages, never paced, never split.
    Latency,
    /// Large messages: split into chunks and paced, one token per chunk.
    Bandwidth,
    /// Many small messages: paced by batches of `batch_ops` WRs per token.
    Throughput,
}

/// `{ kind = "justitia", ... }`; every key is optional (defaults: the published values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct JustitiaConfig {
    /// The reference flow's tail-latency target (Justitia: 2 µs; Justitia_R: 15 µs).
    pub target: Duration,
    /// Which percentile of the window is compared with the target.
    pub percentile: f64,
    /// Reference-flow samples the percentile is taken over (a sliding window).
    pub window: u32,
    /// Chunk size while latency tenants are present (locally or at the receiver).
    pub small_chunk: Bytes,
    /// Chunk size otherwise (one token per such chunk).
    pub big_chunk: Bytes,
    /// Depth of the token bucket (tokens outstanding at most).
    pub max_tokens: u32,
    /// WRs a throughput tenant may post per token.
    pub batch_ops: u32,
    /// Additive increase of the virtual link capacity per reference sample that meets the
    /// target (Justitia: 1 MB/s).
    pub increase: Rate,
    /// Payload of a reference WRITE (inline, signaled).
    pub probe_size: Bytes,
    /// Time from one reference WRITE to the next; 0 = back to back (the next is posted when the
    /// previous completes).
    pub probe_interval: Duration,
    /// The line rate capacities are fractions of; absent: the NIC's port rate.
    pub line_rate: Option<Rate>,
    /// All latency tenants count as one when computing the bandwidth tenants' share
    /// (Justitia's `TREAT_L_AS_ONE`): the floor is `B / (B + 1)` of the line rate, else
    /// `B / (B + L)`.
    pub latency_as_one: bool,
    /// This tenant's class; `auto` infers it.
    pub class: Class,
    /// With `class = "auto"`: a data WR larger than this makes its tenant a bandwidth tenant.
    pub large_message: Bytes,
    /// A split WR's chunks are posted unsignaled but for one in `signal_every` (and the last),
    /// so that unsignaled chunks do not fill the send queue; their completions are hidden.
    pub signal_every: u32,
    /// How long the host's pacer waits for a peer's pacer on the run's board before giving up
    /// on that peer (it then runs without the peer's counts). Real hosts meeting over TCP under
    /// emulation need seconds.
    pub board_patience: Duration,
}

impl Default for JustitiaConfig {
    fn default() -> Self {
        JustitiaConfig {
            target: Duration(2_000_000),
            percentile: 0.99,
            window: 1000,
            small_chunk: Bytes(5000),
            big_chunk: Bytes(1_000_000),
            max_tokens: 5,
            batch_ops: 1800,
            increase: Rate(8_000_000),
            probe_size: Bytes(16),
            probe_interval: Duration(0),
            line_rate: None,
            latency_as_one: true,
            class: Class::Auto,
            large_message: Bytes(2048),
            signal_every: 64,
            board_patience: Duration(100_000_000_000),
        }
    }
}

impl JustitiaConfig {
    fn check(&self) -> Result<(), BuildError> {
        let bad = |k: &str, m: &str| Err(BuildError::new(k, m));
        if self.target.0 == 0 {
            return bad("target", "expected a positive duration");
        }
        if !(self.percentile > 0.0 && self.percentile <= 1.0) {
            return bad("percentile", "expected a fraction in (0, 1]");
        }
        if self.window == 0 {
            return bad("window", "expected at least 1 sample");
        }
        if self.small_chunk.0 == 0 || self.small_chunk.0 > u32::MAX as u64 {
            return bad("small_chunk", "expected 1 B to 4 GiB");
        }
        if self.big_chunk.0 < self.small_chunk.0 || self.big_chunk.0 > u32::MAX as u64 {
            return bad(
                "big_chunk",
                "expected at least small_chunk and at most 4 GiB",
            );
        }
        if self.max_tokens == 0 {
            return bad("max_tokens", "expected at least 1");
        }
        if self.batch_ops == 0 {
            return bad("batch_ops", "expected at least 1");
        }
        if self.probe_size.0 > 256 {
            return bad(
                "probe_size",
                "expected at most 256 B (the probe is sent inline)",
            );
        }
        if self.line_rate == Some(Rate(0)) {
            return bad("line_rate", "expected a positive rate");
        }
        if self.signal_every == 0 {
            return bad("signal_every", "expected at least 1");
        }
        Ok(())
    }
}

impl MiddlewareFactory for JustitiaConfig {
    fn name(&self) -> &'static str {
        "justitia"
    }

    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        self.check()?;
        if tenant == AGENT {
            return Err(BuildError::new(
                "",
                "justitia is a tenant's layer; its agent joins the agent slot by itself",
            ));
        }
        let Some(board) = host.board().cloned() else {
            return Err(BuildError::missing_cap(
                "an out-of-band board for its pacers' reference connections (HostCtx::board)",
                "justitia",
            ));
        };
        let line = self.line_rate.map_or(host.caps().line_rate_bps, |r| r.0);
        if line == 0 {
            return Err(BuildError::missing_cap(
                "a known line rate (caps.line_rate_bps)",
                "justitia",
            ));
        }
        let me = host
            .caps()
            .local_addrs
            .first()
            .copied()
            .unwrap_or(host.host());
        let (state, first) = host.shared(|| HostState::new(self.clone(), line, me));
        {
            let s = state.borrow();
            if s.cfg() != self {
                // One pacer per host: its tenants must agree on its parameters (their class
                // may differ).
                let mut mine = self.clone();
                mine.class = s.cfg().class;
                if &mine != s.cfg() {
                    return Err(BuildError::new(
                        "",
                        "the tenants of a host must give justitia the same parameters (only `class` may differ): one pacer serves the host",
                    ));
                }
            }
        }
        if first {
            host.add_agent(Box::new(JustitiaAgent::new(state.clone(), board)));
        }
        Ok(Box::new(JustitiaLayer::new(state, self, tenant)))
    }
}

/// Wake tokens (travel up a tenant's stack; the justitia layer consumes them).
pub(crate) const WAKE_GRANT: u64 = 0x4A55_5354_0001;
pub(crate) const WAKE_SELF: u64 = 0x4A55_5354_0002;
/// Wake token for the agent: a layer needs tokens or has a new peer.
pub(crate) const WAKE_AGENT: u64 = 0x4A55_5354_0003;

#[cfg(test)]
mod tests;
