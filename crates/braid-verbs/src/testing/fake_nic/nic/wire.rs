//! The fake NIC's wire: the requester putting WRs on the wire, the responder answering, ACKs,
//! timeouts and go-back-N (the verbs are in `verbs.rs`).

use super::*;

impl FakeNic {
    // ------------------------------------------------------------------ requester

    /// Processes `qp`'s send queue as far as it can go now: executes control WRs, puts data
    /// WRs on the wire, stops at a blocked WAIT, a WR not enabled yet, or the end.
    pub(in crate::testing::fake_nic) fn pump(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        qpn: QpNum,
    ) {
        if self.dead {
            return;
        }
        let host = self.index;
        let now = s.now;
        loop {
            let Some(q) = self.qps.get_mut(&qpn) else {
                return;
            };
            if q.state != QpState::Rts || q.paused_until > now {
                return;
            }
            let cursor = q.cursor;
            let managed = q.init.managed_send;
            let send_enabled = q.send_enabled;
            let Some(w) = q.sq.get_mut(cursor) else {
                return;
            };
            if managed && w.seq >= send_enabled {
                return;
            }
            if w.ready_at > now {
                s.at(w.ready_at, Ev::Kick { host, qp: qpn });
                return;
            }
            if w.done || w.sent {
                q.cursor += 1;
                continue;
            }
            if w.loc_prot {
                self.fail_at(s, qpn, cursor, WcStatus::LocalProtectionError);
                return;
            }
            let op = w.wr.op;
            if !op.carries_data() {
                let target = w.target;
                match op {
                    SendOp::Wait { cq, .. } => match self.cqs.get_mut(&cq) {
                        Some(c) if c.total >= target => {}
                        Some(c) => {
                            c.waiters.insert(qpn);
                            return;
                        }
                        // The CQ was destroyed: the WAIT never completes.
                        None => return,
                    },
                    SendOp::SendEnable { qp: t, .. } => {
                        if let Some(tq) = self.qps.get_mut(&t) {
                            tq.send_enabled = tq.send_enabled.max(target);
                            s.at(now, Ev::Kick { host, qp: t });
                        }
                    }
                    SendOp::RecvEnable { qp: t, .. } => {
                        if let Some(tq) = self.qps.get_mut(&t) {
                            tq.recv_enabled = tq.recv_enabled.max(target);
                        }
                    }
                    _ => {}
                }
                let q = self.qps.get_mut(&qpn).expect("still here");
                q.sq[cursor].done = true;
                q.cursor += 1;
                self.retire(s, qpn);
                continue;
            }
            // A READ waits while `max_rd_atomic` READs are outstanding (the requester never
            // exceeds its responder's READ resources); the next READ response kicks it.
            let q = self.qps.get(&qpn).expect("pumped");
            if matches!(op, SendOp::Read)
                && q.sq
                    .iter()
                    .take(cursor)
                    .filter(|w| matches!(w.wr.op, SendOp::Read) && !w.done)
                    .count()
                    >= q.init.max_rd_atomic as usize
            {
                return;
            }
            self.transmit(s, cfg, qpn);
        }
    }

