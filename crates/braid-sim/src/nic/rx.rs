//! The receive path of the NIC: admission to the receive pipeline, control packets out,
//! incoming data, READ requests and responses, ACK/NAK/CNP replies, transport feedback and
//! timers.

use super::{
    addr_node, first_missing, Effects, Nic, NicParams, QpState, ReadJob, TimerKind,
    NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS, NAK_SACK, QPN_BITS, QPN_MASK,
};
use crate::packet::*;
use crate::transport::psn::to_wire;
use crate::transport::{Feedback, Reply, RxClass, TxFx};
use braid_engine::time::Time;
use braid_verbs::*;

impl Nic {
    /// Whether a packet arriving now must wait for the receive pipeline (QP-cache misses);
    /// returns the time its processing completes.
    pub fn rx_admit(&mut self, now: Time, pkt: &Packet, p: &NicParams) -> Time {
        if (!self.cache.enabled() && !self.mtt.enabled()) || pkt.kind == PktKind::Pfc {
            return now;
        }
        let start = now.max(self.rx_busy_until);
        let mut done = start;
        if self.cache.enabled() {
            if !self.cache.access(pkt.dst_qp) {
                self.stats.cache_misses += 1;
                done += p.nic.qp_cache_miss.0;
            } else {
                self.stats.cache_hits += 1;
            }
        }
        if self.mtt.enabled() {
            done += self.translate(pkt, p);
        }
        self.rx_busy_until = done;
        done
    }

    /// The MPT/MTT lookups a packet's remote key needs at this responder (`nic/mtt.rs`): a
    /// WRITE's data packet the page it lands in, a READ request every page it reads; their
    /// misses' cost. The key is resolved as the packet carries it, before the protection check
    /// (a refused access costs its lookups too).
    fn translate(&mut self, pkt: &Packet, p: &NicParams) -> u64 {
        match pkt.kind {
            PktKind::Data if pkt.op == DataOp::Write && pkt.msg_len > 0 => {
                let len = (pkt.payload as u64).min(p.nic.mtu as u64);
                self.mtt.access(pkt.aux, pkt.addr, len)
            }
            PktKind::ReadReq if pkt.msg_len > 0 => self.mtt.access(pkt.imm, pkt.addr, pkt.msg_len),
            _ => 0,
        }
    }

    /// Receive-pipeline backlog bookkeeping (bytes waiting for processing) and PFC towards the
    /// switch when it grows past the threshold.
    pub fn rx_backlog_change(&mut self, delta: i64, p: &NicParams, eff: &mut Effects) {
        self.rx_backlog = (self.rx_backlog as i64 + delta).max(0) as u64;
        let xoff = p.nic.rx_xoff.0;
        if !self.rx_paused_upstream && self.rx_backlog > xoff {
            self.rx_paused_upstream = true;
            eff.rx_pfc = Some(true);
        } else if self.rx_paused_upstream && self.rx_backlog <= xoff / 2 {
            self.rx_paused_upstream = false;
            eff.rx_pfc = Some(false);
        }
    }

    /// Queues a control packet (ACK, NAK, CNP, PFC) ahead of data.
    pub fn push_ctrl(&mut self, id: PktId, eff: &mut Effects) {
        self.ctrl.push_back(id);
        eff.kick = true;
    }

    /// A reply (ACK, NAK, CNP) from address `src` (the replying QP's own: a host may have
    /// several), counted; the caller sets the reply's own fields and queues it.
    #[allow(clippy::too_many_arguments)]
    fn ctrl_packet(
        &mut self,
        kind: PktKind,
        src: u32,
        to_host: u32,
        to_qp: QpNum,
        from_qp: QpNum,
        psn: u32,
        sport: u16,
        now: Time,
        p: &NicParams,
    ) -> Packet {
        let size = match kind {
            PktKind::Cnp => CNP_SIZE,
            _ => ACK_SIZE,
        };
        let mut pk = Packet::control(kind, size);
        pk.src = src;
        pk.dst = to_host;
        pk.dst_qp = to_qp;
        pk.src_qp = from_qp;
        pk.psn = psn;
        pk.sport = sport;
        pk.prio = p.ack_prio;
        pk.sent_ps = now;
        match kind {
            PktKind::Ack => self.stats.acks += 1,
            PktKind::Nak => self.stats.naks += 1,
            PktKind::RnrNak => self.stats.rnr_naks += 1,
            PktKind::Cnp => self.stats.cnps_sent += 1,
            _ => {}
        }
        pk
    }

