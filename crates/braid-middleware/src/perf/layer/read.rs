//! The layer's side of the large-READ conversion (`read_convert`, see [`crate::perf::read`]).
//!
//! Requester: a READ of at least `large_msg` whose peer host runs PeRF is not posted; in its
//! place in the send queue goes a signaled 0_WAIT (the *marker*: it completes once every WR
//! before it has, as RC completes in order), and a request goes to the holder through the agent.
//! The READ completes (once, opcode Read, its `wr_id` and length) when both the marker and the
//! holder's DONE are in; the completions of later WRs wait behind it (`QpQueue::settle`).
//!
//! The destination must be remotely writable, and the application registered it for local
//! write only (a READ's destination needs no more). The layer registers the same range again
//! with remote write, as a region of its own whose key goes only to the holder's layer: the
//! application's region keeps the rights it asked for (widening it silently would let any peer
//! knowing its rkey write into it), and the extra region covers exactly the destinations READs
//! used (cached per range: benchmarks reuse their buffers).
//!
//! Requester: only a READ whose destination is inside one of the application's own regions
//! (its lkey, its range, local write) is converted; the layer never makes memory remotely
//! writable by bare address.
//!
//! Holder: a request is served only for the QP's connected peer (the requesting host and QP
//! are the ones the holder's QP is connected to: an RC responder answers nobody else), and is
//! checked against the tenant's own registrations (key, range, remote read: what the NIC would
//! check for a real READ); it is then served as one WRITE on the holder's end
//! of the same connection, queued behind what the tenant already posted there, so that it is
//! the tenant's bandwidth traffic for PeRF (sticky bandwidth-intensive; cut into sub-WRs with
//! 0_WAITs while a small tenant is active on this host). A refused request is answered at once.

use super::*;
use crate::perf::queue::Remote;
use crate::perf::read::{Msg, Request, WAKE_AGENT_READ};

impl PerfLayer {
    /// Converts the READ at the front of `qpn`'s software queue if it qualifies; Ok(true) if
    /// it did (the marker is posted, the request queued for the agent).
    pub(super) fn convert_read(
        &mut self,
        below: &mut dyn Verbs,
        qpn: QpNum,
    ) -> Result<bool, VerbsError> {
        if !self.cfg.read_convert {
            return Ok(false);
        }
        let Some(q) = self.qps.get(&qpn) else {
            return Ok(false);
        };
        let Some(a) = q.sw.front() else {
            return Ok(false);
        };
        if a.wr.op != SendOp::Read
            || a.offset != 0
            || a.bytes < self.cfg.large_msg.0
            || a.bytes > u32::MAX as u64
            || a.wr.sg_list.len() != 1
        {
            return Ok(false);
        }
        let Some((host, holder_qpn)) = q.peer else {
            return Ok(false);
        };
        if !self.host.borrow().read.ready.contains(&host) {
            return Ok(false);
        }
        let Some(dummy) = self.dummy_cq else {
            return Ok(false);
        };
        let sge = a.wr.sg_list[0];
        let pd = self.qp_pd.get(&qpn).copied().unwrap_or(DEFAULT_PD);
        let dest = (sge.addr, sge.length as u64, pd);
        // The destination must be the application's own: inside a region it registered, named
        // by that region's lkey, with local write (what the NIC checks of a READ's SGE). The
        // layer then widens exactly that memory; any other READ goes to the NIC as it is,
        // which refuses a bad SGE as it would without PeRF.
        if !self.owns_dest(&sge, pd) {
            return Ok(false);
        }
        let bytes = a.bytes;
        // How long a real READ's transport would try: (retry_cnt + 1) timeouts, plus its data's
        // time at line rate (a real READ's timer restarts with each response packet).
        let retry = self.retry_cnt.get(&qpn).copied().unwrap_or(7) as u64;
        let rate = below.caps().line_rate_bps;
        let wire = if rate > 0 {
            (bytes as u128 * 8 * 1_000_000_000_000 / rate as u128) as u64
        } else {
            0
        };
        let deadline = below
            .now()
            .saturating_add((retry + 1).saturating_mul(self.cfg.read_timeout.0))
            .saturating_add(wire);
        let Some(dest_rkey) = self.dest_key(below, dest) else {
            return Ok(false);
        };
        let q = self.qps.get_mut(&qpn).expect("checked");
        let seq = q.next_seq;
        let mut marker = SendWr::new(
            seq,
            SendOp::Wait {
                cq: dummy,
                count: 0,
            },
            vec![],
        );
        marker.signaled = true;
        if let Err(e) = below.post_send(qpn, marker) {
            self.release_dest(below, dest);
            return Err(e);
        }
        let a = q.sw.pop_front().expect("front");
        let app_signaled = a.wr.signaled || q.sig_all;
        let id = self.host.borrow_mut().read.new_id(self.tenant, host);
        q.metas.push_back(AppMeta {
            ord: a.ord,
            wr_id: a.wr.wr_id,
            signaled: app_signaled,
            bytes: a.bytes,
            opcode: WcOpcode::Read,
            complete_posted: true,
            reported: false,
            serve: None,
            remote: Some(Remote {
                id,
                done: None,
                marker: false,
            }),
        });
        q.remote_pending += 1;
        q.slot_wrs += 1;
        q.posted(HwEntry {
            seq,
            ord: a.ord,
            last: true,
            large_bytes: 0,
            signaled: true,
            data: false,
        });
        self.remote_ids.insert(
            id,
            RemoteRead {
                qpn,
                deadline,
                dest,
            },
        );
        below.set_timer(deadline, TIMER_RESCHEDULE);
        self.c.converted += 1;
        below.charge(Work::WrBuilt(1));
        let req = Request {
            id,
            qpn: holder_qpn,
            raddr: a.wr.remote_addr,
            rkey: a.wr.rkey,
            len: a.bytes as u32,
            dest: sge.addr,
            dest_rkey,
            from_qpn: qpn,
        };
        {
            let mut h = self.host.borrow_mut();
            h.read.converted += 1;
            h.read.outbox.push_back((host, Msg::Request(req)));
        }
        below.wake(AGENT, WAKE_AGENT_READ);
        Ok(true)
    }

