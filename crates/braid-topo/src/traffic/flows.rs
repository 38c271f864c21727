//! `pattern = "flows"`: an explicit list of flows.

use super::{
    check_host, check_priority, check_size, e, FlowDesc, FlowIter, TrafficCtx, TrafficPattern,
    TrafficVolume, DEFAULT_DPORT,
};
use crate::units::{Bytes, Duration};
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One explicit flow of the `flows` pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: Bytes,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

/// An explicit list of flows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Flows {
    pub flows: Vec<FlowSpec>,
}

impl TrafficPattern for Flows {
    fn flows(&self, ctx: &TrafficCtx, _rng: RngStream) -> Result<FlowIter, crate::SpecError> {
        let mut out = Vec::with_capacity(self.flows.len());
        for (i, f) in self.flows.iter().enumerate() {
            let p = format!("flows[{i}]");
            let src = check_host(f.src, ctx.n_hosts, format!("{p}.src"))?;
            let dst = check_host(f.dst, ctx.n_hosts, format!("{p}.dst"))?;
            if src == dst {
                return Err(e(format!("{p}.dst"), "must differ from src"));
            }
            let size = check_size(f.size, &format!("{p}.size"))?;
            let priority = check_priority(f.priority).map_err(|x| x.within(&p))?;
            out.push(FlowDesc {
                src,
                dst,
                size,
                start_ps: f.start.0,
                priority,
                dport: f.dport.unwrap_or(DEFAULT_DPORT),
            });
        }
        Ok(out.into())
    }

    fn volume(&self, _ctx: &TrafficCtx) -> Result<TrafficVolume, crate::SpecError> {
        Ok(TrafficVolume {
            flows: self.flows.len() as f64,
            bytes: self.flows.iter().map(|f| f.size.0 as f64).sum(),
            last_start_ps: self.flows.iter().map(|f| f.start.0).max(),
        })
    }
}
