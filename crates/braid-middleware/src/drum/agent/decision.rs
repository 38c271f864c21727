//! The agent's rate decisions: when to decide again, what the connections' statistics are, what
//! the decision cost (the decider's own CPU model, or `solve_ns_per_conn` per connection on the
//! scheduler thread), and applying the decided WQE and CQE rates. Kept apart so that `agent.rs`
//! stays the pipes, scheduler and poller.

use super::*;

impl DrumAgent {
    /// Decides the rates again when connections came or went, or every `solve_interval`.
    pub(super) fn maybe_decide(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        let (mut stats, pipe_qps): (Vec<Stat>, Vec<Option<QpNum>>) = {
            let s = self.st.borrow();
            let due = s.resolve
                || now >= self.last_solve + s.cfg.solve_interval.0
                || self.decider.wants_decide();
            if !due || s.conns.is_empty() {
                return;
            }
            s.conns
                .values()
                .filter(|c| c.state == QpState::Rts)
                .map(|c| Stat {
                    conn: c.vqpn,
                    weight: c.weight,
                    backlog: c.pool.len(),
                    arrivals: c.arrivals,
                    paced: c.paced,
                    window_ps: now - self.last_solve,
                    remote: c.remote.map(|r| (r.host, r.qpn)),
                    posted: c.posted,
                    posted_bytes: c.posted_bytes,
                    two_sided: c.two_sided,
                    signaled: c.signaled,
                    received: c.received,
                    sport: None,
                })
                .zip(
                    s.conns
                        .values()
                        .filter(|c| c.state == QpState::Rts)
                        .map(|c| c.pipe.and_then(|p| self.pipes.get(&p)).map(|p| p.qp)),
                )
                .unzip()
        };
        for (st, qp) in stats.iter_mut().zip(pipe_qps) {
            st.sport = qp.and_then(|q| v.query_qp(q).ok()).map(|a| a.udp_sport);
        }
        let d = self.decider.decide(now, &stats);
        self.decisions += 1;
        // `qp_sche` solves for the connections the selection let in (all of them without a
        // top-k budget): the paper's scheduler cost flattens with top-k for this reason. The
        // selection's own pass (a comparison per connection) is not charged.
        let solved = if d.active.is_empty() {
            stats.len()
        } else {
            d.active.iter().filter(|a| **a).count()
        };
        // A decider with a CPU model of its own (the online solver) is charged as `solver`.
        match self.decider.take_cpu_ps() {
            Some(c) => {
                if c > 0 {
                    v.charge(Work::Ns(c / 1000));
                    self.cpu_solver_ps += c;
                    if self.rounds_on_scheduler() {
                        self.sched.run(now, c);
                    }
                }
            }
            None => {
                let (per, delay) = {
                    let s = self.st.borrow();
                    (s.cfg.solve_ns_per_conn, s.cfg.path_delay)
                };
                let cost = ps(per * solved as f64);
                if cost > 0 {
                    v.charge(Work::Ns(cost / 1000));
                    self.cpu_solve_ps += cost;
                    // The scheduler computes the rates on its own thread (§IV: "the main
                    // overhead [of the scheduler] lies in the allocation rate computation").
                    if delay {
                        self.sched.run(now, cost);
                    }
                }
            }
        }
        let mut s = self.st.borrow_mut();
        s.resolve = false;
        s.resolve_soon = false;
        self.last_solve = now;
        let mut active = 0;
        for (i, st) in stats.iter().enumerate() {
            if let Some(c) = s.conns.get_mut(&st.conn) {
                c.x = d.x.get(i).copied().unwrap_or(0.0);
                // The poller paces at the decided CQE rate (below x for a tenant that signals
                // one WR in a batch: the joint allocation); a connection left out keeps its
                // CQE rate: what it has on the shared QP still completes.
                let z = d.z.get(i).copied().unwrap_or(0.0);
                if z > 0.0 {
                    c.z = z;
                }
                c.active = d.active.get(i).copied().unwrap_or(true) && c.x > 0.0;
                c.arrivals = 0;
                c.paced = 0;
                active += c.active as u64;
            }
        }
        self.active = active;
    }

    /// Charges what the decider's own work cost since the last call (`solver`).
    pub(super) fn charge_decider(&mut self, v: &mut dyn Verbs) {
        if let Some(cost) = self.decider.take_cpu_ps() {
            if cost > 0 {
                v.charge(Work::Ns(cost / 1000));
                self.cpu_solver_ps += cost;
                // `online.thread = "scheduler"`: the solver runs on the scheduler's thread
                // (§IV: the scheduler's "main overhead lies in the allocation rate
                // computation"), WRs wait behind it; on its own thread (the default) the
                // decider holds its outputs until its rounds are computed and the tenants'
                // WRs wait for nothing.
                if self.rounds_on_scheduler() {
                    self.sched.run(v.now(), cost);
                }
            }
        }
    }

    /// The solver's rounds take the scheduler thread's time (`path_delay` with
    /// `online.timed_rounds` and `online.thread = "scheduler"`).
    fn rounds_on_scheduler(&self) -> bool {
        let s = self.st.borrow();
        s.cfg.path_delay
            && s.cfg.online.timed_rounds
            && s.cfg.online.thread == crate::drum::online::SolverThread::Scheduler
    }
}
