//! Fabric link rows (`R x ≤ L`, beyond the paper) in the online solver.
//!
//! A link's row is kept by one host, its *owner* (named by the senders' [`LinkUse::owner`]; the
//! instance builders pick the lowest host id among the hosts whose traffic may cross the link).
//! It is coordinated like a CQ row in the same half-rounds: every sender crossing the link
//! sends, in its contributions to the owner, its load `c = coef · x` on the link (receiver id
//! `link | LINK_BIT`); the owner runs the row's z-, dual- and auxiliary updates of the same
//! sharing splitting as the offline solver's link rows (no utility on the row, so the z-update
//! is a clamp to `[0, L]`):
//!
//! ```text
//!   h = relax c + (1 − relax) y ;  z = clamp(Σ h + n v, 0, L) ;  d = (Σ h − z)/n ;
//!   v += d ;  y = h − d ;  reply (ρ, ρ (y − v))        (in units of c)
//! ```
//! and the sender's x-update adds `ρ/2 (coef x − y + v)²` like any other pair. The row's
//! penalty is the owner's alone (the replies carry it): the curvature of a log utility at the
//! link's equal share, `ρ = n² / L²` in units of c, fixed (residual balancing of the link rows
//! was tried and dropped: on a link the senders leave below capacity it kept halving ρ, and a
//! two-host instance took > 800 rounds instead of 35). An owner that sends across its own link keeps its pairs
//! locally. Senders the owner was not told of are learnt from their first contribution and
//! forgotten when their host's next contribution no longer names them (a host that stops
//! sending to the owner altogether says so with one empty contribution).
//!
//! [`LinkUse::owner`]: crate::online::LinkUse::owner

use super::HostSolver;
use crate::online::wire::{PairKey, LINK_BIT};
use crate::online::OwnedLink;

#[derive(Clone, Debug)]
pub(super) struct LinkPair {
    pub host: u32,
    pub conn: u32,
    /// last contribution coef · x received
    pub val: f64,
    pub y: f64,
    pub init: bool,
    pub fresh: bool,
    /// declared by the instance (kept even when a contribution does not name it)
    pub declared: bool,
}

#[derive(Clone, Debug)]
pub(super) struct LinkRow {
    pub id: u32,
    pub cap: f64,
    pub z: f64,
    pub v: f64,
    /// 0 until the row's first step with pairs
    pub rho: f64,
    pub pairs: Vec<LinkPair>,
}

/// Residual sums of the link rows of one z-step.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LinkSums {
    pub r2: f64,
    pub ax2: f64,
    pub y2: f64,
    pub dz2: f64,
    pub z2: f64,
}

pub(super) fn is_link(conn: u32) -> bool {
    conn & LINK_BIT != 0
}

impl HostSolver {
    /// The owned rows of a new instance, keeping the state of those that remain (and the pairs
    /// learnt on them).
    pub(super) fn install_links(&mut self, owned: &[OwnedLink]) {
        let mut old: Vec<LinkRow> = std::mem::take(&mut self.links);
        for l in owned {
            let mut row = match old.iter().position(|r| r.id == l.link) {
                Some(i) => old.swap_remove(i),
                None => LinkRow {
                    id: l.link,
                    cap: l.cap,
                    z: 0.0,
                    v: 0.0,
                    rho: 0.0,
                    pairs: Vec::new(),
                },
            };
            row.cap = l.cap;
            for p in &mut row.pairs {
                p.declared = false;
            }
            for &(h, c) in &l.senders {
                match row.pairs.iter_mut().find(|p| p.host == h && p.conn == c) {
                    Some(p) => p.declared = true,
                    None => row.pairs.push(LinkPair {
                        host: h,
                        conn: c,
                        val: 0.0,
                        y: 0.0,
                        init: false,
                        fresh: false,
                        declared: true,
                    }),
                }
            }
            self.links.push(row);
        }
    }

    /// Hosts this host waits for in the first half-round: its CQ rows' senders and its link
    /// rows' senders (itself excluded).
    pub(super) fn refresh_in_hosts(&mut self) {
        let mut ih: Vec<u32> = self
            .ents
            .iter()
            .flat_map(|e| e.ins.iter().map(|p| p.host))
            .chain(
                self.links
                    .iter()
                    .flat_map(|l| l.pairs.iter().map(|p| p.host)),
            )
            .filter(|&h| h != self.host)
            .collect();
        ih.sort_unstable();
        ih.dedup();
        for h in &ih {
            self.nbrs.entry(*h).or_default();
        }
        self.in_hosts = ih;
    }

