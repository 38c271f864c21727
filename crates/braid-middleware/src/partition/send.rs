//! The sending half (the paper's Algorithm 1): chunks dealt to member QPs, held last chunks,
//! completions, failures and re-sends, reports to the application in posting order.

use super::conn::*;
use super::layer::{PartitionLayer, HDR_TAG};
use super::wire::*;
use super::Assign;
use braid_verbs::*;

impl PartitionLayer {
    /// Releases held last chunks, posts what the windows allow, reports finished messages.
    pub(super) fn progress(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        self.release_finals(app_qp);
        self.pump(below, app_qp);
        self.report(app_qp);
    }

    pub(super) fn release_finals(&mut self, app_qp: QpNum) {
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        if conn.error || !conn.connected {
            return;
        }
        let mut mask = 0u32;
        let mut released: Vec<(usize, Chunk)> = Vec::new();
        for i in 0..conn.msgs.len() {
            let msg = &conn.msgs[i];
            for (m, &k) in msg.on.iter().enumerate() {
                if k > 0 {
                    mask |= 1 << m;
                }
            }
            if msg.unpinned > 0 {
                break;
            }
            if msg.held.is_none() {
                continue;
            }
            if mask.count_ones() > 1 {
                break;
            }
            let target = if mask == 0 {
                // Nothing earlier is unfinished: the least loaded member.
                let alive = conn.alive();
                match alive.iter().min_by_key(|&&m| conn.members[m].out_bytes) {
                    Some(&m) => m,
                    None => break,
                }
            } else {
                mask.trailing_zeros() as usize
            };
            if conn.members[target].failed {
                break;
            }
            let msg = &mut conn.msgs[i];
            let mut h = msg.held.take().expect("checked");
            h.pin = Some(target);
            msg.on[target] += 1;
            mask |= 1 << target;
            released.push((target, h));
        }
        for (m, h) in released {
            conn.pinned[m].push_back(h);
        }
    }

