//! Building a run from a validated scenario, as a short pipeline of named steps:
//!
//! 1. [`network`]: the topology becomes a world (hosts, switches, links), with sampled queues,
//!    per-port ECN, static routes and scheduled link events, all resolved against node names;
//! 2. [`Tenants`]: every tenant — each `[[traffic]]` table's sender and sink on each host it
//!    uses, each `[[apps]]` entry's client and server — gets its application, its transport and
//!    its verbs stack built from its middleware configs (one [`HostCtx`] per host, so a host's
//!    tenants share their mechanisms' agent);
//! 3. [`Tenants::finish`]: host agents go into slot 0 of their host; starts are scheduled.
//!
//! (Step 0, `Scenario::validate`, runs when the scenario is parsed.)

use crate::api::ScenarioError;
use crate::apps::{FlowSender, FlowSink, Rendezvous, SendFlow, SharedMeter};
use crate::config::{TransportConfig, TransportOverride};
use crate::measure::{perf_record, FlowLog, FlowRecord, Measure, SharedLog};
use crate::nic::NicParams;
use crate::progress::Progress;
use crate::scenario::Scenario;
use crate::stacks::StackBuilder;
use crate::world::{AppSlot, Ev, Role, World};
use braid_engine::EventQueue;
use braid_middleware::MiddlewareEntry;
use braid_topo::topology::Graph;
use braid_verbs::App;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

pub(crate) fn err(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

/// Joins a table's key path with a path relative to it.
pub(crate) fn join(prefix: &str, rel: &str) -> String {
    if rel.is_empty() {
        prefix.to_string()
    } else if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        format!("{prefix}.{rel}")
    }
}

/// The network a scenario describes, resolved: the world, the graph it was built from (traffic
/// generators walk it) and the event queue with the link events in it.
pub(crate) struct Network {
    pub world: World,
    pub graph: Graph,
    pub queue: EventQueue<Ev>,
}

/// Step 1: topology, world, sampled queues, ECN by port, static routes, link events.
pub(crate) fn network(
    sc: &Scenario,
    base_dir: &Path,
    seed: u64,
    progress: &mut Progress<'_>,
) -> Result<Network, ScenarioError> {
    progress.tick("topology", 0, 1);
    let graph = sc
        .topology
        .build(base_dir)
        .map_err(|e| err(join("topology", &e.path), e.message))?;
    progress.tick("topology", 1, 1);
    let params = NicParams::new(sc.nic.clone(), sc.transport.clone());
    let mut measure = Measure::new(sc.measure.interval.0, sc.measure.messages);
    measure.record_pfc = sc.measure.pfc;
    let mut world =
        World::with_progress(&graph, params, sc.switch.clone(), measure, seed, progress).map_err(
            |m| match m.split_once(": ") {
                // The load balancers' refusals name their key (`switch.lb.gap: ...`).
                Some((path, msg)) if path.starts_with("switch.") => err(path, msg.to_string()),
                _ => err("topology", m),
            },
        )?;
    world.cpu_cost = sc.host.cpu.cost();
    world.cpu_delay = sc.host.cpu.delay;
    let n_hosts = world.hosts.len() as u32;
    if n_hosts == 0 {
        return Err(err("topology", "the topology has no hosts"));
    }
    for h in sc.middleware.per_host.keys() {
        if h.parse::<u32>().map_or(true, |h| h >= n_hosts) {
            return Err(err(
                format!("middleware.per_host.{h}"),
                format!("host {h} does not exist (the topology has {n_hosts} hosts)"),
            ));
        }
    }
    for h in sc.transport.per_host.keys() {
        if h.parse::<u32>().map_or(true, |h| h >= n_hosts) {
            return Err(err(
                format!("transport.per_host.{h}"),
                format!("host {h} does not exist (the topology has {n_hosts} hosts)"),
            ));
        }
    }
    let names: HashMap<String, u32> = world
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i as u32))
        .collect();
    sampled_queues(&mut world, sc, &names)?;
    world.measure.pcap = sc.measure.pcap.build(&world, &names)?.map(Box::new);
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
    Ok(Network {
        world,
        graph,
        queue,
    })
}

