//! DCQCN's parameters by link rate (`transport.dcqcn.preset`), and which keys a scenario set.
//!
//! A key the scenario leaves out takes its value from a preset, chosen per QP from its port's
//! link rate (`preset = "auto"`, the default) or named:
//!
//! - `"paper-40g"`: the DCQCN paper's values (Zhu et al., SIGCOMM'15, tuned on 40G ConnectX-3
//!   Pro): g = 1/256, α and rate-increase timers 55 µs, byte counter 10 MB, F = 5,
//!   R_AI = 40 Mbit/s, R_HAI = 400 Mbit/s, one cut per 50 µs, CNPs at most one per 50 µs.
//!   `auto` below 100 Gbit/s (no value is published for 10 or 25G; the paper's are used).
//! - `"hpcc-100g"`: the DCQCN settings HPCC's authors ran at 100 Gbit/s (HPCC ns-3,
//!   `mix/config.txt`; the anchors' `config-dcqcn-*.txt`): α updated every 1 µs, one cut check
//!   per 4 µs, rate-increase timer 300 µs, no byte counter, F = 1, R_AI = 20 Mbit/s,
//!   R_HAI = 200 Mbit/s, minimum rate 1 Gbit/s, target not clamped. Its timers are NVIDIA's
//!   ConnectX firmware defaults (`dce_tcp_rtt` 1 µs, `rate_reduce_monitor_period` 4 µs,
//!   `rpg_time_reset` 300 µs, docs/scenario.md). `auto` at 100 Gbit/s and above (no value is
//!   published for 200 or 400G: NVIDIA documents one default per parameter for every link
//!   speed; docs/scenario.md shows the sensitivity).
//!
//! A scenario that sets a key whose presets differ (a rate-dependent key) to another rate's
//! preset value, or says it `tuned_for` another rate, gets a warning naming the key.

use super::config::{DcqcnConfig, DcqcnNotify, DcqcnReaction};
use braid_topo::units::{Bytes, Duration, Rate};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// `transport.dcqcn.preset`: where the keys a scenario leaves out take their values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum DcqcnPreset {
    /// By the QP's link rate: `paper-40g` below 100 Gbit/s, `hpcc-100g` from 100 Gbit/s.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// The DCQCN paper's 40G values (Zhu et al., SIGCOMM'15).
    #[serde(rename = "paper-40g")]
    Paper40g,
    /// HPCC's 100G DCQCN settings (HPCC ns-3's `mix/config.txt`).
    #[serde(rename = "hpcc-100g")]
    Hpcc100g,
}

impl DcqcnPreset {
    /// The preset `auto` picks for a port at `line_rate_bps`.
    pub fn for_rate(line_rate_bps: u64) -> DcqcnPreset {
        if line_rate_bps >= 100_000_000_000 {
            DcqcnPreset::Hpcc100g
        } else {
            DcqcnPreset::Paper40g
        }
    }

    /// The preset itself at `line_rate_bps` (`auto` resolved).
    pub fn at(self, line_rate_bps: u64) -> DcqcnPreset {
        match self {
            DcqcnPreset::Auto => Self::for_rate(line_rate_bps),
            p => p,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DcqcnPreset::Auto => "auto",
            DcqcnPreset::Paper40g => "paper-40g",
            DcqcnPreset::Hpcc100g => "hpcc-100g",
        }
    }

    /// The link rate the preset was tuned at, bit/s.
    fn tuned_rate(self) -> u64 {
        match self {
            DcqcnPreset::Hpcc100g => 100_000_000_000,
            _ => 40_000_000_000,
        }
    }

    /// The parameters of this preset (`auto` gives the 40G values; see [`DcqcnPreset::at`]).
    pub fn values(self) -> DcqcnConfig {
        match self {
            DcqcnPreset::Hpcc100g => DcqcnConfig {
                g: 1.0 / 256.0,
                alpha_timer: Duration(1_000_000),
                rate_timer: Duration(300_000_000),
                byte_counter: Bytes(0),
                fast_recovery_steps: 1,
                rate_ai: Rate(20_000_000),
                rate_hai: Rate(200_000_000),
                min_rate: Rate(1_000_000_000),
                rate_decrease_interval: Duration(4_000_000),
                cnp_interval: Duration(50_000_000),
                clamp_target_rate: false,
                initial_alpha: 1.0,
                ..DcqcnConfig::default()
            },
            // The DCQCN paper's 40G values are `DcqcnConfig::default()` (config.rs).
            _ => DcqcnConfig::default(),
        }
    }
}

