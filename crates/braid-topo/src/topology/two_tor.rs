//! `kind = "two-tor"`: the MP-RDMA testbed.

use super::{limit, positive, Graph, LinkSpec, NodeKind, SpecError, TopologyKind, TopologySize};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The MP-RDMA testbed: `hosts_per_tor` hosts under each of `tor0` and `tor1`, and `paths`
/// spine switches (`spine{i}`) each linked to both ToRs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct TwoTor {
    pub hosts_per_tor: u32,
    pub paths: u32,
    pub host_link: LinkSpec,
    pub fabric_link: LinkSpec,
}

impl TopologyKind for TwoTor {
    fn build(&self, _base_dir: &Path) -> Result<Graph, SpecError> {
        let TwoTor {
            hosts_per_tor,
            paths,
            host_link,
            fabric_link,
        } = self;
        positive(*hosts_per_tor, "hosts_per_tor")?;
        positive(*paths, "paths")?;
        host_link.check("host_link")?;
        fabric_link.check("fabric_link")?;
        limit(2 * *hosts_per_tor as u64 + *paths as u64, "hosts_per_tor")?;
        let mut g = Graph::default();
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
        Ok(g)
    }

    fn n_hosts(&self, _base_dir: &Path) -> Result<u32, SpecError> {
        Ok(2 * self.hosts_per_tor)
    }

    fn size(&self, _base_dir: &Path) -> Result<TopologySize, SpecError> {
        Ok(TopologySize {
            hosts: 2 * self.hosts_per_tor as u64,
            switches: 2 + self.paths as u64,
            edge_switches: 2,
            fabric_ports: 4 * self.paths as u64,
            host_rate_bps: self.host_link.rate.0,
        })
    }
}
