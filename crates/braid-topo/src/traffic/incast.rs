//! `pattern = "incast"`: many senders, one receiver, all at once.

use super::{
    check_host, check_priority, check_size, e, FlowDesc, FlowIter, TrafficCtx, TrafficPattern,
    TrafficVolume, DEFAULT_DPORT,
};
use crate::units::{Bytes, Duration};
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// `senders` of an incast: a count (the lowest-numbered hosts other than the receiver) or a list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a number of senders (e.g. 8) or a list of host indices (e.g. [1, 2, 3])"
)]
pub enum Senders {
    Count(u32),
    List(Vec<u32>),
}

/// `senders` (a list of hosts, or a count: the lowest-numbered hosts other than the receiver)
/// each send `size` bytes to `receiver` at `start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Incast {
    pub senders: Senders,
    pub receiver: u32,
    pub size: Bytes,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

impl TrafficPattern for Incast {
    fn flows(&self, ctx: &TrafficCtx, _rng: RngStream) -> Result<FlowIter, crate::SpecError> {
        let n_hosts = ctx.n_hosts;
        let size = check_size(self.size, "size")?;
        let priority = check_priority(self.priority)?;
        let dport = self.dport.unwrap_or(DEFAULT_DPORT);
        let receiver = check_host(self.receiver, n_hosts, "receiver")?;
        let senders: Vec<u32> = match &self.senders {
            Senders::Count(c) => {
                if *c == 0 || *c >= n_hosts {
                    return Err(e(
                        "senders",
                        format!(
                            "expected 1 to {} senders (hosts other than the receiver), got {c}",
                            n_hosts.saturating_sub(1)
                        ),
                    ));
                }
                (0..n_hosts)
                    .filter(|&h| h != receiver)
                    .take(*c as usize)
                    .collect()
            }
            Senders::List(v) => {
                if v.is_empty() {
                    return Err(e("senders", "expected at least one sender"));
                }
                let mut seen = HashSet::new();
                for (i, &h) in v.iter().enumerate() {
                    check_host(h, n_hosts, format!("senders[{i}]"))?;
                    if h == receiver {
                        return Err(e(
                            format!("senders[{i}]"),
                            format!("host {h} is the receiver"),
                        ));
                    }
                    if !seen.insert(h) {
                        return Err(e(
                            format!("senders[{i}]"),
                            format!("host {h} is listed twice"),
                        ));
                    }
                }
                v.clone()
            }
        };
        let start_ps = self.start.0;
        let count = senders.len();
        Ok(FlowIter::new(
            senders.into_iter().map(move |s| FlowDesc {
                src: s,
                dst: receiver,
                size,
                start_ps,
                priority,
                dport,
            }),
            count,
        ))
    }

    fn volume(&self, ctx: &TrafficCtx) -> Result<TrafficVolume, crate::SpecError> {
        let flows = match &self.senders {
            Senders::Count(c) => (*c).min(ctx.n_hosts.saturating_sub(1)) as f64,
            Senders::List(v) => v.len() as f64,
        };
        Ok(TrafficVolume {
            flows,
            bytes: flows * self.size.0 as f64,
            last_start_ps: Some(self.start.0),
        })
    }
}
