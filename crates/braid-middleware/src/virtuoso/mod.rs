//! `virtuoso`: software multipath RDMA over plain RC QPs (Tian et al., "A Novel Software-based
//! Multi-path RDMA Solution for Data Center Networks", `papers/virtuoso-software-multipath-rdma.md`).
//!
//! A tenant layer, no host agent. For every RC QP the application creates, the layer (the paper's
//! *QP manager*) creates one QP per virtual path, each bound to one of the host's addresses
//! (vNICs: `caps().local_addrs`, path `i` on address `i mod addresses`), so that ECMP on the
//! address or static routes that match the source address map paths to the fabric. Path 0 is the
//! QP the application sees (its number is the application's QP number). The out-of-band exchange
//! of the paths' parameters is the layer's: it publishes them on the run's board under keys
//! derived from (host, application QP number, path) when the QP is created, and connects them in
//! `connect_qp`, where it learns the peer's (host, QP). A peer without virtuoso is served as plain
//! RDMA on path 0.
//!
//! - **Decomposer** ([`layer`]): an `MP_WRITE` / `MP_READ` is split over the live paths by the
//!   load balancer ([`balance`]: equation 1, data_i = size × cap_i / Σ cap, or equal, or
//!   completion-driven), cut into WRs and posted round-robin; one completion per MP_ operation,
//!   in posting order, with the application's `wr_id`.
//! - **Reassembler**: zero copy. WRITE pieces land at their offsets. `MP_SEND` follows the
//!   paper's Fig. 2 hybrid: the receiver's layer advertises each application RECV's buffer
//!   (address, length, rkey) to the sender on a small control QP (the sender cannot otherwise
//!   know where a RECV's bytes go: the paper's receiver "negotiates the address locations"); the
//!   sender WRITEs the pieces there and ends with a zero-byte SEND on path 0, which consumes the
//!   RECV in order and carries the length. Small messages go as one SEND on path 0.
//! - **Path monitor** ([`balance::Estimator`]): capacities from probe WRITEs (`probe`, at least
//!   512 KB, on all paths at once, before the first operation and again after `reprobe` when
//!   idle) and from the completion times of large pieces.
//! - **Chunk-size congestion avoidance** (`lossy = true`, [`balance::Trunk`]): each path's WR size
//!   doubles while its WRs complete, falls back to the previous size after a `RetryExceeded` and
//!   then grows linearly; a path has one WR in flight at a time (the paper's Fig. 3b). A failed
//!   path QP is reset and reconnected (both ends, through the control QP) and its pieces are
//!   re-sent on the paths that are up.
//!
//! Parameters, measured tables and where braid differs from the paper: `docs/virtuoso.md`.

pub mod balance;
mod completion;
mod conn;
pub mod layer;
#[cfg(test)]
mod tests;
mod verbs;

pub use balance::{Balancer, Policy};
pub use layer::VirtuosoLayer;

use braid_units::{Bytes, Duration, Rate};
use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// At most this many paths per connection (counters are named per path).
pub const MAX_PATHS: u32 = 16;

/// The paper's lower bound on a probe transfer ("at least 512 KB").
pub const MIN_PROBE: u64 = 512 * 1024;

/// `{ kind = "virtuoso", ... }`. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct VirtuosoConfig {
    /// Virtual paths (QPs) per connection (1..=16). The paper evaluates 1 to 10.
    pub paths: u32,
    /// How a message is divided between paths: "capacity" (equation 1), "equal", or
    /// "completion" (a path takes the next chunk when one of its own completes).
    pub policy: Policy,
    /// Capacities of the paths, known in advance (the paper's "historical information" or an
    /// iPerf run); absent: probed.
    pub capacities: Option<Vec<Rate>>,
    /// Size of one probe transfer per path (at least 512 KB, as in the paper).
    pub probe: Bytes,
    /// Probe again when the connection is idle and the last probe is older than this; 0: only
    /// once, before the first operation.
    pub reprobe: Duration,
    /// Messages up to this size are not split: one WR on one path (a SEND on path 0).
    pub small: Bytes,
    /// Largest WR the decomposer builds when `lossy` is off (chunk size of "completion").
    pub chunk: Bytes,
    /// Chunks a path may have in flight under the "completion" policy.
    pub window: u32,
    /// Lossy fabric: per-path trunk size found by binary then linear increase, one WR in
    /// flight per path, failed chunks re-sent.
    pub lossy: bool,
    /// First trunk size (lossy).
    pub trunk_init: Bytes,
    /// Linear increase step after a back-off (lossy).
    pub trunk_step: Bytes,
    /// Largest trunk size (lossy).
    pub trunk_max: Bytes,
    /// `retry_cnt` of the path QPs (ibverbs 0..=7); absent: the application's. A lossy fabric
    /// and an RNIC with little resilience (the paper's ConnectX-3 Pro) give up early.
    pub retry_cnt: Option<u8>,
    /// Weight of a new completion-time sample in a path's capacity estimate (0, 1].
    pub ewma: f64,
}

