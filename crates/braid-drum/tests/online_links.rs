//! Fabric links in the online solver: link rows owned by one host each, coordinated in the same
//! half-rounds as the CQ rows, against the offline ADMM with the same links (`R x ≤ L`).

use braid_drum::online::build::{feasible_objective, instances};
use braid_drum::online::net::{NetConfig, RunReport, TestNet};
use braid_drum::online::{HostSolver, OnlineConfig, OwnedLink, LINK_BIT};
use braid_drum::problem::Links;
use braid_drum::*;

/// A two-tier fabric over `p`'s hosts: leaves of `per_leaf` hosts, one uplink and one downlink
/// per leaf; a pair on different leaves crosses the source's uplink and the destination's
/// downlink. Capacities are `tight` times the WQE capacity of the leaf's hosts, in units of
/// the per-WQE sizes (drawn in [0.5, 2]).
fn with_fabric(mut p: Problem, per_leaf: usize, tight: f64, seed: u64) -> Problem {
    let n = p.n;
    let leaves = n.div_ceil(per_leaf);
    let leaf = |h: usize| h / per_leaf;
    let mut paths = Vec::new();
    for s in 0..n {
        for d in 0..n {
            if s != d && leaf(s) != leaf(d) {
                paths.push((s as u32, d as u32, leaf(s) as u32));
                paths.push((s as u32, d as u32, (leaves + leaf(d)) as u32));
            }
        }
    }
    let mut cap = vec![0.0; 2 * leaves];
    for h in 0..n {
        cap[leaf(h)] += tight * p.q_cap[h];
        cap[leaves + leaf(h)] += tight * p.q_cap[h];
    }
    let mut st = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let size = (0..n * p.m)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            0.5 + 1.5 * (st >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect();
    p.links = Some(Links { cap, paths, size });
    p
}

fn problem(two: bool, seed: u64, tight: f64) -> Problem {
    // generated two-sided for its traffic matrix B (who talks to whom); one-sided keeps B for
    // the links only
    let mut p = generate(&GenParams {
        n: 12,
        m: 8,
        two_sided: true,
        seed,
        ..Default::default()
    });
    p.two_sided = two;
    with_fabric(p, 4, tight, seed)
}

fn offline(p: &Problem) -> SolveResult {
    let r = solve_admm(
        p,
        AdmmOptions {
            eps_abs: 1e-10,
            eps_rel: 1e-10,
            max_iter: 30000,
            ..Default::default()
        },
    )
    .unwrap();
    let cert = (r.dual_bound.unwrap() - r.objective_feasible) / p.weight_sum();
    assert!(
        cert < 1e-6,
        "offline reference not tight: certified gap {cert}"
    );
    r
}

/// Links the offline optimum fills to within 0.1% (the ones that bind).
fn binding(p: &Problem, x: &[f64]) -> Vec<usize> {
    let lk = p.links.as_ref().unwrap();
    let loads = link_loads(p, x);
    (0..lk.cap.len())
        .filter(|&e| loads[e] >= lk.cap[e] * 0.999)
        .collect()
}

fn link_loads(p: &Problem, x: &[f64]) -> Vec<f64> {
    let lk = p.links.as_ref().unwrap();
    let t = p.traffic.as_ref().unwrap();
    let mut load = vec![0.0; lk.cap.len()];
    for (k, xk) in x.iter().enumerate().take(p.n * p.m) {
        let l = (k / p.m) as u32;
        for q in t.ptr[k] as usize..t.ptr[k + 1] as usize {
            for &(s, d, e) in &lk.paths {
                if s == l && d == t.dst[q] {
                    load[e as usize] += t.frac[q] * lk.size[k] * xk;
                }
            }
        }
    }
    load
}

fn run(p: &Problem, net: NetConfig) -> (TestNet, RunReport, f64) {
    let mut t = TestNet::new(instances(p).unwrap(), OnlineConfig::default(), net).unwrap();
    let rep = t.run(50_000_000);
    assert!(rep.quiescent, "the online solve did not quiesce: {rep:?}");
    let x = t.x().unwrap();
    (t, rep, feasible_objective(p, &x))
}

#[test]
fn the_cut_gives_each_link_one_owner_and_every_crossing_its_load() {
    let p = problem(true, 1, 0.3);
    let insts = instances(&p).unwrap();
    let lk = p.links.as_ref().unwrap();
    let owners: Vec<(u32, &OwnedLink)> = insts
        .iter()
        .enumerate()
        .flat_map(|(h, i)| i.links.iter().map(move |l| (h as u32, l)))
        .collect();
    assert_eq!(owners.len(), lk.cap.len(), "every link is crossed here");
    for (h, l) in &owners {
        // the owner is the lowest host crossing it, and every declared sender names it
        let lowest = l.senders.iter().map(|s| s.0).min().unwrap();
        assert_eq!(*h, lowest);
        for &(s, c) in &l.senders {
            let u = insts[s as usize].conns[c as usize]
                .links
                .iter()
                .find(|u| u.link == l.link)
                .expect("declared on the sender too");
            assert_eq!(u.owner, *h);
        }
    }
    // R x from the declared coefficients is the offline model's link load
    let x: Vec<f64> = (0..p.n * p.m).map(|k| 1.0 + (k % 7) as f64).collect();
    let mut load = vec![0.0; lk.cap.len()];
    for (h, i) in insts.iter().enumerate() {
        for c in &i.conns {
            for u in &c.links {
                load[u.link as usize] += u.coef * x[h * p.m + c.id as usize];
            }
        }
    }
    for (a, b) in load.iter().zip(link_loads(&p, &x)) {
        assert!((a - b).abs() <= 1e-9 * b.max(1.0), "{a} vs {b}");
    }
}

#[test]
fn lossless_reaches_the_offline_optimum_with_links() {
    for (two, seed, tight) in [
        (false, 1, 0.3),
        (true, 1, 0.3),
        (true, 2, 0.2),
        (false, 3, 0.15),
    ] {
        let p = problem(two, seed, tight);
        let off = offline(&p);
        let bind = binding(&p, &off.x_feasible);
        assert!(
            !bind.is_empty(),
            "some link must bind for the test to mean anything"
        );
        let (net, rep, f) = run(&p, NetConfig::default());
        let gap = (off.objective_feasible - f) / p.weight_sum();
        let x = net.x().unwrap();
        let loads = link_loads(&p, &x);
        let worst = loads
            .iter()
            .zip(&p.links.as_ref().unwrap().cap)
            .map(|(l, c)| l / c)
            .fold(0.0, f64::max);
        println!(
            "links two-sided {two} seed {seed}: {} of {} links bind; gap {gap:.2e}; rounds {}, messages {} ({} B); worst link load/cap {worst:.5}",
            bind.len(),
            loads.len(),
            rep.iterations,
            rep.messages,
            rep.bytes
        );
        assert!(rep.settled);
        assert!(gap <= 1e-3 && gap > -1e-6, "gap {gap}");
        assert!(worst <= 1.01, "a link carries {worst} of its capacity");
        // one-sided, the hosts talk only for the links now
        assert!(rep.messages > 0);
    }
}

#[test]
fn ten_percent_loss_stays_within_one_percent_with_links() {
    for (two, seed) in [(true, 1), (false, 3)] {
        let p = problem(two, seed, 0.2);
        let off = offline(&p);
        let (net, rep, f) = run(
            &p,
            NetConfig {
                loss: 0.1,
                seed: 5 + seed,
                ..Default::default()
            },
        );
        let gap = (off.objective_feasible - f) / p.weight_sum();
        let frac = rep.lost as f64 / rep.messages as f64;
        println!(
            "links 10% loss two-sided {two} seed {seed}: gap {gap:.2e}, rounds {}, lost {} of {}",
            rep.iterations, rep.lost, rep.messages
        );
        assert!((0.07..0.13).contains(&frac), "lost fraction {frac}");
        assert!(gap <= 1e-2 && gap > -1e-6, "gap {gap}");
        let stale: u64 = net.hosts.iter().map(|h| h.stats().stale_values).sum();
        assert!(stale > 0);
    }
}

#[test]
fn an_owner_learns_undeclared_senders_and_forgets_departed_ones() {
    // Two senders (hosts 1, 2) on one link owned by host 0, which has no connection of its
    // own and is told of no sender: log utility, weights 1 and 2, sizes 1, L = 3 → x = 1, 2
    // (the analytical x_k = w_k L / Σw); then host 2 leaves the link and host 1 gets all of it
    // up to its Q = 10.
    let mk = |w: f64, on: bool| braid_drum::online::LocalInstance {
        alpha: 1.0,
        beta: 0.0,
        q_cap: 10.0,
        c_cap: 10.0,
        conns: vec![braid_drum::online::Connection {
            id: 0,
            weight: w,
            a: 1.0,
            demand: f64::INFINITY,
            out: vec![],
            links: if on {
                vec![braid_drum::online::LinkUse {
                    link: 7,
                    owner: 0,
                    coef: 1.0,
                }]
            } else {
                vec![]
            },
        }],
        inbound: vec![],
        links: vec![],
    };
    let owner = braid_drum::online::LocalInstance {
        conns: vec![],
        links: vec![OwnedLink {
            link: 7,
            cap: 3.0,
            senders: vec![],
        }],
        ..mk(1.0, false)
    };
    let mut net = TestNet::new(
        vec![owner, mk(1.0, true), mk(2.0, true)],
        OnlineConfig::default(),
        NetConfig::default(),
    )
    .unwrap();
    let rep = net.run(10_000_000);
    assert!(rep.quiescent && rep.settled, "{rep:?}");
    let x = |net: &TestNet, h: usize| net.hosts[h].rates().unwrap().conns[0].x;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-2 * b;
    assert!(
        close(x(&net, 1), 1.0) && close(x(&net, 2), 2.0),
        "{} {}",
        x(&net, 1),
        x(&net, 2)
    );
    assert_eq!(net.hosts[0].link_loads().len(), 1);
    // host 2's connection no longer crosses the link
    net.hosts[2].set_instance(mk(2.0, false)).unwrap();
    let rep = net.run(10_000_000);
    assert!(rep.quiescent && rep.settled, "{rep:?}");
    assert!(close(x(&net, 1), 3.0), "{}", x(&net, 1));
    assert!(close(x(&net, 2), 10.0), "{}", x(&net, 2));
    let (_, cap, load) = net.hosts[0].link_loads()[0];
    assert!(load <= cap * 1.01, "{load}");
}

#[test]
fn bad_link_input_names_the_key() {
    let p = problem(true, 1, 0.3);
    let insts = instances(&p).unwrap();
    let h = insts.iter().position(|i| !i.links.is_empty()).unwrap();
    let mut bad = insts[h].clone();
    bad.links[0].cap = 0.0;
    let e = HostSolver::new(h as u32, bad, OnlineConfig::default())
        .err()
        .unwrap();
    assert_eq!(e.param, "links");
    let mut bad = insts[h].clone();
    let c = bad.conns.iter().position(|c| !c.links.is_empty()).unwrap();
    bad.conns[c].links[0].coef = f64::NAN;
    let e = HostSolver::new(h as u32, bad, OnlineConfig::default())
        .err()
        .unwrap();
    assert_eq!(e.param, format!("conns[{c}].links"));
    let mut bad = insts[h].clone();
    bad.conns[0].id = LINK_BIT | 3;
    let e = HostSolver::new(h as u32, bad, OnlineConfig::default())
        .err()
        .unwrap();
    assert_eq!(e.param, "conns");
}

#[test]
fn deterministic_with_links_and_loss() {
    let p = problem(true, 2, 0.2);
    let go = |seed| {
        let (net, rep, f) = run(
            &p,
            NetConfig {
                loss: 0.1,
                seed,
                ..Default::default()
            },
        );
        (net.x().unwrap(), rep, f)
    };
    let (a, b) = (go(3), go(3));
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    assert_ne!(a.0, go(4).0);
}

#[test]
fn a_link_shared_by_its_owner_and_a_remote_host_splits_as_the_analysis_says() {
    // The agents' congested-spine case: the owner (host 0) sends two 1 KB connections across
    // the link, host 1 two more and a 32 B probe capped by its demand at 0.2 Mops; L = 1061 MB/s.
    // Log utility, equal weights, the link binds: the four 1 KB connections get
    // (L − 0.2·32)/(4·1024) = 0.25747 Mops each (their NICs' Q = 2 does not bind).
    let conn = |id: u32, size: f64, demand: f64| braid_drum::online::Connection {
        id,
        weight: 1.0,
        a: 1.0,
        demand,
        out: vec![],
        links: vec![braid_drum::online::LinkUse {
            link: 0,
            owner: 0,
            coef: size,
        }],
    };
    let inst = |conns, links| braid_drum::online::LocalInstance {
        alpha: 1.0,
        beta: 0.0,
        q_cap: 2.0,
        c_cap: 2.0,
        conns,
        inbound: vec![],
        links,
    };
    let inf = f64::INFINITY;
    let h0 = inst(
        vec![conn(1, 1024.0, inf), conn(2, 1024.0, inf)],
        vec![OwnedLink {
            link: 0,
            cap: 1061.0,
            senders: vec![],
        }],
    );
    let h1 = inst(
        vec![
            conn(1, 1024.0, inf),
            conn(2, 1024.0, inf),
            conn(3, 32.0, 0.2),
        ],
        vec![],
    );
    let mut net =
        TestNet::new(vec![h0, h1], OnlineConfig::default(), NetConfig::default()).unwrap();
    let rep = net.run(10_000_000);
    assert!(rep.quiescent && rep.settled, "{rep:?}");
    let want = (1061.0 - 0.2 * 32.0) / 4096.0;
    for h in 0..2 {
        for c in net.hosts[h]
            .rates()
            .unwrap()
            .conns
            .iter()
            .filter(|c| c.id < 3)
        {
            assert!(
                (c.x - want).abs() <= 1e-3 * want,
                "host {h} conn {}: {}",
                c.id,
                c.x
            );
        }
    }
    println!(
        "owner + remote sender on one link: {} rounds, {} messages",
        rep.iterations, rep.messages
    );
    assert!(rep.iterations <= 80, "{} rounds", rep.iterations);
}
