//! Units scaling: the solvers work on a scaled copy of the problem so that convergence does not
//! depend on the units the rates are given in.
//!
//! `x = sx * xh` with `sx` the mean WQE capacity, and the objective is divided by
//! `sf = mean(w) * sx^(1 - alpha)`, so the scaled weights average 1 and the capacities are O(1).
//! A problem restated in other units (rates times c, w times c^(alpha-1), beta times c^2) scales to
//! the same numbers, hence the same iterates.

use crate::problem::{Layout, Problem};
use crate::scalar::Alpha;

#[derive(Clone, Debug)]
pub struct Scaled {
    pub n: usize,
    pub m: usize,
    pub al: Alpha,
    pub sx: f64,
    pub sf: f64,
    /// scaled weights (0 for inactive entries)
    pub w: Vec<f64>,
    /// scaled beta per CQ row (0 for inactive entries)
    pub beta: Vec<f64>,
    pub q: Vec<f64>,
    pub c: Vec<f64>,
    pub lo: Vec<f64>,
    /// upper bound: +inf for active, 0 for inactive
    pub hi: Vec<f64>,
    /// preempt coefficients (empty = none)
    pub r: Vec<f64>,
    /// per-host flag: host has a preempt (SOC) constraint
    pub host_soc: Vec<bool>,
    pub link_cap: Vec<f64>,
    /// constant added to the user-unit objective: sum_active w log sx for alpha = 1
    pub obj_const: f64,
    /// One host's worth (m) of lo, hi and beta when they are the same on every host (no
    /// guarantees, every entry active: 0, +inf, the scaled beta), else empty. The hot passes
    /// read these, which stay in cache, instead of streaming the full arrays each iteration.
    pub lo_host: Vec<f64>,
    pub hi_host: Vec<f64>,
    pub beta_host: Vec<f64>,
}

/// What the scaling needs from one host: its WQE capacity, the summed weight and the number of
/// its active entries. Sharded runs gather these (3 numbers per host, not per entry) and add them
/// in host order, as the local solve does, so both get the same factors to the bit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostStats {
    pub q: f64,
    pub wsum: f64,
    pub active: f64,
}

impl HostStats {
    pub fn of(p: &Problem) -> Vec<HostStats> {
        let m = p.m;
        (0..p.n)
            .map(|i| {
                let mut h = HostStats {
                    q: p.q_cap[i],
                    ..Default::default()
                };
                for k in i * m..(i + 1) * m {
                    if p.is_active(k) {
                        h.wsum += p.w[k];
                        h.active += 1.0;
                    }
                }
                h
            })
            .collect()
    }
}

/// The scale factors of the whole instance: rates `x = sx * xh`, objective `f = sf * fh + c`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Factors {
    pub sx: f64,
    pub sf: f64,
    pub obj_const: f64,
}

impl Factors {
    /// From the per-host statistics of all hosts, in host order.
    pub fn from_stats(stats: &[HostStats], alpha: f64, scaling: bool) -> Factors {
        if !scaling {
            return Factors {
                sx: 1.0,
                sf: 1.0,
                obj_const: 0.0,
            };
        }
        let (mut qsum, mut wsum, mut cnt) = (0.0, 0.0, 0.0);
        for h in stats {
            qsum += h.q;
            wsum += h.wsum;
            cnt += h.active;
        }
        // the mean equal share of the WQE capacity: per-entry rates are O(1)
        let sx = qsum / cnt.max(1.0);
        let wm = if wsum > 0.0 { wsum / cnt.max(1.0) } else { 1.0 };
        let sf = wm * sx.powf(1.0 - alpha);
        let obj_const = if alpha == 1.0 { wsum * sx.ln() } else { 0.0 };
        Factors { sx, sf, obj_const }
    }
}

impl Scaled {
    pub fn new(p: &Problem, layout: &Layout, scaling: bool) -> Scaled {
        let f = Factors::from_stats(&HostStats::of(p), p.alpha, scaling);
        Scaled::with_factors(p, layout, f)
    }

