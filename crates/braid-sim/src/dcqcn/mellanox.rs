//! DCQCN as HPCC ns-3 models it (`transport.dcqcn.reaction = "hpcc"`): the "Mellanox version"
//! of `rdma-hw.cc` (CC_MODE 1), whose timers are Mellanox's RP parameters (α update period,
//! rate-reduce monitor period, rate-increase timer, fast-recovery threshold). What differs from
//! the paper's reaction point (`paper.rs`):
//!
//! - A notification only sets two flags. The first one sets α to its initial value, starts the α
//!   timer (every `alpha_timer`) and the decrease check (every `rate_decrease_interval`, the first
//!   1 ns after a whole interval) and cuts nothing then: the first cut comes at that check.
//! - At each α tick: α ← (1 − g)·α + g if a notification came since the last tick, else
//!   (1 − g)·α. At each decrease check, if one came since the last check: Rt ← Rc (when
//!   `clamp_target_rate`, or if the rate had increased since the last cut), Rc ← max(min_rate,
//!   Rc·(1 − α/2)), and the rate-increase timer restarts from stage 0.
//! - Rate increase (every `rate_timer`; no byte counter): stages 0 … F−1 fast recovery
//!   (Rc ← (Rc + Rt)/2), stage F additive (Rt += rate_ai), later stages hyper with a constant
//!   step (Rt += rate_hai), each followed by Rc ← (Rc + Rt)/2.
//!
//! HPCC's timers run until the QP finishes. Here a timer whose next tick could change nothing
//! (the α tick with no notification pending, the decrease check with none) is not kept running:
//! the next notification re-arms it on the same grid (first notification + k periods) after
//! applying the ticks that passed, so the result is the same with far fewer events.

use super::config::DcqcnConfig;
use super::{Arm, CcTimer, ReactionPoint, ReactionState};
use braid_engine::Time;

#[derive(Debug, Clone)]
pub struct DcqcnMellanox {
    rc: f64,
    rt: f64,
    alpha: f64,
    line_rate: f64,
    /// A notification came since the last α tick / decrease check.
    alpha_flag: bool,
    dec_flag: bool,
    /// Time of the first notification (None: none yet); the grids of both periodic timers.
    origin: Option<Time>,
    /// Number of the last α tick applied (tick k is at origin + k·alpha_timer).
    alpha_tick: u64,
    alpha_armed: bool,
    dec_armed: bool,
    /// Rate-increase stage (HPCC's m_rpTimeStage) and whether its timer runs.
    stage: u32,
    inc_on: bool,
    cnps: u64,
    /// Decrease checks that cut the rate.
    cuts: u64,
}

impl DcqcnMellanox {
    pub fn new(line_rate_bps: u64, cfg: &DcqcnConfig) -> Self {
        let r = line_rate_bps as f64;
        DcqcnMellanox {
            rc: r,
            rt: r,
            alpha: cfg.initial_alpha,
            line_rate: r,
            alpha_flag: false,
            dec_flag: false,
            origin: None,
            alpha_tick: 0,
            alpha_armed: false,
            dec_armed: false,
            stage: 0,
            inc_on: false,
            cnps: 0,
            cuts: 0,
        }
    }

    /// Applies the α ticks that passed while the α timer was idle (each saw no notification, so
    /// each decayed α): those strictly before `now`. Returns the last tick number applied.
    fn catch_up_alpha(&mut self, now: Time, cfg: &DcqcnConfig) -> u64 {
        let (Some(origin), false) = (self.origin, self.alpha_armed) else {
            return self.alpha_tick;
        };
        let ai = cfg.alpha_timer.0.max(1);
        let done = (now - origin).saturating_sub(1) / ai;
        let n = done.saturating_sub(self.alpha_tick);
        if n > 0 {
            self.alpha *= (1.0 - cfg.g).powi(n.min(i32::MAX as u64) as i32);
        }
        self.alpha_tick = self.alpha_tick.max(done);
        done
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn target(&self) -> f64 {
        self.rt
    }
}

impl ReactionPoint for DcqcnMellanox {
    #[inline]
    fn rate(&self) -> f64 {
        self.rc
    }

    #[inline]
    fn on_sent(&mut self, _bytes: u64, _cfg: &DcqcnConfig) {}

