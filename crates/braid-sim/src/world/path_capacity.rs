//! The capacity of the paths behind each next hop, per destination: what WCMP (Zhou et al.,
//! EuroSys '14) weights a switch's group members by on an asymmetric fabric, so that a
//! slower link two hops away (a spine's downlink at a quarter rate) loads the uplink towards
//! it a quarter as much, not only a slower local link.
//!
//! For destination host `d`, a node's capacity towards `d` follows the routes actually
//! installed (shortest paths over the links detected up, plus static routes by destination):
//! `cap(s) = Σ over the ports p of s's group for d of min(rate(p), cap(peer(p)))`; a host other
//! than `d` forwards nothing (0). The links into `d` itself are left out (a port whose peer is
//! `d` contributes an unbounded capacity): every path to `d` shares them, so counting them would
//! cap every next hop at the host link's rate and hide the fabric's asymmetry, as WCMP's
//! weights are per destination prefix (edge switch), not per host. The recursion is the
//! max-flow on a tree of paths; where paths merge again inside the fabric (a fat-tree's
//! destination-pod aggregation switches) it counts the shared link once per path that crosses
//! it, which keeps a symmetric fabric symmetric but can overstate a merged branch.

use super::{port_at, NodeHot, Role};
use crate::net::Port;
use crate::world::table::RouteTables;
use std::collections::HashMap;

const UNKNOWN: f64 = -1.0;
const VISITING: f64 = -2.0;

/// Per destination, the capacity towards it of the nodes asked about so far (bit/s;
/// `f64::INFINITY` for the switches the destination hangs off, `UNKNOWN` for nodes not yet
/// evaluated); cleared when the routes change (failover). Keyed by the destination's edge
/// switch when the routes are per edge switch (no static routes, a single-homed host): every
/// host below one switch has the same capacities, and a fabric with 10^4 hosts then keeps one
/// row per edge switch, not per host.
#[derive(Default)]
pub(crate) struct PathCapacity {
    toward: HashMap<(u32, u32), Vec<f64>>,
}

/// What the computation reads of the world.
pub(crate) struct Fabric<'a> {
    pub ports: &'a [Port],
    pub hot: &'a [NodeHot],
    pub routes: &'a RouteTables,
    pub groups: &'a [Vec<u16>],
}

impl PathCapacity {
    pub fn clear(&mut self) {
        self.toward.clear();
    }

    /// Appends to `out` the capacity behind each of `candidates` (ports of node `node`) towards
    /// host `dst` (host index; `dst_node` its node): the port's rate, or less if the paths past
    /// its peer carry less. A port straight to the destination weighs its own rate.
    pub fn behind(
        &mut self,
        f: &Fabric<'_>,
        dst: u32,
        dst_node: u32,
        node: u32,
        candidates: &[u16],
        out: &mut Vec<f64>,
    ) {
        let key = match edge_switch(f, dst_node) {
            Some(e) if !f.routes.any_static => (u32::MAX, e),
            _ => (dst, dst_node),
        };
        let n = f.hot.len() - 1;
        let cap = self.toward.entry(key).or_insert_with(|| {
            let mut c = vec![UNKNOWN; n];
            c[dst_node as usize] = f64::INFINITY;
            c
        });
        out.clear();
        for &p in candidates {
            let port = &f.ports[port_at(f.hot, node, p)];
            let c = evaluate(f, dst, dst_node, port.peer_node, cap);
            out.push((port.rate as f64).min(c));
        }
    }
}

/// The one switch host `dst_node` hangs off, if it has one port.
fn edge_switch(f: &Fabric<'_>, dst_node: u32) -> Option<u32> {
    let (a, b) = (
        f.hot[dst_node as usize].first_port,
        f.hot[dst_node as usize + 1].first_port,
    );
    (b == a + 1).then(|| f.ports[a as usize].peer_node)
}

/// `start`'s capacity towards `dst`, evaluating (depth first, iteratively: a fabric can be
/// deeper than the stack likes) what it depends on that `cap` does not hold yet.
fn evaluate(f: &Fabric<'_>, dst: u32, dst_node: u32, start: u32, cap: &mut [f64]) -> f64 {
    if cap[start as usize] >= 0.0 {
        return cap[start as usize];
    }
    let mut stack = vec![start];
    while let Some(&node) = stack.last() {
        let ni = node as usize;
        let Role::Switch(s) = f.hot[ni].role else {
            cap[ni] = 0.0; // a host forwards nothing
            stack.pop();
            continue;
        };
        let group = f
            .groups
            .get(f.routes.get(s as usize, dst as usize) as usize)
            .map_or(&[][..], |g| g.as_slice());
        if cap[ni] == UNKNOWN {
            cap[ni] = VISITING;
            let mut pending = false;
            for &p in group {
                let peer = f.ports[port_at(f.hot, node, p)].peer_node;
                if cap[peer as usize] == UNKNOWN {
                    stack.push(peer);
                    pending = true;
                }
            }
            if pending {
                continue;
            }
        } else if cap[ni] >= 0.0 {
            stack.pop(); // a second copy on the stack, evaluated meanwhile
            continue;
        }
        // Every peer is known, or on the current path (a routing loop: it adds nothing).
        let mut sum = 0.0;
        for &p in group {
            let port = &f.ports[port_at(f.hot, node, p)];
            sum += if port.peer_node == dst_node {
                f64::INFINITY
            } else {
                cap[port.peer_node as usize].max(0.0).min(port.rate as f64)
            };
        }
        cap[ni] = sum;
        stack.pop();
    }
    cap[start as usize]
}
