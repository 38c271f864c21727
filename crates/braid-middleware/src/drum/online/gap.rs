//! `report_gap`: the gap of the agents' online rates to the offline optimum of the same
//! instance (`braid_drum`'s exact solver one-sided, a tight offline ADMM two-sided).
//!
//! The instance spans every host coupled by two-sided traffic, so no agent holds it. The agents
//! of one run register their local instances and their latest rates in a *gap book* shared
//! through the process (keyed by the run's board): a measuring aid for simulations and tests,
//! which needs every agent of the run in one process (a real deployment would gather them out
//! of band). The book cuts the union back into an offline [`Problem`] and caches its optimum
//! until an instance changes.
//!
//! The offline model has m applications per host and puts the two-sided traffic of application
//! j on the CQ row of application j of the destination host. A connection pair (c on host H,
//! r on host P) therefore gets one label j on both hosts: a greedy edge colouring of the hosts'
//! connection graph, unique per host; hosts with fewer labels get inactive filler entries.

use braid_drum::online::build::feasible_objective;
use braid_drum::online::LocalInstance;
use braid_drum::{solve_admm, solve_reference, AdmmOptions, Problem, Traffic};
use braid_verbs::rendezvous::SharedBoard;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};

thread_local! {
    static BOOKS: RefCell<Vec<(usize, Weak<RefCell<GapBook>>)>> = const { RefCell::new(Vec::new()) };
}

/// The book of the run whose board is `board` (made on first use).
pub fn book_for(board: &SharedBoard) -> Rc<RefCell<GapBook>> {
    let key = Rc::as_ptr(board) as *const u8 as usize;
    BOOKS.with(|b| {
        let mut b = b.borrow_mut();
        b.retain(|(_, w)| w.strong_count() > 0);
        if let Some(r) = b
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return r;
        }
        let r = Rc::new(RefCell::new(GapBook::default()));
        b.push((key, Rc::downgrade(&r)));
        r
    })
}

/// The offline instance and its optimum.
struct Offline {
    p: Problem,
    /// (host, connection id) -> entry of `p`
    idx: BTreeMap<(u32, u32), usize>,
    f_star: f64,
    wsum: f64,
}

/// The instances an offline optimum was solved for, and that optimum (or why it failed).
type Solved = (Vec<(u32, LocalInstance)>, Result<Rc<Offline>, String>);

#[derive(Default)]
pub struct GapBook {
    /// per host: its instance and its latest WQE rates by connection id
    hosts: BTreeMap<u32, (LocalInstance, BTreeMap<u32, f64>)>,
    cache: Option<Solved>,
    pub offline_solves: u64,
}

impl GapBook {
    pub fn register(&mut self, host: u32, inst: &LocalInstance, x: BTreeMap<u32, f64>) {
        match self.hosts.get_mut(&host) {
            Some((i, r)) => {
                if i != inst {
                    *i = inst.clone();
                }
                *r = x;
            }
            None => {
                self.hosts.insert(host, (inst.clone(), x));
            }
        }
    }

    /// The normalized gap `(f* − f(x̃)) / Σ w` of the registered rates at their feasible
    /// recovery; NaN when it cannot be computed (a demand cap, which the offline model does not
    /// have; a host without rates; the offline solve refused).
    pub fn gap(&mut self) -> f64 {
        let Ok(off) = self.offline() else {
            return f64::NAN;
        };
        let mut x = vec![0.0; off.p.entries()];
        for (h, (inst, r)) in &self.hosts {
            for c in &inst.conns {
                let Some(&v) = r.get(&c.id) else {
                    return f64::NAN;
                };
                x[off.idx[&(*h, c.id)]] = v;
            }
        }
        (off.f_star - feasible_objective(&off.p, &x)) / off.wsum
    }

    /// The offline optimum of the registered instances (cached).
    fn offline(&mut self) -> Result<Rc<Offline>, String> {
        let now: Vec<(u32, LocalInstance)> = self
            .hosts
            .iter()
            .map(|(h, (i, _))| (*h, i.clone()))
            .collect();
        if let Some((k, r)) = &self.cache {
            if *k == now {
                return r.clone();
            }
        }
        self.offline_solves += 1;
        let r = solve_offline(&now).map(Rc::new);
        self.cache = Some((now, r.clone()));
        r
    }
}

