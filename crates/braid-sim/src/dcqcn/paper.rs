//! DCQCN reaction point (the sender's rate controller), as a sans-IO state machine.
//!
//! Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §4:
//! on a CNP the current rate Rc is cut by α/2 and the target rate Rt remembers the old rate;
//! α is an EWMA of "a CNP arrived in the last alpha period"; the rate recovers in stages driven by
//! a timer T and a byte counter B: F stages of fast recovery (Rc ← (Rt + Rc)/2), then additive
//! (Rt += R_AI) and hyper (Rt += i·R_HAI) increase. Timers are owned by the caller: it asks when
//! they are due and reports when they fired.
//!
//! This is `transport.dcqcn.reaction = "paper"` (the default); `mellanox.rs` is HPCC ns-3's variant.

use super::config::DcqcnConfig;
use super::{Arm, CcTimer, ReactionPoint, ReactionState};
use braid_engine::Time;

#[derive(Debug, Clone)]
pub struct Dcqcn {
    pub rc: f64,
    pub rt: f64,
    pub alpha: f64,
    line_rate: f64,
    /// Rate-increase stages counted by the timer and by the byte counter.
    t_stage: u32,
    b_stage: u32,
    bytes_since: u64,
    cnp_in_alpha_period: bool,
    last_decrease: Option<u64>,
    /// Whether the controller is recovering (timers need to run).
    pub active: bool,
    pub cnps: u64,
    /// The α timer is running.
    timers_on: bool,
    /// CNPs that cut the rate.
    pub cuts: u64,
}

impl Dcqcn {
    pub fn new(line_rate_bps: u64, cfg: &DcqcnConfig) -> Self {
        let r = line_rate_bps as f64;
        Dcqcn {
            rc: r,
            rt: r,
            alpha: cfg.initial_alpha,
            line_rate: r,
            t_stage: 0,
            b_stage: 0,
            bytes_since: 0,
            cnp_in_alpha_period: false,
            last_decrease: None,
            active: false,
            cnps: 0,
            timers_on: false,
            cuts: 0,
        }
    }

    /// A CNP arrived at `now`. Returns true if the rate was cut (the caller restarts its timers).
    pub fn cut(&mut self, now: u64, cfg: &DcqcnConfig) -> bool {
        self.cnps += 1;
        self.cnp_in_alpha_period = true;
        if let Some(t) = self.last_decrease {
            if now < t + cfg.rate_decrease_interval.0 {
                return false;
            }
        }
        self.last_decrease = Some(now);
        self.cuts += 1;
        if cfg.clamp_target_rate || self.t_stage > 0 || self.b_stage > 0 || !self.active {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(cfg.min_rate.0 as f64);
        self.alpha = (1.0 - cfg.g) * self.alpha + cfg.g;
        self.t_stage = 0;
        self.b_stage = 0;
        self.bytes_since = 0;
        self.active = true;
        true
    }

    /// The alpha timer fired: decay α if no CNP came in the last period.
    pub fn on_alpha_timer(&mut self, cfg: &DcqcnConfig) {
        if !self.cnp_in_alpha_period {
            self.alpha *= 1.0 - cfg.g;
        }
        self.cnp_in_alpha_period = false;
    }

    /// The rate-increase timer fired.
    pub fn on_rate_timer(&mut self, cfg: &DcqcnConfig) {
        self.t_stage += 1;
        self.increase(cfg);
    }

    /// `bytes` were sent; may trigger a byte-counter stage.
    #[inline]
    pub fn on_sent(&mut self, bytes: u64, cfg: &DcqcnConfig) {
        if !self.active || cfg.byte_counter.0 == 0 {
            return;
        }
        self.bytes_since += bytes;
        if self.bytes_since >= cfg.byte_counter.0 {
            self.bytes_since = 0;
            self.b_stage += 1;
            self.increase(cfg);
        }
    }

    fn increase(&mut self, cfg: &DcqcnConfig) {
        let f = cfg.fast_recovery_steps;
        // Without a byte counter the timer alone drives the stages (as in HPCC's Mellanox model).
        let b = if cfg.byte_counter.0 == 0 {
            self.t_stage
        } else {
            self.b_stage
        };
        let (hi, lo) = (self.t_stage.max(b), self.t_stage.min(b));
        if hi < f {
            // Fast recovery: towards the target.
        } else if lo > f {
            let i = (lo - f) as f64;
            self.rt += i * cfg.rate_hai.0 as f64;
        } else {
            self.rt += cfg.rate_ai.0 as f64;
        }
        self.rt = self.rt.min(self.line_rate);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line_rate);
        if self.rc >= self.line_rate * 0.999_999 && self.rt >= self.line_rate * 0.999_999 {
            // Back at line rate: stop the timers until the next CNP.
            self.rc = self.line_rate;
            self.active = false;
        }
    }

