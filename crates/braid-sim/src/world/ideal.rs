//! The ideal FCT, the slowdown's denominator: what a flow of `bytes` takes on an idle fabric at
//! the best rate any scheme could reach between its two hosts. It describes the fabric, not the
//! scheme, so the same flow has the same ideal under single-path DCQCN, MP-RDMA or a
//! software-multipath middleware, and slowdowns compare across schemes.
//!
//! Two bounds, the smaller is the ideal:
//!
//! - **One path**: the exact store-and-forward pipeline ([`pipeline_fct`]) over the fastest of
//!   the minimum-hop paths between the hosts. What a single-path flow alone on that path takes.
//! - **Many paths** (only when the fabric offers more than one path): the body at the rate
//!   R = min(sender link, receiver link, max-flow between the hosts over the fabric), plus one
//!   packet's latency along the path (its serialization on every hop, the bottleneck hop's at R,
//!   every propagation delay, and the ACK's way back). On a multi-path fabric a flow spread over
//!   several paths neither waits behind its own previous packet at every hop nor is limited to
//!   one path's bottleneck.
//!
//! A single-path flow on a multi-path fabric can therefore have a slowdown above 1 on an idle
//! network (its own path's store-and-forward waits, or a narrower path than the fabric's
//! max-flow); that is the price of one denominator for every scheme.

use super::World;
use crate::packet::{ACK_SIZE, ROCE_HEADER};
use braid_engine::time::serialization;
use braid_engine::Time;
use std::collections::{HashMap, VecDeque};

/// One hop of a path: (rate in bit/s, propagation delay).
pub type Hop = (u64, Time);

/// Most distinct hop sequences kept per node while listing minimum-hop paths (a fabric with more
/// distinct (rate, delay) sequences is pathologically irregular; the fastest are kept).
const MAX_SIGNATURES: usize = 64;

/// FCT of a WRITE of `bytes` on an empty path at line rate: the packets go back to back through
/// the path's store-and-forward hops, and the last one's ACK returns.
///
/// Each hop i is a link of serialization t_i (full packet) and delay d_i. With every packet
/// ready at the source at time 0, full packet k starts on link i at P_i + k·M_i, where
/// P_i = Σ_{m<i} (t_m + d_m) and M_i = max_{m≤i} t_m (a tandem of deterministic servers);
/// the last packet, possibly shorter (serialization u_i), starts on link i when it has
/// arrived and the full packet before it has left: S_i = max(A_i, P_i + (n−2)·M_i + t_i).
pub fn pipeline_fct(hops: &[Hop], bytes: u64, mtu: u64) -> Time {
    let (npkts, full, last) = packets(bytes, mtu);
    let mut arrive_last: Time = 0;
    let mut p_full: Time = 0;
    let mut m_full: Time = 0;
    let mut ack = 0;
    for &(rate, delay) in hops {
        let t = serialization(full, rate);
        m_full = m_full.max(t);
        let start_last = if npkts == 1 {
            arrive_last
        } else {
            // The full packet before the last (number n−2) leaves link i at P_i + (n−2)·M_i + t_i.
            arrive_last.max(p_full + (npkts - 2) * m_full + t)
        };
        arrive_last = start_last + serialization(last, rate) + delay;
        p_full += t + delay;
        ack += serialization(ACK_SIZE as u64, rate) + delay;
    }
    arrive_last + ack
}

/// The many-path bound: the n−1 full packets at the aggregate rate `rate`, then the last packet's
/// own latency along `hops` (its bottleneck hop at `rate`), then its ACK's way back.
pub fn spread_fct(hops: &[Hop], bytes: u64, mtu: u64, rate: u64) -> Time {
    let (npkts, full, last) = packets(bytes, mtu);
    let slowest = hops.iter().map(|h| h.0).min().unwrap_or(rate);
    let mut t = serialization((npkts - 1) * full, rate);
    for &(r, d) in hops {
        t += serialization(last, r) + d + serialization(ACK_SIZE as u64, r) + d;
    }
    // The last packet's serialization on the bottleneck hop counts at the aggregate rate (a
    // fabric-bound flow's last packet crosses the cut beside the others).
    t - serialization(last, slowest) + serialization(last, rate.max(slowest))
}

