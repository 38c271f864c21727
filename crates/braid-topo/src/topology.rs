//! Topology specifications (the scenario's `[topology]` table) and the graphs they build.
//!
//! Node numbering: in every generated topology the hosts come first (node ids `0..H`), numbered so
//! that host `i` sits under ToR/leaf/edge switch `⌊i / hosts_per_tor⌋`; switches follow. For the
//! `hpcc` and `edges` kinds node ids are the file's / the list's ids, unchanged. "Host i" in a
//! scenario is always `graph.hosts()[i]` (the i-th host node id in ascending order).

use crate::units::{Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Host,
    Switch,
}

#[derive(Clone, Debug)]
pub struct NodeDesc {
    pub kind: NodeKind,
    pub name: String,
}

/// A full-duplex link between nodes `a` and `b` (same rate, delay and loss in both directions).
#[derive(Clone, Debug)]
pub struct LinkDesc {
    pub a: u32,
    pub b: u32,
    pub rate_bps: u64,
    pub delay_ps: u64,
    /// Probability that a packet is lost on this link (per direction, per packet).
    pub loss: f64,
}

/// Nodes and links. Node ids are indices into `nodes`.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub nodes: Vec<NodeDesc>,
    pub links: Vec<LinkDesc>,
}

impl Graph {
    /// Node ids of the hosts, ascending. "Host i" in scenarios is `hosts()[i]`.
    pub fn hosts(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Host)
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// Node ids of the switches, ascending.
    pub fn switches(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Switch)
            .map(|(i, _)| i as u32)
            .collect()
    }

    pub fn n_hosts(&self) -> u32 {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Host)
            .count() as u32
    }

    pub fn n_switches(&self) -> u32 {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Switch)
            .count() as u32
    }

    /// The node with this name. Also accepts a plain node id ("17") and `n17`.
    pub fn node_by_name(&self, name: &str) -> Option<u32> {
        if let Some(i) = self.nodes.iter().position(|n| n.name == name) {
            return Some(i as u32);
        }
        let digits = name.strip_prefix('n').unwrap_or(name);
        match digits.parse::<u32>() {
            Ok(i) if (i as usize) < self.nodes.len() && !digits.starts_with('+') => Some(i),
            _ => None,
        }
    }

    /// Host index (position in `hosts()`) of a node id, if it is a host.
    pub fn host_index(&self, node: u32) -> Option<u32> {
        let n = self.nodes.get(node as usize)?;
        if n.kind != NodeKind::Host {
            return None;
        }
        Some(
            self.nodes[..node as usize]
                .iter()
                .filter(|n| n.kind == NodeKind::Host)
                .count() as u32,
        )
    }

    /// For each node id, its host index (`None` for switches). O(nodes).
    pub fn host_index_map(&self) -> Vec<Option<u32>> {
        let mut next = 0u32;
        self.nodes
            .iter()
            .map(|n| {
                if n.kind == NodeKind::Host {
                    next += 1;
                    Some(next - 1)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Rate of the (first) link attached to host `i` (index into `hosts()`), if any.
    pub fn host_link_rate(&self, host_index: u32) -> Option<u64> {
        let node = *self.hosts().get(host_index as usize)?;
        self.links
            .iter()
            .find(|l| l.a == node || l.b == node)
            .map(|l| l.rate_bps)
    }

    /// Its size as the capacity estimate counts it.
    pub fn size(&self) -> TopologySize {
        let mut edge = vec![false; self.nodes.len()];
        let mut fabric_ports = 0;
        for l in &self.links {
            let (a, b) = (l.a as usize, l.b as usize);
            let kind = |i: usize| self.nodes.get(i).map(|n| n.kind);
            if kind(a) == Some(NodeKind::Switch) && kind(b) == Some(NodeKind::Switch) {
                fabric_ports += 2;
            }
            if kind(a) == Some(NodeKind::Host) && kind(b) == Some(NodeKind::Switch) {
                edge[b] = true;
            }
            if kind(b) == Some(NodeKind::Host) && kind(a) == Some(NodeKind::Switch) {
                edge[a] = true;
            }
        }
        let hosts = self.n_hosts() as u64;
        TopologySize {
            hosts,
            switches: self.n_switches() as u64,
            edge_switches: edge.iter().filter(|&&e| e).count() as u64,
            fabric_ports,
            host_rate_bps: if hosts > 0 {
                self.host_link_rate(0).unwrap_or(0)
            } else {
                0
            },
        }
    }

    /// Checks ids in range, no self-loops, rates positive, loss in [0, 1].
    pub fn check(&self) -> Result<(), SpecError> {
        let n = self.nodes.len() as u32;
        for (i, l) in self.links.iter().enumerate() {
            let p = format!("links[{i}]");
            if l.a >= n || l.b >= n {
                return Err(SpecError::new(
                    p,
                    format!(
                        "link {}–{} names a node that does not exist ({} nodes)",
                        l.a, l.b, n
                    ),
                ));
            }
            if l.a == l.b {
                return Err(SpecError::new(
                    p,
                    format!("link joins node {} to itself", l.a),
                ));
            }
            if l.rate_bps == 0 {
                return Err(SpecError::new(
                    format!("{p}.rate"),
                    "link rate must be positive",
                ));
            }
            if !(0.0..=1.0).contains(&l.loss) {
                return Err(SpecError::new(
                    format!("{p}.loss"),
                    "expected a loss probability between 0 and 1",
                ));
            }
        }
        Ok(())
    }

    fn add_node(&mut self, kind: NodeKind, name: String) -> u32 {
        self.nodes.push(NodeDesc { kind, name });
        (self.nodes.len() - 1) as u32
    }

    fn add_link(&mut self, a: u32, b: u32, l: &LinkSpec) {
        self.links.push(LinkDesc {
            a,
            b,
            rate_bps: l.rate.0,
            delay_ps: l.delay.0,
            loss: l.loss,
        });
    }
}

/// An error in a topology or traffic specification, with the key path relative to its table
/// (e.g. `host_link.rate`, `file`, `senders[3]`).
#[derive(Debug, Clone)]
pub struct SpecError {
    pub path: String,
    pub message: String,
}

impl SpecError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Prefixes the path with a parent key: `within("topology")` turns `file` into `topology.file`.
    pub fn within(mut self, parent: &str) -> SpecError {
        self.path = if self.path.is_empty() {
            parent.to_string()
        } else if self.path.starts_with('[') {
            format!("{parent}{}", self.path)
        } else {
            format!("{parent}.{}", self.path)
        };
        self
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

fn default_loss() -> f64 {
    0.0
}

/// A link's properties: `{ rate = "40Gbps", delay = "1us", loss = 0.0 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Line rate, e.g. "40Gbps".
    pub rate: Rate,
    /// One-way propagation delay, e.g. "1us".
    pub delay: Duration,
    /// Random per-packet loss probability, 0–1.
    #[serde(default = "default_loss")]
    pub loss: f64,
}

impl LinkSpec {
    fn check(&self, path: &str) -> Result<(), SpecError> {
        if self.rate.0 == 0 {
            return Err(SpecError::new(
                format!("{path}.rate"),
                "link rate must be positive, e.g. \"40Gbps\"",
            ));
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(SpecError::new(
                format!("{path}.loss"),
                "expected a loss probability between 0 and 1",
            ));
        }
        Ok(())
    }
}

mod dumbbell;
mod edges;
mod fat_tree;
mod hpcc;
mod leaf_spine;
mod two_tor;
pub use dumbbell::Dumbbell;
pub use edges::{EdgeSpec, Edges, NodeRef, NodesSpec};
pub use fat_tree::FatTree;
pub use hpcc::Hpcc;
pub use leaf_spine::LeafSpine;
pub use two_tor::TwoTor;

/// How big a topology is: what the capacity estimate needs, told without building the graph
/// where the kind can (a k = 64 fat-tree's estimate must not cost its build).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopologySize {
    pub hosts: u64,
    pub switches: u64,
    /// Switches with hosts attached: a switch's routing table holds one ECMP group per such
    /// switch (`world/table.rs`).
    pub edge_switches: u64,
    /// Switch ports that face another switch (what `"all-fabric"` samples or captures).
    pub fabric_ports: u64,
    /// Rate of host 0's link, bits per second (what a Poisson table's `load` is a fraction of).
    pub host_rate_bps: u64,
}

/// One kind of topology (one file in `topology/`, its config struct the factory of its graph).
pub trait TopologyKind {
    /// Builds the graph. `base_dir` resolves relative file names (the scenario's directory).
    fn build(&self, base_dir: &Path) -> Result<Graph, SpecError>;

    /// Its size; kinds that can count without building the graph say so (the others build it:
    /// their size is bounded by the scenario's text or a size-capped file).
    fn size(&self, base_dir: &Path) -> Result<TopologySize, SpecError> {
        Ok(self.build(base_dir)?.size())
    }

    /// The key of the table that sets its size (`k` of a fat-tree), for naming it in a
    /// refusal; "" for the table as a whole.
    fn size_key(&self) -> &'static str {
        ""
    }

    /// Number of hosts; kinds that can count them without building the graph say so.
    fn n_hosts(&self, base_dir: &Path) -> Result<u32, SpecError> {
        Ok(self.build(base_dir)?.n_hosts())
    }
}

crate::tagged::tagged_enum! {
tag = "kind", mirror = TopologyMirror, kind = TopologyKind, expecting = "a topology table with `kind`";
// One line per kind, its config and builder in `topology/<kind>.rs`.
/// The `[topology]` table, chosen by `kind`.
pub enum TopologySpec {
    LeafSpine(LeafSpine),
    FatTree(FatTree),
    TwoTor(TwoTor),
    Dumbbell(Dumbbell),
    Edges(Edges),
    Hpcc(Hpcc),
}
}

fn positive(v: u32, path: &str) -> Result<(), SpecError> {
    if v == 0 {
        Err(SpecError::new(path, "must be at least 1"))
    } else {
        Ok(())
    }
}

/// Refuses graphs that would not fit in memory by accident (a typo like `k = 2400`).
const MAX_NODES: u64 = 4_000_000;

fn limit(n: u64, path: &str) -> Result<(), SpecError> {
    if n > MAX_NODES {
        Err(SpecError::new(
            path,
            format!("would build {n} nodes; at most {MAX_NODES} are supported"),
        ))
    } else {
        Ok(())
    }
}

/// Resolves a path from a scenario against the scenario's directory.
pub fn resolve(base_dir: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base_dir.join(p)
    }
}

impl TopologySpec {
    /// Builds the graph. `base_dir` resolves relative file names (the scenario's directory).
    pub fn build(&self, base_dir: &Path) -> Result<Graph, SpecError> {
        self.kind().build(base_dir)
    }

    /// Its size, without building the graph where the kind can count it.
    pub fn size(&self, base_dir: &Path) -> Result<TopologySize, SpecError> {
        self.kind().size(base_dir)
    }

    /// The key that sets its size ("" for the whole table).
    pub fn size_key(&self) -> &'static str {
        self.kind().size_key()
    }

    /// Number of hosts without building the graph (file-based kinds read the file).
    pub fn n_hosts(&self, base_dir: &Path) -> Result<u32, SpecError> {
        self.kind().n_hosts(base_dir)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod path_tests;
