//! The fabric's links as host agents see them out of band ([`braid_middleware::drum::fabric_model::FabricLinks`]):
//! every directed switch-to-switch link, its capacity in payload bytes/s (its rate less the
//! RoCE headers of MTU-sized packets), the (source host, destination host) pairs whose traffic
//! crosses it on every route (`pairs`) and on some route (`may`), replayed with
//! [`World::path_of`] over `SPORTS` sampled source ports, and the host that keeps its row in a
//! distributed solve (`owner`: the lowest address among the hosts that asked for the fabric and
//! may send across it; if none may, the lowest of those hosts).
//!
//! Per QP, ECMP-aware: [`FabricLinks::routes`] answers which links the packets of a QP with a
//! given UDP source port cross, from a snapshot of the switches' routing state taken here (the
//! groups, the per-destination tables, the static source routes and the ECMP seeds) and the
//! same [`ecmp_hash`] the switches use; `tests/drum_fabric.rs` checks it against
//! [`World::path_of`]. Built only when a mechanism asked for it (`HostCtx::service_wanted` of a `FabricSlot`).

use super::{Role, World};
use crate::net::ecmp_hash;
use crate::nic::addr_node;
use crate::packet::ROCE_DPORT;
use braid_middleware::drum::fabric_model::{FabricLink, FabricLinks, FabricRoutes};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Per directed switch-to-switch link (from node, to node): the pairs crossing it on every
/// sampled route and on some.
type Crossings = BTreeMap<(u32, u32), (Vec<(u32, u32)>, Vec<(u32, u32)>)>;
/// Per switch: static source routes (source addresses, destination hosts, group).
type SrcRoutes = Vec<Vec<(Vec<u32>, Vec<bool>, u32)>>;

/// Source ports sampled per pair to find the links every route of the pair crosses.
const SPORTS: u16 = 16;

/// The fabric with every host as a possible owner.
pub fn fabric_links(w: &World) -> FabricLinks {
    let all: Vec<u32> = w.hosts.iter().map(|h| h.node).collect();
    fabric_links_for(w, &all)
}

/// The fabric, link owners chosen among `owners` (host addresses: the hosts that asked for it).
pub fn fabric_links_for(w: &World, owners: &[u32]) -> FabricLinks {
    let n = w.hosts.len() as u32;
    let is_switch = |node: u32| matches!(w.nodes[node as usize].role, Role::Switch(_));
    // every directed switch-to-switch link, in node order
    let mut on: Crossings = BTreeMap::new();
    for a in 0..w.nodes.len() {
        if is_switch(a as u32) {
            for p in w.node_ports(a as u32) {
                if is_switch(p.peer_node) {
                    on.entry((a as u32, p.peer_node)).or_default();
                }
            }
        }
    }
    for s in 0..n {
        for d in 0..n {
            if s == d {
                continue;
            }
            let mut common: Option<Vec<(u32, u32)>> = None;
            let mut some: Vec<(u32, u32)> = Vec::new();
            for k in 0..SPORTS {
                let path = w.path_of(s, d, 49152 + k * 997);
                let hops: Vec<(u32, u32)> = path
                    .windows(2)
                    .map(|h| (h[0], h[1]))
                    .filter(|&(a, b)| is_switch(a) && is_switch(b))
                    .collect();
                for h in &hops {
                    if !some.contains(h) {
                        some.push(*h);
                    }
                }
                common = Some(match common {
                    None => hops,
                    Some(c) => c.into_iter().filter(|h| hops.contains(h)).collect(),
                });
            }
            let (sa, da) = (w.hosts[s as usize].node, w.hosts[d as usize].node);
            for h in common.unwrap_or_default() {
                on.entry(h).or_default().0.push((sa, da));
            }
            for h in some {
                on.entry(h).or_default().1.push((sa, da));
            }
        }
    }
    // Payload bytes per wire byte of MTU-sized packets: what a connection's bytes per WR are
    // charged against.
    let mtu = w.params.nic.mtu as f64;
    let payload = mtu / (mtu + crate::packet::ROCE_HEADER as f64);
    let fallback = owners.iter().copied().min();
    let mut link_of = HashMap::new();
    let links = on
        .into_iter()
        .enumerate()
        .map(|(i, ((a, b), (pairs, may)))| {
            link_of.insert((a, b), i);
            let rate = w
                .node_ports(a)
                .iter()
                .find(|p| p.peer_node == b)
                .map(|p| p.rate)
                .unwrap_or(0);
            let owner = may
                .iter()
                .map(|p| p.0)
                .filter(|s| owners.contains(s))
                .min()
                .or(fallback);
            FabricLink {
                name: format!("{}->{}", w.nodes[a as usize].name, w.nodes[b as usize].name),
                cap: rate as f64 / 8.0 * payload,
                pairs,
                may,
                owner,
            }
        })
        .collect();
    FabricLinks {
        hosts: w.hosts.iter().map(|h| h.node).collect(),
        links,
        routes: Some(Rc::new(Router::snapshot(w, link_of))),
    }
}

