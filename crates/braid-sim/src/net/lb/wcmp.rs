//! Weighted ECMP (WCMP, Zhou et al., EuroSys '14): per-flow hashing as ECMP, but onto the
//! group's ports in proportion to weights, so that an asymmetric fabric (a slower or missing
//! uplink, or a slower link further on) is loaded by capacity rather than evenly. A port's
//! weight defaults, as in the paper, to the capacity of the paths behind that next hop towards
//! the packet's destination (its own link rate, or less if the links past it carry less:
//! `world/path_capacity.rs`), in Gbit/s; `weights` sets it per port, named by switch and
//! neighbour.

use super::{LbKind, LbSite, LoadBalancer, Pick};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `switch.lb = { kind = "wcmp", weights = [{ node = "leaf0", peer = "spine1", weight = 1 }] }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(inline)]
pub struct WcmpLb {
    /// Explicit weights; every other port weighs the capacity of its paths in Gbit/s.
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
        let mut weight: Vec<Option<f64>> = vec![None; site.ports.len()];
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
                    weight[p] = Some(w.weight);
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
        Ok(Some(Box::new(Wcmp { weight })))
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
    /// Per port number: its explicit weight, if `weights` names it.
    weight: Vec<Option<f64>>,
}

impl Wcmp {
    /// The candidate a flow's hash lands on (a function of the header and the weights only).
    fn choose(&self, at: &Pick<'_>) -> usize {
        // Weighed per pick, not cached per group: a group serves many destinations, each with
        // its own capacities behind the same ports (and failover changes them).
        let w = |i: usize| {
            let p = at.candidates[i] as usize;
            self.weight[p].unwrap_or_else(|| match at.behind.get(i) {
                Some(&c) => c / 1e9,
                None => at.ports[p].rate as f64 / 1e9,
            })
        };
        let n = at.candidates.len();
        let total: f64 = (0..n).map(w).sum();
        if !(total > 0.0 && total.is_finite()) {
            // No capacity anywhere (every path behind is down): the plain hash.
            return super::ecmp::index_of(at.hash, n);
        }
        // The hash's top 53 bits as a point in [0, total): the flow's place on the weighted line.
        let x = (at.hash >> 11) as f64 / (1u64 << 53) as f64 * total;
        let mut acc = 0.0;
        for i in 0..n {
            acc += w(i);
            if x < acc {
                return i;
            }
        }
        n - 1
    }
}

impl LoadBalancer for Wcmp {
    fn pick(&mut self, at: &Pick<'_>) -> usize {
        self.choose(at)
    }

    fn replay(&self, at: &Pick<'_>) -> Option<usize> {
        Some(self.choose(at))
    }

    fn wants_path_capacity(&self) -> bool {
        true
    }
}