/// (packets, full packet's wire bytes, last packet's wire bytes) of a `bytes` message.
fn packets(bytes: u64, mtu: u64) -> (u64, u64, u64) {
    let npkts = bytes.div_ceil(mtu).max(1);
    let full = mtu + ROCE_HEADER as u64;
    let last = bytes.saturating_sub((npkts - 1) * mtu) + ROCE_HEADER as u64;
    (npkts, full, last)
}

/// Maximum flow from `s` to `t` over an undirected graph of `n` nodes whose edges `(a, b, cap)`
/// carry `cap` in each direction independently (full-duplex links). Dinic's algorithm.
pub fn max_flow(n: usize, edges: &[(u32, u32, u64)], s: u32, t: u32) -> u64 {
    if s == t {
        return 0;
    }
    // Arcs in pairs: arc 2k is a→b, arc 2k+1 is b→a, each the other's residual.
    let mut to = Vec::with_capacity(edges.len() * 2);
    let mut cap = Vec::with_capacity(edges.len() * 2);
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b, c) in edges {
        adj[a as usize].push(to.len());
        to.push(b as usize);
        cap.push(c);
        adj[b as usize].push(to.len());
        to.push(a as usize);
        cap.push(c);
    }
    let (s, t) = (s as usize, t as usize);
    let mut total: u64 = 0;
    let mut level = vec![u32::MAX; n];
    let mut next = vec![0usize; n];
    loop {
        level.fill(u32::MAX);
        level[s] = 0;
        let mut q = VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            for &e in &adj[u] {
                if cap[e] > 0 && level[to[e]] == u32::MAX {
                    level[to[e]] = level[u] + 1;
                    q.push_back(to[e]);
                }
            }
        }
        if level[t] == u32::MAX {
            return total;
        }
        next.fill(0);
        loop {
            let f = augment(s, t, u64::MAX, &adj, &to, &mut cap, &level, &mut next);
            if f == 0 {
                break;
            }
            total += f;
        }
    }
}

/// One blocking-flow augmentation of Dinic's algorithm (depth-first along the level graph).
#[allow(clippy::too_many_arguments)]
fn augment(
    u: usize,
    t: usize,
    limit: u64,
    adj: &[Vec<usize>],
    to: &[usize],
    cap: &mut [u64],
    level: &[u32],
    next: &mut [usize],
) -> u64 {
    if u == t {
        return limit;
    }
    while next[u] < adj[u].len() {
        let e = adj[u][next[u]];
        let v = to[e];
        if cap[e] > 0 && level[v] == level[u] + 1 {
            let f = augment(v, t, limit.min(cap[e]), adj, to, cap, level, next);
            if f > 0 {
                cap[e] -= f;
                cap[e ^ 1] += f;
                return f;
            }
        }
        next[u] += 1;
    }
    0
}

/// What the ideal needs of one host pair.
#[derive(Debug, Clone)]
struct Pair {
    /// Distinct (rate, delay) sequences of the minimum-hop paths.
    paths: Vec<Vec<Hop>>,
    /// min(sender link, receiver link, max-flow), bit/s.
    rate: u64,
    /// More than one path between the hosts.
    multi: bool,
}

/// The fabric between two switches (hosts never forward, and a host has one link, so a host
/// pair's paths are its two links around its switches' paths): computed once per switch pair.
#[derive(Debug, Clone)]
struct Between {
    /// Distinct hop sequences of the minimum-hop switch paths.
    paths: Vec<Vec<Hop>>,
    /// Number of those paths (saturating).
    count: u64,
    /// Max-flow over switch-to-switch links, bit/s: computed only for a host pair whose links
    /// are faster than every minimum-hop path (otherwise the host links bound the rate: the
    /// max-flow is at least any one path's bottleneck).
    flow: Option<u64>,
}

/// Ideal FCTs of a finished world, cached per host pair and per switch pair. [`Ideals::prepare`]
/// with the pairs that have flows computes them grouped by destination switch (one search from
/// each), which is what makes large fabrics cheap.
pub struct Ideals<'w> {
    world: &'w World,
    pairs: HashMap<(u32, u32), Option<Pair>>,
    between: HashMap<(u32, u32), Option<Between>>,
    /// The switch-to-switch links, (a, b, rate).
    fabric: Vec<(u32, u32, u64)>,
}

