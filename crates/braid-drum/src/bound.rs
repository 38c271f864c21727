//! A dual bound that stays valid whatever the accuracy of the searches behind it.
//!
//! For prices ν on the coupling rows, weak duality gives
//! `f* ≤ Σ_i max_{x_i∈X_i}[f_i(x_i) − q_i·x_i] + Σ_i max_{z_i∈Z_i}[g_i(z_i) + ν_i·z_i] + Σ_e max(0, ν_e L_e)`
//! with `q = Pᵀν`, but only if every max is the true maximum: a maximiser found by an inexact
//! inner search (a Newton stopped early, a capacity multiplier off by a tolerance) gives a value
//! *below* the max, and the "bound" can then fall below f* (it did, by 10⁻⁴ of Σw, at α ≥ 20).
//! So each host's max is bounded again, by Lagrangian duality on its own capacity:
//!
//! * **X side.** For any `λ ≥ 0` and any unit vector `u ≥ 0`, every `x ∈ X_i` satisfies
//!   `Σ_j c_j x_j ≤ Q_i` with `c_j = 1 + r_j u_j` (the SOC constraint is
//!   `Σx + max_{‖u‖≤1} u·(r∘x) ≤ Q`; without preemption `r = 0`, `c = 1`) and
//!   `lo_j ≤ x_j ≤ min(hi_j, Q_i/c_j)`. Hence
//!   `max_{X_i} ≤ λQ_i + Σ_j max_{x_j ∈ box_j} [w_j U(x_j) − (q_j + λc_j) x_j]`,
//!   and each one-dimensional max is in closed form (the concave function's stationary point
//!   `(w/p)^{1/α}` clipped to the box). `λ` and `u` only decide how *tight* the bound is, never
//!   whether it holds: they come from a capacity search (λ) and from the fixed point
//!   `u = r∘x/‖r∘x‖` (started at the solver's iterate when one is given; the least of the few
//!   bounds tried is kept, each valid).
//! * **Z side.** For any `μ ≥ 0`: `max_{Z_i} ≤ μC_i + Σ_j max_{0≤z_j≤C_i} [−β_j/z_j² + (ν_j − μ)z_j]`,
//!   again in closed form per row. The best μ is `max(μ₁, max{ν_j : β_j = 0})` with μ₁ the
//!   capacity price of the rows with a CQ utility (the derivative of the bound in μ is negative
//!   below both and non-negative above).
//!
//! At the optimum prices (λ*, u*, μ*) every relaxation is tight (strong duality: the problem is
//! convex with a Slater point), so the bound is as good as the old one where that one was valid.
//! The sum is evaluated in floating point; a margin of 8ε times the sum of the magnitudes of its
//! terms covers the rounding.

use crate::capacity::search;
use crate::problem::Layout;
use crate::scalar::Alpha;
use crate::scaled::Scaled;
use rayon::prelude::*;

/// `(w/p)^(1/α)` for p > 0: the maximiser of `w U(x) − p x` on x > 0.
#[inline]
fn stationary(al: &Alpha, w: f64, p: f64) -> f64 {
    let t = w / p;
    if al.a == 1.0 {
        t
    } else if al.a == 2.0 {
        t.sqrt()
    } else if al.a == 0.5 {
        t * t
    } else {
        t.powf(1.0 / al.a)
    }
}

/// Max of `w U(x) − p x` over `[lo, hi]` (hi finite): (x, value, −dx/dp).
#[inline]
fn x_entry(al: &Alpha, w: f64, p: f64, lo: f64, hi: f64) -> (f64, f64, f64) {
    if hi <= lo {
        let v = if w > 0.0 { w * al.utility(lo) } else { 0.0 } - p * lo;
        return (lo, v, 0.0);
    }
    if !(w > 0.0) {
        let x = if p >= 0.0 { lo } else { hi };
        return (x, -p * x, 0.0);
    }
    let (x, h) = if p > 0.0 {
        let x0 = stationary(al, w, p);
        if x0 <= lo {
            (lo, 0.0)
        } else if x0 >= hi {
            (hi, 0.0)
        } else {
            (x0, x0 / (al.a * p))
        }
    } else {
        (hi, 0.0)
    };
    (x, w * al.utility(x) - p * x, h)
}

