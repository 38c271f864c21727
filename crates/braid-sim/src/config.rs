//! Model parameters as they appear in scenario files: switches, NICs, transports, measurement.
//! Defaults are the values of the papers the models come from; every one can be set.

use braid_middleware::{MiddlewareEntry, MiddlewareSpec};
use braid_topo::units::{Bytes, Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::dcqcn::config::{DcqcnConfig, DcqcnNotify, DcqcnReaction};
pub use crate::nic::config::{AckPriority, ArbiterPolicy, NicConfig};
pub use crate::transport::config::{
    MpRdmaConfig, SyncMode, TransportConfig, TransportKind, TransportOverride,
};
// Switch and routing parameters live beside the code they configure (issue 29 step 1).
pub use crate::net::config::{
    EcnByPort, EcnByRate, EcnConfig, EcnCurve, PfcConfig, Scheduler, SwitchConfig,
};
pub use crate::world::config::{LinkEvent, RouteAddr, RouteSrc, StaticRoute};

fn yes() -> bool {
    true
}

/// `[host]`: the hosts' CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields, default)]
pub struct HostConfig {
    pub cpu: CpuConfig,
}

/// `[host.cpu]`: what verbs calls and middleware work cost a tenant's thread (nanoseconds), and
/// whether that time delays the tenant. Defaults (UCX's cost model): docs/middleware.md, "CPU cost".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CpuConfig {
    /// One post_send / post_recv call (a doorbell).
    pub post_ns: f64,
    /// One poll_cq call.
    pub poll_ns: f64,
    /// Each completion a poll returns.
    pub poll_cqe_ns: f64,
    /// Each work request a middleware builds (splits, injects).
    pub wr_build_ns: f64,
    /// Copy bandwidth in GB/s.
    pub copy_gbps: f64,
    /// Create/connect/modify/register calls.
    pub control_ns: f64,
    /// The tenant's thread is busy for the time it spends: its posts reach the NIC later. With
    /// false (the default, so that the calibrated anchors stay as they were), CPU time is only
    /// accounted and reported.
    pub delay: bool,
}

impl Default for CpuConfig {
    fn default() -> Self {
        let c = braid_verbs::CpuCost::default();
        CpuConfig {
            post_ns: c.post_ns,
            poll_ns: c.poll_ns,
            poll_cqe_ns: c.poll_cqe_ns,
            wr_build_ns: c.wr_build_ns,
            copy_gbps: c.copy_bytes_per_ns,
            control_ns: c.control_ns,
            delay: false,
        }
    }
}

impl CpuConfig {
    pub fn cost(&self) -> braid_verbs::CpuCost {
        braid_verbs::CpuCost {
            post_ns: self.post_ns,
            poll_ns: self.poll_ns,
            poll_cqe_ns: self.poll_cqe_ns,
            wr_build_ns: self.wr_build_ns,
            copy_bytes_per_ns: self.copy_gbps,
            control_ns: self.control_ns,
        }
    }
}

/// A queue to sample: "node:port" (node by name or id) or "all-fabric".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MeasureConfig {
    /// Sampling period of throughput and queue time series (0 = no time series).
    pub interval: Duration,
    /// Ports whose egress queue length is sampled: "node:port", "all-fabric", or
    /// `{ node = "tor0", peer = "spine1" }` (the ports of `node` that face `peer`).
    pub queues: Vec<QueueSpec>,
    /// Record one row per message (can be large).
    pub messages: bool,
    /// Record every PFC PAUSE/RESUME frame a port sends or receives (`pfc.parquet`).
    pub pfc: bool,
    /// The transports' summed counters (`mp_rdma_*`) and pooled out-of-order-degree percentiles
    /// in the run counters count from this time on (0 = the whole run): a steady-state figure
    /// without the start-up. The per-QP `transport` table stays whole-run.
    pub transport_from: Duration,
    /// The congestion controllers' state of chosen QPs over time (`cc.parquet`).
    pub cc: crate::trace::cc::CcConfig,
    /// Packet traces of chosen flows and ports (`trace.pcap`).
    pub pcap: crate::trace::pcap::PcapConfig,
}

impl Default for MeasureConfig {
    fn default() -> Self {
        Self {
            interval: Duration(10_000_000),
            queues: vec![],
            messages: true,
            pfc: true,
            transport_from: Duration(0),
            cc: Default::default(),
            pcap: Default::default(),
        }
    }
}

/// A sampled queue: "node:port" / "all-fabric", or a port named by the neighbour it faces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum QueueSpec {
    Name(String),
    Facing(QueueFacing),
}

