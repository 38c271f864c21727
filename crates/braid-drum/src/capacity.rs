//! One-dimensional search for a capacity multiplier.
//!
//! Given `S(p) = sum_j coef_j x_j(p)`, non-increasing in the multiplier p (each x_j is the scalar
//! minimiser with its linear coefficient raised by `p coef_j`), find the smallest `p >= p_min`
//! with `S(p) <= cap` and complementary slackness (`p = p_min` or `S(p) = cap`). Safeguarded
//! Newton on a rigorous bracket, using the exact derivative `S'(p) = -sum coef^2 h`; warm-started
//! from the previous iteration's multiplier, it typically needs 2-4 evaluations.

/// Evaluation of S at p: (S(p), -S'(p) >= 0). S may be +inf (unbounded entries).
pub type Eval = (f64, f64);

/// Relative tolerance on the capacity.
pub const CAP_RTOL: f64 = 1e-11;

/// Find the multiplier. `eval(p)` must compute the x_j(p) (keeping them as a side effect); on
/// return the last call to `eval` was made at the returned p.
pub fn search<F: FnMut(f64) -> Eval>(cap: f64, p_min: f64, p_warm: f64, mut eval: F) -> f64 {
    search2(cap, p_min, p_warm, |p| {
        let (s, d) = eval(p);
        (s, d, 0.0)
    })
}

/// `search` with the second derivative: `eval(p) = (S, -S', S'')`. Where `S'' > 0` is given
/// the trial point is Halley's (cubic convergence: one pass fewer from a warm start), else
/// Newton's; the same bracket safeguards apply.
pub fn search2<F: FnMut(f64) -> (f64, f64, f64)>(
    cap: f64,
    p_min: f64,
    p_warm: f64,
    mut eval: F,
) -> f64 {
    // step from p towards S = cap (Halley if the curvature is known)
    #[inline(always)]
    fn step(s: f64, cap: f64, d: f64, dd: f64) -> f64 {
        let g = s - cap;
        let den = 2.0 * d * d - g * dd;
        if dd > 0.0 && den > d * d {
            2.0 * g * d / den
        } else {
            g / d
        }
    }
    let tol = CAP_RTOL * cap.abs().max(1e-300);
    let mut lo = p_min; // S(lo) > cap once `lo_checked`
    let mut hi = f64::INFINITY; // S(hi) <= cap
    let mut p;
    let (mut s, mut d, mut dd);
    let mut last_p;
    if p_warm > p_min && p_warm.is_finite() {
        // warm start: evaluate there first, p_min only if the Newton step goes below it
        p = p_warm;
        let e = eval(p);
        s = e.0;
        d = e.1;
        dd = e.2;
        last_p = p;
        if (s - cap).abs() <= tol && s <= cap + tol {
            return p;
        }
        if s > cap {
            lo = p;
        } else {
            hi = p;
            let pn = if s.is_finite() && d > 0.0 {
                p + step(s, cap, d, dd)
            } else {
                f64::NAN
            };
            if !(pn > p_min) {
                let e0 = eval(p_min);
                last_p = p_min;
                if e0.0 <= cap + tol {
                    return p_min;
                }
                s = e0.0;
                d = e0.1;
                dd = e0.2;
                p = p_min;
            }
        }
    } else {
        let e = eval(p_min);
        s = e.0;
        d = e.1;
        dd = e.2;
        last_p = p_min;
        if s <= cap + tol {
            return p_min;
        }
        p = p_min;
    }
    for _ in 0..300 {
        // next trial point
        let pn = if s.is_finite() && d > 0.0 {
            p + step(s, cap, d, dd)
        } else {
            f64::NAN
        };
        p = if pn.is_finite() && pn > lo && pn < hi {
            pn
        } else if hi.is_finite() {
            0.5 * (lo + hi)
        } else if lo > 0.0 {
            4.0 * lo
        } else {
            1.0
        };
        let e = eval(p);
        s = e.0;
        d = e.1;
        dd = e.2;
        last_p = p;
        if (s - cap).abs() <= tol && s <= cap + tol {
            return p;
        }
        if s > cap {
            lo = p;
        } else {
            hi = p;
        }
        if hi.is_finite() && hi - lo <= 4.0 * f64::EPSILON * hi.abs() {
            break;
        }
    }
    // make sure the returned point is feasible
    if hi.is_finite() && last_p != hi {
        eval(hi);
        return hi;
    }
    last_p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scalar::{solve, Alpha};

    #[test]
    fn water_filling_log() {
        // max sum w log x, sum x <= 10 -> x = 10 w / sum w
        let w = [1.0, 2.0, 3.0, 4.0];
        let al = Alpha::new(1.0);
        let mut x = [0.0; 4];
        let p = search(10.0, 0.0, -1.0, |p| {
            let mut s = 0.0;
            let mut d = 0.0;
            for j in 0..4 {
                let r = solve(&al, w[j], 0.0, 0.0, p, 0.0, f64::INFINITY, x[j]);
                x[j] = r.x;
                s += r.x;
                d += r.h;
            }
            (s, d)
        });
        assert!((p - 1.0).abs() < 1e-10);
        for j in 0..4 {
            assert!((x[j] - w[j]).abs() < 1e-9);
        }
    }
}