    /// Puts the data WR at the cursor on the wire.
    pub(super) fn transmit(&mut self, s: &mut Sched, cfg: &NetConfig, qpn: QpNum) {
        let host = self.index;
        let now = s.now;
        let mtu = self.caps.mtu.max(1) as u64;
        let q = self.qps.get(&qpn).expect("pumped");
        let w = &q.sq[q.cursor];
        let owner = q.owner;
        let payload = match w.wr.op {
            SendOp::Read => None,
            _ => match &w.inline_data {
                Some(d) => Some(d.clone()),
                None => self.gather(owner, &w.wr.sg_list),
            },
        };
        let (bytes, is_read) = (w.bytes, matches!(w.wr.op, SendOp::Read));
        let ser = if is_read {
            0
        } else {
            ser_ps(&self.caps, bytes)
        };
        let start = now.max(self.link_free);
        let end = start + ser;
        self.link_free = end;
        let npkts = if is_read {
            1
        } else {
            bytes.div_ceil(mtu).max(1)
        };
        let caps = self.caps.clone();
        let q = self.qps.get_mut(&qpn).expect("pumped");
        let lost_pkts = q.lose_next.min(npkts);
        q.lose_next -= lost_pkts;
        let cursor = q.cursor;
        let psn = match q.sq[cursor].psn {
            Some(p) => p,
            None => {
                let p = q.next_psn;
                q.next_psn += 1;
                q.sq[cursor].psn = Some(p);
                p
            }
        };
        let w = &mut q.sq[cursor];
        w.sent = true;
        w.tx_end = end;
        q.cursor += 1;
        let dst = match q.init.qp_type {
            QpType::Ud => w.wr.ud_dest,
            _ => q.remote,
        };
        if lost_pkts == 0 {
            if let Some(d) = dst {
                s.at(
                    end + cfg.latency_ps,
                    Ev::Arrive(Box::new(Msg {
                        src_host: host,
                        src_addr: q.src_addr,
                        src_qp: qpn,
                        src_epoch: q.epoch,
                        dst_addr: d.host,
                        dst_qp: d.qpn,
                        qp_type: q.init.qp_type,
                        psn,
                        op: w.wr.op,
                        len: bytes,
                        payload,
                        remote_addr: w.wr.remote_addr,
                        rkey: w.wr.rkey,
                    })),
                );
            }
        }
        match q.init.qp_type {
            QpType::Rc => {
                if !q.timer_armed {
                    let deadline = Qp::deadline(&q.sq[cursor], cfg, &caps);
                    q.timer_armed = true;
                    q.timer_gen += 1;
                    let (epoch, gen) = (q.epoch, q.timer_gen);
                    s.at(
                        deadline,
                        Ev::Timeout {
                            host,
                            qp: qpn,
                            epoch,
                            gen,
                        },
                    );
                }
            }
            _ => s.at(
                end,
                Ev::LocalDone {
                    host,
                    qp: qpn,
                    epoch: q.epoch,
                    psn,
                },
            ),
        }
    }

    pub(in crate::testing::fake_nic) fn local_done(
        &mut self,
        s: &mut Sched,
        qpn: QpNum,
        epoch: u64,
        psn: u64,
    ) {
        let Some(q) = self.qps.get_mut(&qpn).filter(|q| q.epoch == epoch) else {
            return;
        };
        if q.state != QpState::Rts {
            return;
        }
        if let Some(w) = q.sq.iter_mut().find(|w| w.psn == Some(psn)) {
            w.done = true;
        }
        self.retire(s, qpn);
    }

    /// Goes back to the WR at `idx`: it and every data WR after it are sent again.
    pub(super) fn go_back(q: &mut Qp, idx: usize) {
        for w in q.sq.iter_mut().skip(idx) {
            if w.wr.op.carries_data() && !w.done {
                w.sent = false;
            }
        }
        q.cursor = idx.min(q.cursor);
    }

    /// (Re)arms the RC timer for the oldest WR on the wire, or disarms it.
    pub(super) fn rearm(&mut self, s: &mut Sched, cfg: &NetConfig, qpn: QpNum) {
        let host = self.index;
        let caps = &self.caps;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.timer_gen += 1;
        let oldest =
            q.sq.iter()
                .find(|w| w.wr.op.carries_data() && w.sent && !w.done);
        match oldest {
            Some(w) => {
                let at = Qp::deadline(w, cfg, caps).max(s.now + cfg.rc_timeout_ps);
                q.timer_armed = true;
                let (epoch, gen) = (q.epoch, q.timer_gen);
                s.at(
                    at,
                    Ev::Timeout {
                        host,
                        qp: qpn,
                        epoch,
                        gen,
                    },
                );
            }
            None => q.timer_armed = false,
        }
    }

