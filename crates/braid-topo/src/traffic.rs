//! Traffic specifications (the scenario's `[[traffic]]` tables) and the flow lists they generate.
//!
//! Hosts are named by host index (`graph.hosts()[i]` is host i's node id). Every random choice
//! draws from `RngStream::new(seed, "traffic", &[index])`, `index` being the table's position in
//! the scenario, so a scenario and seed always give the same flows and adding a traffic table never
//! changes another's.

use crate::cdf::Cdf;
use crate::hpcc;
use crate::topology::{resolve, Graph, SpecError};
use crate::units::{Bytes, Duration};
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
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

/// `senders` of an incast: a count (the lowest-numbered hosts other than the receiver) or a list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Senders {
    Count(u32),
    List(Vec<u32>),
}

/// One explicit flow of the `flows` pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: Bytes,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

crate::tagged::tagged_enum! {
tag = "pattern", mirror = TrafficMirror, expecting = "a traffic table with `pattern`";
/// One `[[traffic]]` table, chosen by `pattern`.
pub enum TrafficSpec {
    /// Every host sends `size` bytes to another host, each host receiving once: a random
    /// derangement of `hosts` (default: all hosts). With `cross = true` the host list is split in
    /// two halves (for two-tor and dumbbell: the two sides) and each host of the first half sends
    /// to a distinct random host of the second; `both_ways = true` adds the reverse direction
    /// (a second, independent matching).
    Permutation {
        size: Bytes,
        #[serde(default)]
        start: Duration,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hosts: Option<Vec<u32>>,
        #[serde(default)]
        cross: bool,
        #[serde(default)]
        both_ways: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        priority: Option<u8>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dport: Option<u16>,
    },
    /// `senders` (a list of hosts, or a count: the lowest-numbered hosts other than the receiver)
    /// each send `size` bytes to `receiver` at `start`.
    Incast {
        senders: Senders,
        receiver: u32,
        size: Bytes,
        #[serde(default)]
        start: Duration,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        priority: Option<u8>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dport: Option<u16>,
    },
    /// Every host of `hosts` (default: all) sends `size` bytes to every other one.
    AllToAll {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hosts: Option<Vec<u32>>,
        size: Bytes,
        #[serde(default)]
        start: Duration,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        priority: Option<u8>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dport: Option<u16>,
    },
    /// Poisson flow arrivals at every host of `hosts` (default: all), each host offering `load`
    /// (0–1) of its link rate; destinations uniform among the other hosts; sizes from `cdf`
    /// ("web-search", "data-mining", "fb-hadoop", "ali-storage", "google-rpc", or an HPCC-format
    /// CDF file). Arrivals run from `start` for `duration`, or until `flows` flows (whichever
    /// comes first when both are given). As HPCC's traffic_gen.py.
    Poisson {
        load: f64,
        cdf: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration: Option<Duration>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flows: Option<u64>,
        #[serde(default)]
        start: Duration,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hosts: Option<Vec<u32>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        priority: Option<u8>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dport: Option<u16>,
    },
    /// An HPCC ns-3 flow file (count, then `src dst priority dport size start_s`). Its src/dst
    /// are node ids of the HPCC topology: they are mapped to host indices through the scenario's
    /// graph (see [`TrafficSpec::generate_on`]) or, when `topology` names the HPCC topology file,
    /// through that file. Start times are kept as given.
    Hpcc {
        file: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topology: Option<String>,
    },
    /// An explicit list of flows.
    Flows { flows: Vec<FlowSpec> },
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
        self.generate_inner(
            n_hosts,
            host_rate_bps,
            seed,
            index,
            base_dir,
            NodeMap::Identity(n_hosts),
        )
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
        let n_hosts = graph.n_hosts();
        let rate = if n_hosts > 0 {
            graph.host_link_rate(0).unwrap_or(0)
        } else {
            0
        };
        self.generate_inner(n_hosts, rate, seed, index, base_dir, NodeMap::Graph(graph))
    }

    fn generate_inner(
        &self,
        n_hosts: u32,
        host_rate_bps: u64,
        seed: u64,
        index: u64,
        base_dir: &Path,
        map: NodeMap,
    ) -> Result<Vec<FlowDesc>, SpecError> {
        let mut rng = RngStream::new(seed, "traffic", &[index]);
        match self {
            TrafficSpec::Permutation {
                size,
                start,
                hosts,
                cross,
                both_ways,
                priority,
                dport,
            } => {
                let size = check_size(*size, "size")?;
                let priority = check_priority(*priority)?;
                let dport = dport.unwrap_or(DEFAULT_DPORT);
                let hosts = host_list(hosts, n_hosts)?;
                let mk = |src: u32, dst: u32| FlowDesc {
                    src,
                    dst,
                    size,
                    start_ps: start.0,
                    priority,
                    dport,
                };
                if *both_ways && !*cross {
                    return Err(e("both_ways", "only applies with cross = true"));
                }
                if *cross {
                    if hosts.len() < 2 || hosts.len() % 2 != 0 {
                        return Err(e(
                            "cross",
                            format!(
                                "needs an even number of hosts (two equal halves), got {}",
                                hosts.len()
                            ),
                        ));
                    }
                    let half = hosts.len() / 2;
                    let (a, b) = hosts.split_at(half);
                    let mut bs = b.to_vec();
                    rng.shuffle(&mut bs);
                    let mut flows: Vec<FlowDesc> =
                        a.iter().zip(&bs).map(|(&s, &d)| mk(s, d)).collect();
                    if *both_ways {
                        let mut as_ = a.to_vec();
                        rng.shuffle(&mut as_);
                        flows.extend(b.iter().zip(&as_).map(|(&s, &d)| mk(s, d)));
                    }
                    Ok(flows)
                } else {
                    if hosts.len() < 2 {
                        return Err(e("hosts", "a permutation needs at least two hosts"));
                    }
                    // Uniform random derangement by rejection (expected e ≈ 2.7 shuffles).
                    let n = hosts.len();
                    let mut perm: Vec<usize> = (0..n).collect();
                    loop {
                        rng.shuffle(&mut perm);
                        if perm.iter().enumerate().all(|(i, &p)| i != p) {
                            break;
                        }
                    }
                    Ok((0..n).map(|i| mk(hosts[i], hosts[perm[i]])).collect())
                }
            }
            TrafficSpec::Incast {
                senders,
                receiver,
                size,
                start,
                priority,
                dport,
            } => {
                let size = check_size(*size, "size")?;
                let priority = check_priority(*priority)?;
                let dport = dport.unwrap_or(DEFAULT_DPORT);
                let receiver = check_host(*receiver, n_hosts, "receiver")?;
                let senders: Vec<u32> = match senders {
                    Senders::Count(c) => {
                        if *c == 0 || *c >= n_hosts {
                            return Err(e("senders", format!("expected 1 to {} senders (hosts other than the receiver), got {c}", n_hosts.saturating_sub(1))));
                        }
                        (0..n_hosts)
                            .filter(|&h| h != receiver)
                            .take(*c as usize)
                            .collect()
                    }
                    Senders::List(v) => {
                        if v.is_empty() {
                            return Err(e("senders", "expected at least one sender"));
                        }
                        let mut seen = HashSet::new();
                        for (i, &h) in v.iter().enumerate() {
                            check_host(h, n_hosts, format!("senders[{i}]"))?;
                            if h == receiver {
                                return Err(e(
                                    format!("senders[{i}]"),
                                    format!("host {h} is the receiver"),
                                ));
                            }
                            if !seen.insert(h) {
                                return Err(e(
                                    format!("senders[{i}]"),
                                    format!("host {h} is listed twice"),
                                ));
                            }
                        }
                        v.clone()
                    }
                };
                Ok(senders
                    .into_iter()
                    .map(|s| FlowDesc {
                        src: s,
                        dst: receiver,
                        size,
                        start_ps: start.0,
                        priority,
                        dport,
                    })
                    .collect())
            }
            TrafficSpec::AllToAll {
                hosts,
                size,
                start,
                priority,
                dport,
            } => {
                let size = check_size(*size, "size")?;
                let priority = check_priority(*priority)?;
                let dport = dport.unwrap_or(DEFAULT_DPORT);
                let hosts = host_list(hosts, n_hosts)?;
                if hosts.len() < 2 {
                    return Err(e("hosts", "all-to-all needs at least two hosts"));
                }
                let n = hosts.len() as u64;
                if n * (n - 1) > MAX_FLOWS {
                    return Err(e(
                        "hosts",
                        format!(
                            "{} flows is more than braid generates ({MAX_FLOWS})",
                            n * (n - 1)
                        ),
                    ));
                }
                let mut flows = Vec::with_capacity((n * (n - 1)) as usize);
                for &s in &hosts {
                    for &d in &hosts {
                        if s != d {
                            flows.push(FlowDesc {
                                src: s,
                                dst: d,
                                size,
                                start_ps: start.0,
                                priority,
                                dport,
                            });
                        }
                    }
                }
                Ok(flows)
            }
            TrafficSpec::Poisson {
                load,
                cdf,
                duration,
                flows,
                start,
                hosts,
                priority,
                dport,
            } => {
                let priority = check_priority(*priority)?;
                let dport = dport.unwrap_or(DEFAULT_DPORT);
                if !(load.is_finite() && *load > 0.0 && *load <= 1.0) {
                    return Err(e("load", format!("expected a load in (0, 1] (fraction of each host's link rate), got {load}")));
                }
                let hosts = host_list(hosts, n_hosts)?;
                if hosts.len() < 2 {
                    return Err(e("hosts", "Poisson traffic needs at least two hosts"));
                }
                if host_rate_bps == 0 {
                    return Err(e("load", "the hosts' link rate is unknown or zero"));
                }
                let dist = Cdf::load(cdf, base_dir).map_err(|m| e("cdf", m))?;
                let mean_size = dist.mean();
                if mean_size <= 0.0 {
                    return Err(e("cdf", "the distribution's mean size is zero"));
                }
                if duration.is_none() && flows.is_none() {
                    return Err(e("duration", "give `duration` (arrivals from `start` for this long) or `flows` (a number of flows), or both"));
                }
                if *duration == Some(Duration(0)) {
                    return Err(e("duration", "must be positive"));
                }
                if *flows == Some(0) {
                    return Err(e("flows", "must be at least 1"));
                }
                // Mean inter-arrival time per host, in ps: size*8 bits at load*rate.
                let mean_ia_ps = mean_size * 8.0 / (load * host_rate_bps as f64) * 1e12;
                let end = duration.map(|d| start.0.saturating_add(d.0));
                let expected = match (duration, flows) {
                    (_, Some(f)) => *f as f64,
                    (Some(d), None) => d.0 as f64 / mean_ia_ps * hosts.len() as f64,
                    (None, None) => unreachable!(),
                };
                if expected > MAX_FLOWS as f64 {
                    return Err(e(
                        if flows.is_some() { "flows" } else { "duration" },
                        format!(
                            "about {expected:.0} flows is more than braid generates ({MAX_FLOWS})"
                        ),
                    ));
                }
                let max_flows = flows.unwrap_or(u64::MAX);
                let draw_ia =
                    |rng: &mut RngStream| -> u64 { rng.exponential(mean_ia_ps).round() as u64 };
                let mut heap: BinaryHeap<Reverse<(u64, u32)>> =
                    BinaryHeap::with_capacity(hosts.len());
                for (slot, _) in hosts.iter().enumerate() {
                    heap.push(Reverse((
                        start.0.saturating_add(draw_ia(&mut rng)),
                        slot as u32,
                    )));
                }
                let mut out = Vec::with_capacity(expected.min(MAX_FLOWS as f64) as usize + 16);
                let n = hosts.len() as u64;
                while let Some(Reverse((t, slot))) = heap.pop() {
                    if (out.len() as u64) >= max_flows {
                        break;
                    }
                    if let Some(end) = end {
                        if t >= end {
                            continue; // this host is done; the others may still have arrivals
                        }
                    }
                    let mut d = rng.below(n - 1) as u32;
                    if d >= slot {
                        d += 1;
                    }
                    let size = dist.sample(rng.uniform());
                    out.push(FlowDesc {
                        src: hosts[slot as usize],
                        dst: hosts[d as usize],
                        size,
                        start_ps: t,
                        priority,
                        dport,
                    });
                    heap.push(Reverse((t.saturating_add(draw_ia(&mut rng)), slot)));
                }
                Ok(out)
            }
            TrafficSpec::Hpcc { file, topology } => {
                let path = resolve(base_dir, file);
                let raw = hpcc::read_flows(&path).map_err(|m| e("file", m))?;
                let topo_graph;
                let map = match topology {
                    Some(t) => {
                        topo_graph = hpcc::read_topology(&resolve(base_dir, t))
                            .map_err(|m| e("topology", m))?;
                        if topo_graph.n_hosts() != n_hosts {
                            return Err(e(
                                "topology",
                                format!(
                                    "{t} has {} hosts but the scenario's topology has {n_hosts}",
                                    topo_graph.n_hosts()
                                ),
                            ));
                        }
                        NodeMap::Graph(&topo_graph)
                    }
                    None => map,
                };
                let lookup: Box<dyn Fn(u32) -> Result<u32, String>> = match map {
                    NodeMap::Identity(n) => Box::new(move |id: u32| {
                        if id < n {
                            Ok(id)
                        } else {
                            Err(format!(
                                "node {id} is not a host: without the topology, hosts must be node ids 0..{} (hosts first, then switches); \
                                 name the HPCC topology file in `topology`",
                                n.saturating_sub(1)
                            ))
                        }
                    }),
                    NodeMap::Graph(g) => {
                        let idx = g.host_index_map();
                        Box::new(move |id: u32| match idx.get(id as usize) {
                            Some(Some(h)) => Ok(*h),
                            Some(None) => Err(format!("node {id} is a switch, not a host")),
                            None => Err(format!(
                                "node {id} does not exist (the topology has {} nodes)",
                                idx.len()
                            )),
                        })
                    }
                };
                let mut out = Vec::with_capacity(raw.len());
                for (i, f) in raw.iter().enumerate() {
                    let at = |m: String| {
                        e(
                            "file",
                            format!("{}: flow {} (of {}): {m}", path.display(), i + 1, raw.len()),
                        )
                    };
                    let src = lookup(f.src).map_err(at)?;
                    let dst = lookup(f.dst).map_err(at)?;
                    if f.size == 0 {
                        return Err(at("flow size is 0 bytes".into()));
                    }
                    out.push(FlowDesc {
                        src,
                        dst,
                        size: f.size,
                        start_ps: f.start_ps,
                        priority: f.priority,
                        dport: f.dport,
                    });
                }
                Ok(out)
            }
            TrafficSpec::Flows { flows } => {
                let mut out = Vec::with_capacity(flows.len());
                for (i, f) in flows.iter().enumerate() {
                    let p = format!("flows[{i}]");
                    let src = check_host(f.src, n_hosts, format!("{p}.src"))?;
                    let dst = check_host(f.dst, n_hosts, format!("{p}.dst"))?;
                    if src == dst {
                        return Err(e(format!("{p}.dst"), "must differ from src"));
                    }
                    let size = check_size(f.size, &format!("{p}.size"))?;
                    let priority = check_priority(f.priority).map_err(|x| x.within(&p))?;
                    out.push(FlowDesc {
                        src,
                        dst,
                        size,
                        start_ps: f.start.0,
                        priority,
                        dport: f.dport.unwrap_or(DEFAULT_DPORT),
                    });
                }
                Ok(out)
            }
        }
    }
}

#[cfg(test)]
mod tests;
