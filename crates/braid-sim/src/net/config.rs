//! Switch parameters as they appear in scenario files (`[switch]`): buffer, queues and their
//! scheduler, RED/ECN marking, PFC, and the ECMP seed. Defaults are the cited papers' values.

use braid_topo::units::{Bytes, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// How each switch chooses among equal-cost ports (`kind = "ecmp"`, the default; see
    /// docs/load-balancing.md).
    pub lb: crate::net::lb::LbSpec,
    /// Per-switch policies replacing `lb` at the switches they name (the last entry naming a
    /// switch wins), e.g. spraying at the ToRs and ECMP elsewhere.
    pub lb_at: Vec<crate::net::lb::LbAt>,
    /// Reroute around failed links after a detection delay; absent: failed links black-hole.
    pub failover: Option<crate::world::failover::FailoverConfig>,
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
            lb: Default::default(),
            lb_at: vec![],
            failover: None,
        }
    }
}
