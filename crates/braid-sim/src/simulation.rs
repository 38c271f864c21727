//! A run: scenario in, results out.

use crate::api::{Column, Results, ScenarioError, Table};
use crate::apps::{
    perf_record, FlowSender, FlowSink, PerfClient, PerfServer, Rendezvous, SendFlow,
};
use crate::config::{TransportConfig, TransportOverride};
use crate::measure::{FlowLog, FlowRecord, Measure, SharedLog};
use crate::nic::NicParams;
use crate::scenario::Scenario;
use crate::world::{AppSlot, Ev, Role, World};
use braid_engine::{EventQueue, Handler, Time};
use braid_middleware::MiddlewareEntry;
use braid_verbs::{HostCtx, Middleware};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

pub struct Simulation {
    world: World,
    queue: EventQueue<Ev>,
    log: SharedLog,
    end: Time,
    now: Time,
    finished: bool,
    seed: u64,
    wall: std::time::Duration,
    /// Whether the run ends by itself when its traffic is done (false: runs to `duration`).
    ends_when_done: bool,
    /// `measure.transport_from`, and the transports' totals when the run passed it.
    transport_from: Time,
    transport_base: Option<crate::transport_report::TransportTotals>,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

/// Joins a table's key path with a path relative to it.
fn join(prefix: &str, rel: &str) -> String {
    if rel.is_empty() {
        prefix.to_string()
    } else if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        format!("{prefix}.{rel}")
    }
}

/// Builds tenants' verbs stacks from their middleware entries, host by host: each mechanism's
/// config is its factory, and one [`HostCtx`] per host lets the tenants of a host share their
/// mechanisms' host agent. [`StackBuilder::finish`] installs the agents in slot 0.
struct StackBuilder {
    hosts: BTreeMap<u32, HostCtx>,
    /// The run's rendezvous board, which host agents share with the applications.
    board: Rendezvous,
}

impl StackBuilder {
    fn new(board: Rendezvous) -> Self {
        StackBuilder {
            hosts: BTreeMap::new(),
            board,
        }
    }

    /// The stack of tenant `tenant` on host `h`; `path` names the entries in errors.
    fn build(
        &mut self,
        world: &World,
        h: u32,
        tenant: u32,
        entries: &[MiddlewareEntry],
        path: &str,
    ) -> Result<Vec<Box<dyn Middleware>>, ScenarioError> {
        let board = &self.board;
        let ctx = self.hosts.entry(h).or_insert_with(|| {
            HostCtx::new(h, world.hosts[h as usize].caps.clone()).with_board(board.clone())
        });
        entries
            .iter()
            .enumerate()
            .map(|(j, e)| {
                e.0.factory().build(ctx, tenant).map_err(|b| {
                    err(
                        join(&format!("{path}[{j}]"), &b.key),
                        format!("{} (on host {h})", b.message),
                    )
                })
            })
            .collect()
    }

    /// Puts each host's agent layers into its agent slot and starts it first.
    fn finish(self, world: &mut World, queue: &mut EventQueue<Ev>) {
        for (h, mut ctx) in self.hosts {
            let agents = ctx.take_agents();
            if !agents.is_empty() {
                world.hosts[h as usize].apps[0].stack = agents;
                queue.schedule(0, Ev::AppStart { host: h, app: 0 });
            }
        }
    }
}

/// The distinct transports of a run's tenants; index 0 is `[transport]` itself.
struct Transports {
    list: Vec<TransportConfig>,
    /// NIC parameters with each transport (None for index 0: the world's own).
    params: Vec<Option<Rc<NicParams>>>,
    nic: crate::config::NicConfig,
}

impl Transports {
    fn new(sc: &Scenario) -> Self {
        Transports {
            list: vec![sc.transport.overridden(None).expect("no override")],
            params: vec![None],
            nic: sc.nic.clone(),
        }
    }

    /// The number of the transport a connection initiated by `src` runs for a tenant with
    /// override `own` (named `path` in errors).
    fn index(
        &mut self,
        sc: &Scenario,
        src: Option<u32>,
        own: Option<&TransportOverride>,
        path: &str,
    ) -> Result<usize, ScenarioError> {
        let t = sc.transport_for(src, own, path)?;
        if let Some(i) = self.list.iter().position(|x| *x == t) {
            return Ok(i);
        }
        self.params
            .push(Some(Rc::new(NicParams::new(self.nic.clone(), t.clone()))));
        self.list.push(t);
        Ok(self.list.len() - 1)
    }

