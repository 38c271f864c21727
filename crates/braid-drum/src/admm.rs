//! ADMM for DRUM: Algorithm 1 (one-sided, P = diag(a)) and Algorithm 2 (two-sided, the
//! auxiliary-variable "sharing" decomposition), in one implementation.
//!
//! Splitting (scaled form). Every non-zero of the stacked coupling [P; R] is a *pair*
//! (row e, sender l, coefficient p). ADMM runs on
//!
//! ```text
//!   min  -f(x) - g(z)   s.t.  p x_l = y_{e,l}  for every pair,   z_e = sum_l y_{e,l}
//! ```
//! with x in the per-host WQE capacity set and z in the per-host CQE capacity set (link rows:
//! 0 <= z_e <= L_e). Block 1 is x (separable by host), block 2 is (y, z) (separable by row,
//! and the y's of a row have a closed form given z_e). With n_e the number of pairs in row e:
//!
//! ```text
//!   x-update: x_l = argmin -f_l(x) + rho/2 sum_{pairs of l} (p x - y + v_e)^2   (Q capacity)
//!   h      = relax * p x + (1 - relax) y                      (over-relaxation)
//!   z-update: z = argmin -g(z) + rho/(2 n_e) (z_e - sum_l h - n_e v_e)^2         (C capacity)
//!   v_e   += (sum_l h - z_e) / n_e ;  y = h + v_old - v_new
//! ```
//! The scaled duals of all pairs of a row stay equal, so one v per row suffices, and with
//! relax = 1 the x-update term equals the paper's `p (x - x^k) + d^k` with
//! `d^k = (sum_l p x_l^k - z^k + u^k)/n_e` (`u = n_e v`): each host needs only its own data and
//! the d of the rows it sends to. One-sided, n_e = 1 and it is exactly Algorithm 1.

use crate::host::{cap_solve, cap_solve_cq, cap_solve_log, cap_solve_soc};
use crate::huge;
use crate::problem::{Layout, Problem};
use crate::scaled::Scaled;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopRule {
    /// Boyd et al.: ||r|| <= sqrt(p) eps_abs + eps_rel max(||Ax||, ||y||), same for s.
    Boyd,
    /// The paper's rule: ||r|| <= eps_abs * n and ||s|| <= eps_abs * n.
    Paper,
    /// Run max_iter iterations (or to the gap target).
    None,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdmmOptions {
    /// initial penalty in scaled units; <= 0 means automatic
    pub rho: f64,
    /// residual balancing (adaptive rho)
    pub adaptive: bool,
    pub balance_mu: f64,
    pub balance_tau: f64,
    /// over-relaxation in [1, 2)
    pub relax: f64,
    /// scale the variables (otherwise the solver sees the raw units, like the paper)
    pub scaling: bool,
    pub eps_abs: f64,
    pub eps_rel: f64,
    pub stop: StopRule,
    pub max_iter: usize,
    pub min_iter: usize,
    /// probability that a host's x-update result is lost in an iteration
    pub loss_prob: f64,
    pub loss_seed: u64,
    /// compute the objective (and the feasible objective/gap) at every iteration
    pub trace: bool,
    /// known optimum f* (user units) for the normalized gap
    pub reference: Option<f64>,
    /// stop as soon as the normalized gap (needs `reference`) is below this
    pub gap_tol: Option<f64>,
    /// compute the dual bound at the end
    pub dual_bound: bool,
    /// per-row penalty (diagonal preconditioning by the utility curvature of each row)
    pub row_scaling: bool,
    /// every this many iterations, certify the gap without knowing f*: the duality gap
    /// `(UB(ν = ρv) − f(x̃))/Σw` of the feasible recovery x̃ (0: never, unless
    /// `certified_gap_tol` is set, then every 25)
    pub certify_every: usize,
    /// stop at the first check whose certified gap is below this (an upper bound on the true
    /// normalized gap, so the stop is safe where f* is unknown: two-sided, large)
    pub certified_gap_tol: Option<f64>,
}

impl Default for AdmmOptions {
    fn default() -> Self {
        AdmmOptions {
            rho: 0.0,
            adaptive: true,
            balance_mu: 10.0,
            balance_tau: 2.0,
            relax: 1.6,
            scaling: true,
            eps_abs: 1e-6,
            eps_rel: 1e-6,
            stop: StopRule::Boyd,
            max_iter: 5000,
            min_iter: 1,
            loss_prob: 0.0,
            loss_seed: 0,
            trace: true,
            reference: None,
            gap_tol: None,
            dual_bound: true,
            row_scaling: true,
            certify_every: 0,
            certified_gap_tol: None,
        }
    }
}

/// Per-iteration record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Trace {
    /// objective at the iterate (x, z), user units
    pub objective: Vec<f64>,
    /// objective at the feasible recovery of x, user units
    pub objective_feasible: Vec<f64>,
    /// (f* - feasible objective) / sum w, when a reference is known
    pub gap: Vec<f64>,
    pub r_pri: Vec<f64>,
    pub r_dual: Vec<f64>,
    pub eps_pri: Vec<f64>,
    pub eps_dual: Vec<f64>,
    pub rho: Vec<f64>,
    /// wall time since the start of the iterations, seconds
    pub time: Vec<f64>,
    /// hosts whose result was lost
    pub lost: Vec<u32>,
    /// the iterations at which the gap was certified (`certify_every`) ...
    pub certified_iter: Vec<u32>,
    /// ... and the certified gap there, `(UB − f(x̃))/Σw` (≥ the true normalized gap)
    pub certified_gap: Vec<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SolveResult {
    pub method: String,
    /// WQE rates (user units)
    pub x: Vec<f64>,
    /// CQE rates from the solver's z iterate (user units; CQ rows)
    pub z: Vec<f64>,
    /// feasible allocation recovered from x, and its z = P x
    pub x_feasible: Vec<f64>,
    pub z_feasible: Vec<f64>,
    pub objective: f64,
    pub objective_feasible: f64,
    /// upper bound on the optimum from the dual variables (user units)
    pub dual_bound: Option<f64>,
    pub iterations: usize,
    pub converged: bool,
    pub trace: Trace,
    pub setup_time: f64,
    pub solve_time: f64,
    /// WQE capacity multipliers per host (user units: utility per op/s)
    pub lambda: Vec<f64>,
    /// CQE capacity multipliers per host
    pub mu: Vec<f64>,
    pub rho_final: f64,
}

/// Residual accumulators of one iteration (sums of squares).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sums {
    pub r2: f64,
    pub s2: f64,
    pub ax2: f64,
    pub y2: f64,
    pub atv2: f64,
}

