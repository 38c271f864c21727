//! The ports `measure.queues` and `measure.pcap.ports` name: the spec as a scenario writes it
//! ("node:port", "all-fabric", or `{ node, peer }`) and its resolution against the built world.

use crate::api::ScenarioError;
use crate::build::err;
use crate::world::{Role, World};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A sampled queue: "node:port" / "all-fabric", or a port named by the neighbour it faces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected \"node:port\" (e.g. \"tor0:5\"), \"all-fabric\" or { node = \"tor0\", peer = \"spine1\" }"
)]
pub enum QueueSpec {
    Name(String),
    Facing(QueueFacing),
}

/// The egress ports of `node` (name or numeric id) that lead to `peer`, as `switch.ecn.by_port`
/// names them: a port index depends on the topology builder, a neighbour does not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueFacing {
    pub node: String,
    pub peer: String,
}

/// The ports a port spec names (`measure.queues`, `measure.pcap.ports`): "node:port",
/// "all-fabric" (every switch port that faces a switch) or `{ node, peer }` (every port of
/// `node` that faces `peer`), each as (node, port, "node:port").
pub(crate) fn resolve_ports(
    world: &World,
    spec: &QueueSpec,
    path: &str,
    names: &HashMap<String, u32>,
) -> Result<Vec<(u32, u16, String)>, ScenarioError> {
    let path = path.to_string();
    let spec = match spec {
        QueueSpec::Name(s) => s.as_str(),
        QueueSpec::Facing(f) => return facing_ports(world, f, &path, names),
    };
    let mut out = vec![];
    if spec == "all-fabric" {
        for (ni, node) in world.nodes.iter().enumerate() {
            if let Role::Switch(_) = node.role {
                for (pi, p) in world.node_ports(ni as u32).iter().enumerate() {
                    if matches!(world.nodes[p.peer_node as usize].role, Role::Switch(_)) {
                        out.push((ni as u32, pi as u16, format!("{}:{}", node.name, pi)));
                    }
                }
            }
        }
        return Ok(out);
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
    if pi as usize >= world.node_ports(ni).len() {
        return Err(err(
            &path,
            format!("{node} has {} ports", world.node_ports(ni).len()),
        ));
    }
    out.push((ni, pi, spec.to_string()));
    Ok(out)
}

/// `{ node, peer }`: every port of `node` that faces `peer` (several when parallel links join
/// them), named "node:port" in the results like the other forms.
fn facing_ports(
    world: &World,
    f: &QueueFacing,
    path: &str,
    names: &HashMap<String, u32>,
) -> Result<Vec<(u32, u16, String)>, ScenarioError> {
    let n_nodes = world.nodes.len();
    let resolve = |key: &str, name: &str| -> Result<u32, ScenarioError> {
        names
            .get(name)
            .copied()
            .or_else(|| name.parse::<u32>().ok().filter(|&x| (x as usize) < n_nodes))
            .ok_or_else(|| err(format!("{path}.{key}"), format!("no node named {name:?}")))
    };
    let node = resolve("node", &f.node)?;
    let peer = resolve("peer", &f.peer)?;
    let n = world.node_ports(node);
    let ports: Vec<u16> = (0..n.len() as u16)
        .filter(|&pi| n[pi as usize].peer_node == peer)
        .collect();
    if ports.is_empty() {
        return Err(err(
            format!("{path}.peer"),
            format!("{} has no link to {}", f.node, f.peer),
        ));
    }
    Ok(ports
        .into_iter()
        .map(|pi| {
            (
                node,
                pi,
                format!("{}:{}", world.nodes[node as usize].name, pi),
            )
        })
        .collect())
}
