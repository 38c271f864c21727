//! Swift (Kumar et al., SIGCOMM'20): AIMD on a congestion window against a target delay, with
//! the delay split into its fabric and endpoint parts, each with its own window, the QP sending
//! within the smaller one. Per ACK carrying a delay sample (the paper's Algorithm 1, applied to
//! each window with its own delay and target; windows in packets here):
//!
//! - delay < target: additive increase, cwnd ← cwnd + ai·n/cwnd for cwnd ≥ 1, cwnd + ai·n below
//!   (n packets newly acknowledged: ai packets per round trip);
//! - else, at most once per RTT: cwnd ← max(1 − β·(delay − target)/delay, 1 − max_mdf)·cwnd;
//! - a loss (NAK or timeout), at most once per RTT: cwnd ← (1 − max_mdf)·cwnd;
//! - cwnd stays in [min_cwnd, max_cwnd].
//!
//! The fabric delay is the RTT less the endpoint delay (the time the data packet and its ACK
//! waited in the NICs' receive pipelines, carried by the ACK: [`AckSignal::endpoint`]). The
//! fabric target scales with the path's hops and with the flow's window (§3.5):
//!
//! target = base_target + hops·hop_scale + clamp(α/√fcwnd + β′, 0, fs_range),
//! α = fs_range / (1/√fs_min_cwnd − 1/√fs_max_cwnd), β′ = −α/√fs_max_cwnd
//!
//! so that a flow at fs_max_cwnd packets or more gets no extra target and one at fs_min_cwnd or
//! less gets all of fs_range. The endpoint target is fixed. Above one packet the window alone
//! limits the QP (no pacing: line rate); below one packet one packet may be in flight and
//! packets are paced rtt/cwnd apart.
//!
//! Parameters: the paper's public text gives the equations but none of the values braid could
//! retrieve and cite; every default below is braid's choice, said so, with its reasoning, and
//! docs/congestion.md shows the sensitivity of the incast result to them.

use super::{AckSignal, Arm, CcFactory, CongestionConfig, CongestionControl};
use crate::transport::CcState;
use braid_engine::time::{Time, S};
use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `transport.cc = { kind = "swift", ... }`. Windows in packets (MTU-sized).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SwiftConfig {
    /// Fabric target before scaling. braid's choice (the paper gives no number): 15 µs, above
    /// the unloaded RTT of the longest path of the HPCC fat-tree with 1 µs links (six links each
    /// way, ~12.5 µs), since braid's packets carry no TTL to scale by hops (see `hops`).
    pub base_target: Duration,
    /// Target added per hop (h). braid's choice: 1 µs.
    pub hop_scale: Duration,
    /// Switch hops of the QP's path. The paper counts them from the IP TTL; braid's packets
    /// carry none, so the count is configured (per host, app or flow through the `transport`
    /// overrides). Default 0: `base_target` covers the longest path.
    pub hops: u32,
    /// Most target flow scaling adds (for windows at or below `fs_min_cwnd`). braid's choice:
    /// 20 µs.
    pub fs_range: Duration,
    /// Window (packets) at or below which flow scaling adds all of `fs_range`: braid's choice,
    /// 0.1.
    pub fs_min_cwnd: f64,
    /// Window (packets) at or above which flow scaling adds nothing: braid's choice, 100.
    pub fs_max_cwnd: f64,
    /// Target of the endpoint delay (the NICs' receive pipelines). braid's choice: 10 µs.
    pub endpoint_target: Duration,
    /// Additive increase, packets per round trip: braid's choice, 1.
    pub ai: f64,
    /// Multiplicative decrease factor β: braid's choice, 0.8 (TIMELY's β).
    pub beta: f64,
    /// Largest multiplicative decrease in one step: braid's choice, 0.5 (a halving, as TCP's).
    pub max_mdf: f64,
    /// Smallest window, packets: braid's choice, 0.001 (one packet per 1000 RTTs: large
    /// incasts need windows well below one packet).
    pub min_cwnd: f64,
    /// Largest window, packets; 0: the bandwidth-delay product at line rate over the largest
    /// fabric target (base_target + hops·hop_scale + fs_range), which the window never needs to
    /// pass. The window starts there too.
    pub max_cwnd: f64,
}

impl Default for SwiftConfig {
    fn default() -> Self {
        let us = 1_000_000;
        SwiftConfig {
            base_target: Duration(15 * us),
            hop_scale: Duration(us),
            hops: 0,
            fs_range: Duration(20 * us),
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            endpoint_target: Duration(10 * us),
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            min_cwnd: 0.001,
            max_cwnd: 0.0,
        }
    }
}

impl SwiftConfig {
    fn secs(d: Duration) -> f64 {
        d.0 as f64 / S as f64
    }

