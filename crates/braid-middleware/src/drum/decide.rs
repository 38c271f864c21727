//! The agent's rate decision behind a small trait: given what the IO monitor observed of each
//! connection, the WQE rates x (how fast the scheduler fetches a connection's WRs from the pool),
//! the CQE rates z (how fast the poller hands it completions) and the top-k active set.
//!
//! [`LocalSolve`] decides on the host's own one-sided instance with `braid_drum`'s exact solver
//! (one host, one entry per connection: weighted alpha-fair WQE utility, -beta/z^2 CQ utility,
//! `sum x <= Q`, `sum z <= C`, `z = x`), after `braid_drum::select::select_topk` chose the
//! active set with aging. `OnlineSolve` (`drum/online/`) runs DRUM's distributed solver
//! (`braid_drum::online`) and exchanges its control messages with the peers of two-sided
//! traffic over control QPs of its own; `decider = "local" | "online"` picks one (the kind's
//! config is the factory).

use super::DrumConfig;
use braid_drum::problem::Problem;
use braid_verbs::rendezvous::SharedBoard;
use braid_verbs::{BuildError, Caps, Event, Verbs};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The unit rates are solved in: millions per second.
const MOPS: f64 = 1e6;

/// What the IO monitor observed of one connection since the last decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Connection id (the virtual QP number).
    pub conn: u32,
    pub weight: f64,
    /// WRs waiting in the pool now.
    pub backlog: usize,
    /// WRs the tenant posted since the last decision.
    pub arrivals: u64,
    /// Of the WRs in the pool since the last decision, those that waited for a WQE token: the
    /// connection was limited by its decided rate, not by its demand.
    pub paced: u64,
    /// Length of that window, picoseconds.
    pub window_ps: u64,
    /// The peer connection: (peer host, the peer's connection id).
    pub remote: Option<(u32, u32)>,
    /// WRs posted since the connection was made, and of them those whose completion lands at
    /// the peer (SEND, *_WITH_IMM: two-sided).
    pub posted: u64,
    /// Payload bytes of the `posted` WRs.
    pub posted_bytes: u64,
    pub two_sided: u64,
    /// Of `posted`, the signaled WRs (a completion each for the tenant).
    pub signaled: u64,
    /// Two-sided messages received from the peer since the connection was made.
    pub received: u64,
    /// The UDP source port of the shared QP carrying it (what ECMP hashes), once bound.
    pub sport: Option<u16>,
}

/// Rates per connection, in the order of the stats given.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// WQE rates, work requests per second (0: not scheduled this round).
    pub x: Vec<f64>,
    /// CQE rates, completions per second.
    pub z: Vec<f64>,
    pub active: Vec<bool>,
    /// The utility reached (the solver's objective), for reports.
    pub objective: f64,
}

/// Decides the rates of a host's connections.
///
/// A decider that talks to its peers (the online solver) gets the agent's verbs through the
/// hooks: `start` once, `on_event` for every event the agent does not own itself (it returns
/// true for its own completions and timers), `drive` after every decision. `wants_decide` asks
/// the agent to decide again at once (new rates from a finished round).
pub trait RateDecider {
    fn name(&self) -> &'static str;
    fn decide(&mut self, now: u64, stats: &[Stat]) -> Decision;
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    fn start(&mut self, _v: &mut dyn Verbs) {}
    fn on_event(&mut self, _v: &mut dyn Verbs, _e: &Event) -> bool {
        false
    }
    fn drive(&mut self, _v: &mut dyn Verbs) {}
    fn wants_decide(&self) -> bool {
        false
    }
    /// Tables of rows the decider measured (the online solver's rounds), handed to the runner
    /// through the agent (`Middleware::tables`).
    fn tables(&self) -> Vec<braid_verbs::LayerTable> {
        Vec::new()
    }
    /// A decider with a CPU model of its own (the online solver) returns the CPU its work took
    /// since the last call, picoseconds; the agent charges it as the `solver` component and
    /// then charges no `qp_sche` for its decisions. `None` (the default): the agent charges
    /// `solve_ns_per_conn` per connection of each decision as `qp_sche`.
    fn take_cpu_ps(&mut self) -> Option<u64> {
        None
    }
}

