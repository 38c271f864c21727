//! `pattern = "all-to-all"`: every host of a set sends to every other.

use super::{
    check_priority, check_size, e, host_list, FlowDesc, FlowIter, TrafficCtx, TrafficPattern,
    TrafficVolume, DEFAULT_DPORT, MAX_FLOWS,
};
use crate::units::{Bytes, Duration};
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every host of `hosts` (default: all) sends `size` bytes to every other one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct AllToAll {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<u32>>,
    pub size: Bytes,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

impl TrafficPattern for AllToAll {
    fn flows(&self, ctx: &TrafficCtx, _rng: RngStream) -> Result<FlowIter, crate::SpecError> {
        let size = check_size(self.size, "size")?;
        let priority = check_priority(self.priority)?;
        let dport = self.dport.unwrap_or(DEFAULT_DPORT);
        let hosts = host_list(&self.hosts, ctx.n_hosts)?;
        if hosts.len() < 2 {
            return Err(e("hosts", "all-to-all needs at least two hosts"));
        }
        let n = hosts.len() as u64;
        if n * (n - 1) > MAX_FLOWS {
            return Err(e(
                "hosts",
                format!(
                    "{} flows is more than braid generates ({MAX_FLOWS})",
                    n * (n - 1)
                ),
            ));
        }
        let start_ps = self.start.0;
        let pairs = hosts.clone().into_iter().flat_map(move |s| {
            hosts
                .clone()
                .into_iter()
                .filter(move |&d| d != s)
                .map(move |d| (s, d))
        });
        let count = (n * (n - 1)) as usize;
        Ok(FlowIter::new(
            pairs.map(move |(src, dst)| FlowDesc {
                src,
                dst,
                size,
                start_ps,
                priority,
                dport,
            }),
            count,
        ))
    }

    fn volume(&self, ctx: &TrafficCtx) -> Result<TrafficVolume, crate::SpecError> {
        let n = host_list(&self.hosts, ctx.n_hosts)?.len() as f64;
        let flows = n * (n - 1.0).max(0.0);
        Ok(TrafficVolume {
            flows,
            bytes: flows * self.size.0 as f64,
            last_start_ps: Some(self.start.0),
        })
    }
}
