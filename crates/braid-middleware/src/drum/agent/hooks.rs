//! The agent's parts for failures (`fail.rs`), tracked buffers (`bufs.rs`) and the UD carrier
//! (`ud.rs`): kept here so that `agent.rs` stays the pipes, scheduler and poller.

use super::*;

impl DrumAgent {
    /// `pipe = "ud"`: moves SENDs whose turn it is from the pool onto the UD QP, sends what the
    /// connections' windows allow, arms the next timeout (`ud.rs`).
    pub(super) fn ud_service(&mut self, v: &mut dyn Verbs) {
        let Some(ud) = self.ud.as_mut() else {
            return;
        };
        let now = v.now();
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        if st.tracking && v.caps().data_tracking {
            ud.track_payloads(v);
        }
        let (drum, burst) = (st.mode == Mode::Drum, st.cfg.burst as f64);
        let cost = ps(st.cfg.convert_ns) + ps(st.cfg.qp_map_ns);
        for c in st.conns.values_mut() {
            while c.state == QpState::Rts && !c.halted && c.ud_turn(false) {
                if drum {
                    refill(c, now, burst);
                    if !c.active {
                        break;
                    }
                    if c.x_tokens < 1.0 {
                        c.note_token_wait();
                        break;
                    }
                    c.x_tokens -= 1.0;
                }
                let p = c.pool.pop_front().expect("its turn");
                ud.enqueue(c, p.app_wr_id, p.signaled, p.wr.op, &p.wr.sg_list);
                v.charge(Work::Ns(cost / 1000));
                self.cpu_convert_ps += ps(st.cfg.convert_ns);
                self.cpu_qp_map_ps += ps(st.cfg.qp_map_ns);
                self.wr_posted += 1;
            }
        }
        ud.pump(v, st);
        if let Some(t) = ud.wake_at {
            let t = t.max(now + 1);
            if self.ud_timer.is_none_or(|u| t < u || u <= now) {
                self.ud_timer = Some(t);
                v.set_timer(t, T_UD);
            }
        }
    }

    /// Pipe `key` failed (its QP went to Error, or it never came up): every connection on it
    /// sees what its own QP would (`fail.rs`).
    pub(super) fn pipe_failed(&mut self, key: (u32, u32), culprit: Option<Culprit>) {
        let Some(p) = self.pipes.get_mut(&key) else {
            return;
        };
        if p.phase == Phase::Failed {
            return; // the NIC flushing the rest: already accounted for
        }
        p.phase = Phase::Failed;
        p.cleared();
        self.pipe_errors += 1;
        self.failed_pipes += 1;
        let mut st = self.st.borrow_mut();
        let members = st.pipe_members(key.0, key.1);
        fail_pipe(&mut st, &members, culprit);
    }

    /// Once a tenant of the host tracks memory, the agent's receive-buffer slots and scratch
    /// area keep bytes too (tracked regions of its own over them, `bufs.rs`).
    pub(super) fn track_buffers(&mut self, v: &mut dyn Verbs) {
        let (Some(l), Some(g)) = (self.layout, self.st.borrow().global) else {
            return;
        };
        if !self.st.borrow().tracking || !v.caps().data_tracking {
            return;
        }
        let local = Access::LOCAL.tracked();
        if self.scratch.is_none() {
            match v.reg_mr(l.scratch, crate::drum::state::SCRATCH, local) {
                Ok(_) => self.scratch = Some((l.scratch, g.lkey)),
                Err(_) => self.pipe_errors += 1,
            }
        }
        for p in self.pipes.values_mut().filter(|p| !p.tracked) {
            let (a, n) = l.pipe_range(p.index);
            match v.reg_mr(a, n, local) {
                Ok(_) => p.tracked = true,
                Err(_) => self.pipe_errors += 1,
            }
        }
    }

    /// Connections bound to a pipe that failed before they connected go to Error.
    pub(super) fn fail_late_joiners(&mut self) {
        if self.failed_pipes == 0 {
            return;
        }
        let mut st = self.st.borrow_mut();
        for (&(peer, gi), p) in &self.pipes {
            if p.phase == Phase::Failed {
                let members = st.pipe_members(peer, gi);
                fail_late_joiners(&mut st, &members);
            }
        }
    }

    /// A control message of the peer's agent about its connection `sender` (`imm.rs`).
    pub(super) fn on_ctrl(&mut self, peer: u32, sender: u32, kind: u32) {
        let mut st = self.st.borrow_mut();
        let Some(local) = st.by_remote.get(&(peer, sender)).copied() else {
            self.unknown_conn += 1;
            return;
        };
        self.partial.remove(&(peer, sender));
        if st
            .conns
            .get(&local)
            .is_none_or(|c| c.state == QpState::Error)
        {
            return;
        }
        match kind {
            CTRL_REFUSED => {
                // The peer's agent refused one of its WRs as our NIC would have: the responder's
                // end goes to Error at once, as its RC QP would (its WRs still on a shared QP
                // complete `Flushed` now, then its pool and receives).
                self.peer_refusals += 1;
                fail_pipe(&mut st, &[local], None);
            }
            CTRL_LENGTH => {
                // Our SEND did not fit the peer's receive: the requester's end goes to Error.
                self.peer_refusals += 1;
                fail_pipe(&mut st, &[local], None);
            }
            _ => self.unknown_conn += 1,
        }
    }

    /// Joins the segments of a long SEND (`IMM_MORE`) from the peer's connection `key.1`: a
    /// segment is kept and gives None, the last gives the whole message (bytes, contents).
    pub(super) fn join_segments(
        &mut self,
        key: (u32, u32),
        send: bool,
        more: bool,
        len: u64,
        data: Option<Vec<u8>>,
    ) -> Option<(u64, Option<Vec<u8>>)> {
        let join = |got: Option<Vec<u8>>, d: Option<Vec<u8>>| match (got, d) {
            (Some(mut a), Some(d)) => {
                a.extend_from_slice(&d);
                Some(a)
            }
            _ => None,
        };
        if !send {
            return Some((len, data));
        }
        if more {
            let e = self
                .partial
                .entry(key)
                .or_insert_with(|| (0, Some(Vec::new())));
            e.0 += len;
            e.1 = join(e.1.take(), data);
            return None;
        }
        match self.partial.remove(&key) {
            None => Some((len, data)),
            Some((n, got)) => Some((n + len, join(got, data))),
        }
    }

    /// Posts the control messages the connections owe their peers' agents (`imm.rs`) on their
    /// shared RC QPs: zero-byte `SEND_WITH_IMM(id | IMM_CTRL | kind)`, nothing in flight for
    /// the connection (it is in Error), so its completion is the pipe's alone.
    pub(super) fn send_ctrl(&mut self, v: &mut dyn Verbs) {
        let out = std::mem::take(&mut self.st.borrow_mut().ctrl_out);
        for (vq, kind) in out {
            let key = self.st.borrow().conns.get(&vq).and_then(|c| c.pipe);
            let Some(p) = key.and_then(|k| self.pipes.get_mut(&k)) else {
                continue;
            };
            if p.phase != Phase::Ready {
                continue;
            }
            if p.pending.is_some() {
                // A companion must follow its WR first (`imm.rs`): next time.
                self.st.borrow_mut().ctrl_out.push((vq, kind));
                continue;
            }
            let wr = SendWr::new(
                (vq as u64) << 32 | u32::MAX as u64,
                SendOp::SendWithImm(vq | IMM_CTRL | kind),
                Vec::new(),
            );
            if v.post_send(p.qp, wr).is_ok() {
                p.posted(1, v.now());
                self.wr_posted += 1;
            }
        }
    }
}