/// What a decider's factory gets from the host it is built on.
pub struct DeciderCtx {
    pub board: SharedBoard,
    /// This host's address (what peers name it by).
    pub host: u32,
    pub caps: Caps,
    /// The run's fabric links (asked for only by a decider that uses them).
    pub fabric: Option<super::fabric_model::FabricSlot>,
}

/// A decider's config is its factory.
pub trait DeciderFactory {
    fn build(&self, cfg: &DrumConfig, ctx: &DeciderCtx)
        -> Result<Box<dyn RateDecider>, BuildError>;
}

/// `decider = "local" | "online"` in the drum config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeciderKind {
    /// [`LocalSolve`]: the host's own one-sided instance, solved exactly.
    #[default]
    Local,
    /// `OnlineSolve` (`drum/online/`): DRUM's distributed ADMM with the peers of two-sided
    /// traffic, its parameters in the `online` table.
    Online,
    /// `FabricSolve` (`drum/fabric.rs`): a coordinator solves every host's instance with the
    /// fabric's links (`braid_drum`'s offline ADMM) and publishes the rates on the board.
    Fabric,
}

impl DeciderKind {
    pub fn factory<'a>(&self, cfg: &'a DrumConfig) -> &'a dyn DeciderFactory {
        match self {
            DeciderKind::Local => &LocalFactory,
            DeciderKind::Online => &cfg.online,
            DeciderKind::Fabric => &super::fabric::FabricFactory,
        }
    }
}

/// [`LocalSolve`]'s factory (it has no parameters of its own).
pub struct LocalFactory;

impl DeciderFactory for LocalFactory {
    fn build(
        &self,
        cfg: &DrumConfig,
        _ctx: &DeciderCtx,
    ) -> Result<Box<dyn RateDecider>, BuildError> {
        Ok(Box::new(LocalSolve::new(cfg)))
    }
}

/// The top-k selection with aging both deciders use: backlogged connections rank by weight,
/// idle ones below them; aging forces a connection in after `max_wait` rounds out. All active
/// when `k` is 0 or not exceeded.
pub fn select_active(
    ages: &mut BTreeMap<u32, u32>,
    k: usize,
    max_wait: u32,
    stats: &[Stat],
) -> Vec<bool> {
    let m = stats.len();
    if k == 0 || m <= k {
        ages.clear();
        return vec![true; m];
    }
    let scores: Vec<f64> = stats
        .iter()
        .map(|s| {
            if s.backlog > 0 {
                s.weight
            } else {
                s.weight * 1e-3
            }
        })
        .collect();
    let mut age: Vec<u32> = stats
        .iter()
        .map(|s| ages.get(&s.conn).copied().unwrap_or(0))
        .collect();
    let a = braid_drum::select::select_topk(1, m, k, &scores, &mut age, max_wait);
    *ages = stats.iter().zip(age).map(|(s, a)| (s.conn, a)).collect();
    a
}

/// Host-local decision: top-k selection with aging, then the exact one-sided solve with
/// demand caps (two passes: connections that need less than their share keep it, the rest share
/// what those leave).
pub struct LocalSolve {
    q: f64,
    c: f64,
    alpha: f64,
    beta: f64,
    k: usize,
    max_wait: u32,
    ages: BTreeMap<u32, u32>,
    solves: u64,
    failures: u64,
    last_objective: f64,
}

impl LocalSolve {
    pub fn new(cfg: &DrumConfig) -> Self {
        LocalSolve {
            q: cfg.wqe_rate,
            c: cfg.cqe_rate,
            alpha: cfg.alpha,
            beta: cfg.beta,
            k: cfg.qp_budget as usize,
            max_wait: cfg.max_wait,
            ages: BTreeMap::new(),
            solves: 0,
            failures: 0,
            last_objective: 0.0,
        }
    }

