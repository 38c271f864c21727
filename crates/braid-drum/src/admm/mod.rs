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

mod kernels;
mod options;
mod pairs;
mod penalty;
mod recover;
mod result;

pub(crate) use kernels::SendPtr;
use kernels::{diag_coefs, x_host, zy_host_diag};
pub use options::{AdmmOptions, SolveResult, StopRule, Trace};
pub use penalty::{curvature, equal_split, median_rho, row_scales, sample_curvature};
pub use recover::{own_theta, recover, recover_apply, recover_theta};

use crate::host::cap_solve_cq;
use crate::huge;
use crate::problem::{Layout, Problem};
use crate::scaled::Scaled;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

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
    /// per-pair penalties (two-sided, [`Admm::set_pair_penalties`]): the relative penalty of
    /// every pair of entry k is `sig[k]`; empty: a pair takes its row's `rs`
    pub sig: Vec<f64>,
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
        // freed before the iterates are allocated: 16 bytes per variable off the peak
        drop((curv, z0));
        let glob = Global {
            n: p.n,
            entries: p.entries(),
            pairs: lay.pairs(),
            host0: 0,
        };
        let pair = opt.pair_penalty && !lay.diag;
        let mut st = Admm::from_parts(p, lay, sc, opt, rho0, rs, glob);
        if pair {
            // until the first re-estimate (`run`), each pair takes its sender's row scale
            let sig = st.rs[..st.x.len()].to_vec();
            st.set_pair_penalties(sig);
        }
        st.start_rows();
        st
    }

    /// z at the start: the row sums of the start's pair values (one-sided each row's one pair,
    /// y = p x itself, without the row arrays the fused step never reads).
    pub fn start_rows(&mut self) {
        if self.lay.diag {
            self.z.copy_from_slice(&self.y);
        } else {
            self.gather_rows();
            self.z.copy_from_slice(&self.hsum);
        }
    }

    /// Allocate h, the row sums and the dual steps for the unfused passes. One-sided states
    /// start without them: [`Admm::step_diag`] (the solve's and the sharded solve's one-sided
    /// iteration) never reads them, and they are 24 of ~160 bytes per variable (issue 31 §3:
    /// 5·10⁷ one-sided in ≤ 8 GB).
    fn ensure_rows(&mut self) {
        if self.hsum.len() != self.lay.rows {
            self.hsum = huge::filled(self.lay.rows, 0.0);
            self.dv = huge::filled(self.lay.rows, 0.0);
        }
        if self.h.len() != self.y.len() && !self.lay.app_tiled {
            self.h = self.y.clone();
        }
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
        // one-sided: no h, row sums, dual steps or rp2 until an unfused pass asks
        // (`ensure_rows`; the fused step computes c2 from rs and p)
        let diag = lay.diag;
        let h = if diag { Vec::new() } else { y.clone() };
        let rp2 = if diag { Vec::new() } else { rp2 };
        Admm {
            p,
            lay,
            sc,
            opt,
            rho,
            x,
            z: huge::filled(rows, 0.0),
            v: huge::filled(rows, 0.0),
            dv: if diag {
                Vec::new()
            } else {
                huge::filled(rows, 0.0)
            },
            y,
            h,
            hsum: if diag {
                Vec::new()
            } else {
                huge::filled(rows, 0.0)
            },
            lam: vec![0.0; n],
            mu: vec![0.0; n],
            iter: 0,
            rs,
            rp2,
            glob,
            base: Vec::new(),
            base_ok: false,
            rs_unit,
            sig: Vec::new(),
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
        if write_h || !self.lay.diag {
            self.ensure_rows();
        }
        let (m, rho, relax) = (self.p.m, self.rho, self.opt.relax);
        let sc = &self.sc;
        let lay = &*self.lay;
        let v = &self.v;
        let y = &self.y;
        let rs = &self.rs;
        let rp2 = &self.rp2;
        let sig = &self.sig;
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
                            b += if sig.is_empty() {
                                rs[row] * lay.pair_coef[q] * (v[row] - y[q])
                            } else {
                                lay.pair_coef[q] * (rs[row] * v[row] - sig[k] * y[q])
                            };
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
            crate::tiles::x_linear(
                &self.lay,
                rho,
                rs,
                &self.sig,
                &self.v,
                &self.y,
                &mut self.base,
            );
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
            &self.sig,
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
        self.ensure_rows();
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
        self.ensure_rows();
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
            .for_each_init(Vec::new, |coef, (ii, (((zs, vs), ds), mu))| {
                let i = h0 + ii;
                let k0 = i * m;
                // one-sided: every row has one pair (and row_ptr need not be read)
                let diag = lay.diag;
                let beta = sc.beta_of(i);
                // the entries' coefficients once per host, not once per pass of the capacity
                // search (2–5 passes; same expressions, so the same bits): 13% of the two-sided
                // iteration's instructions went to recomputing them (callgrind, docs/drum.md)
                coef.clear();
                coef.extend((0..m).map(|j| {
                    let r = k0 + j;
                    let ne = if diag { 1.0 } else { lay.senders(r) as f64 };
                    let c2 = rho * rs[r] / ne;
                    let t = hsum[r] + ne * vs[j];
                    (2.0 * beta[j], c2, -c2 * t)
                }));
                let coef: &[(f64, f64, f64)] = coef;
                *mu = cap_solve_cq(m, |j| coef[j], sc.c[i], *mu, zs);
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
        self.ensure_rows();
        let m = self.p.m;
        let lay = &*self.lay;
        let dv = &self.dv;
        let v = &self.v;
        let h = &self.h;
        let x = &self.x;
        let rho = self.rho;
        let rs = &self.rs;
        let sig = &self.sig;
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
                        let (ynew, sq) = if sig.is_empty() {
                            (h[q] - dv[row], rs[row])
                        } else {
                            (h[q] - dv[row] * rs[row] / sig[k], sig[k])
                        };
                        let px = p * x[k];
                        s.r2 += (px - ynew) * (px - ynew);
                        dual += sq * p * (ynew - *yq);
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
            let asked =
                self.opt.certified_gap_tol.is_some() || self.opt.certified_rel_gap_tol.is_some();
            let every = match (self.opt.certify_every, asked) {
                (0, true) => 25,
                (e, _) => e,
            };
            if every > 0 && k % every == 0 {
                let (g, rel) = self.certified_gaps(wsum);
                trace.certified_iter.push(k as u32);
                trace.certified_gap.push(g);
                trace.certified_rel_gap.push(rel);
                if let Some(tol) = self.opt.certified_gap_tol {
                    gap_ok |= g <= tol;
                }
                if let Some(tol) = self.opt.certified_rel_gap_tol {
                    gap_ok |= rel <= tol;
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
            if !self.sig.is_empty()
                && k % pairs::PAIR_EVERY == 0
                && (k / pairs::PAIR_EVERY).is_power_of_two()
            {
                // per-pair penalties from the curvatures at the iterate, at iterations 25, 50,
                // 100, ...: the start's estimate misses by decades where a binding C sets the
                // rates, and a geometric schedule changes them finitely often in any run (as
                // ADMM's convergence with varying penalties wants); 3 × the median curvature,
                // as the two-sided start takes (docs/drum.md, "Per-pair penalties")
                let (sig, med) = self.pair_scales_at(&self.x);
                self.rescale_pairs(sig, 3.0 * med);
                continue;
            }
            self.adapt(&s);
        }
        let solve_time = t0.elapsed().as_secs_f64();
        self.finish("admm", trace, converged, solve_time)
    }
}
