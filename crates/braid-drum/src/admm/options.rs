//! ADMM's options, stopping rule, per-iteration trace and result.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopRule {
    /// Boyd et al.: ||r|| <= sqrt(p) eps_abs + eps_rel max(||Ax||, ||y||), same for s.
    Boyd,
    /// The paper's rule: ||r|| <= eps_abs * n and ||s|| <= eps_abs * n.
    Paper,
    /// Run max_iter iterations (or to the gap target).
    None,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdmmOptions {
    /// initial penalty in scaled units; <= 0 means automatic
    pub rho: f64,
    /// residual balancing (adaptive rho)
    pub adaptive: bool,
    pub balance_mu: f64,
    pub balance_tau: f64,
    /// over-relaxation in [1, 2)
    pub relax: f64,
    /// scale the variables (otherwise the solver sees the raw units, like the paper)
    pub scaling: bool,
    pub eps_abs: f64,
    pub eps_rel: f64,
    pub stop: StopRule,
    pub max_iter: usize,
    pub min_iter: usize,
    /// probability that a host's x-update result is lost in an iteration
    pub loss_prob: f64,
    pub loss_seed: u64,
    /// compute the objective (and the feasible objective/gap) at every iteration
    pub trace: bool,
    /// known optimum f* (user units) for the normalized gap
    pub reference: Option<f64>,
    /// stop as soon as the normalized gap (needs `reference`) is below this
    pub gap_tol: Option<f64>,
    /// compute the dual bound at the end
    pub dual_bound: bool,
    /// per-row penalty (diagonal preconditioning by the utility curvature of each row)
    pub row_scaling: bool,
    /// every this many iterations, certify the gap without knowing f*: the duality gap
    /// `(UB(ν = ρv) − f(x̃))/Σw` of the feasible recovery x̃ (0: never, unless
    /// `certified_gap_tol` is set, then every 25)
    pub certify_every: usize,
    /// stop at the first check whose certified gap is below this (an upper bound on the true
    /// normalized gap, so the stop is safe where f* is unknown: two-sided, large)
    pub certified_gap_tol: Option<f64>,
    /// stop at the first check whose *relative* certified gap `(UB − f(x̃))/|f(x̃)|` is below
    /// this. Unit-free for α ≠ 1: the objective and the gap both scale as `s^{1−α}` when the
    /// rates are restated in units s, while `Σw` does not, so at α ≫ 1 `certified_gap_tol`
    /// asks for more than double precision where rates are below the unit (a binding CQE
    /// capacity) and for nothing where they are above it (docs/drum.md, "Large α"). Not useful
    /// where f(x̃) is near 0 (α = 1 with rates near the unit): take `certified_gap_tol` there.
    pub certified_rel_gap_tol: Option<f64>,
    /// two-sided: one penalty per pair, its sender's (`Admm::set_pair_penalties`), instead of
    /// one per row shared by all the row's senders
    pub pair_penalty: bool,
}

impl Default for AdmmOptions {
    fn default() -> Self {
        AdmmOptions {
            rho: 0.0,
            adaptive: true,
            balance_mu: 10.0,
            balance_tau: 2.0,
            relax: 1.6,
            scaling: true,
            eps_abs: 1e-6,
            eps_rel: 1e-6,
            stop: StopRule::Boyd,
            max_iter: 5000,
            min_iter: 1,
            loss_prob: 0.0,
            loss_seed: 0,
            trace: true,
            reference: None,
            gap_tol: None,
            dual_bound: true,
            row_scaling: true,
            certify_every: 0,
            certified_gap_tol: None,
            certified_rel_gap_tol: None,
            pair_penalty: false,
        }
    }
}

/// Per-iteration record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Trace {
    /// objective at the iterate (x, z), user units
    pub objective: Vec<f64>,
    /// objective at the feasible recovery of x, user units
    pub objective_feasible: Vec<f64>,
    /// (f* - feasible objective) / sum w, when a reference is known
    pub gap: Vec<f64>,
    pub r_pri: Vec<f64>,
    pub r_dual: Vec<f64>,
    pub eps_pri: Vec<f64>,
    pub eps_dual: Vec<f64>,
    pub rho: Vec<f64>,
    /// wall time since the start of the iterations, seconds
    pub time: Vec<f64>,
    /// hosts whose result was lost
    pub lost: Vec<u32>,
    /// the iterations at which the gap was certified (`certify_every`) ...
    pub certified_iter: Vec<u32>,
    /// ... and the certified gap there, `(UB − f(x̃))/Σw` (≥ the true normalized gap)
    pub certified_gap: Vec<f64>,
    /// ... and the relative certified gap there, `(UB − f(x̃))/|f(x̃)|` (≥ the true relative gap
    /// `(f* − f(x̃))/|f(x̃)|`)
    #[serde(default)]
    pub certified_rel_gap: Vec<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SolveResult {
    pub method: String,
    /// WQE rates (user units)
    pub x: Vec<f64>,
    /// CQE rates from the solver's z iterate (user units; CQ rows)
    pub z: Vec<f64>,
    /// feasible allocation recovered from x, and its z = P x
    pub x_feasible: Vec<f64>,
    pub z_feasible: Vec<f64>,
    pub objective: f64,
    pub objective_feasible: f64,
    /// upper bound on the optimum from the dual variables (user units)
    pub dual_bound: Option<f64>,
    pub iterations: usize,
    pub converged: bool,
    pub trace: Trace,
    pub setup_time: f64,
    pub solve_time: f64,
    /// WQE capacity multipliers per host (user units: utility per op/s)
    pub lambda: Vec<f64>,
    /// CQE capacity multipliers per host
    pub mu: Vec<f64>,
    pub rho_final: f64,
}
