//! `perf`: PeRF, the Preemption-enabled RDMA Framework (Lee et al., USENIX ATC '24).
//!
//! One host agent (in the host's agent slot, tenant 0) and one layer per tenant, sharing the
//! host's [`state::HostState`]:
//!
//! - the **layer** ([`layer::PerfLayer`]) intercepts its tenant's verbs. It creates the tenant's
//!   QPs cross-channel, keeps each QP's work in a software queue, and posts it to the NIC: large
//!   WRITEs (and READs) are split into sub-WRs of `sub_wr` bytes followed by 0_WAITs (WAITs on a
//!   private, never-completing CQ with count 0: they complete at once, but each takes a scheduling
//!   turn of the NIC) while a delay-sensitive or message-intensive tenant is active on the host
//!   (the Large Message Scheduling Engine); it hides the intermediate completions (one completion
//!   per signaled application WR, with the application's `wr_id`); it lets only the QPs its agent
//!   allows post (the Multi-QP Scheduling Engine's PAUSE/RESUME, in software, or in the NIC with `hw_pause`), rotating them;
//!   and it applies the optional token bucket.
//! - the **agent** ([`agent::PerfAgent`]) samples every tenant's send-queue depth every
//!   `sample_interval` and classifies the tenants ([`classify`]), sets the host's active-QP limit
//!   every `qp_limit_interval`, deals the QPs to multi-QP tenants, rotates bandwidth tenants when
//!   there are many, and wakes the layers whose allowance changed.
//!
//! Parameters, defaults and their sources, and where braid differs from the artifact:
//! `docs/perf.md`.

pub mod agent;
mod bucket;
pub mod classify;
mod hwpause;
pub mod layer;
mod mqse;
mod queue;
pub mod read;
pub mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_net;
#[cfg(test)]
mod tests_read;

pub use classify::Class;
pub use layer::PerfLayer;