/// Calls `$m!(name, bit)` for every preset-valued key of [`DcqcnConfig`].
macro_rules! each_key {
    ($m:ident) => {
        $m!(g, 0);
        $m!(alpha_timer, 1);
        $m!(rate_timer, 2);
        $m!(byte_counter, 3);
        $m!(fast_recovery_steps, 4);
        $m!(rate_ai, 5);
        $m!(rate_hai, 6);
        $m!(min_rate, 7);
        $m!(rate_decrease_interval, 8);
        $m!(cnp_interval, 9);
        $m!(clamp_target_rate, 10);
        $m!(initial_alpha, 11);
    };
}

impl DcqcnConfig {
    /// Whether the scenario set key `bit` (see `each_key!`).
    fn has(&self, bit: u32) -> bool {
        self.set & (1 << bit) != 0
    }

    /// The parameters a QP whose port runs at `line_rate_bps` uses: the keys the scenario set,
    /// the preset's (`auto`: by the link rate) for the others.
    pub fn for_link(&self, line_rate_bps: u64) -> DcqcnConfig {
        let mut out = self.preset.at(line_rate_bps).values();
        macro_rules! keep {
            ($f:ident, $bit:expr) => {
                if self.has($bit) {
                    out.$f = self.$f.clone();
                }
            };
        }
        each_key!(keep);
        out.reaction = self.reaction;
        out.notify = self.notify;
        out.preset = self.preset;
        out.tuned_for = self.tuned_for;
        out.set = self.set;
        out
    }

    /// One warning line (None if nothing to say) for a scenario whose QPs run at `line_rate_bps`
    /// with this table (`at`: its key path, e.g. "transport.dcqcn"): the rate-dependent keys it
    /// set explicitly that were tuned for another link rate, by its `tuned_for` or because their
    /// value is another rate's preset value and not this rate's.
    pub fn rate_warning(&self, at: &str, line_rate_bps: u64) -> Option<String> {
        if self.preset != DcqcnPreset::Auto {
            return None; // a preset named explicitly is what the user asked for
        }
        let here = DcqcnPreset::for_rate(line_rate_bps);
        let others: Vec<DcqcnPreset> = [DcqcnPreset::Paper40g, DcqcnPreset::Hpcc100g]
            .into_iter()
            .filter(|&p| p != here)
            .collect();
        let (mine, base) = (here.values(), DcqcnPreset::Paper40g.values());
        let alt = DcqcnPreset::Hpcc100g.values();
        let mut keys: Vec<String> = Vec::new();
        let mut tuned_elsewhere: Option<&'static str> = None;
        macro_rules! check {
            ($f:ident, $bit:expr) => {
                // Rate-dependent: the presets differ on it.
                if self.has($bit) && base.$f != alt.$f && self.$f != mine.$f {
                    let by_value = others
                        .iter()
                        .find(|p| p.values().$f == self.$f)
                        .map(|p| p.name());
                    let by_tuning = self
                        .tuned_for
                        .filter(|t| DcqcnPreset::for_rate(t.0) != here)
                        .map(|_| "tuned_for");
                    if let Some(why) = by_tuning.or(by_value) {
                        tuned_elsewhere.get_or_insert(why);
                        keys.push(format!("{at}.{} = {}", stringify!($f), Shown(&self.$f)));
                    }
                }
            };
        }
        each_key!(check);
        let why = tuned_elsewhere?;
        let source = if why == "tuned_for" {
            format!("tuned_for = {}", self.tuned_for.expect("checked"))
        } else {
            format!(
                "the {why} preset's value, tuned at {}",
                Rate(others[0].tuned_rate())
            )
        };
        Some(format!(
            "{} ({source}) on links at {}: the {} preset (`auto` here) was tuned for this rate; remove the key{} to use it, or set {at}.preset",
            keys.join(", "),
            Rate(line_rate_bps),
            here.name(),
            if keys.len() > 1 { "s" } else { "" },
        ))
    }
}

/// A key's value as a scenario would write it.
struct Shown<'a, T>(&'a T);

