//! `online.links = "fabric"`: the fabric's links in the online decider's instance (DRUM's
//! link extension, solved distributedly: `braid_drum::online`'s link rows).
//!
//! From the backend's [`FabricLinks`] (`HostCtx::fabric`): each active connection with a peer
//! on another host crosses the links its pipe's packets take: with per-QP routes
//! ([`FabricLinks::routes`], ECMP replayed from the pipe's UDP source port) exactly those, else
//! the links every route of the (host, peer) pair crosses. Its load per WR is its observed bytes
//! per WR (every WR is charged on the sender's direction, READs included: the IO monitor does not
//! tell them apart). A link's row is kept by its [`FabricLink::owner`]; this host declares the
//! links it owns, at `link_utilization` of their capacity, and learns their senders from their
//! contributions. Rates are in millions of WRs per second, so loads and capacities are in MB/s.
//!
//! [`FabricLink::owner`]: braid_verbs::host::FabricLink::owner

use super::Stat;
use braid_drum::online::{Connection, LinkUse, OwnedLink};
use braid_verbs::host::{FabricLinks, FabricSlot};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which fabric links the online decider's instance has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnlineLinks {
    /// None: only the NICs' WQE and CQE capacities (the paper's model).
    #[default]
    None,
    /// The backend's fabric links (the simulator's), owned and coordinated by the hosts.
    Fabric,
}

/// The fabric as the decider reads it.
pub(super) struct FabricView {
    pub slot: FabricSlot,
    /// fraction of each link's capacity the rates may use
    pub util: f64,
}

/// Units of the rates (WR/s per unit).
const MOPS: f64 = 1e6;

impl FabricView {
    fn get(&self) -> Option<FabricLinks> {
        self.slot.borrow().clone()
    }

    /// Adds to `conns` (built from `stats`) the links each crosses; returns the links this host
    /// (address `me`) owns.
    pub fn annotate(&self, me: u32, stats: &[Stat], conns: &mut [Connection]) -> Vec<OwnedLink> {
        let Some(f) = self.get() else {
            return Vec::new();
        };
        for c in conns.iter_mut() {
            let Some(s) = stats.iter().find(|s| s.conn == c.id) else {
                continue;
            };
            let Some((peer, _)) = s.remote.filter(|r| r.0 != me) else {
                continue;
            };
            if s.posted == 0 {
                // no bytes per WR observed yet: its load is unknown until it posts
                continue;
            }
            let size = s.posted_bytes as f64 / s.posted as f64;
            let crossed: Vec<usize> = match (&f.routes, s.sport) {
                (Some(r), Some(sport)) => r.links_of(me, sport, peer),
                _ => f
                    .links
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.pairs.contains(&(me, peer)))
                    .map(|(i, _)| i)
                    .collect(),
            };
            let mut uses: Vec<LinkUse> = crossed
                .into_iter()
                .filter_map(|i| {
                    let owner = f.links.get(i)?.owner?;
                    Some(LinkUse {
                        link: i as u32,
                        owner,
                        coef: size.max(1.0),
                    })
                })
                .collect();
            uses.sort_by_key(|u| u.link);
            uses.dedup_by_key(|u| u.link);
            c.links = uses;
        }
        f.links
            .iter()
            .enumerate()
            .filter(|(_, l)| l.owner == Some(me))
            .map(|(i, l)| OwnedLink {
                link: i as u32,
                cap: self.util * l.cap / MOPS,
                senders: Vec::new(),
            })
            .collect()
    }

    /// The hosts whose control QPs this host accepts when they offer one: every other host if
    /// it owns a link (a sender's ECMP route may take a link its pair's sampled routes did not).
    pub fn may_senders(&self, me: u32) -> Vec<u32> {
        let Some(f) = self.get() else {
            return Vec::new();
        };
        if !f.links.iter().any(|l| l.owner == Some(me)) {
            return Vec::new();
        }
        f.hosts.iter().copied().filter(|&h| h != me).collect()
    }
}
