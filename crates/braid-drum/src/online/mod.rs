//! DRUM's online solver: one sans-IO ADMM state machine per host ([`HostSolver`]), exchanging
//! intermediate values only with the hosts it shares two-sided traffic with.
//!
//! The offline solvers ([`crate::admm`], [`crate::shard`]) see the whole instance (or a rank's
//! block of hosts) and synchronise with collectives. Here every host holds only its own
//! connections and runs Algorithm 2 of the paper (Algorithm 1 when it has no two-sided traffic,
//! then it sends nothing at all) as a protocol over the fabric, driven like quinn-proto:
//!
//! ```text
//!   let mut s = HostSolver::new(host, instance, OnlineConfig::default())?;
//!   loop {
//!       while let Some((to, bytes)) = s.poll_transmit() { fabric.send(to, bytes) }
//!       match event {
//!           Message(from, bytes) => s.handle_message(now, from, &bytes)?,  // Err: malformed
//!           Timer if Some(now) >= s.poll_timeout() => s.handle_timeout(now),
//!       }
//!       if let Some(r) = s.rates() { scheduler.apply(r) }
//!   }
//! ```
//!
//! One **round** is one ADMM iteration in two half-rounds. (1) Every host sends, to each host it
//! sends two-sided traffic to, its *contributions*: `B·x` of each of its connections toward each
//! of that host's CQ rows. (2) Every host is the *coordinator* of its own CQ rows (the paper's
//! distributed coordinator): it collects the contributions of its senders within a window, runs
//! the z-, dual- and auxiliary-variable updates of its rows and *replies* to each sender with,
//! per pair, the two numbers its x-update needs (`ρ a²` and `ρ a (y − v)`). (3) Every host
//! collects its replies within the window and runs its x-update (its WQE capacity Q). A value
//! that is late or lost is replaced by the last round's (the paper's window rule). See
//! `docs/drum.md` ("Online solver") for the message format, the window and stop rules and what
//! differs from the paper.
//!
//! [`net::TestNet`] runs N solvers over a deterministic in-process network (delay, seeded loss,
//! reordering); [`build::instances`] cuts an offline [`crate::Problem`] into per-host instances
//! so that the online result can be compared with the offline optimum.

pub mod build;
pub mod net;
#[cfg(test)]
mod round_cost;
mod solver;
pub mod wire;

pub use solver::{HostSolver, MessageError};
pub use wire::LINK_BIT;

use crate::problem::{DrumError, Result};
use serde::{Deserialize, Serialize};

/// Two-sided traffic of one connection toward a peer host: the fraction `frac` of its WQEs whose
/// completions land on the CQ row of connection `conn` of host `host` (the paper's `B`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outbound {
    pub host: u32,
    pub conn: u32,
    pub frac: f64,
}

/// A connection of this host (one entry of the model: its WQE rate x and its own CQ row z).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Connection {
    /// connection id, unique on this host (the agent's connection id)
    pub id: u32,
    /// utility weight w
    pub weight: f64,
    /// CQEs per WQE on this host's CQ (inverse batch size)
    pub a: f64,
    /// measured demand: an upper bound on its WQE rate (`f64::INFINITY`: none)
    pub demand: f64,
    /// two-sided traffic (empty: one-sided)
    pub out: Vec<Outbound>,
    /// fabric links its traffic crosses (empty: none constrained)
    #[serde(default)]
    pub links: Vec<LinkUse>,
}

/// A fabric link a connection's traffic crosses: the link's row is kept by host `owner` (the
/// sender's contributions `coef · x` go there); `coef` is the link load per WQE (the fraction of
/// the connection's WQEs that cross the link times what one costs on it, e.g. its bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkUse {
    pub link: u32,
    pub owner: u32,
    pub coef: f64,
}

/// A fabric link whose row this host keeps (its *owner*): the load `Σ coef · x` of the
/// connections crossing it is kept at or below `cap`. `senders` lists the (host, connection)
/// pairs known to cross it; others are learnt from their first contribution and forgotten when
/// a contribution of their host no longer names them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnedLink {
    pub link: u32,
    pub cap: f64,
    #[serde(default)]
    pub senders: Vec<(u32, u32)>,
}

/// Two-sided traffic arriving on one of this host's CQ rows: connection `conn` of host `host`
/// sends to this host's connection `row`. Declared on the receiving side too, so that the
/// coordinator knows whom to wait for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inbound {
    pub host: u32,
    pub conn: u32,
    pub row: u32,
}

