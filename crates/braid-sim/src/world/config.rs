//! Routing inputs as they appear in scenario files: scheduled link events (`[[link_events]]`)
//! and static routes (`[[routes]]`).

use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkEvent {
    /// One end: node name (e.g. "spine0") or numeric node id as a string.
    pub a: String,
    pub b: String,
    pub down: Duration,
    /// When the link comes back (never, if absent).
    pub up: Option<Duration>,
}

/// A static route: at switch `node`, traffic to the listed destination hosts leaves through
/// `next_hops` (neighbour node names or ids; more than one = ECMP among them), replacing the
/// shortest-path ECMP group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StaticRoute {
    pub node: String,
    /// Destination host indices; absent = every host.
    pub dst: Option<Vec<u32>>,
    /// Source addresses the route applies to: a host index (all its addresses) or
    /// `{host, addr}` (address `addr` of that host, see `nic.addresses`); absent = any source.
    /// Routes with a source list take precedence over those without.
    #[serde(default)]
    pub src: Option<Vec<RouteSrc>>,
    pub next_hops: Vec<String>,
}

/// A source a static route matches: a host index (every address of that host) or
/// `{host, addr}` (one of its addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a host index (e.g. 3) or { host = 3, addr = 1 }"
)]
pub enum RouteSrc {
    /// Every address of this host (index).
    Host(u32),
    /// One address of a host.
    Addr(RouteAddr),
}

/// Address `addr` (0-based, below `nic.addresses`) of host index `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteAddr {
    pub host: u32,
    pub addr: u8,
}
