//! `kind = "leaf-spine"`: a two-tier Clos.

use super::{limit, positive, Graph, LinkSpec, NodeKind, SpecError, TopologyKind, TopologySize};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Two-tier Clos: every leaf connects to every spine. Hosts `h0..`, leaves `leaf{i}`,
/// spines `spine{i}`; host i is under leaf ⌊i / hosts_per_leaf⌋.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct LeafSpine {
    pub spines: u32,
    pub leaves: u32,
    pub hosts_per_leaf: u32,
    pub host_link: LinkSpec,
    pub fabric_link: LinkSpec,
}

impl TopologyKind for LeafSpine {
    fn build(&self, _base_dir: &Path) -> Result<Graph, SpecError> {
        let LeafSpine {
            spines,
            leaves,
            hosts_per_leaf,
            host_link,
            fabric_link,
        } = self;
        positive(*spines, "spines")?;
        positive(*leaves, "leaves")?;
        positive(*hosts_per_leaf, "hosts_per_leaf")?;
        host_link.check("host_link")?;
        fabric_link.check("fabric_link")?;
        let (s, l, h) = (*spines as u64, *leaves as u64, *hosts_per_leaf as u64);
        limit(s + l + l * h, "hosts_per_leaf")?;
        let mut g = Graph::default();
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
        Ok(g)
    }

    fn n_hosts(&self, _base_dir: &Path) -> Result<u32, SpecError> {
        Ok(self.leaves * self.hosts_per_leaf)
    }

    fn size(&self, _base_dir: &Path) -> Result<TopologySize, SpecError> {
        let leaves = self.leaves as u64;
        Ok(TopologySize {
            hosts: leaves * self.hosts_per_leaf as u64,
            switches: leaves + self.spines as u64,
            edge_switches: leaves,
            fabric_ports: 2 * leaves * self.spines as u64,
            host_rate_bps: self.host_link.rate.0,
        })
    }
}