    fn on_cnp(&mut self, now: Time, cfg: &DcqcnConfig, arm: &mut Vec<Arm>) {
        self.cnps += 1;
        let ai = cfg.alpha_timer.0.max(1);
        let rdi = cfg.rate_decrease_interval.0.max(1);
        let Some(origin) = self.origin else {
            // First notification: α from its initial value, both periodic timers start, the rate
            // stays (HPCC's RateOnFirstCnp = 1) until the first check.
            self.origin = Some(now);
            self.alpha = cfg.initial_alpha;
            self.alpha_flag = false;
            self.dec_flag = true;
            self.rt = self.rc;
            self.alpha_tick = 0;
            self.alpha_armed = true;
            self.dec_armed = true;
            arm.push(Arm {
                at: now + ai,
                timer: CcTimer::Alpha,
                restart: true,
            });
            arm.push(Arm {
                at: now + rdi + 1_000,
                timer: CcTimer::RateDec,
                restart: true,
            });
            return;
        };
        if !self.alpha_armed {
            // The ticks since the last one applied saw no notification: α decayed at each.
            let done = self.catch_up_alpha(now, cfg);
            self.alpha_armed = true;
            arm.push(Arm {
                at: origin + (done + 1) * ai,
                timer: CcTimer::Alpha,
                restart: true,
            });
        }
        if !self.dec_armed {
            // The next check on the grid origin + 1 ns + k·rdi (k ≥ 1) at or after now.
            let base = origin + 1_000;
            let k = (now.saturating_sub(base)).div_ceil(rdi).max(1);
            self.dec_armed = true;
            arm.push(Arm {
                at: base + k * rdi,
                timer: CcTimer::RateDec,
                restart: true,
            });
        }
        self.alpha_flag = true;
        self.dec_flag = true;
    }

    fn on_timer(&mut self, now: Time, t: CcTimer, cfg: &DcqcnConfig, arm: &mut Vec<Arm>) -> bool {
        match t {
            CcTimer::Alpha => {
                self.alpha_tick += 1;
                if self.alpha_flag {
                    self.alpha = (1.0 - cfg.g) * self.alpha + cfg.g;
                    self.alpha_flag = false;
                    arm.push(Arm {
                        at: now + cfg.alpha_timer.0.max(1),
                        timer: CcTimer::Alpha,
                        restart: false,
                    });
                } else {
                    self.alpha *= 1.0 - cfg.g;
                    self.alpha_armed = false;
                }
                false
            }
            CcTimer::RateDec => {
                self.dec_armed = false;
                if self.dec_flag {
                    self.dec_flag = false;
                    // α as HPCC's ticks (each 1 ns or more before this check) left it.
                    self.catch_up_alpha(now, cfg);
                    if cfg.clamp_target_rate || self.stage != 0 {
                        self.rt = self.rc;
                    }
                    self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(cfg.min_rate.0 as f64);
                    self.cuts += 1;
                    self.stage = 0;
                    self.inc_on = true;
                    arm.push(Arm {
                        at: now + cfg.rate_timer.0,
                        timer: CcTimer::RateInc,
                        restart: true,
                    });
                    // HPCC checks again one interval later; a check with no notification does
                    // nothing, so the next notification arms it.
                    self.dec_armed = true;
                    arm.push(Arm {
                        at: now + cfg.rate_decrease_interval.0.max(1),
                        timer: CcTimer::RateDec,
                        restart: true,
                    });
                }
                false
            }
            CcTimer::RateInc => {
                if !self.inc_on {
                    return false;
                }
                let f = cfg.fast_recovery_steps;
                if self.stage == f {
                    self.rt = (self.rt + cfg.rate_ai.0 as f64).min(self.line_rate);
                } else if self.stage > f {
                    self.rt = (self.rt + cfg.rate_hai.0 as f64).min(self.line_rate);
                }
                self.rc = self.rc / 2.0 + self.rt / 2.0;
                self.stage = self.stage.saturating_add(1);
                if self.rc >= self.line_rate * 0.999_999 && self.rt >= self.line_rate * 0.999_999 {
                    // Back at line rate: nothing changes until the next cut.
                    self.rc = self.line_rate;
                    self.inc_on = false;
                } else {
                    arm.push(Arm {
                        at: now + cfg.rate_timer.0,
                        timer: CcTimer::RateInc,
                        restart: false,
                    });
                }
                true
            }
        }
    }

    fn cnps(&self) -> u64 {
        self.cnps
    }