impl Sums {
    pub(crate) fn add(self, o: Sums) -> Sums {
        Sums {
            r2: self.r2 + o.r2,
            s2: self.s2 + o.s2,
            ax2: self.ax2 + o.ax2,
            y2: self.y2 + o.y2,
            atv2: self.atv2 + o.atv2,
        }
    }
}

pub struct Admm {
    pub p: Arc<Problem>,
    pub lay: Arc<Layout>,
    pub sc: Scaled,
    pub opt: AdmmOptions,
    pub rho: f64,
    pub x: Vec<f64>,
    pub z: Vec<f64>,
    pub v: Vec<f64>,
    pub dv: Vec<f64>,
    pub y: Vec<f64>,
    pub h: Vec<f64>,
    pub hsum: Vec<f64>,
    pub lam: Vec<f64>,
    pub mu: Vec<f64>,
    pub iter: usize,
    /// relative penalty per row (rho_e = rho * rs_e)
    pub rs: Vec<f64>,
    /// per entry: sum over its pairs of rs_row * p^2
    pub rp2: Vec<f64>,
    /// the whole instance's sizes (this state may hold one shard's hosts)
    pub glob: Global,
    /// tiled two-sided passes (`lay.app_tiled`): the x-update's linear coefficient per entry,
    /// computed by the y pass of the previous iteration ([`crate::tiles::y_update`])
    pub base: Vec<f64>,
    /// `base` is up to date with rho, v and y (false after a change of rho)
    pub base_ok: bool,
    /// every row penalty is 1 (two-sided, where row scaling is off): the tiled passes skip `rs`
    pub rs_unit: bool,
}

/// Sizes of the whole instance and where this state's hosts start in it: the stopping rule
/// and the lost-result draws are defined on the whole instance.
#[derive(Clone, Copy, Debug)]
pub struct Global {
    pub n: usize,
    pub entries: usize,
    pub pairs: usize,
    /// global index of this state's first host
    pub host0: usize,
}

/// Split a mutable slice into per-host chunks of m.
fn host_chunks<T: Send>(v: &mut [T], m: usize) -> rayon::slice::ChunksMut<'_, T> {
    v.par_chunks_mut(m)
}

impl Admm {
    pub fn new(p: Arc<Problem>, lay: Arc<Layout>, opt: AdmmOptions) -> Admm {
        let sc = Scaled::new(&p, &lay, opt.scaling);
        let z0 = lay.row_sums(&equal_split(&sc));
        let curv = curvature(&sc, &lay, Some(&z0));
        let rho0 = median_rho(&sample_curvature(&curv[..p.entries()], 0, p.entries()));
        let rs = row_scales(&curv, rho0, opt.row_scaling);
        let glob = Global {
            n: p.n,
            entries: p.entries(),
            pairs: lay.pairs(),
            host0: 0,
        };
        let mut st = Admm::from_parts(p, lay, sc, opt, rho0, rs, glob);
        st.gather_rows();
        st.z.copy_from_slice(&st.hsum);
        st
    }

