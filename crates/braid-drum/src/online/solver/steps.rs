//! The numerical half of a round: the coordinator's z-, dual- and y-updates of this host's rows
//! (with the penalties of new rows and the host's residual balancing) and the sender's
//! x-update, each after taking the newest values its peers sent.

use super::links::is_link;
use super::{rel, HostSolver};
use crate::host::{cap_solve, cap_solve_cq};
use crate::online::wire::{Body, Kind, PairKey};
use crate::online::{ConnRate, Rates};

impl HostSolver {
    /// Take each sender's newest unconsumed contributions (a missing one keeps the last value).
    /// Contributions of host h into the pairs they name (unknown pairs are counted).
    pub(super) fn apply_contribs(&mut self, h: u32, items: Vec<(PairKey, f64)>) {
        if !self.links.is_empty() || items.iter().any(|((_, rc), _)| is_link(*rc)) {
            self.apply_link_contribs(h, &items);
        }
        for ((sc, rc), val) in items {
            if is_link(rc) {
                continue;
            }
            match self.in_index.get(&(h, sc, rc)) {
                Some(&(k, t)) => {
                    let p = &mut self.ents[k].ins[t];
                    p.val = val;
                    p.seen = true;
                    p.fresh = true;
                }
                None => self.stats.unknown_items += 1,
            }
        }
    }

    /// Replies of host h into the pairs they name.
    pub(super) fn apply_replies(&mut self, h: u32, items: Vec<(PairKey, f64, f64)>) {
        for ((sc, rc), qa, qb) in items {
            match self.out_index.get(&(h, sc, rc)) {
                Some(&(k, t)) => {
                    let o = &mut self.ents[k].outs[t];
                    o.qa = qa;
                    o.qb = qb;
                    o.have = true;
                }
                None => self.stats.unknown_items += 1,
            }
        }
    }

    fn take_contribs(&mut self) {
        for e in &mut self.ents {
            for p in &mut e.ins {
                p.fresh = false;
            }
        }
        let hosts: Vec<u32> = self.nbrs.keys().copied().collect();
        for h in hosts {
            let n = self.nbrs.get_mut(&h).unwrap();
            // the newest payload; older unconsumed ones are superseded
            let Some((k, items)) = n.contribs.pop_last() else {
                continue;
            };
            n.got_c = Some(k);
            let old: usize = n.contribs.values().map(|v| v.len()).sum();
            n.contribs.clear();
            self.stats.late_values += old as u64;
            self.apply_contribs(h, items);
        }
        for e in &self.ents {
            self.stats.stale_values += e.ins.iter().filter(|p| !p.fresh).count() as u64;
        }
        self.stats.stale_values += self.link_stale();
    }