impl Default for VirtuosoConfig {
    fn default() -> Self {
        VirtuosoConfig {
            paths: 4,
            policy: Policy::Capacity,
            capacities: None,
            probe: Bytes(MIN_PROBE),
            reprobe: Duration(0),
            small: Bytes(64 * 1024),
            chunk: Bytes(1 << 20),
            window: 2,
            lossy: false,
            trunk_init: Bytes(64 * 1024),
            trunk_step: Bytes(64 * 1024),
            trunk_max: Bytes(64 << 20),
            retry_cnt: None,
            ewma: 0.25,
        }
    }
}

impl VirtuosoConfig {
    /// Checks every key; the error names the first one at fault.
    pub fn validate(&self) -> Result<(), BuildError> {
        let bad = |k: &str, m: &str| Err(BuildError::new(k, m));
        if self.paths == 0 || self.paths > MAX_PATHS {
            return bad("paths", "expected a number of paths from 1 to 16");
        }
        if let Some(c) = &self.capacities {
            if c.len() != self.paths as usize {
                return bad(
                    "capacities",
                    "expected one rate per path (as many as `paths`)",
                );
            }
            if c.iter().any(|r| r.0 == 0) {
                return bad("capacities", "expected positive rates like \"10Gbps\"");
            }
        }
        if self.probe.0 < MIN_PROBE || self.probe.0 > u32::MAX as u64 {
            return bad(
                "probe",
                "expected a size from 512KiB to 4GiB (the paper probes with at least 512 KB)",
            );
        }
        if self.small.0 > u32::MAX as u64 {
            return bad("small", "expected a size below 4GiB");
        }
        if self.chunk.0 == 0 || self.chunk.0 > u32::MAX as u64 {
            return bad("chunk", "expected a size from 1B to 4GiB");
        }
        if self.window == 0 {
            return bad("window", "expected at least 1");
        }
        if self.trunk_init.0 == 0 || self.trunk_init.0 > self.trunk_max.0 {
            return bad("trunk_init", "expected a size from 1B to trunk_max");
        }
        if self.trunk_step.0 == 0 {
            return bad("trunk_step", "expected at least 1B");
        }
        if self.trunk_max.0 > u32::MAX as u64 {
            return bad("trunk_max", "expected a size below 4GiB");
        }
        if matches!(self.retry_cnt, Some(r) if r > 7) {
            return bad("retry_cnt", "expected 0 to 7 (ibverbs retry_cnt)");
        }
        if !(self.ewma > 0.0 && self.ewma <= 1.0) {
            return bad("ewma", "expected a weight in (0, 1]");
        }
        Ok(())
    }
}

impl MiddlewareFactory for VirtuosoConfig {
    fn name(&self) -> &'static str {
        "virtuoso"
    }
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        self.validate()?;
        let board = host.board().cloned().ok_or_else(|| {
            BuildError::new(
                "",
                "virtuoso needs the run's out-of-band board (HostCtx::board) to exchange its paths",
            )
        })?;
        if host.caps().local_addrs.is_empty() {
            return Err(BuildError::missing_cap(
                "at least one local address",
                "virtuoso",
            ));
        }
        Ok(Box::new(VirtuosoLayer::new(
            self.clone(),
            tenant,
            host.caps().clone(),
            board,
        )))
    }
}