macro_rules! shown_display {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for Shown<'_, $t> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )*};
}
shown_display!(Rate, Duration, Bytes, f64, u32, bool);

/// `[transport.dcqcn]` as written: every key optional, so that the keys a scenario set are
/// known (they are kept; the others follow the preset). Serialized the same way, so a scenario
/// written back (results folders, overrides) keeps only what its author set.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnKeys {
    /// EWMA gain of alpha.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub g: Option<f64>,
    /// Alpha decays every alpha_timer without a CNP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha_timer: Option<Duration>,
    /// Rate-increase timer T.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_timer: Option<Duration>,
    /// Rate-increase byte counter B (0 disables it; the timer then drives all stages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub byte_counter: Option<Bytes>,
    /// F: stages of fast recovery before additive increase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_recovery_steps: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_ai: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_hai: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<Rate>,
    /// At most one rate decrease per interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_decrease_interval: Option<Duration>,
    /// Notification point: at most one CNP per QP per interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cnp_interval: Option<Duration>,
    /// On a decrease, set the target rate to the current rate (HPCC's CLAMP_TARGET_RATE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clamp_target_rate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_alpha: Option<f64>,
    /// The reaction point's model: `"paper"` or `"hpcc"` (see `dcqcn/mellanox.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction: Option<DcqcnReaction>,
    /// How the notification point tells the sender: `"cnp"` or `"ack"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify: Option<DcqcnNotify>,
    /// Where the keys left out take their values: `"auto"` (by the link rate: `"paper-40g"`
    /// below 100 Gbit/s, `"hpcc-100g"` from 100 Gbit/s), `"paper-40g"` or `"hpcc-100g"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<DcqcnPreset>,
    /// The link rate the keys set here were tuned for (a warning when QPs run at a rate whose
    /// preset differs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tuned_for: Option<Rate>,
}

impl From<DcqcnKeys> for DcqcnConfig {
    fn from(k: DcqcnKeys) -> Self {
        let mut c = DcqcnConfig::default();
        macro_rules! take {
            ($f:ident, $bit:expr) => {
                if let Some(v) = k.$f {
                    c.$f = v;
                    c.set |= 1 << $bit;
                }
            };
        }
        each_key!(take);
        c.reaction = k.reaction.unwrap_or_default();
        c.notify = k.notify.unwrap_or_default();
        c.preset = k.preset.unwrap_or_default();
        c.tuned_for = k.tuned_for;
        c
    }
}

impl From<DcqcnConfig> for DcqcnKeys {
    fn from(c: DcqcnConfig) -> Self {
        let mut k = DcqcnKeys::default();
        macro_rules! give {
            ($f:ident, $bit:expr) => {
                if c.has($bit) {
                    k.$f = Some(c.$f.clone());
                }
            };
        }
        each_key!(give);
        k.reaction = (c.reaction != DcqcnReaction::default()).then_some(c.reaction);
        k.notify = (c.notify != DcqcnNotify::default()).then_some(c.notify);
        k.preset = (c.preset != DcqcnPreset::default()).then_some(c.preset);
        k.tuned_for = c.tuned_for;
        k
    }
}

impl JsonSchema for DcqcnConfig {
    fn schema_name() -> Cow<'static, str> {
        "DcqcnConfig".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        DcqcnKeys::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> DcqcnConfig {
        serde_json::from_str(json).expect("parses")
    }