    /// Round r, coordinator half: z-, dual- and y-updates of this host's rows, then the replies.
    pub(super) fn z_round(&mut self, r: u64) {
        self.take_contribs();
        let relax = self.cfg.relax;
        let beta = self.inst.beta;
        // first sight of a pair: y = p c (and of a row: v = 0, its penalty from the curvature)
        let mut new_rows = false;
        for e in &mut self.ents {
            if !e.self_init {
                e.self_y = e.a * e.x;
                e.self_init = true;
            }
            for p in &mut e.ins {
                if p.seen && !p.init {
                    p.y = e.a * p.val;
                    p.init = true;
                }
            }
            new_rows |= e.rho_base == 0.0;
        }
        if new_rows {
            self.init_penalties();
        }
        let m = self.ents.len();
        let mut hsum = vec![0.0; m];
        let mut cnt = vec![0.0; m];
        for (k, e) in self.ents.iter().enumerate() {
            let mut s = relax * e.a * e.x + (1.0 - relax) * e.self_y;
            let mut c = 1.0;
            for p in e.ins.iter().filter(|p| p.init) {
                s += relax * e.a * p.val + (1.0 - relax) * p.y;
                c += 1.0;
            }
            hsum[k] = s;
            cnt[k] = c;
        }
        let zprev: Vec<f64> = self.ents.iter().map(|e| e.z).collect();
        let mut zs = zprev.clone();
        {
            let ents = &self.ents;
            let factor = self.factor;
            let ent = |j: usize| {
                let e = &ents[j];
                let c2 = factor * e.rho_base / cnt[j];
                (2.0 * beta, c2, -c2 * (hsum[j] + cnt[j] * e.v))
            };
            self.mu = cap_solve_cq(m, ent, self.inst.c_cap, self.mu, &mut zs);
        }
        let (mut r2, mut s2, mut ax2, mut y2, mut atv2, mut dz2, mut z2) =
            (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (k, e) in self.ents.iter_mut().enumerate() {
            let rho = self.factor * e.rho_base;
            e.z = zs[k];
            let d = (hsum[k] - e.z) / cnt[k];
            e.v += d;
            dz2 += (e.z - zprev[k]) * (e.z - zprev[k]);
            z2 += e.z * e.z;
            let mut upd = |pc: f64, y: &mut f64| {
                let h = relax * pc + (1.0 - relax) * *y;
                let yn = h - d;
                r2 += (pc - yn) * (pc - yn);
                s2 += (rho * e.a * (yn - *y)).powi(2);
                ax2 += pc * pc;
                y2 += yn * yn;
                atv2 += (rho * e.a * e.v).powi(2);
                *y = yn;
            };
            upd(e.a * e.x, &mut e.self_y);
            for p in e.ins.iter_mut().filter(|p| p.init) {
                upd(e.a * p.val, &mut p.y);
            }
        }
        self.sanitize();
        self.r_rel = rel(r2, ax2.max(y2));
        self.dz_rel = rel(dz2, z2);
        let ls = self.link_step();
        if self.cfg.adaptive {
            let rr = self.r_rel;
            let dd = rel(s2, atv2);
            let tau = 2.0;
            if rr > 10.0 * dd {
                self.factor *= tau;
                self.ents.iter_mut().for_each(|e| e.v /= tau);
            } else if dd > 10.0 * rr {
                self.factor /= tau;
                self.ents.iter_mut().for_each(|e| e.v *= tau);
            }
        }
        // the link rows settle with the host's own rows
        self.r_rel = self.r_rel.max(rel(ls.r2, ls.ax2.max(ls.y2)));
        self.dz_rel = self.dz_rel.max(rel(ls.dz2, ls.z2));
        // the x-update's coefficients: own pair locally, the others in the replies
        for e in &mut self.ents {
            let rho = self.factor * e.rho_base;
            e.self_qa = rho * e.a * e.a;
            e.self_qb = rho * e.a * (e.self_y - e.v);
        }
        // one pass over the pairs, each to its host's reply (in the entries' order, as a pass
        // per host gave them: that was hosts × pairs of work per round)
        let mut per: Vec<Vec<(PairKey, f64, f64)>> = vec![Vec::new(); self.in_hosts.len()];
        for e in &self.ents {
            let rho = self.factor * e.rho_base;
            for p in e.ins.iter().filter(|p| p.init) {
                if let Ok(t) = self.in_hosts.binary_search(&p.host) {
                    per[t].push(((p.conn, e.id), rho * e.a * e.a, rho * e.a * (p.y - e.v)));
                }
            }
        }
        for (t, mut items) in per.into_iter().enumerate() {
            let h = self.in_hosts[t];
            items.extend(self.link_replies(h));
            self.send(h, Kind::Reply, r, Body::Reply(items));
        }
        // replies on the links this host owns and crosses itself
        let own = self.link_replies(self.host);
        if !own.is_empty() {
            self.apply_replies(self.host, own);
        }
    }

    /// Finite values (each checked on arrival) can still overflow the arithmetic (a peer
    /// sending 1e300): an entry whose state is no longer finite restarts from the equal split,
    /// so that nothing non-finite is ever sent or handed to the scheduler.
    fn sanitize(&mut self) {
        let fresh_x = self.inst.q_cap / self.ents.len().max(1) as f64;
        let mut bad = false;
        for e in &mut self.ents {
            let ok = [e.x, e.z, e.v, e.self_y, e.self_qa, e.self_qb]
                .iter()
                .all(|v| v.is_finite())
                && e.ins.iter().all(|p| p.y.is_finite() && p.val.is_finite());
            if !ok {
                bad = true;
                self.stats.resets += 1;
                e.x = fresh_x.min(e.hi);
                e.z = e.a * e.x;
                e.v = 0.0;
                e.self_y = e.a * e.x;
                e.self_qa = 0.0;
                e.self_qb = 0.0;
                for p in &mut e.ins {
                    p.val = 0.0;
                    p.y = 0.0;
                    p.init = false;
                    p.seen = false;
                }
            }
            for o in &mut e.outs {
                if !(o.qa.is_finite() && o.qb.is_finite()) {
                    o.have = false;
                    o.qa = 0.0;
                    o.qb = 0.0;
                }
            }
        }
        if bad || !(self.factor.is_finite() && self.factor > 0.0) {
            if !(self.factor.is_finite() && self.factor > 0.0) {
                self.factor = 1.0;
            }
            if !self.lam.is_finite() {
                self.lam = 0.0;
            }
            if !self.mu.is_finite() {
                self.mu = 0.0;
            }
        }
    }

    /// Penalties of rows seen for the first time: the curvature of the row's utility at the
    /// equal split seen through a², or of the CQ utility at the first row sum where that is
    /// stiffer ([`crate::admm::curvature`]); rows with senders on other hosts take `rho_scale`
    /// times the median of the host's rows (the offline two-sided rule, per host).
    fn init_penalties(&mut self) {
        let m = self.ents.len().max(1);
        let x0 = self.inst.q_cap / m as f64;
        let beta = self.inst.beta;
        let al = self.al;
        for e in self.ents.iter_mut().filter(|e| e.rho_base == 0.0) {
            let sp2: f64 = e.a
                * e.a
                * (1.0
                    + e.outs
                        .iter()
                        .filter(|o| !is_link(o.conn))
                        .map(|o| o.frac * o.frac)
                        .sum::<f64>());
            let cx = al.a * e.w * al.inv_pow(x0) / x0 / sp2;
            let z0 = e.self_y + e.ins.iter().filter(|p| p.init).map(|p| p.y).sum::<f64>();
            e.curv = if beta > 0.0 && z0 > 0.0 {
                cx.max(3.0 * (cx * 6.0 * beta / z0.powi(4)).sqrt())
            } else {
                cx
            };
        }
        let mut c: Vec<f64> = self
            .ents
            .iter()
            .map(|e| e.curv)
            .filter(|c| c.is_finite())
            .collect();
        c.sort_by(|a, b| a.total_cmp(b));
        let med = if c.is_empty() { 1.0 } else { c[c.len() / 2] }.clamp(1e-300, 1e300);
        let scale = self.cfg.rho_scale;
        for e in self.ents.iter_mut().filter(|e| e.rho_base == 0.0) {
            // the host's factor applies on top; new rows start from their own base
            e.rho_base = if e.ins.is_empty() && e.outs.iter().all(|o| is_link(o.conn)) {
                e.curv.clamp(med * 1e-3, med * 1e3)
            } else {
                scale * med
            } / self.factor;
            e.v = match e.price.take() {
                Some(u) if u.is_finite() => u / (self.factor * e.rho_base),
                _ => 0.0,
            };
        }
    }

    /// Round r, sender half: take the replies, x-update under the WQE capacity and the demands.
    pub(super) fn x_round(&mut self, r: u64) {
        let hosts: Vec<u32> = self.nbrs.keys().copied().collect();
        for h in hosts {
            let n = self.nbrs.get_mut(&h).unwrap();
            let Some((k, items)) = n.replies.pop_last() else {
                continue;
            };
            n.got_r = Some(k);
            let old: usize = n.replies.values().map(|v| v.len()).sum();
            n.replies.clear();
            self.stats.late_values += old as u64;
            self.apply_replies(h, items);
        }
        let m = self.ents.len();
        let mut c2 = vec![0.0; m];
        let mut c1 = vec![0.0; m];
        for (k, e) in self.ents.iter().enumerate() {
            let (mut a2, mut a1) = (e.self_qa, -e.self_qb);
            for o in e.outs.iter().filter(|o| o.have) {
                a2 += o.qa * o.frac * o.frac;
                a1 -= o.qb * o.frac;
            }
            c2[k] = a2;
            c1[k] = a1;
        }
        let xprev: Vec<f64> = self.ents.iter().map(|e| e.x).collect();
        let mut xs = xprev.clone();
        {
            let ents = &self.ents;
            let ent = |j: usize| (ents[j].w, 0.0, c2[j], c1[j], 0.0, ents[j].hi);
            self.lam = cap_solve(&self.al, m, ent, self.inst.q_cap, self.lam, &mut xs);
        }
        let (mut dx2, mut x2) = (0.0, 0.0);
        for (k, e) in self.ents.iter_mut().enumerate() {
            e.x = xs[k];
        }
        self.sanitize();
        for (k, e) in self.ents.iter().enumerate() {
            let xs = e.x;
            dx2 += (xs - xprev[k]) * (xs - xprev[k]);
            x2 += xs * xs;
        }
        let dx_rel = rel(dx2, x2);
        self.stats.rounds += 1;
        self.stats.iterations += 1;
        let eps = self.cfg.eps;
        let settled = self.r_rel <= eps && self.dz_rel <= eps && dx_rel <= eps;
        self.settled = settled;
        self.settled_run = if settled { self.settled_run + 1 } else { 0 };
        let mut obj = 0.0;
        for e in &self.ents {
            obj += e.w * self.al.utility(e.x);
            if self.inst.beta > 0.0 {
                obj -= self.inst.beta / (e.z * e.z);
            }
        }
        self.stats.objective = obj;
        self.rates = Some(Rates {
            epoch: self.epoch,
            round: r,
            settled: false,
            conns: self
                .ents
                .iter()
                .map(|e| ConnRate {
                    id: e.id,
                    x: e.x,
                    z: e.z,
                })
                .collect(),
        });
    }
}
