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
use crate::host::cap_solve;
use crate::problem::{Layout, Problem};
use crate::scaled::Scaled;
use rayon::prelude::*;
use std::time::Instant;

/// Evaluate UB(nu) (scaled objective units); returns (UB, x(nu), z(nu) for all rows).
pub fn upper_bound(sc: &Scaled, lay: &Layout, nu: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
    let (n, m) = (sc.n, sc.m);
    let nn = n * m;
    // q = P^T nu per entry
    let q: Vec<f64> = if lay.app_tiled {
        let mut q = vec![0.0; nn];
        crate::tiles::x_linear(lay, 1.0, &[], nu, &[], &mut q);
        q
    } else {
        (0..nn)
            .into_par_iter()
            .with_min_len(1024)
            .map(|k| {
                let mut s = 0.0;
                for t in lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize {
                    s += lay.pair_coef[t] * nu[lay.pair_row[t] as usize];
                }
                s
            })
            .collect()
    };
    let mut x = vec![0.0; nn];
    let mut z = vec![0.0; lay.rows];
    let xpart: f64 = x
        .par_chunks_mut(m)
        .enumerate()
        .map(|(i, xs)| {
            let k0 = i * m;
            let ent = |j: usize| {
                let k = k0 + j;
                (sc.w[k], 0.0, 0.0, q[k], sc.lo[k], sc.hi[k])
            };
            cap_solve(&sc.al, m, ent, sc.q[i], 0.0, xs);
            let mut v = 0.0;
            for j in 0..m {
                let k = k0 + j;
                if sc.w[k] > 0.0 {
                    v += sc.w[k] * sc.al.utility(xs[j]);
                }
                v -= q[k] * xs[j];
            }
            v
        })
        .sum();
    let (zc, zl) = z.split_at_mut(nn);
    let zpart: f64 = zc
        .par_chunks_mut(m)
        .enumerate()
        .map(|(i, zs)| {
            let k0 = i * m;
            let ent = |j: usize| {
                let r = k0 + j;
                (0.0, 2.0 * sc.beta[r], 0.0, -nu[r], 0.0, f64::INFINITY)
            };
            cap_solve(&sc.al, m, ent, sc.c[i], 0.0, zs);
            // rows without a CQ utility (inactive entries) take the leftover capacity at the
            // highest positive price: the sup of a linear term is at a vertex
            let mut best: Option<usize> = None;
            for j in 0..m {
                let r = k0 + j;
                if sc.beta[r] == 0.0 && nu[r] > 0.0 && best.map_or(true, |b| nu[k0 + b] < nu[r]) {
                    best = Some(j);
                }
            }
            if let Some(b) = best {
                let left = sc.c[i] - zs.iter().sum::<f64>();
                if left > 0.0 {
                    zs[b] += left;
                }
            }
            let mut v = 0.0;
            for j in 0..m {
                let r = k0 + j;
                if sc.beta[r] > 0.0 {
                    v -= sc.beta[r] / (zs[j] * zs[j]);
                }
                v += nu[r] * zs[j];
            }
            v
        })
        .sum();
    let mut lpart = 0.0;
    // only the link rows: a shard's rows past its CQ rows are other ranks' rows (ghosts), whose
    // terms their owners count
    for (e, zv) in zl.iter_mut().take(sc.link_cap.len()).enumerate() {
        let r = nn + e;
        *zv = if nu[r] > 0.0 { sc.link_cap[e] } else { 0.0 };
        lpart += nu[r] * *zv;
    }
    (xpart + zpart + lpart, x, z)
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
