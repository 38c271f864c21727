//! Model parameters as they appear in scenario files: switches, NICs, transports, measurement.
//! Defaults are the values of the papers the models come from; every one can be set.

use braid_middleware::{MiddlewareEntry, MiddlewareSpec};
use braid_topo::units::{Bytes, Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::nic::config::{AckPriority, ArbiterPolicy, NicConfig};
pub use crate::transport::irn::{IrnConfig, Recovery};

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// Strict priority: queue 0 first.
    #[default]
    Strict,
    /// Deficit weighted round robin with per-priority quanta.
    Dwrr,
}

/// A RED/ECN marking curve (DCTCP-style step when kmin = kmax).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EcnCurve {
    pub kmin: Bytes,
    pub kmax: Bytes,
    pub pmax: f64,
}

/// An ECN curve for ports of one link rate (HPCC's KMIN_MAP/KMAX_MAP/PMAX_MAP).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EcnByRate {
    pub rate: Rate,
    pub kmin: Bytes,
    pub kmax: Bytes,
    pub pmax: f64,
}

/// An ECN curve for one switch egress port: the port of `node` whose link leads to `peer` (every
/// such port, if the two are joined by parallel links). Overrides `by_rate` and the default; e.g.
/// the MP-RDMA paper's mis-configured path (§5.2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EcnByPort {
    /// The switch whose egress queue marks (name or numeric node id).
    pub node: String,
    /// The neighbour that port leads to.
    pub peer: String,
    pub kmin: Bytes,
    pub kmax: Bytes,
    pub pmax: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EcnConfig {
    pub enabled: bool,
    /// DCQCN paper (Zhu et al. 2015): Kmin 5 KB, Kmax 200 KB, Pmax 1%.
    pub kmin: Bytes,
    pub kmax: Bytes,
    pub pmax: f64,
    /// Curves for specific port rates; ports of other rates use kmin/kmax/pmax.
    pub by_rate: Vec<EcnByRate>,
    /// Curves for single egress ports (applied after `by_rate`).
    pub by_port: Vec<EcnByPort>,
}

impl Default for EcnConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            kmin: Bytes(5_000),
            kmax: Bytes(200_000),
            pmax: 0.01,
            by_rate: vec![],
            by_port: vec![],
        }
    }
}