    /// A packet for this NIC has been through the receive pipeline. Consumes the packet.
    pub fn receive(
        &mut self,
        now: Time,
        id: PktId,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let mut pk = pool.get(id).clone();
        if pool.int.on {
            // Its slot may be the reply's (`net/int.rs`): the records are kept aside.
            pool.int.latch(id);
        }
        pool.free(id);
        let payload = if self.payloads.is_empty() {
            None
        } else {
            self.payloads.remove(&id)
        };
        let qpn = pk.dst_qp;
        // A QP in Reset, Init (not yet RTR) or Error drops whatever reaches it, silently (no
        // ACK, no NAK).
        if let Some(q) = self.qp(qpn) {
            if matches!(q.state, QpState::Reset | QpState::Init | QpState::Error) {
                return;
            }
            // A connected QP (RC, UC) takes packets only from the address its remote address
            // vector names (IBA transport header validation of connected services; RoCEv2's
            // source GID is the IP source address). A packet from any other host is dropped
            // silently. The BTH carries no source QP, so hardware cannot tell two QPs of the
            // connected peer's address apart: neither does this check (`pk.src_qp` is the
            // simulator's bookkeeping), and PSN sequencing decides the rest (ReDMArk, USENIX
            // Security '21, injects with the peer's address). UD QPs talk to anyone.
            // Compared by host, not by GID index: any process on the peer's host may send from
            // any of its GIDs, so the exact GID protects from no tenant, and Virtuoso connects
            // its paths to the peer's first address while the peer's path QPs send from theirs.
            if addr_node(pk.src ^ q.remote_host) != 0 && q.qp_type != QpType::Ud {
                self.stats.foreign_drops += 1;
                return;
            }
            if q.wire_psn && !super::feedback::unwire(q, &mut pk) {
                // Before the connection's first PSN: a duplicate of nothing.
                self.stats.ooo_drops += 1;
                return;
            }
        }
        if !self.expects_feedback(qpn, &pk) {
            self.stats.stale_feedback_drops += 1;
            return;
        }
        let fb = match pk.kind {
            PktKind::Data => return self.on_data(now, &pk, payload, p, pool, eff),
            PktKind::ReadReq => return self.on_read_req(now, &pk, p, pool, eff),
            PktKind::Ack => Feedback::Ack {
                cum: pk.psn,
                sack: (pk.sack != u32::MAX).then_some(pk.sack),
                echo_sport: pk.echo_sport,
                ece: pk.ece,
                retx: pk.retx,
                endpoint: pk.endpoint_ps,
            },
            PktKind::Nak if pk.aux == NAK_REMOTE_ACCESS => {
                let st = WcStatus::RemoteAccessError;
                return self.on_error_nak(now, qpn, pk.psn, pk.sport, st, eff);
            }
            PktKind::Nak if pk.aux == NAK_INVALID_REQUEST => {
                let st = WcStatus::RemoteInvalidRequest;
                return self.on_error_nak(now, qpn, pk.psn, pk.sport, st, eff);
            }
            PktKind::Nak if pk.aux == NAK_SACK && pk.sack != u32::MAX => Feedback::SackNak {
                expected: pk.psn,
                sack: pk.sack,
            },
            PktKind::Nak if pk.sack != u32::MAX => Feedback::SyncNak {
                expected: pk.psn,
                psn: pk.sack,
                echo_sport: pk.sport,
            },
            PktKind::Nak => Feedback::Nak {
                expected: pk.psn,
                echo_sport: pk.sport,
            },
            PktKind::RnrNak => Feedback::RnrNak { psn: pk.psn },
            PktKind::Cnp => {
                self.stats.cnps_recv += 1;
                Feedback::Cnp
            }
            PktKind::Pfc => unreachable!("PFC frames are handled by the port"),
        };
        if pool.int.on && pk.kind == PktKind::Ack && !pool.int.latched().is_empty() {
            // The echoed telemetry first, then the ACK it came with.
            if let Ok(q) = self.qp_mut(qpn) {
                q.t.on_int(now, pool.int.latched());
            }
        }
        self.feedback(now, qpn, fb, eff);
    }