/// One host's part of the problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocalInstance {
    /// alpha-fairness exponent (> 0; the same on every host)
    pub alpha: f64,
    /// weight of the CQ utility `-beta / z^2` (>= 0)
    pub beta: f64,
    /// WQE processing capacity Q (ops/s in the unit of the rates)
    pub q_cap: f64,
    /// CQE processing capacity C
    pub c_cap: f64,
    pub conns: Vec<Connection>,
    pub inbound: Vec<Inbound>,
    /// the fabric links whose rows this host keeps (empty: none)
    #[serde(default)]
    pub links: Vec<OwnedLink>,
}

/// Tuning of the protocol and of the local ADMM steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnlineConfig {
    /// how long a coordinator (or sender) waits for a half-round's messages before it goes on
    /// with the last round's values, ns
    pub window_ns: u64,
    /// over-relaxation in [1, 2)
    pub relax: f64,
    /// penalty of a row with two-sided senders: this times the median curvature of the host's
    /// rows (rows with only their own sender take their own curvature)
    pub rho_scale: f64,
    /// residual balancing of the host's row penalties on its own residuals
    pub adaptive: bool,
    /// on a change of the instance, restart the balancing factor at 1 (the prices are kept)
    pub reset_penalty: bool,
    /// relative tolerance of the local stop test (primal residual and changes of x and z)
    pub eps: f64,
    /// consecutive settled rounds (own and every active neighbour's) before going idle
    pub quiet_rounds: u32,
    /// rounds of one solve before it stops unconverged
    pub max_rounds: u32,
    /// time between the end of a round and the start of the next, ns: the round's computation
    /// when the host's CPU is modelled (the agent sets it to a round's cost, so that a host
    /// without two-sided traffic runs one round per timeout instead of a whole solve inside
    /// one, and its rates change round by round); 0: the next round starts at once
    pub round_gap_ns: u64,
}

impl Default for OnlineConfig {
    fn default() -> Self {
        OnlineConfig {
            window_ns: 100_000,
            relax: 1.6,
            rho_scale: 3.0,
            adaptive: true,
            reset_penalty: true,
            eps: 1e-4,
            quiet_rounds: 3,
            max_rounds: 3000,
            round_gap_ns: 0,
        }
    }
}

impl OnlineConfig {
    pub fn validate(&self) -> Result<()> {
        if self.window_ns == 0 {
            return Err(DrumError::new("window_ns", "must be at least 1 ns"));
        }
        if !(self.relax >= 1.0 && self.relax < 2.0) {
            return Err(DrumError::new(
                "relax",
                format!("over-relaxation must be in [1, 2), got {}", self.relax),
            ));
        }
        if !(self.rho_scale.is_finite() && self.rho_scale > 0.0) {
            return Err(DrumError::new(
                "rho_scale",
                format!("must be a finite number > 0, got {}", self.rho_scale),
            ));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(DrumError::new(
                "eps",
                format!("must be a finite number > 0, got {}", self.eps),
            ));
        }
        if self.quiet_rounds == 0 || self.max_rounds == 0 {
            return Err(DrumError::new(
                "quiet_rounds",
                "quiet_rounds and max_rounds must be at least 1",
            ));
        }
        Ok(())
    }
}

