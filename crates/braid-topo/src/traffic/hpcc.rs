//! `pattern = "hpcc"`: an HPCC ns-3 flow file.

#[allow(unused_imports)] // for the doc link
use super::TrafficSpec;
use super::{e, FlowIter, NodeMap, TrafficCtx, TrafficPattern, TrafficVolume};
use crate::hpcc;
use crate::topology::resolve;
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An HPCC ns-3 flow file (count, then `src dst priority dport size start_s`). Its src/dst
/// are node ids of the HPCC topology: they are mapped to host indices through the scenario's
/// graph (see [`TrafficSpec::generate_on`]) or, when `topology` names the HPCC topology file,
/// through that file. Start times are kept as given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Hpcc {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
}

impl TrafficPattern for Hpcc {
    fn flows(&self, ctx: &TrafficCtx, _rng: RngStream) -> Result<FlowIter, crate::SpecError> {
        let n_hosts = ctx.n_hosts;
        let path = resolve(ctx.base_dir, &self.file);
        let raw = hpcc::read_flows(&path).map_err(|m| e("file", m))?;
        let topo_graph;
        let map = match &self.topology {
            Some(t) => {
                topo_graph =
                    hpcc::read_topology(&resolve(ctx.base_dir, t)).map_err(|m| e("topology", m))?;
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
            None => ctx.map,
        };
        let out = match map {
            NodeMap::Identity(n) => hpcc::to_hosts(&path, &raw, |id: u32| {
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
                hpcc::to_hosts(&path, &raw, |id| hpcc::graph_host(&idx, id))
            }
        }
        .map_err(|m| e("file", m))?;
        Ok(out.into())
    }

    fn volume(&self, ctx: &TrafficCtx) -> Result<TrafficVolume, crate::SpecError> {
        // The file is read whole (it is size-capped), as `flows` reads it: its sizes are known.
        let raw = hpcc::read_flows(&resolve(ctx.base_dir, &self.file)).map_err(|m| e("file", m))?;
        Ok(TrafficVolume {
            flows: raw.len() as f64,
            bytes: raw.iter().map(|f| f.size as f64).sum(),
            last_start_ps: raw.iter().map(|f| f.start_ps).max(),
        })
    }
}
