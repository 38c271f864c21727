//! The ADMM of [`crate::admm`] sharded over ranks: each rank holds one [`Piece`] (its hosts'
//! data only) and runs the local kernels on it.
//!
//! Per iteration, one-sided: x-update, then the fused z/dual/y pass, all on the rank's own rows;
//! only the five residual sums cross ranks. Two-sided: x-update; row partial sums; forward
//! exchange of the partial sums of the shared rows ([`plan::Exchange::combine`]); z- and dual
//! update of the own rows; backward exchange of the dual steps of the shared rows (the holders
//! of a ghost row keep its dual by adding the step, as the owner does, so the bits agree);
//! y-update; the residual sums by reduction. ρ and stop decisions follow from the reduced sums,
//! identical on every rank.
//!
//! The iterates are the local solve's: bit for bit one-sided; two-sided the row sums are added
//! in rank order, which reproduces the local order except when a row gets two pairs from a rank
//! that is not the first contributing one (then they agree to rounding). The setup makes the
//! scale factors and the automatic ρ from per-host statistics and a sample of curvatures gathered
//! from all ranks, in host order, so they are the local solve's exactly.

pub mod plan;

use crate::admm::{
    curvature, equal_split, median_rho, own_theta, recover_apply, recover_theta, row_scales,
    sample_curvature, Admm, AdmmOptions, Global, Trace,
};
use crate::comm::{Comm, CommResult, Op};
use crate::dual::upper_bound_at;
use crate::piece::Piece;
use crate::problem::{cq_guarantee_error, DrumError, Layout, Result};
use crate::scaled::{Factors, HostStats, Scaled};
use plan::Exchange;
use std::sync::Arc;
use std::time::Instant;

/// One rank's part of the result: allocations of its own hosts, and the global figures.
#[derive(Clone, Debug)]
pub struct ShardResult {
    pub h0: usize,
    pub n_total: usize,
    /// WQE rates of the own hosts (user units), host-major
    pub x: Vec<f64>,
    pub z: Vec<f64>,
    pub x_feasible: Vec<f64>,
    pub z_feasible: Vec<f64>,
    pub lambda: Vec<f64>,
    pub mu: Vec<f64>,
    pub objective: f64,
    pub objective_feasible: f64,
    pub dual_bound: Option<f64>,
    pub weight_sum: f64,
    pub iterations: usize,
    pub converged: bool,
    /// residuals, tolerances, rho, time and lost hosts; the objective (with `trace` or
    /// `gap_tol`: the feasible recovery, three row exchanges per iteration) and the certified
    /// gap (every `certify_every`)
    pub trace: Trace,
    pub setup_time: f64,
    pub solve_time: f64,
    pub rho_final: f64,
    /// neighbour ranks, and the values this rank sends per iteration (forward, backward)
    pub neighbors: Vec<usize>,
    pub values_sent: (usize, usize),
    /// bytes of this rank's problem, layout, scaled copy and iterates ([`crate::footprint`])
    pub state_bytes: usize,
}

/// The error of the lowest failing rank, on every rank (so that no rank waits in a collective
/// that the failing one never enters).
pub fn agree(comm: &mut dyn Comm, local: Result<()>) -> Result<()> {
    let msg = match &local {
        Ok(()) => Vec::new(),
        Err(e) => format!("{}\u{0}{}", e.param, e.msg).into_bytes(),
    };
    let all = comm.allgather(&msg)?;
    for (r, b) in all.iter().enumerate() {
        if !b.is_empty() {
            let s = String::from_utf8_lossy(b);
            let (param, msg) = s.split_once('\u{0}').unwrap_or(("input", &s));
            let msg = if r == comm.rank() {
                msg.to_string()
            } else {
                format!("{msg} (reported by rank {r})")
            };
            return Err(DrumError::new(param, msg));
        }
    }
    Ok(())
}

fn f64s_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn bytes_f64s(b: &[u8]) -> impl Iterator<Item = f64> + '_ {
    b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
}

