//! The one scalar kernel every solver uses.
//!
//! Every per-variable subproblem in DRUM (ADMM x- and z-updates, the exact per-host solve, the
//! dual-decomposition subproblems and the dual bound) is the minimisation of a strictly convex
//! one-dimensional function
//!
//! ```text
//!   -w U_alpha(x) + (s/2) x^-2 + (c2/2) x^2 + c1 x     over lo <= x <= hi, x > 0
//! ```
//!
//! whose stationarity condition is `phi(x) = w x^-alpha + s x^-3 - c2 x - c1 = 0`. `phi` is
//! strictly decreasing and convex on x > 0, so Newton's method started left of the root increases
//! monotonically to it, a Newton step from the right lands left of it, and the chord through two
//! bracketing points stays right of it. We keep a rigorous bracket, take Newton steps inside it and
//! fall back to geometric bisection; closed forms are used where they exist (alpha = 1 with the
//! cancellation-free root `2w / (b + sqrt(b^2 + 4 c2 w))`, pure powers). Never a general-purpose
//! solver.

/// Exponent of the alpha-fair utility with fast paths for the common values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Alpha {
    pub a: f64,
    pub(crate) kind: u8, // 0 general, 1 alpha=1, 2 alpha=2, 3 alpha=0.5, 4 alpha=4
}

impl Alpha {
    pub fn new(a: f64) -> Self {
        let kind = if a == 1.0 {
            1
        } else if a == 2.0 {
            2
        } else if a == 0.5 {
            3
        } else if a == 4.0 {
            4
        } else {
            0
        };
        Alpha { a, kind }
    }
    /// x^-alpha
    #[inline(always)]
    pub fn inv_pow(&self, x: f64) -> f64 {
        match self.kind {
            1 => 1.0 / x,
            2 => 1.0 / (x * x),
            3 => 1.0 / x.sqrt(),
            4 => {
                let x2 = x * x;
                1.0 / (x2 * x2)
            }
            _ => x.powf(-self.a),
        }
    }
    /// The alpha-fair utility U_alpha(x) (log for alpha = 1).
    #[inline]
    pub fn utility(&self, x: f64) -> f64 {
        match self.kind {
            1 => x.ln(),
            2 => -1.0 / x,
            3 => 2.0 * x.sqrt(),
            _ => x.powf(1.0 - self.a) / (1.0 - self.a),
        }
    }
}

/// Result of one scalar solve: the minimiser and its sensitivity `h = -dx/dc1 >= 0`
/// (zero when a bound is active).
#[derive(Clone, Copy, Debug)]
pub struct Root {
    pub x: f64,
    pub h: f64,
}

#[inline(always)]
fn phi(al: &Alpha, w: f64, s: f64, c2: f64, c1: f64, x: f64) -> (f64, f64) {
    let mut f = -c2 * x - c1;
    let mut d = -c2;
    if w > 0.0 {
        let t = w * al.inv_pow(x);
        f += t;
        d -= al.a * t / x;
    }
    if s > 0.0 {
        let inv = 1.0 / x;
        let t = s * inv * inv * inv;
        f += t;
        d -= 3.0 * t * inv;
    }
    (f, d)
}

#[inline(always)]
fn clip(x: f64, h: f64, lo: f64, hi: f64) -> Root {
    if x <= lo {
        Root { x: lo, h: 0.0 }
    } else if x >= hi {
        Root { x: hi, h: 0.0 }
    } else {
        Root { x, h }
    }
}