    /// The state before the first row sums: x at the equal split, y = h = p x. `rho0` is the
    /// automatic penalty (median curvature), `rs` the row scales. The caller gathers the rows
    /// and sets z to them (a shard first adds the other ranks' partial sums).
    pub fn from_parts(
        p: Arc<Problem>,
        lay: Arc<Layout>,
        sc: Scaled,
        opt: AdmmOptions,
        rho0: f64,
        rs: Vec<f64>,
        glob: Global,
    ) -> Admm {
        let nn = p.entries();
        // Row scaling (rs) helps one-sided problems a lot (measured 2-4x fewer iterations);
        // two-sided it hurt while the curvature was taken at the equal split, and helps since
        // it is taken at the alpha-fair, CQE-capped split (`curvature`; docs/drum.md).
        // two-sided: the shared rows see n_e senders; 3x the one-sided heuristic was best on the
        // paper's instances (alpha 0.5-2; measured in docs/drum.md)
        let rho0 = if lay.diag { rho0 } else { 3.0 * rho0 };
        let rho = if opt.rho > 0.0 { opt.rho } else { rho0 };
        // the arrays the tiled passes jump through are on huge pages (`huge`)
        let mut rp2 = huge::filled(nn, 0.0);
        for (k, r) in rp2.iter_mut().enumerate() {
            *r = (lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize)
                .map(|q| rs[lay.pair_row[q] as usize] * lay.pair_coef[q] * lay.pair_coef[q])
                .sum();
        }
        // start from the equal split of the WQE capacity (feasible w.r.t. Q)
        let mut x = huge::filled(nn, 0.0);
        for i in 0..p.n {
            let cnt = (0..p.m)
                .filter(|&j| sc.hi[i * p.m + j] > 0.0)
                .count()
                .max(1);
            for j in 0..p.m {
                let k = i * p.m + j;
                x[k] = if sc.hi[k] > 0.0 {
                    (sc.q[i] / cnt as f64).max(sc.lo[k])
                } else {
                    0.0
                };
            }
        }
        let np = lay.pairs();
        let mut y = huge::filled(np, 0.0);
        for q in 0..np {
            y[q] = lay.pair_coef[q] * x[lay.sender_of(q)];
        }
        let rows = lay.rows;
        let n = p.n;
        let rs_unit = rs.iter().all(|&r| r == 1.0);
        let mut h = vec![0.0; np];
        h.copy_from_slice(&y);
        Admm {
            p,
            lay,
            sc,
            opt,
            rho,
            x,
            z: huge::filled(rows, 0.0),
            v: huge::filled(rows, 0.0),
            dv: huge::filled(rows, 0.0),
            y,
            h,
            hsum: huge::filled(rows, 0.0),
            lam: vec![0.0; n],
            mu: vec![0.0; n],
            iter: 0,
            rs,
            rp2,
            glob,
            base: Vec::new(),
            base_ok: false,
            rs_unit,
        }
    }

    /// x-update for all hosts except the lost ones; computes h for their pairs.
    pub fn x_step(&mut self, lost: &[bool]) {
        let n = self.p.n;
        self.x_step_range(lost, 0, n)
    }

    /// One-sided x-update for [`Admm::zy_step_diag`], which computes h itself: h is not
    /// written.
    pub fn x_step_fused(&mut self, lost: &[bool]) {
        debug_assert!(self.lay.diag);
        let n = self.p.n;
        self.x_step_h(lost, 0, n, false)
    }

    /// x-update of hosts h0..h1 (skipping the lost ones); computes h for their pairs.
    pub fn x_step_range(&mut self, lost: &[bool], h0: usize, h1: usize) {
        self.x_step_h(lost, h0, h1, true)
    }

    fn x_step_h(&mut self, lost: &[bool], h0: usize, h1: usize, write_h: bool) {
        let (m, rho, relax) = (self.p.m, self.rho, self.opt.relax);
        let sc = &self.sc;
        let lay = &*self.lay;
        let v = &self.v;
        let y = &self.y;
        let rs = &self.rs;
        let rp2 = &self.rp2;
        let h_ptr = SendPtr(self.h.as_mut_ptr());
        host_chunks(&mut self.x[h0 * m..h1 * m], m)
            .zip(self.lam[h0..h1].par_iter_mut())
            .enumerate()
            .for_each(|(ii, (xs, lam))| {
                let i = h0 + ii;
                let k0 = i * m;
                if lost.is_empty() || !lost[i] {
                    // linear coefficient from the pairs of each entry; one-sided, also the
                    // quadratic one (rp2 = rs p^2, the same bits) from the rs and p read here
                    // anyway: one array fewer streamed from memory per iteration
                    let mut scratch = vec![0.0; 2 * m];
                    let (base, c2d) = scratch.split_at_mut(m);
                    if lay.diag {
                        // one-sided: pair k = entry k = row k
                        let r = k0..k0 + m;
                        let (p, rs) = (&lay.pair_coef[r.clone()], &rs[r.clone()]);
                        diag_coefs(rho, rs, p, &v[r.clone()], &y[r], base, c2d);
                    }
                    for j in 0..m {
                        let k = k0 + j;
                        if lay.diag {
                            continue;
                        }
                        let mut b = 0.0;
                        for q in lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize {
                            let row = lay.pair_row[q] as usize;
                            b += rs[row] * lay.pair_coef[q] * (v[row] - y[q]);
                        }
                        base[j] = rho * b;
                    }
                    let c2v: &[f64] = if lay.diag { c2d } else { &rp2[k0..k0 + m] };
                    *lam = x_host(sc, i, rho, c2v, base, *lam, xs);
                }
                if !write_h {
                    return;
                }
                // h for the pairs of this host (disjoint ranges per host)
                let q0 = lay.send_ptr[k0] as usize;
                let q1 = lay.send_ptr[k0 + m] as usize;
                if lay.diag {
                    for j in 0..m {
                        let k = k0 + j;
                        let hv = relax * lay.pair_coef[k] * xs[j] + (1.0 - relax) * y[k];
                        // SAFETY: pair ranges of different hosts are disjoint
                        unsafe { *h_ptr.get().add(k) = hv };
                    }
                    return;
                }
                for j in 0..m {
                    let k = k0 + j;
                    for q in lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize {
                        let hv = relax * lay.pair_coef[q] * xs[j] + (1.0 - relax) * y[q];
                        debug_assert!(q >= q0 && q < q1);
                        // SAFETY: pair ranges of different hosts are disjoint
                        unsafe { *h_ptr.get().add(q) = hv };
                    }
                }
            });
    }

