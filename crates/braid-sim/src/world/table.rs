//! Compressed shortest-path route tables.
//!
//! A destination host hangs off one node (its NIC port's peer, the *edge* switch). Hosts do not
//! relay, so every switch other than that edge switch sees the same next hops for every host
//! below it: a switch's ECMP group depends on the destination's edge switch only, as real
//! fat-tree switches route by pod and ToR prefix. The tables keep one group per (switch,
//! destination class), a class being the hosts below one edge switch, plus per host the edge
//! switch's port facing it: switches × edge switches entries instead of switches × hosts, and
//! one breadth-first search per edge switch (over switches only) instead of one per host. The
//! groups are the same port lists, in the same order, as one search per host gives, so ECMP
//! choices are unchanged bit for bit (`tests`: checked against the per-host computation).
//!
//! Static routes (`[[routes]]`) give the switches they name a full per-host table of their own
//! (`overrides`), built from the compressed one when the first route is installed there.

use std::collections::HashMap;

/// Group id for "no route".
pub const NO_ROUTE: u32 = u32::MAX;

/// What the tables know of a destination host.
#[derive(Clone, Copy)]
struct Dest {
    /// The switch it hangs off (`NO_ROUTE`: a host) and that switch's group of the port facing it.
    edge_sw: u32,
    edge_gid: u32,
    /// Its class (index of its edge switch among the edge switches), or `NO_ROUTE`.
    class: u32,
}

/// A group's code in [`RouteTables::group_code`]: this bit set, the group's one port in the low
/// 16 bits; clear, the index in `group_ports` of the group's length, its ports following.
const SINGLE: u32 = 1 << 31;

#[derive(Default)]
pub struct RouteTables {
    /// Per destination host.
    dest: Vec<Dest>,
    /// The same per destination *node* (what a packet carries), a non-host's being "no route":
    /// the hop's lookup reads this one record instead of the node's host index and then `dest`.
    node_dest: Vec<Dest>,
    /// Per group id, its code (`SINGLE`), so that the hop reads no `Vec` of ports: a one-port
    /// group is the code itself, a larger one is a run of `group_ports`. Built by
    /// [`RouteTables::index_groups`] from the world's groups.
    group_code: Vec<u32>,
    group_ports: Vec<u16>,
    /// Group per (switch, class), row-major: `by_class[switch * classes + class]`.
    by_class: Vec<u32>,
    classes: usize,
    /// Per switch: a full per-destination-host table when static routes were installed there.
    overrides: Vec<Option<Box<[u32]>>>,
    /// Whether any switch has one (the lookup skips `overrides` otherwise).
    any_override: bool,
    /// Whether any static route was installed: `any_override`, or any switch has a
    /// source-specific route (`Switch::src_routes`). The hop tests this one flag
    /// (`World::route`).
    pub any_static: bool,
}