/// A copy of the switches' routing state (what [`World::route`] reads), to replay a QP's path
/// after the world is built, outside it.
struct Router {
    host_index: Vec<u32>,
    n_hosts: usize,
    /// group per (switch, destination host index), row-major
    gid: Vec<u32>,
    groups: Vec<Vec<u16>>,
    seeds: Vec<u64>,
    /// per switch: (source addresses, destination hosts, group), checked first, in order
    src_routes: SrcRoutes,
    /// per node: the peer node of each port
    peer: Vec<Vec<u32>>,
    /// per node: its switch index
    sw_of: Vec<Option<u32>>,
    link_of: HashMap<(u32, u32), usize>,
}

impl Router {
    fn snapshot(w: &World, link_of: HashMap<(u32, u32), usize>) -> Router {
        let n_hosts = w.hosts.len();
        let n_sw = w.switches.len();
        let mut gid = Vec::with_capacity(n_sw * n_hosts);
        for sw in 0..n_sw {
            for d in 0..n_hosts {
                gid.push(w.routes.get(sw, d));
            }
        }
        Router {
            host_index: w.host_index.clone(),
            n_hosts,
            gid,
            groups: w.groups.clone(),
            seeds: w.switches.iter().map(|s| s.ecmp_seed).collect(),
            src_routes: w
                .switches
                .iter()
                .map(|s| {
                    s.src_routes
                        .iter()
                        .map(|r| (r.src.clone(), r.dst.clone(), r.gid))
                        .collect()
                })
                .collect(),
            peer: (0..w.nodes.len() as u32)
                .map(|n| w.node_ports(n).iter().map(|p| p.peer_node).collect())
                .collect(),
            sw_of: w
                .nodes
                .iter()
                .map(|n| match n.role {
                    Role::Switch(s) => Some(s),
                    Role::Host(_) => None,
                })
                .collect(),
            link_of,
        }
    }

    /// [`World::route`] on the snapshot.
    fn route(&self, sw: usize, src: u32, dst_addr: u32, sport: u16) -> Option<u16> {
        let dst = *self.host_index.get(addr_node(dst_addr) as usize)?;
        let by_src = self.src_routes[sw]
            .iter()
            .find(|r| r.1.get(dst as usize) == Some(&true) && r.0.contains(&src))
            .map(|r| r.2);
        let gid = match by_src {
            Some(g) => g,
            None if (dst as usize) < self.n_hosts => self.gid[sw * self.n_hosts + dst as usize],
            None => return None,
        };
        if gid == u32::MAX {
            return None;
        }
        let g = &self.groups[gid as usize];
        if g.len() == 1 {
            return Some(g[0]);
        }
        let h = ecmp_hash(self.seeds[sw], src, dst_addr, sport, ROCE_DPORT);
        Some(g[(h % g.len() as u64) as usize])
    }

    /// [`World::path_between`] on the snapshot.
    fn path(&self, src_addr: u32, dst_addr: u32, sport: u16) -> Vec<u32> {
        let (src, dst) = (addr_node(src_addr), addr_node(dst_addr));
        let mut path = vec![src];
        let Some(&first) = self.peer.get(src as usize).and_then(|p| p.first()) else {
            return path;
        };
        let mut node = first;
        while node != dst && path.len() < 64 {
            path.push(node);
            let Some(s) = self.sw_of[node as usize] else {
                return path;
            };
            let Some(p) = self.route(s as usize, src_addr, dst_addr, sport) else {
                return path;
            };
            node = self.peer[node as usize][p as usize];
        }
        path.push(node);
        path
    }
}

impl FabricRoutes for Router {
    fn links_of(&self, src: u32, sport: u16, dst: u32) -> Vec<usize> {
        self.path(src, dst, sport)
            .windows(2)
            .filter_map(|h| self.link_of.get(&(h[0], h[1])).copied())
            .collect()
    }
}