    /// Two-sided x-update in the tiled form (`lay.app_tiled`, [`crate::tiles`]): the linear
    /// coefficients come from `base` (recomputed here if rho changed since the last
    /// [`Admm::y_step_tiled`]); h is not written ([`Admm::rows_tiled`] recomputes it). Same
    /// x bits as [`Admm::x_step`].
    pub fn x_step_tiled(&mut self, lost: &[bool]) {
        debug_assert!(self.lay.app_tiled);
        let (m, rho) = (self.p.m, self.rho);
        if self.base.len() != self.x.len() {
            self.base = huge::filled(self.x.len(), 0.0);
            self.base_ok = false;
        }
        if !self.base_ok {
            let rs: &[f64] = if self.rs_unit { &[] } else { &self.rs };
            crate::tiles::x_linear(&self.lay, rho, rs, &self.v, &self.y, &mut self.base);
            self.base_ok = true;
        }
        let sc = &self.sc;
        let base = &self.base;
        let rp2 = &self.rp2;
        host_chunks(&mut self.x, m)
            .zip(self.lam.par_iter_mut())
            .enumerate()
            .for_each(|(i, (xs, lam))| {
                if lost.is_empty() || !lost[i] {
                    let r = i * m..(i + 1) * m;
                    *lam = x_host(sc, i, rho, &rp2[r.clone()], &base[r], *lam, xs);
                }
            });
    }

    /// Row sums of the over-relaxed pair values in the tiled form: `gather_rows` without h.
    pub fn rows_tiled(&mut self) {
        crate::tiles::relaxed_row_sums(&self.lay, &self.x, &self.y, self.opt.relax, &mut self.hsum);
    }

    /// y-update and residual sums in the tiled form (after [`Admm::z_step`]); also computes
    /// the next x-update's linear coefficients (`base`) for the current rho.
    pub fn y_step_tiled(&mut self) -> Sums {
        if self.base.len() != self.x.len() {
            self.base = huge::filled(self.x.len(), 0.0);
        }
        let rs: &[f64] = if self.rs_unit { &[] } else { &self.rs };
        let s = crate::tiles::y_update(
            &self.lay,
            &self.x,
            self.opt.relax,
            self.rho,
            rs,
            &self.v,
            &self.dv,
            &mut self.y,
            &mut self.base,
        );
        self.base_ok = true;
        s
    }

    /// hsum_e = sum of h over the pairs of row e.
    pub fn gather_rows(&mut self) {
        let lay = &*self.lay;
        let h = &self.h;
        if lay.diag {
            self.hsum.copy_from_slice(h);
            return;
        }
        self.hsum
            .par_iter_mut()
            .with_min_len(1024)
            .enumerate()
            .for_each(|(r, o)| {
                let mut s = 0.0;
                for t in lay.row_ptr[r] as usize..lay.row_ptr[r + 1] as usize {
                    s += h[lay.row_pair[t] as usize];
                }
                *o = s;
            });
    }

    /// z-update and dual update of all rows.
    pub fn z_step(&mut self) {
        let n = self.p.n;
        self.z_step_range(0, n, true)
    }

