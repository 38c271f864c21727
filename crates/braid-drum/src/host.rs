//! Per-host kernels: one capacity-constrained separable subproblem per host.

use crate::capacity::{search, search2};
use crate::scalar::{cq_lanes, cq_slow, log_root2, solve, Alpha, Root, LANES};

/// Per-entry data of a host subproblem: (w, s, c2, c1 at zero price, lo, hi).
pub type Ent = (f64, f64, f64, f64, f64, f64);

/// Minimise sum_j [-w_j U(x_j) + s_j/(2x_j^2) + c2_j x_j^2/2 + c1_j x_j] subject to
/// sum_j x_j <= cap and the boxes. Returns the capacity multiplier; x holds the solution (and
/// is the warm start on entry).
#[inline]
pub fn cap_solve<E: Fn(usize) -> Ent>(
    al: &Alpha,
    len: usize,
    ent: E,
    cap: f64,
    warm: f64,
    x: &mut [f64],
) -> f64 {
    search(cap, 0.0, warm, |p| {
        let mut s = 0.0;
        let mut d = 0.0;
        for j in 0..len {
            let (w, ss, c2, b, lo, hi) = ent(j);
            let r = solve(al, w, ss, c2, b + p, lo, hi, x[j]);
            x[j] = r.x;
            s += r.x;
            d += r.h;
        }
        (s, d)
    })
}

/// `cap_solve` for alpha = 1 without the CQ term (the one-sided and two-sided x-update):
/// entries as slices, `c2_j = c2s * c2v_j`, linear coefficient `base_j + p`; the closed form per
/// entry (entries with `w = 0` or `c2 = 0` take the general kernel).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn cap_solve_log(
    al: &Alpha,
    w: &[f64],
    c2s: f64,
    c2v: &[f64],
    base: &[f64],
    lo: &[f64],
    hi: &[f64],
    cap: f64,
    warm: f64,
    x: &mut [f64],
) -> f64 {
    let len = x.len();
    let (w, c2v, base, lo, hi) = (&w[..len], &c2v[..len], &base[..len], &lo[..len], &hi[..len]);
    search2(cap, 0.0, warm, |p| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the feature was detected at run time
                return unsafe { log_pass_avx2(al, w, c2s, c2v, base, lo, hi, p, x) };
            }
        }
        log_pass(al, w, c2s, c2v, base, lo, hi, p, x)
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn log_pass_avx2(
    al: &Alpha,
    w: &[f64],
    c2s: f64,
    c2v: &[f64],
    base: &[f64],
    lo: &[f64],
    hi: &[f64],
    p: f64,
    x: &mut [f64],
) -> (f64, f64, f64) {
    log_pass(al, w, c2s, c2v, base, lo, hi, p, x)
}

/// One evaluation of the usage at price p: (sum x, sum h, sum d2x/dp2 or 0 if unknown).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn log_pass(
    al: &Alpha,
    w: &[f64],
    c2s: f64,
    c2v: &[f64],
    base: &[f64],
    lo: &[f64],
    hi: &[f64],
    p: f64,
    x: &mut [f64],
) -> (f64, f64, f64) {
    let len = x.len();
    let (w, c2v, base, lo, hi) = (&w[..len], &c2v[..len], &base[..len], &lo[..len], &hi[..len]);
    let mut s = 0.0;
    let mut d = 0.0;
    let mut dd = 0.0;
    let mut exact = true;
    for j in 0..len {
        let c2 = c2s * c2v[j];
        let (r, c) = if w[j] > 0.0 && c2 > 0.0 {
            log_root2(w[j], c2, base[j] + p, lo[j], hi[j])
        } else {
            exact = false;
            (
                solve(al, w[j], 0.0, c2, base[j] + p, lo[j], hi[j], x[j]),
                0.0,
            )
        };
        x[j] = r.x;
        s += r.x;
        d += r.h;
        dd += c;
    }
    // the curvature is only known when every entry took the closed form
    (s, d, if exact { dd } else { 0.0 })
}

/// `cap_solve` for the CQ subproblem (`w = 0`, no box): `ent(j) = (s, c2, c1 at zero price)`.
#[inline]
pub fn cap_solve_cq<E: Fn(usize) -> (f64, f64, f64)>(
    len: usize,
    ent: E,
    cap: f64,
    warm: f64,
    x: &mut [f64],
) -> f64 {
    // Halley steps where every entry took the fast path (S'' = sum of their curvatures)
    search2(cap, 0.0, warm, |p| cq_pass_dispatch(len, &ent, p, x))
}