impl EcnConfig {
    pub fn curve_for(&self, rate_bps: u64) -> EcnCurve {
        self.by_rate
            .iter()
            .find(|c| c.rate.0 == rate_bps)
            .map(|c| EcnCurve {
                kmin: c.kmin,
                kmax: c.kmax,
                pmax: c.pmax,
            })
            .unwrap_or(EcnCurve {
                kmin: self.kmin,
                kmax: self.kmax,
                pmax: self.pmax,
            })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PfcConfig {
    pub enabled: bool,
    /// Static XOFF threshold per ingress queue (when dynamic = false).
    pub xoff: Bytes,
    /// Static XON threshold per ingress queue (when dynamic = false).
    pub xon: Bytes,
    /// Dynamic threshold (the default, as in switch ASICs and HPCC ns-3):
    /// XOFF = alpha × (shared pool − shared bytes in use), XON = XOFF − xon_offset.
    pub dynamic: bool,
    pub alpha: f64,
    pub xon_offset: Bytes,
    /// Reserved per ingress port for bytes still arriving after a PAUSE. Absent = derived from
    /// the link: 2 × (bandwidth × delay) + 3 maximum-size frames, enough to stay lossless.
    pub headroom: Option<Bytes>,
}

impl Default for PfcConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            xoff: Bytes(200_000),
            xon: Bytes(180_000),
            dynamic: true,
            alpha: 0.125,
            xon_offset: Bytes(2_000),
            headroom: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// Shared buffer per switch.
    pub buffer: Bytes,
    /// Priority queues per egress port (1–8).
    pub priorities: u8,
    pub scheduler: Scheduler,
    /// DWRR quantum per priority in bytes (default 1500 each).
    pub dwrr_quantum: Vec<u32>,
    /// Priorities protected by PFC; the others are lossy (tail drop).
    pub lossless: Vec<u8>,
    /// Mixed with each switch's id to seed its ECMP hash.
    pub ecmp_seed: u64,
    pub ecn: EcnConfig,
    pub pfc: PfcConfig,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        Self {
            buffer: Bytes(12_000_000),
            priorities: 8,
            scheduler: Scheduler::Strict,
            dwrr_quantum: vec![],
            lossless: vec![3],
            ecmp_seed: 0,
            ecn: EcnConfig::default(),
            pfc: PfcConfig::default(),
        }
    }
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

/// DCQCN reaction point / notification point parameters (Zhu et al., SIGCOMM'15). Read and
/// written as [`crate::dcqcn::defaults::DcqcnKeys`], so that the keys a scenario set are known:
/// the others follow `preset` (by default the QP's link rate; [`DcqcnConfig::for_link`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    from = "crate::dcqcn::defaults::DcqcnKeys",
    into = "crate::dcqcn::defaults::DcqcnKeys"
)]
pub struct DcqcnConfig {
    /// EWMA gain of alpha.
    pub g: f64,
    /// Alpha decays every alpha_timer without a CNP.
    pub alpha_timer: Duration,
    /// Rate-increase timer T.
    pub rate_timer: Duration,
    /// Rate-increase byte counter B (0 disables it; the timer then drives all stages).
    pub byte_counter: Bytes,
    /// F: stages of fast recovery before additive increase.
    pub fast_recovery_steps: u32,
    pub rate_ai: Rate,
    pub rate_hai: Rate,
    pub min_rate: Rate,
    /// At most one rate decrease per interval.
    pub rate_decrease_interval: Duration,
    /// Notification point: at most one CNP per QP per interval.
    pub cnp_interval: Duration,
    /// On a decrease, set the target rate to the current rate only if... (HPCC's CLAMP_TARGET_RATE).
    pub clamp_target_rate: bool,
    pub initial_alpha: f64,
    /// The reaction point's model: `"paper"` (Zhu et al.: a CNP cuts at once, at most once per
    /// `rate_decrease_interval`) or `"hpcc"` (HPCC ns-3's Mellanox model: notifications set flags,
    /// a check every `rate_decrease_interval` cuts, α updated every `alpha_timer`; see
    /// `dcqcn/hpcc.rs`). `byte_counter` is not used by `"hpcc"`.
    pub reaction: DcqcnReaction,
    /// How the notification point tells the sender: `"cnp"` (a CNP packet, at most one per QP
    /// per `cnp_interval`, as RoCEv2 NICs do) or `"ack"` (the ACK of a marked packet carries ECE
    /// and counts as a notification, as in HPCC ns-3).
    pub notify: DcqcnNotify,
    /// Where the keys a scenario leaves out take their values (`dcqcn/defaults.rs`).
    pub preset: crate::dcqcn::defaults::DcqcnPreset,
    /// The link rate the keys set were tuned for (a warning at a rate whose preset differs).
    pub tuned_for: Option<Rate>,
    /// Bit per preset-valued key the scenario set (`dcqcn/defaults.rs`, `each_key!`).
    pub(crate) set: u32,
}

/// `transport.dcqcn.reaction` (see [`DcqcnConfig::reaction_point`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DcqcnReaction {
    #[default]
    Paper,
    Hpcc,
}

/// `transport.dcqcn.notify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DcqcnNotify {
    #[default]
    Cnp,
    Ack,
}