fn solve_offline(hosts: &[(u32, LocalInstance)]) -> Result<Offline, String> {
    if hosts.is_empty() || hosts.iter().all(|(_, i)| i.conns.is_empty()) {
        return Err("no connections".into());
    }
    if hosts
        .iter()
        .any(|(_, i)| i.conns.iter().any(|c| c.demand.is_finite()))
    {
        return Err("a demand cap (the offline model has none)".into());
    }
    let hix: BTreeMap<u32, usize> = hosts
        .iter()
        .enumerate()
        .map(|(k, (h, _))| (*h, k))
        .collect();
    let has = |h: u32, c: u32| {
        hix.get(&h)
            .is_some_and(|&k| hosts[k].1.conns.iter().any(|x| x.id == c))
    };
    // Connection pairs with two-sided traffic whose both ends are in the instance.
    let mut edges: BTreeSet<((u32, u32), (u32, u32))> = BTreeSet::new();
    for (h, inst) in hosts {
        for c in &inst.conns {
            for o in &c.out {
                if has(o.host, o.conn) {
                    let (a, b) = ((*h, c.id), (o.host, o.conn));
                    edges.insert((a.min(b), a.max(b)));
                }
            }
        }
    }
    // Labels: one per group of connections joined by two-sided traffic (union-find), unique
    // per host; a group with two connections on one host is not an offline-model instance.
    let conns: Vec<(u32, u32)> = hosts
        .iter()
        .flat_map(|(h, i)| i.conns.iter().map(move |c| (*h, c.id)))
        .collect();
    let pos: BTreeMap<(u32, u32), usize> = conns.iter().enumerate().map(|(k, c)| (*c, k)).collect();
    let mut parent: Vec<usize> = (0..conns.len()).collect();
    fn root(p: &mut [usize], mut k: usize) -> usize {
        while p[k] != k {
            p[k] = p[p[k]];
            k = p[k];
        }
        k
    }
    for (a, b) in &edges {
        let (ra, rb) = (root(&mut parent, pos[a]), root(&mut parent, pos[b]));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    }
    let mut groups: BTreeMap<usize, Vec<(u32, u32)>> = BTreeMap::new();
    for (k, c) in conns.iter().enumerate() {
        let r = root(&mut parent, k);
        groups.entry(r).or_default().push(*c);
    }
    let mut used: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
    let mut label: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for g in groups.values() {
        let hs: BTreeSet<u32> = g.iter().map(|c| c.0).collect();
        if hs.len() != g.len() {
            return Err("two connections of one host joined by two-sided traffic".into());
        }
        let j = (0..)
            .find(|j| {
                hs.iter()
                    .all(|h| !used.get(h).is_some_and(|u| u.contains(j)))
            })
            .unwrap();
        for c in g {
            used.entry(c.0).or_default().insert(j);
            label.insert(*c, j);
        }
    }
    let n = hosts.len();
    let m = label.values().max().map_or(1, |j| j + 1);
    let (alpha, beta) = (hosts[0].1.alpha, hosts[0].1.beta);
    let mut w = vec![1.0; n * m];
    let mut a = vec![1.0; n * m];
    let mut active = vec![false; n * m];
    let mut out: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n * m];
    let mut idx = BTreeMap::new();
    let mut wsum = 0.0;
    for (k, (h, inst)) in hosts.iter().enumerate() {
        for c in &inst.conns {
            let e = k * m + label[&(*h, c.id)];
            w[e] = c.weight;
            a[e] = c.a;
            active[e] = true;
            wsum += c.weight;
            idx.insert((*h, c.id), e);
            for o in &c.out {
                let same = label.get(&(o.host, o.conn)) == Some(&label[&(*h, c.id)]);
                if has(o.host, o.conn) && same && o.frac > 0.0 {
                    out[e].push((hix[&o.host] as u32, o.frac));
                }
            }
        }
    }
    let two = out.iter().any(|o| !o.is_empty());
    let traffic = two.then(|| {
        let mut t = Traffic {
            ptr: vec![0],
            ..Default::default()
        };
        for o in &out {
            for &(d, f) in o {
                t.dst.push(d);
                t.frac.push(f);
            }
            t.ptr.push(t.dst.len() as u64);
        }
        t
    });
    let p = Problem {
        n,
        m,
        alpha,
        beta,
        w,
        a,
        q_cap: hosts.iter().map(|(_, i)| i.q_cap).collect(),
        c_cap: hosts.iter().map(|(_, i)| i.c_cap).collect(),
        guarantee: vec![],
        active: if active.iter().all(|&x| x) {
            vec![]
        } else {
            active
        },
        preempt: vec![],
        two_sided: two,
        traffic,
        links: None,
    };
    let f_star = if two {
        let r = solve_admm(
            &p,
            AdmmOptions {
                eps_abs: 1e-10,
                eps_rel: 1e-10,
                max_iter: 20000,
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?;
        r.objective_feasible
    } else {
        solve_reference(&p)
            .map_err(|e| e.to_string())?
            .objective_feasible
    };
    Ok(Offline {
        p,
        idx,
        f_star,
        wsum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_drum::online::build::instances;
    use braid_drum::{generate, GenParams};

    /// The book's cut of the per-host instances back into an offline problem has the same
    /// optimum as the problem they came from (`braid_drum::online::build::instances`), and the
    /// offline optimum's own rates have gap ~0.
    #[test]
    fn the_book_rebuilds_the_offline_optimum_of_generated_instances() {
        for two in [false, true] {
            let p = generate(&GenParams {
                n: 4,
                m: 3,
                two_sided: two,
                seed: 7,
                ..Default::default()
            });
            let insts = instances(&p).unwrap();
            let hosts: Vec<(u32, LocalInstance)> = insts
                .iter()
                .cloned()
                .enumerate()
                .map(|(h, i)| (h as u32, i))
                .collect();
            let off = solve_offline(&hosts).unwrap();
            let direct = if two {
                solve_admm(
                    &p,
                    AdmmOptions {
                        eps_abs: 1e-10,
                        eps_rel: 1e-10,
                        max_iter: 20000,
                        ..Default::default()
                    },
                )
                .unwrap()
            } else {
                solve_reference(&p).unwrap()
            };
            let rel = (off.f_star - direct.objective_feasible).abs() / p.weight_sum();
            assert!(
                rel < 1e-7,
                "two {two}: {} vs {}",
                off.f_star,
                direct.objective_feasible
            );
            let mut book = GapBook::default();
            for (h, inst) in &hosts {
                let x = inst
                    .conns
                    .iter()
                    .map(|c| (c.id, direct.x_feasible[*h as usize * p.m + c.id as usize]))
                    .collect();
                book.register(*h, inst, x);
            }
            let g = book.gap();
            assert!(g.abs() < 1e-6, "two {two}: gap of the optimum itself {g}");
            // A worse point has a positive gap.
            for (h, (inst, x)) in book.hosts.iter_mut() {
                if *h == 0 {
                    let id = inst.conns[0].id;
                    *x.get_mut(&id).unwrap() *= 0.5;
                }
            }
            assert!(book.gap() > 1e-4);
            assert_eq!(book.offline_solves, 1, "cached");
        }
    }
}
