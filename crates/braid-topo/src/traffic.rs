//! Traffic specifications (the scenario's `[[traffic]]` tables) and the flow lists they generate.
//!
//! Hosts are named by host index (`graph.hosts()[i]` is host i's node id). Every random choice
//! draws from `RngStream::new(seed, "traffic", &[index])`, `index` being the table's position in
//! the scenario, so a scenario and seed always give the same flows and adding a traffic table never
//! changes another's.

use crate::topology::{Graph, SpecError};
use crate::units::Bytes;
use braid_engine::RngStream;
use std::collections::HashSet;
use std::path::Path;

/// One flow: `size` bytes from host `src` to host `dst` (host indices) starting at `start_ps`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowDesc {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start_ps: u64,
    pub priority: u8,
    pub dport: u16,
}

/// Priority of generated flows unless a table says otherwise (HPCC's traffic generator uses 3;
/// so does braid's default `nic.priority`).
pub const DEFAULT_PRIORITY: u8 = 3;
/// Destination port of generated flows unless a table says otherwise (HPCC's generator uses 100).
pub const DEFAULT_DPORT: u16 = 100;

/// Refuses flow lists that would not fit in memory by accident.
pub const MAX_FLOWS: u64 = 50_000_000;

mod all_to_all;
mod flows;
mod hpcc;
mod incast;
mod permutation;
mod poisson;
pub use all_to_all::AllToAll;
pub use flows::{FlowSpec, Flows};
pub use hpcc::Hpcc;
pub use incast::{Incast, Senders};
pub use permutation::Permutation;
pub use poisson::Poisson;

/// A table's flows, in the order the pattern makes them (Poisson: arrival order, drawn lazily),
/// with about how many there will be (what a collector reserves: a flow list can be millions
/// long, and growing it by doubling would hold up to twice its size).
pub struct FlowIter {
    flows: Box<dyn Iterator<Item = FlowDesc>>,
    expected: usize,
}

impl FlowIter {
    pub fn new(flows: impl Iterator<Item = FlowDesc> + 'static, expected: usize) -> FlowIter {
        FlowIter {
            flows: Box::new(flows),
            expected,
        }
    }

    /// About how many flows this yields (an estimate for lazily drawn patterns).
    pub fn expected(&self) -> usize {
        self.expected
    }

    /// Every flow, in a list reserved for the expected count.
    pub fn into_vec(self) -> Vec<FlowDesc> {
        let mut v = Vec::with_capacity(self.expected);
        v.extend(self);
        v
    }
}

impl From<Vec<FlowDesc>> for FlowIter {
    fn from(v: Vec<FlowDesc>) -> FlowIter {
        let n = v.len();
        FlowIter::new(v.into_iter(), n)
    }
}

impl Iterator for FlowIter {
    type Item = FlowDesc;

    fn next(&mut self) -> Option<FlowDesc> {
        self.flows.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.flows.size_hint()
    }
}

/// What a pattern generates on: the topology's hosts and the scenario's directory.
pub struct TrafficCtx<'a> {
    pub n_hosts: u32,
    /// Rate of the hosts' links (of host 0), bits per second.
    pub host_rate_bps: u64,
    /// The scenario's directory (for file names).
    pub base_dir: &'a Path,
    map: NodeMap<'a>,
}

/// About how much a table generates, told without generating it (the capacity estimate that
/// `braid validate` prints and the memory guard checks before anything is built).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrafficVolume {
    /// Flows (the expected count where arrivals are random).
    pub flows: f64,
    /// Bytes the flows carry, summed (what data checking holds twice: sent and landed).
    pub bytes: f64,
    /// The latest a flow starts, picoseconds (None where only the drawing tells: Poisson
    /// arrivals bounded by a count alone). A flow starting after the run's duration never runs.
    pub last_start_ps: Option<u64>,
}

/// One traffic pattern (one file in `traffic/`, its config struct the factory of its flows).
pub trait TrafficPattern {
    /// Checks the table against the topology and returns its flows. Every random choice draws
    /// from `rng`, the table's own stream; a pattern that draws lazily owns it.
    fn flows(&self, ctx: &TrafficCtx, rng: RngStream) -> Result<FlowIter, SpecError>;

    /// How many flows and bytes the table will generate, from its parameters alone (load,
    /// rate, duration, the size distribution's mean, a file's header): no flow is drawn. An
    /// error is one `flows` would report too.
    fn volume(&self, ctx: &TrafficCtx) -> Result<TrafficVolume, SpecError>;
}

crate::tagged::tagged_enum! {
tag = "pattern", mirror = TrafficMirror, kind = TrafficPattern, expecting = "a traffic table with `pattern`";
// One line per pattern, its config and generator in `traffic/<pattern>.rs`.
/// One `[[traffic]]` table, chosen by `pattern`.
pub enum TrafficSpec {
    Permutation(Permutation),
    Incast(Incast),
    AllToAll(AllToAll),
    Poisson(Poisson),
    Hpcc(Hpcc),
    Flows(Flows),
}
}

fn e(path: impl Into<String>, msg: impl Into<String>) -> SpecError {
    SpecError::new(path, msg)
}