    /// z-update and dual update of the CQ rows of hosts h0..h1 (and of the link rows if asked).
    pub fn z_step_range(&mut self, h0: usize, h1: usize, links: bool) {
        let (m, rho) = (self.p.m, self.rho);
        let nn = self.p.entries();
        let sc = &self.sc;
        let lay = &*self.lay;
        let hsum = &self.hsum;
        let rs = &self.rs;
        let (zc, zl) = self.z.split_at_mut(nn);
        let (vc, vl) = self.v.split_at_mut(nn);
        let (dc, dl) = self.dv.split_at_mut(nn);
        let (a, b) = (h0 * m, h1 * m);
        host_chunks(&mut zc[a..b], m)
            .zip(host_chunks(&mut vc[a..b], m))
            .zip(host_chunks(&mut dc[a..b], m))
            .zip(self.mu[h0..h1].par_iter_mut())
            .enumerate()
            .for_each(|(ii, (((zs, vs), ds), mu))| {
                let i = h0 + ii;
                let k0 = i * m;
                // one-sided: every row has one pair (and row_ptr need not be read)
                let diag = lay.diag;
                let beta = sc.beta_of(i);
                let ent = |j: usize| {
                    let r = k0 + j;
                    let ne = if diag { 1.0 } else { lay.senders(r) as f64 };
                    let c2 = rho * rs[r] / ne;
                    let t = hsum[r] + ne * vs[j];
                    (2.0 * beta[j], c2, -c2 * t)
                };
                *mu = cap_solve_cq(m, ent, sc.c[i], *mu, zs);
                for j in 0..m {
                    let r = k0 + j;
                    let ne = if diag { 1.0 } else { lay.senders(r) as f64 };
                    let d = (hsum[r] - zs[j]) / ne;
                    vs[j] += d;
                    ds[j] = d;
                }
            });
        if !links {
            return;
        }
        // link rows
        zl.par_iter_mut()
            .zip(vl.par_iter_mut())
            .zip(dl.par_iter_mut())
            .enumerate()
            .for_each(|(e, ((z, v), d))| {
                let r = nn + e;
                let ne = lay.row_len(r) as f64;
                if ne == 0.0 {
                    *z = 0.0;
                    *d = 0.0;
                    return;
                }
                let t = hsum[r] + ne * *v;
                *z = t.clamp(0.0, sc.link_cap[e]);
                let dd = (hsum[r] - *z) / ne;
                *v += dd;
                *d = dd;
            });
    }

    /// One-sided (`lay.diag`) z-, dual- and y-updates fused into one pass per host, with h in
    /// place of the row sums (one pair per row). h is recomputed here from the x and y this pass
    /// reads anyway (the expression of the x-step, so the same bits), so the x-step need not
    /// write it ([`Admm::x_step_fused`]): two arrays fewer streamed per iteration. Same
    /// arithmetic as `gather_rows`, `z_step`, `y_step` (the residual sums are added in another
    /// order); leaves `h`, `hsum` and `dv` stale, so it is only used by `run` and the sharded
    /// solve.
    pub fn zy_step_diag(&mut self) -> Sums {
        let (m, rho, relax) = (self.p.m, self.rho, self.opt.relax);
        let nn = self.p.entries();
        let sc = &self.sc;
        let lay = &*self.lay;
        debug_assert!(lay.diag && lay.rows == nn);
        let x = &self.x;
        let rs = &self.rs;
        let coef = &lay.pair_coef;
        host_chunks(&mut self.z[..nn], m)
            .zip(host_chunks(&mut self.v[..nn], m))
            .zip(host_chunks(&mut self.y[..nn], m))
            .zip(self.mu.par_iter_mut())
            .enumerate()
            .map(|(i, (((zs, vs), ys), mu))| {
                let r = i * m..(i + 1) * m;
                let mut h = vec![0.0; m];
                let (coef, rs, x) = (&coef[r.clone()], &rs[r.clone()], &x[r]);
                zy_host_diag(sc, i, rho, relax, coef, rs, x, zs, vs, ys, mu, &mut h)
            })
            .reduce(Sums::default, Sums::add)
    }

    /// One whole one-sided (`lay.diag`) iteration in one pass per host: the x-update, then the
    /// z-, dual- and y-updates of the same host while its slices are still in cache. One-sided
    /// the problem separates by host within an iteration (only rho and the stop test are
    /// global), so this computes what [`Admm::x_step_fused`] + [`Admm::zy_step_diag`] compute,
    /// bit for bit, but streams each array from memory once per iteration: reads w, rs, p, v,
    /// y, z and writes x, z, v, y (10 streams instead of 15; at 5·10⁷ variables the passes are
    /// memory-bound). The residual sums are added per host, then in host order (the same bits
    /// for any thread count). Leaves `h`, `hsum` and `dv` stale, like `zy_step_diag`.
    pub fn step_diag(&mut self, lost: &[bool]) -> Sums {
        let (m, rho, relax) = (self.p.m, self.rho, self.opt.relax);
        let nn = self.p.entries();
        let sc = &self.sc;
        let lay = &*self.lay;
        debug_assert!(lay.diag && lay.rows == nn);
        let rs = &self.rs;
        let coef = &lay.pair_coef;
        let per_host: Vec<Sums> = host_chunks(&mut self.x, m)
            .zip(host_chunks(&mut self.z[..nn], m))
            .zip(host_chunks(&mut self.v[..nn], m))
            .zip(host_chunks(&mut self.y[..nn], m))
            .zip(self.lam.par_iter_mut())
            .zip(self.mu.par_iter_mut())
            .enumerate()
            .map_init(
                || vec![0.0; 2 * m],
                |scratch, (i, (((((xs, zs), vs), ys), lam), mu))| {
                    let r = i * m..(i + 1) * m;
                    let (coef, rs) = (&coef[r.clone()], &rs[r]);
                    let (base, c2d) = scratch.split_at_mut(m);
                    if lost.is_empty() || !lost[i] {
                        diag_coefs(rho, rs, coef, vs, ys, base, c2d);
                        *lam = x_host(sc, i, rho, c2d, base, *lam, xs);
                    }
                    zy_host_diag(sc, i, rho, relax, coef, rs, xs, zs, vs, ys, mu, base)
                },
            )
            .collect();
        per_host.into_iter().fold(Sums::default(), Sums::add)
    }