    /// Whether `sge` lies in one of the application's own registrations in protection domain
    /// `pd` (the READ's QP's: an SGE may use only its QP's PD), under that registration's lkey,
    /// with local write.
    fn owns_dest(&self, sge: &Sge, pd: PdId) -> bool {
        let end = sge.addr.checked_add(sge.length as u64);
        self.mrs.iter().any(|(m, acc, mpd)| {
            m.lkey == sge.lkey
                && *mpd == pd
                && acc.local_write
                && sge.addr >= m.addr
                && end.is_some_and(|e| e <= m.addr + m.len)
        })
    }

    /// The layer's remotely writable key over a READ destination (registered once per range
    /// while READs use it; each call takes a reference, [`Self::release_dest`] returns it).
    fn dest_key(&mut self, below: &mut dyn Verbs, dest: DestKey) -> Option<u32> {
        if let Some((m, refs)) = self.dest_mrs.get_mut(&dest) {
            *refs += 1;
            return Some(m.rkey);
        }
        let access = Access {
            local_write: true,
            remote_write: true,
            remote_read: false,
            // Untracked: the application's region holds the bytes (if it tracks them).
            track: false,
        };
        // In the READ's QP's PD: the holder's WRITEs arrive on that QP, and the NIC accepts
        // only rkeys of its PD.
        let m = below.reg_mr_in(dest.2, dest.0, dest.1, access).ok()?;
        self.dest_mrs.insert(dest, (m, 1));
        Some(m.rkey)
    }

    /// A converted READ is over: its destination stops being remotely writable once no other
    /// outstanding READ uses it (a late WRITE from a holder we gave up on is then refused by
    /// the NIC instead of landing in memory the application owns again).
    fn release_dest(&mut self, below: &mut dyn Verbs, dest: DestKey) {
        let Some((m, refs)) = self.dest_mrs.get_mut(&dest) else {
            return;
        };
        *refs -= 1;
        if *refs == 0 {
            let m = *m;
            self.dest_mrs.remove(&dest);
            let _ = below.dereg_mr(&m);
        }
    }

    /// Converted READs whose holder did not answer in time complete RetryExceeded (the QP goes
    /// to Error), as a real READ to a dead peer; their late answers are dropped.
    pub(super) fn expire_reads(&mut self, below: &mut dyn Verbs) {
        let now = below.now();
        let due: Vec<u32> = self
            .remote_ids
            .iter()
            .filter(|(_, r)| r.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.host.borrow_mut().read.owners.remove(&id);
            self.c.read_timeouts += 1;
            self.finish_remote(below, id, WcStatus::RetryExceeded);
        }
    }