    /// Hands feedback to a QP's transport, then completes what it acknowledged.
    fn feedback(&mut self, now: Time, qpn: QpNum, fb: Feedback, eff: &mut Effects) {
        let Ok(q) = self.qp_mut(qpn) else { return };
        let mut fx = TxFx::default();
        q.t.on_feedback(now, fb, &mut fx);
        let acked = q.t.acked();
        for w in q.sq.iter_mut() {
            match w.first_psn {
                Some(f) if w.wr.op != SendOp::Read && w.wr.op.carries_data() => {
                    if f + w.npkts > acked {
                        // PSNs are given out in queue order (every data WR has at least one),
                        // so no later WR ends at or below `acked` either.
                        break;
                    }
                    w.done = true
                }
                Some(_) => {}
                None if !w.wr.op.carries_data() => {}
                None => break,
            }
        }
        self.transport_fx(qpn, fx, eff);
        self.retire(qpn, now, eff);
    }

    /// A transport timer fired. `tagged` is the QP number with the epoch it was set in above
    /// bit 24: timers of an earlier incarnation (before Error or Reset) are ignored.
    pub fn on_timer(
        &mut self,
        now: Time,
        kind: TimerKind,
        tagged: u32,
        gen: u32,
        _p: &NicParams,
        eff: &mut Effects,
    ) {
        let qpn = tagged & QPN_MASK;
        let epoch = (tagged >> QPN_BITS) as u8;
        let Ok(q) = self.qp_mut(qpn) else { return };
        if q.epoch != epoch || matches!(q.state, QpState::Reset | QpState::Error) {
            return;
        }
        let from = first_missing(q);
        let before = q.t.timeouts();
        let mut fx = TxFx::default();
        q.t.on_timer(now, kind, gen, from, &mut fx);
        self.stats.timeouts += q.t.timeouts() - before;
        self.transport_fx(qpn, fx, eff);
    }