    /// Current sending rate in bit/s.
    #[inline]
    pub fn rate(&self) -> f64 {
        self.rc
    }
}

impl ReactionPoint for Dcqcn {
    #[inline]
    fn rate(&self) -> f64 {
        self.rc
    }

    #[inline]
    fn on_sent(&mut self, bytes: u64, cfg: &DcqcnConfig) {
        Dcqcn::on_sent(self, bytes, cfg)
    }

    fn on_cnp(&mut self, now: Time, cfg: &DcqcnConfig, arm: &mut Vec<Arm>) {
        if self.cut(now, cfg) {
            // (Re)start the rate-increase timer from this cut; the alpha timer keeps its phase.
            arm.push(Arm {
                at: now + cfg.rate_timer.0,
                timer: CcTimer::RateInc,
                restart: true,
            });
            if !self.timers_on {
                self.timers_on = true;
                arm.push(Arm {
                    at: now + cfg.alpha_timer.0,
                    timer: CcTimer::Alpha,
                    restart: true,
                });
            }
        }
    }

    fn on_timer(&mut self, now: Time, t: CcTimer, cfg: &DcqcnConfig, arm: &mut Vec<Arm>) -> bool {
        match t {
            CcTimer::Alpha => {
                self.on_alpha_timer(cfg);
                if self.active || self.alpha > 1e-3 {
                    arm.push(Arm {
                        at: now + cfg.alpha_timer.0,
                        timer: CcTimer::Alpha,
                        restart: false,
                    });
                } else {
                    self.timers_on = false;
                }
                false
            }
            CcTimer::RateInc => {
                if !self.active {
                    return false;
                }
                self.on_rate_timer(cfg);
                arm.push(Arm {
                    at: now + cfg.rate_timer.0,
                    timer: CcTimer::RateInc,
                    restart: false,
                });
                true
            }
            CcTimer::RateDec => false,
        }
    }

    fn cnps(&self) -> u64 {
        self.cnps
    }

    fn state(&self, _now: Time, _cfg: &DcqcnConfig) -> ReactionState {
        ReactionState {
            rate: self.rc,
            target: self.rt,
            alpha: self.alpha,
            notifications: self.cnps,
            cuts: self.cuts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> DcqcnConfig {
        DcqcnConfig::default()
    }

    #[test]
    fn first_cnp_halves_the_rate() {
        // α starts at 1, so the first cut is Rc·(1 − 1/2).
        let c = cfg();
        let mut d = Dcqcn::new(40_000_000_000, &c);
        assert!(d.cut(0, &c));
        assert!((d.rc - 20e9).abs() < 1.0);
        assert!((d.rt - 40e9).abs() < 1.0);
    }

    #[test]
    fn decreases_are_rate_limited() {
        let c = cfg();
        let mut d = Dcqcn::new(40_000_000_000, &c);
        assert!(d.cut(0, &c));
        assert!(!d.cut(1_000_000, &c));
        assert!(d.cut(c.rate_decrease_interval.0, &c));
    }

    #[test]
    fn fast_recovery_converges_to_target() {
        let c = cfg();
        let mut d = Dcqcn::new(40_000_000_000, &c);
        d.cut(0, &c);
        for _ in 0..c.fast_recovery_steps {
            d.on_rate_timer(&c);
        }
        // After F halvings of the gap: Rc = Rt − (Rt − Rc0)/2^F.
        let want = 40e9 - 20e9 / 32.0;
        assert!((d.rc - want).abs() < 1e3, "{} vs {}", d.rc, want);
    }

    #[test]
    fn alpha_decays_without_cnp() {
        let c = cfg();
        let mut d = Dcqcn::new(40_000_000_000, &c);
        d.cut(0, &c);
        let a0 = d.alpha;
        d.on_alpha_timer(&c); // CNP seen this period: no decay
        assert_eq!(d.alpha, a0);
        d.on_alpha_timer(&c);
        assert!((d.alpha - a0 * (1.0 - c.g)).abs() < 1e-12);
    }
}
