//! Per-packet spraying: each packet independently takes a port of its group, uniformly at
//! random or in round-robin order (per group), whatever its flow. The load of a group's ports
//! then differs by at most one packet (round robin) or by the binomial spread (random), at the
//! price of reordering a flow's packets across paths of unequal delay: a go-back-N RC receiver
//! (braid's RC until selective repeat lands) treats every overtaken packet as a loss.

use super::{LbKind, LbSite, LoadBalancer, Pick};
use braid_engine::RngStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a sprayed packet's port is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SprayOrder {
    /// Uniformly at random, from the switch's own stream of the run's seed.
    #[default]
    Random,
    /// The group's ports in turn (one counter per group, as a switch keeps per ECMP group).
    RoundRobin,
}

/// `switch.lb = { kind = "spray", order = "random" | "round-robin" }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct SprayLb {
    #[serde(default)]
    pub order: SprayOrder,
}

impl LbKind for SprayLb {
    fn per_packet(&self) -> Option<&'static str> {
        Some("spray")
    }
    fn build(&self, site: &LbSite<'_>) -> Result<Option<Box<dyn LoadBalancer>>, String> {
        Ok(Some(match self.order {
            SprayOrder::Random => Box::new(Random {
                rng: RngStream::new(site.seed, "lb-spray", &[site.switch as u64]),
            }),
            SprayOrder::RoundRobin => Box::new(RoundRobin { next: Vec::new() }),
        }))
    }
}

struct Random {
    rng: RngStream,
}

impl LoadBalancer for Random {
    fn pick(&mut self, at: &Pick<'_>) -> usize {
        self.rng.below(at.candidates.len() as u64) as usize
    }
}

struct RoundRobin {
    /// Per group id: the index its next packet takes.
    next: Vec<u32>,
}

impl LoadBalancer for RoundRobin {
    fn pick(&mut self, at: &Pick<'_>) -> usize {
        let g = at.gid as usize;
        if g >= self.next.len() {
            self.next.resize(g + 1, 0);
        }
        let i = self.next[g] as usize % at.candidates.len();
        self.next[g] = ((i + 1) % at.candidates.len()) as u32;
        i
    }
}
