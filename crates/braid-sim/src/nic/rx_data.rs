//! The responder's data path: a WRITE/SEND packet checked against its region and accepted in
//! order (go-back-N) or into place (selective repeat). Split from `rx.rs` (module size).

use super::{wc, Effects, Nic, NicParams, PendingRecv};
use crate::packet::*;
use crate::transport::{DataInfo, Reply, RxClass};
use braid_engine::time::Time;
use braid_verbs::*;

impl Nic {
    pub(super) fn on_data(
        &mut self,
        now: Time,
        pk: &Packet,
        payload: Option<Vec<u8>>,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let completion = pk.last && (pk.op == DataOp::Send || pk.has_imm);
        let sync_first = pk.sync.then(|| pk.psn - pk.ipsn);
        let info = DataInfo {
            psn: pk.psn,
            first: pk.first,
            last: pk.last,
            ce: pk.ce,
            sport: pk.sport,
            read_response: pk.op == DataOp::ReadResp,
            retx: pk.retx,
            completion,
            sync_first,
        };
        let Ok(q) = self.qp_mut(qpn) else { return };
        let qp_type = q.qp_type;
        // The scratch list (empty between packets: `send_replies` drains it).
        let mut replies = std::mem::take(&mut self.replies);
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let class = if qp_type == QpType::Ud {
            RxClass::Accept
        } else {
            q.t.on_data(now, info, &mut replies)
        };
        if pk.op == DataOp::ReadResp {
            self.send_replies(now, pk, &mut replies, p, pool, eff);
            self.replies = replies;
            return self.on_read_resp(now, pk, payload, p, eff);
        }
        match class {
            RxClass::Duplicate => {}
            RxClass::Drop => self.stats.ooo_drops += 1,
            RxClass::Accept => self.accept_data(now, pk, info, payload, p, &mut replies, eff),
        }
        let refused = replies
            .iter()
            .any(|r| matches!(r, Reply::AccessNak { .. } | Reply::InvalidNak { .. }));
        self.send_replies(now, pk, &mut replies, p, pool, eff);
        self.replies = replies;
        if refused {
            // Class C error (IBA 9.9.3.1.3): the responder goes to Error too.
            self.enter_error(qpn, None, eff);
        }
    }

    /// Whether the WRITE a data packet belongs to may touch this host's memory: an rkey in the
    /// protection domain `pd` of the QP it arrived on, bounds of the whole message and
    /// remote-write permission (a zero-length WRITE checks nothing, IBA C9-88). Other packets
    /// always may.
    pub(super) fn write_allowed(&self, qpn: QpNum, pk: &Packet, mtu: u64) -> bool {
        if pk.op != DataOp::Write || pk.msg_len == 0 {
            return true;
        }
        let Some(Some(q)) = self.qps.get(qpn as usize) else {
            return false;
        };
        let pd = q.pd;
        let start = pk.addr.saturating_sub(pk.ipsn as u64 * mtu);
        self.mem.check_remote(pd, pk.aux, start, pk.msg_len, true)
    }