    pub(in crate::testing::fake_nic) fn on_reply(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        r: Reply,
    ) {
        if self.dead {
            return;
        }
        let now = s.now;
        let Some(q) = self.qps.get_mut(&r.qp).filter(|q| q.epoch == r.epoch) else {
            return;
        };
        if q.state != QpState::Rts {
            return;
        }
        let Some(idx) =
            q.sq.iter()
                .position(|w| w.wr.op.carries_data() && w.psn == Some(r.psn))
        else {
            // Already complete: a duplicate.
            return;
        };
        let qpn = r.qp;
        match r.kind {
            ReplyKind::Ack | ReplyKind::ReadData(_) => {
                if q.sq[idx].done {
                    return;
                }
                if let ReplyKind::ReadData(Some(d)) = r.kind {
                    let (owner, sges) = (q.owner, q.sq[idx].wr.sg_list.clone());
                    self.scatter(owner, &sges, &d);
                }
                let q = self.qps.get_mut(&qpn).expect("present");
                let read =
                    q.sq.iter()
                        .take(idx + 1)
                        .any(|w| matches!(w.wr.op, SendOp::Read) && !w.done);
                // Cumulative: everything up to it has been executed by the responder.
                for w in q.sq.iter_mut().take(idx + 1) {
                    if w.wr.op.carries_data() && w.psn.is_some() {
                        w.done = true;
                    }
                }
                q.retry_left = q.init.retry_cnt;
                q.rnr_left = q.init.rnr_retry;
                self.rearm(s, cfg, qpn);
                self.retire(s, qpn);
                if read {
                    // A READ waiting for one of `max_rd_atomic` may go now.
                    let host = self.index;
                    s.at(now, Ev::Kick { host, qp: qpn });
                }
            }
            ReplyKind::Rnr => {
                if q.init.rnr_retry < 7 {
                    if q.rnr_left == 0 {
                        self.fail_at(s, qpn, idx, WcStatus::RnrRetryExceeded);
                        return;
                    }
                    q.rnr_left -= 1;
                }
                for w in q.sq.iter_mut().take(idx) {
                    w.done = true;
                }
                Self::go_back(q, idx);
                q.paused_until = now + cfg.rnr_timeout_ps;
                q.timer_armed = false;
                q.timer_gen += 1;
                let at = q.paused_until;
                s.at(
                    at,
                    Ev::Kick {
                        host: self.index,
                        qp: qpn,
                    },
                );
                self.retire(s, qpn);
            }
            ReplyKind::RemoteAccess => self.fail_at(s, qpn, idx, WcStatus::RemoteAccessError),
            // IBV_WC_REM_INV_REQ_ERR: a SEND too long for its RECV, a READ beyond the
            // responder's READ resources.
            ReplyKind::InvalidRequest => self.fail_at(s, qpn, idx, WcStatus::RemoteInvalidRequest),
        }
    }

    pub(in crate::testing::fake_nic) fn on_timeout(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        qpn: QpNum,
        epoch: u64,
        gen: u64,
    ) {
        if self.dead {
            return;
        }
        let Some(q) = self.qps.get_mut(&qpn).filter(|q| q.epoch == epoch) else {
            return;
        };
        if q.state != QpState::Rts || !q.timer_armed || q.timer_gen != gen {
            return;
        }
        q.timer_armed = false;
        let Some(idx) =
            q.sq.iter()
                .position(|w| w.wr.op.carries_data() && w.sent && !w.done)
        else {
            return;
        };
        if q.retry_left == 0 {
            self.fail_at(s, qpn, idx, WcStatus::RetryExceeded);
            return;
        }
        q.retry_left -= 1;
        Self::go_back(q, idx);
        self.pump(s, cfg, qpn);
    }

    // ------------------------------------------------------------------ responder

