//! braid-topo: what a network and its traffic look like, before any simulation.
//!
//! Units with human forms ("40Gbps", "1us", "64KB"), topology specifications and the graphs
//! they build, traffic specifications and the flow lists they generate, and readers for the HPCC
//! ns-3 simulator's topology and flow files.

pub mod cdf;
pub mod hpcc;
pub mod input;
#[doc(hidden)]
pub mod tagged;
pub mod topology;
pub mod traffic;
pub mod units;

pub use cdf::Cdf;
pub use topology::{
    Graph, LinkDesc, LinkSpec, NodeDesc, NodeKind, SpecError, TopologySize, TopologySpec,
};
pub use traffic::{FlowDesc, TrafficSpec, TrafficVolume};
pub use units::{Bytes, Duration, Rate};