    /// y-update and residual sums.
    pub fn y_step(&mut self) -> Sums {
        let n = self.p.n;
        self.y_step_range(0, n)
    }

    /// y-update of the pairs of hosts h0..h1 and their residual sums.
    pub fn y_step_range(&mut self, h0: usize, h1: usize) -> Sums {
        let m = self.p.m;
        let lay = &*self.lay;
        let dv = &self.dv;
        let v = &self.v;
        let h = &self.h;
        let x = &self.x;
        let rho = self.rho;
        let rs = &self.rs;
        let y_ptr = SendPtr(self.y.as_mut_ptr());
        (h0..h1)
            .into_par_iter()
            .map(|i| {
                let mut s = Sums::default();
                for k in i * m..(i + 1) * m {
                    let mut dual = 0.0;
                    let mut atv = 0.0;
                    for q in lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize {
                        let row = lay.pair_row[q] as usize;
                        let p = lay.pair_coef[q];
                        // SAFETY: pair ranges of different hosts are disjoint
                        let yq = unsafe { &mut *y_ptr.get().add(q) };
                        let ynew = h[q] - dv[row];
                        let px = p * x[k];
                        s.r2 += (px - ynew) * (px - ynew);
                        dual += rs[row] * p * (ynew - *yq);
                        atv += rs[row] * p * v[row];
                        s.ax2 += px * px;
                        s.y2 += ynew * ynew;
                        *yq = ynew;
                    }
                    s.s2 += rho * rho * dual * dual;
                    s.atv2 += rho * rho * atv * atv;
                }
                s
            })
            .reduce(Sums::default, Sums::add)
    }

    /// Feasible recovery: x~ = g + theta (x - g) with theta chosen per host (one-sided) or
    /// globally (two-sided, links) so that P x~ <= C and R x~ <= L. Scaled units.
    pub fn recover(&self, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        recover(&self.sc, &self.lay, x)
    }