    pub(super) fn pump(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        let window = self.cfg.window.0;
        loop {
            let mut posted = false;
            let n = match self.conns.get(&app_qp) {
                Some(c) if c.connected && !c.error => c.members.len(),
                _ => return,
            };
            for m in 0..n {
                let conn = self.conns.get_mut(&app_qp).expect("checked");
                let mb = &conn.members[m];
                if mb.failed || (mb.out_chunks > 0 && mb.out_bytes >= window) {
                    continue;
                }
                let from_pinned = !conn.pinned[m].is_empty();
                let Some(ch) = (if from_pinned {
                    conn.pinned[m].front()
                } else {
                    conn.shared.front()
                }) else {
                    continue;
                };
                let ch = ch.clone();
                match self.post_chunk(below, app_qp, m, &ch) {
                    Ok(true) => {
                        let conn = self.conns.get_mut(&app_qp).expect("checked");
                        if let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) {
                            msg.posted += 1;
                        }
                        if from_pinned {
                            conn.pinned[m].pop_front();
                        } else {
                            conn.shared.pop_front();
                            if let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) {
                                msg.unpinned -= 1;
                                msg.on[m] += 1;
                            }
                        }
                        posted = true;
                    }
                    Ok(false) => {} // no header slot free now
                    Err(VerbsError::InvalidState(_)) => {
                        // The member refused the post: it is in Error; its chunks move on.
                        self.member_failed(below, app_qp, m, WcStatus::Flushed);
                        posted = true;
                        break;
                    }
                    Err(e) => {
                        // The WR itself is bad (a key, a length): the application's post fails
                        // (see `post_send`), or, if it was accepted earlier, its WR fails and
                        // the QP goes to Error, as a local protection error does on ibverbs.
                        let accepted = self
                            .conns
                            .get(&app_qp)
                            .is_some_and(|c| c.msgs.iter().any(|x| x.id == ch.id && x.posted > 0));
                        if !accepted && self.posting == Some((app_qp, ch.id)) {
                            self.post_error = Some((app_qp, ch.id, e));
                        } else {
                            self.fail_conn(below, app_qp, WcStatus::Flushed, Some(ch.id));
                        }
                        return;
                    }
                }
                if self.conns.get(&app_qp).is_none_or(|c| c.error) {
                    return;
                }
            }
            if !posted {
                return;
            }
        }
    }

    /// Posts one chunk on member `m`. Ok(false): no header slot is free (retry later).
    pub(super) fn post_chunk(
        &mut self,
        below: &mut dyn Verbs,
        app_qp: QpNum,
        m: usize,
        ch: &Chunk,
    ) -> Result<bool, VerbsError> {
        let needs_slot = matches!(ch.kind, Kind::Send | Kind::WriteImm);
        let slot = if needs_slot {
            match self.slot(below) {
                Some(s) => Some(s),
                None => {
                    self.c.slot_waits += 1;
                    return Ok(false);
                }
            }
        } else {
            None
        };
        let conn = self.conns.get(&app_qp).expect("checked");
        let msg = conn
            .msgs
            .iter()
            .find(|x| x.id == ch.id)
            .expect("a queued chunk's message is unreported");
        let qpn = conn.members[m].qpn;
        let app = &msg.wr;
        let wr_id = self.next_wr;
        self.next_wr += 1;
        let payload = slice_sges(&app.sg_list, ch.offset, ch.len);
        let imm = match app.op {
            SendOp::SendWithImm(i) | SendOp::WriteWithImm(i) => Some(i),
            _ => None,
        };
        let hdr = |flags: u16| Header {
            flags,
            id: ch.id,
            total: msg.total,
            offset: ch.offset,
            len: ch.len as u32,
            imm: imm.unwrap_or(0),
        };
        let mut wrs = Vec::with_capacity(2);
        match ch.kind {
            Kind::Write => {
                let mut w = SendWr::new(wr_id, SendOp::Write, payload);
                w.remote_addr = app.remote_addr + ch.offset;
                w.rkey = app.rkey;
                wrs.push(w);
            }
            Kind::Send => {
                let (_, addr, lkey) = slot.expect("taken");
                let flags = if imm.is_some() { F_IMM } else { 0 };
                below.write_local(addr, &hdr(flags).encode())?;
                let mut sg = vec![Sge {
                    addr,
                    length: HDR as u32,
                    lkey,
                }];
                sg.extend(payload);
                wrs.push(SendWr::new(wr_id, SendOp::Send, sg));
            }
            Kind::WriteImm => {
                let (_, addr, lkey) = slot.expect("taken");
                below.write_local(addr, &hdr(F_WRITE_IMM).encode())?;
                let mut h = SendWr::new(
                    wr_id | HDR_TAG,
                    SendOp::Send,
                    vec![Sge {
                        addr,
                        length: HDR as u32,
                        lkey,
                    }],
                );
                h.signaled = false;
                wrs.push(h);
                let mut w = SendWr::new(wr_id, SendOp::WriteWithImm(imm.unwrap_or(0)), payload);
                w.remote_addr = app.remote_addr + ch.offset;
                w.rkey = app.rkey;
                wrs.push(w);
            }
            Kind::Whole => {
                let mut w = app.clone();
                w.wr_id = wr_id;
                wrs.push(w);
            }
        }
        let n = wrs.len();
        for (i, mut w) in wrs.into_iter().enumerate() {
            if i + 1 == n {
                w.signaled = true;
            }
            if ch.kind != Kind::Whole {
                w.inline = app.inline;
                w.fence = app.fence;
            }
            below.charge(Work::WrBuilt(1));
            if let Err(e) = below.post_send(qpn, w) {
                if let Some((s, _, _)) = slot {
                    self.free_slots.push(s);
                }
                return Err(e);
            }
        }
        self.inflight.insert(
            wr_id,
            Inflight {
                app_qp,
                member: m,
                chunk: ch.clone(),
                slot: slot.map(|s| s.0),
            },
        );
        let mb = &mut self.conns.get_mut(&app_qp).expect("checked").members[m];
        mb.out_bytes += ch.len;
        mb.out_chunks += 1;
        Ok(true)
    }

    /// Queues a chunk again (its member failed): a held last chunk is held again; a static
    /// chunk goes to the next surviving member; a dynamic one to the shared queue.
    pub(super) fn requeue(&mut self, app_qp: QpNum, mut ch: Chunk) {
        let st = self.cfg.assign == Assign::Static;
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        let alive = conn.alive();
        let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) else {
            return;
        };
        if ch.fin {
            ch.pin = None;
            msg.held = Some(ch);
        } else if st && !alive.is_empty() {
            let m = alive[conn.rr % alive.len()];
            conn.rr += 1;
            ch.pin = Some(m);
            msg.on[m] += 1;
            conn.pinned[m].push_back(ch);
        } else {
            ch.pin = None;
            msg.unpinned += 1;
            conn.shared.push_front(ch);
        }
    }

    /// Member `m` is in Error: drop it and move its queued chunks; with nobody left (or
    /// `resend = false`) the logical connection fails.
    pub(super) fn member_failed(
        &mut self,
        below: &mut dyn Verbs,
        app_qp: QpNum,
        m: usize,
        status: WcStatus,
    ) {
        let resend = self.cfg.resend;
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        if conn.members[m].failed {
            return;
        }
        conn.members[m].failed = true;
        self.c.member_failures += 1;
        let queued: Vec<Chunk> = conn.pinned[m].drain(..).collect();
        for ch in &queued {
            if let Some(msg) = conn.msgs.iter_mut().find(|x| x.id == ch.id) {
                msg.on[m] -= 1;
            }
        }
        let qpn = conn.members[m].qpn;
        let none_left = conn.alive().is_empty();
        // Make sure its outstanding chunks come back (flushed) to be re-sent.
        let _ = below.modify_qp(qpn, QpModify::Error);
        if none_left || !resend {
            self.fail_conn(below, app_qp, status, None);
            return;
        }
        for ch in queued {
            self.requeue(app_qp, ch);
        }
    }

    /// The logical connection fails: every unreported message completes with an error (the
    /// failing one with `status`, the rest flushed), RECVs are flushed, members go to Error.
    pub(super) fn fail_conn(
        &mut self,
        below: &mut dyn Verbs,
        app_qp: QpNum,
        status: WcStatus,
        failing: Option<u32>,
    ) {
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        if conn.error {
            return;
        }
        conn.error = true;
        self.c.conn_errors += 1;
        conn.shared.clear();
        for p in conn.pinned.iter_mut() {
            p.clear();
        }
        for mb in conn.members.iter_mut() {
            if !mb.failed {
                mb.failed = true;
                let _ = below.modify_qp(mb.qpn, QpModify::Error);
            }
        }
        let (send_cq, recv_cq, peer) = (conn.send_cq, conn.recv_cq, conn.peer);
        let msgs: Vec<Msg> = conn.msgs.drain(..).collect();
        let recvs: Vec<RecvWr> = conn.rx.app_recvs.drain(..).collect();
        let mut first = true;
        for msg in msgs {
            let st = if failing == Some(msg.id) || (failing.is_none() && first) {
                status
            } else {
                WcStatus::Flushed
            };
            first = false;
            self.push_app(send_cq, app_wc(msg.wr.wr_id, st, msg.opcode, 0, app_qp));
        }
        for r in recvs {
            let mut wc = app_wc(r.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, app_qp);
            if let Some(p) = peer {
                (wc.src_host, wc.src_qp) = (p.host, p.qpn);
            }
            self.push_app(recv_cq, wc);
        }
    }

    /// Reports finished messages from the front, in posting order.
    pub(super) fn report(&mut self, app_qp: QpNum) {
        let Some(conn) = self.conns.get_mut(&app_qp) else {
            return;
        };
        let mut out = Vec::new();
        while conn
            .msgs
            .front()
            .is_some_and(|m| m.completed == m.nchunks && m.held.is_none())
        {
            let msg = conn.msgs.pop_front().expect("checked");
            if msg.wr.signaled || conn.sig_all {
                out.push(app_wc(
                    msg.wr.wr_id,
                    WcStatus::Success,
                    msg.opcode,
                    msg.total,
                    app_qp,
                ));
            }
        }
        let cq = conn.send_cq;
        for wc in out {
            self.push_app(cq, wc);
        }
    }

    pub(super) fn on_send_wc(
        &mut self,
        below: &mut dyn Verbs,
        wc: &WorkCompletion,
    ) -> Option<QpNum> {
        if wc.wr_id & HDR_TAG != 0 {
            // A WRITE_WITH_IMM's header: only an error shows; the chunk behind it is flushed
            // and handled on its own completion.
            return None;
        }
        let inf = self.inflight.remove(&wc.wr_id)?;
        if let Some(s) = inf.slot {
            self.free_slots.push(s);
        }
        let (app_qp, m) = (inf.app_qp, inf.member);
        let conn = self.conns.get_mut(&app_qp)?;
        let mb = &mut conn.members[m];
        mb.out_bytes -= inf.chunk.len;
        mb.out_chunks -= 1;
        let msg = conn.msgs.iter_mut().find(|x| x.id == inf.chunk.id)?;
        msg.on[m] -= 1;
        if wc.status == WcStatus::Success {
            msg.completed += 1;
            self.c.chunks[m] += 1;
            return Some(app_qp);
        }
        if conn.error {
            return Some(app_qp);
        }
        let retryable = matches!(
            wc.status,
            WcStatus::RetryExceeded | WcStatus::RnrRetryExceeded | WcStatus::Flushed
        );
        if !retryable || !self.cfg.resend {
            // The application's fault (remote access) or no re-sending: its WR fails.
            let id = inf.chunk.id;
            self.fail_conn(below, app_qp, wc.status, Some(id));
            return Some(app_qp);
        }
        let others = conn.alive().iter().any(|&k| k != m);
        if !others {
            let id = inf.chunk.id;
            self.fail_conn(below, app_qp, wc.status, Some(id));
            return Some(app_qp);
        }
        self.member_failed(below, app_qp, m, wc.status);
        if self.conns.get(&app_qp).is_some_and(|c| !c.error) {
            self.c.resent += 1;
            self.requeue(app_qp, inf.chunk);
        }
        Some(app_qp)
    }
}
