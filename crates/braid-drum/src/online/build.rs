//! Between the offline model and the online one: cut a [`Problem`] into per-host instances, put
//! the hosts' rates back into one vector, and evaluate them on the offline problem.
//!
//! Host i's application j becomes connection `j` of host i; its two-sided traffic toward host
//! i' lands on connection j of host i' (the model's row (i', j)), declared on both sides.
//! A fabric link's row goes to its *owner*, the lowest host id among the hosts whose traffic
//! crosses it (links nobody crosses are left out); each connection crossing it declares its load
//! per WQE `coef = Σ_{i: (l→i) ∋ e} B[(l,j), i] · size_lj` (the offline model's `R`), and the
//! owner declares the crossing (host, connection) pairs.

use super::{Connection, Inbound, LinkUse, LocalInstance, Outbound, OwnedLink, Rates};
use crate::admm::recover;
use crate::problem::{DrumError, Layout, Problem, Result};
use crate::scaled::Scaled;

/// One [`LocalInstance`] per host of `p`, fabric links included (no guarantees, preemption or
/// top-k set: the online solver does not take them).
pub fn instances(p: &Problem) -> Result<Vec<LocalInstance>> {
    p.validate()?;
    if !p.guarantee.is_empty() || p.has_preempt() || !p.active.is_empty() {
        return Err(DrumError::new(
            "problem",
            "the online solver takes no guarantees, preemption or top-k set",
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
                    links: Vec::new(),
                })
                .collect(),
            inbound: Vec::new(),
            links: Vec::new(),
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
    if let (Some(lk), Some(t)) = (&p.links, &p.traffic) {
        let mut crosses: std::collections::HashMap<(u32, u32), Vec<u32>> = Default::default();
        for &(s, d, e) in &lk.paths {
            crosses.entry((s, d)).or_default().push(e);
        }
        // per link: the (host, conn, coef) crossing it, in host order
        let mut users: Vec<Vec<(u32, u32, f64)>> = vec![Vec::new(); lk.cap.len()];
        for l in 0..n {
            for j in 0..m {
                let k = l * m + j;
                let sz = if lk.size.is_empty() { 1.0 } else { lk.size[k] };
                let mut acc: std::collections::BTreeMap<u32, f64> = Default::default();
                for q in t.ptr[k] as usize..t.ptr[k + 1] as usize {
                    let (i, f) = (t.dst[q], t.frac[q]);
                    if f > 0.0 {
                        for &e in crosses.get(&(l as u32, i)).into_iter().flatten() {
                            *acc.entry(e).or_default() += f * sz;
                        }
                    }
                }
                for (e, c) in acc {
                    users[e as usize].push((l as u32, j as u32, c));
                }
            }
        }
        for (e, us) in users.iter().enumerate() {
            let Some(owner) = us.iter().map(|u| u.0).min() else {
                continue;
            };
            for &(h, j, c) in us {
                out[h as usize].conns[j as usize].links.push(LinkUse {
                    link: e as u32,
                    owner,
                    coef: c,
                });
            }
            out[owner as usize].links.push(OwnedLink {
                link: e as u32,
                cap: lk.cap[e],
                senders: us.iter().map(|u| (u.0, u.1)).collect(),
            });
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