    /// Sends what a receiving transport replied (ACK, NAK, CNP) back to the sender of `pk`.
    pub(super) fn send_replies(
        &mut self,
        now: Time,
        pk: &Packet,
        replies: &mut Vec<Reply>,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        // Looked up once for all the replies (sending them changes no QP). A connected QP
        // answers its connected remote QP, as hardware does (from the QP context: the BTH
        // names no source QP), not the QP the simulator's packet says it came from: a packet
        // injected from the remote's address by another QP gets its ACK, NAK or CNP sent to
        // the victim's peer, never to the injector.
        // Multipath: a transport other than the built-in RC accepting out of order (the RC's
        // selective repeat is single-path and answers on its own port).
        let mp =
            |t: &super::QpTransport| !matches!(t, super::QpTransport::Rc(_)) && t.out_of_order();
        let (sport, mp, src, to_qp) = match self.qp(qpn) {
            Some(q) if q.qp_type != QpType::Ud => (q.sport, mp(&q.t), q.local_addr, q.remote_qpn),
            Some(q) => (q.sport, mp(&q.t), q.local_addr, pk.src_qp),
            None => (pk.sport, false, self.host, pk.src_qp),
        };
        // ACKs and NAKs carry PSNs in the requester's numbering (its initial PSN is this QP's
        // rq_psn).
        let base = self.qp(qpn).filter(|q| q.wire_psn).map(|q| q.rq_psn);
        let wire = |psn: u32| base.map_or(psn, |b| to_wire(psn, b));
        // Read in place, then cleared: cheaper than `drain` for the usual single ACK.
        for &r in replies.iter() {
            let (kind, psn) = match r {
                Reply::Ack { cum, .. } => (PktKind::Ack, cum),
                Reply::Nak { expected }
                | Reply::SyncNak { expected, .. }
                | Reply::SackNak { expected, .. } => (PktKind::Nak, expected),
                Reply::RnrNak { psn } => (PktKind::RnrNak, psn),
                Reply::AccessNak { psn } | Reply::InvalidNak { psn } => (PktKind::Nak, psn),
                Reply::Cnp => (PktKind::Cnp, 0),
            };
            let psn = if kind == PktKind::Cnp { psn } else { wire(psn) };
            // MP-RDMA replies travel on the VP of the data packet they answer (the ACK echoes
            // it), so ACKs and NACKs are spread over the paths like the data: on the QP's own
            // port, the failure of that one path would cut every ACK of the connection.
            // RoCEv2 RC replies keep the responder QP's own source port, as real NICs do.
            // Per QP, not per scenario: tenants may run different transports.
            let sport = match r {
                Reply::Ack {
                    sack: Some(_),
                    echo_sport,
                    ..
                } if mp => echo_sport,
                Reply::Nak { .. } | Reply::SyncNak { .. } if mp => pk.sport,
                _ => sport,
            };
            let mut a = self.ctrl_packet(kind, src, pk.src, to_qp, qpn, psn, sport, now, p);
            // Filled before it enters the pool: one copy into its slot, no second lookup.
            match r {
                Reply::Ack {
                    sack,
                    echo_sport,
                    ece,
                    retx,
                    ..
                } => {
                    a.sack = sack.map_or(u32::MAX, wire);
                    a.echo_sport = echo_sport;
                    a.ece = ece;
                    a.retx = retx;
                    // The responder's share of the endpoint delay (Swift).
                    a.endpoint_ps = pk.endpoint_ps;
                }
                Reply::SyncNak { psn, .. } => a.sack = wire(psn),
                Reply::SackNak { sack, .. } => {
                    a.sack = wire(sack);
                    a.aux = NAK_SACK;
                }
                Reply::AccessNak { .. } => a.aux = NAK_REMOTE_ACCESS,
                Reply::InvalidNak { .. } => a.aux = NAK_INVALID_REQUEST,
                _ => {}
            }
            let id = pool.alloc(a);
            if pool.int.on && kind == PktKind::Ack {
                // The receiver's echo of the data packet's telemetry (HPCC, §3.2).
                pool.int.echo_into(id);
            }
            self.push_ctrl(id, eff);
        }
        replies.clear();
    }

