//! `online.links = "fabric"`: the fabric's links in the online decider's instance (DRUM's
//! link extension, solved distributedly: `braid_drum::online`'s link rows).
//!
//! From the backend's [`FabricLinks`] (`fabric_model::ask`, a `HostCtx` service): each active connection with a peer
//! on another host crosses the links its pipe's packets take: with per-QP routes
//! ([`FabricLinks::routes`], ECMP replayed from the pipe's UDP source port) exactly those, else
//! the links every route of the (host, peer) pair crosses. Its load per WR is its observed bytes
//! per WR (every WR is charged on the sender's direction, READs included: the IO monitor does not
//! tell them apart). A link's row is kept by its [`FabricLink::owner`]; this host declares the
//! links it owns, at `link_utilization` of their capacity, and learns their senders from their
//! contributions. Rates are in millions of WRs per second, so loads and capacities are in MB/s.
//!
//! [`FabricLink::owner`]: crate::drum::fabric_model::FabricLink::owner

use super::Stat;
use crate::drum::fabric_model::{FabricLinks, FabricSlot};
use braid_drum::online::{Connection, LinkUse, OwnedLink};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// the bytes per WR declared for each connection (moved only past `SIZE_STEP`: each change
    /// is a distributed re-solve)
    pub sizes: BTreeMap<u32, f64>,
}

/// A connection's bytes per WR is declared again only when it moved by more than this fraction.
const SIZE_STEP: f64 = 0.05;

/// Units of the rates (WR/s per unit).
const MOPS: f64 = 1e6;

impl FabricView {
    fn get(&self) -> Option<FabricLinks> {
        self.slot.borrow().clone()
    }

    /// Adds to `conns` (built from `stats`) the links each crosses; returns the links this host
    /// (address `me`) owns.
    pub fn annotate(
        &mut self,
        me: u32,
        stats: &[Stat],
        conns: &mut [Connection],
    ) -> Vec<OwnedLink> {
        let Some(f) = self.get() else {
            return Vec::new();
        };
        self.sizes.retain(|c, _| stats.iter().any(|s| s.conn == *c));
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
            let now = (s.posted_bytes as f64 / s.posted as f64).max(1.0);
            let size = *self
                .sizes
                .entry(c.id)
                .and_modify(|v| {
                    if (now - *v).abs() > SIZE_STEP * *v {
                        *v = now;
                    }
                })
                .or_insert(now);
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
                        coef: size,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drum::fabric_model::{FabricLink, FabricRoutes};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Port 1 goes by link 0, any other port by link 1 (a two-spine fabric's choice).
    struct TwoWays;
    impl FabricRoutes for TwoWays {
        fn links_of(&self, _src: u32, sport: u16, _dst: u32) -> Vec<usize> {
            vec![if sport == 1 { 0 } else { 1 }]
        }
    }

    fn stat(conn: u32, peer: u32, sport: Option<u16>, bytes: u64) -> Stat {
        Stat {
            conn,
            weight: 1.0,
            backlog: 1,
            arrivals: 0,
            paced: 0,
            window_ps: 0,
            remote: Some((peer, 9)),
            posted: 10,
            posted_bytes: 10 * bytes,
            two_sided: 0,
            signaled: 0,
            received: 0,
            sport,
        }
    }

    fn conn(id: u32) -> Connection {
        Connection {
            id,
            weight: 1.0,
            a: 1.0,
            demand: f64::INFINITY,
            out: vec![],
            links: vec![],
        }
    }

    fn link(name: &str, pairs: Vec<(u32, u32)>, owner: u32) -> FabricLink {
        FabricLink {
            name: name.into(),
            cap: 1e9,
            may: vec![(5, 7), (6, 7)],
            pairs,
            owner: Some(owner),
        }
    }

    #[test]
    fn each_pipe_gets_the_links_its_port_takes_and_the_owner_its_rows() {
        let f = FabricLinks {
            hosts: vec![5, 6, 7],
            links: vec![link("a", vec![], 5), link("b", vec![], 6)],
            routes: Some(Rc::new(TwoWays)),
        };
        let mut v = FabricView {
            slot: Rc::new(RefCell::new(Some(f))),
            util: 0.5,
            sizes: BTreeMap::new(),
        };
        let stats = [stat(1, 7, Some(1), 1000), stat(2, 7, Some(2), 64)];
        let mut cs = vec![conn(1), conn(2)];
        let owned = v.annotate(5, &stats, &mut cs);
        assert_eq!(
            cs[0].links,
            vec![LinkUse {
                link: 0,
                owner: 5,
                coef: 1000.0
            }]
        );
        assert_eq!(
            cs[1].links,
            vec![LinkUse {
                link: 1,
                owner: 6,
                coef: 64.0
            }]
        );
        // host 5 owns link 0: half its 1 GB/s, in MB/s
        assert_eq!(
            owned,
            vec![OwnedLink {
                link: 0,
                cap: 500.0,
                senders: vec![]
            }]
        );
        assert_eq!(v.may_senders(5), vec![6, 7]);
        assert!(v.may_senders(7).is_empty(), "host 7 owns nothing");
        // bytes per WR move only past 5%
        let stats = [stat(1, 7, Some(1), 1030), stat(2, 7, Some(2), 64)];
        v.annotate(5, &stats, &mut cs);
        assert_eq!(cs[0].links[0].coef, 1000.0);
        let stats = [stat(1, 7, Some(1), 1100), stat(2, 7, Some(2), 64)];
        v.annotate(5, &stats, &mut cs);
        assert_eq!(cs[0].links[0].coef, 1100.0);
    }

    #[test]
    fn without_routes_or_a_port_the_pairs_common_links_are_used() {
        let f = FabricLinks {
            hosts: vec![5, 6, 7],
            links: vec![link("a", vec![(5, 7)], 5), link("b", vec![(6, 7)], 6)],
            routes: None,
        };
        let mut v = FabricView {
            slot: Rc::new(RefCell::new(Some(f))),
            util: 1.0,
            sizes: BTreeMap::new(),
        };
        let mut cs = vec![conn(1), conn(2)];
        let mut idle = stat(2, 7, None, 10);
        idle.posted = 0;
        v.annotate(5, &[stat(1, 7, None, 100), idle], &mut cs);
        assert_eq!(
            cs[0].links,
            vec![LinkUse {
                link: 0,
                owner: 5,
                coef: 100.0
            }]
        );
        assert!(cs[1].links.is_empty(), "no WR posted yet: no load known");
    }
}
