//! The world: nodes, links, hosts (NIC + verbs stacks + applications) and switches, driven by
//! the engine's events.
//!
//! Events per packet are kept to a minimum: a packet hop is one `Arrive` event; an egress port
//! schedules a `PortWake` only when something is waiting behind the packet it is sending.

use crate::config::{LinkEvent, SwitchConfig};
use crate::measure::Measure;
use crate::net::{auto_headroom, ecmp_hash, red_probability, Pool, Port, Switch, MAX_PRIO};
use crate::nic::{addr_node, host_alias, Effects, NextTx, Nic, NicParams, TimerKind};
use crate::packet::{Packet, PacketPool, PktId, PktKind, ACK_SIZE, PFC_SIZE, ROCE_HEADER};
use braid_engine::time::serialization;
use braid_engine::{EventQueue, Handler, RngStream, Time};
use braid_topo::topology::{Graph, NodeKind};
use braid_verbs::{App, Event, Middleware, Stack};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy)]
pub enum Ev {
    /// A packet finished arriving at `node` on `port`.
    Arrive { node: u32, port: u16, pkt: PktId },
    /// An egress port may transmit.
    PortWake { node: u32, port: u16 },
    /// A packet finished the NIC receive pipeline.
    NicRx { host: u32, pkt: PktId },
    /// A transport timer.
    Timer {
        host: u32,
        kind: TimerKind,
        qp: u32,
        gen: u32,
    },
    /// A timer an application or middleware asked for (`app`: the tenant).
    AppTimer { host: u32, app: u32, token: u64 },
    /// Another tenant's middleware woke this tenant.
    Wake { host: u32, app: u32, token: u64 },
    /// Start an application.
    AppStart { host: u32, app: u32 },
    /// A link goes down or comes up.
    LinkState { link: u32, up: bool },
    /// Take measurement samples.
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Host(u32),
    Switch(u32),
}

pub struct Node {
    pub name: String,
    pub role: Role,
    pub ports: Vec<Port>,
}

/// A tenant: an application with its own verbs stack (slot 0 of every host is the host agent's,
/// with an idle application and the host-scoped middleware layers).
pub struct AppSlot {
    pub app: Box<dyn App>,
    pub stack: Vec<Box<dyn Middleware>>,
    /// What results call this tenant (e.g. "apps[0].client", "traffic[1].sender").
    pub label: String,
    pub cpu: crate::hostverbs::TenantCpu,
    /// The flow record this tenant's measurements go to (perftest applications).
    pub flow: Option<u32>,
    /// The NIC parameters its QPs are created with when its tenant runs a transport of its own
    /// (`[[apps]].transport`, `[[traffic]].transport`, `transport.per_host`); None = the world's.
    pub params: Option<std::rc::Rc<NicParams>>,
}

pub struct Host {
    pub node: u32,
    pub nic: Nic,
    /// Its tenants; index 0 is the host agent slot.
    pub apps: Vec<AppSlot>,
    /// Which tenant owns each QP, CQ and memory region (completion events go to the CQ's).
    pub owners: crate::hostverbs::Owners,
    pub caps: braid_verbs::Caps,
}