    fn params(&self, i: usize) -> Option<Rc<NicParams>> {
        self.params[i].clone()
    }
}

impl Simulation {
    /// Builds a run from a scenario given as JSON (the front end parses TOML and applies
    /// overrides). Relative file paths in the scenario resolve against `base_dir`.
    pub fn from_json(
        json: &str,
        base_dir: &Path,
        seed: Option<u64>,
    ) -> Result<Self, ScenarioError> {
        let sc = Scenario::from_json(json)?;
        Self::build(sc, base_dir, seed)
    }

    pub fn build(sc: Scenario, base_dir: &Path, seed: Option<u64>) -> Result<Self, ScenarioError> {
        let seed = seed.unwrap_or(sc.seed);
        let graph = sc
            .topology
            .build(base_dir)
            .map_err(|e| err(join("topology", &e.path), e.message))?;
        let params = NicParams::new(sc.nic.clone(), sc.transport.clone());
        let measure = Measure::new(sc.measure.interval.0, sc.measure.messages);
        let mut world = World::new(&graph, params, sc.switch.clone(), measure, seed)
            .map_err(|m| err("topology", m))?;
        world.cpu_cost = sc.host.cpu.cost();
        world.cpu_delay = sc.host.cpu.delay;
        let n_hosts = world.hosts.len() as u32;
        if n_hosts == 0 {
            return Err(err("topology", "the topology has no hosts"));
        }
        let names: HashMap<String, u32> = world
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i as u32))
            .collect();

        // Sampled queues.
        for (i, spec) in sc.measure.queues.iter().enumerate() {
            let path = format!("measure.queues[{i}]");
            if spec == "all-fabric" {
                for (ni, node) in world.nodes.iter().enumerate() {
                    if let Role::Switch(_) = node.role {
                        for (pi, p) in node.ports.iter().enumerate() {
                            if matches!(world.nodes[p.peer_node as usize].role, Role::Switch(_)) {
                                world.measure.queue_ports.push((ni as u32, pi as u16));
                                world
                                    .measure
                                    .queue_names
                                    .push(format!("{}:{}", node.name, pi));
                            }
                        }
                    }
                }
                continue;
            }
            let (node, port) = spec.rsplit_once(':').ok_or_else(|| {
                err(
                    &path,
                    "expected \"node:port\" (e.g. \"tor0:5\") or \"all-fabric\"",
                )
            })?;
            let ni = names.get(node).copied().or_else(|| {
                node.parse::<u32>()
                    .ok()
                    .filter(|&x| (x as usize) < world.nodes.len())
            });
            let ni = ni.ok_or_else(|| err(&path, format!("no node named {node:?}")))?;
            let pi: u16 = port
                .parse()
                .map_err(|_| err(&path, "the port must be a number"))?;
            if pi as usize >= world.nodes[ni as usize].ports.len() {
                return Err(err(
                    &path,
                    format!("{node} has {} ports", world.nodes[ni as usize].ports.len()),
                ));
            }
            world.measure.queue_ports.push((ni, pi));
            world.measure.queue_names.push(spec.clone());
        }

        apply_ecn_by_port(&mut world, &sc.switch.ecn.by_port, &names)?;
        world
            .install_routes(&sc.routes, &names)
            .map_err(|(p, m)| err(p, m))?;
        let mut queue = EventQueue::new();
        world
            .schedule_link_events(&sc.link_events, &mut queue, &names)
            .map_err(|m| {
                let (p, msg) = m.split_once(": ").unwrap_or(("link_events", &m));
                err(p, msg.to_string())
            })?;

        for h in sc.transport.per_host.keys() {
            if h.parse::<u32>().map_or(true, |h| h >= n_hosts) {
                return Err(err(
                    format!("transport.per_host.{h}"),
                    format!("host {h} does not exist (the topology has {n_hosts} hosts)"),
                ));
            }
        }
        // Transports: every connection runs the transport of its tenant (`[[traffic]]` or
        // `[[apps]]` entry) resolved over its initiating host's. Distinct ones are numbered, 0 =
        // `[transport]` itself; a tenant's applications carry theirs to the NIC, which builds its
        // QPs with it (apps see verbs only).
        let mut transports = Transports::new(&sc);

        // Traffic: one flow per transfer, grouped into a sender per source and a sink per
        // destination host (and per transport, when tenants differ).
        let log: SharedLog = Rc::new(RefCell::new(FlowLog::default()));
        let rdv: Rendezvous = braid_verbs::rendezvous::board();
        let mut senders: BTreeMap<(u32, usize, usize), Vec<SendFlow>> = BTreeMap::new();
        // Per (destination host, traffic table, transport): (flow id, connection id, size) of
        // each flow. Every table is a tenant of its own on each host.
        type Sinks = BTreeMap<(u32, usize, usize), Vec<(u32, u32, u64)>>;
        let mut sinks: Sinks = BTreeMap::new();
        let mut conn = 0u32;
        for (i, t) in sc.traffic.iter().enumerate() {
            let flows = t
                .spec
                .generate_on(&graph, seed, i as u64, base_dir)
                .map_err(|e| err(join(&format!("traffic[{i}]"), &e.path), e.message))?;
            // Transport by source host, resolved once per (table, host).
            let mut by_src: HashMap<u32, usize> = HashMap::new();
            for f in flows {
                if f.src >= n_hosts || f.dst >= n_hosts {
                    return Err(err(
                        format!("traffic[{i}]"),
                        format!(
                            "flow {} -> {} names a host beyond the topology's {n_hosts}",
                            f.src, f.dst
                        ),
                    ));
                }
                if f.priority >= sc.switch.priorities {
                    return Err(err(
                        format!("traffic[{i}].priority"),
                        format!(
                            "priority {} does not exist (switch.priorities = {})",
                            f.priority, sc.switch.priorities
                        ),
                    ));
                }
                if f.src == f.dst {
                    return Err(err(
                        format!("traffic[{i}]"),
                        format!("flow from host {} to itself", f.src),
                    ));
                }
                let id = log.borrow_mut().add(FlowRecord {
                    id: 0,
                    kind: "flow",
                    src: f.src,
                    dst: f.dst,
                    size: f.size,
                    start_ps: f.start_ps,
                    finish_ps: None,
                    src_qp: None,
                    dst_addr: None,
                    bytes_done: 0,
                    latencies: vec![],
                    msg_bytes: 0,
                });
                let tr = match by_src.get(&f.src) {
                    Some(&x) => x,
                    None => {
                        let x = transports.index(
                            &sc,
                            Some(f.src),
                            t.transport.as_ref(),
                            &format!("traffic[{i}].transport"),
                        )?;
                        by_src.insert(f.src, x);
                        x
                    }
                };
                senders
                    .entry((f.src, i, tr))
                    .or_default()
                    .push(SendFlow::new(id, conn, f.size, f.start_ps, f.priority));
                sinks
                    .entry((f.dst, i, tr))
                    .or_default()
                    .push((id, conn, f.size));
                conn += 1;
            }
        }
        let data_check = sc.nic.data_check;
        let mut app_no = 0u64;
        let mut next_base = || {
            app_no += 1;
            app_no << 40
        };
        // Each tenant (an `[[apps]]` side, a `[[traffic]]` table's sender or sink on a host) gets
        // its own stack: its own `middleware` list, else its host's, else the default.
        let mut stacks = StackBuilder::new(rdv.clone());
        let mut starts: Vec<(u32, u32)> = Vec::new();
        let mut add_app = |world: &mut World,
                           h: u32,
                           app: Box<dyn braid_verbs::App>,
                           own: Option<(&Vec<MiddlewareEntry>, String)>,
                           label: String,
                           flow: Option<u32>,
                           params: Option<Rc<NicParams>>|
         -> Result<(), ScenarioError> {
            let idx = world.hosts[h as usize].apps.len() as u32;
            let key = h.to_string();
            let (entries, path) = match (own, sc.middleware.per_host.get(&key)) {
                (Some((m, p)), _) => (m, p),
                (None, Some(m)) => (m, format!("middleware.per_host.{key}")),
                (None, None) => (&sc.middleware.default, "middleware.default".to_string()),
            };
            let stack = stacks.build(world, h, idx, entries, &path)?;
            let mut slot = AppSlot::new(app, stack, label);
            slot.params = params;
            slot.flow = flow;
            world.hosts[h as usize].apps.push(slot);
            starts.push((h, idx));
            Ok(())
        };
        for ((h, table, tr), flows) in sinks {
            let own = sc.traffic[table]
                .middleware
                .as_ref()
                .map(|m| (m, format!("traffic[{table}].middleware")));
            add_app(
                &mut world,
                h,
                Box::new(FlowSink::new(log.clone(), rdv.clone(), flows, next_base())),
                own,
                format!("traffic[{table}].sink"),
                None,
                transports.params(tr),
            )?;
        }
        for ((h, table, tr), flows) in senders {
            let own = sc.traffic[table]
                .middleware
                .as_ref()
                .map(|m| (m, format!("traffic[{table}].middleware")));
            add_app(
                &mut world,
                h,
                Box::new(FlowSender::new(
                    log.clone(),
                    rdv.clone(),
                    flows,
                    next_base(),
                    data_check,
                )),
                own,
                format!("traffic[{table}].sender"),
                None,
                transports.params(tr),
            )?;
        }
        for (i, a) in sc.apps.iter().enumerate() {
            if !a.enabled {
                continue;
            }
            for (k, v) in [("src", a.src), ("dst", a.dst)] {
                if v >= n_hosts {
                    return Err(err(
                        format!("apps[{i}].{k}"),
                        format!("host {v} does not exist (the topology has {n_hosts} hosts)"),
                    ));
                }
            }
            let flow = log.borrow_mut().add(perf_record(a, a.src, a.dst));
            let c0 = conn;
            conn += a.qps;
            let tr = transports.index(
                &sc,
                Some(a.src),
                a.transport.as_ref(),
                &format!("apps[{i}].transport"),
            )?;
            add_app(
                &mut world,
                a.dst,
                Box::new(PerfServer::new(
                    a.clone(),
                    flow,
                    c0,
                    log.clone(),
                    rdv.clone(),
                    next_base(),
                )),
                a.middleware
                    .as_ref()
                    .map(|m| (m, format!("apps[{i}].middleware"))),
                format!("apps[{i}].server"),
                Some(flow),
                transports.params(tr),
            )?;
            add_app(
                &mut world,
                a.src,
                Box::new(PerfClient::new(
                    a.clone(),
                    flow,
                    c0,
                    log.clone(),
                    rdv.clone(),
                    next_base(),
                    seed,
                    i as u64,
                )),
                a.middleware
                    .as_ref()
                    .map(|m| (m, format!("apps[{i}].middleware"))),
                format!("apps[{i}].client"),
                Some(flow),
                transports.params(tr),
            )?;
        }
        // The host agents start first, then the tenants in the order they were added.
        stacks.finish(&mut world, &mut queue);
        for (h, idx) in starts {
            queue.schedule(0, Ev::AppStart { host: h, app: idx });
        }
        if world.measure.interval > 0 {
            queue.schedule(world.measure.interval, Ev::Sample);
        }
        let ends_when_done = log.borrow().unfinished > 0;
        Ok(Simulation {
            world,
            queue,
            log,
            end: sc.duration.0,
            now: 0,
            finished: false,
            seed,
            wall: Default::default(),
            ends_when_done,
            transport_from: sc.measure.transport_from.0,
            transport_base: None,
        })
    }

    /// Adds an application of the caller's (any [`braid_verbs::App`]) to a host, with the host's
    /// configured verbs stack. It starts at time 0, so call this before advancing.
    pub fn add_app(
        &mut self,
        host: u32,
        app: Box<dyn braid_verbs::App>,
        stack: Vec<Box<dyn Middleware>>,
    ) -> Result<(), String> {
        if self.now > 0 {
            return Err("applications must be added before the run starts".into());
        }
        let h = self
            .world
            .hosts
            .get_mut(host as usize)
            .ok_or_else(|| format!("no host {host}"))?;
        let idx = h.apps.len() as u32;
        h.apps.push(AppSlot::new(app, stack, format!("added[{idx}]")));
        self.queue.schedule(0, Ev::AppStart { host, app: idx });
        Ok(())
    }

    /// Puts `layers` in a host's agent slot (tenant 0): host-scoped middleware written by hand, for
    /// library users and tests. Call it before advancing.
    pub fn set_agent(&mut self, host: u32, layers: Vec<Box<dyn Middleware>>) -> Result<(), String> {
        if self.now > 0 {
            return Err("agents must be set before the run starts".into());
        }
        let h = self
            .world
            .hosts
            .get_mut(host as usize)
            .ok_or_else(|| format!("no host {host}"))?;
        h.apps[0].stack = layers;
        self.queue.schedule(0, Ev::AppStart { host, app: 0 });
        Ok(())
    }

    /// Builds the transport of every QP created from now on (on one host, or all), instead of
    /// the scenario's `transport.kind`. For library users and tests of new transports; call it
    /// before advancing (applications create their QPs when they start, at time 0).
    pub fn set_transport_factory(
        &mut self,
        host: Option<u32>,
        f: crate::transport::TransportFactory,
    ) {
        for (i, h) in self.world.hosts.iter_mut().enumerate() {
            if host.is_none_or(|x| x as usize == i) {
                h.nic.transport_factory = Some(f.clone());
            }
        }
    }

    /// Names of the middleware in each tenant's stack, top to bottom, per host (the agent
    /// slot, tenant 0, is left out: see [`Simulation::agents`]).
    pub fn stacks(&self) -> Vec<Vec<Vec<&'static str>>> {
        self.world
            .hosts
            .iter()
            .map(|h| {
                h.apps
                    .iter()
                    .skip(1)
                    .map(|a| a.stack.iter().map(|m| m.name()).collect())
                    .collect()
            })
            .collect()
    }

    /// Names of the layers in each host's agent slot (host-scoped mechanisms), per host.
    pub fn agents(&self) -> Vec<Vec<&'static str>> {
        self.world
            .hosts
            .iter()
            .map(|h| h.apps[0].stack.iter().map(|m| m.name()).collect())
            .collect()
    }

    /// Node id (the verbs address) of a host.
    pub fn host_address(&self, host: u32) -> u32 {
        self.world.hosts[host as usize].node
    }

    pub fn now_ps(&self) -> u64 {
        self.now
    }
    pub fn end_ps(&self) -> u64 {
        self.end
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Advances to `until_ps` (or the end); returns true once the run is finished.
    pub fn advance(&mut self, until_ps: u64) -> bool {
        // Stop at `measure.transport_from` once to take the transports' baseline there, whatever
        // steps the caller advances by (events at that very time belong to the baseline).
        let from = self.transport_from;
        if from > 0 && self.transport_base.is_none() && until_ps >= from && !self.finished {
            self.advance_events(from);
            self.transport_base = Some(crate::transport_report::TransportTotals::of(&self.world));
        }
        self.advance_events(until_ps)
    }

    fn advance_events(&mut self, until_ps: u64) -> bool {
        if self.finished {
            return true;
        }
        let t0 = std::time::Instant::now();
        let until = until_ps.min(self.end);
        loop {
            match self.queue.peek_time() {
                Some(t) if t <= until => {
                    let (t, ev) = self.queue.pop().expect("peeked");
                    self.now = t;
                    self.world.handle(t, ev, &mut self.queue);
                    if self.ends_when_done && self.log.borrow().unfinished == 0 {
                        self.finished = true;
                        break;
                    }
                }
                Some(_) => {
                    self.now = until;
                    break;
                }
                None => {
                    self.now = until;
                    if !self.ends_when_done || until >= self.end {
                        self.finished = until >= self.end;
                    }
                    break;
                }
            }
        }
        if self.now >= self.end {
            self.finished = true;
        }
        self.wall += t0.elapsed();
        self.finished
    }

    /// Runs to the end.
    pub fn run(&mut self) {
        while !self.advance(u64::MAX) {}
    }

    pub fn events(&self) -> u64 {
        self.queue.events_popped()
    }

    pub fn world(&self) -> &World {
        &self.world
    }

    pub fn flows(&self) -> Vec<FlowRecord> {
        self.log.borrow().flows.clone()
    }

    /// Conservation and placement: every completed flow's receiving QP accepted exactly its size
    /// (duplicates are never counted), and with `nic.data_check` its bytes sit at the right address
    /// of the receiver's memory. Returns the number of bytes verified.
    pub fn verify_delivery(&self) -> Result<u64, String> {
        let log = self.log.borrow();
        let mut rx: HashMap<u32, u64> = HashMap::new();
        for (&(node, qpn), &flow) in &log.rx_qp_flow {
            let h = self.world.host_index[node as usize] as usize;
            let bytes = self.world.hosts[h].nic.qp(qpn).map_or(0, |q| q.rx_bytes);
            *rx.entry(flow).or_default() += bytes;
        }
        let mut checked = 0;
        for f in log
            .flows
            .iter()
            .filter(|f| f.kind == "flow" && f.finish_ps.is_some())
        {
            let got = rx.get(&f.id).copied().unwrap_or(0);
            if got != f.size {
                return Err(format!(
                    "flow {} ({} -> {}): {} bytes posted, {} accepted by the receiver",
                    f.id, f.src, f.dst, f.size, got
                ));
            }
            if self.world.params.nic.data_check {
                let (node, addr) = f
                    .dst_addr
                    .ok_or_else(|| format!("flow {}: no destination address", f.id))?;
                let h = self.world.host_index[node as usize] as usize;
                let mem = self.world.hosts[h]
                    .nic
                    .mem
                    .read(addr, f.size)
                    .map_err(|e| e.to_string())?;
                let want = crate::apps::pattern(f.id, f.size as usize);
                if let Some(i) = mem.iter().zip(&want).position(|(a, b)| a != b) {
                    return Err(format!(
                        "flow {}: byte {} at address {:#x} is {}, expected {}",
                        f.id,
                        i,
                        addr + i as u64,
                        mem[i],
                        want[i]
                    ));
                }
            }
            checked += f.size;
        }
        Ok(checked)
    }

    pub fn results(&self) -> Results {
        crate::results::assemble(
            &self.world,
            &self.log.borrow(),
            self.now,
            self.queue.events_popped(),
            self.wall,
            self.finished,
            self.transport_base.as_ref(),
        )
    }
}

