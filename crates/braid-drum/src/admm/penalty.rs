//! The automatic penalty: curvature per row at the equal split, its sampled median, and the
//! per-row scales (diagonal preconditioning).

use crate::problem::Layout;
use crate::scaled::Scaled;

/// Automatic penalty (scaled units), in three steps so that a shard can take the median over
/// the whole instance: per CQ row, the curvature of its own entry's utility at the equal split
/// divided by the sum of its squared coefficients (the curvature seen in z; NaN for link rows
/// and inactive entries) ...
///
/// With `z0` (the CQ row sums P x0 at the equal split, see [`equal_split`]; both operation
/// types pass it), the row's value is the larger of that and 3× the geometric mean of it with
/// the curvature of the CQ utility at z0, `6 β / z0⁴`: the penalty ADMM needs sits between the
/// curvatures of its two blocks, and on the paper's instances the CQ side is the stiffer one as
/// m grows (its curvature over the utility's, in the same units: ~0.1 at m = 50, ~10 at
/// m = 500, ~10³ at m = 5000, since the per-application rates fall as 1/m and the CQ curvature
/// grows as z⁻⁴). Two-sided, from the utility's curvature alone residual balancing took > 1400
/// iterations to a 10⁻⁴ gap at n = 100, m = 5000; from this start, ~400. One-sided it starts
/// ρ ~80× higher at m = 5000 (the balancing used to double it 8 times in the first 15
/// iterations, each then costing 2–5 capacity-search passes per host): 56 → 44 iterations at
/// n = 1000, m = 5000, 32 → 19 at m = 500, 30 → 26 at m = 50; α = 2 at m = 500 17 → 23, α = 4 and
/// n = 100, m = 50 unchanged (docs/drum.md). Factors 1, 2, 5 and 10 were measured as well; 3 was
/// the best compromise across sizes and α. `None`: the utility's curvature alone.
pub fn curvature(sc: &Scaled, lay: &Layout, z0: Option<&[f64]>) -> Vec<f64> {
    let (n, m) = (sc.n, sc.m);
    let mut curv = vec![f64::NAN; lay.rows];
    for i in 0..n {
        // the host's alpha-fair split of Q at one price, x_k ∝ w_k^(1/α): the curvature at
        // the equal split misjudges weighted entries by w^(1 + 1/α) (wide weights: 10⁴×)
        let share = |k: usize| sc.w[k].powf(1.0 / sc.al.a);
        let tot: f64 = (i * m..(i + 1) * m)
            .filter(|&k| sc.w[k] > 0.0)
            .map(share)
            .sum();
        // ... shrunk to the host's CQE capacity C when that binds first, counting each entry's
        // completions on every CQ row it loads (a binding C puts the optimum's rates, and so
        // the curvature, far from the WQE split: 10⁶× at α = 5 with C ~ Q/10)
        let cqe = |k: usize| -> f64 {
            (lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize)
                .filter(|&t| {
                    // not a link row (links follow the CQ rows; a shard's ghost rows are CQ rows)
                    let r = lay.pair_row[t] as usize;
                    r < n * m || r >= n * m + sc.link_cap.len()
                })
                .map(|t| lay.pair_coef[t])
                .sum()
        };
        let load: f64 = (i * m..(i + 1) * m)
            .filter(|&k| sc.w[k] > 0.0)
            .map(|k| cqe(k) * sc.q[i] * share(k) / tot)
            .sum();
        let theta = if load > sc.c[i] { sc.c[i] / load } else { 1.0 };
        let beta = sc.beta_of(i);
        for k in i * m..(i + 1) * m {
            if sc.w[k] > 0.0 {
                let x0 = theta * sc.q[i] * share(k) / tot;
                let c = sc.al.a * sc.w[k] * sc.al.inv_pow(x0) / x0;
                let cx = c / lay.sum_p2[k].max(1e-300);
                curv[k] = match z0 {
                    Some(z0) if z0[k] > 0.0 && beta[k - i * m] > 0.0 => {
                        let cz = 6.0 * beta[k - i * m] / z0[k].powi(4);
                        cx.max(3.0 * (cx * cz).sqrt())
                    }
                    _ => cx,
                };
            }
        }
    }
    curv
}

/// The equal split of each host's WQE capacity over its active entries (scaled units), the
/// point at which [`curvature`] is taken.
pub fn equal_split(sc: &Scaled) -> Vec<f64> {
    let (n, m) = (sc.n, sc.m);
    let mut x0 = vec![0.0; n * m];
    for i in 0..n {
        let cnt = (0..m).filter(|&j| sc.hi[i * m + j] > 0.0).count().max(1);
        for k in i * m..(i + 1) * m {
            if sc.w[k] > 0.0 {
                x0[k] = sc.q[i] / cnt as f64;
            }
        }
    }
    x0
}

/// ... sampled every `(nn_total / 100000).max(1)`-th entry of the whole instance (`curv` holds
/// the CQ rows of entries `k0..k0+len`) ...
pub fn sample_curvature(curv: &[f64], k0: usize, nn_total: usize) -> Vec<f64> {
    let stride = (nn_total / 100_000).max(1);
    let first = (stride - k0 % stride) % stride;
    curv.iter()
        .skip(first)
        .step_by(stride)
        .copied()
        .filter(|c| c.is_finite())
        .collect()
}

/// ... rho is the median of the sample, and with row scaling rs_e = curvature_e / rho (diagonal
/// preconditioning, clamped to [1e-3, 1e3]). Link rows get 1.
pub fn median_rho(sample: &[f64]) -> f64 {
    if sample.is_empty() {
        return 1.0;
    }
    let mut vals = sample.to_vec();
    let mid = vals.len() / 2;
    vals.select_nth_unstable_by(mid, |a, b| a.partial_cmp(b).unwrap());
    vals[mid].clamp(1e-12, 1e12)
}

pub fn row_scales(curv: &[f64], rho: f64, row_scaling: bool) -> Vec<f64> {
    curv.iter()
        .map(|&c| {
            if row_scaling && c.is_finite() {
                (c / rho).clamp(1e-3, 1e3)
            } else {
                1.0
            }
        })
        .collect()
}