    /// Processes a request that reached QP `m.dst_qp` of this NIC. `src_ok` says whether the
    /// message comes from the QP the destination is connected to (RC/UC). Returns the reply to
    /// send (RC only) and when it reaches the requester.
    pub(in crate::testing::fake_nic) fn respond(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        m: Msg,
        src_addrs: &[u32],
    ) -> Option<(u64, ReplyKind)> {
        let now = s.now;
        let lat = cfg.latency_ps;
        let qpn = m.dst_qp;
        let q = self.qps.get_mut(&qpn)?;
        if q.init.qp_type != m.qp_type || !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return None;
        }
        if m.qp_type != QpType::Ud {
            let r = q.remote?;
            if r.qpn != m.src_qp || !src_addrs.contains(&r.host) {
                return None;
            }
        }
        let rc = m.qp_type == QpType::Rc;
        // Replies leave a responder QP in order (an ACK never overtakes READ data).
        fn reply_at(q: &mut Qp, t: u64) -> u64 {
            let t = t.max(q.last_reply_at);
            q.last_reply_at = t;
            t
        }
        if rc {
            if m.psn > q.expected_psn {
                // Out of sequence (an earlier message was lost): dropped; the requester's
                // timer recovers.
                return None;
            }
            if m.psn < q.expected_psn && !matches!(m.op, SendOp::Read) {
                // A duplicate: acknowledged again, not executed again.
                let t = reply_at(q, now + lat);
                return Some((t, ReplyKind::Ack));
            }
        }
        let (owner, pd) = (q.owner, q.init.pd);
        let needs_recv = matches!(
            m.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
        );
        if needs_recv {
            let usable =
                q.rq.front()
                    .is_some_and(|r| !q.init.managed_recv || r.seq < q.recv_enabled);
            if !usable {
                return if rc {
                    let t = reply_at(q, now + lat);
                    Some((t, ReplyKind::Rnr))
                } else {
                    None
                };
            }
        }
        let (recv_cq, epoch) = (q.init.recv_cq, q.epoch);
        let is_rdma = matches!(m.op, SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read);
        // A zero-length RDMA operation checks no key (IBA C9-88).
        if is_rdma && m.len > 0 {
            let read = matches!(m.op, SendOp::Read);
            let ok = self
                .rkeys
                .get(&m.rkey)
                .and_then(|l| self.mrs.get(l))
                .is_some_and(|mr| {
                    mr.owner == owner
                        && mr.pd == pd
                        && mr.covers(m.remote_addr, m.len)
                        && if read {
                            mr.access.remote_read
                        } else {
                            mr.access.remote_write
                        }
                });
            if !ok {
                if !rc {
                    // UC: the message is silently dropped (class E).
                    return None;
                }
                // Class C: NAK, and the responder's QP goes to Error too.
                let q = self.qps.get_mut(&qpn).expect("present");
                if needs_recv {
                    let r = q.rq.pop_front().expect("usable");
                    let mut c = wc(
                        r.wr.wr_id,
                        WcStatus::RemoteAccessError,
                        WcOpcode::RecvWithImm,
                        0,
                        qpn,
                    );
                    c.src_host = m.src_addr;
                    c.src_qp = m.src_qp;
                    self.push_cqe(s, recv_cq, c, Slot::Recv { qp: qpn, epoch });
                }
                let q = self.qps.get_mut(&qpn).expect("present");
                let t = reply_at(q, now + lat);
                self.enter_error(s, qpn);
                return Some((t, ReplyKind::RemoteAccess));
            }
        }
        let new_read = rc && matches!(m.op, SendOp::Read) && m.psn == self.qps[&qpn].expected_psn;
        if new_read {
            // A new READ needs one of the responder's `max_dest_rd_atomic` READ resources, each
            // held until its response has left. A requester that exceeds them (it ignored its
            // `max_rd_atomic`) gets NAK Invalid Request, and the responder's QP goes to Error
            // (the requester sees IBV_WC_REM_INV_REQ_ERR, `RemoteInvalidRequest`, as for a SEND
            // too long for its RECV).
            let q = self.qps.get_mut(&qpn).expect("present");
            q.reads_served_until.retain(|&t| t > now);
            if q.reads_served_until.len() >= q.init.max_dest_rd_atomic as usize {
                let t = reply_at(q, now + lat);
                self.enter_error(s, qpn);
                return Some((t, ReplyKind::InvalidRequest));
            }
        }
        let grh = if m.qp_type == QpType::Ud && cfg.ud_grh {
            GRH_BYTES
        } else {
            0
        };
        let q = self.qps.get_mut(&qpn).expect("present");
        if matches!(m.op, SendOp::Send | SendOp::SendWithImm(_)) {
            let r = q.rq.front().expect("usable");
            let cap: u64 = r.wr.sg_list.iter().map(|s| s.length as u64).sum();
            if m.len + grh > cap {
                let r = q.rq.pop_front().expect("usable");
                let mut c = wc(
                    r.wr.wr_id,
                    WcStatus::LocalLengthError,
                    WcOpcode::Recv,
                    m.len + grh,
                    qpn,
                );
                c.src_host = m.src_addr;
                c.src_qp = m.src_qp;
                let t = reply_at(q, now + lat);
                self.push_cqe(s, recv_cq, c, Slot::Recv { qp: qpn, epoch });
                if rc {
                    self.enter_error(s, qpn);
                    return Some((t, ReplyKind::InvalidRequest));
                }
                return None;
            }
        }
        // Execute.
        let mut read_data = None;
        match m.op {
            SendOp::Write | SendOp::WriteWithImm(_) => {
                if let Some(d) = &m.payload {
                    if self.tracked(owner, m.remote_addr, m.len) {
                        self.write_mem(owner, m.remote_addr, d);
                    }
                }
            }
            SendOp::Read if m.len > 0 && self.tracked(owner, m.remote_addr, m.len) => {
                read_data = Some(self.read_mem(owner, m.remote_addr, m.len));
            }
            _ => {}
        }
        let q = self.qps.get_mut(&qpn).expect("present");
        if needs_recv {
            let r = q.rq.pop_front().expect("usable");
            let (opcode, imm, byte_len) = match m.op {
                SendOp::Send => (WcOpcode::Recv, None, m.len + grh),
                SendOp::SendWithImm(i) => (WcOpcode::RecvWithImm, Some(i), m.len + grh),
                SendOp::WriteWithImm(i) => (WcOpcode::RecvWithImm, Some(i), m.len),
                _ => unreachable!("only these consume a RECV"),
            };
            if matches!(m.op, SendOp::Send | SendOp::SendWithImm(_)) {
                // UD: the GRH (zeros here) fills the first 40 bytes of the buffer.
                let data = match &m.payload {
                    Some(p) => Some([vec![0u8; grh as usize], p.clone()].concat()),
                    None if grh > 0 => Some(vec![0u8; grh as usize]),
                    None => None,
                };
                if let Some(d) = data {
                    self.scatter(owner, &r.wr.sg_list, &d);
                }
            }
            let mut c = wc(r.wr.wr_id, WcStatus::Success, opcode, byte_len, qpn);
            c.imm = imm;
            c.src_host = m.src_addr;
            c.src_qp = m.src_qp;
            self.push_cqe(s, recv_cq, c, Slot::Recv { qp: qpn, epoch });
        }
        if !rc {
            return None;
        }
        let q = self.qps.get_mut(&qpn).expect("present");
        if m.psn == q.expected_psn {
            q.expected_psn += 1;
        }
        if matches!(m.op, SendOp::Read) {
            let start = now.max(self.link_free);
            let end = start + ser_ps(&self.caps, m.len);
            self.link_free = end;
            let q = self.qps.get_mut(&qpn).expect("present");
            if new_read {
                q.reads_served_until.push(end);
            }
            let t = reply_at(q, end + lat);
            Some((t, ReplyKind::ReadData(read_data)))
        } else {
            let t = reply_at(q, now + lat);
            Some((t, ReplyKind::Ack))
        }
    }
}
