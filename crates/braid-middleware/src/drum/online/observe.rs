//! The online decider's view of the IO monitor's statistics: each connection's demand (with
//! the pacing it saw), its two-sided fraction and CQEs per WQE, folded into the host's
//! [`LocalInstance`] at every decision.

use super::*;

impl OnlineSolve {
    /// Folds what the IO monitor saw into the observations; the host's instance.
    pub(super) fn observe(&mut self, stats: &[Stat], active: &[bool]) -> LocalInstance {
        let floor = self.q * 1e-4;
        let mut conns = Vec::new();
        let mut inbound = Vec::new();
        let mut keep = BTreeMap::new();
        for (s, &act) in stats.iter().zip(active) {
            let mut o = self.obs.get(&s.conn).copied().unwrap_or(Obs {
                arrivals: 0,
                window: 0,
                backlogged: false,
                demand: f64::INFINITY,
                frac: 0.0,
                a: 1.0,
                receives: false,
            });
            o.arrivals += s.arrivals;
            o.window += s.window_ps;
            // A WR that waited for a token was held by the decision, not by the tenant: its
            // arrivals measure the rate decided, and a closed-loop tenant (one request
            // outstanding) paced at a low rate would keep its estimate there for good.
            let waiting = s.backlog > 0 || s.paced > 0;
            o.backlogged |= waiting;
            if waiting && o.demand.is_finite() {
                // New work: unbounded at once.
                o.demand = f64::INFINITY;
                (o.arrivals, o.window, o.backlogged) = (0, 0, false);
            } else if o.window >= self.demand_window {
                let d = if o.backlogged {
                    f64::INFINITY
                } else {
                    (2.0 * o.arrivals as f64 / (o.window as f64 * 1e-12)).max(floor)
                };
                let moved = d.is_finite() != o.demand.is_finite()
                    || (d.is_finite() && (d - o.demand).abs() > self.p.demand_tolerance * o.demand);
                if moved {
                    o.demand = d;
                }
                (o.arrivals, o.window, o.backlogged) = (0, 0, false);
            }
            let f = if s.posted > 0 {
                s.two_sided as f64 / s.posted as f64
            } else {
                0.0
            };
            if (f > 0.0) != (o.frac > 0.0) || (f - o.frac).abs() > FRAC_STEP {
                o.frac = f;
            }
            // The tenant's completions per WR (its signaling, 1 / the batch of a `cq_mod`): the
            // joint QP and CQ allocation of eq. 13. Declared again only when it moved by a
            // quarter; floored at 1/64, so that a tenant that rarely signals keeps a CQE rate.
            let a = if s.posted > 0 {
                (s.signaled as f64 / s.posted as f64).clamp(A_FLOOR, 1.0)
            } else {
                1.0
            };
            if (a - o.a).abs() > 0.25 * o.a {
                o.a = a;
            }
            o.receives = s.received > 0;
            keep.insert(s.conn, o);
            if !act {
                continue;
            }
            let peer = s.remote.filter(|r| r.0 != self.me);
            let out = match peer {
                Some((h, c)) if o.frac > 0.0 => vec![Outbound {
                    host: h,
                    conn: c,
                    frac: o.frac.min(1.0),
                }],
                _ => Vec::new(),
            };
            if let (Some((h, c)), true) = (peer, o.receives) {
                inbound.push(Inbound {
                    host: h,
                    conn: c,
                    row: s.conn,
                });
            }
            conns.push(Connection {
                id: s.conn,
                weight: s.weight,
                a: o.a,
                demand: if self.p.demand {
                    o.demand / MOPS
                } else {
                    f64::INFINITY
                },
                out,
                links: Vec::new(),
            });
        }
        self.obs = keep;
        let owned = match &mut self.fabric {
            Some(f) => f.annotate(self.me, stats, &mut conns),
            None => Vec::new(),
        };
        LocalInstance {
            alpha: self.alpha,
            beta: self.beta,
            q_cap: self.q / MOPS,
            c_cap: self.c / MOPS,
            conns,
            inbound,
            links: owned,
        }
    }
}