    /// Places an in-sequence data packet, completes its message at the responder, and lets the
    /// transport acknowledge it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn accept_data(
        &mut self,
        now: Time,
        pk: &Packet,
        info: DataInfo,
        payload: Option<Vec<u8>>,
        p: &NicParams,
        replies: &mut Vec<Reply>,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let mtu = p.nic.mtu as u64;
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let qp_type = q.qp_type;
        if qp_type == QpType::Rc && q.t.out_of_order() {
            return self.accept_data_ooo(now, pk, info, payload, mtu, replies, eff);
        }
        if qp_type == QpType::Uc {
            // UC: a gap loses the rest of its message; the next first packet starts afresh.
            if pk.first {
                q.uc_discard = false;
                q.recv_off = 0;
            } else if pk.psn != q.uc_epsn {
                q.uc_discard = true;
            }
            q.uc_epsn = pk.psn + 1;
            if q.uc_discard {
                return;
            }
        }
        // A WRITE is checked at its first packet (in order, the rest follow it or nothing does):
        // refused, it changes no byte; RC NAKs it, UC drops the message silently.
        if pk.first && !self.write_allowed(qpn, pk, mtu) {
            self.stats.access_errors += 1;
            let q = self.qps[qpn as usize].as_mut().unwrap();
            match qp_type {
                QpType::Rc => replies.push(Reply::AccessNak { psn: pk.psn }),
                _ => q.uc_discard = true,
            }
            return;
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        // The first packet of a SEND needs a posted (and, if managed, enabled) RECV.
        let needs_recv = pk.op == DataOp::Send || (pk.has_imm && pk.last);
        if pk.op == DataOp::Send && pk.first {
            let enabled = !q.managed_recv || q.recv_base < q.recv_enabled;
            if q.rq.is_empty() || !enabled {
                if qp_type == QpType::Rc {
                    // Receiver not ready: the sender retries this PSN after a delay.
                    replies.push(Reply::RnrNak {
                        psn: q.t.expected(),
                    });
                }
                return;
            }
            q.recv_off = 0;
        }
        if pk.op == DataOp::Send && qp_type == QpType::Rc {
            let capacity = q.rq.front().map_or(0, |r| sg_len(&r.wr.sg_list));
            if q.recv_off + pk.payload as u64 > capacity {
                // The SEND outgrows its receive (IBA 9.9.3.1.3, class C): the receive completes
                // IBV_WC_LOC_LEN_ERR, the responder NAKs "invalid request" (the requester's WR
                // completes IBV_WC_REM_INV_REQ_ERR) and goes to Error (`on_data`). UC and UD
                // have no NAK: their receive completes with the error at the message's end.
                let r = q.rq.pop_front().expect("checked at the first packet");
                return self.fail_recv_too_small(pk, r, qpn, replies, eff);
            }
        }
        q.rx_bytes += pk.payload as u64;
        if let Some(bytes) = &payload {
            // Tracked bytes only: which PD and address space they are checked and placed in.
            let (pd, space) = (q.pd, q.space);
            match pk.op {
                DataOp::Send => {
                    if let Some(r) = q.rq.front() {
                        let sg = r.wr.sg_list.clone();
                        let off = q.recv_off;
                        self.mem.scatter(space, &sg, off, bytes);
                    }
                }
                _ => {
                    if self
                        .mem
                        .check_remote(pd, pk.aux, pk.addr, bytes.len() as u64, true)
                    {
                        let _ = self.mem.write_in(space, pk.addr, bytes);
                    } else {
                        self.stats.access_errors += 1;
                    }
                }
            }
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        if pk.op == DataOp::Send {
            q.recv_off += pk.payload as u64;
        }
        if pk.last && needs_recv {
            let byte_len = if pk.op == DataOp::Send {
                q.recv_off
            } else {
                pk.msg_len
            };
            let capacity: u64 =
                q.rq.front()
                    .map(|r| r.wr.sg_list.iter().map(|s| s.length as u64).sum())
                    .unwrap_or(0);
            if let Some(r) = q.rq.pop_front() {
                q.recv_base += 1;
                let status = if pk.op == DataOp::Send && byte_len > capacity {
                    WcStatus::LocalLengthError
                } else {
                    WcStatus::Success
                };
                let opcode = if pk.has_imm {
                    WcOpcode::RecvWithImm
                } else {
                    WcOpcode::Recv
                };
                let mut c = wc(r.wr.wr_id, status, opcode, byte_len, qpn);
                c.imm = pk.has_imm.then_some(pk.imm);
                c.src_host = pk.src;
                c.src_qp = pk.src_qp;
                let cq = q.recv_cq;
                self.push_cqe(cq, c, eff);
            }
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        q.t.on_accepted(now, info, replies);
    }

    /// Places a packet a multipath receiver accepted, possibly out of order (MP-RDMA §3.1): WRITE
    /// data goes to its address, SEND data to the RECV its MSN names at the offset it carries
    /// (iPSN × MTU). Messages complete in order, once the transport's rcv_nxt passes their tail.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn accept_data_ooo(
        &mut self,
        now: Time,
        pk: &Packet,
        info: DataInfo,
        payload: Option<Vec<u8>>,
        mtu: u64,
        replies: &mut Vec<Reply>,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        // Out of order, any packet may come first: each checks its whole message.
        if !self.write_allowed(qpn, pk, mtu) {
            self.stats.access_errors += 1;
            replies.push(Reply::AccessNak { psn: pk.psn });
            return;
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let needs_recv = pk.op == DataOp::Send || (pk.has_imm && pk.last);
        let mut sg = None;
        if needs_recv {
            // The RECV of message `msn`: the receive queue's head belongs to MSN recv_base.
            let idx = (pk.msn as u64).checked_sub(q.recv_base);
            let r = idx.and_then(|i| {
                let enabled = !q.managed_recv || q.recv_base + i < q.recv_enabled;
                q.rq.get(i as usize).filter(|_| enabled)
            });
            match r {
                Some(r) => sg = Some(r.wr.sg_list.clone()),
                None => {
                    replies.push(Reply::RnrNak { psn: pk.psn });
                    return;
                }
            }
            if pk.op == DataOp::Send
                && pk.addr + pk.payload as u64 > sg.as_deref().map_or(0, sg_len)
            {
                // Out of order, the packet that lands beyond the receive's end (its offset
                // is in `addr`) fails it, whichever arrives first (see `accept_data`).
                let i = (pk.msn as u64 - q.recv_base) as usize;
                let r = q.rq.remove(i).expect("found above");
                q.recv_base += 1;
                return self.fail_recv_too_small(pk, r, qpn, replies, eff);
            }
        }
        q.rx_bytes += pk.payload as u64;
        if let Some(a) = q.rx_audit.as_mut() {
            // The NIC's own check of §3.4: a synchronise packet is placed only once every PSN
            // before its message has been.
            if let Some(first) = info.sync_first {
                self.stats.sync_placed += 1;
                if !a.all_below(first) {
                    self.stats.sync_placed_early += 1;
                }
            }
            a.insert(pk.psn);
        }
        if let Some(bytes) = &payload {
            // Tracked bytes only: which PD and address space they are checked and placed in.
            let (pd, space) = (q.pd, q.space);
            match pk.op {
                DataOp::Send => {
                    if let Some(sg) = &sg {
                        self.mem.scatter(space, sg, pk.addr, bytes);
                    }
                }
                _ => {
                    if self
                        .mem
                        .check_remote(pd, pk.aux, pk.addr, bytes.len() as u64, true)
                    {
                        let _ = self.mem.write_in(space, pk.addr, bytes);
                    } else {
                        self.stats.access_errors += 1;
                    }
                }
            }
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        if pk.last && needs_recv {
            q.rx_pending.insert(
                pk.psn,
                PendingRecv {
                    byte_len: pk.msg_len,
                    send: pk.op == DataOp::Send,
                    imm: pk.has_imm.then_some(pk.imm),
                    src_host: pk.src,
                    src_qp: pk.src_qp,
                },
            );
        }
        q.t.on_accepted(now, info, replies);
        let upto = q.t.expected();
        let mut cqes = Vec::new();
        while let Some(e) = q.rx_pending.first_entry() {
            if *e.key() >= upto {
                break;
            }
            let m = e.remove();
            let Some(r) = q.rq.pop_front() else { break };
            q.recv_base += 1;
            let capacity: u64 = r.wr.sg_list.iter().map(|s| s.length as u64).sum();
            let status = if m.send && m.byte_len > capacity {
                WcStatus::LocalLengthError
            } else {
                WcStatus::Success
            };
            let opcode = if m.imm.is_some() {
                WcOpcode::RecvWithImm
            } else {
                WcOpcode::Recv
            };
            let mut c = wc(r.wr.wr_id, status, opcode, m.byte_len, qpn);
            c.imm = m.imm;
            c.src_host = m.src_host;
            c.src_qp = m.src_qp;
            cqes.push((q.recv_cq, c));
        }
        for (cq, c) in cqes {
            self.push_cqe(cq, c, eff);
        }
    }

    /// An RC SEND longer than the receive `r` it takes: the receive completes
    /// `LocalLengthError` with the message's length (as the NICs report it), and the responder
    /// answers NAK "invalid request" (`on_data` then puts its QP in Error).
    fn fail_recv_too_small(
        &mut self,
        pk: &Packet,
        r: super::RecvWqe,
        qpn: QpNum,
        replies: &mut Vec<Reply>,
        eff: &mut Effects,
    ) {
        let opcode = if pk.has_imm {
            WcOpcode::RecvWithImm
        } else {
            WcOpcode::Recv
        };
        let mut c = wc(
            r.wr.wr_id,
            WcStatus::LocalLengthError,
            opcode,
            pk.msg_len,
            qpn,
        );
        c.src_host = pk.src;
        c.src_qp = pk.src_qp;
        let cq = self.qps[qpn as usize].as_ref().unwrap().recv_cq;
        self.push_cqe(cq, c, eff);
        replies.push(Reply::InvalidNak { psn: pk.psn });
    }
}

/// The bytes a scatter-gather list holds.
fn sg_len(sg: &[Sge]) -> u64 {
    sg.iter().map(|s| s.length as u64).sum()
}