    fn on_read_req(
        &mut self,
        now: Time,
        pk: &Packet,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let Ok(q) = self.qp_mut(pk.dst_qp) else {
            return;
        };
        // rkey in the protection domain of the QP the request arrived on, bounds and
        // remote-read permission (a zero-length READ checks nothing, IBA C9-88).
        let pd = q.pd;
        let ok_access = pk.msg_len == 0
            || self
                .mem
                .check_remote(pd, pk.imm, pk.addr, pk.msg_len, false);
        let q = self.qps[pk.dst_qp as usize].as_mut().unwrap();
        // Selective repeat (IRN) asks again only for the responses it lacks (`build.rs`); an
        // in-order requester asks for everything from the missing one on.
        let selective = reads_out_of_order(&q.t) && pk.psn < q.t.expected();
        let mut replies = Vec::new();
        let class = q.t.on_read_request(now, pk.psn, pk.aux, &mut replies);
        if class == RxClass::Accept && !ok_access {
            // Class C error: NAK the request, answer nothing, and the responder goes to Error.
            self.stats.access_errors += 1;
            replies.push(Reply::AccessNak { psn: pk.psn });
            self.send_replies(now, pk, &mut replies, p, pool, eff);
            self.enter_error(pk.dst_qp, None, eff);
            return;
        }
        if class == RxClass::Accept {
            let (lo, hi) = (pk.psn, pk.psn + pk.aux);
            if selective {
                // It replaces only an answer it covers entirely; the others go on (re-requests
                // of overlapping runs, after a timeout, must not wipe each other's answers).
                q.reads
                    .retain(|j| j.first_psn + j.next < lo || j.first_psn + j.npkts > hi);
            } else {
                // A re-request replaces whatever answer was in progress from that PSN on.
                q.reads.retain(|j| j.first_psn + j.npkts <= lo);
            }
            // A repeated READ is answered with the resource its first execution held.
            if !selective && q.reads.len() >= q.max_dest_rd_atomic as usize {
                // Every READ resource (`max_dest_rd_atomic`) is answering a READ: the requester
                // ignored its `max_rd_atomic`. NAK Invalid Request (the requester's
                // REM_INV_REQ_ERR) and the responder goes to Error, as the fake NIC does.
                self.stats.access_errors += 1;
                replies.push(Reply::InvalidNak { psn: pk.psn });
                self.send_replies(now, pk, &mut replies, p, pool, eff);
                self.enter_error(pk.dst_qp, None, eff);
                return;
            }
            let job = ReadJob {
                first_psn: pk.psn,
                npkts: pk.aux,
                next: 0,
                remote_addr: pk.addr,
                len: pk.msg_len,
            };
            if selective {
                // Repairs go first, as the selective-repeat sender resends lost PSNs before
                // new ones (its requester places responses in any order).
                q.reads.push_front(job);
            } else {
                q.reads.push_back(job);
            }
            if let Some(a) = q.rx_audit.as_mut() {
                for k in 0..pk.aux {
                    a.insert(pk.psn + k);
                }
            }
            self.activate(pk.dst_qp, eff);
        } else {
            self.stats.ooo_drops += 1;
        }
        self.send_replies(now, pk, &mut replies, p, pool, eff);
    }

    /// A remote access error or invalid request NAK at the requester: what lies below its PSN
    /// is acknowledged (an in-order transport's NAK implies it), the WR holding the PSN
    /// completes with `status` (`RemoteAccessError`, `RemoteInvalidRequest`), and the QP goes
    /// to Error (the rest flushed).
    fn on_error_nak(
        &mut self,
        now: Time,
        qpn: QpNum,
        psn: u32,
        sport: u16,
        status: WcStatus,
        eff: &mut Effects,
    ) {
        let Some(q) = self.qp(qpn) else { return };
        if q.state != QpState::Rts {
            return;
        }
        if !q.t.out_of_order() {
            let fb = Feedback::Ack {
                cum: psn,
                sack: None,
                echo_sport: sport,
                ece: false,
                retx: false,
                endpoint: 0,
            };
            self.feedback(now, qpn, fb, eff);
        }
        let Some(q) = self.qp(qpn) else { return };
        // `expects_feedback` let it through only for a PSN of a WR sent and not acknowledged
        // (the ACK above completed none of it: it acknowledges only below `psn`).
        let Some(at) = q.sq.iter().position(|w| {
            w.first_psn
                .is_some_and(|f| psn >= f && psn < f + w.npkts.max(1))
        }) else {
            self.stats.stale_feedback_drops += 1;
            return;
        };
        self.enter_error(qpn, Some((at, status)), eff);
    }