/// One evaluation of the CQ usage at price p: (sum x, sum h, sum d²x/dp² or 0 if unknown). With AVX2 available at run time
/// the same code is compiled for it (4-wide lanes; no FMA contraction, so results are
/// bit-identical to the baseline build).
#[inline(always)]
fn cq_pass_dispatch<E: Fn(usize) -> (f64, f64, f64)>(
    len: usize,
    ent: &E,
    p: f64,
    x: &mut [f64],
) -> (f64, f64, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the feature was detected at run time
            return unsafe { cq_pass_avx2(len, ent, p, x) };
        }
    }
    cq_pass(len, ent, p, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn cq_pass_avx2<E: Fn(usize) -> (f64, f64, f64)>(
    len: usize,
    ent: &E,
    p: f64,
    x: &mut [f64],
) -> (f64, f64, f64) {
    cq_pass(len, ent, p, x)
}

#[inline(always)]
fn cq_pass<E: Fn(usize) -> (f64, f64, f64)>(
    len: usize,
    ent: &E,
    p: f64,
    x: &mut [f64],
) -> (f64, f64, f64) {
    let mut s = 0.0;
    let mut d = 0.0;
    let mut dd = 0.0;
    let mut exact = true;
    let mut j0 = 0;
    while j0 < len {
        let nl = (len - j0).min(LANES);
        // padding lanes get harmless data (s = c2 = guess = 1, c1 = 0)
        let (mut ss, mut c2, mut c1, mut g) =
            ([1.0; LANES], [1.0; LANES], [0.0; LANES], [1.0; LANES]);
        for l in 0..nl {
            let e = ent(j0 + l);
            ss[l] = e.0;
            c2[l] = e.1;
            c1[l] = e.2 + p;
            g[l] = x[j0 + l];
        }
        let (xr, hr, cr, ok) = cq_lanes(&ss, &c2, &c1, &g);
        for l in 0..nl {
            let r = if ok[l] {
                dd += cr[l];
                Root { x: xr[l], h: hr[l] }
            } else {
                exact = false;
                cq_slow(ss[l], c2[l], c1[l], if xr[l] > 0.0 { xr[l] } else { g[l] })
            };
            x[j0 + l] = r.x;
            s += r.x;
            d += r.h;
        }
        j0 += LANES;
    }
    (s, d, if exact { dd } else { 0.0 })
}

fn soc_norm(r: &[f64], x: &[f64]) -> f64 {
    r.iter()
        .zip(x)
        .map(|(r, x)| (r * x) * (r * x))
        .sum::<f64>()
        .sqrt()
}

/// Same with the preemption (SOC) constraint `sum_j x_j + ||r o x||_2 <= cap`.
///
/// KKT: `phi_j(x_j) = lam (1 + r_j^2 x_j / t)` with `t = ||r o x||`; for a price `lam` the norm
/// `t` is the unique fixed point of `t = ||r o x(lam, lam/t)||` (found by bisection in log t),
/// and `lam` is found by the usual safeguarded search on the usage.
pub fn cap_solve_soc<E: Fn(usize) -> Ent>(
    al: &Alpha,
    len: usize,
    ent: E,
    r: &[f64],
    cap: f64,
    warm: f64,
    x: &mut [f64],
) -> f64 {
    // x at (lam, kappa) and the derivative of the norm t = ||r o x|| in log kappa... returned as
    // sum_j r_j^4 x_j^2 h_j (dt/dkappa = -that / t)
    let solve_at = |lam: f64, kappa: f64, x: &mut [f64]| -> f64 {
        let mut d = 0.0;
        for j in 0..len {
            let (w, ss, c2, b, lo, hi) = ent(j);
            let r2 = r[j] * r[j];
            let rr = solve(al, w, ss, c2 + kappa * r2, b + lam, lo, hi, x[j]);
            x[j] = rr.x;
            d += r2 * r2 * rr.x * rr.x * rr.h;
        }
        d
    };
    let mut xs = x.to_vec();
    search(cap, 0.0, warm, |lam| {
        if lam <= 0.0 {
            solve_at(0.0, 0.0, x);
            let u = x.iter().sum::<f64>() + soc_norm(r, x);
            return (u, 0.0);
        }
        // t_hi: norm at kappa = 0
        solve_at(lam, 0.0, x);
        let t_hi = soc_norm(r, x);
        if !(t_hi > 0.0) || !t_hi.is_finite() {
            let u = x.iter().sum::<f64>() + t_hi;
            return (u, 0.0);
        }
        // the fixed point t = N(t) = ||r o x(lam, lam/t)||: g(s) = s - ln N(e^s) is increasing
        // in s = ln t (N(t) <= t_hi); safeguarded Newton on g inside the bracket [lo, hi]
        // (bisection where a step leaves it): ~4 passes instead of ~45 bisection steps
        let mut lo = (t_hi * 1e-14).ln();
        let mut hi = t_hi.ln();
        xs.copy_from_slice(x);
        let mut s = hi;
        for _ in 0..100 {
            let t = s.exp();
            let dn = solve_at(lam, lam / t, &mut xs);
            let nn = soc_norm(r, &xs);
            if !(nn > 0.0) {
                lo = s;
                s = 0.5 * (lo + hi);
                continue;
            }
            let g = s - nn.ln();
            if g > 0.0 {
                hi = s;
            } else {
                lo = s;
            }
            // d ln N / d s = (t/N) dN/dt, dN/dt = dn * lam / (t^2 N)
            let slope = 1.0 - dn * lam / (t * nn * nn);
            let sn = s - g / slope;
            if g.abs() < 1e-13 || hi - lo < 1e-13 {
                break;
            }
            s = if slope > 0.0 && sn > lo && sn < hi {
                sn
            } else {
                0.5 * (lo + hi)
            };
        }
        let t = s.exp();
        x.copy_from_slice(&xs);
        solve_at(lam, lam / t, x);
        let tn = soc_norm(r, x);
        let mut d = 0.0;
        for j in 0..len {
            let (w, ss, c2, b, lo, hi) = ent(j);
            let k = lam / t;
            let rr = solve(al, w, ss, c2 + k * r[j] * r[j], b + lam, lo, hi, x[j]);
            let f = 1.0 + r[j] * r[j] * x[j] / t.max(1e-300);
            d += rr.h * f * f;
        }
        (x.iter().sum::<f64>() + tn, d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SOC x-update satisfies its KKT conditions (sufficient: the problem is convex):
    /// `w x^-α − c2 x − b = λ (1 + r² x / t)` per interior entry, `Σx + ‖r∘x‖ = cap` when λ > 0.
    #[test]
    fn soc_update_meets_its_kkt_conditions() {
        for (alpha, cap) in [(1.0, 3.0), (2.0, 10.0), (0.5, 5.0), (7.0, 2.0), (20.0, 8.0)] {
            let al = Alpha::new(alpha);
            let m = 12;
            let w: Vec<f64> = (0..m).map(|j| 0.5 + (j * 37 % 11) as f64 / 7.0).collect();
            let c2: Vec<f64> = (0..m).map(|j| 0.2 + (j % 3) as f64).collect();
            let b: Vec<f64> = (0..m).map(|j| (j as f64 - 5.0) * 0.1).collect();
            let r: Vec<f64> = (0..m)
                .map(|j| if j % 3 == 0 { 0.0 } else { 0.1 * j as f64 })
                .collect();
            let mut x = vec![1.0; m];
            let ent = |j: usize| (w[j], 0.0, c2[j], b[j], 0.0, f64::INFINITY);
            let lam = cap_solve_soc(&al, m, ent, &r, cap, 0.0, &mut x);
            let t = soc_norm(&r, &x);
            let used = x.iter().sum::<f64>() + t;
            assert!(
                used <= cap * (1.0 + 1e-9),
                "alpha {alpha}: used {used} > {cap}"
            );
            if lam > 0.0 {
                assert!(
                    (used - cap).abs() <= 1e-9 * cap,
                    "alpha {alpha}: slack with lam {lam}"
                );
            }
            for j in 0..m {
                let lhs = w[j] * al.inv_pow(x[j]) - c2[j] * x[j] - b[j];
                let rhs = lam * (1.0 + r[j] * r[j] * x[j] / t);
                assert!(
                    (lhs - rhs).abs() <= 1e-7 * (lhs.abs() + rhs.abs() + 1e-12),
                    "alpha {alpha} entry {j}: {lhs} vs {rhs}"
                );
            }
        }
    }
}
