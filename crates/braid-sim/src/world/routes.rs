//! Building the world from the topology (nodes, hosts, switches, links) and routing: the
//! shortest-path ECMP tables, installed routes, the route of a packet at a switch, path and
//! ideal-FCT queries, and scheduled link events.

use super::{port_at, table, AppSlot, Counters, Ev, Host, Node, NodeHot, Role, World};
use crate::measure::Measure;
use crate::net::config::SwitchConfig;
use crate::net::{auto_headroom, ecmp_hash, Port, Switch, MAX_PRIO};
use crate::nic::{addr_node, host_alias, Nic, NicParams};
use crate::packet::{Packet, PacketPool, PktKind};
use crate::progress::Progress;
use crate::world::config::LinkEvent;
use braid_engine::{EventQueue, RngStream, Time};
use braid_topo::topology::{Graph, NodeKind};
use std::collections::HashMap;

impl World {
    pub fn new(
        graph: &Graph,
        params: NicParams,
        sw: SwitchConfig,
        measure: Measure,
        seed: u64,
    ) -> Result<World, String> {
        Self::with_progress(graph, params, sw, measure, seed, &mut Progress::none())
    }

    /// [`World::new`], reporting progress (stages "links", "nodes", "routes").
    pub fn with_progress(
        graph: &Graph,
        params: NicParams,
        sw: SwitchConfig,
        measure: Measure,
        seed: u64,
        progress: &mut Progress<'_>,
    ) -> Result<World, String> {
        let n = graph.nodes.len();
        let n_links = graph.links.len() as u64;
        let prios = sw.priorities as usize;
        let mut nodes: Vec<Node> = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, d)| Node {
                id: i as u32,
                name: d.name.clone(),
                role: Role::Switch(0),
            })
            .collect();
        // Ports go in one array, node after node, each node's in the order of its links
        // (`World::ports`): count them per node, then lay each link's two ends in place.
        let mut first = vec![0u32; n + 1];
        for l in &graph.links {
            first[l.a as usize + 1] += 1;
            first[l.b as usize + 1] += 1;
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        // Per port slot: its link and whether it is the link's `b` end.
        let mut slot_link = vec![(0u32, false); first[n] as usize];
        let mut host_index = vec![u32::MAX; n];
        let mut hosts = Vec::new();
        let mut switches = Vec::new();
        let mut links = Vec::new();
        for (li, l) in graph.links.iter().enumerate() {
            progress.tick("links", li as u64, n_links);
            let (a, b) = (l.a as usize, l.b as usize);
            let pa = (fill[a] - first[a]) as u16;
            slot_link[fill[a] as usize] = (li as u32, false);
            fill[a] += 1;
            let pb = (fill[b] - first[b]) as u16;
            slot_link[fill[b] as usize] = (li as u32, true);
            fill[b] += 1;
            links.push((l.a, pa, l.b, pb));
        }
        let mut ports: Vec<Port> = slot_link
            .iter()
            .map(|&(li, is_b)| {
                let l = &graph.links[li as usize];
                let (_, pa, _, pb) = links[li as usize];
                let curve = sw.ecn.curve_for(l.rate_bps);
                let rng = RngStream::new(seed, "link-loss", &[li as u64, is_b as u64]);
                let (peer, peer_port) = if is_b { (l.a, pa) } else { (l.b, pb) };
                Port::new(
                    peer, peer_port, li, l.rate_bps, l.delay_ps, l.loss, prios, curve, rng,
                )
            })
            .collect();
        let node_ports = |i: usize| &ports[first[i] as usize..first[i + 1] as usize];
        progress.tick("links", n_links, n_links);
        for (i, d) in graph.nodes.iter().enumerate() {
            progress.tick("nodes", i as u64, n as u64);
            match d.kind {
                NodeKind::Host => {
                    let hi = hosts.len() as u32;
                    if node_ports(i).len() != 1 {
                        return Err(format!(
                            "host {} ({}) has {} links; a host must have exactly one (its NIC port)",
                            hi,
                            d.name,
                            node_ports(i).len()
                        ));
                    }
                    nodes[i].role = Role::Host(hi);
                    host_index[i] = hi;
                    let rate = node_ports(i)[0].rate;
                    if i as u32 > 0x00FF_FFFF {
                        return Err("more than 2^24 nodes: addresses would overflow".into());
                    }
                    let caps = braid_verbs::Caps {
                        cross_channel: params.nic.cross_channel,
                        local_addrs: (0..params.nic.addresses.max(1))
                            .map(|k| host_alias(i as u32, k))
                            .collect(),
                        sport_control: true,
                        data_tracking: true,
                        mtu: params.nic.mtu,
                        line_rate_bps: rate,
                        max_qp_wr: 1 << 15,
                    };
                    hosts.push(Host {
                        node: i as u32,
                        nic: Nic::new(i as u32, rate, &params, seed),
                        apps: vec![AppSlot::new(
                            Box::new(braid_verbs::Idle),
                            Vec::new(),
                            "agent".into(),
                        )],
                        owners: Default::default(),
                        caps,
                    });
                }
                NodeKind::Switch => {
                    let si = switches.len() as u32;
                    nodes[i].role = Role::Switch(si);
                    let np = node_ports(i).len();
                    let frame = params.nic.mtu as u64 + crate::packet::ROCE_HEADER as u64;
                    let headroom: Vec<u64> = if sw.pfc.enabled && !sw.lossless.is_empty() {
                        node_ports(i)
                            .iter()
                            .map(|p| {
                                sw.pfc
                                    .headroom
                                    .map_or_else(|| auto_headroom(p.rate, p.delay, frame), |h| h.0)
                            })
                            .collect()
                    } else {
                        vec![0; np]
                    };
                    let reserved: u64 = headroom.iter().sum();
                    if reserved >= sw.buffer.0 {
                        return Err(format!(
                            "switch {}: PFC headroom for its {} ports ({} bytes) leaves no shared buffer (switch.buffer = {} bytes); raise switch.buffer or lower switch.pfc.headroom",
                            d.name, np, reserved, sw.buffer.0
                        ));
                    }
                    switches.push(Switch {
                        node: i as u32,
                        shared: sw.buffer.0 - reserved,
                        shared_used: 0,
                        hdrm_used: vec![0; np],
                        headroom,
                        ingress: vec![[0; MAX_PRIO]; np],
                        pause_sent: vec![[false; MAX_PRIO]; np],
                        // No `shared_used` reaches u64::MAX: the first use computes it.
                        xoff_memo: (u64::MAX, 0),
                        ecmp_seed: braid_engine::derive_seed(sw.ecmp_seed, "ecmp", &[i as u64]),
                        lb: None,
                        ecn_rng: RngStream::new(seed, "ecn", &[i as u64]),
                        src_routes: Vec::new(),
                    });
                }
            }
        }
        let mut hot: Vec<NodeHot> = nodes
            .iter()
            .zip(&first)
            .map(|(node, &first_port)| NodeHot {
                first_port,
                role: node.role,
            })
            .collect();
        hot.push(NodeHot {
            first_port: first[n],
            role: Role::Switch(u32::MAX),
        });
        for p in &mut ports {
            if let Role::Switch(s) = nodes[p.peer_node as usize].role {
                p.peer_switch = s;
            }
        }
        let mut w = World {
            nodes,
            ports,
            hot,
            hosts,
            switches,
            host_index,
            groups: Vec::new(),
            routes: Default::default(),
            links,
            pool: PacketPool::default(),
            params,
            sw,
            counters: Counters::default(),
            measure,
            pending_notify: Vec::new(),
            cpu_cost: braid_verbs::CpuCost::default(),
            cpu_delay: false,
            seed,
            lossless_mask: 0,
            ev_counts: [0; 9],
            tokens: Vec::new(),
            free_tokens: Vec::new(),
            lb_any: false,
            link_detected_down: vec![false; graph.links.len()],
            path_capacity: Default::default(),
            behind: Vec::new(),
            static_routes: None,
        };
        if w.sw.pfc.enabled {
            w.lossless_mask = w.sw.lossless.iter().fold(0u8, |m, &p| m | (1 << (p & 7)));
        }
        progress.tick("nodes", n as u64, n as u64);
        w.build_routes(progress)?;
        w.install_balancers()?;
        Ok(w)
    }

    /// Shortest-path ECMP groups: for every switch and destination host, every port towards a
    /// neighbour one hop closer. Hosts never forward. Kept per edge switch (`table`).
    pub(super) fn build_routes(&mut self, progress: &mut Progress<'_>) -> Result<(), String> {
        let switch_nodes: Vec<u32> = self.switches.iter().map(|s| s.node).collect();
        let host_nodes: Vec<u32> = self.hosts.iter().map(|h| h.node).collect();
        let switch_index: Vec<u32> = self
            .nodes
            .iter()
            .map(|n| match n.role {
                Role::Switch(s) => s,
                Role::Host(_) => table::NO_ROUTE,
            })
            .collect();
        let (ports, hot, dead) = (&self.ports, &self.hot, &self.link_detected_down);
        // A link detected down (failover) leads nowhere: its peer is past the nodes.
        let ports_of = |n: u32| -> Vec<u32> {
            let (a, b) = (hot[n as usize].first_port, hot[n as usize + 1].first_port);
            ports[a as usize..b as usize]
                .iter()
                .map(|p| {
                    if dead[p.link as usize] {
                        u32::MAX
                    } else {
                        p.peer_node
                    }
                })
                .collect()
        };
        self.routes = table::RouteTables::build(
            &switch_nodes,
            &host_nodes,
            &ports_of,
            &switch_index,
            &mut self.groups,
            &mut |done, total| progress.tick("routes", done, total),
        );
        Ok(())
    }

    /// Installs static routes (after the shortest-path ones). Errors name the key path.
    pub fn install_routes(
        &mut self,
        routes: &[crate::world::config::StaticRoute],
        names: &HashMap<String, u32>,
    ) -> Result<(), (String, String)> {
        if self.sw.failover.is_some() && !routes.is_empty() {
            self.static_routes = Some((routes.to_vec(), names.clone()));
        }
        let mut interned: HashMap<Vec<u16>, u32> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.clone(), i as u32))
            .collect();
        for (i, r) in routes.iter().enumerate() {
            let at = |k: &str| format!("routes[{i}].{k}");
            let node = resolve_node(&r.node, names)
                .ok_or_else(|| (at("node"), format!("no node named {:?}", r.node)))?;
            let Role::Switch(s) = self.nodes[node as usize].role else {
                return Err((
                    at("node"),
                    format!("{:?} is a host; only switches route", r.node),
                ));
            };
            if r.next_hops.is_empty() {
                return Err((at("next_hops"), "expected at least one neighbour".into()));
            }
            let n_hosts = self.hosts.len() as u32;
            let dsts: Vec<u32> = r.dst.clone().unwrap_or_else(|| (0..n_hosts).collect());
            let mut ports = Vec::new();
            for (j, h) in r.next_hops.iter().enumerate() {
                let n = resolve_node(h, names).ok_or_else(|| {
                    (
                        format!("routes[{i}].next_hops[{j}]"),
                        format!("no node named {h:?}"),
                    )
                })?;
                let p = self
                    .node_ports(node)
                    .iter()
                    .position(|p| p.peer_node == n)
                    .ok_or_else(|| {
                        (
                            format!("routes[{i}].next_hops[{j}]"),
                            format!("{h:?} is not a neighbour of {:?}", r.node),
                        )
                    })?;
                // A host forwards nothing: as a next hop it takes only its own traffic; anything
                // else sent to it would vanish there.
                if let Role::Host(hi) = self.nodes[n as usize].role {
                    if let Some(&d) = dsts.iter().find(|&&d| d != hi) {
                        return Err((
                            format!("routes[{i}].next_hops[{j}]"),
                            format!(
                                "{h:?} is a host (host {hi}) and does not forward; it can be the \
                                 next hop only of traffic to itself (dst = [{hi}]), not to host {d}"
                            ),
                        ));
                    }
                }
                ports.push(p as u16);
            }
            let next = self.groups.len() as u32;
            let gid = *interned.entry(ports.clone()).or_insert_with(|| {
                self.groups.push(ports);
                next
            });
            if gid == next {
                self.routes.index_groups(&self.groups);
            }
            for (j, &d) in dsts.iter().enumerate() {
                if d >= n_hosts {
                    return Err((
                        format!("routes[{i}].dst[{j}]"),
                        format!("host {d} does not exist (the topology has {n_hosts} hosts)"),
                    ));
                }
            }
            let Some(srcs) = &r.src else {
                for &d in &dsts {
                    self.routes.set(s as usize, d as usize, gid);
                }
                continue;
            };
            // Source-specific: matched on the packet's whole source address, before the
            // destination's route.
            let naddr = self.params.nic.addresses.max(1);
            let mut src = Vec::new();
            for (j, x) in srcs.iter().enumerate() {
                let (h, k) = match *x {
                    crate::world::config::RouteSrc::Host(h) => (h, None),
                    crate::world::config::RouteSrc::Addr(a) => (a.host, Some(a.addr)),
                };
                if h >= n_hosts {
                    return Err((
                        format!("routes[{i}].src[{j}]"),
                        format!("host {h} does not exist (the topology has {n_hosts} hosts)"),
                    ));
                }
                let node = self.hosts[h as usize].node;
                match k {
                    None => src.extend((0..naddr).map(|k| host_alias(node, k))),
                    Some(k) if k < naddr => src.push(host_alias(node, k)),
                    Some(k) => {
                        return Err((
                            format!("routes[{i}].src[{j}].addr"),
                            format!("host {h} has addresses 0..{naddr} (nic.addresses), not {k}"),
                        ))
                    }
                }
            }
            let mut dst = vec![false; n_hosts as usize];
            for &d in &dsts {
                dst[d as usize] = true;
            }
            self.switches[s as usize]
                .src_routes
                .push(crate::net::SrcRoute { src, dst, gid });
            self.routes.any_static = true;
        }
        Ok(())
    }

    /// The egress port a switch uses for a packet.
    #[inline(always)]
    pub(super) fn route(&self, sw: usize, pk: &Packet) -> Option<u16> {
        // Without static routes, one record per destination node and the switch's row. The
        // rest is out of line: its loop over source routes needs registers the common path then
        // saved and restored on every call (6 pushes and pops per hop; slice1ms: -54 M
        // instructions, -1.15%).
        if self.routes.any_static {
            return self.route_static(sw, pk);
        }
        self.routes
            .port_by_node(sw, addr_node(pk.dst) as usize, |n| {
                self.ecmp_pick(sw, pk, n)
            })
    }

    /// [`World::route`], `none` standing for None (the hop's form: see
    /// `RouteTables::port_by_node_or`).
    #[inline(always)]
    pub(super) fn route_or(&self, sw: usize, pk: &Packet, none: u16) -> u16 {
        if self.routes.any_static {
            return self.route_static(sw, pk).unwrap_or(none);
        }
        self.routes
            .port_by_node_or(sw, addr_node(pk.dst) as usize, none, |n| {
                self.ecmp_pick(sw, pk, n)
            })
    }

    /// Which of `n` ports switch `sw`'s ECMP hash picks for `pk`.
    #[inline(always)]
    fn ecmp_pick(&self, sw: usize, pk: &Packet, n: usize) -> usize {
        crate::net::lb::ecmp::index_of(self.switch_hash(sw, pk), n)
    }

    /// `pk`'s 5-tuple hash with switch `sw`'s seed.
    #[inline(always)]
    pub(super) fn switch_hash(&self, sw: usize, pk: &Packet) -> u64 {
        ecmp_hash(
            self.switches[sw].ecmp_seed,
            pk.src,
            pk.dst,
            pk.sport,
            pk.dport,
        )
    }

    /// [`World::route`] when static routes were installed.
    #[cold]
    #[inline(never)]
    fn route_static(&self, sw: usize, pk: &Packet) -> Option<u16> {
        let gid = self.group_of(sw, pk)?;
        self.routes.port_in(gid, |n| self.ecmp_pick(sw, pk, n))
    }

    /// The group switch `sw` routes `pk` by (static routes included); None: no route.
    pub(super) fn group_of(&self, sw: usize, pk: &Packet) -> Option<u32> {
        // Routing follows the destination's node; a source-specific static route wins.
        let dst = *self.host_index.get(addr_node(pk.dst) as usize)?;
        let s = &self.switches[sw];
        let by_src = if s.src_routes.is_empty() {
            None
        } else {
            s.src_routes
                .iter()
                .find(|r| r.dst.get(dst as usize) == Some(&true) && r.src.contains(&pk.src))
                .map(|r| r.gid)
        };
        match by_src {
            Some(g) => Some(g),
            None if (dst as usize) < self.hosts.len() => Some(self.routes.get(sw, dst as usize)),
            None => None,
        }
    }

    /// Builds every switch's load balancer (`switch.lb`, or its `switch.lb_at` entry; ECMP
    /// builds none).
    fn install_balancers(&mut self) -> Result<(), String> {
        let nodes = &self.nodes;
        let is_switch = |name: &str| {
            nodes.iter().any(|n| {
                matches!(n.role, Role::Switch(_)) && (n.name == name || n.id.to_string() == name)
            })
        };
        // An entry's refusals name its own key (`switch.lb_at[1].lb.gap`).
        let at_key = |i: usize, e: String| match e.strip_prefix("switch.lb") {
            Some(rest) => format!("switch.lb_at[{i}].lb{rest}"),
            None => e,
        };
        self.sw.lb.kind().check(&is_switch)?;
        for (i, a) in self.sw.lb_at.iter().enumerate() {
            if !is_switch(&a.node) {
                return Err(format!(
                    "switch.lb_at[{i}].node: no switch named {:?}",
                    a.node
                ));
            }
            a.lb.kind().check(&is_switch).map_err(|e| at_key(i, e))?;
        }
        for si in 0..self.switches.len() {
            let node = self.switches[si].node;
            let name = &self.nodes[node as usize].name;
            let entry = self
                .sw
                .lb_at
                .iter()
                .enumerate()
                .rev()
                .find(|(_, a)| a.node == *name || a.node == node.to_string());
            let kind = entry.map_or(self.sw.lb.kind(), |(_, a)| a.lb.kind());
            let ports = self.node_ports(node);
            let peers: Vec<&str> = ports
                .iter()
                .map(|p| self.nodes[p.peer_node as usize].name.as_str())
                .collect();
            let site = crate::net::lb::LbSite {
                switch: si as u32,
                name: &self.nodes[node as usize].name,
                peers: &peers,
                ports,
                seed: self.seed,
            };
            let lb = kind
                .build(&site)
                .map_err(|e| entry.map_or(e.clone(), |(i, _)| at_key(i, e)))?;
            self.lb_any |= lb.is_some();
            self.switches[si].lb = lb;
        }
        Ok(())
    }

    /// Whether packets bound for switch `sw` are routed when they arrive there (its load
    /// balancer chooses from its state at that instant), not when they leave upstream.
    #[inline(always)]
    pub(super) fn routes_at_arrival(&self, sw: usize) -> bool {
        self.lb_any && self.switches[sw].lb.is_some()
    }

    /// The port switch `sw`'s load balancer chooses for `pk` now; `NO_PORT`: no route.
    #[cold]
    #[inline(never)]
    pub(super) fn balance(&mut self, now: Time, sw: usize, id: crate::packet::PktId) -> u16 {
        let pk = self.pool.get(id);
        let Some(gid) = self.group_of(sw, pk) else {
            return super::NO_PORT;
        };
        let Some(cands) = self.groups.get(gid as usize) else {
            return super::NO_PORT;
        };
        if cands.len() == 1 {
            return cands[0];
        }
        let hash = self.switch_hash(sw, pk);
        let node = self.switches[sw].node;
        let (a, b) = (self.hot[node as usize], self.hot[node as usize + 1]);
        let lb = self.switches[sw]
            .lb
            .as_mut()
            .expect("routes_at_arrival checked the balancer");
        self.behind.clear();
        if lb.wants_path_capacity() {
            let dst_node = addr_node(pk.dst);
            let dst = self.host_index[dst_node as usize];
            let fabric = super::path_capacity::Fabric {
                ports: &self.ports,
                hot: &self.hot,
                routes: &self.routes,
                groups: &self.groups,
            };
            self.path_capacity
                .behind(&fabric, dst, dst_node, node, cands, &mut self.behind);
        }
        let at = crate::net::lb::Pick {
            now,
            pk,
            hash,
            gid,
            candidates: cands,
            ports: &self.ports[a.first_port as usize..b.first_port as usize],
            behind: &self.behind,
        };
        cands[lb.pick(&at)]
    }

    /// Node ids a packet with this 5-tuple visits from `src` host to `dst` host (ECMP replayed).
    pub fn path_of(&self, src_host: u32, dst_host: u32, sport: u16) -> Vec<u32> {
        let src = self.hosts[src_host as usize].node;
        let dst = self.hosts[dst_host as usize].node;
        self.path_between(src, dst, sport)
    }

    /// Node ids a packet visits from source address `src_addr` to destination address
    /// `dst_addr` (any of the hosts' addresses) with this source port (ECMP replayed).
    pub fn path_between(&self, src_addr: u32, dst_addr: u32, sport: u16) -> Vec<u32> {
        let (src, dst) = (addr_node(src_addr), addr_node(dst_addr));
        let mut pk = Packet::control(PktKind::Data, 0);
        pk.src = src_addr;
        pk.dst = dst_addr;
        pk.sport = sport;
        let mut path = vec![src];
        let mut node = self.ports[port_at(&self.hot, src, 0)].peer_node;
        while node != dst && path.len() < 64 {
            path.push(node);
            // A host that is not the destination, or a switch without a route: the packet
            // ends here (and is counted as dropped), so does the path.
            let Role::Switch(s) = self.nodes[node as usize].role else {
                return path;
            };
            let Some(p) = self.route(s as usize, &pk) else {
                return path;
            };
            node = self.ports[port_at(&self.hot, node, p)].peer_node;
        }
        path.push(node);
        path
    }

    /// FCT of a WRITE of `bytes` alone on the path this 5-tuple takes (ECMP replayed), at line
    /// rate: the store-and-forward pipeline of [`super::ideal::pipeline_fct`]. The flow's own
    /// single-path standalone FCT (HPCC ns-3's notion, `path_ideal_fct_ps`); the slowdown's
    /// denominator is the fabric-wide [`super::ideal::Ideals`]. 0 if the path does not arrive.
    pub fn path_ideal_fct(&self, src_host: u32, dst_host: u32, sport: u16, bytes: u64) -> Time {
        self.ideal_fct_on(&self.path_of(src_host, dst_host, sport), dst_host, bytes)
    }

    pub fn schedule_link_events(
        &self,
        events: &[LinkEvent],
        q: &mut EventQueue<Ev>,
        names: &HashMap<String, u32>,
    ) -> Result<(), String> {
        for (i, e) in events.iter().enumerate() {
            let a = resolve_node(&e.a, names)
                .ok_or_else(|| format!("link_events[{i}].a: no node named {:?}", e.a))?;
            let b = resolve_node(&e.b, names)
                .ok_or_else(|| format!("link_events[{i}].b: no node named {:?}", e.b))?;
            let link = self
                .links
                .iter()
                .position(|&(x, _, y, _)| (x == a && y == b) || (x == b && y == a))
                .ok_or_else(|| {
                    format!("link_events[{i}]: no link between {:?} and {:?}", e.a, e.b)
                })?;
            q.schedule(
                e.down.0,
                Ev::LinkState {
                    link: link as u32,
                    up: false,
                    detected: false,
                },
            );
            if let Some(up) = e.up {
                if up.0 <= e.down.0 {
                    return Err(format!("link_events[{i}].up: must be later than down"));
                }
                q.schedule(
                    up.0,
                    Ev::LinkState {
                        link: link as u32,
                        up: true,
                        detected: false,
                    },
                );
            }
        }
        Ok(())
    }
}

fn resolve_node(s: &str, names: &HashMap<String, u32>) -> Option<u32> {
    names.get(s).copied().or_else(|| {
        s.parse()
            .ok()
            .filter(|&id: &u32| names.values().any(|&v| v == id))
    })
}