    /// Link items of one host's (complete) contribution: values into their pairs, unknown
    /// senders learnt, this host's undeclared pairs that the contribution no longer names
    /// forgotten.
    pub(super) fn apply_link_contribs(&mut self, h: u32, items: &[(PairKey, f64)]) {
        let mut changed = false;
        for &((sc, rc), val) in items.iter().filter(|((_, rc), _)| is_link(*rc)) {
            let Some(row) = self.links.iter_mut().find(|l| l.id == rc & !LINK_BIT) else {
                self.stats.unknown_items += 1;
                continue;
            };
            match row.pairs.iter_mut().find(|p| p.host == h && p.conn == sc) {
                Some(p) => {
                    p.val = val;
                    p.fresh = true;
                }
                None => {
                    changed = true;
                    row.pairs.push(LinkPair {
                        host: h,
                        conn: sc,
                        val,
                        y: 0.0,
                        init: false,
                        fresh: true,
                        declared: false,
                    });
                }
            }
        }
        for row in &mut self.links {
            let before = row.pairs.len();
            row.pairs.retain(|p| {
                p.host != h
                    || p.declared
                    || items
                        .iter()
                        .any(|((sc, rc), _)| *sc == p.conn && *rc == row.id | LINK_BIT)
            });
            changed |= row.pairs.len() != before;
        }
        if changed {
            self.refresh_in_hosts();
        }
    }

    /// The contributions this host sends to itself (links it owns and crosses): applied at once.
    pub(super) fn own_link_contribs(&mut self) {
        for row in &mut self.links {
            for p in &mut row.pairs {
                p.fresh = false;
            }
        }
        let me = self.host;
        let items: Vec<(PairKey, f64)> = self
            .ents
            .iter()
            .flat_map(|e| {
                e.outs
                    .iter()
                    .filter(move |o| o.host == me)
                    .map(move |o| ((e.id, o.conn), o.frac * e.x))
            })
            .collect();
        if !items.is_empty()
            || self
                .links
                .iter()
                .any(|l| l.pairs.iter().any(|p| p.host == me))
        {
            self.apply_link_contribs(me, &items);
        }
    }

    /// Values expected on the link rows that did not come this round.
    pub(super) fn link_stale(&self) -> u64 {
        self.links
            .iter()
            .flat_map(|l| l.pairs.iter())
            .filter(|p| !p.fresh)
            .count() as u64
    }

    /// The z-, dual- and y-updates of the owned link rows (first sight of a pair: y = c).
    pub(super) fn link_step(&mut self) -> LinkSums {
        let relax = self.cfg.relax;
        let mut s = LinkSums::default();
        for row in &mut self.links {
            for p in row.pairs.iter_mut().filter(|p| p.fresh && !p.init) {
                p.y = p.val;
                p.init = true;
            }
            let ne = row.pairs.iter().filter(|p| p.init).count() as f64;
            if ne == 0.0 {
                row.z = 0.0;
                continue;
            }
            if row.rho == 0.0 {
                // the curvature of w log x at the link's equal share, w = 1, in units of c
                row.rho = (ne / row.cap).powi(2);
            }
            let hsum: f64 = row
                .pairs
                .iter()
                .filter(|p| p.init)
                .map(|p| relax * p.val + (1.0 - relax) * p.y)
                .sum();
            let zprev = row.z;
            row.z = (hsum + ne * row.v).clamp(0.0, row.cap);
            let d = (hsum - row.z) / ne;
            row.v += d;
            let (mut r2, mut ax2, mut y2) = (0.0, 0.0, 0.0);
            for p in row.pairs.iter_mut().filter(|p| p.init) {
                let yn = relax * p.val + (1.0 - relax) * p.y - d;
                r2 += (p.val - yn).powi(2);
                ax2 += p.val * p.val;
                y2 += yn * yn;
                p.y = yn;
            }
            s.r2 += r2;
            s.ax2 += ax2;
            s.y2 += y2;
            s.dz2 += (row.z - zprev).powi(2);
            s.z2 += row.z * row.z;
            if !(row.z.is_finite() && row.v.is_finite() && row.rho.is_finite() && row.rho > 0.0)
                || row.pairs.iter().any(|p| !p.y.is_finite())
            {
                self.stats.resets += 1;
                row.z = 0.0;
                row.v = 0.0;
                row.rho = 0.0;
                for p in &mut row.pairs {
                    p.init = false;
                    p.y = 0.0;
                }
            }
        }
        s
    }

    /// This round's replies on the link rows to host h: (sender conn, link | LINK_BIT, ρ, ρ(y − v)).
    pub(super) fn link_replies(&self, h: u32) -> Vec<(PairKey, f64, f64)> {
        let mut items = Vec::new();
        for row in &self.links {
            for p in row.pairs.iter().filter(|p| p.host == h && p.init) {
                items.push((
                    (p.conn, row.id | LINK_BIT),
                    row.rho,
                    row.rho * (p.y - row.v),
                ));
            }
        }
        items
    }

    /// The link load this owner sees on each of its rows (its last z and the sum of the last
    /// contributions), for reports and tests: (link, cap, Σ c).
    pub fn link_loads(&self) -> Vec<(u32, f64, f64)> {
        self.links
            .iter()
            .map(|l| (l.id, l.cap, l.pairs.iter().map(|p| p.val).sum()))
            .collect()
    }
}