    /// Which of this state's hosts lose their result in iteration k: one draw per host of the
    /// whole instance (so a shard's hosts get the draws they get in the local solve).
    pub fn lost_mask(&self, k: usize) -> Vec<bool> {
        if self.opt.loss_prob <= 0.0 {
            return Vec::new();
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(
            self.opt.loss_seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let h0 = self.glob.host0;
        (0..h0 + self.p.n)
            .map(|_| rng.random::<f64>() < self.opt.loss_prob)
            .skip(h0)
            .collect()
    }

    /// Residual norms and tolerances from the sums: (r, s, eps_pri, eps_dual).
    pub fn tolerances(&self, s: &Sums) -> (f64, f64, f64, f64) {
        let n = self.glob.n as f64;
        let nn = self.glob.entries as f64;
        let np = self.glob.pairs as f64;
        let r = s.r2.sqrt();
        let d = s.s2.sqrt();
        let (ep, ed) = match self.opt.stop {
            StopRule::Paper => (self.opt.eps_abs * n, self.opt.eps_abs * n),
            _ => (
                np.sqrt() * self.opt.eps_abs + self.opt.eps_rel * s.ax2.sqrt().max(s.y2.sqrt()),
                nn.sqrt() * self.opt.eps_abs + self.opt.eps_rel * s.atv2.sqrt(),
            ),
        };
        (r, d, ep, ed)
    }

    /// Residual balancing (adaptive rho) on relative residuals; rescales the scaled duals.
    pub fn adapt(&mut self, s: &Sums) {
        if !self.opt.adaptive {
            return;
        }
        let r = s.r2.sqrt();
        let d = s.s2.sqrt();
        let rr = r / (s.ax2.sqrt().max(s.y2.sqrt())).max(1e-300);
        let dd = d / s.atv2.sqrt().max(1e-300);
        let tau = self.opt.balance_tau;
        if rr > self.opt.balance_mu * dd {
            self.rho *= tau;
            self.v.iter_mut().for_each(|v| *v /= tau);
            self.base_ok = false;
        } else if dd > self.opt.balance_mu * rr {
            self.rho /= tau;
            self.v.iter_mut().for_each(|v| *v *= tau);
            self.base_ok = false;
        }
    }

    /// Run to convergence.
    pub fn run(mut self) -> SolveResult {
        let t0 = Instant::now();
        let mut trace = Trace::default();
        let wsum = self.p.weight_sum().max(1e-300);
        let mut converged = false;
        let max_iter = self.opt.max_iter.max(1);
        if self.lay.app_tiled {
            // the tiled passes recompute the pairs' h: one float per pair less held
            self.h = Vec::new();
        }
        for k in 1..=max_iter {
            self.iter = k;
            let lost = self.lost_mask(k);
            if !lost.is_empty() {
                trace.lost.push(lost.iter().filter(|&&l| l).count() as u32);
            }
            let s = if self.lay.diag {
                self.step_diag(&lost)
            } else if self.lay.app_tiled {
                self.x_step_tiled(&lost);
                self.rows_tiled();
                self.z_step();
                self.y_step_tiled()
            } else {
                self.x_step(&lost);
                self.gather_rows();
                self.z_step();
                self.y_step()
            };
            let (r, d, ep, ed) = self.tolerances(&s);
            trace.r_pri.push(r);
            trace.r_dual.push(d);
            trace.eps_pri.push(ep);
            trace.eps_dual.push(ed);
            trace.rho.push(self.rho);
            let mut gap_ok = false;
            if self.opt.trace || self.opt.gap_tol.is_some() {
                let f = self.sc.to_user(self.sc.objective(&self.x, &self.z));
                let (xf, zf) = self.recover(&self.x);
                let ff = self.sc.to_user(self.sc.objective(&xf, &zf));
                trace.objective.push(f);
                trace.objective_feasible.push(ff);
                if let Some(fs) = self.opt.reference {
                    let g = (fs - ff) / wsum;
                    trace.gap.push(g);
                    if let Some(tol) = self.opt.gap_tol {
                        gap_ok = g <= tol;
                    }
                }
            }
            trace.time.push(t0.elapsed().as_secs_f64());
            let every = match (self.opt.certify_every, self.opt.certified_gap_tol) {
                (0, Some(_)) => 25,
                (e, _) => e,
            };
            if every > 0 && k % every == 0 {
                let g = self.certified_gap(wsum);
                trace.certified_iter.push(k as u32);
                trace.certified_gap.push(g);
                if let Some(tol) = self.opt.certified_gap_tol {
                    gap_ok |= g <= tol;
                }
            }
            let stop = match self.opt.stop {
                StopRule::None => false,
                _ => r <= ep && d <= ed,
            };
            if k >= self.opt.min_iter && (stop || gap_ok) {
                converged = true;
                break;
            }
            self.adapt(&s);
        }
        let solve_time = t0.elapsed().as_secs_f64();
        self.finish("admm", trace, converged, solve_time)
    }

    /// The duality gap of the current iterate, normalized: `(UB(ν) − f(x̃))/Σw` (user units)
    /// with the dual bound at the scaled duals' prices ν = ρ rs v and the feasible recovery x̃.
    /// Costs about one x- and one z-update plus the recovery.
    pub fn certified_gap(&self, wsum: f64) -> f64 {
        let sc = &self.sc;
        let nu: Vec<f64> = self
            .v
            .iter()
            .zip(&self.rs)
            .map(|(v, r)| self.rho * r * v)
            .collect();
        let ub = sc.to_user(crate::dual::upper_bound_at(sc, &self.lay, &nu, &self.x).0);
        let (xf, zf) = self.recover(&self.x);
        let ff = sc.to_user(sc.objective(&xf, &zf));
        (ub - ff) / wsum
    }

    pub fn finish(
        self,
        method: &str,
        trace: Trace,
        converged: bool,
        solve_time: f64,
    ) -> SolveResult {
        let sc = &self.sc;
        let nn = self.p.entries();
        let (xf, zf) = self.recover(&self.x);
        let objective = sc.to_user(sc.objective(&self.x, &self.z));
        let objective_feasible = sc.to_user(sc.objective(&xf, &zf));
        let dual_bound = if self.opt.dual_bound {
            let nu: Vec<f64> = self
                .v
                .iter()
                .zip(&self.rs)
                .map(|(v, r)| self.rho * r * v)
                .collect();
            Some(sc.to_user(crate::dual::upper_bound_at(sc, &self.lay, &nu, &self.x).0))
        } else {
            None
        };
        let sx = sc.sx;
        let lf = sc.sf / sx;
        SolveResult {
            method: method.to_string(),
            x: self.x.iter().map(|v| v * sx).collect(),
            z: self.z[..nn].iter().map(|v| v * sx).collect(),
            x_feasible: xf.iter().map(|v| v * sx).collect(),
            z_feasible: zf[..nn].iter().map(|v| v * sx).collect(),
            objective,
            objective_feasible,
            dual_bound,
            iterations: self.iter,
            converged,
            trace,
            setup_time: 0.0,
            solve_time,
            lambda: self.lam.iter().map(|l| l * lf).collect(),
            mu: self.mu.iter().map(|l| l * lf).collect(),
            rho_final: self.rho,
        }
    }
}

/// The x-update of host i: minimise `-f_i(x) + rho/2 sum_j c2v_j x_j^2 + base_j x_j` over its
/// WQE capacity set, warm-started from `xs` and the multiplier `lam`; returns the multiplier.
#[inline]
fn x_host(
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
fn diag_coefs(
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
fn zy_host_diag(
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

/// Feasible recovery (scaled units). Returns (x~, rows = [P; R] x~).
pub fn recover(sc: &Scaled, lay: &Layout, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let nn = sc.n * sc.m;
    let pg = lay.row_sums(&sc.lo);
    let px = lay.row_sums(x);
    let (theta, global) = recover_theta(sc, &pg, &px);
    let mut links = 1.0f64;
    for (e, &cap) in sc.link_cap.iter().enumerate() {
        let (a, b) = (pg[nn + e], px[nn + e] - pg[nn + e]);
        if a + b > cap && b > 0.0 {
            links = links.min(((cap - a) / b).clamp(0.0, 1.0));
        }
    }
    let hosts = if lay.diag {
        Some(theta)
    } else {
        own_theta(sc, lay, &pg, &px, &theta, x)
    };
    let xf = match &hosts {
        Some(t) => recover_apply(sc, Some(t), links, x),
        None => recover_apply(sc, None, global.min(links), x),
    };
    let rows = lay.row_sums(&xf);
    (xf, rows)
}

/// Two-sided, per host: the factor by which host i's *own* entries are pulled toward their
/// guarantees so that its CQ rows fit C_i. P ≥ 0 and x̃ ≤ x, so pulling any entries in only
/// lowers every row: host i's excess `Σ px − C_i = (1 − θ_i) Σ (px − pg)` is removed by its
/// own entries' self terms alone (row (i, j) has the pair of sender (i, j), coefficient a_ij,
/// lowered by `(1 − θ'_i) a_ij (x − g)`; any other pairs into host i only lower it more), and
/// the other hosts' rows can only fall. So the point is feasible whatever the other hosts do,
/// and only hosts over their C move, where one global θ pulled every host in by the worst
/// host's factor: on the paper's two-sided instances the CQ utility (−β/z², ~100× the
/// utility's weight at m = 5000) turned that into a certified gap ~100× the largest relative
/// violation. `None` when some host's own entries cannot absorb its excess (no self term, or
/// `θ' < 0`): then the caller uses the global θ.
pub fn own_theta(
    sc: &Scaled,
    lay: &Layout,
    pg: &[f64],
    px: &[f64],
    theta: &[f64],
    x: &[f64],
) -> Option<Vec<f64>> {
    let m = sc.m;
    let mut out = vec![1.0f64; sc.n];
    for (i, t) in out.iter_mut().enumerate() {
        if theta[i] >= 1.0 {
            continue;
        }
        let r = i * m..(i + 1) * m;
        let b: f64 = r.clone().map(|k| px[k] - pg[k]).sum();
        let excess = (1.0 - theta[i]) * b;
        let own: f64 = r
            .map(|k| {
                let q = (lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize)
                    .find(|&q| lay.pair_row[q] as usize == k)?;
                Some(lay.pair_coef[q] * (x[k] - sc.lo[k]).max(0.0))
            })
            .map(|v| v.unwrap_or(0.0))
            .sum();
        if !(own > 0.0) {
            return None;
        }
        let t2 = 1.0 - excess / own;
        if !(t2 >= 0.0) {
            return None;
        }
        *t = t2.min(1.0);
    }
    Some(out)
}

/// Per host, the largest theta in [0, 1] with g + theta (P x - g) within the CQE capacity (from
/// the CQ row sums `pg` = P g and `px` = P x of the hosts of `sc`), and their minimum.
pub fn recover_theta(sc: &Scaled, pg: &[f64], px: &[f64]) -> (Vec<f64>, f64) {
    let (n, m) = (sc.n, sc.m);
    let mut theta = vec![1.0f64; n];
    let mut global = 1.0f64;
    for i in 0..n {
        let (mut a, mut b) = (0.0, 0.0);
        for r in i * m..(i + 1) * m {
            a += pg[r];
            b += px[r] - pg[r];
        }
        let t = if a + b > sc.c[i] && b > 0.0 {
            ((sc.c[i] - a) / b).clamp(0.0, 1.0)
        } else {
            1.0
        };
        theta[i] = t;
        global = global.min(t);
    }
    (theta, global)
}

/// x~ = g + theta (x - g): per host when the hosts are uncoupled (`diag`), else one global theta.
pub fn recover_apply(sc: &Scaled, hosts: Option<&[f64]>, global: f64, x: &[f64]) -> Vec<f64> {
    let m = sc.m;
    // also the WQE capacity, which x satisfies up to the search tolerance
    (0..sc.n * m)
        .map(|k| {
            let t = hosts.map_or(global, |h| h[k / m].min(global));
            sc.lo[k] + t * (x[k] - sc.lo[k]).max(0.0)
        })
        .collect()
}