    /// A READ response at the requester. In order, it is placed and acknowledges its PSN. Out
    /// of order, an in-order requester (go-back-N, MP-RDMA) drops it and asks again from the
    /// missing PSN, which the responder answers with everything after it; selective repeat
    /// (IRN, SIGCOMM '18) places it as it places WRITE data out of order and asks again only
    /// for the missing run before it. Either asks once per gap; selective repeat also asks for
    /// the next hole as soon as one is filled if responses beyond it are placed already.
    pub(super) fn on_read_resp(
        &mut self,
        now: Time,
        pk: &Packet,
        payload: Option<Vec<u8>>,
        p: &NicParams,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let mtu = p.nic.mtu as u64;
        let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
            return;
        };
        let space = q.space;
        let any_order = reads_out_of_order(&q.t);
        // The response wanted next in order (the first READ still missing one), and the READ
        // holding this PSN with the response's index in it.
        let mut want = None;
        let mut owner = None;
        for (i, w) in q.sq.iter().enumerate() {
            if w.wr.op != SendOp::Read || w.done {
                continue;
            }
            let Some(f) = w.first_psn else { break };
            want.get_or_insert(f + w.read_got);
            if pk.psn >= f && pk.psn < f + w.npkts {
                owner = Some((i, pk.psn - f));
                break;
            }
            if !any_order {
                break;
            }
        }
        let Some(want) = want else { return };
        let mut fx = TxFx::default();
        if pk.psn != want {
            if pk.psn > want && !q.read_rewound {
                q.read_rewound = true;
                self.stats.ooo_drops += !any_order as u64;
                q.t.resend_from(now, want, &mut fx);
                self.transport_fx(qpn, fx, eff);
            }
            if !any_order {
                return;
            }
        }
        let Some(q) = self.qps[qpn as usize].as_mut() else {
            return;
        };
        let Some((i, k)) = owner else { return };
        let w = &mut q.sq[i];
        if k < w.read_got || w.read_ahead.contains(&k) {
            // Already placed (an answer to a re-request that crossed the original).
            return;
        }
        if pk.psn == want {
            q.read_rewound = false;
        }
        q.rx_bytes += pk.payload as u64;
        let w = &mut q.sq[i];
        if k == w.read_got {
            w.read_got += 1;
            while w.read_ahead.remove(&w.read_got) {
                w.read_got += 1;
            }
        } else {
            w.read_ahead.insert(k);
        }
        let sg = w.wr.sg_list.clone();
        let read_done = w.read_got == w.npkts;
        if read_done {
            w.done = true;
        }
        // The response acknowledges its own PSN and everything before it (the responder
        // executed the READ only after every earlier PSN had arrived), except a READ response
        // still missing (selective repeat placed this one out of order).
        let missing = q.sq.iter().find_map(|w| {
            (w.wr.op == SendOp::Read && !w.done)
                .then(|| w.first_psn.map(|f| f + w.read_got))
                .flatten()
        });
        let cum = missing.map_or(pk.psn + 1, |m| m.min(pk.psn + 1));
        // A hole filled, and responses after the next one missing are placed already: no later
        // arrival will reveal it, so it is lost by IRN's rule; ask for it now.
        let next_hole = (any_order && pk.psn == want)
            .then(|| missing.filter(|_| placed_beyond(&q.sq)))
            .flatten();
        if let Some(b) = payload {
            self.mem.scatter(space, &sg, k as u64 * mtu, &b);
        }
        self.feedback(
            now,
            qpn,
            Feedback::Ack {
                cum,
                sack: Some(pk.psn),
                echo_sport: pk.sport,
                ece: pk.ce,
                retx: pk.retx,
                endpoint: pk.endpoint_ps,
            },
            eff,
        );
        if let Some(hole) = next_hole {
            if let Some(q) = self.qps[qpn as usize].as_mut() {
                q.read_rewound = true;
                let mut fx = TxFx::default();
                q.t.resend_from(now, hole, &mut fx);
                self.transport_fx(qpn, fx, eff);
            }
        }
        if read_done {
            // A READ waiting for one of `max_rd_atomic` may start now.
            self.activate(qpn, eff);
        }
    }
}

/// Whether a requester on this transport takes READ responses out of order: RC's selective
/// repeat does (IRN); go-back-N and MP-RDMA (single-path READ responses) do not.
fn reads_out_of_order(t: &super::QpTransport) -> bool {
    matches!(t, super::QpTransport::Rc(_)) && t.out_of_order()
}

/// Whether a READ response beyond the first missing one has been placed (selective repeat).
fn placed_beyond(sq: &std::collections::VecDeque<super::SendWqe>) -> bool {
    let mut reads = sq
        .iter()
        .filter(|w| w.wr.op == SendOp::Read && !w.done && w.first_psn.is_some());
    let Some(first) = reads.next() else {
        return false;
    };
    !first.read_ahead.is_empty() || reads.any(|w| w.read_got > 0 || !w.read_ahead.is_empty())
}
