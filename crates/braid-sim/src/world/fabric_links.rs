//! The fabric's links as host agents see them out of band ([`braid_verbs::host::FabricLinks`]):
//! every directed switch-to-switch link, its capacity in payload bytes/s (its rate less the
//! RoCE headers of MTU-sized packets), and the (source host, destination host)
//! pairs whose traffic crosses it. Routes are replayed with [`World::path_of`]; with ECMP a pair
//! counts on a link only if every one of `SPORTS` sampled source ports takes it (the QPs' own
//! ports are chosen later, so a link a pair crosses on some of its routes only is left out).
//! Built only when a mechanism asked for it (`HostCtx::fabric`).

use super::{Role, World};
use braid_verbs::host::{FabricLink, FabricLinks};
use std::collections::BTreeMap;

/// Source ports sampled per pair to find the links every route of the pair crosses.
const SPORTS: u16 = 16;

pub fn fabric_links(w: &World) -> FabricLinks {
    let n = w.hosts.len() as u32;
    let is_switch = |node: u32| matches!(w.nodes[node as usize].role, Role::Switch(_));
    // (from node, to node) -> pairs (host addresses) crossing it on every sampled route.
    let mut on: BTreeMap<(u32, u32), Vec<(u32, u32)>> = BTreeMap::new();
    for s in 0..n {
        for d in 0..n {
            if s == d {
                continue;
            }
            let mut common: Option<Vec<(u32, u32)>> = None;
            for k in 0..SPORTS {
                let path = w.path_of(s, d, 49152 + k * 997);
                let hops: Vec<(u32, u32)> = path
                    .windows(2)
                    .map(|h| (h[0], h[1]))
                    .filter(|&(a, b)| is_switch(a) && is_switch(b))
                    .collect();
                common = Some(match common {
                    None => hops,
                    Some(c) => c.into_iter().filter(|h| hops.contains(h)).collect(),
                });
            }
            let (sa, da) = (w.hosts[s as usize].node, w.hosts[d as usize].node);
            for h in common.unwrap_or_default() {
                on.entry(h).or_default().push((sa, da));
            }
        }
    }
    // Payload bytes per wire byte of MTU-sized packets: what a connection's bytes per WR are
    // charged against.
    let mtu = w.params.nic.mtu as f64;
    let payload = mtu / (mtu + crate::packet::ROCE_HEADER as f64);
    let links = on
        .into_iter()
        .map(|((a, b), pairs)| {
            let rate = w
                .node_ports(a)
                .iter()
                .find(|p| p.peer_node == b)
                .map(|p| p.rate)
                .unwrap_or(0);
            FabricLink {
                name: format!("{}->{}", w.nodes[a as usize].name, w.nodes[b as usize].name),
                cap: rate as f64 / 8.0 * payload,
                pairs,
            }
        })
        .collect();
    FabricLinks {
        hosts: w.hosts.iter().map(|h| h.node).collect(),
        links,
    }
}