    #[test]
    fn keys_left_out_follow_the_link_rate() {
        let c = parse("{}");
        assert_eq!(c.for_link(40_000_000_000), DcqcnPreset::Paper40g.values());
        assert_eq!(c.for_link(25_000_000_000), DcqcnPreset::Paper40g.values());
        assert_eq!(c.for_link(100_000_000_000), DcqcnPreset::Hpcc100g.values());
        assert_eq!(c.for_link(400_000_000_000), DcqcnPreset::Hpcc100g.values());
        // A named preset holds at every rate.
        let p = parse(r#"{"preset": "paper-40g"}"#).for_link(100_000_000_000);
        assert_eq!(p.rate_ai, Rate(40_000_000));
        assert_eq!(p.rate_timer, Duration(55_000_000));
    }

    #[test]
    fn keys_set_are_kept_and_written_back_alone() {
        let c = parse(r#"{"rate_ai": "5Mbps", "reaction": "hpcc"}"#);
        let r = c.for_link(100_000_000_000);
        assert_eq!(r.rate_ai, Rate(5_000_000));
        assert_eq!(r.rate_timer, Duration(300_000_000));
        assert_eq!(r.reaction, DcqcnReaction::Hpcc);
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"rate_ai": "5Mbps", "reaction": "hpcc"})
        );
        assert_eq!(serde_json::from_value::<DcqcnConfig>(back).unwrap(), c);
    }

    #[test]
    fn the_100g_preset_is_hpccs_config() {
        // HPCC ns-3's mix/config.txt as the anchors hold it (config-dcqcn-incast.txt):
        // ALPHA_RESUME_INTERVAL 1, RATE_DECREASE_INTERVAL 4, CLAMP_TARGET_RATE 0, RP_TIMER 300,
        // EWMA_GAIN 0.00390625, FAST_RECOVERY_TIMES 1, RATE_AI 20Mb/s, RATE_HAI 200Mb/s,
        // MIN_RATE 1000Mb/s; no byte counter in its model.
        let h = DcqcnPreset::Hpcc100g.values();
        assert_eq!(h.alpha_timer, Duration(1_000_000));
        assert_eq!(h.rate_decrease_interval, Duration(4_000_000));
        assert!(!h.clamp_target_rate);
        assert_eq!(h.rate_timer, Duration(300_000_000));
        assert_eq!(h.g, 0.00390625);
        assert_eq!(h.fast_recovery_steps, 1);
        assert_eq!(
            (h.rate_ai, h.rate_hai),
            (Rate(20_000_000), Rate(200_000_000))
        );
        assert_eq!(h.min_rate, Rate(1_000_000_000));
        assert_eq!(h.byte_counter, Bytes(0));
        // The paper's 40G values (Zhu et al., SIGCOMM'15).
        let p = DcqcnPreset::Paper40g.values();
        assert_eq!(
            (p.alpha_timer, p.rate_timer),
            (Duration(55_000_000), Duration(55_000_000))
        );
        assert_eq!(
            (p.rate_ai, p.byte_counter),
            (Rate(40_000_000), Bytes(10_000_000))
        );
        assert_eq!(p.fast_recovery_steps, 5);
    }

    #[test]
    fn a_rate_tuned_elsewhere_is_warned_about_by_key() {
        let c = parse(r#"{"rate_ai": "40Mbps", "rate_timer": "55us", "g": 0.01}"#);
        let w = c
            .rate_warning("transport.dcqcn", 100_000_000_000)
            .expect("warned");
        assert!(w.contains("transport.dcqcn.rate_ai = 40Mbps"), "{w}");
        assert!(w.contains("transport.dcqcn.rate_timer = 55us"), "{w}");
        assert!(!w.contains("g ="), "g is not rate-dependent: {w}");
        assert!(!w.contains('\n'));
        // At 40G the same values are that rate's own.
        assert_eq!(c.rate_warning("transport.dcqcn", 40_000_000_000), None);
        // HPCC's values at 100G (what import-hpcc writes) are this rate's own.
        let h = parse(r#"{"rate_ai": "20Mbps", "rate_timer": "300us", "min_rate": "1000Mbps"}"#);
        assert_eq!(h.rate_warning("transport.dcqcn", 100_000_000_000), None);
        // A value of neither preset is the user's own tuning: warned only with a tuned_for.
        let own = parse(r#"{"rate_ai": "7Mbps"}"#);
        assert_eq!(own.rate_warning("transport.dcqcn", 100_000_000_000), None);
        let own40 = parse(r#"{"rate_ai": "7Mbps", "tuned_for": "40Gbps"}"#);
        let w = own40
            .rate_warning("transport.dcqcn", 100_000_000_000)
            .expect("warned");
        assert!(
            w.contains("rate_ai = 7Mbps") && w.contains("tuned_for = 40Gbps"),
            "{w}"
        );
        assert_eq!(own40.rate_warning("transport.dcqcn", 40_000_000_000), None);
        // A named preset is what the user asked for.
        let named = parse(r#"{"rate_ai": "40Mbps", "preset": "paper-40g"}"#);
        assert_eq!(named.rate_warning("transport.dcqcn", 100_000_000_000), None);
    }
}