impl RouteTables {
    /// Shortest-path ECMP tables. `switch_nodes[s]` is switch `s`'s node, `host_nodes[h]` host
    /// `h`'s; `ports_of(node)` gives its ports' peer nodes in port order; `switch_index[node]` is
    /// a node's switch index (`NO_ROUTE` for a host); `groups` are the world's interned groups,
    /// which this extends.
    pub fn build(
        switch_nodes: &[u32],
        host_nodes: &[u32],
        ports_of: &dyn Fn(u32) -> Vec<u32>,
        switch_index: &[u32],
        groups: &mut Vec<Vec<u16>>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> RouteTables {
        let n_sw = switch_nodes.len();
        // Switch-only adjacency (CSR): for switch s, (port, peer switch) for every port facing a
        // switch, in port order.
        let mut off = Vec::with_capacity(n_sw + 1);
        let mut adj: Vec<(u16, u32)> = Vec::new();
        let mut ports: Vec<Vec<u32>> = Vec::with_capacity(n_sw);
        for &node in switch_nodes {
            off.push(adj.len());
            let peers = ports_of(node);
            for (p, &peer) in peers.iter().enumerate() {
                // (A peer past the nodes stands for a link routing must not use: failover.)
                let si = switch_index.get(peer as usize).copied().unwrap_or(NO_ROUTE);
                if si != NO_ROUTE {
                    adj.push((p as u16, si));
                }
            }
            ports.push(peers);
        }
        off.push(adj.len());
        let mut interned: HashMap<Vec<u16>, u32> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.clone(), i as u32))
            .collect();
        let mut intern = |g: &[u16], groups: &mut Vec<Vec<u16>>| -> u32 {
            if let Some(&id) = interned.get(g) {
                return id;
            }
            let id = groups.len() as u32;
            groups.push(g.to_vec());
            interned.insert(g.to_vec(), id);
            id
        };
        // Classes: the edge switches, in the order of their first host.
        let mut class_of_switch = vec![NO_ROUTE; n_sw];
        let mut edges: Vec<u32> = Vec::new();
        let mut dest = Vec::with_capacity(host_nodes.len());
        for &h in host_nodes {
            let peer = ports_of(h)[0];
            let s = switch_index.get(peer as usize).copied().unwrap_or(NO_ROUTE);
            if s == NO_ROUTE {
                dest.push(Dest {
                    edge_sw: NO_ROUTE,
                    edge_gid: NO_ROUTE,
                    class: NO_ROUTE,
                });
                continue;
            }
            if class_of_switch[s as usize] == NO_ROUTE {
                class_of_switch[s as usize] = edges.len() as u32;
                edges.push(s);
            }
            let port = ports[s as usize]
                .iter()
                .position(|&x| x == h)
                .expect("a host's peer has a port facing it") as u16;
            dest.push(Dest {
                edge_sw: s,
                edge_gid: intern(&[port], groups),
                class: class_of_switch[s as usize],
            });
        }
        let classes = edges.len();
        let mut by_class = vec![NO_ROUTE; n_sw * classes];
        let mut dist = vec![u32::MAX; n_sw];
        let mut queue: Vec<u32> = Vec::with_capacity(n_sw);
        let mut group: Vec<u16> = Vec::new();
        for (c, &t) in edges.iter().enumerate() {
            progress(c as u64, classes as u64);
            // Hops from the edge switch over switches only (the destination host is one more).
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            dist[t as usize] = 0;
            queue.clear();
            queue.push(t);
            let mut head = 0;
            while head < queue.len() {
                let u = queue[head] as usize;
                head += 1;
                for &(_, v) in &adj[off[u]..off[u + 1]] {
                    if dist[v as usize] == u32::MAX {
                        dist[v as usize] = dist[u] + 1;
                        queue.push(v);
                    }
                }
            }
            // Every switch reached, except the edge switch itself (its group is per host):
            // the ports towards a switch one hop closer. Consecutive switches often share a
            // group; the last one is kept to skip the lookup.
            let mut last: (Vec<u16>, u32) = (Vec::new(), NO_ROUTE);
            for s in 0..n_sw {
                let d = dist[s];
                if d == u32::MAX || d == 0 {
                    continue;
                }
                group.clear();
                group.extend(
                    adj[off[s]..off[s + 1]]
                        .iter()
                        .filter(|&&(_, v)| dist[v as usize] + 1 == d)
                        .map(|&(p, _)| p),
                );
                if group.is_empty() {
                    continue;
                }
                let gid = if last.1 != NO_ROUTE && last.0 == group {
                    last.1
                } else {
                    let id = intern(&group, groups);
                    last = (group.clone(), id);
                    id
                };
                by_class[s * classes + c] = gid;
            }
        }
        progress(classes as u64, classes as u64);
        let none = Dest {
            edge_sw: NO_ROUTE,
            edge_gid: NO_ROUTE,
            class: NO_ROUTE,
        };
        let mut node_dest = vec![none; switch_index.len()];
        for (&h, &d) in host_nodes.iter().zip(&dest) {
            node_dest[h as usize] = d;
        }
        let mut t = RouteTables {
            dest,
            node_dest,
            group_code: Vec::new(),
            group_ports: Vec::new(),
            by_class,
            classes,
            overrides: (0..n_sw).map(|_| None).collect(),
            any_override: false,
            any_static: false,
        };
        t.index_groups(groups);
        t
    }

    /// (Re)builds the groups' codes from the world's groups (after any group is added).
    pub fn index_groups(&mut self, groups: &[Vec<u16>]) {
        self.group_code.clear();
        self.group_ports.clear();
        for g in groups {
            if g.len() == 1 {
                self.group_code.push(SINGLE | g[0] as u32);
            } else {
                let at = u32::try_from(self.group_ports.len())
                    .ok()
                    .filter(|&a| a < SINGLE)
                    .expect("fewer than 2^31 group entries");
                self.group_code.push(at);
                self.group_ports.push(g.len() as u16);
                self.group_ports.extend_from_slice(g);
            }
        }
    }

    /// The port switch `sw` sends a packet for node `dst_node` on, `pick` choosing among an
    /// ECMP group's ports (given their number, it returns an index below it); None: no route.
    /// The same choice as `get` then the group, without static routes (`any_override` false).
    #[inline(always)]
    pub fn port_by_node(
        &self,
        sw: usize,
        dst_node: usize,
        pick: impl FnOnce(usize) -> usize,
    ) -> Option<u16> {
        self.port_in(self.gid_by_node(sw, dst_node), pick)
    }

    /// [`RouteTables::port_by_node`], `none` standing for None: the hop's form, which spares
    /// combining an `Option` on every return path (slice1ms: -19.6 M instructions, -0.44%).
    #[inline(always)]
    pub fn port_by_node_or(
        &self,
        sw: usize,
        dst_node: usize,
        none: u16,
        pick: impl FnOnce(usize) -> usize,
    ) -> u16 {
        let Some(&code) = self.group_code.get(self.gid_by_node(sw, dst_node) as usize) else {
            return none;
        };
        self.port_of(code, pick)
    }

    /// The group switch `sw` uses towards node `dst_node` (`NO_ROUTE`: none, or not a host).
    #[inline(always)]
    fn gid_by_node(&self, sw: usize, dst_node: usize) -> u32 {
        debug_assert!(!self.any_override);
        let Some(&d) = self.node_dest.get(dst_node) else {
            return NO_ROUTE;
        };
        if d.edge_sw as usize == sw {
            d.edge_gid
        } else if d.class == NO_ROUTE {
            NO_ROUTE
        } else {
            self.by_class[sw * self.classes + d.class as usize]
        }
    }

    /// The port of group `gid` that `pick` chooses (see [`RouteTables::port_by_node`]).
    #[inline(always)]
    pub fn port_in(&self, gid: u32, pick: impl FnOnce(usize) -> usize) -> Option<u16> {
        let code = *self.group_code.get(gid as usize)?;
        Some(self.port_of(code, pick))
    }

    /// The port that `pick` chooses in the group with code `code` (`group_code`'s entry).
    #[inline(always)]
    fn port_of(&self, code: u32, pick: impl FnOnce(usize) -> usize) -> u16 {
        if code & SINGLE != 0 {
            return code as u16;
        }
        let at = code as usize;
        let n = self.group_ports[at] as usize;
        self.group_ports[at + 1 + pick(n)]
    }

    /// The group switch `sw` uses towards host `dst` (`NO_ROUTE`: none).
    #[inline]
    pub fn get(&self, sw: usize, dst: usize) -> u32 {
        if self.any_override {
            if let Some(o) = &self.overrides[sw] {
                return o[dst];
            }
        }
        self.compressed(sw, dst)
    }

    #[inline]
    fn compressed(&self, sw: usize, dst: usize) -> u32 {
        let d = self.dest[dst];
        if d.edge_sw as usize == sw {
            return d.edge_gid;
        }
        if d.class == NO_ROUTE {
            return NO_ROUTE;
        }
        self.by_class[sw * self.classes + d.class as usize]
    }

    /// Sets switch `sw`'s group towards host `dst` (a static route): the switch gets a full
    /// per-host table.
    pub fn set(&mut self, sw: usize, dst: usize, gid: u32) {
        if self.overrides[sw].is_none() {
            let full: Box<[u32]> = (0..self.dest.len())
                .map(|d| self.compressed(sw, d))
                .collect();
            self.overrides[sw] = Some(full);
            self.any_override = true;
            self.any_static = true;
        }
        self.overrides[sw].as_mut().expect("just built")[dst] = gid;
    }

    /// Bytes the tables hold (for the docs' before/after).
    pub fn bytes(&self) -> usize {
        (self.dest.len() + self.node_dest.len()) * std::mem::size_of::<Dest>()
            + self.by_class.len() * 4
            + self
                .overrides
                .iter()
                .map(|o| o.as_ref().map_or(0, |o| o.len() * 4))
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A graph as per-node (is_switch, peers in port order).
    struct G {
        switch: Vec<bool>,
        peers: Vec<Vec<u32>>,
    }

    impl G {
        fn new(kinds: &[bool]) -> G {
            G {
                switch: kinds.to_vec(),
                peers: vec![Vec::new(); kinds.len()],
            }
        }
        fn link(&mut self, a: u32, b: u32) {
            self.peers[a as usize].push(b);
            self.peers[b as usize].push(a);
        }
    }

    /// The straightforward computation the tables replace: one breadth-first search per
    /// destination host (only the destination and switches relay), then at every switch the
    /// ports towards a neighbour one hop closer that is a switch or the destination itself.
    fn per_host(g: &G, hosts: &[u32], switches: &[u32]) -> Vec<Vec<Option<Vec<u16>>>> {
        let n = g.switch.len();
        let mut out = vec![vec![None; hosts.len()]; switches.len()];
        for (hi, &h) in hosts.iter().enumerate() {
            let mut dist = vec![u32::MAX; n];
            dist[h as usize] = 0;
            let mut q = std::collections::VecDeque::from([h]);
            while let Some(u) = q.pop_front() {
                if u != h && !g.switch[u as usize] {
                    continue;
                }
                for &v in &g.peers[u as usize] {
                    if dist[v as usize] == u32::MAX {
                        dist[v as usize] = dist[u as usize] + 1;
                        q.push_back(v);
                    }
                }
            }
            for (si, &s) in switches.iter().enumerate() {
                if dist[s as usize] == u32::MAX {
                    continue;
                }
                let grp: Vec<u16> = g.peers[s as usize]
                    .iter()
                    .enumerate()
                    .filter(|(_, &p)| dist[p as usize].wrapping_add(1) == dist[s as usize])
                    .filter(|(_, &p)| p == h || g.switch[p as usize])
                    .map(|(i, _)| i as u16)
                    .collect();
                if !grp.is_empty() {
                    out[si][hi] = Some(grp);
                }
            }
        }
        out
    }

    fn check(g: &G) -> (usize, usize) {
        let hosts: Vec<u32> = (0..g.switch.len() as u32)
            .filter(|&i| !g.switch[i as usize])
            .collect();
        let switches: Vec<u32> = (0..g.switch.len() as u32)
            .filter(|&i| g.switch[i as usize])
            .collect();
        let mut index = vec![NO_ROUTE; g.switch.len()];
        for (i, &s) in switches.iter().enumerate() {
            index[s as usize] = i as u32;
        }
        let mut groups = Vec::new();
        let ports_of = |n: u32| g.peers[n as usize].clone();
        let t = RouteTables::build(
            &switches,
            &hosts,
            &ports_of,
            &index,
            &mut groups,
            &mut |_, _| {},
        );
        let want = per_host(g, &hosts, &switches);
        let mut routed = 0;
        for s in 0..switches.len() {
            for h in 0..hosts.len() {
                let gid = t.get(s, h);
                let got = (gid != NO_ROUTE).then(|| groups[gid as usize].clone());
                assert_eq!(got, want[s][h], "switch {s} towards host {h}");
                routed += got.is_some() as usize;
            }
            // The hop's lookup by destination node: the same group's port, the same ECMP pick;
            // nothing towards a switch.
            for node in 0..g.switch.len() {
                let pick = |n: usize| (s * 7 + node) % n;
                let want = match hosts.iter().position(|&h| h as usize == node) {
                    Some(h) => {
                        let gid = t.get(s, h);
                        (gid != NO_ROUTE).then(|| {
                            let grp = &groups[gid as usize];
                            grp[pick(grp.len())]
                        })
                    }
                    None => None,
                };
                assert_eq!(
                    t.port_by_node(s, node, pick),
                    want,
                    "switch {s}, node {node}"
                );
            }
            assert_eq!(t.port_by_node(s, g.switch.len(), |_| 0), None);
        }
        (routed, t.bytes())
    }

    /// k-ary fat-tree: hosts first, then edge, aggregation, core switches.
    fn fat_tree(k: u32) -> G {
        let half = k / 2;
        let (nh, ne, nc) = (k * k * k / 4, k * half, half * half);
        let mut kinds = vec![false; nh as usize];
        kinds.resize((nh + 2 * ne + nc) as usize, true);
        let mut g = G::new(&kinds);
        let edge = |p: u32, i: u32| nh + p * half + i;
        let agg = |p: u32, i: u32| nh + ne + p * half + i;
        let core = |i: u32| nh + 2 * ne + i;
        for p in 0..k {
            for e in 0..half {
                for h in 0..half {
                    g.link((p * half + e) * half + h, edge(p, e));
                }
                for a in 0..half {
                    g.link(edge(p, e), agg(p, a));
                }
            }
            for a in 0..half {
                for c in 0..half {
                    g.link(agg(p, a), core(a * half + c));
                }
            }
        }
        g
    }

    #[test]
    fn fat_trees_match_the_per_host_search() {
        for k in [2, 4, 6, 8] {
            let (routed, _) = check(&fat_tree(k));
            // Every switch reaches every host.
            let n_sw = (5 * k * k / 4) as usize;
            assert_eq!(routed, n_sw * (k * k * k / 4) as usize, "k = {k}");
        }
    }

    #[test]
    fn the_tables_are_per_edge_switch_not_per_host() {
        // k = 8: 128 hosts, 80 switches, 32 edge switches.
        let (_, bytes) = check(&fat_tree(8));
        // Per host (12 B), per node (12 B: the hop's copy by node), per (switch, edge switch).
        assert_eq!(bytes, 128 * 4 + 128 * 8 + 208 * 12 + 80 * 32 * 4);
    }

    #[test]
    fn irregular_graphs_match_the_per_host_search() {
        // Random switch graphs (parallel links, several components, dead ends), hosts under
        // random switches, some hosts joined to a host: every group as the per-host search's.
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..200 {
            let ns = rng.random_range(1..12u32);
            let nh = rng.random_range(0..20u32);
            let mut kinds = vec![true; ns as usize];
            kinds.resize((ns + nh) as usize, false);
            // Shuffle node kinds so hosts and switches interleave in node order.
            for i in (1..kinds.len()).rev() {
                kinds.swap(i, rng.random_range(0..=i));
            }
            let mut g = G::new(&kinds);
            let sw: Vec<u32> = (0..kinds.len() as u32)
                .filter(|&i| kinds[i as usize])
                .collect();
            let hs: Vec<u32> = (0..kinds.len() as u32)
                .filter(|&i| !kinds[i as usize])
                .collect();
            for _ in 0..rng.random_range(0..3 * ns) {
                let (a, b) = (
                    sw[rng.random_range(0..sw.len())],
                    sw[rng.random_range(0..sw.len())],
                );
                if a != b {
                    g.link(a, b);
                }
            }
            let mut i = 0;
            while i < hs.len() {
                if i + 1 < hs.len() && rng.random_bool(0.1) {
                    g.link(hs[i], hs[i + 1]);
                    i += 2;
                } else {
                    g.link(hs[i], sw[rng.random_range(0..sw.len())]);
                    i += 1;
                }
            }
            check(&g);
        }
    }

    #[test]
    fn a_static_route_overrides_one_switch_only() {
        let g = fat_tree(4);
        let hosts: Vec<u32> = (0..16).collect();
        let switches: Vec<u32> = (16..36).collect();
        let mut index = vec![NO_ROUTE; 36];
        for (i, &s) in switches.iter().enumerate() {
            index[s as usize] = i as u32;
        }
        let mut groups = Vec::new();
        let ports_of = |n: u32| g.peers[n as usize].clone();
        let mut t = RouteTables::build(
            &switches,
            &hosts,
            &ports_of,
            &index,
            &mut groups,
            &mut |_, _| {},
        );
        let before: Vec<Vec<u32>> = (0..20)
            .map(|s| (0..16).map(|h| t.get(s, h)).collect())
            .collect();
        t.set(3, 9, 12345);
        for s in 0..20 {
            for h in 0..16 {
                let want = if (s, h) == (3, 9) {
                    12345
                } else {
                    before[s][h]
                };
                assert_eq!(t.get(s, h), want);
            }
        }
    }
}
