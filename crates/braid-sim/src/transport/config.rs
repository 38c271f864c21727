//! The `[transport]` table: which transport a QP runs, its parameters, and the partial tables
//! (`per_host`, an app's or a flow's `transport`) that override them.

use crate::cc::CongestionConfig;
use crate::dcqcn::config::DcqcnConfig;
pub use crate::transport::irn::{IrnConfig, Recovery};
use braid_topo::units::{Bytes, Duration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// RoCEv2 RC with go-back-N and congestion control: DCQCN (`[transport.dcqcn]`) unless
    /// `transport.cc` names another controller. `"rc"` is the same.
    #[default]
    #[serde(alias = "rc")]
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
    /// The RC congestion controller, a table tagged by `kind` (`cc/mod.rs`): e.g.
    /// `{ kind = "dctcp" }`. Absent: DCQCN from `[transport.dcqcn]`. Only with
    /// `kind = "dcqcn"` (RC); MP-RDMA runs its own window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<CongestionConfig>,
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
    /// A whole `transport.cc` table (with its `kind`), replacing the inherited one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<CongestionConfig>,
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
            cc: self.cc.clone(),
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
        if let Some(c) = &o.cc {
            t.cc = Some(c.clone());
        }
        Ok(t)
    }

    /// The congestion controller an RC QP on a port at `line_rate_bps` runs: `transport.cc`,
    /// else DCQCN from `[transport.dcqcn]`; keys left out follow the link rate where the
    /// controller says so (DCQCN's presets).
    pub fn controller(&self, line_rate_bps: u64) -> CongestionConfig {
        match &self.cc {
            Some(c) => c.kind().at_link(line_rate_bps),
            None => CongestionConfig::Dcqcn(self.dcqcn.for_link(line_rate_bps)),
        }
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
    let keys = serde_json::Value::Object(keys.clone());
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        crate::scenario::wording::refine(Some(&keys), &path, &e.into_inner().to_string())
    })
}
