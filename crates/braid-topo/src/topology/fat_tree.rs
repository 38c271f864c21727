//! `kind = "fat-tree"`: the 3-tier k-ary fat-tree of Al-Fares et al.

use super::{limit, Graph, LinkSpec, NodeKind, SpecError, TopologyKind, TopologySize};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// 3-tier k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge (`edge{i}`) and k/2 aggregation
/// (`agg{i}`) switches, (k/2)² core switches (`core{i}`), k³/4 hosts. `core_link` (aggregation–
/// core) defaults to `fabric_link` (edge–aggregation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct FatTree {
    pub k: u32,
    pub host_link: LinkSpec,
    pub fabric_link: LinkSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_link: Option<LinkSpec>,
}

impl TopologyKind for FatTree {
    fn build(&self, _base_dir: &Path) -> Result<Graph, SpecError> {
        let FatTree {
            k,
            host_link,
            fabric_link,
            core_link,
        } = self;
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
        let mut g = Graph::default();
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
        Ok(g)
    }

    fn n_hosts(&self, _base_dir: &Path) -> Result<u32, SpecError> {
        Ok(self.k * self.k * self.k / 4)
    }

    fn size_key(&self) -> &'static str {
        "k"
    }

    fn size(&self, _base_dir: &Path) -> Result<TopologySize, SpecError> {
        let k = self.k as u64;
        // k³/4 hosts; k²/2 edge, k²/2 aggregation and k²/4 core switches.
        Ok(TopologySize {
            hosts: k * k * k / 4,
            switches: 5 * k * k / 4,
            edge_switches: k * k / 2,
            // k³/4 edge–aggregation and k³/4 aggregation–core links, two ports each.
            fabric_ports: k * k * k,
            host_rate_bps: self.host_link.rate.0,
        })
    }
}