/// `switch.ecn.by_port`: gives the egress ports of `node` towards `peer` their own RED curve.
/// Both must be nodes of the topology, `node` a switch (only switches mark) and `peer` its
/// neighbour.
fn apply_ecn_by_port(
    world: &mut World,
    by_port: &[crate::config::EcnByPort],
    names: &HashMap<String, u32>,
) -> Result<(), ScenarioError> {
    let n_nodes = world.nodes.len();
    let resolve = |path: String, name: &str| -> Result<u32, ScenarioError> {
        names
            .get(name)
            .copied()
            .or_else(|| name.parse::<u32>().ok().filter(|&x| (x as usize) < n_nodes))
            .ok_or_else(|| err(path, format!("no node named {name:?}")))
    };
    for (i, c) in by_port.iter().enumerate() {
        let p = format!("switch.ecn.by_port[{i}]");
        let node = resolve(format!("{p}.node"), &c.node)?;
        let peer = resolve(format!("{p}.peer"), &c.peer)?;
        if !matches!(world.nodes[node as usize].role, Role::Switch(_)) {
            return Err(err(
                format!("{p}.node"),
                format!("{} is a host; ECN is marked at switch egress ports", c.node),
            ));
        }
        let curve = crate::config::EcnCurve {
            kmin: c.kmin,
            kmax: c.kmax,
            pmax: c.pmax,
        };
        let mut found = false;
        for port in world.nodes[node as usize]
            .ports
            .iter_mut()
            .filter(|pt| pt.peer_node == peer)
        {
            port.ecn = curve;
            found = true;
        }
        if !found {
            return Err(err(
                format!("{p}.peer"),
                format!("{} has no link to {}", c.node, c.peer),
            ));
        }
    }
    Ok(())
}

/// The scenario schema as JSON Schema text.
pub fn scenario_json_schema() -> String {
    crate::scenario::json_schema()
}

impl Column {
    pub fn u64s(&self) -> &[u64] {
        match self {
            Column::U64(v) => v,
            _ => panic!("not a u64 column"),
        }
    }
    pub fn f64s(&self) -> &[f64] {
        match self {
            Column::F64(v) => v,
            _ => panic!("not an f64 column"),
        }
    }
}

impl Table {
    pub fn f64(&self, name: &str) -> &[f64] {
        self.get(name)
            .unwrap_or_else(|| panic!("no column {name}"))
            .f64s()
    }
    pub fn u64(&self, name: &str) -> &[u64] {
        self.get(name)
            .unwrap_or_else(|| panic!("no column {name}"))
            .u64s()
    }
}
