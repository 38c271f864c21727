//! `share`: the QP-sharing baseline of DRUM's evaluation (the connection grouping of its
//! references [3], [4]): connections to the same host share one RC QP, `mux_ratio` of them
//! (5, as the paper sets it), with no scheduling of what they post or of their completions. The
//! shared QP is behind a lock: posts to it are serialised, each holding the lock for `hold_ns`
//! (writing the WQE and ringing the doorbell) plus `lock_ns` when another connection of the QP
//! has work outstanding (a contended hand-over of the lock between cores).
//!
//! It runs on the DRUM agent's machinery (pool, pipes, shared CQ, global buffer) in
//! [`super::Mode::Share`]: WRs go to the shared QP as soon as they are posted, completions to
//! the tenant as soon as they are polled.

use super::{build, DrumConfig, Mode};
use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{ kind = "share", ... }`; every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ShareConfig {
    /// Connections to one peer host per shared QP (the paper's SHARE: 5).
    pub mux_ratio: u32,
    /// The contended hand-over of the shared QP's lock, ns (assumed: a cache-line transfer
    /// between cores, ~100 ns).
    pub lock_ns: f64,
    /// The lock's critical section, ns: writing the WQE and ringing the doorbell (UCX's
    /// rc_verbs post, 75 + 40 ns, as `host.cpu.post_ns`).
    pub hold_ns: f64,
}

/// The largest `lock_ns` / `hold_ns` accepted: one second.
const MAX_LOCK_NS: f64 = 1e9;

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            mux_ratio: 5,
            lock_ns: 100.0,
            hold_ns: 115.0,
        }
    }
}

impl MiddlewareFactory for ShareConfig {
    fn name(&self) -> &'static str {
        "share"
    }
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        // Upper limit: a critical section of a second per post stops the QP's traffic; far
        // beyond it (~1.8e16 ns) the picosecond clock `now + hold` overflows u64, which wrapped
        // and *released* the lock.
        for (key, v) in [("lock_ns", self.lock_ns), ("hold_ns", self.hold_ns)] {
            if !(v.is_finite() && (0.0..=MAX_LOCK_NS).contains(&v)) {
                return Err(BuildError::new(
                    key,
                    format!("expected a number of nanoseconds in [0, 1e9], got {v}"),
                ));
            }
        }
        let cfg = DrumConfig {
            mux_ratio: self.mux_ratio,
            // Not used by SHARE (no rates, no depth limit), kept at DRUM's defaults.
            ..DrumConfig::default()
        };
        build(
            &cfg,
            Mode::Share,
            (self.lock_ns, self.hold_ns),
            host,
            tenant,
            "share",
        )
    }
}