/// The egress ports of `node` (name or numeric id) that lead to `peer`, as `switch.ecn.by_port`
/// names them: a port index depends on the topology builder, a neighbour does not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueFacing {
    pub node: String,
    pub peer: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MiddlewareConfig {
    /// The verbs stack every tenant gets, top to bottom: mechanism names (`"raw"`) or tables
    /// (`{ kind = "perf", sub_wr = "16KB" }`).
    pub default: Vec<MiddlewareEntry>,
    /// Per-host overrides, keyed by host index.
    pub per_host: std::collections::BTreeMap<String, Vec<MiddlewareEntry>>,
}

impl Default for MiddlewareConfig {
    fn default() -> Self {
        Self {
            default: vec![MiddlewareEntry(MiddlewareSpec::Raw(Default::default()))],
            per_host: Default::default(),
        }
    }
}

// The kinds, their configs and their factories are braid-apps' (`braid_apps::kinds`); the
// `[[apps]]` table below is the scenario's form of an entry, its sizes and durations parsed here.
pub use braid_apps::redis::RedisMix;
pub use braid_apps::{AppKind, AppMode};

/// A perftest-like application between two hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub kind: AppKind,
    /// Host index of the client (the side that posts).
    pub src: u32,
    pub dst: u32,
    pub size: Bytes,
    #[serde(default = "one")]
    pub qps: u32,
    /// Outstanding work requests per QP.
    #[serde(default = "sixteen")]
    pub tx_depth: u32,
    /// Messages per QP; with neither iterations nor duration, 1000.
    pub iterations: Option<u64>,
    pub duration: Option<Duration>,
    #[serde(default)]
    pub start: Duration,
    /// Use signaled completions every `cq_mod` messages (perftest --cq-mod).
    #[serde(default = "one")]
    pub cq_mod: u32,
    /// Bandwidth kinds (write_bw, send_bw, read_bw): WRs per ibv_post_send call (perftest -l),
    /// a list posted when it fits in `tx_depth`, its last WR signaled (`cq_mod` becomes the
    /// list length, as perftest does without --cq-mod). 1 = single posts.
    #[serde(default = "one")]
    pub post_list: u32,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// This tenant's verbs stack, top to bottom (default: its host's stack from `[middleware]`).
    pub middleware: Option<Vec<MiddlewareEntry>>,
    /// This tenant's transport: a partial `[transport]` table over its `src` host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportOverride>,
    /// Fraction of the messages (write_bw, send_bw) posted with the synchronise flag
    /// (`SendWr::fence`, MP-RDMA §3.4), drawn per message from the run's seed. 0 = none.
    #[serde(default)]
    pub sync_ratio: f64,
    /// Service level (traffic class) of this application's QPs, both ends: the priority of its
    /// packets in switches and its class at the NIC's arbiter (`nic.arbiter`). Default:
    /// `nic.priority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// kv: the fraction of requests that are GETs (0.95: read-intensive, 0.5: write-intensive).
    #[serde(default = "get_ratio")]
    pub get_ratio: f64,
    /// kv: the smallest value; sizes are uniform in [min_size, size] (default: all `size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<Bytes>,
    /// kv, redis: one-sided (default) or two-sided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<AppMode>,
    /// redis: the command mix (default set 0.3, get 0.6, ping 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<RedisMix>,
    /// redis: the largest WR a message is cut into (default 1 MiB, the DRUM agent's receive
    /// buffer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<Bytes>,
    /// Two-sided kv, redis: carry real bytes (tracked memory) and check every reply, byte for
    /// byte, against what the connection stored; a mismatch stops the connection (the flow never
    /// finishes). Costs memory: for small scenarios.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
    /// Attackers (rkey_thief, qp_hijacker): the index of the `[[apps]]` entry whose published
    /// endpoints (QP numbers, keys, addresses) they use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim: Option<u32>,
}

fn get_ratio() -> f64 {
    0.95
}

impl AppSpec {
    /// The entry's keys as the applications take them (bytes, picoseconds); its kind's config
    /// (`self.kind.config(&keys)`) reads and checks them.
    pub fn keys(&self) -> braid_apps::AppKeys {
        braid_apps::AppKeys {
            size: self.size.0,
            qps: self.qps,
            tx_depth: self.tx_depth,
            iterations: self.iterations,
            duration: self.duration.map(|d| d.0),
            start: self.start.0,
            cq_mod: self.cq_mod,
            post_list: self.post_list,
            priority: self.priority,
            sync_ratio: self.sync_ratio,
            get_ratio: self.get_ratio,
            min_size: self.min_size.map(|m| m.0),
            mode: self.mode,
            mix: self.mix.map(|m| m.mix()),
            chunk: self.chunk.map(|c| c.0),
            verify: self.verify,
            victim: self.victim,
        }
    }
}

fn one() -> u32 {
    1
}
fn sixteen() -> u32 {
    16
}