impl Default for DcqcnConfig {
    fn default() -> Self {
        Self {
            g: 1.0 / 256.0,
            alpha_timer: Duration(55_000_000),
            rate_timer: Duration(55_000_000),
            byte_counter: Bytes(10_000_000),
            fast_recovery_steps: 5,
            rate_ai: Rate(40_000_000),
            rate_hai: Rate(400_000_000),
            min_rate: Rate(10_000_000),
            rate_decrease_interval: Duration(50_000_000),
            cnp_interval: Duration(50_000_000),
            clamp_target_rate: true,
            initial_alpha: 1.0,
            reaction: DcqcnReaction::Paper,
            notify: DcqcnNotify::Cnp,
            preset: crate::dcqcn::defaults::DcqcnPreset::Auto,
            tuned_for: None,
            set: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// RoCEv2 RC with go-back-N and DCQCN.
    #[default]
    Dcqcn,
    /// RoCEv2 RC with go-back-N at line rate (no congestion control).
    None,
    /// MP-RDMA (Lu et al., NSDI'18): one connection over many virtual paths (UDP source ports),
    /// multi-path ACK clocking, OOO-aware path selection, a bounded receive bitmap.
    MpRdma,
}

/// How MP-RDMA holds a synchronise message back (NSDI'18 §3.4, §5.2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Send it Δt = α·Δ / (cwnd / RTT) after the last packet of its predecessors was sent.
    #[default]
    Delay,
    /// Send it once every earlier message is acknowledged.
    StopWait,
}

/// MP-RDMA parameters (NSDI'18 §3 and §5). Defaults are the paper's testbed values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MpRdmaConfig {
    /// Initial window in packets, spread over this many random virtual paths. Absent = one
    /// bandwidth-delay product (§5: "the initial window is set to be one BDP"), from `bdp`.
    pub iw: Option<u32>,
    /// The BDP used when `iw` is absent (testbed: ~60 KB for a 12 us cross-ToR RTT at 40G).
    pub bdp: Bytes,
    /// Δ: the out-of-order level the path selection allows (snd_ool = snd_ooh − Δ). 0 = no OOO
    /// control (the paper's Δ = ∞).
    pub delta: u32,
    /// L: slots in the receive bitmap; a packet at or beyond rcv_nxt + L is dropped and NACKed.
    pub bitmap: u32,
    /// p: probability, once per RTT, that a clocked packet probes a new random virtual path.
    pub probe_p: f64,
    /// Burst control: at most this many packets clocked out by one ACK.
    pub max_per_ack: u32,
    /// Burst timer, as a fraction of the smoothed RTT (the rest is sent on random VPs then).
    pub burst_rtt_frac: f64,
    /// Restart from IW after this many RTTs idle.
    pub restart_rtts: f64,
    /// Synchronise (§3.4): α in Δt = α·Δ / (cwnd / RTT), the time a synchronise message is held
    /// after the last packet of its predecessors left (`sync_mode = "delay"`).
    pub alpha: f64,
    /// How a synchronise message (a WR with `fence` set) is held back at the sender: `"delay"`
    /// (the paper's MP-RDMA: Δt after its predecessors were sent; with `delta = 0` there is no
    /// OOO bound to derive Δt from, so it waits until they are acknowledged) or `"stop-wait"`
    /// (the paper's MP-RDMA (Stop-Wait), §5.2.5: until every earlier message is acknowledged).
    pub sync_mode: SyncMode,
    /// "Use it or lose it": an ACK that could clock a packet but finds no data shrinks cwnd by one.
    pub path_window_reduction: bool,
    /// Early retransmission of unacknowledged packets when there is no new data (FUSO).
    pub early_retx: bool,
    /// braid's addition (not in the paper): grow cwnd only while the window limits sending,
    /// i.e. not while more than `max_per_ack` allowed packets wait for the NIC (the NIC's line
    /// rate, not the window, is the limit then; cf. TCP's congestion-window validation,
    /// RFC 7661). Without it a lone flow with no ECN marks grows cwnd without bound.
    pub cwnd_validation: bool,
    /// Burst timer (§3.5: "if no subsequent ACKs return, these packets will be clocked out by a
    /// burst_timer to random VPs"). true: it fires only once `burst_rtt_frac` × srtt passed with
    /// no ACK; while ACKs keep coming they clock the rest (≤ `max_per_ack` each). false: it
    /// fires `burst_rtt_frac` × srtt after the ACK that armed it, whatever came since.
    pub burst_after_last_ack: bool,
    /// What a NACK clocks (the paper is silent). true: the packet dropped beyond the receiver's
    /// bitmap did cross the network, on the VP the NACK echoes: the NACK counts as its feedback
    /// (inflate + 1, no cwnd change) and clocks like an ACK on that VP (in recovery the credit
    /// waits there for the hole to fill, then sends a retransmission); the walk's retransmission
    /// re-enters the window (inflate − 1). false: a NACK inflates nothing and clocks nothing
    /// (only when nothing else is allowed does it grant the hole's retransmission).
    pub nack_clocks: bool,
    /// RTT assumed before the first sample.
    pub initial_rtt: Duration,
    /// Lowest and highest UDP source port a virtual path may take.
    pub vp_min: u16,
    pub vp_max: u16,
}