impl AppSlot {
    pub fn new(app: Box<dyn App>, stack: Vec<Box<dyn Middleware>>, label: String) -> Self {
        AppSlot {
            app,
            stack,
            label,
            cpu: Default::default(),
            flow: None,
            params: None,
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub drops_buffer: u64,
    pub drops_loss: u64,
    pub drops_link_down: u64,
    pub pfc_pauses: u64,
    pub pfc_resumes: u64,
    pub ecn_marks: u64,
    pub packets_forwarded: u64,
}

pub struct World {
    pub nodes: Vec<Node>,
    pub hosts: Vec<Host>,
    pub switches: Vec<Switch>,
    /// Node id -> host index (u32::MAX for switches).
    pub host_index: Vec<u32>,
    pub groups: Vec<Vec<u16>>,
    pub links: Vec<(u32, u16, u32, u16)>,
    pub pool: PacketPool,
    pub params: NicParams,
    pub sw: SwitchConfig,
    pub counters: Counters,
    pub measure: Measure,
    /// Completion notifications to deliver after the current event: (host, tenant, CQ).
    pending_notify: Vec<(u32, u32, u32)>,
    /// The host CPU cost model, and whether spent CPU time delays a tenant.
    pub cpu_cost: braid_verbs::CpuCost,
    pub cpu_delay: bool,
    pub seed: u64,
    /// Bit p set: priority p is lossless (PFC enabled and listed).
    lossless_mask: u8,
    /// Events handled, by kind (see [`Ev::KINDS`]).
    pub ev_counts: [u64; 9],
}

impl World {
    pub fn new(
        graph: &Graph,
        params: NicParams,
        sw: SwitchConfig,
        measure: Measure,
        seed: u64,
    ) -> Result<World, String> {
        let n = graph.nodes.len();
        let prios = sw.priorities as usize;
        let mut nodes: Vec<Node> = graph
            .nodes
            .iter()
            .map(|d| Node {
                name: d.name.clone(),
                role: Role::Switch(0),
                ports: Vec::new(),
            })
            .collect();
        let mut host_index = vec![u32::MAX; n];
        let mut hosts = Vec::new();
        let mut switches = Vec::new();
        let mut links = Vec::new();
        for (li, l) in graph.links.iter().enumerate() {
            let (a, b) = (l.a as usize, l.b as usize);
            let pa = nodes[a].ports.len() as u16;
            let pb = nodes[b].ports.len() as u16;
            let curve = sw.ecn.curve_for(l.rate_bps);
            let rng_a = RngStream::new(seed, "link-loss", &[li as u64, 0]);
            let rng_b = RngStream::new(seed, "link-loss", &[li as u64, 1]);
            nodes[a].ports.push(Port::new(
                l.b, pb, li as u32, l.rate_bps, l.delay_ps, l.loss, prios, curve, rng_a,
            ));
            nodes[b].ports.push(Port::new(
                l.a, pa, li as u32, l.rate_bps, l.delay_ps, l.loss, prios, curve, rng_b,
            ));
            links.push((l.a, pa, l.b, pb));
        }
        for (i, d) in graph.nodes.iter().enumerate() {
            match d.kind {
                NodeKind::Host => {
                    let hi = hosts.len() as u32;
                    if nodes[i].ports.len() != 1 {
                        return Err(format!(
                            "host {} ({}) has {} links; a host must have exactly one (its NIC port)",
                            hi,
                            d.name,
                            nodes[i].ports.len()
                        ));
                    }
                    nodes[i].role = Role::Host(hi);
                    host_index[i] = hi;
                    let rate = nodes[i].ports[0].rate;
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
                    let np = nodes[i].ports.len();
                    let frame = params.nic.mtu as u64 + crate::packet::ROCE_HEADER as u64;
                    let headroom: Vec<u64> = if sw.pfc.enabled && !sw.lossless.is_empty() {
                        nodes[i]
                            .ports
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
                        ecmp_seed: braid_engine::derive_seed(sw.ecmp_seed, "ecmp", &[i as u64]),
                        ecn_rng: RngStream::new(seed, "ecn", &[i as u64]),
                        routes: Vec::new(),
                        src_routes: Vec::new(),
                    });
                }
            }
        }
        let mut w = World {
            nodes,
            hosts,
            switches,
            host_index,
            groups: Vec::new(),
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
        };
        if w.sw.pfc.enabled {
            w.lossless_mask = w.sw.lossless.iter().fold(0u8, |m, &p| m | (1 << (p & 7)));
        }
        w.build_routes()?;
        Ok(w)
    }

    /// Shortest-path ECMP groups: for every switch and destination host, every port towards a
    /// neighbour one hop closer. Hosts never forward.
    fn build_routes(&mut self) -> Result<(), String> {
        let n = self.nodes.len();
        let mut interned: HashMap<Vec<u16>, u32> = HashMap::new();
        for s in &mut self.switches {
            s.routes = vec![u32::MAX; self.hosts.len()];
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue = std::collections::VecDeque::new();
        for (hi, h) in self.hosts.iter().enumerate() {
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            dist[h.node as usize] = 0;
            queue.clear();
            queue.push_back(h.node);
            while let Some(u) = queue.pop_front() {
                // Only switches relay; the destination host starts the search.
                if u != h.node && matches!(self.nodes[u as usize].role, Role::Host(_)) {
                    continue;
                }
                for p in &self.nodes[u as usize].ports {
                    let v = p.peer_node as usize;
                    if dist[v] == u32::MAX {
                        dist[v] = dist[u as usize] + 1;
                        queue.push_back(v as u32);
                    }
                }
            }
            for s in 0..self.switches.len() {
                let node = self.switches[s].node as usize;
                if dist[node] == u32::MAX {
                    continue;
                }
                let group: Vec<u16> = self.nodes[node]
                    .ports
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| dist[p.peer_node as usize] + 1 == dist[node])
                    .filter(|(_, p)| {
                        p.peer_node == h.node
                            || matches!(self.nodes[p.peer_node as usize].role, Role::Switch(_))
                    })
                    .map(|(i, _)| i as u16)
                    .collect();
                if group.is_empty() {
                    continue;
                }
                let next = interned.len() as u32;
                let gid = *interned.entry(group.clone()).or_insert_with(|| {
                    self.groups.push(group);
                    next
                });
                self.switches[s].routes[hi] = gid;
            }
        }
        Ok(())
    }

    /// Installs static routes (after the shortest-path ones). Errors name the key path.
    pub fn install_routes(
        &mut self,
        routes: &[crate::config::StaticRoute],
        names: &HashMap<String, u32>,
    ) -> Result<(), (String, String)> {
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
            let mut ports = Vec::new();
            for (j, h) in r.next_hops.iter().enumerate() {
                let n = resolve_node(h, names).ok_or_else(|| {
                    (
                        format!("routes[{i}].next_hops[{j}]"),
                        format!("no node named {h:?}"),
                    )
                })?;
                let p = self.nodes[node as usize]
                    .ports
                    .iter()
                    .position(|p| p.peer_node == n)
                    .ok_or_else(|| {
                        (
                            format!("routes[{i}].next_hops[{j}]"),
                            format!("{h:?} is not a neighbour of {:?}", r.node),
                        )
                    })?;
                ports.push(p as u16);
            }
            let next = self.groups.len() as u32;
            let gid = *interned.entry(ports.clone()).or_insert_with(|| {
                self.groups.push(ports);
                next
            });
            let n_hosts = self.hosts.len() as u32;
            let dsts: Vec<u32> = r.dst.clone().unwrap_or_else(|| (0..n_hosts).collect());
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
                    self.switches[s as usize].routes[d as usize] = gid;
                }
                continue;
            };
            // Source-specific: matched on the packet's whole source address, before the
            // destination's route.
            let naddr = self.params.nic.addresses.max(1);
            let mut src = Vec::new();
            for (j, x) in srcs.iter().enumerate() {
                let (h, k) = match *x {
                    crate::config::RouteSrc::Host(h) => (h, None),
                    crate::config::RouteSrc::Addr(a) => (a.host, Some(a.addr)),
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
        }
        Ok(())
    }

