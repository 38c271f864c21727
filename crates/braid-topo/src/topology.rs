//! Topology specifications (the scenario's `[topology]` table) and the graphs they build.
//!
//! Node numbering: in every generated topology the hosts come first (node ids `0..H`), numbered so
//! that host `i` sits under ToR/leaf/edge switch `⌊i / hosts_per_tor⌋`; switches follow. For the
//! `hpcc` and `edges` kinds node ids are the file's / the list's ids, unchanged. "Host i" in a
//! scenario is always `graph.hosts()[i]` (the i-th host node id in ascending order).

use crate::units::{Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
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

/// A node named by id or by name (`"spine0"`, `"n12"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NodeRef {
    Id(u32),
    Name(String),
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Id(i) => write!(f, "{i}"),
            NodeRef::Name(s) => write!(f, "{s:?}"),
        }
    }
}

/// `nodes` of an explicit edge list: a count (names `n0`, `n1`, …) or a list of names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NodesSpec {
    Count(u32),
    Names(Vec<String>),
}

/// One link of an explicit edge list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeSpec {
    pub a: NodeRef,
    pub b: NodeRef,
    pub rate: Rate,
    pub delay: Duration,
    #[serde(default = "default_loss")]
    pub loss: f64,
}

crate::tagged::tagged_enum! {
tag = "kind", mirror = TopologyMirror, expecting = "a topology table with `kind`";
/// The `[topology]` table, chosen by `kind`.
pub enum TopologySpec {
    /// Two-tier Clos: every leaf connects to every spine. Hosts `h0..`, leaves `leaf{i}`,
    /// spines `spine{i}`; host i is under leaf ⌊i / hosts_per_leaf⌋.
    LeafSpine { spines: u32, leaves: u32, hosts_per_leaf: u32, host_link: LinkSpec, fabric_link: LinkSpec },
    /// 3-tier k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge (`edge{i}`) and k/2 aggregation
    /// (`agg{i}`) switches, (k/2)² core switches (`core{i}`), k³/4 hosts. `core_link` (aggregation–
    /// core) defaults to `fabric_link` (edge–aggregation).
    FatTree {
        k: u32,
        host_link: LinkSpec,
        fabric_link: LinkSpec,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        core_link: Option<LinkSpec>,
    },
    /// The MP-RDMA testbed: `hosts_per_tor` hosts under each of `tor0` and `tor1`, and `paths`
    /// spine switches (`spine{i}`) each linked to both ToRs.
    TwoTor { hosts_per_tor: u32, paths: u32, host_link: LinkSpec, fabric_link: LinkSpec },
    /// `left` hosts on `swL`, `right` hosts on `swR`, the two switches joined by `bottleneck`.
    /// Hosts 0..left are on the left.
    Dumbbell { left: u32, right: u32, host_link: LinkSpec, bottleneck: LinkSpec },
    /// An explicit graph: `nodes` (a count or a list of names), which of them are `switches`
    /// (ids or names; the others are hosts), and the `links`.
    Edges { nodes: NodesSpec, switches: Vec<NodeRef>, links: Vec<EdgeSpec> },
    /// An HPCC ns-3 topology file (line 1 `nodes switches links`, line 2 the switch ids, then
    /// `src dst rate delay error_rate`), relative to the scenario's directory. Node ids are kept;
    /// names are `n{id}`. `default_loss` is the loss rate of links whose error_rate in the file is
    /// 0 (HPCC's ERROR_RATE_PER_LINK: ns-3 gives those links this error model).
    Hpcc {
        file: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default_loss: Option<f64>,
    },
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
        let mut g = Graph::default();
        match self {
            TopologySpec::LeafSpine {
                spines,
                leaves,
                hosts_per_leaf,
                host_link,
                fabric_link,
            } => {
                positive(*spines, "spines")?;
                positive(*leaves, "leaves")?;
                positive(*hosts_per_leaf, "hosts_per_leaf")?;
                host_link.check("host_link")?;
                fabric_link.check("fabric_link")?;
                let (s, l, h) = (*spines as u64, *leaves as u64, *hosts_per_leaf as u64);
                limit(s + l + l * h, "hosts_per_leaf")?;
                g.nodes.reserve((s + l + l * h) as usize);
                g.links.reserve((l * h + l * s) as usize);
                let n_hosts = leaves * hosts_per_leaf;
                for i in 0..n_hosts {
                    g.add_node(NodeKind::Host, format!("h{i}"));
                }
                let leaf0 = n_hosts;
                for i in 0..*leaves {
                    g.add_node(NodeKind::Switch, format!("leaf{i}"));
                }
                let spine0 = leaf0 + leaves;
                for i in 0..*spines {
                    g.add_node(NodeKind::Switch, format!("spine{i}"));
                }
                for i in 0..n_hosts {
                    g.add_link(i, leaf0 + i / hosts_per_leaf, host_link);
                }
                for l in 0..*leaves {
                    for s in 0..*spines {
                        g.add_link(leaf0 + l, spine0 + s, fabric_link);
                    }
                }
            }
            TopologySpec::FatTree {
                k,
                host_link,
                fabric_link,
                core_link,
            } => {
                let k = *k;
                if k < 2 || k % 2 != 0 {
                    return Err(SpecError::new(
                        "k",
                        format!("expected an even number >= 2, got {k}"),
                    ));
                }
                host_link.check("host_link")?;
                fabric_link.check("fabric_link")?;
                if let Some(c) = core_link {
                    c.check("core_link")?;
                }
                let core_link = core_link.as_ref().unwrap_or(fabric_link);
                let k64 = k as u64;
                limit(k64 * k64 * k64 / 4 + 5 * k64 * k64 / 4, "k")?;
                let half = k / 2;
                let n_hosts = k * k * k / 4;
                let n_edge = k * k / 2;
                let n_agg = k * k / 2;
                let n_core = half * half;
                g.nodes
                    .reserve((n_hosts + n_edge + n_agg + n_core) as usize);
                g.links.reserve((3 * n_hosts) as usize);
                for i in 0..n_hosts {
                    g.add_node(NodeKind::Host, format!("h{i}"));
                }
                let edge0 = n_hosts;
                for i in 0..n_edge {
                    g.add_node(NodeKind::Switch, format!("edge{i}"));
                }
                let agg0 = edge0 + n_edge;
                for i in 0..n_agg {
                    g.add_node(NodeKind::Switch, format!("agg{i}"));
                }
                let core0 = agg0 + n_agg;
                for i in 0..n_core {
                    g.add_node(NodeKind::Switch, format!("core{i}"));
                }
                // Hosts: edge switch e (pod e / half) has hosts e*half .. (e+1)*half.
                for i in 0..n_hosts {
                    g.add_link(i, edge0 + i / half, host_link);
                }
                // Pod p: edge p*half+j ↔ every agg p*half+m.
                for p in 0..k {
                    for j in 0..half {
                        for m in 0..half {
                            g.add_link(edge0 + p * half + j, agg0 + p * half + m, fabric_link);
                        }
                    }
                }
                // Agg m of each pod ↔ core m*half .. (m+1)*half.
                for p in 0..k {
                    for m in 0..half {
                        for c in 0..half {
                            g.add_link(agg0 + p * half + m, core0 + m * half + c, core_link);
                        }
                    }
                }
            }
            TopologySpec::TwoTor {
                hosts_per_tor,
                paths,
                host_link,
                fabric_link,
            } => {
                positive(*hosts_per_tor, "hosts_per_tor")?;
                positive(*paths, "paths")?;
                host_link.check("host_link")?;
                fabric_link.check("fabric_link")?;
                limit(2 * *hosts_per_tor as u64 + *paths as u64, "hosts_per_tor")?;
                let n_hosts = 2 * hosts_per_tor;
                for i in 0..n_hosts {
                    g.add_node(NodeKind::Host, format!("h{i}"));
                }
                let tor0 = g.add_node(NodeKind::Switch, "tor0".into());
                let tor1 = g.add_node(NodeKind::Switch, "tor1".into());
                let spine0 = tor1 + 1;
                for i in 0..*paths {
                    g.add_node(NodeKind::Switch, format!("spine{i}"));
                }
                for i in 0..n_hosts {
                    g.add_link(i, if i < *hosts_per_tor { tor0 } else { tor1 }, host_link);
                }
                for s in 0..*paths {
                    g.add_link(tor0, spine0 + s, fabric_link);
                    g.add_link(tor1, spine0 + s, fabric_link);
                }
            }
            TopologySpec::Dumbbell {
                left,
                right,
                host_link,
                bottleneck,
            } => {
                positive(*left, "left")?;
                positive(*right, "right")?;
                host_link.check("host_link")?;
                bottleneck.check("bottleneck")?;
                limit(*left as u64 + *right as u64, "left")?;
                for i in 0..left + right {
                    g.add_node(NodeKind::Host, format!("h{i}"));
                }
                let sw_l = g.add_node(NodeKind::Switch, "swL".into());
                let sw_r = g.add_node(NodeKind::Switch, "swR".into());
                for i in 0..left + right {
                    g.add_link(i, if i < *left { sw_l } else { sw_r }, host_link);
                }
                g.add_link(sw_l, sw_r, bottleneck);
            }
            TopologySpec::Edges {
                nodes,
                switches,
                links,
            } => {
                match nodes {
                    NodesSpec::Count(n) => {
                        positive(*n, "nodes")?;
                        limit(*n as u64, "nodes")?;
                        for i in 0..*n {
                            g.add_node(NodeKind::Host, format!("n{i}"));
                        }
                    }
                    NodesSpec::Names(names) => {
                        if names.is_empty() {
                            return Err(SpecError::new("nodes", "expected at least one node"));
                        }
                        let mut seen = HashMap::new();
                        for (i, name) in names.iter().enumerate() {
                            if name.is_empty() {
                                return Err(SpecError::new(
                                    format!("nodes[{i}]"),
                                    "node names must not be empty",
                                ));
                            }
                            if let Some(j) = seen.insert(name.as_str(), i) {
                                return Err(SpecError::new(
                                    format!("nodes[{i}]"),
                                    format!("duplicate node name {name:?} (also nodes[{j}])"),
                                ));
                            }
                            g.add_node(NodeKind::Host, name.clone());
                        }
                    }
                }
                let lookup = |g: &Graph, r: &NodeRef, path: String| -> Result<u32, SpecError> {
                    match r {
                        NodeRef::Id(i) if (*i as usize) < g.nodes.len() => Ok(*i),
                        NodeRef::Id(i) => Err(SpecError::new(
                            path,
                            format!("node {i} does not exist ({} nodes)", g.nodes.len()),
                        )),
                        NodeRef::Name(s) => g
                            .node_by_name(s)
                            .ok_or_else(|| SpecError::new(path, format!("no node named {s:?}"))),
                    }
                };
                for (i, s) in switches.iter().enumerate() {
                    let id = lookup(&g, s, format!("switches[{i}]"))?;
                    g.nodes[id as usize].kind = NodeKind::Switch;
                }
                for (i, e) in links.iter().enumerate() {
                    let a = lookup(&g, &e.a, format!("links[{i}].a"))?;
                    let b = lookup(&g, &e.b, format!("links[{i}].b"))?;
                    if a == b {
                        return Err(SpecError::new(
                            format!("links[{i}].b"),
                            format!("link joins node {a} to itself"),
                        ));
                    }
                    let l = LinkSpec {
                        rate: e.rate,
                        delay: e.delay,
                        loss: e.loss,
                    };
                    l.check(&format!("links[{i}]"))?;
                    g.add_link(a, b, &l);
                }
                if g.n_hosts() == 0 {
                    return Err(SpecError::new(
                        "switches",
                        "every node is a switch; a topology needs hosts",
                    ));
                }
            }
            TopologySpec::Hpcc { file, default_loss } => {
                if let Some(p) = default_loss {
                    if !(0.0..=1.0).contains(p) {
                        return Err(SpecError::new(
                            "default_loss",
                            "expected a loss probability between 0 and 1",
                        ));
                    }
                }
                let path = resolve(base_dir, file);
                g = crate::hpcc::read_topology(&path).map_err(|e| SpecError::new("file", e))?;
                if let Some(p) = default_loss {
                    for l in g.links.iter_mut().filter(|l| l.loss == 0.0) {
                        l.loss = *p;
                    }
                }
            }
        }
        Ok(g)
    }

    /// Number of hosts without building the graph (file-based kinds read the file).
    pub fn n_hosts(&self, base_dir: &Path) -> Result<u32, SpecError> {
        Ok(match self {
            TopologySpec::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => leaves * hosts_per_leaf,
            TopologySpec::FatTree { k, .. } => k * k * k / 4,
            TopologySpec::TwoTor { hosts_per_tor, .. } => 2 * hosts_per_tor,
            TopologySpec::Dumbbell { left, right, .. } => left + right,
            _ => self.build(base_dir)?.n_hosts(),
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod path_tests;
