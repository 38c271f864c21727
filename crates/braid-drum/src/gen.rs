//! The paper's random instances (§III-E), seeded and reproducible on any machine.
//!
//! Per host: WQE capacity Q ~ U[20, 100], CQE capacity C ~ U[15, 50] (Mops, times `units`),
//! weights ~ U[w_lo, w_hi], CQEs per WQE a = 1/batch with batch ~ U{1..batch_max}; two-sided:
//! each application sends to `fanout` distinct other hosts with random fractions summing to 1.
//! Host i draws from its own stream (seed, i), so generation is parallel and deterministic.

use crate::problem::{Problem, Traffic};
use crate::select::select_topk;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenParams {
    pub n: usize,
    pub m: usize,
    pub two_sided: bool,
    pub alpha: f64,
    pub beta: f64,
    /// QP-cache limit; None = all active
    pub k: Option<usize>,
    pub q_range: (f64, f64),
    pub c_range: (f64, f64),
    pub w_range: (f64, f64),
    pub batch_max: u32,
    pub fanout: usize,
    /// rate unit multiplier (1 = Mops; 1e6 = ops/s)
    pub units: f64,
    pub seed: u64,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            n: 100,
            m: 50,
            two_sided: false,
            alpha: 1.0,
            beta: 1e-3,
            k: None,
            q_range: (20.0, 100.0),
            c_range: (15.0, 50.0),
            w_range: (0.5, 2.0),
            batch_max: 8,
            fanout: 2,
            units: 1.0,
            seed: 0,
        }
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct HostDraw {
    q: f64,
    c: f64,
    w: Vec<f64>,
    a: Vec<f64>,
    dst: Vec<u32>,
    frac: Vec<f64>,
}

pub fn generate(g: &GenParams) -> Problem {
    generate_range(g, 0, g.n)
}

/// Hosts `h0..h1` of the instance `generate(g)` makes, alone: a problem with `h1 - h0` hosts
/// whose traffic names global destination hosts. Every host draws from its own stream, so the
/// pieces of any partition are, entry by entry, the whole instance's.
pub fn generate_range(g: &GenParams, h0: usize, h1: usize) -> Problem {
    let (n, m) = (g.n, g.m);
    assert!(h0 <= h1 && h1 <= n, "host range {h0}..{h1} outside 0..{n}");
    let fan = if g.two_sided {
        g.fanout.min(n.saturating_sub(1))
    } else {
        0
    };
    let draws: Vec<HostDraw> = (h0..h1)
        .into_par_iter()
        .map(|i| {
            let mut rng =
                Xoshiro256PlusPlus::seed_from_u64(splitmix(g.seed ^ splitmix(i as u64 + 1)));
            let q = g.units * rng.random_range(g.q_range.0..=g.q_range.1);
            let c = g.units * rng.random_range(g.c_range.0..=g.c_range.1);
            let mut w = Vec::with_capacity(m);
            let mut a = Vec::with_capacity(m);
            let mut dst = Vec::with_capacity(m * fan);
            let mut frac = Vec::with_capacity(m * fan);
            let mut pick: Vec<u32> = Vec::with_capacity(fan);
            for _ in 0..m {
                w.push(rng.random_range(g.w_range.0..=g.w_range.1));
                let b = rng.random_range(1..=g.batch_max.max(1));
                a.push(1.0 / b as f64);
                if fan > 0 {
                    pick.clear();
                    while pick.len() < fan {
                        let d = rng.random_range(0..n as u32 - 1);
                        let d = if d >= i as u32 { d + 1 } else { d };
                        if !pick.contains(&d) {
                            pick.push(d);
                        }
                    }
                    pick.sort_unstable();
                    let raw: Vec<f64> = (0..fan).map(|_| rng.random_range(0.1..1.0)).collect();
                    let tot: f64 = raw.iter().sum();
                    for (d, r) in pick.iter().zip(raw) {
                        dst.push(*d);
                        frac.push(r / tot);
                    }
                }
            }
            HostDraw {
                q,
                c,
                w,
                a,
                dst,
                frac,
            }
        })
        .collect();
    let nl = h1 - h0;
    let nn = nl * m;
    let mut p = Problem {
        n: nl,
        m,
        alpha: g.alpha,
        beta: g.beta,
        w: Vec::with_capacity(nn),
        a: Vec::with_capacity(nn),
        q_cap: Vec::with_capacity(nl),
        c_cap: Vec::with_capacity(nl),
        guarantee: vec![],
        active: vec![],
        preempt: vec![],
        two_sided: g.two_sided,
        traffic: None,
        links: None,
    };
    let mut tr = Traffic {
        ptr: Vec::with_capacity(if fan > 0 { nn + 1 } else { 0 }),
        dst: vec![],
        frac: vec![],
    };
    if fan > 0 {
        tr.ptr.push(0);
    }
    for d in draws {
        p.q_cap.push(d.q);
        p.c_cap.push(d.c);
        p.w.extend_from_slice(&d.w);
        p.a.extend_from_slice(&d.a);
        if fan > 0 {
            for j in 0..m {
                tr.dst.extend_from_slice(&d.dst[j * fan..(j + 1) * fan]);
                tr.frac.extend_from_slice(&d.frac[j * fan..(j + 1) * fan]);
                tr.ptr.push(tr.dst.len() as u64);
            }
        }
    }
    if fan > 0 {
        p.traffic = Some(tr);
    }
    if let Some(k) = g.k {
        if k < m {
            let mut age = vec![0u32; nn];
            // per host: the piece's selection is the whole instance's
            p.active = select_topk(nl, m, k, &p.w, &mut age, u32::MAX);
        }
    }
    p
}
