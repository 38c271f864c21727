//! `decider = "fabric"`: rates that respect the fabric's links as well as the NICs'.
//!
//! A coordinator, not DRUM's distributed ADMM over the fabric (the online model takes no links
//! yet): every agent publishes its connections' statistics on the run's board each decision
//! (weight, peer host, bytes per WR); the agent with the lowest host id among those that
//! published gathers them, solves the whole instance with `braid_drum`'s offline ADMM including
//! the links (`R x <= L`, capacities from the fabric in bytes/s, each connection's traffic
//! charged at its observed bytes per WR on the links its (host, peer) pair crosses) and publishes
//! every connection's rates; each agent applies its own. Rates lag by up to one
//! `solve_interval` (the coordinator solves on what was published before it); a connection the
//! coordinator has not solved for yet gets `LocalSolve`'s rate. Every active connection is
//! taken as backlogged (the offline model has no demand caps).

use super::decide::{select_active, DeciderCtx, DeciderFactory, LocalSolve, RateDecider, Stat};
use super::DrumConfig;
use crate::drum::fabric_model::{FabricLinks, FabricSlot};
use braid_drum::problem::{Links, Problem, Traffic};
use braid_verbs::rendezvous::{Endpoint, SharedBoard, Side};
use braid_verbs::BuildError;
use std::collections::BTreeMap;

const HEAD: u64 = 0;
const CONN: u64 = 1;
const RATE: u64 = 2;

fn key(kind: u64, host: u32, idx: u32) -> u64 {
    (1 << 63)
        | (0x30 << 56)
        | (kind << 52)
        | ((host as u64 & 0xFF_FFFF) << 24)
        | (idx as u64 & 0xFF_FFFF)
}

fn ep(host: u32, qpn: u32, addr: u64) -> Endpoint {
    Endpoint {
        host,
        qpn,
        addr,
        rkey: 0,
    }
}

/// One connection as published: (host, conn, peer host, weight, bytes per WR).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    pub host: u32,
    pub conn: u32,
    pub peer: Option<u32>,
    pub weight: f64,
    pub size: f64,
}

/// Publishes a host's connections (`None` peer: `u32::MAX`).
pub fn publish(board: &SharedBoard, host: u32, round: u64, conns: &[Published]) {
    let mut b = board.borrow_mut();
    for (i, c) in conns.iter().enumerate() {
        let k = key(CONN, host, i as u32);
        b.publish(
            k,
            Side::Client,
            ep(c.peer.unwrap_or(u32::MAX), c.conn, c.weight.to_bits()),
        );
        b.publish(k, Side::Server, ep(0, 0, c.size.to_bits()));
    }
    b.publish(
        key(HEAD, host, 0),
        Side::Client,
        ep(conns.len() as u32, 0, round),
    );
}

/// Every host's published connections, by host address.
pub fn gather(board: &SharedBoard, hosts: &[u32]) -> BTreeMap<u32, Vec<Published>> {
    let b = board.borrow();
    let mut out = BTreeMap::new();
    for &h in hosts {
        let Some(head) = b.lookup(key(HEAD, h, 0), Side::Client) else {
            continue;
        };
        let v = (0..head.host)
            .filter_map(|i| {
                let k = key(CONN, h, i);
                let (a, s) = (b.lookup(k, Side::Client)?, b.lookup(k, Side::Server)?);
                Some(Published {
                    host: h,
                    conn: a.qpn,
                    peer: (a.host != u32::MAX).then_some(a.host),
                    weight: f64::from_bits(a.addr),
                    size: f64::from_bits(s.addr),
                })
            })
            .collect();
        out.insert(h, v);
    }
    out
}

