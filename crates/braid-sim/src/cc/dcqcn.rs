//! DCQCN as a [`CongestionControl`]: the reaction point models of `crate::dcqcn` (the paper's,
//! and HPCC ns-3's Mellanox model) driven by CNPs, or by ECN-echoing ACKs with
//! `notify = "ack"`. The config is `[transport.dcqcn]` or `transport.cc = { kind = "dcqcn" }`.

use super::{AckSignal, Arm, CcFactory, CcTimer, CongestionConfig, CongestionControl};
use crate::dcqcn::config::{DcqcnConfig, DcqcnNotify, DcqcnReaction};
use crate::dcqcn::{Dcqcn, DcqcnMellanox, ReactionPoint};
use crate::transport::CcState;
use braid_engine::Time;

/// A DCQCN reaction point with its parameters.
#[derive(Debug)]
pub struct DcqcnCc<R> {
    rp: R,
    cfg: DcqcnConfig,
}

impl<R: ReactionPoint> DcqcnCc<R> {
    pub fn new(rp: R, cfg: DcqcnConfig) -> Self {
        DcqcnCc { rp, cfg }
    }
}

impl<R: ReactionPoint> CongestionControl for DcqcnCc<R> {
    #[inline]
    fn rate(&self) -> f64 {
        self.rp.rate()
    }
    #[inline]
    fn on_sent(&mut self, _now: Time, bytes: u64) {
        self.rp.on_sent(bytes, &self.cfg);
    }
    fn on_ack(&mut self, now: Time, ack: &AckSignal, arm: &mut Vec<Arm>) -> bool {
        // With `notify = "ack"` the ACK's ECE bit is the notification (HPCC ns-3).
        if ack.ece && self.cfg.notify == DcqcnNotify::Ack {
            self.rp.on_cnp(now, &self.cfg, arm);
        }
        // A slower rate never needs an earlier send.
        false
    }
    fn reads_acks(&self) -> bool {
        self.cfg.notify == DcqcnNotify::Ack
    }
    fn on_cnp(&mut self, now: Time, arm: &mut Vec<Arm>) {
        self.rp.on_cnp(now, &self.cfg, arm);
    }
    fn on_timer(&mut self, now: Time, t: CcTimer, arm: &mut Vec<Arm>) -> bool {
        self.rp.on_timer(now, t, &self.cfg, arm)
    }
    fn state(&self, now: Time) -> CcState {
        let st = self.rp.state(now, &self.cfg);
        CcState {
            rate_bps: Some(st.rate),
            target_bps: Some(st.target),
            alpha: Some(st.alpha),
            signals: Some(st.notifications),
            cuts: Some(st.cuts),
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "dcqcn"
    }
}

impl CcFactory for DcqcnConfig {
    fn at_link(&self, line_rate_bps: u64) -> CongestionConfig {
        CongestionConfig::Dcqcn(self.for_link(line_rate_bps))
    }

    fn build(&self, line_rate_bps: u64) -> Box<dyn CongestionControl> {
        match self.reaction {
            DcqcnReaction::Paper => {
                Box::new(DcqcnCc::new(Dcqcn::new(line_rate_bps, self), self.clone()))
            }
            DcqcnReaction::Hpcc => Box::new(DcqcnCc::new(
                DcqcnMellanox::new(line_rate_bps, self),
                self.clone(),
            )),
        }
    }

    fn cnp_interval(&self) -> Option<Time> {
        (self.notify == DcqcnNotify::Cnp).then_some(self.cnp_interval.0)
    }

    fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        if !(self.g > 0.0 && self.g <= 1.0) {
            return bad("g", "expected a gain in (0, 1]");
        }
        if !(0.0..=1.0).contains(&self.initial_alpha) {
            return bad("initial_alpha", "expected a value in [0, 1]");
        }
        for (k, v) in [
            ("alpha_timer", self.alpha_timer.0),
            ("rate_timer", self.rate_timer.0),
        ] {
            if v == 0 {
                return bad(k, "must be positive, e.g. \"55us\"");
            }
        }
        if self.min_rate.0 == 0 {
            return bad("min_rate", "must be positive, e.g. \"10Mbps\"");
        }
        Ok(())
    }
}