/// Max of `−β/z² + p z` over `[0, cap]`: (z, value, −dz/dp).
#[inline]
fn z_entry(beta: f64, p: f64, cap: f64) -> (f64, f64, f64) {
    if !(beta > 0.0) {
        return if p > 0.0 {
            (cap, p * cap, 0.0)
        } else {
            (0.0, 0.0, 0.0)
        };
    }
    if p >= 0.0 {
        return (cap, -beta / (cap * cap) + p * cap, 0.0);
    }
    // 2β/z³ = −p
    let z0 = (2.0 * beta / -p).cbrt();
    if z0 >= cap {
        (cap, -beta / (cap * cap) + p * cap, 0.0)
    } else {
        (z0, -beta / (z0 * z0) + p * z0, z0 / (-3.0 * p))
    }
}

/// Bound (with its rounding margin) on host i's X side at prices `q` (its m entries),
/// capacity coefficients `c`; writes the maximisers into `xs`; returns (bound, λ).
#[allow(clippy::too_many_arguments)]
fn x_side_linear(
    al: &Alpha,
    w: &[f64],
    q: &[f64],
    c: &[f64],
    lo: &[f64],
    hi: &[f64],
    cap: f64,
    warm: f64,
    xs: &mut [f64],
) -> (f64, f64) {
    let m = xs.len();
    let top = |j: usize| hi[j].min(cap / c[j]).max(lo[j]);
    let lam = search(cap, 0.0, warm, |lam| {
        let (mut s, mut d) = (0.0, 0.0);
        for j in 0..m {
            let (x, _, h) = x_entry(al, w[j], q[j] + lam * c[j], lo[j], top(j));
            xs[j] = x;
            s += c[j] * x;
            d += c[j] * c[j] * h;
        }
        (s, d)
    });
    let lam = if lam.is_finite() && lam >= 0.0 {
        lam
    } else {
        0.0
    };
    let mut v = lam * cap;
    let mut mag = v.abs();
    for j in 0..m {
        let (x, val, _) = x_entry(al, w[j], q[j] + lam * c[j], lo[j], top(j));
        xs[j] = x;
        v += val;
        mag += val.abs() + (q[j] * x).abs();
    }
    (v + 8.0 * f64::EPSILON * mag, lam)
}

/// Host i's X-side bound; `hint` (host i's entries of a primal point) seeds the SOC direction u.
fn x_side(sc: &Scaled, i: usize, q: &[f64], hint: Option<&[f64]>, xs: &mut [f64]) -> f64 {
    let m = sc.m;
    let k0 = i * m;
    let (w, lo, hi) = (&sc.w[k0..k0 + m], &sc.lo[k0..k0 + m], &sc.hi[k0..k0 + m]);
    let ones = vec![1.0; m];
    let (b0, lam0) = x_side_linear(&sc.al, w, q, &ones, lo, hi, sc.q[i], 0.0, xs);
    if !sc.host_soc[i] {
        return b0;
    }
    // preemption: coefficients 1 + r_j u_j along u = r∘x/‖r∘x‖, x from the hint, then the
    // maximiser of the previous bound (a fixed point at the optimum); every bound is valid
    let r = &sc.r[k0..k0 + m];
    let mut best = b0;
    let mut pt: Vec<f64> = match hint {
        Some(h) => h.to_vec(),
        None => xs.to_vec(),
    };
    let mut lam = lam0;
    let mut c = vec![1.0; m];
    let mut trial = vec![0.0; m];
    for _ in 0..6 {
        let t = pt
            .iter()
            .zip(r)
            .map(|(x, r)| (r * x) * (r * x))
            .sum::<f64>()
            .sqrt();
        if !(t > 0.0 && t.is_finite()) {
            break;
        }
        for j in 0..m {
            c[j] = 1.0 + r[j] * (r[j] * pt[j].max(0.0) / t);
        }
        let (b, l) = x_side_linear(&sc.al, w, q, &c, lo, hi, sc.q[i], lam, &mut trial);
        lam = l;
        if b < best {
            best = b;
            xs.copy_from_slice(&trial);
        }
        pt.copy_from_slice(&trial);
    }
    best
}