/// The whole instance with the fabric's links, solved; rates (WR/s) per (host, conn).
/// `q`, `c`: every host's WQE and CQE capacities (WR/s); `util`: the fraction of each link's
/// capacity the rates may use.
#[allow(clippy::too_many_arguments)]
pub fn solve_fabric(
    all: &BTreeMap<u32, Vec<Published>>,
    fabric: Option<&FabricLinks>,
    util: f64,
    q: f64,
    c: f64,
    alpha: f64,
    beta: f64,
) -> Result<BTreeMap<(u32, u32), f64>, braid_drum::DrumError> {
    let hosts: Vec<u32> = all.keys().copied().collect();
    let idx: BTreeMap<u32, u32> = hosts
        .iter()
        .enumerate()
        .map(|(i, &h)| (h, i as u32))
        .collect();
    let n = hosts.len();
    let m = all.values().map(|v| v.len()).max().unwrap_or(0);
    if n == 0 || m == 0 {
        return Ok(BTreeMap::new());
    }
    // Mops and MB/s keep the solver's numbers near 1.
    let mut w = vec![1.0; n * m];
    let mut active = vec![false; n * m];
    let mut size = vec![1.0; n * m];
    let mut ptr = vec![0u64];
    let (mut dst, mut frac) = (Vec::new(), Vec::new());
    for (i, h) in hosts.iter().enumerate() {
        let v = &all[h];
        for j in 0..m {
            let k = i * m + j;
            if let Some(p) = v.get(j) {
                w[k] = p.weight;
                active[k] = true;
                size[k] = p.size.max(1.0);
                if let Some(d) = p.peer.and_then(|d| idx.get(&d)) {
                    if *d as usize != i {
                        dst.push(*d);
                        frac.push(1.0);
                    }
                }
            }
            ptr.push(dst.len() as u64);
        }
    }
    let links = fabric.map(|f| {
        let mut cap = Vec::new();
        let mut paths = Vec::new();
        for l in &f.links {
            let e = cap.len() as u32;
            let mut any = false;
            for (s, d) in &l.pairs {
                if let (Some(&a), Some(&b)) = (idx.get(s), idx.get(d)) {
                    paths.push((a, b, e));
                    any = true;
                }
            }
            if any {
                cap.push(util * l.cap / 1e6);
            }
        }
        Links {
            cap,
            paths,
            size: size.clone(),
        }
    });
    let p = Problem {
        n,
        m,
        alpha,
        beta,
        w,
        a: vec![1.0; n * m],
        q_cap: vec![q / 1e6; n],
        c_cap: vec![c / 1e6; n],
        guarantee: vec![],
        active,
        preempt: vec![],
        two_sided: false,
        traffic: Some(Traffic { ptr, dst, frac }),
        links: links.filter(|l| !l.cap.is_empty()),
    };
    let opt = braid_drum::AdmmOptions {
        trace: false,
        dual_bound: false,
        max_iter: 3000,
        ..Default::default()
    };
    let r = braid_drum::solve_admm(&p, opt)?;
    let mut out = BTreeMap::new();
    for (i, h) in hosts.iter().enumerate() {
        for (j, pc) in all[h].iter().enumerate() {
            out.insert((*h, pc.conn), r.x_feasible[i * m + j] * 1e6);
        }
    }
    Ok(out)
}

/// The fabric decider (see the module doc).
pub struct FabricSolve {
    host: u32,
    board: SharedBoard,
    fabric: Option<FabricSlot>,
    local: LocalSolve,
    q: f64,
    c: f64,
    alpha: f64,
    beta: f64,
    util: f64,
    k: usize,
    max_wait: u32,
    ages: BTreeMap<u32, u32>,
    round: u64,
    solves: u64,
    failures: u64,
    applied: u64,
}

impl FabricSolve {
    pub fn new(
        cfg: &DrumConfig,
        host: u32,
        board: SharedBoard,
        fabric: Option<FabricSlot>,
    ) -> Self {
        FabricSolve {
            host,
            board,
            fabric,
            local: LocalSolve::new(cfg),
            q: cfg.wqe_rate,
            c: cfg.cqe_rate,
            alpha: cfg.alpha,
            beta: cfg.beta,
            util: cfg.link_utilization,
            k: cfg.qp_budget as usize,
            max_wait: cfg.max_wait,
            ages: BTreeMap::new(),
            round: 0,
            solves: 0,
            failures: 0,
            applied: 0,
        }
    }
}

impl RateDecider for FabricSolve {
    fn name(&self) -> &'static str {
        "fabric_solve"
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("fabric_solves", self.solves as f64),
            ("fabric_solve_failures", self.failures as f64),
            ("fabric_rates_applied", self.applied as f64),
        ]
    }

    fn decide(&mut self, now: u64, stats: &[Stat]) -> super::decide::Decision {
        self.round += 1;
        let active = select_active(&mut self.ages, self.k, self.max_wait, stats);
        let mine: Vec<Published> = stats
            .iter()
            .zip(&active)
            .filter(|(_, a)| **a)
            .map(|(s, _)| Published {
                host: self.host,
                conn: s.conn,
                peer: s.remote.map(|r| r.0),
                weight: s.weight,
                size: if s.posted > 0 {
                    s.posted_bytes as f64 / s.posted as f64
                } else {
                    1.0
                },
            })
            .collect();
        publish(&self.board, self.host, self.round, &mine);
        let fabric = self.fabric.as_ref().and_then(|f| f.borrow().clone());
        let hosts = match &fabric {
            Some(f) => f.hosts.clone(),
            None => vec![self.host],
        };
        let all = gather(&self.board, &hosts);
        if all.keys().next() == Some(&self.host) {
            // The coordinator: solve everyone's instance and publish the rates.
            self.solves += 1;
            match solve_fabric(
                &all,
                fabric.as_ref(),
                self.util,
                self.q,
                self.c,
                self.alpha,
                self.beta,
            ) {
                Ok(rates) => {
                    let mut b = self.board.borrow_mut();
                    for ((h, conn), x) in rates {
                        b.publish(key(RATE, h, conn), Side::Client, ep(0, 0, x.to_bits()));
                    }
                }
                Err(_) => self.failures += 1,
            }
        }
        let mut d = self.local.decide(now, stats);
        let b = self.board.borrow();
        for (j, s) in stats.iter().enumerate() {
            if !active[j] {
                d.x[j] = 0.0;
                d.z[j] = 0.0;
                d.active[j] = false;
                continue;
            }
            d.active[j] = true;
            if let Some(e) = b.lookup(key(RATE, self.host, s.conn), Side::Client) {
                let x = f64::from_bits(e.addr);
                d.x[j] = x;
                d.z[j] = x;
                self.applied += 1;
            }
        }
        d
    }
}