    fn state(&self, now: Time, cfg: &DcqcnConfig) -> ReactionState {
        // α with the idle ticks before `now` applied, as `catch_up_alpha` would apply them.
        let mut alpha = self.alpha;
        if let (Some(origin), false) = (self.origin, self.alpha_armed) {
            let done = (now.saturating_sub(origin)).saturating_sub(1) / cfg.alpha_timer.0.max(1);
            let n = done.saturating_sub(self.alpha_tick);
            alpha *= (1.0 - cfg.g).powi(n.min(i32::MAX as u64) as i32);
        }
        ReactionState {
            rate: self.rc,
            target: self.rt,
            alpha,
            notifications: self.cnps,
            cuts: self.cuts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_topo::units::{Duration, Rate};

    const US: Time = 1_000_000;

    /// import-hpcc's settings for the anchors' config files.
    fn cfg() -> DcqcnConfig {
        DcqcnConfig {
            g: 1.0 / 256.0,
            alpha_timer: Duration(US),
            rate_decrease_interval: Duration(4 * US),
            rate_timer: Duration(300 * US),
            fast_recovery_steps: 1,
            rate_ai: Rate(20_000_000),
            rate_hai: Rate(200_000_000),
            min_rate: Rate(1_000_000_000),
            clamp_target_rate: false,
            byte_counter: braid_topo::units::Bytes(0),
            ..DcqcnConfig::default()
        }
    }

    /// Runs the armed timers in time order (restart voids older ones of a kind) until `until`,
    /// delivering notifications at the given times.
    fn drive(
        d: &mut DcqcnMellanox,
        c: &DcqcnConfig,
        cnps: &[Time],
        until: Time,
    ) -> Vec<(Time, f64)> {
        let mut pending: Vec<(Time, CcTimer, u32)> = Vec::new();
        let mut gens = [0u32; 3];
        let idx = |t: CcTimer| t as usize;
        let mut rates = vec![];
        let mut cn = cnps.iter().copied().peekable();
        let push =
            |arm: &mut Vec<Arm>, pending: &mut Vec<(Time, CcTimer, u32)>, gens: &mut [u32; 3]| {
                for a in arm.drain(..) {
                    if a.restart {
                        gens[idx(a.timer)] += 1;
                    }
                    pending.push((a.at, a.timer, gens[idx(a.timer)]));
                }
            };
        let mut arm = vec![];
        loop {
            pending.sort_by_key(|x| std::cmp::Reverse(x.0));
            let next_t = pending.last().map(|x| x.0).unwrap_or(Time::MAX);
            let next_c = cn.peek().copied().unwrap_or(Time::MAX);
            if next_t.min(next_c) > until {
                break;
            }
            if next_c <= next_t {
                cn.next();
                d.on_cnp(next_c, c, &mut arm);
                push(&mut arm, &mut pending, &mut gens);
            } else {
                let (t, k, g) = pending.pop().unwrap();
                if g == gens[idx(k)] {
                    d.on_timer(t, k, c, &mut arm);
                    push(&mut arm, &mut pending, &mut gens);
                    rates.push((t, d.rate()));
                }
            }
        }
        rates
    }

    #[test]
    fn first_notification_cuts_nothing_until_the_check() {
        let c = cfg();
        let mut d = DcqcnMellanox::new(100_000_000_000, &c);
        let mut arm = vec![];
        d.on_cnp(10 * US, &c, &mut arm);
        assert_eq!(d.rate(), 100e9);
        // α timer at +1 µs, decrease check at +4 µs + 1 ns.
        assert_eq!(arm[0].at, 11 * US);
        assert_eq!(arm[1].at, 14 * US + 1_000);
        // The check cuts by α/2 with α as the ticks left it: the first tick saw no notification
        // (the first one clears its flag), so α = 1 − g, ..., cut Rc·(1 − α/2).
        let mut d = DcqcnMellanox::new(100_000_000_000, &c);
        drive(&mut d, &c, &[10 * US], 15 * US);
        let alpha = (1.0 - c.g).powi(4);
        assert!(
            (d.rate() - 100e9 * (1.0 - alpha / 2.0)).abs() < 1.0,
            "{}",
            d.rate()
        );
        assert!((d.target() - 100e9).abs() < 1.0);
    }

    #[test]
    fn one_cut_per_check_whatever_the_notifications() {
        // Notifications every 100 ns from 50 ns to 19.95 µs (none on a tick): cuts only at the
        // checks (4 µs + 50 ns + 1 ns, then every 4 µs): five of them.
        let c = cfg();
        let mut d = DcqcnMellanox::new(100_000_000_000, &c);
        let cnps: Vec<Time> = (0..200).map(|i| 50_000 + i * 100_000).collect();
        let rates = drive(&mut d, &c, &cnps, 22 * US);
        let cuts: Vec<Time> = rates
            .windows(2)
            .filter(|w| w[1].1 < w[0].1)
            .map(|w| w[1].0)
            .collect();
        assert_eq!(
            cuts,
            (1..=5).map(|k| 51_000 + k * 4 * US).collect::<Vec<_>>(),
            "{rates:?}"
        );
        // α, tick by tick (tick k at 50 ns + k µs): up if a notification came since the last
        // tick, else down. Ticks 1–20 all saw one; tick 21 did not.
        let mut a: f64 = 1.0;
        for k in 1..=21u64 {
            let seen = cnps
                .iter()
                .any(|&t| t > 50_000 + (k - 1) * US && t < 50_000 + k * US);
            a = if seen {
                (1.0 - c.g) * a + c.g
            } else {
                (1.0 - c.g) * a
            };
        }
        assert!((d.alpha() - a).abs() < 1e-12, "{} vs {a}", d.alpha());
        // Each cut used the α of its time: 1 while notifications kept coming.
        assert!((d.rate() - 100e9 / 32.0).abs() < 1.0, "{}", d.rate());
    }

    #[test]
    fn recovery_stages_count_from_zero_and_hyper_steps_are_constant() {
        // F = 1: the first increase (stage 0) is fast recovery, the second (stage 1) additive,
        // then hyper increase by a constant rate_hai.
        let c = cfg();
        let mut d = DcqcnMellanox::new(100_000_000_000, &c);
        drive(&mut d, &c, &[0], 5 * US);
        let (rc0, rt0) = (d.rate(), d.target());
        assert!((rt0 - 100e9).abs() < 1.0 && rc0 < 60e9);
        let mut arm = vec![];
        let t0 = 4 * US + 1_000;
        d.on_timer(t0 + 300 * US, CcTimer::RateInc, &c, &mut arm);
        assert!((d.rate() - (rc0 + rt0) / 2.0).abs() < 1.0);
        assert!((d.target() - rt0).abs() < 1.0);
        // The next cut clamps the target (stage ≠ 0).
        let mut d2 = d.clone();
        let mut fresh = cfg();
        fresh.rate_ai = Rate(1_000_000_000);
        fresh.rate_hai = Rate(3_000_000_000);
        let rc1 = d2.rate();
        // stage 1: additive (Rt += AI), stage 2 and 3: hyper (Rt += HAI each, constant).
        d2.rt = 90e9;
        d2.on_timer(0, CcTimer::RateInc, &fresh, &mut arm);
        assert!((d2.target() - 91e9).abs() < 1.0);
        assert!((d2.rate() - (rc1 + 91e9) / 2.0).abs() < 1.0);
        d2.on_timer(0, CcTimer::RateInc, &fresh, &mut arm);
        assert!((d2.target() - 94e9).abs() < 1.0);
        d2.on_timer(0, CcTimer::RateInc, &fresh, &mut arm);
        assert!(
            (d2.target() - 97e9).abs() < 1.0,
            "hyper step is constant: {}",
            d2.target()
        );
    }

    #[test]
    fn idle_timers_resume_on_their_grid() {
        // A notification long after the first: the α ticks in between all decayed α, and the
        // next check falls on the first notification's 4 µs grid (+1 ns).
        let c = cfg();
        let mut d = DcqcnMellanox::new(100_000_000_000, &c);
        drive(&mut d, &c, &[0], 50 * US);
        let a_before = d.alpha();
        let mut arm = vec![];
        let t = 1_000 * US + 500_000; // 1000.5 µs
        d.on_cnp(t, &c, &mut arm);
        // drive() ran tick 1 (no notification pending: decay, then idle) and the check at
        // 4 µs + 1 ns, which applied ticks 2–4; ticks 5–1000 decay now.
        let want = a_before * (1.0 - c.g).powi(996);
        assert!((d.alpha() - want).abs() < 1e-12, "{} vs {want}", d.alpha());
        let alpha_at = arm.iter().find(|a| a.timer == CcTimer::Alpha).unwrap().at;
        let dec_at = arm.iter().find(|a| a.timer == CcTimer::RateDec).unwrap().at;
        assert_eq!(alpha_at, 1_001 * US);
        assert_eq!(dec_at, 1_004 * US + 1_000);
    }
}