    /// The egress port a switch uses for a packet.
    #[inline]
    fn route(&self, sw: usize, pk: &Packet) -> Option<u16> {
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
        let gid = match by_src {
            Some(g) => g,
            None => *s.routes.get(dst as usize)?,
        };
        if gid == u32::MAX {
            return None;
        }
        let g = &self.groups[gid as usize];
        if g.len() == 1 {
            return Some(g[0]);
        }
        let h = ecmp_hash(
            self.switches[sw].ecmp_seed,
            pk.src,
            pk.dst,
            pk.sport,
            pk.dport,
        );
        Some(g[(h % g.len() as u64) as usize])
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
        let mut node = self.nodes[src as usize].ports[0].peer_node;
        while node != dst && path.len() < 64 {
            path.push(node);
            let Role::Switch(s) = self.nodes[node as usize].role else {
                break;
            };
            let Some(p) = self.route(s as usize, &pk) else {
                break;
            };
            node = self.nodes[node as usize].ports[p as usize].peer_node;
        }
        path.push(node);
        path
    }

    /// FCT of a WRITE of `bytes` on an empty network at line rate: the first packet's
    /// store-and-forward latency, the rest at the bottleneck rate, and the last ACK's return.
    pub fn ideal_fct(&self, src_host: u32, dst_host: u32, sport: u16, bytes: u64) -> Time {
        let path = self.path_of(src_host, dst_host, sport);
        let mtu = self.params.nic.mtu as u64;
        let npkts = bytes.div_ceil(mtu).max(1);
        let first = bytes.min(mtu) + ROCE_HEADER as u64;
        let last = (bytes - (npkts - 1) * mtu) + ROCE_HEADER as u64;
        let wire = bytes + npkts * ROCE_HEADER as u64;
        let mut lat_first = 0;
        let mut lat_last = 0;
        let mut ack = 0;
        let mut bottleneck = u64::MAX;
        for w in path.windows(2) {
            let p = self.nodes[w[0] as usize]
                .ports
                .iter()
                .find(|p| p.peer_node == w[1])
                .expect("path follows links");
            lat_first += serialization(first, p.rate) + p.delay;
            lat_last += serialization(last, p.rate) + p.delay;
            ack += serialization(ACK_SIZE as u64, p.rate) + p.delay;
            bottleneck = bottleneck.min(p.rate);
        }
        if npkts == 1 {
            return lat_first + ack;
        }
        // The last packet leaves the source after all others at the bottleneck rate.
        let body = serialization(wire - last, bottleneck);
        body.max(lat_first - serialization(first, bottleneck)) + lat_last + ack
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
                    },
                );
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ transmission

    fn wake_at(&mut self, node: u32, port: u16, t: Time, q: &mut EventQueue<Ev>) {
        let p = &mut self.nodes[node as usize].ports[port as usize];
        if p.wake_at.is_none_or(|w| t < w) {
            p.wake_at = Some(t);
            q.schedule(t, Ev::PortWake { node, port });
        }
    }

    /// Starts the next transmission on a port if it is free.
    fn try_transmit(&mut self, now: Time, node: u32, port: u16, q: &mut EventQueue<Ev>) {
        let busy = self.nodes[node as usize].ports[port as usize].busy_until;
        if busy > now {
            self.wake_at(node, port, busy, q);
            return;
        }
        let id = match self.nodes[node as usize].role {
            Role::Host(h) => {
                let paused = self.nodes[node as usize].ports[0].paused;
                let mut eff = Effects::default();
                let host = &mut self.hosts[h as usize];
                let next =
                    host.nic
                        .next_packet(now, &paused, &self.params, &mut self.pool, &mut eff);
                self.apply(now, h, eff, q);
                match next {
                    NextTx::Packet(id) => id,
                    NextTx::WaitUntil(t) => {
                        self.wake_at(node, port, t, q);
                        return;
                    }
                    NextTx::Idle => return,
                }
            }
            Role::Switch(s) => {
                let p = &mut self.nodes[node as usize].ports[port as usize];
                let Some(id) = p.dequeue(self.sw.scheduler, &self.sw.dwrr_quantum, &self.pool)
                else {
                    return;
                };
                let pk = self.pool.get_mut(id);
                let size = pk.size as u64;
                if pk.kind != PktKind::Pfc {
                    // RED/ECN on the egress queue this packet leaves.
                    let prio = (pk.prio as usize).min(p.queues.len() - 1);
                    let qlen = p.qbytes[prio] + size;
                    if self.sw.ecn.enabled && !pk.ce {
                        let pr = red_probability(qlen, &p.ecn);
                        let sw = &mut self.switches[s as usize];
                        if pr > 0.0 && (pr >= 1.0 || sw.ecn_rng.uniform() < pr) {
                            pk.ce = true;
                            p.ecn_marks += 1;
                            self.counters.ecn_marks += 1;
                        }
                    }
                    // The packet leaves the shared buffer and its ingress queue.
                    let in_port = pk.in_port as usize;
                    let pprio = pk.prio as usize & 7;
                    let sw = &mut self.switches[s as usize];
                    if pk.in_hdrm {
                        sw.hdrm_used[in_port] -= size;
                    } else {
                        sw.shared_used -= size;
                    }
                    sw.ingress[in_port][pprio] -= size;
                    if sw.pause_sent[in_port][pprio]
                        && sw.ingress[in_port][pprio] <= sw.xon(&self.sw)
                    {
                        sw.pause_sent[in_port][pprio] = false;
                        self.counters.pfc_resumes += 1;
                        self.send_pfc(now, node, in_port as u16, pprio as u8, false, q);
                    }
                }
                id
            }
        };
        self.put_on_wire(now, node, port, id, q);
    }

    fn put_on_wire(&mut self, now: Time, node: u32, port: u16, id: PktId, q: &mut EventQueue<Ev>) {
        let pk = self.pool.get(id);
        let size = pk.size as u64;
        let is_data = pk.kind == PktKind::Data;
        let is_pfc = pk.kind == PktKind::Pfc;
        let p = &mut self.nodes[node as usize].ports[port as usize];
        p.tx_pfc += is_pfc as u64;
        let ser = p.serialization(size);
        p.busy_until = now + ser;
        p.tx_bytes += size;
        p.tx_pkts += 1;
        let (peer, peer_port, delay, up) = (p.peer_node, p.peer_port, p.delay, p.up);
        let lost = up && p.loss > 0.0 && is_data && p.loss_rng.bernoulli(p.loss);
        if !up {
            self.counters.drops_link_down += 1;
            self.drop_packet(id);
        } else if lost {
            self.counters.drops_loss += 1;
            self.drop_packet(id);
        } else {
            q.schedule(
                now + ser + delay,
                Ev::Arrive {
                    node: peer,
                    port: peer_port,
                    pkt: id,
                },
            );
        }
        // Come back when this transmission ends, if anything may follow.
        let more = match self.nodes[node as usize].role {
            Role::Host(h) => self.hosts[h as usize].nic.has_pending(),
            Role::Switch(_) => {
                let p = &self.nodes[node as usize].ports[port as usize];
                !p.ctrl.is_empty() || p.bytes > 0
            }
        };
        if more {
            self.wake_at(node, port, now + ser, q);
        }
    }

    fn drop_packet(&mut self, id: PktId) {
        // Payload bytes (tracked memory) travel in the sender NIC's side table.
        if let Some(h) = self.host_of(self.pool.get(id).src) {
            let p = &mut self.hosts[h].nic.payloads;
            if !p.is_empty() {
                p.remove(&id);
            }
        }
        self.pool.free(id);
    }

    /// The host index of an address (any of the host's), if it is a host's.
    pub fn host_of(&self, addr: u32) -> Option<usize> {
        match self.host_index.get(addr_node(addr) as usize) {
            Some(&h) if h != u32::MAX => Some(h as usize),
            _ => None,
        }
    }

    /// Queues a PFC frame on `port` of `node` (towards the upstream that feeds that port).
    fn send_pfc(
        &mut self,
        now: Time,
        node: u32,
        port: u16,
        prio: u8,
        pause: bool,
        q: &mut EventQueue<Ev>,
    ) {
        let mut pk = Packet::control(PktKind::Pfc, PFC_SIZE);
        pk.prio = prio;
        pk.aux = pause as u32;
        let id = self.pool.alloc(pk);
        if pause {
            self.counters.pfc_pauses += 1;
        }
        match self.nodes[node as usize].role {
            Role::Switch(_) => {
                self.nodes[node as usize].ports[port as usize]
                    .ctrl
                    .push_back(id);
                self.try_transmit(now, node, port, q);
            }
            Role::Host(h) => {
                let mut eff = Effects::default();
                self.hosts[h as usize].nic.push_ctrl(id, &mut eff);
                self.apply(now, h, eff, q);
            }
        }
    }

    // ------------------------------------------------------------------ arrival

    fn arrive(&mut self, now: Time, node: u32, port: u16, id: PktId, q: &mut EventQueue<Ev>) {
        let pk = self.pool.get(id);
        if pk.kind == PktKind::Pfc {
            let (prio, on) = (pk.prio as usize, pk.aux == 1);
            self.pool.free(id);
            self.nodes[node as usize].ports[port as usize].set_paused(prio, on, now);
            if !on {
                self.try_transmit(now, node, port, q);
            }
            return;
        }
        match self.nodes[node as usize].role {
            Role::Host(h) => {
                if addr_node(pk.dst) != node {
                    self.drop_packet(id);
                    return;
                }
                let nic = &mut self.hosts[h as usize].nic;
                let done = nic.rx_admit(now, pk, &self.params);
                if done > now {
                    let mut eff = Effects::default();
                    let size = pk.size as i64;
                    nic.rx_backlog_change(size, &self.params, &mut eff);
                    q.schedule(done, Ev::NicRx { host: h, pkt: id });
                    self.apply(now, h, eff, q);
                } else {
                    self.nic_receive(now, h, id, q);
                }
            }
            Role::Switch(s) => self.forward(now, s as usize, node, port, id, q),
        }
    }

    fn nic_receive(&mut self, now: Time, h: u32, id: PktId, q: &mut EventQueue<Ev>) {
        // Payload bytes (tracked memory) travel in the sender NIC's side table.
        let payload = self.host_of(self.pool.get(id).src).and_then(|s| {
            let p = &mut self.hosts[s].nic.payloads;
            if p.is_empty() {
                None
            } else {
                p.remove(&id)
            }
        });
        let mut eff = Effects::default();
        let host = &mut self.hosts[h as usize];
        if let Some(b) = payload {
            host.nic.payloads.insert(id, b);
        }
        host.nic
            .receive(now, id, &self.params, &mut self.pool, &mut eff);
        self.apply(now, h, eff, q);
    }

    fn forward(
        &mut self,
        now: Time,
        s: usize,
        node: u32,
        in_port: u16,
        id: PktId,
        q: &mut EventQueue<Ev>,
    ) {
        let pk = self.pool.get(id);
        let Some(out) = self.route(s, pk) else {
            self.counters.drops_buffer += 1;
            self.drop_packet(id);
            return;
        };
        let size = pk.size as u64;
        let prio = (pk.prio as usize).min(MAX_PRIO - 1);
        let lossless = self.lossless_mask & (1 << prio) != 0;
        let control = matches!(
            pk.kind,
            PktKind::Ack | PktKind::Nak | PktKind::RnrNak | PktKind::Cnp
        );
        let sw = &mut self.switches[s];
        let Some(pool) = sw.admit(in_port as usize, size, lossless, control) else {
            self.counters.drops_buffer += 1;
            self.drop_packet(id);
            return;
        };
        // Fast path: an idle egress with nothing queued sends the packet at once. The buffer would
        // hold it for no time, so nothing changes but the work (unless it would trip XOFF, which
        // the full path handles).
        let egress = &self.nodes[node as usize].ports[out as usize];
        let q_prio = prio.min(egress.queues.len() - 1);
        let would_pause = lossless && sw.ingress[in_port as usize][prio] + size > sw.xoff(&self.sw);
        if egress.busy_until <= now
            && egress.bytes == 0
            && egress.ctrl.is_empty()
            && !egress.paused[q_prio]
            && !would_pause
        {
            self.counters.packets_forwarded += 1;
            if self.sw.ecn.enabled && !self.pool.get(id).ce {
                let pr = red_probability(size, &egress.ecn);
                if pr > 0.0 && (pr >= 1.0 || sw.ecn_rng.uniform() < pr) {
                    self.pool.get_mut(id).ce = true;
                    self.nodes[node as usize].ports[out as usize].ecn_marks += 1;
                    self.counters.ecn_marks += 1;
                }
            }
            self.put_on_wire(now, node, out, id, q);
            return;
        }
        match pool {
            Pool::Shared => sw.shared_used += size,
            Pool::Headroom => sw.hdrm_used[in_port as usize] += size,
        }
        sw.ingress[in_port as usize][prio] += size;
        self.counters.packets_forwarded += 1;
        let pause = lossless
            && !sw.pause_sent[in_port as usize][prio]
            && sw.ingress[in_port as usize][prio] > sw.xoff(&self.sw);
        if pause {
            sw.pause_sent[in_port as usize][prio] = true;
        }
        let pk = self.pool.get_mut(id);
        pk.in_port = in_port;
        pk.in_hdrm = pool == Pool::Headroom;
        self.nodes[node as usize].ports[out as usize].enqueue(id, prio, size);
        if pause {
            self.send_pfc(now, node, in_port, prio as u8, true, q);
        }
        self.try_transmit(now, node, out, q);
    }

    // ------------------------------------------------------------------ hosts

    /// Carries out what a NIC call asked for.
    pub fn apply(&mut self, now: Time, h: u32, eff: Effects, q: &mut EventQueue<Ev>) {
        for (t, kind, qp, gen) in eff.timers {
            q.schedule(
                t.max(now),
                Ev::Timer {
                    host: h,
                    kind,
                    qp,
                    gen,
                },
            );
        }
        for m in eff.messages {
            self.measure.message(h, m);
        }
        if let Some(on) = eff.rx_pfc {
            let node = self.hosts[h as usize].node;
            let prio = self.params.nic.priority;
            if on {
                self.send_pfc(now, node, 0, prio, true, q);
            } else {
                self.send_pfc(now, node, 0, prio, false, q);
            }
        }
        for cq in eff.notify {
            // Only armed CQs notify (once per arming), so there is nothing to deduplicate.
            if let Some(t) = self.hosts[h as usize].owners.cq_owner(cq) {
                self.pending_notify.push((h, t, cq));
            }
            self.measure.note_cq(h, cq);
        }
        if eff.kick {
            let node = self.hosts[h as usize].node;
            self.try_transmit(now, node, 0, q);
        }
    }

    /// Runs a tenant's callback with its verbs stack over this host's NIC (`ev` None: start it).
    pub fn with_app(
        &mut self,
        now: Time,
        h: u32,
        app: u32,
        q: &mut EventQueue<Ev>,
        ev: Option<Event>,
    ) {
        let mut sink = crate::hostverbs::HostSink::default();
        let end;
        {
            let host = &mut self.hosts[h as usize];
            let slot = &mut host.apps[app as usize];
            let params = slot.params.as_deref().unwrap_or(&self.params);
            // The tenant's thread runs the callback once it is free.
            let start = if self.cpu_delay {
                now.max(slot.cpu.free_at)
            } else {
                now
            };
            let mut bottom = crate::hostverbs::HostVerbs {
                nic: &mut host.nic,
                params,
                caps: &host.caps,
                cost: &self.cpu_cost,
                start,
                spent: 0,
                delay: self.cpu_delay,
                tenant: app,
                owners: &mut host.owners,
                cpu: &mut slot.cpu,
                sink: &mut sink,
            };
            let mut stack = Stack::new(&mut slot.stack, &mut bottom);
            match ev {
                None => {
                    stack.start_layers();
                    slot.app.start(&mut stack);
                }
                Some(ev) => {
                    let mut up = Vec::new();
                    stack.deliver(ev, &mut up);
                    for e in up {
                        slot.app.on_event(&mut stack, e);
                    }
                }
            }
            end = bottom.start + bottom.spent;
            slot.cpu.free_at = end;
        }
        for (t, token) in sink.timers.drain(..) {
            q.schedule(
                t.max(now),
                Ev::AppTimer {
                    host: h,
                    app,
                    token,
                },
            );
        }
        for (tenant, token) in sink.wakes.drain(..) {
            if (tenant as usize) < self.hosts[h as usize].apps.len() {
                q.schedule(
                    end,
                    Ev::Wake {
                        host: h,
                        app: tenant,
                        token,
                    },
                );
            }
        }
        let eff = std::mem::take(&mut sink.effects);
        self.apply(now, h, eff, q);
    }

    fn flush_notifications(&mut self, now: Time, q: &mut EventQueue<Ev>) {
        while !self.pending_notify.is_empty() {
            let batch = std::mem::take(&mut self.pending_notify);
            for (h, app, cq) in batch {
                self.with_app(now, h, app, q, Some(Event::Completion(cq)));
            }
        }
    }

    pub fn all_apps_done(&self) -> bool {
        self.hosts
            .iter()
            .all(|h| h.apps.iter().all(|a| a.app.is_done()))
    }
}