/// [`FabricSolve`]'s factory: it needs the backend's fabric links (`fabric_model::ask`, a `HostCtx` service).
pub struct FabricFactory;

impl DeciderFactory for FabricFactory {
    fn build(
        &self,
        cfg: &DrumConfig,
        ctx: &DeciderCtx,
    ) -> Result<Box<dyn RateDecider>, BuildError> {
        let Some(f) = ctx.fabric.clone() else {
            return Err(BuildError::new(
                "decider",
                "\"fabric\" needs a backend that knows the fabric's links (the simulator); use \"local\" or \"online\"",
            ));
        };
        Ok(Box::new(FabricSolve::new(
            cfg,
            ctx.host,
            ctx.board.clone(),
            Some(f),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drum::fabric_model::FabricLink;

    fn conn(host: u32, conn: u32, peer: u32, weight: f64, size: f64) -> Published {
        Published {
            host,
            conn,
            peer: Some(peer),
            weight,
            size,
        }
    }

    #[test]
    fn the_board_carries_the_statistics_unchanged() {
        let board = braid_verbs::rendezvous::board();
        let a = [conn(7, 3, 9, 2.5, 1024.0), conn(7, 4, 8, 1.0, 64.0)];
        publish(&board, 7, 1, &a);
        publish(&board, 9, 1, &[conn(9, 1, 7, 1.0, 32.0)]);
        let all = gather(&board, &[7, 8, 9]);
        assert_eq!(all.len(), 2, "host 8 published nothing");
        assert_eq!(all[&7], a.to_vec());
        assert_eq!(all[&9][0].size, 32.0);
    }

    #[test]
    fn a_shared_link_is_split_by_weight_over_bytes_and_others_keep_the_nic() {
        // Hosts 1 and 2 send to 3 across one link of 3 GB/s; host 4 sends to 5 elsewhere.
        // Log utility, the link binds: x_k = w_k L / (s_k sum w) (the analytical optimum),
        // here 1e6 and 2e6 WR/s of 1 KB; host 4 gets its NIC's Q = 5e6.
        let mut all = BTreeMap::new();
        all.insert(1, vec![conn(1, 10, 3, 1.0, 1000.0)]);
        all.insert(2, vec![conn(2, 20, 3, 2.0, 1000.0)]);
        all.insert(3, vec![]);
        all.insert(4, vec![conn(4, 40, 5, 1.0, 1000.0)]);
        all.insert(5, vec![]);
        let f = FabricLinks {
            hosts: vec![1, 2, 3, 4, 5],
            links: vec![FabricLink {
                name: "spine".into(),
                cap: 3e9,
                pairs: vec![(1, 3), (2, 3)],
                may: vec![(1, 3), (2, 3)],
                owner: Some(1),
            }],
            routes: None,
        };
        let r = solve_fabric(&all, Some(&f), 1.0, 5e6, 5e6, 1.0, 0.0).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() / b < 1e-2;
        assert!(close(r[&(1, 10)], 1e6), "{r:?}");
        assert!(close(r[&(2, 20)], 2e6), "{r:?}");
        assert!(close(r[&(4, 40)], 5e6), "{r:?}");
        let load = 1000.0 * (r[&(1, 10)] + r[&(2, 20)]);
        assert!(load <= 3e9 * (1.0 + 1e-6), "{load}");
        // Without the link each sender has its NIC to itself.
        let r = solve_fabric(&all, None, 1.0, 5e6, 5e6, 1.0, 0.0).unwrap();
        assert!(close(r[&(1, 10)], 5e6) && close(r[&(2, 20)], 5e6), "{r:?}");
    }
}