    /// The fabric target (seconds) of a flow whose fabric window is `fcwnd` packets.
    pub fn fabric_target(&self, fcwnd: f64) -> f64 {
        let range = Self::secs(self.fs_range);
        let inv = |c: f64| 1.0 / c.sqrt();
        let alpha = range / (inv(self.fs_min_cwnd) - inv(self.fs_max_cwnd));
        let beta = -alpha * inv(self.fs_max_cwnd);
        let flow = (alpha * inv(fcwnd.max(f64::MIN_POSITIVE)) + beta).clamp(0.0, range);
        Self::secs(self.base_target) + self.hops as f64 * Self::secs(self.hop_scale) + flow
    }
}

impl CcFactory for SwiftConfig {
    fn at_link(&self, _line_rate_bps: u64) -> CongestionConfig {
        CongestionConfig::Swift(self.clone())
    }
    fn build(&self, line_rate_bps: u64) -> Box<dyn CongestionControl> {
        Box::new(Swift::new(line_rate_bps, self))
    }
    fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        if self.base_target.0 == 0 {
            return bad("base_target", "must be positive, e.g. \"15us\"");
        }
        if self.endpoint_target.0 == 0 {
            return bad("endpoint_target", "must be positive, e.g. \"10us\"");
        }
        if !(self.fs_min_cwnd > 0.0 && self.fs_min_cwnd < self.fs_max_cwnd) {
            return bad(
                "fs_min_cwnd",
                "expected a window in packets, positive and below fs_max_cwnd",
            );
        }
        if !(self.ai > 0.0 && self.ai.is_finite()) {
            return bad("ai", "expected a positive number of packets per round trip");
        }
        if !(self.beta > 0.0 && self.beta <= 1.0) {
            return bad("beta", "expected a factor in (0, 1]");
        }
        if !(self.max_mdf > 0.0 && self.max_mdf < 1.0) {
            return bad("max_mdf", "expected a factor in (0, 1)");
        }
        if !(self.min_cwnd > 0.0 && self.min_cwnd.is_finite()) {
            return bad(
                "min_cwnd",
                "expected a positive window in packets, e.g. 0.001",
            );
        }
        if !(self.max_cwnd == 0.0 || self.max_cwnd >= self.min_cwnd.max(1.0)) {
            return bad(
                "max_cwnd",
                "expected 0 (automatic) or a window in packets of at least 1 and min_cwnd",
            );
        }
        Ok(())
    }
}

/// One AIMD window (Algorithm 1) in packets.
#[derive(Debug, Clone)]
struct Window {
    cwnd: f64,
    last_decrease: Option<Time>,
}

impl Window {
    fn can_decrease(&self, now: Time, rtt: Time) -> bool {
        self.last_decrease
            .is_none_or(|t| now.saturating_sub(t) >= rtt)
    }

    /// One ACK's worth of Algorithm 1: `delay` against `target` (seconds), `n` packets newly
    /// acknowledged. Returns whether the window was cut.
    #[allow(clippy::too_many_arguments)]
    fn on_delay(
        &mut self,
        cfg: &SwiftConfig,
        now: Time,
        rtt: Time,
        delay: f64,
        target: f64,
        n: u32,
        (lo, hi): (f64, f64),
    ) -> bool {
        let before = self.cwnd;
        if delay < target {
            let n = n as f64;
            if self.cwnd >= 1.0 {
                self.cwnd += cfg.ai * n / self.cwnd;
            } else {
                self.cwnd += cfg.ai * n;
            }
        } else if self.can_decrease(now, rtt) {
            let f = (1.0 - cfg.beta * (delay - target) / delay).max(1.0 - cfg.max_mdf);
            self.cwnd *= f;
        }
        self.cwnd = self.cwnd.clamp(lo, hi);
        let cut = self.cwnd < before;
        if cut {
            self.last_decrease = Some(now);
        }
        cut
    }
}

#[derive(Debug, Clone)]
pub struct Swift {
    cfg: SwiftConfig,
    line: f64,
    fabric: Window,
    endpoint: Window,
    /// Largest window, packets (resolved at the first ACK, when the packet size is known).
    max: f64,
    /// Wire bytes of a full packet (known from the first ACK; 0 before).
    mss: f64,
    /// Newest RTT sample.
    rtt: Option<Time>,
    /// Newest fabric and endpoint delays, seconds.
    delays: (f64, f64),
    over_target: u64,
    cuts: u64,
}

