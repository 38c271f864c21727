//! TIMELY (Mittal et al., SIGCOMM'15; HPCC ns-3's CC_MODE 7): rate control from RTT samples.
//! Once per completion of `segment` bytes (the paper's rate update per completed segment),
//! with the newest RTT sample new_rtt (Algorithm 1):
//!
//! - rtt_diff ← (1 − α)·rtt_diff + α·(new_rtt − prev_rtt); gradient = rtt_diff / min_rtt;
//! - new_rtt < T_low: R ← R + δ;
//! - new_rtt > T_high: R ← R·(1 − β·(1 − T_high / new_rtt));
//! - gradient ≤ 0: R ← R + N·δ, N = 5 after five such updates in a row (hyperactive increase),
//!   else 1;
//! - gradient > 0: R ← R·(1 − β·gradient).
//!
//! The rate starts at line rate and stays in [min_rate, line rate].

use super::{AckSignal, Arm, CcFactory, CongestionConfig, CongestionControl};
use crate::transport::CcState;
use braid_engine::time::{Time, S};
use braid_topo::units::{Bytes, Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `transport.cc = { kind = "timely", ... }`. Defaults are the paper's (§4.4 and its Table of
/// parameters, as the CoNEXT'16 "ECN or Delay" fluid model restates them) unless noted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TimelyConfig {
    /// Below this RTT the rate only grows additively: 50 µs.
    pub t_low: Duration,
    /// Above this RTT the rate is cut whatever the gradient: 500 µs.
    pub t_high: Duration,
    /// Additive step δ: 10 Mb/s.
    pub delta: Rate,
    /// Multiplicative decrease factor β: 0.8.
    pub beta: f64,
    /// EWMA weight α of the newest RTT difference: 0.875.
    pub alpha: f64,
    /// The RTT that normalises the gradient (D_minRTT): 20 µs.
    pub min_rtt: Duration,
    /// Updates with a non-positive gradient in a row before increases become N·δ: 5.
    pub hai_after: u32,
    /// One rate update per this many acknowledged bytes: 64 KB, the segment of the paper's
    /// fluid model.
    pub segment: Bytes,
    /// The rate's floor: HPCC ns-3's `MIN_RATE`, 100 Mb/s (the paper gives none).
    pub min_rate: Rate,
}

impl Default for TimelyConfig {
    fn default() -> Self {
        let us = 1_000_000;
        TimelyConfig {
            t_low: Duration(50 * us),
            t_high: Duration(500 * us),
            delta: Rate(10_000_000),
            beta: 0.8,
            alpha: 0.875,
            min_rtt: Duration(20 * us),
            hai_after: 5,
            segment: Bytes(64_000),
            min_rate: Rate(100_000_000),
        }
    }
}

