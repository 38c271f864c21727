//! `pattern = "hpcc"`: an HPCC ns-3 flow file.

#[allow(unused_imports)] // for the doc link
use super::TrafficSpec;
use super::{e, FlowDesc, FlowIter, NodeMap, TrafficCtx, TrafficPattern, TrafficVolume};
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
        // Read whole: a bad line anywhere refuses the file before any flow runs.
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
