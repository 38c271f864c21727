//! `kind = "dumbbell"`: two switches joined by one bottleneck link.

use super::{limit, positive, Graph, LinkSpec, NodeKind, SpecError, TopologyKind, TopologySize};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// `left` hosts on `swL`, `right` hosts on `swR`, the two switches joined by `bottleneck`.
/// Hosts 0..left are on the left.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Dumbbell {
    pub left: u32,
    pub right: u32,
    pub host_link: LinkSpec,
    pub bottleneck: LinkSpec,
}

impl TopologyKind for Dumbbell {
    fn build(&self, _base_dir: &Path) -> Result<Graph, SpecError> {
        let Dumbbell {
            left,
            right,
            host_link,
            bottleneck,
        } = self;
        positive(*left, "left")?;
        positive(*right, "right")?;
        host_link.check("host_link")?;
        bottleneck.check("bottleneck")?;
        limit(*left as u64 + *right as u64, "left")?;
        let mut g = Graph::default();
        for i in 0..left + right {
            g.add_node(NodeKind::Host, format!("h{i}"));
        }
        let sw_l = g.add_node(NodeKind::Switch, "swL".into());
        let sw_r = g.add_node(NodeKind::Switch, "swR".into());
        for i in 0..left + right {
            g.add_link(i, if i < *left { sw_l } else { sw_r }, host_link);
        }
        g.add_link(sw_l, sw_r, bottleneck);
        Ok(g)
    }

    fn n_hosts(&self, _base_dir: &Path) -> Result<u32, SpecError> {
        Ok(self.left + self.right)
    }

    fn size(&self, _base_dir: &Path) -> Result<TopologySize, SpecError> {
        Ok(TopologySize {
            hosts: self.left as u64 + self.right as u64,
            switches: 2,
            edge_switches: 2,
            fabric_ports: 2,
            host_rate_bps: self.host_link.rate.0,
        })
    }
}
