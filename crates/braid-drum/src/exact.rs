//! Exact per-host solve of the one-sided problem (the reference for true gaps at any scale).
//!
//! One-sided, z = a o x, so the problem separates by host:
//! ```text
//!   max sum_j w_j U(x_j) - beta sum_j 1/(a_j x_j)^2   s.t.  sum x <= Q,  sum a x <= C,  x >= g
//! ```
//! KKT: `w x^-alpha + (2 beta / a^2) x^-3 = lam + mu a` per entry (scalar kernel), and the two
//! multipliers are found by nested safeguarded Newton: mu*(lam) for the CQE capacity inside, lam
//! for the WQE capacity outside, whose derivative is the exact
//! `dS/dlam = -(sum h - (sum a h)^2 / sum a^2 h)` (or `-sum h` when mu* = 0).
//! The duality gap is evaluated from the multipliers (complementary slackness).

use crate::admm::{SolveResult, Trace};
use crate::capacity::search;
use crate::problem::{DrumError, Layout, Problem, Result};
use crate::scalar::solve;
use crate::scaled::Scaled;
use rayon::prelude::*;
use std::time::Instant;

pub fn solve_exact(p: &Problem) -> Result<SolveResult> {
    if p.two_sided {
        return Err(DrumError::new(
            "method",
            "the exact per-host solver is for one-sided operations; use admm for two-sided",
        ));
    }
    if p.links.is_some() {
        return Err(DrumError::new(
            "method",
            "the exact per-host solver does not handle fabric links (they couple hosts); use admm",
        ));
    }
    if p.has_preempt() {
        return Err(DrumError::new(
            "method",
            "the exact per-host solver does not handle the preemption (SOC) constraint; use admm",
        ));
    }
    let t0 = Instant::now();
    let lay = Layout::build(p);
    let sc = Scaled::new(p, &lay, true);
    let (n, m) = (p.n, p.m);
    let nn = n * m;
    let mut x = vec![0.0; nn];
    let mut lam = vec![0.0; n];
    let mut mu = vec![0.0; n];
    let a = &p.a;
    x.par_chunks_mut(m)
        .zip(lam.par_iter_mut())
        .zip(mu.par_iter_mut())
        .enumerate()
        .for_each(|(i, ((xs, l), u))| {
            let (lv, uv) = solve_host(&sc, a, i, xs);
            *l = lv;
            *u = uv;
        });
    let z: Vec<f64> = (0..nn).map(|k| a[k] * x[k]).collect();
    let fs = sc.objective(&x, &z);
    // dual function value at (lam, mu): L(x*) since x* maximises the Lagrangian
    let mut dual = fs;
    for i in 0..n {
        let sx: f64 = x[i * m..(i + 1) * m].iter().sum();
        let sz: f64 = z[i * m..(i + 1) * m].iter().sum();
        dual += lam[i] * (sc.q[i] - sx) + mu[i] * (sc.c[i] - sz);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let sx = sc.sx;
    let lf = sc.sf / sx;
    let obj = sc.to_user(fs);
    let xu: Vec<f64> = x.iter().map(|v| v * sx).collect();
    let zu: Vec<f64> = z.iter().map(|v| v * sx).collect();
    Ok(SolveResult {
        method: "exact".into(),
        x: xu.clone(),
        z: zu.clone(),
        x_feasible: xu,
        z_feasible: zu,
        objective: obj,
        objective_feasible: obj,
        dual_bound: Some(sc.to_user(dual)),
        iterations: 1,
        converged: true,
        trace: Trace::default(),
        setup_time: 0.0,
        solve_time: elapsed,
        lambda: lam.iter().map(|v| v * lf).collect(),
        mu: mu.iter().map(|v| v * lf).collect(),
        rho_final: 0.0,
    })
}

/// Solve host i; returns (lam, mu) in scaled units, x in scaled units.
pub fn solve_host(sc: &Scaled, a: &[f64], i: usize, xs: &mut [f64]) -> (f64, f64) {
    let m = sc.m;
    let k0 = i * m;
    let al = sc.al;
    let mut mu_last = 0.0f64;
    // per-entry data
    let s: Vec<f64> = (0..m)
        .map(|j| 2.0 * sc.beta[k0 + j] / (a[k0 + j] * a[k0 + j]))
        .collect();
    let mut mu_warm = 0.0;
    let lam = {
        let mut eval_outer = |lam: f64| -> (f64, f64) {
            let mut acc = [0.0f64; 3];
            let mu = search(sc.c[i], 0.0, mu_warm, |mu| {
                let mut sz = 0.0;
                let mut d = 0.0;
                let mut h0 = 0.0;
                let mut h1 = 0.0;
                for j in 0..m {
                    let k = k0 + j;
                    let aj = a[k];
                    let r = solve(
                        &al,
                        sc.w[k],
                        s[j],
                        0.0,
                        lam + mu * aj,
                        sc.lo[k],
                        sc.hi[k],
                        xs[j],
                    );
                    xs[j] = r.x;
                    sz += aj * r.x;
                    d += aj * aj * r.h;
                    h0 += r.h;
                    h1 += aj * r.h;
                }
                acc = [h0, h1, d];
                (sz, d)
            });
            mu_warm = mu;
            mu_last = mu;
            let sx: f64 = xs.iter().sum();
            let dd = if mu > 0.0 && acc[2] > 0.0 {
                acc[0] - acc[1] * acc[1] / acc[2]
            } else {
                acc[0]
            };
            (sx, dd.max(0.0))
        };
        search(sc.q[i], 0.0, 0.0, &mut eval_outer)
    };
    (lam, mu_last)
}