/// `measure.queues`: the ports whose queue lengths are sampled.
fn sampled_queues(
    world: &mut World,
    sc: &Scenario,
    names: &HashMap<String, u32>,
) -> Result<(), ScenarioError> {
    let mut seen: HashMap<(u32, u16), usize> = HashMap::new();
    for (i, spec) in sc.measure.queues.iter().enumerate() {
        let path = format!("measure.queues[{i}]");
        let before = world.measure.queue_ports.len();
        sampled_queue(world, spec, &path, names)?;
        // The same port sampled twice (by name and by id, or also through "all-fabric") would
        // give two identical series.
        for k in before..world.measure.queue_ports.len() {
            let port = world.measure.queue_ports[k];
            if let Some(&j) = seen.get(&port) {
                return Err(err(
                    &path,
                    format!(
                        "port {} is already sampled (as {:?}); list each port once",
                        world.measure.queue_names[k], world.measure.queue_names[j]
                    ),
                ));
            }
            seen.insert(port, k);
        }
    }
    Ok(())
}

fn sampled_queue(
    world: &mut World,
    spec: &crate::trace::ports::QueueSpec,
    path: &str,
    names: &HashMap<String, u32>,
) -> Result<(), ScenarioError> {
    for (node, port, name) in crate::trace::ports::resolve_ports(world, spec, path, names)? {
        world.measure.queue_ports.push((node, port));
        world.measure.queue_names.push(name);
    }
    Ok(())
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

/// Step 2: the run's tenants. Every connection runs the transport of its tenant (`[[traffic]]`
/// or `[[apps]]` entry) resolved over its initiating host's; distinct ones are numbered, 0 =
/// `[transport]` itself; a tenant's applications carry theirs to the NIC, which builds its QPs
/// with it (apps see verbs only).
pub(crate) struct Tenants<'s> {
    sc: &'s Scenario,
    seed: u64,
    pub log: SharedLog,
    /// The applications see the log only as the seam-level meter they report to.
    meter: SharedMeter,
    rdv: Rendezvous,
    transports: Transports,
    stacks: StackBuilder,
    /// (host, tenant) in the order they were added: the order they start in.
    starts: Vec<(u32, u32)>,
    /// Connection ids (rendezvous keys) handed out so far.
    conn: u32,
    /// Applications so far (each gets its own 2^40-byte address range).
    app_no: u64,
}

/// What a tenant's slot is made of.
struct TenantSpec<'a> {
    host: u32,
    app: Box<dyn App>,
    /// Its own middleware entries and their key path (else its host's, else the default).
    own: Option<(&'a Vec<MiddlewareEntry>, String)>,
    label: String,
    flow: Option<u32>,
    transport: usize,
}

/// A tenant's slot but its application.
struct TenantRest<'a> {
    host: u32,
    own: Option<(&'a Vec<MiddlewareEntry>, String)>,
    label: String,
    flow: Option<u32>,
    transport: usize,
}

impl<'s> Tenants<'s> {
    pub fn new(sc: &'s Scenario, seed: u64) -> Self {
        let log: SharedLog = Rc::new(RefCell::new(FlowLog::default()));
        let rdv = braid_verbs::rendezvous::board();
        Tenants {
            sc,
            seed,
            meter: log.clone(),
            log,
            rdv: rdv.clone(),
            transports: Transports::new(sc),
            stacks: StackBuilder::new(rdv),
            starts: Vec::new(),
            conn: 0,
            app_no: 0,
        }
    }

    fn next_base(&mut self) -> u64 {
        self.app_no += 1;
        self.app_no << 40
    }

    /// Adds one tenant to its host, with its stack.
    fn add(&mut self, world: &mut World, t: TenantSpec<'_>) -> Result<(), ScenarioError> {
        let TenantSpec {
            host,
            app,
            own,
            label,
            flow,
            transport,
        } = t;
        let rest = TenantRest {
            host,
            own,
            label,
            flow,
            transport,
        };
        self.add_with(world, rest, |_| (app, None))
    }