/// Minimise `-w U_alpha(x) + (s/2)/x^2 + (c2/2) x^2 + c1 x` over `[lo, hi]` (`hi` may be +inf,
/// in which case an unbounded problem returns +inf). `guess` (if > 0) warm-starts Newton.
/// Requires w, s, c2 >= 0 and lo >= 0.
#[inline]
#[allow(clippy::too_many_arguments)] // one entry's scalar problem, its terms as the paper writes them
pub fn solve(al: &Alpha, w: f64, s: f64, c2: f64, c1: f64, lo: f64, hi: f64, guess: f64) -> Root {
    if hi <= lo {
        return Root { x: lo, h: 0.0 };
    }
    let has_w = w > 0.0;
    let has_s = s > 0.0;
    if !has_w && !has_s {
        // linear/quadratic: c2 x + c1 = 0
        if c2 > 0.0 {
            return clip(-c1 / c2, 1.0 / c2, lo, hi);
        }
        return if c1 >= 0.0 {
            Root { x: lo, h: 0.0 }
        } else {
            Root { x: hi, h: 0.0 }
        };
    }
    if c2 <= 0.0 {
        // pure powers: w x^-alpha + s x^-3 = c1
        if c1 <= 0.0 {
            return Root { x: hi, h: 0.0 };
        }
        if has_w && !has_s {
            let x = if al.kind == 1 {
                w / c1
            } else {
                (w / c1).powf(1.0 / al.a)
            };
            let h = x / (al.a * c1);
            return clip(x, h, lo, hi);
        }
        if has_s && !has_w {
            let x = (s / c1).cbrt();
            let h = x / (3.0 * c1);
            return clip(x, h, lo, hi);
        }
    } else if has_w && !has_s && al.kind == 1 {
        // w/x = c2 x + c1, the positive root of c2 x^2 + c1 x - w = 0, cancellation-free
        let disc = (c1 * c1 + 4.0 * c2 * w).sqrt();
        let x = if c1 >= 0.0 {
            2.0 * w / (c1 + disc)
        } else {
            (disc - c1) / (2.0 * c2)
        };
        let h = 1.0 / (w / (x * x) + c2);
        return clip(x, h, lo, hi);
    }
    // Newton from the guess (or the rigorous lower bound), keeping a bracket
    // [lb, ub] with phi(lb) >= 0 > phi(ub); the formula bounds are computed only when a Newton
    // step leaves the bracket.
    let mut lb = 0.0f64;
    let mut ub = f64::INFINITY;
    let mut have_bounds = false;
    if c1 < 0.0 && c2 > 0.0 {
        // the linear root -c1/c2 is a rigorous left point (phi there is the positive power terms)
        lb = -c1 / c2;
    }
    let mut x = if guess > 0.0 && guess.is_finite() {
        guess
    } else {
        let (l, u) = bounds(al, w, s, c2, c1);
        lb = l;
        ub = u;
        have_bounds = true;
        l
    };
    let mut d = -1.0;
    for _ in 0..200 {
        let (f, dd) = phi(al, w, s, c2, c1, x);
        d = dd;
        if f == 0.0 {
            break;
        }
        if f > 0.0 {
            lb = lb.max(x);
        } else {
            ub = ub.min(x);
        }
        let mut xn = x - f / d;
        if xn <= lb && lb > 0.0 && x > lb {
            // a Newton step from the right undershot the best known left point: restart there
            // (Newton from the left is monotone)
            xn = lb;
        }
        if !(xn >= lb && xn < ub) || (xn == lb && x == lb) {
            if !have_bounds {
                let (l, u) = bounds(al, w, s, c2, c1);
                lb = lb.max(l);
                ub = ub.min(u);
                have_bounds = true;
            }
            if !(xn > lb && xn < ub) {
                xn = if lb > 0.0 && ub.is_finite() {
                    (lb * ub).sqrt()
                } else {
                    0.5 * (lb + ub)
                };
                if !(xn > lb && xn < ub) {
                    xn = 0.5 * (lb + ub);
                }
            }
        }
        let step = (xn - x).abs();
        let newton = xn == x - f / d;
        x = xn;
        // Newton converges quadratically: after a step of relative size 1e-7 the error is
        // ~1e-14, so stop there instead of chasing rounding noise.
        if (newton && step <= 1e-7 * x) || (ub.is_finite() && ub - lb <= 4.0 * f64::EPSILON * ub) {
            // (the slope at the previous point is accurate enough for the sensitivity h)
            break;
        }
    }
    clip(x, -1.0 / d, lo, hi)
}

/// Fast path of `solve` for the CQ subproblem (`w = 0`, `s > 0`, `c2 > 0`, no box):
/// `s x^-3 = c2 x + c1`. A fixed number of branch-free Newton steps from the warm start (or the
/// linear root `-c1/c2`, a rigorous left point), so consecutive entries overlap in the pipeline;
/// if the last step is not below the same 1e-7 relative threshold as `solve`, `solve` finishes
/// from there. Same root to rounding.
/// Lanes processed together by the fast paths (independent chains fill the divider pipeline).
pub const LANES: usize = 8;

