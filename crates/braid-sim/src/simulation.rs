//! A run: scenario in, results out.

use crate::api::{Column, Results, ScenarioError, Table};
use crate::measure::{FlowRecord, SharedLog};
use crate::scenario::Scenario;
use crate::world::{AppSlot, Ev, World};
use braid_engine::{EventQueue, Handler, Time};
use braid_verbs::Middleware;
use std::collections::HashMap;
use std::path::Path;

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
    /// Warnings about the scenario (printed to stderr when the run is built).
    warnings: Vec<String>,
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
        Self::build(sc, base_dir, seed).map_err(|e| crate::scenario::wording::in_document(json, e))
    }

    /// [`Simulation::from_json`], reporting the build's progress to `progress` (stage, done,
    /// total; see [`crate::progress`]).
    pub fn from_json_with_progress(
        json: &str,
        base_dir: &Path,
        seed: Option<u64>,
        progress: crate::progress::ProgressFn<'_>,
    ) -> Result<Self, ScenarioError> {
        let sc = Scenario::from_json(json)?;
        Self::build_with_progress(
            sc,
            base_dir,
            seed,
            &mut crate::progress::Progress::new(progress),
        )
        .map_err(|e| crate::scenario::wording::in_document(json, e))
    }

    /// Builds a run: the network (step 1), its tenants with their stacks (step 2), the host
    /// agents and the starts (step 3); see `build.rs`.
    pub fn build(sc: Scenario, base_dir: &Path, seed: Option<u64>) -> Result<Self, ScenarioError> {
        Self::build_with_progress(sc, base_dir, seed, &mut crate::progress::Progress::none())
    }

    /// [`Simulation::build`], reporting progress.
    pub fn build_with_progress(
        sc: Scenario,
        base_dir: &Path,
        seed: Option<u64>,
        progress: &mut crate::progress::Progress<'_>,
    ) -> Result<Self, ScenarioError> {
        let seed = seed.unwrap_or(sc.seed);
        let crate::build::Network {
            mut world,
            graph,
            mut queue,
        } = crate::build::network(&sc, base_dir, seed, progress)?;
        // In-band telemetry only where a controller reads it (`net/int.rs`).
        world.pool.int.on = crate::net::int::wanted(&sc);
        let mut tenants = crate::build::Tenants::new(&sc, seed);
        tenants.traffic(&mut world, &graph, base_dir, progress)?;
        tenants.apps(&mut world)?;
        let log = tenants.finish(&mut world, &mut queue);
        crate::trace::finish(&sc, &mut world, &log)?;
        if let Some(t) = world.measure.next_sample(0) {
            queue.schedule(t, Ev::Sample);
        }
        let ends_when_done = log.borrow().unfinished > 0;
        let warnings = dcqcn_warnings(&sc, &world);
        for w in &warnings {
            eprintln!("warning: {w}");
        }
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
            warnings,
        })
    }

    /// Warnings about the scenario, one line each (also printed to stderr when it was built).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
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
        h.apps
            .push(AppSlot::new(app, stack, format!("added[{idx}]")));
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
            if let Some(t) = self.queue.due(until) {
                let ev = self.queue.take_due();
                if let Some(next) = self.queue.peek_next() {
                    self.world.prefetch(next, self.queue.peek_after());
                }
                self.world.handle(t, ev, &mut self.queue);
                if self.ends_when_done && self.log.borrow().unfinished == 0 {
                    self.now = t;
                    self.finished = true;
                    break;
                }
            } else {
                self.now = until;
                if self.queue.is_empty() && (!self.ends_when_done || until >= self.end) {
                    self.finished = until >= self.end;
                }
                break;
            }
        }
        if self.now >= self.end {
            self.finished = true;
        }
        if self.finished {
            self.world.final_sample(self.now);
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

    /// The start of the traffic's last flow, when the run has `[[traffic]]` flows and no
    /// applications (whose ends are not known up front): the progress bar's target, as a run
    /// that ends when its flows are done ends soon after it, long before `duration`. None
    /// otherwise.
    pub fn last_arrival_ps(&self) -> Option<u64> {
        let log = self.log.borrow();
        if !self.ends_when_done || log.flows.iter().any(|f| f.kind != "flow") {
            return None;
        }
        log.flows.iter().map(|f| f.start_ps).max()
    }

    /// Conservation and placement: every completed flow's receiving QP accepted exactly its size
    /// (duplicates are never counted), and with `nic.data_check` its bytes sit at the right address
    /// of the receiver's memory. Returns the number of bytes verified.
    ///
    /// A flow a multipath middleware carried over several QPs (world::facing) is checked over
    /// all of them, and may have accepted more than its size: the layer's own traffic on those
    /// QPs (Virtuoso's path probes, chunk headers) is counted too; its placement is exact with
    /// `nic.data_check`.
    pub fn verify_delivery(&self) -> Result<u64, String> {
        let log = self.log.borrow();
        let mut rx: HashMap<u32, u64> = HashMap::new();
        for (&(node, qpn), &flow) in &log.rx_qp_flow {
            let h = self.world.host_index[node as usize] as usize;
            let bytes = self.world.hosts[h].nic.qp(qpn).map_or(0, |q| q.rx_bytes);
            *rx.entry(flow).or_default() += bytes;
        }
        // And the QPs a multipath middleware receives the flow's bytes on (world::facing).
        let mut multi: std::collections::HashSet<u32> = Default::default();
        for host in &self.world.hosts {
            for (&qpn, &head) in &host.owners.family {
                if let Some(&flow) = log.rx_qp_flow.get(&(host.node, head)) {
                    let bytes = host.nic.qp(qpn).map_or(0, |q| q.rx_bytes);
                    *rx.entry(flow).or_default() += bytes;
                    multi.insert(flow);
                }
            }
        }
        let mut checked = 0;
        for f in log
            .flows
            .iter()
            .filter(|f| f.kind == "flow" && f.finish_ps.is_some())
        {
            let got = rx.get(&f.id).copied().unwrap_or(0);
            let ok = if multi.contains(&f.id) {
                got >= f.size
            } else {
                got == f.size
            };
            if !ok {
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

/// DCQCN keys set for another link rate than the hosts that run them (`dcqcn/defaults.rs`): the
/// scenario's `[transport.dcqcn]` at every host link rate, and each `transport.per_host` entry at
/// its host's. (Overrides on traffic and application entries are not checked.)
fn dcqcn_warnings(sc: &Scenario, world: &World) -> Vec<String> {
    use crate::config::TransportKind;
    let mut out: Vec<String> = Vec::new();
    let mut rates: Vec<u64> = world.hosts.iter().map(|h| h.nic.line_rate).collect();
    rates.sort_unstable();
    rates.dedup();
    if sc.transport.kind == TransportKind::Dcqcn {
        for &r in &rates {
            out.extend(sc.transport.dcqcn.rate_warning("transport.dcqcn", r));
        }
    }
    for (h, o) in &sc.transport.per_host {
        let (Ok(t), Ok(hi)) = (sc.transport.overridden(Some(o)), h.parse::<usize>()) else {
            continue;
        };
        let Some(host) = world.hosts.get(hi) else {
            continue;
        };
        if t.kind == TransportKind::Dcqcn && o.dcqcn.is_some() {
            let at = format!("transport.per_host.{h}.dcqcn");
            out.extend(t.dcqcn.rate_warning(&at, host.nic.line_rate));
        }
    }
    out.dedup();
    out
}