/// Host i's Z-side bound at prices `nu` (its m CQ rows); writes the maximisers into `zs`.
fn z_side(sc: &Scaled, i: usize, nu: &[f64], zs: &mut [f64]) -> f64 {
    let m = sc.m;
    let k0 = i * m;
    let beta = &sc.beta[k0..k0 + m];
    let cap = sc.c[i];
    let mu1 = search(cap, 0.0, 0.0, |mu| {
        let (mut s, mut d) = (0.0, 0.0);
        for j in 0..m {
            if beta[j] > 0.0 {
                let (z, _, h) = z_entry(beta[j], nu[j] - mu, cap);
                s += z;
                d += h;
            }
        }
        (s, d)
    });
    let mut mu = if mu1.is_finite() && mu1 > 0.0 {
        mu1
    } else {
        0.0
    };
    for j in 0..m {
        if !(beta[j] > 0.0) {
            mu = mu.max(nu[j]);
        }
    }
    let mut v = mu * cap;
    let mut mag = v.abs();
    // the maximisers: the rows with a CQ utility, then leftover capacity on a linear row at
    // the price μ (the bound does not depend on which: those rows' terms are 0 at ν_j ≤ μ)
    let mut used = 0.0;
    for j in 0..m {
        let (z, val, _) = z_entry(beta[j], nu[j] - mu, cap);
        zs[j] = if beta[j] > 0.0 { z } else { 0.0 };
        used += zs[j];
        v += val;
        mag += val.abs() + (nu[j] * z).abs();
    }
    if let Some(b) = (0..m).find(|&j| !(beta[j] > 0.0) && nu[j] > 0.0 && nu[j] == mu) {
        if used < cap {
            zs[b] = cap - used;
        }
    }
    v + 8.0 * f64::EPSILON * mag
}

/// The rigorous `UB(ν)` (scaled objective units) with the maximisers `x(ν)`, `z(ν)` (all rows).
/// `hint`: a primal point (all entries) that seeds the preemption direction.
pub fn rigorous_upper_bound(
    sc: &Scaled,
    lay: &Layout,
    nu: &[f64],
    hint: Option<&[f64]>,
) -> (f64, Vec<f64>, Vec<f64>) {
    let (n, m) = (sc.n, sc.m);
    let nn = n * m;
    let q = prices(lay, nu);
    let mut x = vec![0.0; nn];
    let mut z = vec![0.0; lay.rows];
    let xpart: f64 = x
        .par_chunks_mut(m)
        .enumerate()
        .map(|(i, xs)| {
            x_side(
                sc,
                i,
                &q[i * m..(i + 1) * m],
                hint.map(|h| &h[i * m..(i + 1) * m]),
                xs,
            )
        })
        .sum();
    let (zc, zl) = z.split_at_mut(nn);
    let zpart: f64 = zc
        .par_chunks_mut(m)
        .enumerate()
        .map(|(i, zs)| z_side(sc, i, &nu[i * m..(i + 1) * m], zs))
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

/// `q = Pᵀν` per entry.
pub fn prices(lay: &Layout, nu: &[f64]) -> Vec<f64> {
    let nn = lay.n * lay.m;
    if lay.app_tiled {
        let mut q = vec![0.0; nn];
        crate::tiles::x_linear(lay, 1.0, &[], &[], nu, &[], &mut q);
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
    }
}