    /// Adds one tenant whose application is made once its stack is known (`make` is told
    /// whether it is plain RDMA: no layers but `raw`), with the QP reservation it asks for.
    fn add_with(
        &mut self,
        world: &mut World,
        t: TenantRest<'_>,
        make: impl FnOnce(bool) -> (Box<dyn App>, Option<Rc<braid_apps::QpPlan>>),
    ) -> Result<(), ScenarioError> {
        let h = t.host;
        let idx = world.hosts[h as usize].apps.len() as u32;
        let (entries, path) = match t.own {
            Some((m, p)) => (m, p),
            None => self.sc.middleware.stack_for(h),
        };
        let stack = self.stacks.build(world, h, idx, entries, &path)?;
        let (app, plan) = make(stack.iter().all(|m| m.name() == "raw"));
        let mut slot = AppSlot::new(app, stack, t.label);
        slot.plan = plan;
        slot.params = self.transports.params(t.transport);
        slot.flow = t.flow;
        world.hosts[h as usize].apps.push(slot);
        self.starts.push((h, idx));
        Ok(())
    }

    /// `[[traffic]]`: one flow per transfer; per table, a sender tenant on each source host and a
    /// sink tenant on each destination host (per transport, when hosts' transports differ).
    pub fn traffic(
        &mut self,
        world: &mut World,
        graph: &Graph,
        base_dir: &Path,
        progress: &mut Progress<'_>,
    ) -> Result<(), ScenarioError> {
        let sc = self.sc;
        let n_hosts = world.hosts.len() as u32;
        let n_tables = sc.traffic.len() as u64;
        let mut senders: BTreeMap<(u32, usize, usize), Vec<SendFlow>> = BTreeMap::new();
        // Per (destination host, traffic table, transport): (flow id, connection id, size).
        type Sinks = BTreeMap<(u32, usize, usize), Vec<(u32, u32, u64)>>;
        let mut sinks: Sinks = BTreeMap::new();
        for (i, t) in sc.traffic.iter().enumerate() {
            progress.tick("traffic", i as u64, n_tables);
            // Taken one at a time as the pattern yields them (Poisson draws them lazily): no
            // list of the table's flows is held besides what the tenants keep of each.
            let flows = t
                .spec
                .flows_on(graph, self.seed, i as u64, base_dir)
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
                let id = self.log.borrow_mut().add(FlowRecord {
                    id: 0,
                    kind: "flow",
                    src: f.src,
                    dst: f.dst,
                    size: f.size,
                    start_ps: f.start_ps,
                    finish_ps: None,
                    src_qp: None,
                    dport: f.dport,
                    dst_addr: None,
                    bytes_done: 0,
                    latencies: vec![],
                    msg_bytes: 0,
                    attack: None,
                });
                let tr = match by_src.get(&f.src) {
                    Some(&x) => x,
                    None => {
                        let x = self.transports.index(
                            sc,
                            Some(f.src),
                            t.transport.as_ref(),
                            &format!("traffic[{i}].transport"),
                        )?;
                        by_src.insert(f.src, x);
                        x
                    }
                };
                let conn = self.conn;
                self.conn += 1;
                senders
                    .entry((f.src, i, tr))
                    .or_default()
                    .push(SendFlow::new(id, conn, f.size, f.start_ps, f.priority));
                sinks
                    .entry((f.dst, i, tr))
                    .or_default()
                    .push((id, conn, f.size));
            }
        }
        progress.tick("traffic", n_tables, n_tables);
        let n_tenants = (sinks.len() + senders.len()) as u64;
        let mut made = 0u64;
        let own = |table: usize| {
            sc.traffic[table]
                .middleware
                .as_ref()
                .map(|m| (m, format!("traffic[{table}].middleware")))
        };
        for ((h, table, tr), flows) in sinks {
            progress.tick("tenants", made, n_tenants);
            made += 1;
            let base = self.next_base();
            let app = FlowSink::new(self.meter.clone(), self.rdv.clone(), flows, base);
            self.add(
                world,
                TenantSpec {
                    host: h,
                    app: Box::new(app),
                    own: own(table),
                    label: format!("traffic[{table}].sink"),
                    flow: None,
                    transport: tr,
                },
            )?;
        }
        for ((h, table, tr), flows) in senders {
            progress.tick("tenants", made, n_tenants);
            made += 1;
            let base = self.next_base();
            let app = FlowSender::new(
                self.meter.clone(),
                self.rdv.clone(),
                flows,
                base,
                sc.nic.data_check,
            );
            let n = app.flows() as u32;
            let cpu_delay = world.cpu_delay;
            let cc_sampled = sc.measure.cc.enabled();
            self.add_with(
                world,
                TenantRest {
                    host: h,
                    own: own(table),
                    label: format!("traffic[{table}].sender"),
                    flow: None,
                    transport: tr,
                },
                // Each flow's QP is created when the flow starts (`lazy_flows.rs`).
                |raw| {
                    if crate::lazy_flows::lazy_sender(raw, cpu_delay, cc_sampled) {
                        let plan = braid_apps::QpPlan::new(n);
                        (Box::new(app.lazy(plan.clone())), Some(plan))
                    } else {
                        (Box::new(app), None)
                    }
                },
            )?;
        }
        progress.tick("tenants", n_tenants, n_tenants);
        Ok(())
    }

    /// `[[apps]]`: a server tenant on `dst` and a client tenant on `src`, sharing one flow record.
    pub fn apps(&mut self, world: &mut World) -> Result<(), ScenarioError> {
        let sc = self.sc;
        let n_hosts = world.hosts.len() as u32;
        // Each enabled app's connections on the board (what an attacker naming it looks up).
        let mut conns = Vec::with_capacity(sc.apps.len());
        let mut c = self.conn;
        for a in &sc.apps {
            let qps = a.spec.common().qps;
            conns.push(
                a.enabled
                    .then_some(braid_apps::attack::Victim { conn0: c, qps }),
            );
            c += if a.enabled { qps } else { 0 };
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
            let flow = self.log.borrow_mut().add(perf_record(a, a.src, a.dst));
            let c0 = self.conn;
            self.conn += a.spec.common().qps;
            let tr = self.transports.index(
                sc,
                Some(a.src),
                a.transport.as_ref(),
                &format!("apps[{i}].transport"),
            )?;
            let own = || {
                a.middleware
                    .as_ref()
                    .map(|m| (m, format!("apps[{i}].middleware")))
            };
            let (server_base, client_base) = (self.next_base(), self.next_base());
            let (server, client) = crate::app_build::build(
                a,
                crate::app_build::Ends {
                    index: i,
                    seed: self.seed,
                    flow,
                    conn0: c0,
                    meter: self.meter.clone(),
                    rdv: self.rdv.clone(),
                    server_base,
                    client_base,
                    victim: a
                        .spec
                        .config()
                        .victim()
                        .and_then(|v| conns.get(v as usize).copied().flatten()),
                },
            )?;
            self.add(
                world,
                TenantSpec {
                    host: a.dst,
                    app: server,
                    own: own(),
                    label: format!("apps[{i}].server"),
                    flow: Some(flow),
                    transport: tr,
                },
            )?;
            self.add(
                world,
                TenantSpec {
                    host: a.src,
                    app: client,
                    own: own(),
                    label: format!("apps[{i}].client"),
                    flow: Some(flow),
                    transport: tr,
                },
            )?;
        }
        Ok(())
    }

    /// Step 3: the host agents start first, then the tenants in the order they were added.
    pub fn finish(self, world: &mut World, queue: &mut EventQueue<Ev>) -> SharedLog {
        self.stacks.finish(world, queue);
        for (h, idx) in self.starts {
            queue.schedule(0, Ev::AppStart { host: h, app: idx });
        }
        self.log
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
        for port in world
            .node_ports_mut(node)
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
