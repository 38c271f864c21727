//! `pattern = "permutation"`: every host sends once and receives once.

use super::{
    check_priority, check_size, e, host_list, FlowDesc, FlowIter, TrafficCtx, TrafficPattern,
    TrafficVolume, DEFAULT_DPORT,
};
use crate::units::{Bytes, Duration};
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every host sends `size` bytes to another host, each host receiving once: a random
/// derangement of `hosts` (default: all hosts). With `cross = true` the host list is split in
/// two halves (for two-tor and dumbbell: the two sides) and each host of the first half sends
/// to a distinct random host of the second; `both_ways = true` adds the reverse direction
/// (a second, independent matching).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Permutation {
    pub size: Bytes,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<u32>>,
    #[serde(default)]
    pub cross: bool,
    #[serde(default)]
    pub both_ways: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

impl TrafficPattern for Permutation {
    fn flows(&self, ctx: &TrafficCtx, mut rng: RngStream) -> Result<FlowIter, crate::SpecError> {
        let size = check_size(self.size, "size")?;
        let priority = check_priority(self.priority)?;
        let dport = self.dport.unwrap_or(DEFAULT_DPORT);
        let hosts = host_list(&self.hosts, ctx.n_hosts)?;
        let start = self.start;
        let mk = |src: u32, dst: u32| FlowDesc {
            src,
            dst,
            size,
            start_ps: start.0,
            priority,
            dport,
        };
        if self.both_ways && !self.cross {
            return Err(e("both_ways", "only applies with cross = true"));
        }
        let flows: Vec<FlowDesc> = if self.cross {
            if hosts.len() < 2 || hosts.len() % 2 != 0 {
                return Err(e(
                    "cross",
                    format!(
                        "needs an even number of hosts (two equal halves), got {}",
                        hosts.len()
                    ),
                ));
            }
            let half = hosts.len() / 2;
            let (a, b) = hosts.split_at(half);
            let mut bs = b.to_vec();
            rng.shuffle(&mut bs);
            let mut flows: Vec<FlowDesc> = a.iter().zip(&bs).map(|(&s, &d)| mk(s, d)).collect();
            if self.both_ways {
                let mut as_ = a.to_vec();
                rng.shuffle(&mut as_);
                flows.extend(b.iter().zip(&as_).map(|(&s, &d)| mk(s, d)));
            }
            flows
        } else {
            if hosts.len() < 2 {
                return Err(e("hosts", "a permutation needs at least two hosts"));
            }
            // Uniform random derangement by rejection (expected e ≈ 2.7 shuffles).
            let n = hosts.len();
            let mut perm: Vec<usize> = (0..n).collect();
            loop {
                rng.shuffle(&mut perm);
                if perm.iter().enumerate().all(|(i, &p)| i != p) {
                    break;
                }
            }
            (0..n).map(|i| mk(hosts[i], hosts[perm[i]])).collect()
        };
        Ok(flows.into())
    }

    fn volume(&self, ctx: &TrafficCtx) -> Result<TrafficVolume, crate::SpecError> {
        let n = host_list(&self.hosts, ctx.n_hosts)?.len() as f64;
        // Cross: one flow per host of the first half, and as many back with `both_ways`.
        let flows = match (self.cross, self.both_ways) {
            (false, _) => n,
            (true, false) => (n / 2.0).floor(),
            (true, true) => 2.0 * (n / 2.0).floor(),
        };
        Ok(TrafficVolume {
            flows,
            bytes: flows * self.size.0 as f64,
            last_start_ps: Some(self.start.0),
        })
    }
}