use braid_units::{Bytes, Duration, Rate};
use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{ kind = "perf", ... }`. Every key is optional; the defaults are the published values
/// (PeRF's README and artifact, `docs/perf.md`). The agent's keys (classification, active-QP
/// limit, rotation) are taken from the first tenant of a host whose stack builds `perf`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PerfConfig {
    /// Sub-WR (chunk) size large messages are split into (PERF_CHUNK_SIZE, README: 16384).
    pub sub_wr: Bytes,
    /// One 0_WAIT is posted per this many bytes of large-message data sent (PERF_DUMMY_FACTOR,
    /// README: 1024), so `sub_wr / zero_wait_unit` = 16 0_WAITs follow each 16 KiB sub-WR.
    pub zero_wait_unit: Bytes,
    /// A tenant that posts a non-READ message of at least this size is bandwidth-intensive, and
    /// messages from this size up are scheduled by the LMSE (PERF_LARGE_FLOW = 1024).
    pub large_msg: Bytes,
    /// How often the agent samples each tenant's deepest send queue (5 ms).
    pub sample_interval: Duration,
    /// Over how long the samples are kept (1 s: 200 samples).
    pub window: Duration,
    /// A tenant stays delay-sensitive while its deepest send queue stays below this many WRs
    /// (DELAY_SEN_NUM_TH = 5) ...
    pub delay_depth: u32,
    /// ... and below this many bytes outstanding (DELAY_SEN_BYTES_TH = 1024).
    pub delay_bytes: Bytes,
    /// How often the agent recomputes the active-QP limit and deals QPs (10 ms).
    pub qp_limit_interval: Duration,
    /// QNum_capa: QPs of small messages that saturate the NIC's message rate (9 on a ConnectX-6).
    pub qp_capacity: u32,
    /// The fraction of the link the limit budgets for (0.7).
    pub link_fraction: f64,
    /// Messages per second one QP can issue (12.4 Mpps on a ConnectX-6).
    pub qp_msg_rate: f64,
    /// The link bandwidth the limit is computed from; absent: the NIC's line rate (caps()).
    pub link_rate: Option<Rate>,
    /// A multi-QP tenant's leading QP hands over after this many application WRs (128) ...
    pub rotate_wrs: u32,
    /// ... or this many bytes (1,024,000) ...
    pub rotate_bytes: Bytes,
    /// ... or, with other QPs waiting, after holding its turn this long (timed release, 1 ms).
    pub release_after: Duration,
    /// An allowed QP is swapped with a paused one after this long (ALLOWED_QP_TIME_TH, 10 ms).
    pub allowance: Duration,
    /// With more than this many active bandwidth tenants and a delay/message tenant active, only
    /// one bandwidth tenant posts at a time (4) ...
    pub max_bw_tenants: u32,
    /// ... each for this long in turn (BTENANT_ENABLE_TIME, 100 ms).
    pub bw_rotation: Duration,
    /// This tenant's weight: a bandwidth tenant of weight w posts 1/w of the 0_WAITs, and holds
    /// its turn w times as long when bandwidth tenants are rotated (1).
    pub weight: f64,
    /// Token bucket: at most this many bytes per second from this tenant (absent: no bucket).
    pub rate: Option<Rate>,
    /// The token bucket's depth (TB_BURST_SIZE, 4,000,000 B).
    pub burst: Bytes,
    /// braid: at most this many bytes of large messages in a QP's hardware send queue; the rest
    /// waits in the layer's software queue, so that splitting takes effect promptly when a small
    /// tenant arrives (the artifact's daemon posts at most 9 large WRs per QP per pass).
    pub sq_bytes: Bytes,
    /// One sub-WR in this many is signaled, to free send-queue slots and refill (8).
    pub signal_every: u32,
    /// PAUSE/RESUME in hardware, as the artifact: paused QPs wait in the NIC behind a WAIT
    /// released through a managed loopback QP's SEND_ENABLE chain (`hwpause`). Default false:
    /// braid's software PAUSE (the layer holds a paused QP's WRs). Falls back to software when
    /// the managed QP cannot be created.
    pub hw_pause: bool,
    /// The slides' large-READ conversion (braid's design, `docs/perf.md`): a READ of at least
    /// `large_msg` to a host whose PeRF agent answers on the board becomes a request that the
    /// holder's layer serves with WRITEs under its own LMSE. Default true (the slides' PeRF;
    /// READs to hosts without PeRF stay sub-READs). Needs a board (`HostCtx::board`).
    pub read_convert: bool,
    /// A converted READ's transport timeout, per attempt: the requester gives up on the
    /// holder's answer after `(retry_cnt + 1) x read_timeout` (the QP's `retry_cnt`), plus the
    /// READ's length at line rate, and the READ completes RetryExceeded with the QP in Error,
    /// as a real READ to a dead peer. ibverbs' QP timeout attribute is 4.096 us x 2^t; the
    /// default is t = 14 (67.1 ms, what perftest and most RC applications set), so a QP of
    /// `retry_cnt` 7 waits 537 ms as its NIC would. (`Caps` carries no NIC timeout to derive it
    /// from.) The length term stands for the per-packet timer a real READ restarts on each
    /// response.
    pub read_timeout: Duration,
}

impl Default for PerfConfig {
    fn default() -> Self {
        PerfConfig {
            sub_wr: Bytes(16_384),
            zero_wait_unit: Bytes(1024),
            large_msg: Bytes(1024),
            sample_interval: Duration(5_000_000_000),
            window: Duration(1_000_000_000_000),
            delay_depth: 5,
            delay_bytes: Bytes(1024),
            qp_limit_interval: Duration(10_000_000_000),
            qp_capacity: 9,
            link_fraction: 0.7,
            qp_msg_rate: 12.4e6,
            link_rate: None,
            rotate_wrs: 128,
            rotate_bytes: Bytes(1_024_000),
            release_after: Duration(1_000_000_000),
            allowance: Duration(10_000_000_000),
            max_bw_tenants: 4,
            bw_rotation: Duration(100_000_000_000),
            weight: 1.0,
            rate: None,
            burst: Bytes(4_000_000),
            sq_bytes: Bytes(2 << 20),
            signal_every: 8,
            hw_pause: false,
            read_convert: true,
            read_timeout: Duration(67_108_864_000),
        }
    }
}

impl PerfConfig {
    /// Checks every key; the error names the first one at fault.
    pub fn validate(&self) -> Result<(), BuildError> {
        let bad = |k: &str, m: &str| Err(BuildError::new(k, m));
        if self.sub_wr.0 == 0 || self.sub_wr.0 > u32::MAX as u64 {
            return bad("sub_wr", "expected a size from 1 B to 4 GiB");
        }
        if self.zero_wait_unit.0 == 0 {
            return bad("zero_wait_unit", "expected at least 1 B");
        }
        if self.zero_wait_unit.0 > self.sub_wr.0 {
            return bad(
                "zero_wait_unit",
                "expected at most sub_wr (at least one 0_WAIT per sub-WR)",
            );
        }
        if self.sub_wr.0 / self.zero_wait_unit.0 > 4096 {
            return bad("zero_wait_unit", "expected at most 4096 0_WAITs per sub-WR");
        }
        if self.sample_interval.0 == 0 {
            return bad("sample_interval", "expected a positive duration");
        }
        if self.window.0 < self.sample_interval.0 {
            return bad("window", "expected at least sample_interval");
        }
        if self.window.0 / self.sample_interval.0 > 100_000 {
            return bad(
                "window",
                "expected at most 100,000 samples (window / sample_interval)",
            );
        }
        if self.qp_limit_interval.0 == 0 {
            return bad("qp_limit_interval", "expected a positive duration");
        }
        if self.qp_capacity == 0 {
            return bad("qp_capacity", "expected at least 1");
        }
        if !(self.link_fraction > 0.0 && self.link_fraction <= 1.0) {
            return bad("link_fraction", "expected a fraction in (0, 1]");
        }
        if !(self.qp_msg_rate.is_finite() && self.qp_msg_rate > 0.0) {
            return bad(
                "qp_msg_rate",
                "expected a positive number of messages per second",
            );
        }
        if self.link_rate == Some(Rate(0)) {
            return bad("link_rate", "expected a positive rate");
        }
        if self.rotate_wrs == 0 {
            return bad("rotate_wrs", "expected at least 1");
        }
        if self.rotate_bytes.0 == 0 {
            return bad("rotate_bytes", "expected at least 1 B");
        }
        if self.release_after.0 == 0 {
            return bad("release_after", "expected a positive duration");
        }
        if self.allowance.0 == 0 {
            return bad("allowance", "expected a positive duration");
        }
        if self.bw_rotation.0 == 0 {
            return bad("bw_rotation", "expected a positive duration");
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return bad("weight", "expected a positive number");
        }
        if self.rate == Some(Rate(0)) {
            return bad(
                "rate",
                "expected a positive rate (leave it out for no bucket)",
            );
        }
        if self.burst.0 == 0 {
            return bad("burst", "expected at least 1 B");
        }
        if self.sq_bytes.0 < self.sub_wr.0 {
            return bad("sq_bytes", "expected at least sub_wr");
        }
        if self.read_timeout.0 == 0 {
            return bad("read_timeout", "expected a positive duration");
        }
        if self.signal_every == 0 {
            return bad("signal_every", "expected at least 1");
        }
        Ok(())
    }

    /// 0_WAITs after each `sub_wr` bytes for a tenant of this config's weight.
    pub fn zero_waits_per_sub_wr(&self) -> u32 {
        let n = (self.sub_wr.0 / self.zero_wait_unit.0) as f64 / self.weight;
        n.round().max(0.0) as u32
    }
}

impl MiddlewareFactory for PerfConfig {
    fn name(&self) -> &'static str {
        "perf"
    }
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        self.validate()?;
        if !host.caps().cross_channel {
            return Err(BuildError::missing_cap(
                "cross-channel WAIT/SEND_ENABLE work requests (for its 0_WAITs)",
                "perf",
            ));
        }
        let caps = host.caps().clone();
        let cfg = self.clone();
        let (shared, first) = host.shared(|| state::HostState::new(cfg, &caps));
        if first {
            // The conversion needs the board to find the peers' agents (and the host's first
            // tenant's `read_convert`, as the agent's other keys).
            let board = host.board().cloned().filter(|_| self.read_convert);
            shared.borrow_mut().read.enabled = board.is_some();
            host.add_agent(Box::new(agent::PerfAgent::new(shared.clone(), board)));
        }
        shared.borrow_mut().add_tenant(tenant, self.weight);
        Ok(Box::new(PerfLayer::new(self.clone(), tenant, shared)))
    }
}