fn resolve_node(s: &str, names: &HashMap<String, u32>) -> Option<u32> {
    names.get(s).copied().or_else(|| {
        s.parse()
            .ok()
            .filter(|&id: &u32| names.values().any(|&v| v == id))
    })
}

impl Ev {
    pub const KINDS: [&'static str; 9] = [
        "arrive",
        "port_wake",
        "nic_rx",
        "timer",
        "app_timer",
        "app_start",
        "link_state",
        "sample",
        "wake",
    ];
    fn kind(&self) -> usize {
        match self {
            Ev::Arrive { .. } => 0,
            Ev::PortWake { .. } => 1,
            Ev::NicRx { .. } => 2,
            Ev::Timer { .. } => 3,
            Ev::AppTimer { .. } => 4,
            Ev::AppStart { .. } => 5,
            Ev::LinkState { .. } => 6,
            Ev::Sample => 7,
            Ev::Wake { .. } => 8,
        }
    }
}

impl Handler<Ev> for World {
    fn handle(&mut self, now: Time, ev: Ev, q: &mut EventQueue<Ev>) {
        self.ev_counts[ev.kind()] += 1;
        match ev {
            Ev::Arrive { node, port, pkt } => self.arrive(now, node, port, pkt, q),
            Ev::PortWake { node, port } => {
                let p = &mut self.nodes[node as usize].ports[port as usize];
                if p.wake_at == Some(now) {
                    p.wake_at = None;
                }
                self.try_transmit(now, node, port, q);
            }
            Ev::NicRx { host, pkt } => {
                let size = self.pool.get(pkt).size as i64;
                let mut eff = Effects::default();
                self.hosts[host as usize]
                    .nic
                    .rx_backlog_change(-size, &self.params, &mut eff);
                self.apply(now, host, eff, q);
                self.nic_receive(now, host, pkt, q);
            }
            Ev::Timer {
                host,
                kind,
                qp,
                gen,
            } => {
                let mut eff = Effects::default();
                self.hosts[host as usize]
                    .nic
                    .on_timer(now, kind, qp, gen, &self.params, &mut eff);
                self.apply(now, host, eff, q);
            }
            Ev::AppTimer { host, app, token } => {
                self.with_app(now, host, app, q, Some(Event::Timer(token)))
            }
            Ev::Wake { host, app, token } => {
                self.with_app(now, host, app, q, Some(Event::Wake(token)))
            }
            Ev::AppStart { host, app } => self.with_app(now, host, app, q, None),
            Ev::LinkState { link, up } => {
                let (a, pa, b, pb) = self.links[link as usize];
                self.nodes[a as usize].ports[pa as usize].up = up;
                self.nodes[b as usize].ports[pb as usize].up = up;
                self.measure.link_change(now, link, up);
            }
            Ev::Sample => {
                self.sample(now);
                let iv = self.measure.interval;
                if iv > 0 && !self.measure.stopped {
                    q.schedule(now + iv, Ev::Sample);
                }
            }
        }
        if !self.pending_notify.is_empty() {
            self.flush_notifications(now, q);
        }
    }
}

impl World {
    fn sample(&mut self, now: Time) {
        let rx: Vec<(u32, u32, u64)> = self
            .hosts
            .iter()
            .enumerate()
            .flat_map(|(h, host)| {
                host.nic
                    .qps()
                    .filter(|qp| qp.rx_bytes > 0)
                    .map(move |qp| (h as u32, qp.qpn, qp.rx_bytes))
            })
            .collect();
        self.measure.sample_rx(now, &rx);
        let queues: Vec<(usize, u64)> = self
            .measure
            .queue_ports
            .iter()
            .enumerate()
            .map(|(i, &(n, p))| (i, self.nodes[n as usize].ports[p as usize].bytes))
            .collect();
        self.measure.sample_queues(now, &queues);
    }
}