#[inline(always)]
fn fmax(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// Fast path of `solve` for the CQ subproblem (`w = 0`, `s > 0`, `c2 > 0`, no box), on LANES
/// entries at once: `s x^-3 = c2 x + c1`. Three branch-free Halley steps, two where all 8 already meet the
/// threshold (phi'' is cheap here)
/// from the warm start, kept right of the linear root `-c1/c2` (a rigorous left point) and of
/// x/4. Returns the roots, their sensitivities `h = -dx/dc1`, the curvatures
/// `d²x/dc1² = phi'' h³` (what a Halley step of the capacity search needs; phi'' is at hand),
/// and ok[l] = false where the data are outside the fast path or the last step was not
/// below the 1e-7 relative threshold of `solve` (the caller then uses `solve` from `x`).
#[inline(always)]
pub fn cq_lanes(
    s: &[f64; LANES],
    c2: &[f64; LANES],
    c1: &[f64; LANES],
    guess: &[f64; LANES],
) -> ([f64; LANES], [f64; LANES], [f64; LANES], [bool; LANES]) {
    let mut x = [0.0; LANES];
    let mut lin = [0.0; LANES];
    let mut ok = [true; LANES];
    for l in 0..LANES {
        lin[l] = -c1[l] / c2[l];
        let g = guess[l];
        let x0 = if g > 0.0 && g < f64::INFINITY {
            fmax(g, lin[l])
        } else {
            lin[l]
        };
        ok[l] = s[l] > 0.0 && c2[l] > 0.0 && x0 > 0.0 && x0 < f64::INFINITY;
        x[l] = if ok[l] { x0 } else { 1.0 };
    }
    let mut step = [0.0; LANES];
    let mut d = [0.0; LANES];
    let mut d2 = [0.0; LANES];
    for it in 0..3 {
        // from a close warm start (later passes of the capacity search) two steps already meet
        // the threshold; the test is per 8 entries, so it stays branch-free within them
        if it == 2 && (0..LANES).all(|l| step[l] <= 1e-7 * x[l]) {
            break;
        }
        for l in 0..LANES {
            let xl = x[l];
            let inv = 1.0 / xl;
            let t = s[l] * inv * inv * inv;
            let f = t - c2[l] * xl - c1[l];
            let t1 = 3.0 * t * inv;
            let dl = -c2[l] - t1;
            let dd = 4.0 * t1 * inv; // phi''
            let xn = fmax(
                fmax(xl - 2.0 * f * dl / (2.0 * dl * dl - f * dd), lin[l]),
                0.25 * xl,
            );
            step[l] = (xn - xl).abs();
            d[l] = dl;
            d2[l] = dd;
            x[l] = xn;
        }
    }
    let mut h = [0.0; LANES];
    let mut curv = [0.0; LANES];
    for l in 0..LANES {
        h[l] = -1.0 / d[l];
        curv[l] = d2[l] * h[l] * h[l] * h[l];
        ok[l] = ok[l] && step[l] <= 1e-7 * x[l];
    }
    (x, h, curv, ok)
}

/// The general-kernel fallback of `cq_lanes`.
#[inline(never)]
pub fn cq_slow(s: f64, c2: f64, c1: f64, guess: f64) -> Root {
    const K1: Alpha = Alpha { a: 1.0, kind: 1 };
    if s > 0.0 && c2 > 0.0 && guess > 0.0 && guess < f64::INFINITY {
        // more of the same safeguarded Halley steps, then the general kernel
        let lin = -c1 / c2;
        let mut x = fmax(guess, lin);
        for _ in 0..30 {
            let inv = 1.0 / x;
            let t = s * inv * inv * inv;
            let f = t - c2 * x - c1;
            let t1 = 3.0 * t * inv;
            let d = -c2 - t1;
            let dd = 4.0 * t1 * inv;
            let xn = fmax(
                fmax(x - 2.0 * f * d / (2.0 * d * d - f * dd), lin),
                0.25 * x,
            );
            let step = (xn - x).abs();
            x = xn;
            if !(x > 0.0 && x < f64::INFINITY) {
                break;
            }
            if step <= 1e-7 * x {
                return Root { x, h: -1.0 / d };
            }
        }
    }
    solve(&K1, 0.0, s, c2, c1, 0.0, f64::INFINITY, guess)
}

/// Fast path of `solve` for alpha = 1 without the CQ term (`w > 0`, `s = 0`, `c2 > 0`): the
/// cancellation-free closed form with `h = x / sqrt(c1^2 + 4 c2 w)` (= 1/(w/x^2 + c2)).
#[inline(always)]
pub fn log_root(w: f64, c2: f64, c1: f64, lo: f64, hi: f64) -> Root {
    log_root2(w, c2, c1, lo, hi).0
}

/// `log_root` and the curvature `d2x/dc1^2 = 2w / disc^3` (`disc + c1 = 2w/x`), 0 on a bound.
#[inline(always)]
pub fn log_root2(w: f64, c2: f64, c1: f64, lo: f64, hi: f64) -> (Root, f64) {
    let disc = (c1 * c1 + 4.0 * c2 * w).sqrt();
    let x = if c1 >= 0.0 {
        2.0 * w / (c1 + disc)
    } else {
        (disc - c1) / (2.0 * c2)
    };
    let inv = 1.0 / disc;
    let h = x * inv;
    // branch-free clip to the box (h = 0 on an active bound)
    let inside = x > lo && x < hi;
    let xc = if x <= lo || hi <= lo {
        lo
    } else if x >= hi {
        hi
    } else {
        x
    };
    (
        Root {
            x: xc,
            h: if inside { h } else { 0.0 },
        },
        if inside {
            2.0 * w * inv * inv * inv
        } else {
            0.0
        },
    )
}

/// Rigorous bracket [xl, xu] with phi(xl) >= 0 >= phi(xu) (requires a root to exist).
fn bounds(al: &Alpha, w: f64, s: f64, c2: f64, c1: f64) -> (f64, f64) {
    let a = al.a;
    let has_w = w > 0.0;
    let has_s = s > 0.0;
    let mut xl: f64;
    let mut xu: f64;
    if c1 <= 0.0 {
        // here c2 > 0
        let xb = -c1 / c2;
        xl = xb;
        let mut y = 0.0f64;
        if has_w {
            xl = xl.max((w / c2).powf(1.0 / (1.0 + a)));
            y = y.max((2.0 * w / c2).powf(1.0 / (1.0 + a)));
        }
        if has_s {
            xl = xl.max((s / c2).powf(0.25));
            y = y.max((2.0 * s / c2).powf(0.25));
        }
        xu = xb + y;
    } else {
        let mut lw = 0.0f64;
        let mut ls = 0.0f64;
        let mut ua = f64::INFINITY;
        let mut ub = 0.0f64;
        let mut ua_v = 0.0f64;
        if has_w {
            let p1 = (w / (2.0 * c1)).powf(1.0 / a);
            let p2 = if c2 > 0.0 {
                (w / (2.0 * c2)).powf(1.0 / (1.0 + a))
            } else {
                f64::INFINITY
            };
            lw = p1.min(p2);
            ub = ub.max((2.0 * w / c1).powf(1.0 / a));
            if c2 > 0.0 {
                ua_v = ua_v.max((2.0 * w / c2).powf(1.0 / (1.0 + a)));
            }
        }
        if has_s {
            let p1 = (s / (2.0 * c1)).cbrt();
            let p2 = if c2 > 0.0 {
                (s / (2.0 * c2)).powf(0.25)
            } else {
                f64::INFINITY
            };
            ls = p1.min(p2);
            ub = ub.max((2.0 * s / c1).cbrt());
            if c2 > 0.0 {
                ua_v = ua_v.max((2.0 * s / c2).powf(0.25));
            }
        }
        if c2 > 0.0 {
            ua = ua_v;
        }
        xl = lw.max(ls);
        xu = ua.min(ub);
    }
    if !(xl > 0.0) {
        xl = f64::MIN_POSITIVE;
    }
    if xu < xl {
        xu = xl;
    }
    (xl, xu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(al: f64, w: f64, s: f64, c2: f64, c1: f64) {
        let a = Alpha::new(al);
        let r = solve(&a, w, s, c2, c1, 0.0, f64::INFINITY, -1.0);
        let (f, _) = phi(&a, w, s, c2, c1, r.x);
        let scale = c2 * r.x + c1.abs() + w * a.inv_pow(r.x);
        assert!(
            f.abs() <= 1e-12 * scale.max(1e-300),
            "al={al} w={w} s={s} c2={c2} c1={c1} x={} f={f}",
            r.x
        );
    }

    #[test]
    fn roots_are_accurate() {
        for &al in &[0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0] {
            for &w in &[0.0, 1e-6, 1.0, 1e6] {
                for &s in &[0.0, 1e-8, 1.0, 1e4] {
                    if w == 0.0 && s == 0.0 {
                        continue;
                    }
                    for &c2 in &[0.0, 1e-6, 1.0, 1e6] {
                        for &c1 in &[-1e6, -1.0, -1e-6, 0.0, 1e-6, 1.0, 1e6] {
                            if c2 == 0.0 && c1 <= 0.0 {
                                continue;
                            }
                            check(al, w, s, c2, c1);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fast_paths_match_general_kernel() {
        let k1 = Alpha::new(1.0);
        let vals = [1e-8, 1e-3, 0.3, 1.0, 7.0, 1e3];
        let c1s = [-1e3, -3.0, -1e-3, 0.0, 1e-3, 3.0, 1e3];
        let mut cases = Vec::new();
        for &s in &vals {
            for &c2 in &vals {
                for &c1 in &c1s {
                    for &g in &[-1.0, 1e-6, 0.5, 2.0, 1e6] {
                        cases.push((s, c2, c1, g));
                    }
                }
            }
        }
        for ch in cases.chunks(LANES) {
            let mut a = [[1.0; LANES], [1.0; LANES], [0.0; LANES], [1.0; LANES]];
            for (l, c) in ch.iter().enumerate() {
                a[0][l] = c.0;
                a[1][l] = c.1;
                a[2][l] = c.2;
                a[3][l] = c.3;
            }
            let (x, h, _, ok) = cq_lanes(&a[0], &a[1], &a[2], &a[3]);
            for (l, &(s, c2, c1, g)) in ch.iter().enumerate() {
                let r = solve(&k1, 0.0, s, c2, c1, 0.0, f64::INFINITY, g);
                let f = if ok[l] {
                    Root { x: x[l], h: h[l] }
                } else {
                    cq_slow(s, c2, c1, g)
                };
                assert!(
                    (f.x - r.x).abs() <= 1e-12 * r.x,
                    "s={s} c2={c2} c1={c1} {} {}",
                    f.x,
                    r.x
                );
                assert!(
                    (f.h - r.h).abs() <= 1e-6 * r.h,
                    "s={s} c2={c2} c1={c1} {} {}",
                    f.h,
                    r.h
                );
            }
        }
        for &w in &vals {
            for &c2 in &vals {
                for &c1 in &c1s {
                    for &(lo, hi) in &[(0.0, f64::INFINITY), (0.1, 2.0), (1.0, 1.0)] {
                        let r = solve(&k1, w, 0.0, c2, c1, lo, hi, -1.0);
                        let f = log_root(w, c2, c1, lo, hi);
                        assert!(
                            (f.x - r.x).abs() <= 1e-13 * r.x.max(1e-300),
                            "{w} {c2} {c1}"
                        );
                        assert!(
                            (f.h - r.h).abs() <= 1e-12 * r.h.max(1e-300),
                            "{w} {c2} {c1}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn closed_form_matches_newton() {
        let a1 = Alpha::new(1.0);
        let a1b = Alpha::new(1.0000000001);
        for &(w, c2, c1) in &[(1.0, 2.0, 3.0), (2.0, 1e-3, -5.0), (1e-3, 1e3, 1e-2)] {
            let x1 = solve(&a1, w, 0.0, c2, c1, 0.0, f64::INFINITY, -1.0).x;
            let x2 = solve(&a1b, w, 0.0, c2, c1, 0.0, f64::INFINITY, -1.0).x;
            assert!((x1 - x2).abs() <= 1e-8 * x1);
        }
    }

    #[test]
    fn sensitivity_matches_finite_difference() {
        let a = Alpha::new(2.5);
        let (w, s, c2, c1) = (1.3, 0.2, 0.7, 0.4);
        let r = solve(&a, w, s, c2, c1, 0.0, f64::INFINITY, -1.0);
        let e = 1e-6;
        let r2 = solve(&a, w, s, c2, c1 + e, 0.0, f64::INFINITY, -1.0);
        let fd = (r.x - r2.x) / e;
        assert!((fd - r.h).abs() <= 1e-4 * r.h);
    }
}