impl<'w> Ideals<'w> {
    pub fn new(world: &'w World) -> Self {
        let is_switch = |n: u32| world.host_index[n as usize] == u32::MAX;
        let fabric = world
            .links
            .iter()
            .filter(|&&(a, _, b, _)| is_switch(a) && is_switch(b))
            .map(|&(a, pa, b, _)| (a, b, world.port(a, pa).rate))
            .collect();
        Ideals {
            world,
            pairs: HashMap::new(),
            between: HashMap::new(),
            fabric,
        }
    }

    /// Computes the switch-pair parts of these host pairs, grouped by destination switch.
    pub fn prepare(&mut self, pairs: impl IntoIterator<Item = (u32, u32)>) {
        let mut by_t: std::collections::BTreeMap<u32, std::collections::BTreeSet<u32>> =
            Default::default();
        for (a, b) in pairs {
            let (na, nb) = (
                self.world.hosts[a as usize].node,
                self.world.hosts[b as usize].node,
            );
            let (s, t) = (
                self.world.node_ports(na)[0].peer_node,
                self.world.node_ports(nb)[0].peer_node,
            );
            let is_switch = |n: u32| self.world.host_index[n as usize] == u32::MAX;
            if s != t && is_switch(s) && is_switch(t) && !self.between.contains_key(&(s, t)) {
                by_t.entry(t).or_default().insert(s);
            }
        }
        for (t, sources) in by_t {
            let sources: Vec<u32> = sources.into_iter().collect();
            self.towards(t, &sources);
        }
    }

    /// The minimum-hop paths from each of `sources` to switch `t`, over switches only (one
    /// search from `t`, suffixes shared).
    fn towards(&mut self, t: u32, sources: &[u32]) {
        let world = self.world;
        let is_switch = |n: u32| world.host_index[n as usize] == u32::MAX;
        let mut dist = vec![u32::MAX; world.nodes.len()];
        dist[t as usize] = 0;
        let mut q = VecDeque::from([t]);
        while let Some(u) = q.pop_front() {
            for p in world.node_ports(u) {
                let v = p.peer_node;
                if dist[v as usize] == u32::MAX && is_switch(v) {
                    dist[v as usize] = dist[u as usize] + 1;
                    q.push_back(v);
                }
            }
        }
        let mut memo: HashMap<u32, (Vec<Vec<Hop>>, u64)> = HashMap::new();
        for &s in sources {
            let b = (dist[s as usize] != u32::MAX).then(|| {
                let (paths, count) = suffixes(world, s, t, &dist, &mut memo);
                Between {
                    paths,
                    count,
                    flow: None,
                }
            });
            self.between.insert((s, t), b);
        }
    }

    fn pair(&mut self, src: u32, dst: u32) -> Option<&Pair> {
        if !self.pairs.contains_key(&(src, dst)) {
            let p = self.compute(src, dst);
            self.pairs.insert((src, dst), p);
        }
        self.pairs[&(src, dst)].as_ref()
    }

    /// The ideal FCT of `bytes` from host `src` to host `dst` (0 if no path joins them).
    pub fn fct(&mut self, src: u32, dst: u32, bytes: u64) -> Time {
        let mtu = self.world.params.nic.mtu as u64;
        let Some(p) = self.pair(src, dst) else {
            return 0;
        };
        let one = p
            .paths
            .iter()
            .map(|h| pipeline_fct(h, bytes, mtu))
            .min()
            .unwrap_or(0);
        if !p.multi {
            return one;
        }
        let many = p
            .paths
            .iter()
            .map(|h| spread_fct(h, bytes, mtu, p.rate))
            .min()
            .unwrap_or(one);
        one.min(many)
    }

