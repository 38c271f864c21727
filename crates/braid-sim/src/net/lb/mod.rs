//! Switch load balancing: how a switch chooses among the equal-cost egress ports (the ECMP
//! group) its route gives for a packet. One policy per switch, chosen by `switch.lb`
//! (`kind = "ecmp" | "spray" | "adaptive" | "flowlet" | "wcmp"`); each kind is one file here
//! whose config is its factory ([`LbKind`]) and whose state is a [`LoadBalancer`].
//!
//! ECMP, the default, builds no balancer: its choice is the 5-tuple hash alone, which the hop
//! computes when the packet is put on the wire upstream (`World::egress_at`), bit for bit as
//! before policies existed. Every other kind chooses when the packet arrives at the switch,
//! from the switch's own state at that instant (queues, flowlet table, counters).

use crate::net::Port;
use crate::packet::Packet;
use braid_engine::Time;
use schemars::JsonSchema;
use serde::Serialize;

mod adaptive;
pub mod ecmp;
mod flowlet;
mod spray;
mod wcmp;

pub use adaptive::AdaptiveLb;
pub use ecmp::EcmpLb;
pub use flowlet::FlowletLb;
pub use spray::{SprayLb, SprayOrder};
pub use wcmp::{WcmpLb, WcmpWeight};

/// What a policy sees of one forwarding decision.
pub struct Pick<'a> {
    pub now: Time,
    pub pk: &'a Packet,
    /// The packet's 5-tuple hash with this switch's ECMP seed (`net::ecmp_hash`): the flow's
    /// identity for per-flow state, and ECMP's own choice.
    pub hash: u64,
    /// The route's group (an id shared by every switch and destination using the same ports)
    /// and its ports, at least two (a one-port group needs no choice).
    pub gid: u32,
    pub candidates: &'a [u16],
    /// The switch's ports, by port number (queue depths, link rates).
    pub ports: &'a [Port],
    /// Per candidate, the capacity (bit/s) of the paths behind it to the packet's destination
    /// (`world/path_capacity.rs`); empty unless the balancer [`LoadBalancer::wants_path_capacity`].
    pub behind: &'a [f64],
}

/// A switch's load-balancing state.
pub trait LoadBalancer {
    /// The index in `at.candidates` of the port to send the packet on.
    fn pick(&mut self, at: &Pick<'_>) -> usize;

    /// The pick a packet of this flow gets, if that depends only on the packet's header and the
    /// routes (per-flow hashing: WCMP); None if it depends on time or the switch's state (a
    /// queue, a flowlet's last packet, a counter), so that a flow's packets may take several
    /// paths and none can be replayed (`flows.path`). Must not change the balancer's state.
    fn replay(&self, _at: &Pick<'_>) -> Option<usize> {
        None
    }

    /// Whether its picks read [`Pick::behind`] (the world computes it only then).
    fn wants_path_capacity(&self) -> bool {
        false
    }
}

/// What a factory knows of the switch it builds for.
pub struct LbSite<'a> {
    /// The switch's index among the switches, and its node's name.
    pub switch: u32,
    pub name: &'a str,
    /// Names of the neighbours its ports lead to, by port number.
    pub peers: &'a [&'a str],
    pub ports: &'a [Port],
    /// The run's seed: a policy's random draws come from its own stream of it.
    pub seed: u64,
}

/// A kind's config: builds each switch's balancer.
pub trait LbKind {
    /// The switch's balancer; None: the per-flow 5-tuple hash (ECMP), computed upstream on the
    /// hop's fast path. Err: a message naming the offending key below `switch.lb`.
    fn build(&self, site: &LbSite<'_>) -> Result<Option<Box<dyn LoadBalancer>>, String>;

    /// Checks the node names the config refers to (`is_node`: a switch of the topology), once
    /// per run, before any switch is built.
    fn check(&self, _is_node: &dyn Fn(&str) -> bool) -> Result<(), String> {
        Ok(())
    }

    /// Its kind's name if it may send one flow's consecutive packets on different paths (then
    /// per-hop telemetry of consecutive ACKs does not compare: HPCC refuses it).
    fn per_packet(&self) -> Option<&'static str> {
        None
    }
}

/// `switch.lb_at` entry: switch `node` (name or numeric node id) runs `lb` instead of
/// `switch.lb`.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LbAt {
    pub node: String,
    pub lb: LbSpec,
}

/// `switch.lb`: the load-balancing policy every switch runs (each its own instance).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LbSpec {
    /// Per-flow hashing of the 5-tuple (the default; today's ECMP).
    Ecmp(EcmpLb),
    /// Per-packet spraying over the group: uniformly at random or round robin.
    Spray(SprayLb),
    /// Adaptive routing: the candidate with the shortest egress queue (DRILL's sampling and
    /// memory; `samples = 0` compares every candidate).
    Adaptive(AdaptiveLb),
    /// Flowlet switching (LetFlow): a flow's packets keep their port until an idle gap, then
    /// the next flowlet takes a new random one.
    Flowlet(FlowletLb),
    /// Weighted ECMP (WCMP): per-flow hashing onto ports in proportion to weights (link rates
    /// unless given).
    Wcmp(WcmpLb),
}

impl Default for LbSpec {
    fn default() -> Self {
        LbSpec::Ecmp(EcmpLb {})
    }
}

impl LbSpec {
    /// This policy's config, behind its factory trait (the one place the kinds are listed).
    pub fn kind(&self) -> &dyn LbKind {
        match self {
            LbSpec::Ecmp(x) => x,
            LbSpec::Spray(x) => x,
            LbSpec::Adaptive(x) => x,
            LbSpec::Flowlet(x) => x,
            LbSpec::Wcmp(x) => x,
        }
    }
}

// The path-preserving deserialisation of `braid_topo::tagged` (errors name
// `switch.lb.gap`, not only `switch.lb`): the tag first, the rest into the kind's own struct.
#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum LbMirror {
    Ecmp(EcmpLb),
    Spray(SprayLb),
    Adaptive(AdaptiveLb),
    Flowlet(FlowletLb),
    Wcmp(WcmpLb),
}

impl From<LbMirror> for LbSpec {
    fn from(m: LbMirror) -> LbSpec {
        match m {
            LbMirror::Ecmp(x) => LbSpec::Ecmp(x),
            LbMirror::Spray(x) => LbSpec::Spray(x),
            LbMirror::Adaptive(x) => LbSpec::Adaptive(x),
            LbMirror::Flowlet(x) => LbSpec::Flowlet(x),
            LbMirror::Wcmp(x) => LbSpec::Wcmp(x),
        }
    }
}

impl<'de> serde::Deserialize<'de> for LbSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(braid_topo::tagged::TaggedVisitor::<LbMirror>::new(
            "kind",
            "a table with kind = \"ecmp\", \"spray\", \"adaptive\", \"flowlet\" or \"wcmp\"",
        ))
        .map(Into::into)
    }
}

#[cfg(test)]
mod tests;
