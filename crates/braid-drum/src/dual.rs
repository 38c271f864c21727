//! Lagrangian dual of the coupling z = P x (and R x <= L): the upper bound used as a duality-gap
//! certificate for every method, and the dual-decomposition subgradient baseline.
//!
//! With prices nu on the coupling rows (scaled units),
//! ```text
//!   UB(nu) = sum_i max_{x_i in X_i} [ f_i(x_i) - (P^T nu)_i . x_i ]
//!          + sum_i max_{z_i in Z_i} [ g_i(z_i) + nu_i . z_i ]  +  sum_links max(0, nu_e L_e)
//! ```
//! is >= the optimum for every nu (weak duality; X_i, Z_i compact so every term is finite).
//! Its gradient is z(nu) - P x(nu), which the subgradient baseline follows.

use crate::admm::{recover, SolveResult, Trace};
use crate::problem::{Layout, Problem};
use crate::scaled::Scaled;
use std::time::Instant;

/// Evaluate UB(nu) (scaled objective units); returns (UB, x(nu), z(nu) for all rows). The bound
/// holds for every nu whatever the accuracy of the inner searches ([`crate::bound`]).
pub fn upper_bound(sc: &Scaled, lay: &Layout, nu: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
    crate::bound::rigorous_upper_bound(sc, lay, nu, None)
}

/// `upper_bound` with a primal point (all entries, scaled) that seeds the preemption direction:
/// the solver's iterate makes the bound tight near the optimum.
pub fn upper_bound_at(
    sc: &Scaled,
    lay: &Layout,
    nu: &[f64],
    hint: &[f64],
) -> (f64, Vec<f64>, Vec<f64>) {
    crate::bound::rigorous_upper_bound(sc, lay, nu, Some(hint))
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DualOptions {
    /// step size constant: step_k = step / sqrt(k) (scaled units), the paper's 1e-3
    pub step: f64,
    pub max_iter: usize,
    pub scaling: bool,
    pub trace: bool,
    pub reference: Option<f64>,
    pub gap_tol: Option<f64>,
}

impl Default for DualOptions {
    fn default() -> Self {
        DualOptions {
            step: 1e-3,
            max_iter: 1000,
            scaling: true,
            trace: true,
            reference: None,
            gap_tol: None,
        }
    }
}

/// Dual decomposition with diminishing subgradient steps on the coupling prices.
pub fn dual_decomposition(p: &Problem, lay: &Layout, opt: &DualOptions) -> SolveResult {
    let sc = Scaled::new(p, lay, opt.scaling);
    let nn = p.entries();
    let t0 = Instant::now();
    let wsum = p.weight_sum().max(1e-300);
    let mut nu = vec![0.0; lay.rows];
    let mut trace = Trace::default();
    let mut best_ub = f64::INFINITY;
    let mut best_feas = f64::NEG_INFINITY;
    let mut best_x = Vec::new();
    let mut last_x = Vec::new();
    let mut last_z = Vec::new();
    let mut converged = false;
    let mut iters = 0;
    for k in 1..=opt.max_iter.max(1) {
        iters = k;
        let (ub, x, z) = upper_bound(&sc, lay, &nu);
        let px = lay.row_sums(&x);
        let step = opt.step / (k as f64).sqrt();
        let mut r2 = 0.0;
        for r in 0..lay.rows {
            let g = z[r] - px[r];
            r2 += g * g;
            nu[r] -= step * g;
        }
        best_ub = best_ub.min(ub);
        let (xf, zf) = recover(&sc, lay, &x);
        let ff = sc.to_user(sc.objective(&xf, &zf));
        if ff > best_feas {
            best_feas = ff;
            best_x = xf;
        }
        trace.r_pri.push(r2.sqrt());
        trace.r_dual.push(0.0);
        trace.eps_pri.push(0.0);
        trace.eps_dual.push(0.0);
        trace.rho.push(step);
        trace.objective.push(sc.to_user(ub));
        trace.objective_feasible.push(ff);
        let mut stop = false;
        if let Some(fs) = opt.reference {
            let g = (fs - ff) / wsum;
            trace.gap.push(g);
            if let Some(tol) = opt.gap_tol {
                stop = g <= tol;
            }
        }
        trace.time.push(t0.elapsed().as_secs_f64());
        last_x = x;
        last_z = z;
        if stop {
            converged = true;
            break;
        }
    }
    let solve_time = t0.elapsed().as_secs_f64();
    let sx = sc.sx;
    let (xf, zf) = recover(&sc, lay, &best_x);
    let _ = nn;
    SolveResult {
        method: "dual".into(),
        x: last_x.iter().map(|v| v * sx).collect(),
        z: last_z[..nn].iter().map(|v| v * sx).collect(),
        x_feasible: xf.iter().map(|v| v * sx).collect(),
        z_feasible: zf[..nn].iter().map(|v| v * sx).collect(),
        objective: sc.to_user(best_ub),
        objective_feasible: best_feas,
        dual_bound: Some(sc.to_user(best_ub)),
        iterations: iters,
        converged,
        trace,
        setup_time: 0.0,
        solve_time,
        lambda: vec![],
        mu: vec![],
        rho_final: 0.0,
    }
}
