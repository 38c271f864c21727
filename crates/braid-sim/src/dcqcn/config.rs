//! DCQCN's scenario keys (`[transport.dcqcn]`, or `transport.cc = { kind = "dcqcn", ... }`):
//! the parameters of the reaction and notification points. Defaults are the DCQCN paper's
//! (`dcqcn/defaults.rs` has the presets for other link rates).

use braid_topo::units::{Bytes, Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// `dcqcn/mellanox.rs`). `byte_counter` is not used by `"hpcc"`.
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

/// `transport.dcqcn.reaction` (the model `cc/dcqcn.rs` builds).
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
