//! The transmit side of the NIC: the arbiter's entry point (`next_packet`, control packets,
//! the per-class service), a QP's standing at the arbiter (`status`), cross-channel control
//! WQEs and WQE timing. The policies themselves are in `crate::arbiter`.

use super::{Effects, NextTx, Nic, NicParams, QpState, Served, Status};
use crate::nic::config::ArbiterPolicy;
use crate::packet::*;
use crate::transport::Plan;
use braid_engine::time::Time;
use braid_verbs::*;

/// The PFC state of the NIC port's priorities as a bit mask (bit i: priority i paused).
#[inline]
pub(super) fn pause_mask(paused: &[bool; 8]) -> u8 {
    let bytes = u64::from_le_bytes(paused.map(u8::from));
    (bytes.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

impl Nic {
    /// The arbiter: the next packet this NIC puts on the wire, if any. `paused[p]` is the PFC
    /// state of the NIC port for priority p.
    ///
    /// Control packets (ACK, NAK, CNP, PFC) go first, unless their priority is paused. Then the
    /// policy between classes (`nic.arbiter`) picks a class, and within it the QPs take turns
    /// round robin: a turn is one packet, or up to `nic.tx_prefetch` bytes while the QP has a
    /// packet ready. A QP waiting for a time, or ready but PFC-paused, keeps its place in the
    /// rotation without being looked at until that changes (see `arbiter.rs`).
    #[inline]
    pub fn next_packet(
        &mut self,
        now: Time,
        paused: &[bool; 8],
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> NextTx {
        // Half the calls end here (the ACK a receiver owes), inlined into the caller: the
        // arbiter below is out of line.
        if let Some(id) = self.next_ctrl(paused, pool) {
            return NextTx::Packet(id);
        }
        self.next_packet_slow(now, paused, p, pool, eff)
    }

    fn next_packet_slow(
        &mut self,
        now: Time,
        paused: &[bool; 8],
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> NextTx {
        if self.tx_stall_until > now {
            return NextTx::WaitUntil(self.tx_stall_until);
        }
        self.arb.release_timers(now);
        // Bit i = priority i paused: byte i's low bit gathered into bit 56 + i by one multiply
        // (checked against the bit-by-bit fold for all 256 states in the tests).
        let pmask = pause_mask(paused);
        let served = match self.policy {
            ArbiterPolicy::Rr => self.serve_class(0, now, pmask, p, pool, eff),
            ArbiterPolicy::Sp => {
                // The lowest class number first; within a class, round robin.
                let mut r = Served::Nothing;
                for c in 0..8 {
                    if self.arb.len(c) == 0 {
                        continue;
                    }
                    r = self.serve_class(c, now, pmask, p, pool, eff);
                    if !matches!(r, Served::Nothing) {
                        break;
                    }
                }
                r
            }
            ArbiterPolicy::Ets => self.serve_ets(now, pmask, p, pool, eff),
        };
        match served {
            Served::Packet(id) => NextTx::Packet(id),
            Served::Stall(t) => NextTx::WaitUntil(t),
            Served::Nothing => match self.arb.next_timer() {
                Some(t) => NextTx::WaitUntil(t),
                None => NextTx::Idle,
            },
        }
    }

    /// The first queued control packet whose priority is not paused (PFC frames always go).
    #[inline]
    fn next_ctrl(&mut self, paused: &[bool; 8], pool: &PacketPool) -> Option<PktId> {
        if self.ctrl_held != 0 {
            if let Some(id) = self.next_held_ctrl(paused) {
                return Some(id);
            }
        }
        // Then in queueing order; one whose priority is paused is set aside (each packet once),
        // so that a paused priority's backlog costs nothing per look.
        while let Some(id) = self.ctrl.pop_front() {
            let c = pool.get(id);
            let q = if c.kind == PktKind::Pfc {
                8
            } else {
                c.prio as usize & 7
            };
            if q == 8 || !paused[q] {
                return Some(id);
            }
            self.ctrl_q[q].push_back((self.ctrl_seq, id));
            self.ctrl_held |= 1 << q;
            self.ctrl_seq += 1;
        }
        None
    }

    /// Packets set aside because their priority was paused (`ctrl_q`, bit q of `ctrl_held` =
    /// queue q non-empty) are older than those still in `ctrl`: the oldest eligible of them goes
    /// first.
    fn next_held_ctrl(&mut self, paused: &[bool; 8]) -> Option<PktId> {
        let mut best: Option<(u64, usize)> = None;
        let mut m = self.ctrl_held;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            if q < 8 && paused[q] {
                continue;
            }
            let seq = self.ctrl_q[q].front().expect("held queue").0;
            if best.is_none_or(|(b, _)| seq < b) {
                best = Some((seq, q));
            }
        }
        let (_, q) = best?;
        let (_, id) = self.ctrl_q[q].pop_front().expect("held queue");
        if self.ctrl_q[q].is_empty() {
            self.ctrl_held &= !(1 << q);
        }
        Some(id)
    }

    /// ETS: deficit round robin between classes by bytes; a class's turn adds its quantum and
    /// lasts while its deficit is positive (the last packet may overdraw it); a class with
    /// nothing to send forfeits its deficit (`arbiter::Ets`).
    fn serve_ets(
        &mut self,
        now: Time,
        pmask: u8,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> Served {
        // Visits since a class last sent: after a whole round of them, the rounds nobody could
        // send in are credited at once. The cap ends a look where every class with a candidate
        // turns out to have nothing to send (two rounds after the skip cannot send either).
        let mut idle = 0;
        for _ in 0..64 {
            if idle >= 8 {
                let arb = &self.arb;
                if !self.ets.skip_rounds(|c| arb.has_candidate(c, pmask)) {
                    return Served::Nothing;
                }
                idle = 0;
            }
            let c = self.ets.cur;
            if !self.arb.has_candidate(c, pmask) {
                self.ets.deficit[c] = 0;
                self.ets.advance();
                idle += 1;
                continue;
            }
            if !self.ets.credited {
                self.ets.deficit[c] += self.ets.quantum[c];
                self.ets.credited = true;
            }
            if self.ets.deficit[c] <= 0 {
                self.ets.advance();
                idle += 1;
                continue;
            }
            match self.serve_class(c, now, pmask, p, pool, eff) {
                Served::Packet(id) => {
                    self.ets.deficit[c] -= pool.get(id).size as i64;
                    if self.ets.deficit[c] <= 0 {
                        self.ets.advance();
                    }
                    return Served::Packet(id);
                }
                Served::Stall(t) => return Served::Stall(t),
                Served::Nothing => {
                    self.ets.deficit[c] = 0;
                    self.ets.advance();
                    idle += 1;
                }
            }
        }
        Served::Nothing
    }

    /// One look at class `c`'s rotation, as the arbiter always did it: from the front, each QP
    /// that needs a look is asked for its status; one that cannot send now goes to the back
    /// (dropped if it has nothing at all), the first that can sends. Only the QPs present when the
    /// look starts are looked at (ones activated meanwhile wait for the next look, at the back).
    fn serve_class(
        &mut self,
        c: usize,
        now: Time,
        pmask: u8,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> Served {
        let mut remaining = self.arb.len(c);
        let mut yields = 0u32;
        loop {
            let Some((j, qpn)) = self.arb.first_candidate(c, remaining, pmask) else {
                // The rest were looked at (or needed no look) and passed: to the back.
                if remaining > 0 {
                    self.arb.rotate(c, remaining);
                    self.turn[c] = 0;
                }
                // A QP that yielded its turn to others that could not use it goes on.
                if yields > 0 && yields < 1 << 16 && self.arb.has_candidate(c, pmask) {
                    remaining = self.arb.len(c);
                    continue;
                }
                return Served::Nothing;
            };
            if j > 0 {
                // Those before it need no look: passed, to the back.
                self.arb.rotate_to(c, qpn);
                remaining -= j;
                self.turn[c] = 0;
            }
            match self.status(qpn, now, p, eff) {
                Status::Yield => {
                    // Its turn is over: to the back, looked at again after the others (every
                    // yield executed a WAIT, so this ends; the cap guards a model error).
                    self.arb.rotate(c, 1);
                    self.turn[c] = 0;
                    remaining -= 1;
                    yields += 1;
                }
                Status::Blocked => {
                    self.arb.pop_front(c);
                    if let Some(Some(q)) = self.qps.get_mut(qpn as usize) {
                        q.in_active = false;
                    }
                    remaining -= 1;
                    self.turn[c] = 0;
                }
                Status::WaitUntil(t) => {
                    self.arb.park_until(qpn, t);
                    self.arb.rotate(c, 1);
                    remaining -= 1;
                    self.turn[c] = 0;
                }
                Status::Ready(psn) => {
                    // The QP's priority matters (and is looked up) only when one is paused.
                    let prio = (pmask != 0)
                        .then(|| self.qps[qpn as usize].as_ref().unwrap().data_prio())
                        .filter(|prio| pmask & (1 << (prio & 7)) != 0);
                    if let Some(prio) = prio {
                        // Looked at again once the PFC resume's kick comes.
                        self.arb.park_paused(qpn, prio);
                        self.arb.rotate(c, 1);
                        remaining -= 1;
                        self.turn[c] = 0;
                        continue;
                    }
                    if !self.cache.access(qpn) {
                        // Fetch the QP context over PCIe; the pipeline stalls meanwhile. The QP
                        // stays at the front.
                        self.stats.cache_misses += 1;
                        self.tx_stall_until = now + p.nic.qp_cache_miss.0;
                        return Served::Stall(self.tx_stall_until);
                    }
                    self.stats.cache_hits += 1;
                    let id = self.build_packet(qpn, psn, now, p, pool, eff);
                    // It stays in the rotation (the next look drops it if it has nothing more):
                    // at the front while its turn lasts, else at the back. A turn is one packet,
                    // or as many as the read-ahead holds: `tx_prefetch` bytes of MTU buffers (or
                    // `tx_prefetch_time` of the line rate).
                    self.turn[c] += p.nic.mtu as u64;
                    if self.turn[c] >= self.read_ahead {
                        self.arb.rotate(c, 1);
                        self.turn[c] = 0;
                    }
                    return Served::Packet(id);
                }
            }
        }
    }

    /// Advances a QP's new-data cursor over control WRs (WAIT, ENABLE, NOP), then asks its
    /// transport what may go out now.
    fn status(&mut self, qpn: QpNum, now: Time, p: &NicParams, eff: &mut Effects) -> Status {
        loop {
            let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
                return Status::Blocked;
            };
            if q.state != QpState::Rts {
                return Status::Blocked;
            }
            if !q.reads.is_empty() {
                // Answering READs comes first; only the rate limits it.
                let gate = q.t.response_gate();
                return if gate > now {
                    Status::WaitUntil(gate)
                } else {
                    Status::Ready(None)
                };
            }
            // Is there new data at the cursor, and from when may it start? Does it begin a
            // synchronise message?
            let mut new_at: Option<Time> = None;
            let mut sync = false;
            let send_held = q.managed_send && q.sq_base + q.cur as u64 >= q.send_enabled;
            if send_held {
                // A managed QP's next WQE waits for SEND_ENABLE: not processed ahead of it.
                q.wqe_q.hold();
            }
            // A READ beyond max_rd_atomic outstanding waits for one to complete.
            let enabled = !send_held && !q.read_waits(q.cur);
            if q.cur < q.sq.len() && enabled {
                let w = &mut q.sq[q.cur];
                if w.first_psn.is_none() && !w.wr.op.carries_data() {
                    // A control WR is a WQE too: it takes its slots of the WQE pipeline before
                    // it executes (once; a WAIT that blocks has been processed already).
                    if !w.done {
                        let ready = match w.ready_ps {
                            Some(t) => t,
                            None if w.post_ps > now => w.post_ps,
                            None => {
                                let t = p.limits.ready(now, w.post_ps, &mut self.wqe, &mut q.wqe_q);
                                w.ready_ps = Some(t);
                                t
                            }
                        };
                        if ready > now {
                            // Only retransmissions may go meanwhile.
                            let next_new = q.cursor_psn();
                            return match q.t.plan(now, next_new, false) {
                                Plan::Send { psn, sport } => Status::Ready(Some((psn, sport))),
                                Plan::Wait(t) => Status::WaitUntil(t.min(ready)),
                                Plan::Blocked => Status::WaitUntil(ready),
                            };
                        }
                    }
                    let is_wait = matches!(w.wr.op, SendOp::Wait { .. }) && !w.done;
                    if self.execute_control(qpn, now, eff) {
                        // An executed WAIT ends the QP's turn when another QP waits for one.
                        if is_wait && (0..8).map(|c| self.arb.len(c)).sum::<u32>() > 1 {
                            return Status::Yield;
                        }
                        continue;
                    }
                    // Blocked on a WAIT: only retransmissions may go, and the WQE engine
                    // cannot run ahead of it.
                    let q = self.qps[qpn as usize].as_mut().unwrap();
                    q.wqe_q.hold();
                    let next_new = q.cursor_psn();
                    return match q.t.plan(now, next_new, false) {
                        Plan::Send { psn, sport } => Status::Ready(Some((psn, sport))),
                        Plan::Wait(t) => Status::WaitUntil(t),
                        Plan::Blocked => Status::Blocked,
                    };
                } else {
                    // First time at the cursor: WQE processing time and message-rate limits.
                    if w.ready_ps.is_none() && w.first_psn.is_none() && w.post_ps > now {
                        // A busy tenant CPU posts it later than the event that made it post: it
                        // is not at the NIC yet, and reserves nothing of the WQE pipeline (other
                        // QPs' WQEs go meanwhile).
                        new_at = Some(w.post_ps);
                    } else if w.ready_ps.is_none() && w.first_psn.is_none() && w.loc_prot {
                        // The NIC finds the foreign-PD lkey when it fetches the WR's data
                        // (checked here, once per WR, off the per-packet path).
                        let at = q.cur;
                        self.enter_error(qpn, Some((at, WcStatus::LocalProtectionError)), eff);
                        return Status::Blocked;
                    } else if w.ready_ps.is_none() && w.first_psn.is_none() {
                        let t = p.limits.ready(now, w.post_ps, &mut self.wqe, &mut q.wqe_q);
                        w.ready_ps = Some(t);
                        new_at = Some(t);
                    } else {
                        new_at = Some(w.ready_ps.unwrap_or(now));
                    }
                    sync = w.wr.fence && w.first_psn.is_none();
                }
            }
            let have_new = new_at.is_some_and(|t| t <= now);
            let next_new = q.cursor_psn();
            if sync {
                q.t.sync_at(next_new);
            }
            return match q.t.plan(now, next_new, have_new) {
                Plan::Send { psn, sport } => Status::Ready(Some((psn, sport))),
                Plan::Wait(t) => Status::WaitUntil(t),
                Plan::Blocked => match new_at {
                    Some(t) if t > now => Status::WaitUntil(t),
                    _ => Status::Blocked,
                },
            };
        }
    }

    /// Executes the control WR at a QP's cursor (once). Returns false if it blocks (WAIT).
    fn execute_control(&mut self, qpn: QpNum, now: Time, eff: &mut Effects) -> bool {
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let w = &mut q.sq[q.cur];
        if w.done {
            q.cur += 1;
            return true;
        }
        match w.wr.op {
            SendOp::Wait { cq, .. } => {
                let total = match self.cqs.get(cq as usize) {
                    Some(Some(c)) => c.total,
                    _ => {
                        // Waiting on a CQ that does not exist never finishes; treat it as done.
                        w.done = true;
                        q.cur += 1;
                        return true;
                    }
                };
                // The target was fixed at post time.
                if w.wait_target.is_some_and(|target| total < target) {
                    let c = self.cqs[cq as usize].as_mut().unwrap();
                    if !c.waiters.contains(&qpn) {
                        c.waiters.push(qpn);
                    }
                    return false;
                }
                w.done = true;
                q.cur += 1;
            }
            SendOp::SendEnable { qp, count } => {
                w.done = true;
                q.cur += 1;
                if let Ok(t) = self.qp_mut(qp) {
                    t.send_enabled += count as u64;
                    self.activate(qp, eff);
                }
            }
            SendOp::RecvEnable { qp, count } => {
                w.done = true;
                q.cur += 1;
                if let Ok(t) = self.qp_mut(qp) {
                    t.recv_enabled += count as u64;
                }
            }
            _ => {
                w.done = true;
                q.cur += 1;
            }
        }
        self.retire(qpn, now, eff);
        true
    }
}
