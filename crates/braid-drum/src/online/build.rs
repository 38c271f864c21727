//! Between the offline model and the online one: cut a [`Problem`] into per-host instances, put
//! the hosts' rates back into one vector, and evaluate them on the offline problem.
//!
//! Host i's application j becomes connection `j` of host i; its two-sided traffic toward host
//! i' lands on connection j of host i' (the model's row (i', j)), declared on both sides.

use super::{Connection, Inbound, LocalInstance, Outbound, Rates};
use crate::admm::recover;
use crate::problem::{DrumError, Layout, Problem, Result};
use crate::scaled::Scaled;

/// One [`LocalInstance`] per host of `p` (no guarantees, preemption, top-k set or links: the
/// online solver does not take them).
pub fn instances(p: &Problem) -> Result<Vec<LocalInstance>> {
    p.validate()?;
    if !p.guarantee.is_empty() || p.has_preempt() || p.links.is_some() || !p.active.is_empty() {
        return Err(DrumError::new(
            "problem",
            "the online solver takes no guarantees, preemption, top-k set or fabric links",
        ));
    }
    let (n, m) = (p.n, p.m);
    let mut out: Vec<LocalInstance> = (0..n)
        .map(|i| LocalInstance {
            alpha: p.alpha,
            beta: p.beta,
            q_cap: p.q_cap[i],
            c_cap: p.c_cap[i],
            conns: (0..m)
                .map(|j| Connection {
                    id: j as u32,
                    weight: p.w[i * m + j],
                    a: p.a[i * m + j],
                    demand: f64::INFINITY,
                    out: Vec::new(),
                })
                .collect(),
            inbound: Vec::new(),
        })
        .collect();
    if p.two_sided {
        let t = p.traffic.as_ref().expect("validated: two-sided has B");
        for l in 0..n {
            for j in 0..m {
                let k = l * m + j;
                for q in t.ptr[k] as usize..t.ptr[k + 1] as usize {
                    let (i, f) = (t.dst[q], t.frac[q]);
                    if f > 0.0 && i as usize != l {
                        out[l].conns[j].out.push(Outbound {
                            host: i,
                            conn: j as u32,
                            frac: f,
                        });
                        out[i as usize].inbound.push(Inbound {
                            host: l as u32,
                            conn: j as u32,
                            row: j as u32,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The hosts' WQE rates as one host-major vector (`None` if a host has no rates yet).
pub fn gather_x(rates: &[Option<&Rates>]) -> Option<Vec<f64>> {
    let mut x = Vec::new();
    for r in rates {
        x.extend(r.as_ref()?.conns.iter().map(|c| c.x));
    }
    Some(x)
}

/// The offline objective at the feasible point recovered from x (the same recovery as the
/// offline solvers' `objective_feasible`): `x̃ = θ x` pulled inside the CQE capacities.
pub fn feasible_objective(p: &Problem, x: &[f64]) -> f64 {
    let lay = Layout::build(p);
    let sc = Scaled::new(p, &lay, true);
    let xs: Vec<f64> = x.iter().map(|v| v / sc.sx).collect();
    let (xf, zf) = recover(&sc, &lay, &xs);
    sc.to_user(sc.objective(&xf, &zf))
}