    /// The scaled copy of `p` (which may be one shard's hosts) with the factors of the whole
    /// instance.
    pub fn with_factors(p: &Problem, layout: &Layout, f: Factors) -> Scaled {
        let nn = p.entries();
        let act = |k: usize| p.is_active(k);
        let Factors { sx, sf, obj_const } = f;
        let wf = sx.powf(1.0 - p.alpha) / sf;
        let bf = 1.0 / (sx * sx * sf);
        let w: Vec<f64> = (0..nn)
            .map(|k| if act(k) { p.w[k] * wf } else { 0.0 })
            .collect();
        let beta: Vec<f64> = (0..nn).map(|k| p.beta_k(k) * bf).collect();
        let lo: Vec<f64> = if p.guarantee.is_empty() {
            vec![0.0; nn]
        } else {
            p.guarantee.iter().map(|g| g / sx).collect()
        };
        let hi: Vec<f64> = (0..nn)
            .map(|k| if act(k) { f64::INFINITY } else { 0.0 })
            .collect();
        let r = if p.has_preempt() {
            p.preempt.clone()
        } else {
            Vec::new()
        };
        let host_soc = (0..p.n)
            .map(|i| !r.is_empty() && (0..p.m).any(|j| r[i * p.m + j] > 0.0 && act(i * p.m + j)))
            .collect();
        // +0.0 exactly (bits): a -0.0 guarantee keeps its own array, so the values read are the same
        let uniform = p.guarantee.iter().all(|g| g.to_bits() == 0) && p.active.iter().all(|&a| a);
        let host = |v: f64| if uniform { vec![v; p.m] } else { Vec::new() };
        Scaled {
            lo_host: host(0.0),
            hi_host: host(f64::INFINITY),
            beta_host: host(p.beta * bf),
            n: p.n,
            m: p.m,
            al: Alpha::new(p.alpha),
            sx,
            sf,
            w,
            beta,
            q: p.q_cap.iter().map(|q| q / sx).collect(),
            c: p.c_cap.iter().map(|c| c / sx).collect(),
            lo,
            hi,
            r,
            host_soc,
            link_cap: layout.link_cap.iter().map(|c| c / sx).collect(),
            obj_const,
        }
    }

    /// Scaled objective sum w U(x) - sum beta / z^2 (x over entries, z over CQ rows).
    pub fn objective(&self, x: &[f64], z: &[f64]) -> f64 {
        use rayon::prelude::*;
        let nn = self.n * self.m;
        (0..nn)
            .into_par_iter()
            .with_min_len(4096)
            .map(|k| {
                let mut f = 0.0;
                if self.w[k] > 0.0 {
                    f += self.w[k] * self.al.utility(x[k]);
                }
                if self.beta[k] > 0.0 {
                    f -= self.beta[k] / (z[k] * z[k]);
                }
                f
            })
            .sum()
    }

    /// lo of host i's entries.
    #[inline]
    pub fn lo_of(&self, i: usize) -> &[f64] {
        self.host_slice(&self.lo_host, &self.lo, i)
    }
    #[inline]
    pub fn hi_of(&self, i: usize) -> &[f64] {
        self.host_slice(&self.hi_host, &self.hi, i)
    }
    #[inline]
    pub fn beta_of(&self, i: usize) -> &[f64] {
        self.host_slice(&self.beta_host, &self.beta, i)
    }
    #[inline]
    fn host_slice<'a>(&self, one: &'a [f64], all: &'a [f64], i: usize) -> &'a [f64] {
        if one.is_empty() {
            &all[i * self.m..(i + 1) * self.m]
        } else {
            one
        }
    }

    /// Convert a scaled objective to user units.
    pub fn to_user(&self, f: f64) -> f64 {
        self.sf * f + self.obj_const
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, GenParams};

    /// The per-host shortcuts read exactly the values of the full arrays.
    #[test]
    fn host_slices_equal_the_arrays() {
        let g = GenParams {
            n: 6,
            m: 5,
            ..Default::default()
        };
        let plain = generate(&g);
        let topk = generate(&GenParams {
            k: Some(2),
            ..g.clone()
        });
        let mut guar = generate(&g);
        guar.guarantee = (0..30).map(|k| (k % 3) as f64 * 0.1).collect();
        for (p, uniform) in [(plain, true), (topk, false), (guar, false)] {
            let sc = Scaled::new(&p, &Layout::build(&p), true);
            assert_eq!(!sc.lo_host.is_empty(), uniform);
            for i in 0..p.n {
                let r = i * p.m..(i + 1) * p.m;
                assert_eq!(sc.lo_of(i), &sc.lo[r.clone()]);
                assert_eq!(sc.hi_of(i), &sc.hi[r.clone()]);
                assert_eq!(sc.beta_of(i), &sc.beta[r]);
            }
        }
    }
}