    /// QP `qpn` is destroyed: its converted READs are forgotten (their answers find no owner).
    pub(super) fn drop_remote_reads(&mut self, below: &mut dyn Verbs, qpn: QpNum) {
        let ids: Vec<u32> = self
            .remote_ids
            .iter()
            .filter(|(_, r)| r.qpn == qpn)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.host.borrow_mut().read.owners.remove(&id);
            if let Some(r) = self.remote_ids.remove(&id) {
                self.release_dest(below, r.dest);
            }
        }
    }

    /// Request `id` ended with `st` (the holder's answer, or our timeout).
    fn finish_remote(&mut self, below: &mut dyn Verbs, id: u32, st: WcStatus) {
        let Some(RemoteRead { qpn, dest, .. }) = self.remote_ids.remove(&id) else {
            return;
        };
        self.release_dest(below, dest);
        let Some(cq) = self.qps.get(&qpn).map(|q| q.send_cq) else {
            return;
        };
        // The marker may have completed unseen: take the CQ's news first.
        if self.drain(below, cq) && self.cqs.entry(cq).or_default().app.note_news() {
            below.wake(self.tenant, WAKE_NOTIFY);
        }
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        let mut out = Vec::new();
        q.remote_done(id, st, &mut out);
        let cq = q.send_cq;
        for wc in out {
            self.deliver_local(below, cq, wc);
        }
        self.fail_if_refused(below, qpn);
    }

    /// The agent woke us: requests to serve, answers to our requests.
    pub(super) fn on_read_wake(&mut self, below: &mut dyn Verbs) {
        let (reqs, dones) = {
            let mut h = self.host.borrow_mut();
            (
                h.read.serve_in.remove(&self.tenant).unwrap_or_default(),
                h.read.done_in.remove(&self.tenant).unwrap_or_default(),
            )
        };
        for (peer, r) in reqs {
            self.serve(below, peer, r);
        }
        for (id, st) in dones {
            self.finish_remote(below, id, st);
        }
        self.refill_all(below);
    }

    /// A converted READ was refused: the QP goes to Error as with a real READ's remote access
    /// error (the NIC flushes what it holds; the layer flushes its queue).
    pub(super) fn fail_if_refused(&mut self, below: &mut dyn Verbs, qpn: QpNum) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if !q.refused || q.moved_to_error {
            return;
        }
        q.moved_to_error = true;
        let mut out = Vec::new();
        q.flush_sw(&mut out);
        let cq = q.send_cq;
        let _ = below.modify_qp(qpn, QpModify::Error);
        self.hw_forget(below, qpn);
        for wc in out {
            self.deliver_local(below, cq, wc);
        }
        self.sync_work(qpn);
        self.publish(qpn, None);
    }

    /// Serves a peer's converted READ from this tenant's memory, or refuses it.
    fn serve(&mut self, below: &mut dyn Verbs, peer: u32, r: Request) {
        let end = r.raddr.checked_add(r.len as u64);
        // The key must be the tenant's, in the holder QP's protection domain (what the NIC
        // checks of a READ arriving on that QP), in bounds and remotely readable.
        let qp_pd = self.qp_pd.get(&r.qpn).copied();
        let lkey = self
            .mrs
            .iter()
            .find(|(m, acc, pd)| {
                m.rkey == r.rkey
                    && Some(*pd) == qp_pd
                    && acc.remote_read
                    && r.raddr >= m.addr
                    && end.is_some_and(|e| e <= m.addr + m.len)
            })
            .map(|(m, _, _)| m.lkey);
        // Only the QP's connected peer may have it serve: the request came over the link from
        // `peer` and names the QP it was posted on, which must be the one ours is connected
        // to. Anyone else naming our QP number is refused before our QP posts anything.
        let usable = self
            .qps
            .get(&r.qpn)
            .is_some_and(|q| !q.failed && q.peer == Some((peer, r.from_qpn)));
        let Some(lkey) = lkey.filter(|_| usable && r.len > 0) else {
            let mut h = self.host.borrow_mut();
            h.read.refused += 1;
            h.read.outbox.push_back((
                peer,
                Msg::Done {
                    id: r.id,
                    ok: false,
                },
            ));
            drop(h);
            below.wake(AGENT, WAKE_AGENT_READ);
            return;
        };
        let sge = Sge {
            addr: r.raddr,
            length: r.len,
            lkey,
        };
        let mut wr = SendWr::new(0, SendOp::Write, vec![sge]);
        wr.remote_addr = r.dest;
        wr.rkey = r.dest_rkey;
        wr.signaled = true;
        let bytes = r.len as u64;
        let large = bytes >= self.cfg.large_msg.0;
        {
            // The holder's own bandwidth traffic, classified as its posts are.
            let mut h = self.host.borrow_mut();
            let t = h.tenant_mut(self.tenant);
            t.avg_size = if t.avg_size == 0.0 {
                bytes as f64
            } else {
                0.5 * t.avg_size + 0.5 * bytes as f64
            };
            if large && !t.bw_send {
                t.bw_send = true;
                if t.class != Class::BandwidthIntensive {
                    t.class = Class::BandwidthIntensive;
                    t.class_changes += 1;
                }
            }
        }
        let now = below.now();
        let q = self.qps.get_mut(&r.qpn).expect("usable");
        q.push_serve(wr, large, peer, r.id);
        self.c.served += 1;
        self.sync_work(r.qpn);
        self.publish(r.qpn, Some(now));
        let _ = self.refill(below, r.qpn, None);
        self.publish(r.qpn, None);
        if let Some(cq) = self.qps.get(&r.qpn).map(|q| q.send_cq) {
            self.arm_if_needed(below, cq);
        }
    }

    /// Answers the requests `qpn`'s serving WRITEs finished (through the agent).
    pub(super) fn answer_served(&mut self, below: &mut dyn Verbs, qpn: QpNum) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if q.served.is_empty() {
            return;
        }
        let done = std::mem::take(&mut q.served);
        let mut h = self.host.borrow_mut();
        for (peer, id, ok) in done {
            if !ok {
                h.read.refused += 1;
            } else {
                h.read.served += 1;
            }
            h.read.outbox.push_back((peer, Msg::Done { id, ok }));
        }
        drop(h);
        below.wake(AGENT, WAKE_AGENT_READ);
    }
}