    fn compute(&mut self, src_host: u32, dst_host: u32) -> Option<Pair> {
        let world = self.world;
        let (src, dst) = (
            world.hosts[src_host as usize].node,
            world.hosts[dst_host as usize].node,
        );
        if src == dst {
            return None;
        }
        let up = &world.node_ports(src)[0];
        let down = &world.node_ports(dst)[0];
        let (first, last) = ((up.rate, up.delay), (down.rate, down.delay));
        let host_rate = up.rate.min(down.rate);
        // Two hosts on one link, or on one switch.
        if up.peer_node == dst {
            return Some(Pair {
                paths: vec![vec![first]],
                rate: up.rate,
                multi: false,
            });
        }
        let (s, t) = (up.peer_node, down.peer_node);
        if world.host_index[s as usize] != u32::MAX || world.host_index[t as usize] != u32::MAX {
            return None; // a host's only link leads to another host
        }
        // The last hop leaves the destination's switch on its port to the destination.
        let into = world
            .node_ports(t)
            .iter()
            .find(|p| p.peer_node == dst)
            .map_or(last, |p| (p.rate, p.delay));
        if s == t {
            return Some(Pair {
                paths: vec![vec![first, into]],
                rate: host_rate,
                multi: false,
            });
        }
        if !self.between.contains_key(&(s, t)) {
            self.towards(t, &[s]);
        }
        let fabric = &self.fabric;
        let b = self.between.get_mut(&(s, t))?.as_mut()?;
        let widest_mid = b
            .paths
            .iter()
            .map(|h| h.iter().map(|x| x.0).min().unwrap_or(u64::MAX))
            .max()
            .unwrap_or(0);
        // The max-flow is at least one path's bottleneck: only a fabric narrower than the host
        // links needs it computed.
        let rate = if host_rate <= widest_mid {
            host_rate
        } else {
            let flow = *b
                .flow
                .get_or_insert_with(|| max_flow(world.nodes.len(), fabric, s, t));
            host_rate.min(flow)
        };
        let paths: Vec<Vec<Hop>> = b
            .paths
            .iter()
            .map(|mid| {
                let mut h = Vec::with_capacity(mid.len() + 2);
                h.push(first);
                h.extend_from_slice(mid);
                h.push(into);
                h
            })
            .collect();
        let widest = paths
            .iter()
            .map(|h| h.iter().map(|x| x.0).min().unwrap_or(0))
            .max()
            .unwrap_or(0);
        Some(Pair {
            paths,
            rate,
            multi: b.count > 1 || rate > widest,
        })
    }
}

