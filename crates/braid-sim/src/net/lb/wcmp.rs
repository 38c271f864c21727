//! Weighted ECMP (WCMP, Zhou et al., EuroSys '14): per-flow hashing as ECMP, but onto the
//! group's ports in proportion to weights, so that an asymmetric fabric (a slower or missing
//! uplink) is loaded by capacity rather than evenly. A port's weight defaults to its link rate
//! (the paper's weights follow the capacity behind each next hop; here the local link's);
//! `weights` sets it per port, named by switch and neighbour.

use super::{LbKind, LbSite, LoadBalancer, Pick};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// `switch.lb = { kind = "wcmp", weights = [{ node = "leaf0", peer = "spine1", weight = 1 }] }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(inline)]
pub struct WcmpLb {
    /// Explicit weights; every other port weighs its link rate in Gbit/s.
    pub weights: Vec<WcmpWeight>,
}

/// The weight of switch `node`'s ports that lead to `peer` (names or numeric node ids).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WcmpWeight {
    pub node: String,
    pub peer: String,
    pub weight: f64,
}

impl LbKind for WcmpLb {
    fn build(&self, site: &LbSite<'_>) -> Result<Option<Box<dyn LoadBalancer>>, String> {
        let mut weight: Vec<f64> = site.ports.iter().map(|p| p.rate as f64 / 1e9).collect();
        for (i, w) in self.weights.iter().enumerate() {
            if !(w.weight > 0.0 && w.weight.is_finite()) {
                return Err(format!(
                    "switch.lb.weights[{i}].weight: expected a positive number, not {}",
                    w.weight
                ));
            }
            if w.node != site.name {
                continue;
            }
            let mut found = false;
            for (p, &peer) in site.peers.iter().enumerate() {
                if peer == w.peer {
                    weight[p] = w.weight;
                    found = true;
                }
            }
            if !found {
                return Err(format!(
                    "switch.lb.weights[{i}].peer: {:?} is not a neighbour of {:?}",
                    w.peer, w.node
                ));
            }
        }
        Ok(Some(Box::new(Wcmp {
            weight,
            cumulative: HashMap::new(),
        })))
    }

    fn check(&self, is_node: &dyn Fn(&str) -> bool) -> Result<(), String> {
        for (i, w) in self.weights.iter().enumerate() {
            if !is_node(&w.node) {
                return Err(format!(
                    "switch.lb.weights[{i}].node: no switch named {:?}",
                    w.node
                ));
            }
        }
        Ok(())
    }
}

struct Wcmp {
    /// Per port number.
    weight: Vec<f64>,
    /// Per group id: its ports' cumulative weights, normalised to end at 1.
    cumulative: HashMap<u32, Vec<f64>>,
}

impl LoadBalancer for Wcmp {
    fn pick(&mut self, at: &Pick<'_>) -> usize {
        let weight = &self.weight;
        let c = self.cumulative.entry(at.gid).or_insert_with(|| {
            let total: f64 = at.candidates.iter().map(|&p| weight[p as usize]).sum();
            let mut acc = 0.0;
            at.candidates
                .iter()
                .map(|&p| {
                    acc += weight[p as usize];
                    acc / total
                })
                .collect()
        });
        // The hash's top 53 bits as a point in [0, 1): the flow's place on the weighted line.
        let x = (at.hash >> 11) as f64 / (1u64 << 53) as f64;
        c.iter().position(|&edge| x < edge).unwrap_or(c.len() - 1)
    }
}