/// Check that the pieces tile the instance in rank order and describe the same instance;
/// returns every rank's first host and n (`starts[size]`).
fn tile(piece: &Piece, comm: &mut dyn Comm) -> Result<Vec<usize>> {
    let p = &*piece.p;
    let me = [
        piece.h0 as f64,
        piece.h1() as f64,
        piece.n_total as f64,
        p.m as f64,
        p.alpha,
        p.beta,
        p.two_sided as u8 as f64,
    ];
    let all = comm.allgather(&f64s_bytes(&me))?;
    let all: Vec<Vec<f64>> = all.iter().map(|b| bytes_f64s(b).collect()).collect();
    let mut starts = Vec::with_capacity(all.len() + 1);
    let mut next = 0usize;
    for (r, v) in all.iter().enumerate() {
        let names = ["h0", "h1", "n", "m", "alpha", "beta", "two_sided"];
        for (k, name) in names.iter().enumerate().skip(2) {
            if v[k] != all[0][k] {
                return Err(DrumError::new(
                    "pieces",
                    format!(
                        "rank {r} has {name} = {} but rank 0 has {}",
                        v[k], all[0][k]
                    ),
                ));
            }
        }
        if v[0] as usize != next {
            return Err(DrumError::new(
                "pieces",
                format!(
                    "rank {r} holds hosts {}..{} but the previous ranks end at host {next}: \
                     ranks must hold consecutive host ranges in rank order",
                    v[0], v[1]
                ),
            ));
        }
        starts.push(next);
        next = v[1] as usize;
    }
    if next != piece.n_total {
        return Err(DrumError::new(
            "pieces",
            format!("the ranks hold hosts 0..{next} of n = {}", piece.n_total),
        ));
    }
    starts.push(next);
    Ok(starts)
}