impl Swift {
    pub fn new(line_rate_bps: u64, cfg: &SwiftConfig) -> Self {
        let w = |c| Window {
            cwnd: c,
            last_decrease: None,
        };
        Swift {
            cfg: cfg.clone(),
            line: line_rate_bps as f64,
            // Both windows start unbounded until the packet size makes max_cwnd known.
            fabric: w(f64::INFINITY),
            endpoint: w(f64::INFINITY),
            max: f64::INFINITY,
            mss: 0.0,
            rtt: None,
            delays: (0.0, 0.0),
            over_target: 0,
            cuts: 0,
        }
    }

    /// The window the QP sends within: the smaller of the two, packets.
    pub fn cwnd(&self) -> f64 {
        self.fabric.cwnd.min(self.endpoint.cwnd)
    }

    /// The fabric and endpoint windows, packets.
    pub fn windows(&self) -> (f64, f64) {
        (self.fabric.cwnd, self.endpoint.cwnd)
    }

    fn resolve_max(&mut self, mss: f64) {
        self.mss = mss;
        let c = &self.cfg;
        self.max = if c.max_cwnd > 0.0 {
            c.max_cwnd
        } else {
            let top = SwiftConfig::secs(c.base_target)
                + c.hops as f64 * SwiftConfig::secs(c.hop_scale)
                + SwiftConfig::secs(c.fs_range);
            (self.line * top / 8.0 / mss).max(1.0)
        };
        self.fabric.cwnd = self.max;
        self.endpoint.cwnd = self.max;
    }

    /// Algorithm 1 on both windows for one ACK: round trip `rtt`, of which `endpoint` in the
    /// NICs, `n` packets newly acknowledged. Returns true if the window grew.
    pub fn on_sample(&mut self, now: Time, rtt: Time, endpoint: Time, n: u32) -> bool {
        let before = self.cwnd();
        self.rtt = Some(rtt);
        let endpoint = endpoint.min(rtt);
        let fabric_delay = (rtt - endpoint) as f64 / S as f64;
        let endpoint_delay = endpoint as f64 / S as f64;
        self.delays = (fabric_delay, endpoint_delay);
        let bounds = (self.cfg.min_cwnd, self.max);
        let target = self.cfg.fabric_target(self.fabric.cwnd);
        if fabric_delay >= target {
            self.over_target += 1;
        }
        let cfg = &self.cfg;
        let mut cut = self
            .fabric
            .on_delay(cfg, now, rtt, fabric_delay, target, n, bounds);
        let et = SwiftConfig::secs(cfg.endpoint_target);
        cut |= self
            .endpoint
            .on_delay(cfg, now, rtt, endpoint_delay, et, n, bounds);
        if cut {
            self.cuts += 1;
        }
        self.cwnd() > before
    }
}

impl CongestionControl for Swift {
    fn rate(&self) -> f64 {
        let c = self.cwnd();
        match self.rtt {
            // Below one packet: one packet per rtt/cwnd.
            Some(rtt) if c < 1.0 && self.mss > 0.0 => {
                (c * self.mss * 8.0 * S as f64 / rtt.max(1) as f64).min(self.line)
            }
            _ => self.line,
        }
    }
    fn window(&self) -> Option<f64> {
        if self.mss == 0.0 {
            // Before the first ACK (as DCTCP here): unbounded, at line rate.
            return Some(f64::INFINITY);
        }
        // At least one packet may be in flight; below that the rate paces.
        Some((self.cwnd() * self.mss).max(self.mss))
    }
    fn on_sent(&mut self, _now: Time, _bytes: u64) {}
    fn wants_rtt(&self) -> bool {
        true
    }
    fn on_ack(&mut self, now: Time, ack: &AckSignal, _arm: &mut Vec<Arm>) -> bool {
        if self.mss == 0.0 {
            self.resolve_max(ack.mss as f64);
        }
        match ack.rtt {
            Some(rtt) => self.on_sample(now, rtt, ack.endpoint, ack.newly_acked),
            None => false,
        }
    }
    fn on_loss(&mut self, now: Time, _arm: &mut Vec<Arm>) {
        // Retransmission: the fabric window is cut by max_mdf, once per RTT.
        let rtt = self.rtt.unwrap_or(0);
        let w = &mut self.fabric;
        if w.cwnd.is_finite() && w.can_decrease(now, rtt) {
            w.cwnd = (w.cwnd * (1.0 - self.cfg.max_mdf)).max(self.cfg.min_cwnd);
            w.last_decrease = Some(now);
            self.cuts += 1;
        }
    }
    fn state(&self, _now: Time) -> CcState {
        let c = self.cwnd();
        CcState {
            rate_bps: Some(self.rate()),
            cwnd: c.is_finite().then_some(c),
            srtt_us: self.rtt.map(|r| r as f64 / 1e6),
            signals: Some(self.over_target),
            cuts: Some(self.cuts),
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "swift"
    }
}

#[cfg(test)]
#[path = "swift_tests.rs"]
mod tests;