fn check_host(h: u32, n_hosts: u32, path: impl Into<String>) -> Result<u32, SpecError> {
    if h < n_hosts {
        Ok(h)
    } else {
        Err(e(
            path,
            format!(
                "host {h} does not exist (the topology has {n_hosts} hosts, 0..{})",
                n_hosts.saturating_sub(1)
            ),
        ))
    }
}

fn check_priority(p: Option<u8>) -> Result<u8, SpecError> {
    let p = p.unwrap_or(DEFAULT_PRIORITY);
    if p > 7 {
        Err(e("priority", format!("expected a priority 0–7, got {p}")))
    } else {
        Ok(p)
    }
}

fn check_size(size: Bytes, path: &str) -> Result<u64, SpecError> {
    if size.0 == 0 {
        Err(e(path, "flow size must be at least 1 byte"))
    } else {
        Ok(size.0)
    }
}

/// The host list of a table: given (checked, no duplicates) or all hosts.
fn host_list(hosts: &Option<Vec<u32>>, n_hosts: u32) -> Result<Vec<u32>, SpecError> {
    match hosts {
        None => Ok((0..n_hosts).collect()),
        Some(v) => {
            let mut seen = HashSet::new();
            for (i, &h) in v.iter().enumerate() {
                check_host(h, n_hosts, format!("hosts[{i}]"))?;
                if !seen.insert(h) {
                    return Err(e(
                        format!("hosts[{i}]"),
                        format!("host {h} is listed twice"),
                    ));
                }
            }
            Ok(v.clone())
        }
    }
}

/// How HPCC node ids map to host indices.
#[derive(Clone, Copy)]
enum NodeMap<'a> {
    /// node id == host index (hosts are the lowest node ids).
    Identity(u32),
    /// From a graph (hpcc topology or any other).
    Graph(&'a Graph),
}

impl TrafficSpec {
    /// The flows of this table on a topology with `n_hosts` hosts whose host links run at
    /// `host_rate_bps`. `seed` is the run's seed, `index` the table's position in the scenario,
    /// `base_dir` the scenario's directory (for file names).
    ///
    /// For `pattern = "hpcc"` without a `topology` key this assumes the HPCC node ids of hosts are
    /// `0..n_hosts` (hosts first, switches after) and rejects ids beyond; prefer
    /// [`TrafficSpec::generate_on`], which maps node ids through the graph.
    pub fn generate(
        &self,
        n_hosts: u32,
        host_rate_bps: u64,
        seed: u64,
        index: u64,
        base_dir: &Path,
    ) -> Result<Vec<FlowDesc>, SpecError> {
        Ok(self
            .flows_inner(
                n_hosts,
                host_rate_bps,
                seed,
                index,
                base_dir,
                NodeMap::Identity(n_hosts),
            )?
            .into_vec())
    }

    /// As [`TrafficSpec::generate`], on a built graph: the host count and host link rate (of host
    /// 0) come from it, and HPCC flow files' node ids are mapped to host indices through it.
    pub fn generate_on(
        &self,
        graph: &Graph,
        seed: u64,
        index: u64,
        base_dir: &Path,
    ) -> Result<Vec<FlowDesc>, SpecError> {
        Ok(self.flows_on(graph, seed, index, base_dir)?.into_vec())
    }

    /// As [`TrafficSpec::generate_on`], the flows as the pattern yields them (checked first,
    /// then drawn as they are asked for where the pattern draws lazily; Poisson: in arrival
    /// order). Collecting them gives `generate_on`'s list.
    pub fn flows_on(
        &self,
        graph: &Graph,
        seed: u64,
        index: u64,
        base_dir: &Path,
    ) -> Result<FlowIter, SpecError> {
        let n_hosts = graph.n_hosts();
        let rate = if n_hosts > 0 {
            graph.host_link_rate(0).unwrap_or(0)
        } else {
            0
        };
        self.flows_inner(n_hosts, rate, seed, index, base_dir, NodeMap::Graph(graph))
    }

    /// About how many flows and bytes this table generates on a topology of `n_hosts` hosts
    /// whose host links run at `host_rate_bps`, without generating them (see
    /// [`TrafficPattern::volume`]).
    pub fn volume(
        &self,
        n_hosts: u32,
        host_rate_bps: u64,
        base_dir: &Path,
    ) -> Result<TrafficVolume, SpecError> {
        let ctx = TrafficCtx {
            n_hosts,
            host_rate_bps,
            base_dir,
            map: NodeMap::Identity(n_hosts),
        };
        self.kind().volume(&ctx)
    }

    fn flows_inner(
        &self,
        n_hosts: u32,
        host_rate_bps: u64,
        seed: u64,
        index: u64,
        base_dir: &Path,
        map: NodeMap,
    ) -> Result<FlowIter, SpecError> {
        let ctx = TrafficCtx {
            n_hosts,
            host_rate_bps,
            base_dir,
            map,
        };
        let rng = RngStream::new(seed, "traffic", &[index]);
        self.kind().flows(&ctx, rng)
    }
}

#[cfg(test)]
mod tests;