    /// The exact solve on `w` with capacities (q, c) in ops/s; None if the solver refuses.
    /// The instance is solved in Mops, as the online decider's is: in ops/s, w x^(1-alpha) of
    /// alpha = 50 is ~1e-340, outside double precision, and the solver refuses it; `beta` is
    /// per (Mops)^-2 under both deciders.
    fn solve(&mut self, w: &[f64], q: f64, c: f64) -> Option<(Vec<f64>, Vec<f64>, f64)> {
        let (q, c) = (q / MOPS, c / MOPS);
        let m = w.len();
        let p = Problem {
            n: 1,
            m,
            alpha: self.alpha,
            beta: self.beta,
            w: w.to_vec(),
            a: vec![1.0; m],
            q_cap: vec![q],
            c_cap: vec![c],
            guarantee: vec![],
            active: vec![],
            preempt: vec![],
            two_sided: false,
            traffic: None,
            links: None,
        };
        self.solves += 1;
        match braid_drum::solve_reference(&p) {
            Ok(r) => Some((
                r.x.iter().map(|x| x * MOPS).collect(),
                r.z.iter().map(|z| z * MOPS).collect(),
                r.objective,
            )),
            Err(_) => {
                self.failures += 1;
                None
            }
        }
    }
}

impl RateDecider for LocalSolve {
    fn name(&self) -> &'static str {
        "local_solve"
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("solves", self.solves as f64),
            ("solve_failures", self.failures as f64),
            ("objective", self.last_objective),
        ]
    }

    fn decide(&mut self, _now: u64, stats: &[Stat]) -> Decision {
        let m = stats.len();
        if m == 0 {
            return Decision::default();
        }
        let active = select_active(&mut self.ages, self.k, self.max_wait, stats);
        let idx: Vec<usize> = (0..m).filter(|&j| active[j]).collect();
        let mut x = vec![0.0; m];
        let mut z = vec![0.0; m];
        // Demand: unbounded while backlogged, else twice the observed arrival rate.
        let demand = |s: &Stat| {
            if s.backlog > 0 || s.window_ps == 0 {
                f64::INFINITY
            } else {
                2.0 * s.arrivals as f64 / (s.window_ps as f64 * 1e-12)
            }
        };
        let w: Vec<f64> = idx.iter().map(|&j| stats[j].weight).collect();
        let Some((x0, z0, obj)) = self.solve(&w, self.q, self.c) else {
            // Fall back to equal shares.
            for &j in &idx {
                x[j] = self.q / idx.len() as f64;
                z[j] = self.c / idx.len() as f64;
            }
            return Decision {
                x,
                z,
                active,
                objective: f64::NAN,
            };
        };
        self.last_objective = obj;
        let mut capped_x = 0.0;
        let mut capped_z = 0.0;
        let mut rest = Vec::new();
        for (i, &j) in idx.iter().enumerate() {
            let d = demand(&stats[j]);
            if d < x0[i] {
                // Needs less than its share: keeps the share (it may grow into it); the others
                // divide what it leaves.
                x[j] = x0[i];
                z[j] = z0[i];
                capped_x += d;
                capped_z += d;
            } else {
                rest.push((i, j));
            }
        }
        if !rest.is_empty() && rest.len() < idx.len() {
            let w2: Vec<f64> = rest.iter().map(|&(i, _)| w[i]).collect();
            let q2 = (self.q - capped_x).max(self.q * 1e-3);
            let c2 = (self.c - capped_z).max(self.c * 1e-3);
            if let Some((x1, z1, o)) = self.solve(&w2, q2, c2) {
                self.last_objective = o;
                for (r, &(_, j)) in rest.iter().enumerate() {
                    x[j] = x1[r];
                    z[j] = z1[r];
                }
            } else {
                for &(i, j) in &rest {
                    x[j] = x0[i];
                    z[j] = z0[i];
                }
            }
        } else {
            for &(i, j) in &rest {
                x[j] = x0[i];
                z[j] = z0[i];
            }
        }
        Decision {
            x,
            z,
            active,
            objective: self.last_objective,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(conn: u32, weight: f64, backlog: usize, arrivals: u64) -> Stat {
        Stat {
            conn,
            weight,
            backlog,
            arrivals,
            paced: 0,
            window_ps: 1_000_000_000, // 1 ms
            remote: None,
            sport: None,
            posted: 0,
            posted_bytes: 0,
            two_sided: 0,
            signaled: 0,
            received: 0,
        }
    }

    #[test]
    fn proportional_fairness_splits_q_by_weight() {
        // Log utility, sum x <= Q, no CQ term: x_j = Q w_j / sum w (the analytical optimum).
        let cfg = DrumConfig {
            wqe_rate: 12e6,
            cqe_rate: 1e9,
            ..DrumConfig::default()
        };
        let mut d = LocalSolve::new(&cfg);
        let s = [stat(1, 1.0, 5, 0), stat(2, 2.0, 5, 0), stat(3, 3.0, 5, 0)];
        let r = d.decide(0, &s);
        for (j, want) in [2e6, 4e6, 6e6].into_iter().enumerate() {
            assert!((r.x[j] - want).abs() / want < 1e-6, "{:?}", r.x);
            assert!((r.z[j] - r.x[j]).abs() / want < 1e-6, "z = x one-sided");
        }
        // The tighter of the two capacities binds: C = 6e6 < Q.
        let mut d = LocalSolve::new(&DrumConfig {
            wqe_rate: 12e6,
            cqe_rate: 6e6,
            ..DrumConfig::default()
        });
        let r = d.decide(0, &s);
        let sum: f64 = r.x.iter().sum();
        assert!((sum - 6e6).abs() / 6e6 < 1e-6, "{sum}");
    }

    #[test]
    fn a_connection_below_its_share_leaves_the_rest_to_the_others() {
        let cfg = DrumConfig {
            wqe_rate: 9e6,
            cqe_rate: 1e9,
            ..DrumConfig::default()
        };
        let mut d = LocalSolve::new(&cfg);
        // Connection 1 posted 500 WRs in 1 ms (demand 2 x 0.5 Mops = 1 Mops) and has nothing
        // waiting; 2 and 3 are backlogged. Shares 3 Mops each; 1 keeps its 3, the others split
        // 9 - 1 = 8 Mops.
        let s = [stat(1, 1.0, 0, 500), stat(2, 1.0, 9, 0), stat(3, 1.0, 9, 0)];
        let r = d.decide(0, &s);
        assert!((r.x[0] - 3e6).abs() < 1.0, "{:?}", r.x);
        assert!((r.x[1] - 4e6).abs() / 4e6 < 1e-6, "{:?}", r.x);
        assert!((r.x[2] - 4e6).abs() / 4e6 < 1e-6, "{:?}", r.x);
    }

    #[test]
    fn topk_leaves_out_all_but_k_and_ages_them_in() {
        let cfg = DrumConfig {
            qp_budget: 2,
            max_wait: 2,
            ..DrumConfig::default()
        };
        let mut d = LocalSolve::new(&cfg);
        let s: Vec<Stat> = (0..5).map(|j| stat(j, 1.0 + j as f64, 3, 0)).collect();
        let mut served = [0u32; 5];
        for round in 0..12 {
            let r = d.decide(round, &s);
            assert_eq!(r.active.iter().filter(|&&a| a).count(), 2);
            for j in 0..5 {
                assert_eq!(r.x[j] > 0.0, r.active[j]);
                served[j] += r.active[j] as u32;
            }
        }
        assert!(served.iter().all(|&n| n > 0), "{served:?}");
    }
}
