//! DCTCP (Alizadeh et al., SIGCOMM'10) as HPCC ns-3 runs it over RoCE (CC_MODE 8): the sender
//! keeps α, an EWMA of the fraction of its packets that came back ECN-echoed, updated once per
//! round trip (α ← (1 − g)·α + g·F); the first echoed mark of a round cuts the window by α/2,
//! W ← W·(1 − α/2), and a round without marks grows it additively. As HPCC ns-3 does (its
//! `RATE_BOUND`), the window is also paced: rate = W / base RTT, base RTT being the least RTT
//! sampled. The window starts at one bandwidth-delay product (line rate × base RTT), the rate at
//! line rate; before the first RTT sample the window is unbounded.

use super::{AckSignal, Arm, CcFactory, CongestionConfig, CongestionControl};
use crate::transport::CcState;
use braid_engine::time::{Time, S};
use braid_topo::units::Rate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `transport.cc = { kind = "dctcp", ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DctcpConfig {
    /// EWMA gain g of α. Default 1/256, HPCC ns-3's `EWMA_GAIN` ("for DCQCN and DCTCP",
    /// `config_doc.txt`); the DCTCP paper used 1/16 on its 1/10G testbed.
    pub g: f64,
    /// α before the first round: 1, as RFC 8257 §3.3 initialises it (conservative: the first
    /// mark halves the window).
    pub initial_alpha: f64,
    /// Window growth per round without marks, as a rate times the base RTT: HPCC ns-3's
    /// `DCTCP_RATE_AI`, 1000 Mb/s.
    pub rate_ai: Rate,
    /// The window never falls below this rate times the base RTT: HPCC ns-3's `MIN_RATE`,
    /// 100 Mb/s.
    pub min_rate: Rate,
}

impl Default for DctcpConfig {
    fn default() -> Self {
        DctcpConfig {
            g: 1.0 / 256.0,
            initial_alpha: 1.0,
            rate_ai: Rate(1_000_000_000),
            min_rate: Rate(100_000_000),
        }
    }
}

impl CcFactory for DctcpConfig {
    fn at_link(&self, _line_rate_bps: u64) -> CongestionConfig {
        CongestionConfig::Dctcp(self.clone())
    }
    fn build(&self, line_rate_bps: u64) -> Box<dyn CongestionControl> {
        Box::new(Dctcp::new(line_rate_bps, self))
    }
    fn check(&self) -> Result<(), (String, String)> {
        if !(self.g > 0.0 && self.g <= 1.0) {
            return Err(("g".into(), "expected a gain in (0, 1]".into()));
        }
        if !(0.0..=1.0).contains(&self.initial_alpha) {
            return Err(("initial_alpha".into(), "expected a value in [0, 1]".into()));
        }
        if self.min_rate.0 == 0 {
            return Err((
                "min_rate".into(),
                "must be positive, e.g. \"100Mbps\"".into(),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Dctcp {
    cfg: DctcpConfig,
    line: f64,
    alpha: f64,
    /// Window in bytes (infinite until the base RTT is known).
    w: f64,
    /// Least RTT sampled, seconds.
    base: Option<f64>,
    /// The round ends when the acknowledged point reaches this PSN.
    round_end: u32,
    acked: u32,
    marked: u32,
    /// No further cut until the acknowledged point passes this PSN (one cut per window).
    cwr_end: Option<u32>,
    signals: u64,
    cuts: u64,
}

impl Dctcp {
    pub fn new(line_rate_bps: u64, cfg: &DctcpConfig) -> Self {
        Dctcp {
            cfg: cfg.clone(),
            line: line_rate_bps as f64,
            alpha: cfg.initial_alpha,
            w: f64::INFINITY,
            base: None,
            round_end: 0,
            acked: 0,
            marked: 0,
            cwr_end: None,
            signals: 0,
            cuts: 0,
        }
    }

    /// α, the EWMA of the marked fraction.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    fn bytes_at(&self, rate_bps: f64) -> f64 {
        rate_bps * self.base.unwrap_or(0.0) / 8.0
    }
}

impl CongestionControl for Dctcp {
    fn rate(&self) -> f64 {
        match self.base {
            Some(b) if self.w.is_finite() => {
                (self.w * 8.0 / b).clamp(self.cfg.min_rate.0 as f64, self.line)
            }
            _ => self.line,
        }
    }
    fn window(&self) -> Option<f64> {
        Some(self.w)
    }
    fn on_sent(&mut self, _now: Time, _bytes: u64) {}
    fn wants_rtt(&self) -> bool {
        true
    }
    fn on_ack(&mut self, _now: Time, ack: &AckSignal, _arm: &mut Vec<Arm>) -> bool {
        if let Some(rtt) = ack.rtt {
            let r = rtt as f64 / S as f64;
            if self.base.is_none_or(|b| r < b) {
                self.base = Some(r);
            }
            if !self.w.is_finite() {
                // One bandwidth-delay product, as HPCC ns-3 starts its windows.
                self.w = self.bytes_at(self.line);
            }
        }
        self.acked += ack.newly_acked;
        if ack.ece {
            self.signals += 1;
            self.marked += ack.newly_acked.max(1);
            let in_cwr = self.cwr_end.is_some_and(|e| ack.cum < e);
            if !in_cwr && self.w.is_finite() {
                let floor = self.bytes_at(self.cfg.min_rate.0 as f64);
                self.w = (self.w * (1.0 - self.alpha / 2.0)).max(floor);
                self.cwr_end = Some(ack.snd_nxt.max(ack.cum + 1));
                self.cuts += 1;
            }
        }
        let mut grew = false;
        if ack.cum >= self.round_end && self.acked > 0 {
            let f = (self.marked.min(self.acked)) as f64 / self.acked as f64;
            self.alpha = (1.0 - self.cfg.g) * self.alpha + self.cfg.g * f;
            let in_cwr = self.cwr_end.is_some_and(|e| ack.cum < e);
            if self.marked == 0 && !in_cwr && self.w.is_finite() {
                let cap = self.bytes_at(self.line);
                let w = (self.w + self.bytes_at(self.cfg.rate_ai.0 as f64)).min(cap);
                grew = w > self.w;
                self.w = w;
            }
            self.acked = 0;
            self.marked = 0;
            self.round_end = ack.snd_nxt.max(ack.cum + 1);
        }
        grew
    }
    fn state(&self, _now: Time) -> CcState {
        CcState {
            rate_bps: Some(self.rate()),
            alpha: Some(self.alpha),
            cwnd: self.w.is_finite().then_some(self.w),
            srtt_us: self.base.map(|b| b * 1e6),
            signals: Some(self.signals),
            cuts: Some(self.cuts),
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "dctcp"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: u64 = 100_000_000_000;
    const US: Time = S / 1_000_000;

    fn ack(cum: u32, newly: u32, ece: bool, rtt: Option<Time>, snd_nxt: u32) -> AckSignal {
        AckSignal {
            cum,
            newly_acked: newly,
            ece,
            rtt,
            endpoint: 0,
            snd_nxt,
            mss: 1048,
        }
    }

    fn cfg(g: f64) -> DctcpConfig {
        DctcpConfig {
            g,
            ..Default::default()
        }
    }

    #[test]
    fn the_first_rtt_sample_sets_a_bdp_window_and_line_rate() {
        let mut d = Dctcp::new(LINE, &cfg(1.0 / 16.0));
        assert!(d.window().unwrap().is_infinite());
        d.on_ack(0, &ack(1, 1, false, Some(10 * US), 100), &mut vec![]);
        // 100 Gbit/s × 10 µs = 125,000 bytes.
        assert!((d.window().unwrap() - 125_000.0).abs() < 1e-6);
        assert!((d.rate() - LINE as f64).abs() < 1.0);
    }

    #[test]
    fn alpha_is_the_ewma_of_the_marked_fraction_per_round() {
        let g = 1.0 / 16.0;
        let mut d = Dctcp::new(LINE, &cfg(g));
        d.on_ack(0, &ack(1, 1, false, Some(10 * US), 9), &mut vec![]);
        // That first ACK closed a round with F = 0: α = (1 − g)·1.
        let a1 = (1.0 - g) * 1.0;
        assert!((d.alpha() - a1).abs() < 1e-12);
        // The next round (to PSN 9): 8 packets, 4 marked.
        for p in 2..=9u32 {
            d.on_ack(0, &ack(p, 1, p % 2 == 0, None, 20), &mut vec![]);
        }
        let a2 = (1.0 - g) * a1 + g * 0.5;
        assert!((d.alpha() - a2).abs() < 1e-12, "{} vs {a2}", d.alpha());
    }

    #[test]
    fn a_mark_cuts_the_window_by_alpha_over_two_once_per_window() {
        let mut d = Dctcp::new(LINE, &cfg(1.0 / 16.0));
        d.on_ack(0, &ack(1, 1, false, Some(10 * US), 50), &mut vec![]);
        let (w0, a) = (d.window().unwrap(), d.alpha());
        d.on_ack(0, &ack(2, 1, true, None, 50), &mut vec![]);
        let w1 = d.window().unwrap();
        assert!(
            (w1 - w0 * (1.0 - a / 2.0)).abs() < 1e-6,
            "{w1} vs {w0}·(1 − {a}/2)"
        );
        // A second mark in the same window cuts nothing.
        d.on_ack(0, &ack(3, 1, true, None, 50), &mut vec![]);
        assert_eq!(d.window().unwrap(), w1);
        assert_eq!(d.state(0).cuts, Some(1));
        // The rate follows the window: W / base RTT.
        assert!((d.rate() - w1 * 8.0 / 10e-6).abs() < 1.0);
    }

    #[test]
    fn a_round_without_marks_grows_the_window_by_rate_ai_times_base_rtt() {
        let mut d = Dctcp::new(LINE, &cfg(1.0 / 16.0));
        d.on_ack(0, &ack(1, 1, false, Some(10 * US), 10), &mut vec![]);
        d.on_ack(0, &ack(2, 1, true, None, 10), &mut vec![]);
        let w = d.window().unwrap();
        // Finish the round the cut began (the window stays), then a clean round.
        d.on_ack(0, &ack(10, 8, false, None, 20), &mut vec![]);
        let w_after_cwr = d.window().unwrap();
        d.on_ack(0, &ack(20, 10, false, None, 30), &mut vec![]);
        // 1 Gbit/s × 10 µs = 1250 bytes per round.
        assert!((d.window().unwrap() - (w_after_cwr + 1250.0)).abs() < 1e-6);
        assert!(w_after_cwr >= w);
    }
}
