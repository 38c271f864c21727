//! `pattern = "poisson"`: Poisson flow arrivals at a given load, sizes from a CDF (as HPCC's
//! traffic_gen.py). Flows come out in arrival order, drawn as they are asked for.

use super::{
    check_priority, e, host_list, FlowDesc, FlowIter, TrafficCtx, TrafficPattern, TrafficVolume,
    DEFAULT_DPORT, MAX_FLOWS,
};
use crate::cdf::Cdf;
use crate::units::Duration;
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Poisson flow arrivals at every host of `hosts` (default: all), each host offering `load`
/// (0–1) of its link rate; destinations uniform among the other hosts; sizes from `cdf`
/// ("web-search", "data-mining", "fb-hadoop", "ali-storage", "google-rpc", or an HPCC-format
/// CDF file). Arrivals run from `start` for `duration`, or until `flows` flows (whichever
/// comes first when both are given). As HPCC's traffic_gen.py.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Poisson {
    pub load: f64,
    pub cdf: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u64>,
    #[serde(default)]
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

/// What arrivals are drawn from, once the table is checked.
struct Arrival {
    priority: u8,
    hosts: Vec<u32>,
    dist: Cdf,
    /// Mean inter-arrival time per host, in ps.
    mean_ia_ps: f64,
}

impl Poisson {
    /// Checks the table and works out its arrival process.
    fn arrival(&self, ctx: &TrafficCtx) -> Result<Arrival, crate::SpecError> {
        let Poisson {
            load,
            cdf,
            duration,
            flows,
            hosts,
            priority,
            ..
        } = self;
        let priority = check_priority(*priority)?;
        if !(load.is_finite() && *load > 0.0 && *load <= 1.0) {
            return Err(e(
                "load",
                format!(
                    "expected a load in (0, 1] (fraction of each host's link rate), got {load}"
                ),
            ));
        }
        let hosts = host_list(hosts, ctx.n_hosts)?;
        if hosts.len() < 2 {
            return Err(e("hosts", "Poisson traffic needs at least two hosts"));
        }
        if ctx.host_rate_bps == 0 {
            return Err(e("load", "the hosts' link rate is unknown or zero"));
        }
        let dist = Cdf::load(cdf, ctx.base_dir).map_err(|m| e("cdf", m))?;
        let mean_size = dist.mean();
        if mean_size <= 0.0 {
            return Err(e("cdf", "the distribution's mean size is zero"));
        }
        if duration.is_none() && flows.is_none() {
            return Err(e("duration", "give `duration` (arrivals from `start` for this long) or `flows` (a number of flows), or both"));
        }
        if *duration == Some(Duration(0)) {
            return Err(e("duration", "must be positive"));
        }
        if *flows == Some(0) {
            return Err(e("flows", "must be at least 1"));
        }
        // Mean inter-arrival time per host, in ps: size*8 bits at load*rate.
        let mean_ia_ps = mean_size * 8.0 / (load * ctx.host_rate_bps as f64) * 1e12;
        Ok(Arrival {
            priority,
            hosts,
            dist,
            mean_ia_ps,
        })
    }

    /// The expected number of arrivals: `flows`, or each host's `duration / mean_ia` (a Poisson
    /// process's mean count), whichever ends the arrivals first.
    fn expected(&self, a: &Arrival) -> f64 {
        let by_time = self
            .duration
            .map(|d| d.0 as f64 / a.mean_ia_ps * a.hosts.len() as f64);
        match (by_time, self.flows) {
            (Some(t), Some(f)) => t.min(f as f64),
            (Some(t), None) => t,
            (None, Some(f)) => f as f64,
            (None, None) => 0.0,
        }
    }
}

impl TrafficPattern for Poisson {
    fn flows(&self, ctx: &TrafficCtx, mut rng: RngStream) -> Result<FlowIter, crate::SpecError> {
        let Arrival {
            priority,
            hosts,
            dist,
            mean_ia_ps,
        } = self.arrival(ctx)?;
        let Poisson {
            duration,
            flows,
            start,
            dport,
            ..
        } = self;
        let dport = dport.unwrap_or(DEFAULT_DPORT);
        let expected = match (duration, flows) {
            (_, Some(f)) => *f as f64,
            (Some(d), None) => d.0 as f64 / mean_ia_ps * hosts.len() as f64,
            (None, None) => unreachable!(),
        };
        if expected > MAX_FLOWS as f64 {
            return Err(e(
                if flows.is_some() { "flows" } else { "duration" },
                format!("about {expected:.0} flows is more than braid generates ({MAX_FLOWS})"),
            ));
        }
        let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(hosts.len());
        for (slot, _) in hosts.iter().enumerate() {
            let first = start.0.saturating_add(draw_ia(&mut rng, mean_ia_ps));
            heap.push(Reverse((first, slot as u32)));
        }
        Ok(FlowIter::new(
            Arrivals {
                rng,
                heap,
                hosts,
                dist,
                mean_ia_ps,
                end: duration.map(|d| start.0.saturating_add(d.0)),
                left: flows.unwrap_or(u64::MAX),
                priority,
                dport,
            },
            // As many as asked for, or the expected count of the duration (and some slack).
            expected.min(MAX_FLOWS as f64) as usize + 16,
        ))
    }

    fn volume(&self, ctx: &TrafficCtx) -> Result<TrafficVolume, crate::SpecError> {
        let a = self.arrival(ctx)?;
        let flows = self.expected(&a);
        Ok(TrafficVolume {
            flows,
            bytes: flows * a.dist.mean(),
            // Arrivals stop at `start + duration` (earlier if `flows` runs out first).
            last_start_ps: self.duration.map(|d| self.start.0.saturating_add(d.0)),
        })
    }
}

/// The next inter-arrival time at one host, picoseconds.
fn draw_ia(rng: &mut RngStream, mean_ia_ps: f64) -> u64 {
    rng.exponential(mean_ia_ps).round() as u64
}

/// The arrivals of every host merged in time order: each host's next arrival waits in a heap;
/// the earliest is drawn a destination and a size and replaced by that host's following one.
struct Arrivals {
    rng: RngStream,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    hosts: Vec<u32>,
    dist: Cdf,
    mean_ia_ps: f64,
    /// Arrivals at or after this are dropped (`start + duration`).
    end: Option<u64>,
    /// Flows still to yield (`flows`).
    left: u64,
    priority: u8,
    dport: u16,
}

impl Iterator for Arrivals {
    type Item = FlowDesc;

    fn next(&mut self) -> Option<FlowDesc> {
        let n = self.hosts.len() as u64;
        loop {
            if self.left == 0 {
                return None;
            }
            let Reverse((t, slot)) = self.heap.pop()?;
            if self.end.is_some_and(|end| t >= end) {
                continue; // this host is done; the others may still have arrivals
            }
            let mut d = self.rng.below(n - 1) as u32;
            if d >= slot {
                d += 1;
            }
            let size = self.dist.sample(self.rng.uniform());
            let next = t.saturating_add(draw_ia(&mut self.rng, self.mean_ia_ps));
            self.heap.push(Reverse((next, slot)));
            self.left -= 1;
            return Some(FlowDesc {
                src: self.hosts[slot as usize],
                dst: self.hosts[d as usize],
                size,
                start_ps: t,
                priority: self.priority,
                dport: self.dport,
            });
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, usize::try_from(self.left).ok())
    }
}