impl Default for MpRdmaConfig {
    fn default() -> Self {
        Self {
            iw: None,
            bdp: Bytes(60_000),
            delta: 32,
            bitmap: 64,
            probe_p: 0.01,
            max_per_ack: 2,
            burst_rtt_frac: 0.5,
            restart_rtts: 3.0,
            alpha: 1.0,
            sync_mode: SyncMode::Delay,
            path_window_reduction: true,
            early_retx: true,
            cwnd_validation: true,
            burst_after_last_ack: true,
            nack_clocks: true,
            initial_rtt: Duration(12_000_000),
            vp_min: 49152,
            vp_max: 65535,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TransportConfig {
    pub kind: TransportKind,
    /// How RC recovers from loss: `"go-back-n"` (RoCEv2, the default) or `"irn"` (selective
    /// repeat, `transport/irn.rs`). MP-RDMA has its own.
    #[serde(skip_serializing_if = "Recovery::is_default")]
    pub recovery: Recovery,
    pub dcqcn: DcqcnConfig,
    pub mp_rdma: MpRdmaConfig,
    /// IRN's parameters (`recovery = "irn"`).
    #[serde(skip_serializing_if = "IrnConfig::is_default")]
    pub irn: IrnConfig,
    /// Per-host overrides, keyed by host index: the transport of the connections that host
    /// initiates (a flow's `src`, an application's `src`); the peer's QP runs the same transport,
    /// so both ends of a connection speak one protocol.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub per_host: std::collections::BTreeMap<String, TransportOverride>,
}

/// A partial `[transport]` table (on a host, an `[[apps]]` entry or a `[[traffic]]` entry): the
/// keys it sets replace those it inherits, the others are inherited (from the scenario's
/// `[transport]`, then the initiating host's `per_host` entry). E.g. `{ mp_rdma = { vp_min =
/// 50000, vp_max = 50000 } }` is a single-path MP-RDMA tenant (the paper's SP-RDMA).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct TransportOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TransportKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// Keys of `[transport.irn]` to replace (checked when the override is resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<IrnConfig>")]
    pub irn: Option<serde_json::Map<String, serde_json::Value>>,
    /// Keys of `[transport.dcqcn]` to replace (checked when the override is resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<DcqcnConfig>")]
    pub dcqcn: Option<serde_json::Map<String, serde_json::Value>>,
    /// Keys of `[transport.mp_rdma]` to replace (checked when the override is resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<MpRdmaConfig>")]
    pub mp_rdma: Option<serde_json::Map<String, serde_json::Value>>,
}

impl TransportConfig {
    /// The transport a QP runs: this one with `o`'s keys replaced (no per-host table: a resolved
    /// transport is what one connection runs). Errors are (key path relative to the override,
    /// message).
    pub fn overridden(
        &self,
        o: Option<&TransportOverride>,
    ) -> Result<TransportConfig, (String, String)> {
        let mut t = TransportConfig {
            kind: self.kind,
            recovery: self.recovery,
            dcqcn: self.dcqcn.clone(),
            mp_rdma: self.mp_rdma.clone(),
            irn: self.irn.clone(),
            per_host: Default::default(),
        };
        let Some(o) = o else { return Ok(t) };
        if let Some(k) = o.kind {
            t.kind = k;
        }
        if let Some(r) = o.recovery {
            t.recovery = r;
        }
        if let Some(m) = &o.irn {
            t.irn = patch(&self.irn, m).map_err(|(p, e)| (sub("irn", &p), e))?;
        }
        if let Some(m) = &o.dcqcn {
            t.dcqcn = patch(&self.dcqcn, m).map_err(|(p, e)| (sub("dcqcn", &p), e))?;
        }
        if let Some(m) = &o.mp_rdma {
            t.mp_rdma = patch(&self.mp_rdma, m).map_err(|(p, e)| (sub("mp_rdma", &p), e))?;
        }
        Ok(t)
    }
}

fn sub(table: &str, rel: &str) -> String {
    if rel.is_empty() {
        table.to_string()
    } else {
        format!("{table}.{rel}")
    }
}

/// `base` with the keys of `keys` replaced, through serde so that unit strings, unknown keys and
/// wrong types are handled exactly as in the full table.
fn patch<T: Serialize + serde::de::DeserializeOwned>(
    base: &T,
    keys: &serde_json::Map<String, serde_json::Value>,
) -> Result<T, (String, String)> {
    let mut v = serde_json::to_value(base).expect("configuration tables serialise");
    let obj = v.as_object_mut().expect("a configuration table is a map");
    for (k, x) in keys {
        obj.insert(k.clone(), x.clone());
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.into_inner().to_string();
        (if path == "." { String::new() } else { path }, msg)
    })
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
#[serde(deny_unknown_fields)]
pub struct LinkEvent {
    /// One end: node name (e.g. "spine0") or numeric node id as a string.
    pub a: String,
    pub b: String,
    pub down: Duration,
    /// When the link comes back (never, if absent).
    pub up: Option<Duration>,
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

/// A static route: at switch `node`, traffic to the listed destination hosts leaves through
/// `next_hops` (neighbour node names or ids; more than one = ECMP among them), replacing the
/// shortest-path ECMP group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StaticRoute {
    pub node: String,
    /// Destination host indices; absent = every host.
    pub dst: Option<Vec<u32>>,
    /// Source addresses the route applies to: a host index (all its addresses) or
    /// `{host, addr}` (address `addr` of that host, see `nic.addresses`); absent = any source.
    /// Routes with a source list take precedence over those without.
    #[serde(default)]
    pub src: Option<Vec<RouteSrc>>,
    pub next_hops: Vec<String>,
}

/// A source a static route matches: a host index (every address of that host) or
/// `{host, addr}` (one of its addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RouteSrc {
    /// Every address of this host (index).
    Host(u32),
    /// One address of a host.
    Addr(RouteAddr),
}

/// Address `addr` (0-based, below `nic.addresses`) of host index `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteAddr {
    pub host: u32,
    pub addr: u8,
}