impl CcFactory for TimelyConfig {
    fn at_link(&self, _line_rate_bps: u64) -> CongestionConfig {
        CongestionConfig::Timely(self.clone())
    }
    fn build(&self, line_rate_bps: u64) -> Box<dyn CongestionControl> {
        Box::new(Timely::new(line_rate_bps, self))
    }
    fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        if !(self.beta > 0.0 && self.beta <= 1.0) {
            return bad("beta", "expected a factor in (0, 1]");
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return bad("alpha", "expected a weight in (0, 1]");
        }
        if self.min_rtt.0 == 0 {
            return bad("min_rtt", "must be positive, e.g. \"20us\"");
        }
        if self.t_low.0 > self.t_high.0 {
            return bad("t_low", "must not exceed t_high");
        }
        if self.min_rate.0 == 0 {
            return bad("min_rate", "must be positive, e.g. \"100Mbps\"");
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Timely {
    cfg: TimelyConfig,
    line: f64,
    rate: f64,
    prev_rtt: Option<f64>,
    rtt_diff: f64,
    negatives: u32,
    /// Bytes acknowledged since the last update.
    acked: u64,
    last_rtt: Option<f64>,
    updates: u64,
    cuts: u64,
}

impl Timely {
    pub fn new(line_rate_bps: u64, cfg: &TimelyConfig) -> Self {
        Timely {
            cfg: cfg.clone(),
            line: line_rate_bps as f64,
            rate: line_rate_bps as f64,
            prev_rtt: None,
            rtt_diff: 0.0,
            negatives: 0,
            acked: 0,
            last_rtt: None,
            updates: 0,
            cuts: 0,
        }
    }

    /// The normalised RTT gradient.
    pub fn gradient(&self) -> f64 {
        self.rtt_diff / (self.cfg.min_rtt.0 as f64 / S as f64)
    }

    /// Algorithm 1 with a new RTT sample (seconds). Returns true if the rate rose.
    pub fn update(&mut self, new_rtt: f64) -> bool {
        let before = self.rate;
        self.last_rtt = Some(new_rtt);
        self.updates += 1;
        let Some(prev) = self.prev_rtt.replace(new_rtt) else {
            // The first sample only sets prev_rtt: there is no difference yet.
            return false;
        };
        let a = self.cfg.alpha;
        self.rtt_diff = (1.0 - a) * self.rtt_diff + a * (new_rtt - prev);
        let g = self.gradient();
        let (t_low, t_high) = (
            self.cfg.t_low.0 as f64 / S as f64,
            self.cfg.t_high.0 as f64 / S as f64,
        );
        let delta = self.cfg.delta.0 as f64;
        if new_rtt < t_low {
            self.rate += delta;
        } else if new_rtt > t_high {
            self.rate *= 1.0 - self.cfg.beta * (1.0 - t_high / new_rtt);
            self.cuts += 1;
        } else if g <= 0.0 {
            self.negatives += 1;
            let n = if self.negatives >= self.cfg.hai_after {
                self.cfg.hai_after as f64
            } else {
                1.0
            };
            self.rate += n * delta;
        } else {
            self.negatives = 0;
            self.rate *= 1.0 - self.cfg.beta * g;
            self.cuts += 1;
        }
        self.rate = self.rate.clamp(self.cfg.min_rate.0 as f64, self.line);
        self.rate > before
    }
}

impl CongestionControl for Timely {
    fn rate(&self) -> f64 {
        self.rate
    }
    fn on_sent(&mut self, _now: Time, _bytes: u64) {}
    fn wants_rtt(&self) -> bool {
        true
    }
    fn on_ack(&mut self, _now: Time, ack: &AckSignal, _arm: &mut Vec<Arm>) -> bool {
        self.acked += ack.newly_acked as u64 * ack.mss as u64;
        match ack.rtt {
            Some(rtt) if self.acked >= self.cfg.segment.0 || self.prev_rtt.is_none() => {
                self.acked = 0;
                self.update(rtt as f64 / S as f64)
            }
            _ => false,
        }
    }
    fn state(&self, _now: Time) -> CcState {
        CcState {
            rate_bps: Some(self.rate),
            srtt_us: self.last_rtt.map(|r| r * 1e6),
            signals: Some(self.updates),
            cuts: Some(self.cuts),
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "timely"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: u64 = 100_000_000_000;

    fn t(rate: f64) -> Timely {
        let mut x = Timely::new(LINE, &TimelyConfig::default());
        x.rate = rate;
        x
    }

    #[test]
    fn below_t_low_the_rate_grows_by_delta() {
        let mut x = t(50e9);
        x.update(30e-6);
        x.update(40e-6); // rising, but below T_low = 50 µs
        assert_eq!(x.rate(), 50e9 + 10e6);
    }

    #[test]
    fn above_t_high_the_cut_is_beta_times_the_excess() {
        let mut x = t(50e9);
        x.update(400e-6);
        x.update(1000e-6);
        // R·(1 − 0.8·(1 − 500/1000)) = 0.6·R.
        assert!((x.rate() - 50e9 * 0.6).abs() < 1.0);
    }

    #[test]
    fn a_rising_rtt_cuts_by_beta_times_the_normalised_gradient() {
        let mut x = t(50e9);
        x.update(100e-6);
        x.update(102e-6);
        // rtt_diff = 0.875 · 2 µs; gradient = 1.75 / 20 = 0.0875; R ← R·(1 − 0.8·0.0875).
        let g = 0.875 * 2e-6 / 20e-6;
        assert!((x.gradient() - g).abs() < 1e-12);
        assert!((x.rate() - 50e9 * (1.0 - 0.8 * g)).abs() < 1.0);
        // A steeper rise cuts more: the rate falls as the gradient rises.
        let r1 = x.rate();
        x.update(110e-6);
        let cut2 = 1.0 - x.rate() / r1;
        assert!(cut2 > 0.8 * g, "{cut2}");
    }

    #[test]
    fn five_falling_samples_in_a_row_make_the_increase_five_deltas() {
        let mut x = t(50e9);
        let mut rtt = 200e-6;
        x.update(rtt);
        let mut steps = vec![];
        for _ in 0..6 {
            rtt -= 1e-6;
            let before = x.rate();
            x.update(rtt);
            steps.push(((x.rate() - before) / 10e6).round());
        }
        assert_eq!(steps, vec![1.0, 1.0, 1.0, 1.0, 5.0, 5.0]);
    }

    #[test]
    fn the_rate_stays_between_min_rate_and_line_rate() {
        let mut x = t(LINE as f64);
        x.update(10e-6);
        x.update(11e-6);
        assert_eq!(x.rate(), LINE as f64);
        let mut y = t(200e6);
        y.update(100e-6);
        y.update(5000e-6);
        assert_eq!(y.rate(), 100e6);
    }
}
