//! HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM'19), the sender's
//! Algorithm 1: switches stamp in-band telemetry on every data packet (`net/int.rs`), the
//! receiver echoes it, and per ACK the sender
//!
//! * measures the inflight utilisation of each link on its path from the ACK's record and the
//!   previous ACK's: `u_i = min(qlen, qlen_prev) / (B·T) + txRate / B`, with
//!   `txRate = Δ txBytes / Δ ts`, keeps the busiest link's `u` and its interval `τ`, and folds it
//!   into the EWMA `U ← (1 − τ/T)·U + (τ/T)·u` (τ capped at T);
//! * sets its window from the reference window `Wc`: `W = Wc / (U/η) + W_AI` if `U ≥ η` or the
//!   additive stage has reached `maxStage` (a multiplicative step, down or up), else
//!   `W = Wc + W_AI`; `Wc` takes the new `W` (and the stage counts) once per round trip, when the
//!   ACK acknowledges past the PSN sent when `Wc` was last updated;
//! * paces at `R = W / T`.
//!
//! T is the base RTT: `base_rtt` if given, else the least RTT sampled (the window is unbounded
//! until the first sample). The window starts at one bandwidth-delay product of the NIC's line
//! rate and stays within [min_rate·T, line·T].

use super::{AckSignal, Arm, CcFactory, CongestionConfig, CongestionControl};
use crate::net::int::IntStack;
use crate::transport::CcState;
use braid_engine::time::{Time, S};
use braid_topo::units::{Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `transport.cc = { kind = "hpcc", ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HpccConfig {
    /// η, the target utilisation: 0.95 (the paper, §3.3; HPCC ns-3's `U_TARGET`).
    pub eta: f64,
    /// maxStage, additive steps of `Wc` before a multiplicative one: 5 (the paper, §3.3).
    /// HPCC ns-3's `MI_THRESH` (its example configs set 0).
    pub max_stage: u32,
    /// The additive step W_AI as a rate: W_AI = rate_ai · T. 50 Mb/s, HPCC ns-3's `RATE_AI`
    /// (config_doc.txt: "Additive increase (not for DCTCP)"); the paper's own rule,
    /// W_AI = W_init·(1 − η)/N, needs the expected number of flows N.
    pub rate_ai: Rate,
    /// The window never falls below min_rate · T: HPCC ns-3's `MIN_RATE`, 100 Mb/s.
    pub min_rate: Rate,
    /// T, the base RTT; none = the least RTT this QP samples.
    pub base_rtt: Option<Duration>,
    /// React on every ACK (true; the paper's Algorithm 1, HPCC ns-3's `FAST_REACT 1`) or only
    /// once per round trip, when `Wc` is updated (false).
    pub fast_react: bool,
}

impl Default for HpccConfig {
    fn default() -> Self {
        HpccConfig {
            eta: 0.95,
            max_stage: 5,
            rate_ai: Rate(50_000_000),
            min_rate: Rate(100_000_000),
            base_rtt: None,
            fast_react: true,
        }
    }
}

impl CcFactory for HpccConfig {
    fn at_link(&self, _line_rate_bps: u64) -> CongestionConfig {
        CongestionConfig::Hpcc(self.clone())
    }
    fn build(&self, line_rate_bps: u64) -> Box<dyn CongestionControl> {
        Box::new(Hpcc::new(line_rate_bps, self))
    }
    fn needs_int(&self) -> bool {
        true
    }
    fn check(&self) -> Result<(), (String, String)> {
        if !(self.eta > 0.0 && self.eta <= 1.0) {
            return Err(("eta".into(), "expected a utilisation in (0, 1]".into()));
        }
        if self.min_rate.0 == 0 {
            return Err((
                "min_rate".into(),
                "must be positive, e.g. \"100Mbps\"".into(),
            ));
        }
        if self.base_rtt.is_some_and(|d| d.0 == 0) {
            return Err((
                "base_rtt".into(),
                "must be positive, e.g. \"8us\" (or left out: the least RTT sampled)".into(),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Hpcc {
    cfg: HpccConfig,
    /// Line rate, bit/s.
    line: f64,
    /// T, seconds.
    t: Option<f64>,
    /// Window W and reference window Wc, bytes (infinite until T is known).
    w: f64,
    wc: f64,
    /// U, the EWMA of the busiest link's inflight utilisation.
    u: f64,
    inc_stage: u32,
    /// `Wc` is next updated by an ACK acknowledging past this PSN.
    last_update_seq: u32,
    /// The previous ACK's records, and the records of the ACK being handled.
    prev: Option<IntStack>,
    pending: Option<IntStack>,
    signals: u64,
    cuts: u64,
}

impl Hpcc {
    pub fn new(line_rate_bps: u64, cfg: &HpccConfig) -> Self {
        let mut h = Hpcc {
            cfg: cfg.clone(),
            line: line_rate_bps as f64,
            t: None,
            w: f64::INFINITY,
            wc: f64::INFINITY,
            // A new flow starts at line rate, as if its links were fully used: the first
            // measurements then pull U towards what they see.
            u: 1.0,
            inc_stage: 0,
            last_update_seq: 0,
            prev: None,
            pending: None,
            signals: 0,
            cuts: 0,
        };
        if let Some(d) = cfg.base_rtt {
            h.set_t(d.0 as f64 / S as f64);
        }
        h
    }

    fn set_t(&mut self, t: f64) {
        self.t = Some(t);
        if !self.w.is_finite() {
            // One bandwidth-delay product at line rate.
            self.w = self.line * t / 8.0;
            self.wc = self.w;
        }
    }

    /// U, the utilisation estimate.
    pub fn utilization(&self) -> f64 {
        self.u
    }
    /// Wc, the reference window (bytes).
    pub fn reference_window(&self) -> f64 {
        self.wc
    }

    /// MeasureInflight: folds the busiest link's utilisation between the previous records and
    /// `now_recs` into U. None (U unchanged) without a previous record of the same path.
    fn measure(&mut self, now_recs: &IntStack) -> Option<f64> {
        let t = self.t?;
        let prev = self.prev.as_ref()?;
        if prev.hops().len() != now_recs.hops().len() {
            return None;
        }
        let mut best: Option<(f64, f64)> = None;
        if now_recs
            .hops()
            .iter()
            .zip(prev.hops())
            .any(|(a, b)| a.port != b.port)
        {
            // Another path (a new flowlet, a failover): a new snapshot.
            return None;
        }
        for (a, b) in now_recs.hops().iter().zip(prev.hops()) {
            if a.ts <= b.ts || a.rate_bps == 0 {
                continue;
            }
            let dt = (a.ts - b.ts) as f64 / S as f64;
            let bw = a.rate_bps as f64 / 8.0;
            let tx_rate = a.tx_bytes.saturating_sub(b.tx_bytes) as f64 / dt;
            let u = a.qlen.min(b.qlen) as f64 / (bw * t) + tx_rate / bw;
            if best.is_none_or(|(bu, _)| u > bu) {
                best = Some((u, dt));
            }
        }
        let (u, tau) = best?;
        let f = tau.min(t) / t;
        self.u = (1.0 - f) * self.u + f * u;
        Some(self.u)
    }

    /// ComputeWind: the window from `Wc`, U and the stage; `update` makes it the new `Wc`.
    fn compute_window(&mut self, update: bool) {
        let Some(t) = self.t else { return };
        let w_ai = self.cfg.rate_ai.0 as f64 * t / 8.0;
        let (lo, hi) = (self.cfg.min_rate.0 as f64 * t / 8.0, self.line * t / 8.0);
        let eta = self.cfg.eta;
        let multiplicative = self.u >= eta || self.inc_stage >= self.cfg.max_stage;
        let w = if multiplicative {
            // U/η is tiny on an idle path: the step up is bounded by the line rate below.
            self.wc / (self.u.max(1e-9) / eta) + w_ai
        } else {
            self.wc + w_ai
        };
        let w = w.clamp(lo, hi);
        if multiplicative && self.u >= eta && w < self.w {
            self.cuts += 1;
        }
        self.w = w;
        if update {
            self.inc_stage = if multiplicative {
                0
            } else {
                self.inc_stage + 1
            };
            self.wc = w;
        }
    }
}

impl CongestionControl for Hpcc {
    fn rate(&self) -> f64 {
        match self.t {
            Some(t) if self.w.is_finite() => {
                (self.w * 8.0 / t).clamp(self.cfg.min_rate.0 as f64, self.line)
            }
            _ => self.line,
        }
    }
    fn window(&self) -> Option<f64> {
        Some(self.w)
    }
    fn on_sent(&mut self, _now: Time, _bytes: u64) {}
    fn wants_rtt(&self) -> bool {
        self.cfg.base_rtt.is_none()
    }
    fn on_int(&mut self, _now: Time, int: &IntStack) {
        self.pending = Some(*int);
    }
    fn on_ack(&mut self, _now: Time, ack: &AckSignal, _arm: &mut Vec<Arm>) -> bool {
        if let (Some(rtt), None) = (ack.rtt, self.cfg.base_rtt) {
            let r = rtt as f64 / S as f64;
            if self.t.is_none_or(|t| r < t) {
                self.set_t(r);
            }
        }
        let Some(recs) = self.pending.take() else {
            return false;
        };
        self.signals += 1;
        let (rate0, w0) = (self.rate(), self.w);
        let update = ack.cum > self.last_update_seq;
        if self.measure(&recs).is_some() && (update || self.cfg.fast_react) {
            self.compute_window(update);
        }
        if update && self.w.is_finite() {
            self.last_update_seq = ack.snd_nxt.max(ack.cum);
        }
        self.prev = Some(recs);
        self.rate() > rate0 || self.w > w0
    }
    fn state(&self, _now: Time) -> CcState {
        CcState {
            rate_bps: Some(self.rate()),
            cwnd: self.w.is_finite().then_some(self.w),
            srtt_us: self.t.map(|t| t * 1e6),
            signals: Some(self.signals),
            cuts: Some(self.cuts),
            utilization: Some(self.u),
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "hpcc"
    }
}

#[cfg(test)]
#[path = "hpcc_tests.rs"]
mod tests;
