//! `kind = "edges"`: an explicit graph, its nodes and links listed in the scenario.

use super::{default_loss, limit, positive, Graph, LinkSpec, NodeKind, SpecError, TopologyKind};
use crate::units::{Duration, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// A node named by id or by name (`"spine0"`, `"n12"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a node id (e.g. 3) or a node name (e.g. \"spine0\")"
)]
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
#[serde(
    untagged,
    expecting = "expected a number of nodes (e.g. 6) or a list of names (e.g. [\"h0\", \"sw0\"])"
)]
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

/// An explicit graph: `nodes` (a count or a list of names), which of them are `switches`
/// (ids or names; the others are hosts), and the `links`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Edges {
    pub nodes: NodesSpec,
    pub switches: Vec<NodeRef>,
    pub links: Vec<EdgeSpec>,
}

impl TopologyKind for Edges {
    fn size_key(&self) -> &'static str {
        "nodes"
    }

    fn build(&self, _base_dir: &Path) -> Result<Graph, SpecError> {
        let Edges {
            nodes,
            switches,
            links,
        } = self;
        let mut g = Graph::default();
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
        Ok(g)
    }
}