/// Scale factors and the automatic ρ of the whole instance, from every rank's per-host
/// statistics and curvature sample (added and sampled in host order, like the local solve).
fn global_scaling(
    piece: &Piece,
    lay: &Layout,
    ex: &mut Exchange,
    opt: &AdmmOptions,
    comm: &mut dyn Comm,
) -> CommResult<(Scaled, f64, Vec<f64>, f64)> {
    let p = &*piece.p;
    let stats: Vec<f64> = HostStats::of(p)
        .iter()
        .flat_map(|h| [h.q, h.wsum, h.active])
        .collect();
    let all: Vec<HostStats> = comm
        .allgather(&f64s_bytes(&stats))?
        .iter()
        .flat_map(|b| {
            let v: Vec<f64> = bytes_f64s(b).collect();
            v.chunks_exact(3)
                .map(|c| HostStats {
                    q: c[0],
                    wsum: c[1],
                    active: c[2],
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let f = Factors::from_stats(&all, p.alpha, opt.scaling);
    // the weight sum as Problem::weight_sum adds it: per host, then the hosts in order
    let wsum: f64 = all.iter().map(|h| h.wsum).sum();
    let sc = Scaled::with_factors(p, lay, f);
    let nn = p.entries();
    // the curvature needs the CQ rows at the equal split (two-sided: own rows summed over all
    // ranks' senders, as the local solve sums them)
    let z0 = rows_of(lay, ex, &equal_split(&sc), comm)?;
    let curv = curvature(&sc, lay, Some(&z0));
    let sample = sample_curvature(&curv[..nn], piece.h0 * p.m, piece.n_total * p.m);
    let all: Vec<f64> = comm
        .allgather(&f64s_bytes(&sample))?
        .iter()
        .flat_map(|b| bytes_f64s(b).collect::<Vec<_>>())
        .collect();
    let rho0 = median_rho(&all);
    let mut rs = row_scales(&curv, rho0, opt.row_scaling);
    // a ghost row's scale is its owner's (the curvature of the owner's entry), as in the
    // local solve
    let (own, ghost) = rs.split_at_mut(nn);
    ex.to_ghosts(own, ghost, comm)?;
    Ok((sc, rho0, rs, wsum))
}

/// Own rows of [P] v summed over all ranks' pairs.
fn rows_of(
    lay: &Layout,
    ex: &mut Exchange,
    v: &[f64],
    comm: &mut dyn Comm,
) -> CommResult<Vec<f64>> {
    let mut r = lay.row_sums(v);
    ex.combine(&mut r, comm)?;
    Ok(r)
}

/// The objectives of the current iterate across all ranks (scaled units): of the iterate, of
/// its feasible recovery, and (if `bound`) the dual bound at ν = ρ rs v, else 0; with this
/// rank's part of the recovery.
struct Objectives {
    iterate: f64,
    feasible: f64,
    bound: f64,
    xf: Vec<f64>,
    zf: Vec<f64>,
}

/// Feasible recovery (one θ per host one-sided; two-sided each host over its C pulls in its
/// own entries ([`own_theta`]) when every host can, else one global θ, agreed across ranks),
/// objectives and the dual bound: partial sums over the own hosts, added across ranks. The
/// local solve's `recover` and `certified_gap`, sharded.
fn objectives(
    st: &Admm,
    lay: &Layout,
    ex: &mut Exchange,
    comm: &mut dyn Comm,
    bound: bool,
) -> CommResult<Objectives> {
    let nn = st.p.entries();
    let sc = &st.sc;
    let pg = rows_of(lay, ex, &sc.lo, comm)?;
    let px = rows_of(lay, ex, &st.x, comm)?;
    let (theta, global) = recover_theta(sc, &pg[..nn], &px[..nn]);
    let hosts = if lay.diag {
        Some(theta)
    } else {
        own_theta(sc, lay, &pg, &px, &theta, &st.x)
    };
    let mut g = [global, if hosts.is_some() { 1.0 } else { 0.0 }];
    comm.allreduce(&mut g, Op::Min)?;
    let xf = match hosts {
        Some(t) if g[1] == 1.0 => recover_apply(sc, Some(&t), 1.0, &st.x),
        _ => recover_apply(sc, None, g[0], &st.x),
    };
    let zf = rows_of(lay, ex, &xf, comm)?;
    let ub = if bound {
        let nu: Vec<f64> =
            st.v.iter()
                .zip(&st.rs)
                .map(|(v, r)| st.rho * r * v)
                .collect();
        upper_bound_at(sc, lay, &nu, &st.x).0
    } else {
        0.0
    };
    let mut f = [sc.objective(&st.x, &st.z), sc.objective(&xf, &zf), ub];
    comm.allreduce(&mut f, Op::Sum)?;
    Ok(Objectives {
        iterate: f[0],
        feasible: f[1],
        bound: f[2],
        xf,
        zf,
    })
}

/// Solve this rank's piece together with the other ranks' (every rank calls it).
pub fn solve_sharded(piece: &Piece, opt: AdmmOptions, comm: &mut dyn Comm) -> Result<ShardResult> {
    let t_setup = Instant::now();
    let local = crate::check_admm_options(&opt)
        .and_then(|_| piece.validate())
        .and_then(|_| {
            // the pair scales' row means and median would need the other ranks' senders
            if opt.pair_penalty && piece.p.two_sided {
                Err(DrumError::new(
                    "pair_penalty",
                    "per-pair penalties are not supported by the sharded solve; set it to false",
                ))
            } else {
                Ok(())
            }
        });
    agree(comm, local)?;
    let starts = tile(piece, comm);
    agree(comm, starts.as_ref().map(|_| ()).map_err(|e| e.clone()))?;
    let starts = starts?;
    let p = piece.p.clone();
    let (m, h0) = (p.m, piece.h0);
    let nn = p.entries();
    let (lay, mut ex) = if p.two_sided {
        let plan = plan::two_sided(piece, &starts, comm)?;
        (plan.lay, plan.ex)
    } else {
        (Layout::build(&p), Exchange::none(nn))
    };
    comm.set_neighbors(&ex.nbrs)?;
    if !p.guarantee.is_empty() {
        let pg = rows_of(&lay, &mut ex, &p.guarantee, comm)?;
        let e = cq_guarantee_error(&pg[..nn], &p.c_cap, m, h0);
        agree(comm, e.map_or(Ok(()), Err))?;
    }
    let (sc, rho0, rs, wsum) = global_scaling(piece, &lay, &mut ex, &opt, comm)?;
    let mut cnt = [lay.pairs() as f64];
    comm.allreduce(&mut cnt, Op::Sum)?;
    let glob = Global {
        n: piece.n_total,
        entries: piece.n_total * m,
        pairs: cnt[0] as usize,
        host0: h0,
    };
    let lay = Arc::new(lay);
    let mut st = Admm::from_parts(p.clone(), lay.clone(), sc, opt.clone(), rho0, rs, glob);
    if lay.diag {
        // one-sided: no ghost rows, each row its own pair (`Admm::start_rows`)
        st.start_rows();
    } else {
        st.gather_rows();
        ex.combine(&mut st.hsum, comm)?;
        st.z[..nn].copy_from_slice(&st.hsum[..nn]);
    }
    let setup_time = t_setup.elapsed().as_secs_f64();

    let t0 = Instant::now();
    let mut trace = Trace::default();
    let mut converged = false;
    let asked = opt.certified_gap_tol.is_some() || opt.certified_rel_gap_tol.is_some();
    let every = match (opt.certify_every, asked) {
        (0, true) => 25,
        (e, _) => e,
    };
    let traced = opt.trace || opt.gap_tol.is_some();
    for k in 1..=opt.max_iter.max(1) {
        st.iter = k;
        let lost = st.lost_mask(k);
        let s = if lay.diag {
            st.step_diag(&lost)
        } else {
            st.x_step(&lost);
            st.gather_rows();
            ex.combine(&mut st.hsum, comm)?;
            st.z_step_range(0, p.n, false);
            let (own, ghost) = st.dv.split_at_mut(nn);
            ex.to_ghosts(own, ghost, comm)?;
            for (v, d) in st.v[nn..].iter_mut().zip(&st.dv[nn..]) {
                *v += d;
            }
            st.y_step()
        };
        let mut tot = [
            s.r2,
            s.s2,
            s.ax2,
            s.y2,
            s.atv2,
            lost.iter().filter(|&&l| l).count() as f64,
        ];
        comm.allreduce(&mut tot, Op::Sum)?;
        let s = crate::admm::Sums {
            r2: tot[0],
            s2: tot[1],
            ax2: tot[2],
            y2: tot[3],
            atv2: tot[4],
        };
        if opt.loss_prob > 0.0 {
            trace.lost.push(tot[5] as u32);
        }
        let (r, d, ep, ed) = st.tolerances(&s);
        trace.r_pri.push(r);
        trace.r_dual.push(d);
        trace.eps_pri.push(ep);
        trace.eps_dual.push(ed);
        trace.rho.push(st.rho);
        // the objective trace and the certified gap need the feasible recovery (three row
        // exchanges) and the dual bound: only when asked, every rank at the same iterations
        let check = every > 0 && k % every == 0;
        let mut gap_ok = false;
        if traced || check {
            let o = objectives(&st, &lay, &mut ex, comm, check)?;
            let ff = st.sc.to_user(o.feasible);
            if traced {
                trace.objective.push(st.sc.to_user(o.iterate));
                trace.objective_feasible.push(ff);
                if let Some(fs) = opt.reference {
                    let g = (fs - ff) / wsum.max(1e-300);
                    trace.gap.push(g);
                    gap_ok |= opt.gap_tol.is_some_and(|tol| g <= tol);
                }
            }
            if check {
                let diff = st.sc.to_user(o.bound) - ff;
                let g = diff / wsum.max(1e-300);
                let rel = diff / ff.abs().max(f64::MIN_POSITIVE);
                trace.certified_iter.push(k as u32);
                trace.certified_gap.push(g);
                trace.certified_rel_gap.push(rel);
                gap_ok |= opt.certified_gap_tol.is_some_and(|tol| g <= tol);
                gap_ok |= opt.certified_rel_gap_tol.is_some_and(|tol| rel <= tol);
            }
        }
        trace.time.push(t0.elapsed().as_secs_f64());
        let stop = !matches!(opt.stop, crate::StopRule::None) && r <= ep && d <= ed;
        if k >= opt.min_iter && (stop || gap_ok) {
            converged = true;
            break;
        }
        st.adapt(&s);
    }
    let solve_time = t0.elapsed().as_secs_f64();
    let state_bytes = crate::footprint::admm(&st);

    let o = objectives(&st, &lay, &mut ex, comm, opt.dual_bound)?;
    let sc = &st.sc;
    let (xf, zf) = (o.xf, o.zf);
    let f = [o.iterate, o.feasible, o.bound];
    let sx = sc.sx;
    let lf = sc.sf / sx;
    let user = |v: &[f64]| v.iter().map(|x| x * sx).collect::<Vec<f64>>();
    Ok(ShardResult {
        h0,
        n_total: piece.n_total,
        x: user(&st.x),
        z: user(&st.z[..nn]),
        x_feasible: user(&xf),
        z_feasible: user(&zf[..nn]),
        lambda: st.lam.iter().map(|l| l * lf).collect(),
        mu: st.mu.iter().map(|l| l * lf).collect(),
        objective: sc.to_user(f[0]),
        objective_feasible: sc.to_user(f[1]),
        dual_bound: opt.dual_bound.then(|| sc.to_user(f[2])),
        weight_sum: wsum,
        iterations: st.iter,
        converged,
        trace,
        setup_time,
        solve_time,
        rho_final: st.rho,
        neighbors: ex.nbrs.clone(),
        values_sent: ex.values_per_iteration(),
        state_bytes,
    })
}
