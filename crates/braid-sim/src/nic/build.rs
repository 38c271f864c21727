//! Packet building: the packet a ready QP sends (`build_packet`) and the retirement of
//! finished send WQEs into completions (`retire`).

use super::{op_name, op_of, wc, Effect, Effects, MsgRecord, Nic, NicParams};
use crate::packet::*;
use crate::transport::psn::to_wire;
use crate::transport::TxFx;
use braid_engine::time::Time;
use braid_verbs::*;

impl Nic {
    /// Builds the packet a ready QP sends: a READ response (`plan` None), or the packet of PSN
    /// `psn` on source port `sport` — new data at the cursor, or a retransmission located by PSN.
    pub(super) fn build_packet(
        &mut self,
        qpn: QpNum,
        plan: Option<(u32, u16)>,
        now: Time,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> PktId {
        let mtu = p.nic.mtu as u64;
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let mut pk = Packet::control(PktKind::Data, 0);
        pk.src = q.local_addr;
        pk.dst = q.remote_host;
        pk.sport = q.sport;
        pk.prio = q.prio;
        pk.src_qp = qpn;
        pk.dst_qp = q.remote_qpn;
        pk.sent_ps = now;
        let mut payload_bytes: Option<Vec<u8>> = None;
        let mut fx = TxFx::default();
        let Some((psn, sport)) = plan else {
            // READ response data.
            let job = q.reads.front_mut().expect("a response is pending");
            let off = job.next as u64 * mtu;
            let len = (job.len - off.min(job.len)).min(mtu);
            pk.op = DataOp::ReadResp;
            pk.psn = job.first_psn + job.next;
            pk.payload = len as u32;
            pk.first = job.next == 0;
            pk.last = job.next + 1 == job.npkts;
            pk.addr = job.remote_addr + off;
            pk.size = ROCE_HEADER + pk.payload;
            if self.mem.is_tracked(q.space, job.remote_addr + off, len) {
                payload_bytes = Some(
                    self.mem
                        .read_in(q.space, job.remote_addr + off, len)
                        .unwrap_or_else(|_| vec![0; len as usize]),
                );
            }
            job.next += 1;
            if job.next == job.npkts {
                q.reads.pop_front();
            }
            q.t.on_response_sent(now, pk.size);
            self.stats.data_pkts += 1;
            q.tx_bytes += pk.payload as u64;
            if q.wire_psn {
                // A response carries its request's PSN, in the requester's numbering.
                pk.psn = to_wire(pk.psn, q.rq_psn);
            }
            pk.tracked = payload_bytes.is_some();
            let id = pool.alloc(pk);
            if let Some(b) = payload_bytes {
                self.payloads.insert(id, b);
            }
            return id;
        };
        pk.sport = sport;
        // Which WQE and which of its packets.
        let new = psn >= q.cursor_psn();
        let (i, k) = if new {
            let w = &mut q.sq[q.cur];
            if w.first_psn.is_none() {
                w.first_psn = Some(q.next_psn);
                q.next_psn += w.npkts;
                w.msn = q.send_msn;
                if matches!(
                    w.wr.op,
                    SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
                ) {
                    q.send_msn += 1;
                }
            }
            (q.cur, q.cur_pkt)
        } else {
            let i =
                q.sq.iter()
                    .position(|w| w.first_psn.is_some_and(|f| psn >= f && psn < f + w.npkts))
                    .expect("a retransmitted PSN belongs to an outstanding WQE");
            let w = &q.sq[i];
            let f = w.first_psn.unwrap();
            // A READ is asked for again from its first missing response (at or after `psn`:
            // a response placed out of order is not missing).
            let k = if w.wr.op == SendOp::Read {
                let mut k = (psn - f).max(w.read_got);
                while w.read_ahead.contains(&k) {
                    k += 1;
                }
                if k >= w.npkts && w.read_got < w.npkts {
                    k = w.read_got;
                }
                k
            } else {
                psn - f
            };
            (i, k)
        };
        let w = &mut q.sq[i];
        let first_psn = w.first_psn.unwrap();
        pk.psn = first_psn + k;
        pk.msn = w.msn;
        pk.ipsn = k;
        pk.first = k == 0;
        let off = k as u64 * mtu;
        let npsn;
        match w.wr.op {
            SendOp::Read => {
                pk.kind = PktKind::ReadReq;
                pk.size = READ_REQ_SIZE;
                // The request covers the rest of the READ up to the first response already
                // placed out of order (selective repeat asks only for what it lacks);
                // responses come back on their PSNs.
                let end = w.read_ahead.range(k..).next().copied().unwrap_or(w.npkts);
                pk.addr = w.wr.remote_addr + off;
                pk.msg_len = (end as u64 * mtu).min(w.bytes) - off.min(w.bytes);
                pk.aux = end - k;
                pk.imm = w.wr.rkey;
                pk.last = true;
                npsn = first_psn + end - psn;
                if new {
                    q.t.on_read_sent(first_psn, w.npkts);
                    q.cur += 1;
                    q.cur_pkt = 0;
                }
            }
            _ => {
                let len = (w.bytes - off.min(w.bytes)).min(mtu);
                pk.op = match w.wr.op {
                    SendOp::Send | SendOp::SendWithImm(_) => DataOp::Send,
                    _ => DataOp::Write,
                };
                pk.payload = len as u32;
                pk.size = ROCE_HEADER + pk.payload;
                pk.last = k + 1 == w.npkts;
                pk.msg_len = w.bytes;
                pk.addr = match pk.op {
                    DataOp::Send => off,
                    _ => w.wr.remote_addr + off,
                };
                if let SendOp::SendWithImm(v) | SendOp::WriteWithImm(v) = w.wr.op {
                    pk.has_imm = true;
                    pk.imm = v;
                }
                pk.aux = w.wr.rkey;
                pk.sync = w.wr.fence;
                if let Some(d) = w.wr.ud_dest {
                    pk.dst = d.host;
                    pk.dst_qp = d.qpn;
                }
                // The bytes travel when the source memory keeps them (a tracked region).
                if let Some(d) = &w.inline_data {
                    let a = (off as usize).min(d.len());
                    payload_bytes = Some(d[a..(a + len as usize).min(d.len())].to_vec());
                } else if self.mem.sges_tracked(q.space, &w.wr.sg_list) {
                    payload_bytes = Some(self.mem.gather(q.space, &w.wr.sg_list, off, len));
                }
                npsn = 1;
                if new {
                    if pk.last {
                        q.cur += 1;
                        q.cur_pkt = 0;
                        // Unreliable transports complete a send once it is on the wire.
                        if q.qp_type != QpType::Rc {
                            w.done = true;
                        }
                    } else {
                        q.cur_pkt += 1;
                    }
                }
            }
        }
        if !new {
            pk.retx = true;
            q.retx_pkts += 1;
            self.stats.retx_pkts += 1;
        }
        self.stats.data_pkts += 1;
        q.tx_bytes += pk.payload as u64;
        let reliable = q.qp_type == QpType::Rc;
        q.t.on_sent(now, psn, npsn, pk.size, reliable, &mut fx);
        if q.wire_psn {
            pk.psn = to_wire(pk.psn, q.sq_psn);
        }
        pk.tracked = payload_bytes.is_some();
        let id = pool.alloc(pk);
        if let Some(b) = payload_bytes {
            self.payloads.insert(id, b);
        }
        self.transport_fx(qpn, fx, eff);
        if !reliable {
            self.retire(qpn, now, eff);
        }
        id
    }

    /// Completes WQEs at the head of the send queue that are done, in order.
    #[inline(always)]
    pub(super) fn retire(&mut self, qpn: QpNum, now: Time, eff: &mut Effects) {
        // Called after every ACK; the head is done only once per message.
        let head_done = matches!(self.qps.get(qpn as usize), Some(Some(q))
            if q.sq.front().is_some_and(|w| w.done));
        if head_done {
            self.retire_done(qpn, now, eff);
        }
    }

    fn retire_done(&mut self, qpn: QpNum, now: Time, eff: &mut Effects) {
        let host = self.host;
        let mut cqes = Vec::new();
        {
            let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
                return;
            };
            while let Some(w) = q.sq.front() {
                if !w.done {
                    break;
                }
                let w = q.sq.pop_front().unwrap();
                q.sq_base += 1;
                q.cur = q.cur.saturating_sub(1);
                if w.wr.op.carries_data() {
                    eff.list.push(Effect::Message(MsgRecord {
                        qpn,
                        dst: w.wr.ud_dest.map(|d| d.host).unwrap_or(q.remote_host),
                        op: op_name(&w.wr.op),
                        bytes: w.bytes,
                        post_ps: w.post_ps,
                        complete_ps: now,
                        wr_id: w.wr.wr_id,
                    }));
                }
                if w.signaled {
                    cqes.push((
                        q.send_cq,
                        wc(w.wr.wr_id, WcStatus::Success, op_of(&w.wr.op), w.bytes, qpn),
                    ));
                }
            }
            // A generated flow's QP posts one message in its life: once that is done and nothing
            // else is queued, the queue gives its buffer back (room for four WQEs, which a
            // finished flow would otherwise hold to the end of the run). A QP that posts again
            // allocates it once more; its capacity is never seen, so results do not change.
            if q.sq.is_empty() && q.sq_base == 1 {
                q.sq = std::collections::VecDeque::new();
            }
        }
        let _ = host;
        for (cq, c) in cqes {
            self.push_cqe(cq, c, eff);
        }
    }
}