/// Distinct hop sequences (and the number of paths, saturating) from `node` to `dst` along
/// decreasing `dist`, memoised; the fastest [`MAX_SIGNATURES`] kept per node.
fn suffixes(
    world: &World,
    node: u32,
    dst: u32,
    dist: &[u32],
    memo: &mut HashMap<u32, (Vec<Vec<Hop>>, u64)>,
) -> (Vec<Vec<Hop>>, u64) {
    if node == dst {
        return (vec![Vec::new()], 1);
    }
    if let Some(r) = memo.get(&node) {
        return r.clone();
    }
    let mut out: Vec<Vec<Hop>> = Vec::new();
    let mut count = 0u64;
    let d = dist[node as usize];
    for p in world.node_ports(node) {
        let v = p.peer_node;
        if d == 0 || dist[v as usize] != d - 1 {
            continue;
        }
        let (tails, c) = suffixes(world, v, dst, dist, memo);
        count = count.saturating_add(c);
        for tail in tails {
            let mut h = Vec::with_capacity(tail.len() + 1);
            h.push((p.rate, p.delay));
            h.extend(tail);
            out.push(h);
        }
    }
    out.sort_by_key(|h| {
        let slowest = h.iter().map(|x| x.0).min().unwrap_or(0);
        let delay: Time = h.iter().map(|x| x.1).sum();
        (std::cmp::Reverse(slowest), delay, h.clone())
    });
    out.dedup();
    out.truncate(MAX_SIGNATURES);
    memo.insert(node, (out.clone(), count));
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    /// Leaf-spine: leaves 0..L, spines L..L+S, every leaf to every spine at `up`.
    fn leaf_spine(leaves: u32, spines: u32, up: impl Fn(u32, u32) -> u64) -> Vec<(u32, u32, u64)> {
        let mut e = Vec::new();
        for l in 0..leaves {
            for s in 0..spines {
                e.push((l, leaves + s, up(l, s)));
            }
        }
        e
    }

    #[test]
    fn max_flow_leaf_spine_is_the_sum_of_the_uplinks() {
        // 2 leaves, 4 spines at 10G: leaf to leaf 4 × 10G.
        let e = leaf_spine(2, 4, |_, _| 10 * G);
        assert_eq!(max_flow(6, &e, 0, 1), 40 * G);
        // With hosts of 40G and 100G on the leaves, host to host is the slower host link.
        let mut e2 = e.clone();
        e2.push((6, 0, 100 * G));
        e2.push((7, 1, 40 * G));
        assert_eq!(max_flow(8, &e2, 6, 7), 40 * G);
        assert_eq!(max_flow(8, &e2, 7, 6), 40 * G);
    }

    #[test]
    fn max_flow_asymmetric_one_slow_uplink() {
        // 4 spines, leaf 0's uplink to spine 3 at a quarter rate: 3 × 40G + 10G = 130G.
        let e = leaf_spine(2, 4, |l, s| if l == 0 && s == 3 { 10 * G } else { 40 * G });
        assert_eq!(max_flow(6, &e, 0, 1), 130 * G);
        assert_eq!(max_flow(6, &e, 1, 0), 130 * G);
    }

    #[test]
    fn max_flow_fat_tree_k4_between_pods() {
        // k = 4 fat-tree at rate r: 4 core (0..4), per pod 2 aggregation and 2 edge switches.
        // Aggregation a (0 or 1) of every pod links core 2a and 2a + 1; each edge links both
        // aggregations of its pod. Edge to edge across pods: its 2 uplinks, 2r; within a pod 2r.
        let r = 10 * G;
        let mut e = Vec::new();
        let agg = |pod: u32, a: u32| 4 + pod * 4 + a;
        let edge = |pod: u32, x: u32| 4 + pod * 4 + 2 + x;
        for pod in 0..4 {
            for a in 0..2 {
                for c in 0..2 {
                    e.push((agg(pod, a), 2 * a + c, r));
                }
                for x in 0..2 {
                    e.push((edge(pod, x), agg(pod, a), r));
                }
            }
        }
        let n = 4 + 16;
        assert_eq!(max_flow(n, &e, edge(0, 0), edge(3, 1)), 2 * r);
        assert_eq!(max_flow(n, &e, edge(1, 0), edge(1, 1)), 2 * r);
        // Aggregation to aggregation across pods: all four of its links lead there (two cores
        // directly; its two edges via the pod's other aggregation and the other two cores).
        assert_eq!(max_flow(n, &e, agg(0, 1), agg(2, 1)), 4 * r);
        // Edge 0 to aggregation 0 of its own pod: the direct link, and edge 0 → agg 1 →
        // edge 1 → agg 0: 2r.
        assert_eq!(max_flow(n, &e, edge(0, 0), agg(0, 0)), 2 * r);
    }

    #[test]
    fn max_flow_of_a_disconnected_pair_is_zero() {
        assert_eq!(max_flow(4, &[(0, 1, 5), (2, 3, 5)], 0, 3), 0);
        assert_eq!(max_flow(2, &[(0, 1, 5)], 0, 0), 0);
    }

    #[test]
    fn spread_equals_pipeline_on_a_one_hop_path() {
        // One hop: no store-and-forward wait; the spread bound at the hop's rate is the pipeline.
        for bytes in [1u64, 999, 1000, 4500, 1_000_000] {
            let h = [(40 * G, 1_000_000)];
            assert_eq!(
                spread_fct(&h, bytes, 1000, 40 * G),
                pipeline_fct(&h, bytes, 1000),
                "{bytes} B"
            );
        }
    }

    #[test]
    fn spread_is_body_at_rate_plus_one_packet_latency() {
        // 4 MB over host 10G - core 1G - 1G - host 10G, at R = 10G (ten such paths): the body's
        // 3999 full packets at 10G, then the last packet (16 B + 62) on every hop with the
        // slowest at R, and the ACK back. Computed by hand.
        let h = [
            (10 * G, 1_000_000),
            (G, 1_000_000),
            (G, 1_000_000),
            (10 * G, 1_000_000),
        ];
        let bytes = 4_000_016u64;
        let full = 1062u64;
        let ps = |b: u64, gbps: u64| (b * 8 * 1000).div_ceil(gbps);
        let last = 16 + 62;
        let want = ps(4000 * full, 10)
            + ps(last, 10)
            + ps(last, 10)
            + ps(last, 1)
            + ps(last, 10)
            + 4_000_000
            + 2 * ps(66, 10)
            + 2 * ps(66, 1)
            + 4_000_000;
        assert_eq!(spread_fct(&h, bytes, 1000, 10 * G), want);
    }
}