impl LocalInstance {
    /// Shapes, signs and references of one host's instance (`host` is this host's id).
    pub fn validate(&self, host: u32) -> Result<()> {
        let pos = |name: &str, v: f64| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(DrumError::new(
                    name,
                    format!("must be a finite number > 0, got {v}"),
                ))
            }
        };
        pos("alpha", self.alpha)?;
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return Err(DrumError::new(
                "beta",
                format!("must be a finite number >= 0, got {}", self.beta),
            ));
        }
        pos("Q", self.q_cap)?;
        pos("C", self.c_cap)?;
        let mut ids: Vec<u32> = self.conns.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(DrumError::new(
                "conns",
                format!("connection id {} appears twice on host {host}", w[0]),
            ));
        }
        if let Some(c) = self.conns.iter().find(|c| c.id & wire::LINK_BIT != 0) {
            return Err(DrumError::new(
                "conns",
                format!(
                    "connection id {} >= 2^31 (the top bit names link rows)",
                    c.id
                ),
            ));
        }
        for c in &self.conns {
            let name = |f: &str| format!("conns[{}].{f}", c.id);
            pos(&name("weight"), c.weight)?;
            for u in &c.links {
                if !(u.coef.is_finite() && u.coef >= 0.0) || u.link & wire::LINK_BIT != 0 {
                    return Err(DrumError::new(
                        &name("links"),
                        format!(
                            "link {} needs a load per WQE >= 0 and an id < 2^31, got {}",
                            u.link, u.coef
                        ),
                    ));
                }
            }
            let mut ls: Vec<u32> = c.links.iter().map(|u| u.link).collect();
            ls.sort_unstable();
            if ls.windows(2).any(|w| w[0] == w[1]) {
                return Err(DrumError::new(
                    &name("links"),
                    "the same link is listed twice",
                ));
            }
            pos(&name("a"), c.a)?;
            if c.demand.is_nan() || c.demand <= 0.0 {
                return Err(DrumError::new(
                    &name("demand"),
                    format!("must be > 0 (inf: no limit), got {}", c.demand),
                ));
            }
            let mut tot = 0.0;
            for o in &c.out {
                if o.host == host {
                    return Err(DrumError::new(
                        &name("out"),
                        format!("traffic to host {host} itself: its completions are already counted by a"),
                    ));
                }
                if !(o.frac.is_finite() && o.frac >= 0.0 && o.frac <= 1.0) {
                    return Err(DrumError::new(
                        &name("out"),
                        format!(
                            "fraction toward host {} must be in [0, 1], got {}",
                            o.host, o.frac
                        ),
                    ));
                }
                tot += o.frac;
            }
            if tot > 1.0 + 1e-9 {
                return Err(DrumError::new(
                    &name("out"),
                    format!("fractions sum to {tot} > 1"),
                ));
            }
            let mut peers: Vec<(u32, u32)> = c.out.iter().map(|o| (o.host, o.conn)).collect();
            peers.sort_unstable();
            if peers.windows(2).any(|w| w[0] == w[1]) {
                return Err(DrumError::new(
                    &name("out"),
                    "the same peer connection is listed twice",
                ));
            }
        }
        let mut seen: Vec<(u32, u32, u32)> = Vec::with_capacity(self.inbound.len());
        for b in &self.inbound {
            if b.host == host {
                return Err(DrumError::new(
                    "inbound",
                    format!("host {host} is listed as sending to itself"),
                ));
            }
            if ids.binary_search(&b.row).is_err() {
                return Err(DrumError::new(
                    "inbound",
                    format!(
                        "row {} (from host {}, connection {}) is not a connection of host {host}",
                        b.row, b.host, b.conn
                    ),
                ));
            }
            seen.push((b.host, b.conn, b.row));
        }
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(DrumError::new(
                "inbound",
                "the same inbound pair is listed twice",
            ));
        }
        let mut owned: Vec<u32> = Vec::with_capacity(self.links.len());
        for l in &self.links {
            if !(l.cap.is_finite() && l.cap > 0.0) || l.link & wire::LINK_BIT != 0 {
                return Err(DrumError::new(
                    "links",
                    format!(
                        "link {} needs a finite capacity > 0 and an id < 2^31, got {}",
                        l.link, l.cap
                    ),
                ));
            }
            owned.push(l.link);
        }
        owned.sort_unstable();
        if owned.windows(2).any(|w| w[0] == w[1]) {
            return Err(DrumError::new("links", "the same link is owned twice"));
        }
        Ok(())
    }
}

/// The rates a host's scheduler and poller apply, from one round of one epoch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// the instance version of this host they come from (bumped by every change)
    pub epoch: u32,
    /// the round (ADMM iteration) they come from
    pub round: u64,
    /// the solve has settled (this host and its neighbours met the stop test)
    pub settled: bool,
    /// per connection, in the instance's order: (id, x: WQE rate, z: CQE rate)
    pub conns: Vec<ConnRate>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnRate {
    pub id: u32,
    /// WQE rate (the scheduler's fetch rate)
    pub x: f64,
    /// CQE rate of the connection's CQ row (the poller's hand-over rate)
    pub z: f64,
}

/// Counters of one host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// rounds run in total
    pub rounds: u64,
    /// rounds of the current (or last) solve: since the last change of the instance or wake-up
    pub iterations: u64,
    /// solves started (epochs and wake-ups)
    pub solves: u64,
    pub messages_sent: u64,
    pub bytes_sent: u64,
    pub messages_received: u64,
    pub bytes_received: u64,
    /// malformed messages rejected
    pub malformed: u64,
    /// half-rounds that ended at the window's deadline with some message missing
    pub timeouts: u64,
    /// expected values that were missing at the deadline and replaced by the last round's
    pub stale_values: u64,
    /// values that arrived after their round and were kept as the newest known
    pub late_values: u64,
    /// items naming a pair this host does not know (an instance change not seen yet here)
    pub unknown_items: u64,
    /// connections whose state overflowed (absurd values from a peer) and restarted
    pub resets: u64,
    /// local objective estimate: sum of own `w U(x)` minus `beta / z^2` of own rows
    pub objective: f64,
    /// the last solve stopped at `max_rounds` before settling
    pub gave_up: bool,
}
