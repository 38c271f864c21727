//! The per-host kernels of one ADMM iteration: the x-update and the one-sided z-, dual- and
//! y-update, with the pointer wrapper the rayon passes share.

use super::Sums;
use crate::host::{cap_solve, cap_solve_cq, cap_solve_log, cap_solve_soc};
use crate::scaled::Scaled;

/// The x-update of host i: minimise `-f_i(x) + rho/2 sum_j c2v_j x_j^2 + base_j x_j` over its
/// WQE capacity set, warm-started from `xs` and the multiplier `lam`; returns the multiplier.
#[inline]
pub(super) fn x_host(
    sc: &Scaled,
    i: usize,
    rho: f64,
    c2v: &[f64],
    base: &[f64],
    lam: f64,
    xs: &mut [f64],
) -> f64 {
    let m = sc.m;
    let k0 = i * m;
    let (lo, hi) = (sc.lo_of(i), sc.hi_of(i));
    let ent = |j: usize| (sc.w[k0 + j], 0.0, rho * c2v[j], base[j], lo[j], hi[j]);
    if sc.host_soc[i] {
        cap_solve_soc(&sc.al, m, ent, &sc.r[k0..k0 + m], sc.q[i], lam, xs)
    } else if sc.al.a == 1.0 {
        let r = k0..k0 + m;
        cap_solve_log(&sc.al, &sc.w[r], rho, c2v, base, lo, hi, sc.q[i], lam, xs)
    } else {
        cap_solve(&sc.al, m, ent, sc.q[i], lam, xs)
    }
}

/// One-sided x-update coefficients of one host (host slices): the linear one from v and y, and
/// the quadratic one `rs p²` from the `rs` and `p` read anyway (one array fewer streamed than
/// reading a stored `rp2`).
#[inline]
pub(super) fn diag_coefs(
    rho: f64,
    rs: &[f64],
    p: &[f64],
    v: &[f64],
    y: &[f64],
    base: &mut [f64],
    c2d: &mut [f64],
) {
    for j in 0..base.len() {
        let (r, p) = (rs[j], p[j]);
        base[j] = rho * (r * p * (v[j] - y[j]));
        c2d[j] = r * p * p;
    }
}

/// One-sided z-, dual- and y-update of host i (host slices; `h` is scratch of length m), with
/// h = relax p x + (1 − relax) y recomputed from the x and y read here. Returns the host's
/// residual sums.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn zy_host_diag(
    sc: &Scaled,
    i: usize,
    rho: f64,
    relax: f64,
    coef: &[f64],
    rs: &[f64],
    x: &[f64],
    zs: &mut [f64],
    vs: &mut [f64],
    ys: &mut [f64],
    mu: &mut f64,
    h: &mut [f64],
) -> Sums {
    let m = zs.len();
    let beta = sc.beta_of(i);
    for j in 0..m {
        h[j] = relax * coef[j] * x[j] + (1.0 - relax) * ys[j];
    }
    let ent = |j: usize| {
        let c2 = rho * rs[j];
        let t = h[j] + vs[j];
        (2.0 * beta[j], c2, -c2 * t)
    };
    *mu = cap_solve_cq(m, ent, sc.c[i], *mu, zs);
    let mut s = Sums::default();
    for j in 0..m {
        let d = h[j] - zs[j];
        vs[j] += d;
        let p = coef[j];
        let ynew = h[j] - d;
        let px = p * x[j];
        s.r2 += (px - ynew) * (px - ynew);
        let dual = rs[j] * p * (ynew - ys[j]);
        let atv = rs[j] * p * vs[j];
        s.ax2 += px * px;
        s.y2 += ynew * ynew;
        ys[j] = ynew;
        s.s2 += rho * rho * dual * dual;
        s.atv2 += rho * rho * atv * atv;
    }
    s
}

/// A raw pointer that may be shared across rayon tasks writing disjoint ranges.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub *mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    #[inline(always)]
    pub fn get(self) -> *mut T {
        self.0
    }
}
