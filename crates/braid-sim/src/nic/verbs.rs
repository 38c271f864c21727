//! Verbs resources of the NIC: creating, modifying, querying and destroying QPs and CQs,
//! posting send and receive work requests, polling and notifying CQs.

use super::{
    addr_node, host_alias, op_of, wc, Cq, Effect, Effects, Nic, NicParams, PsnSet, Qp, QpState,
    RecvWqe, SendWqe, QPN_BITS, QPN_MASK,
};
use crate::memory::SgeFault;
use crate::transport::config::TransportKind;
use crate::transport::irn::Recovery;
use crate::transport::mp_rdma::{MpRdmaParams, MpRdmaTransport};
use crate::transport::rc::{RcConfig, RcTransport};
use crate::transport::{Fatal, RetryLimits, TxFx};
use braid_engine::time::Time;
use braid_verbs::*;
use std::collections::VecDeque;

impl Nic {
    /// Puts QP `qpn` in protection domain `pd` and tenant `space`'s address space (done once,
    /// right after [`Nic::create_qp`], by the verbs of the tenant that created it).
    pub fn set_qp_domain(&mut self, qpn: QpNum, space: TenantId, pd: u32) {
        if let Ok(q) = self.qp_mut(qpn) {
            q.space = space;
            q.pd = pd;
        }
    }

    /// Whether a QP or a memory region is in protection domain `pd` (ibv_dealloc_pd's EBUSY).
    pub fn pd_in_use(&self, pd: u32) -> bool {
        self.qps.iter().flatten().any(|q| q.pd == pd) || self.mem.pd_in_use(pd)
    }

    pub fn create_cq(&mut self, depth: u32) -> CqId {
        self.cqs.push(Some(Cq {
            depth,
            ..Default::default()
        }));
        (self.cqs.len() - 1) as CqId
    }

    pub fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        if self
            .qps
            .iter()
            .flatten()
            .any(|q| q.send_cq == cq || q.recv_cq == cq)
        {
            return Err(VerbsError::InvalidState("CQ still attached to a QP"));
        }
        let slot = self
            .cqs
            .get_mut(cq as usize)
            .ok_or(VerbsError::NoSuchCq(cq))?;
        slot.take().ok_or(VerbsError::NoSuchCq(cq))?;
        Ok(())
    }

    /// ibv_req_notify_cq: the next completion added to `cq` notifies.
    pub fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        match self.cqs.get_mut(cq as usize) {
            Some(Some(c)) => {
                c.armed = true;
                Ok(())
            }
            _ => Err(VerbsError::NoSuchCq(cq)),
        }
    }

    /// ibv_modify_qp to Error, Reset, or a new UDP source port.
    ///
    /// - Error: every outstanding send WR, then every RECV, completes `Flushed` on its CQ (in
    ///   order, signaled or not); nothing more is sent or received; later posts complete
    ///   `Flushed` at once.
    /// - Reset: the queues are emptied without completions, the QP's completions still in its
    ///   CQs are removed (libmlx5's `cq_clean`), the connection and its transport state are
    ///   forgotten; `connect_qp` may follow.
    /// - UdpSport: the source port of the packets sent from now on.
    pub fn modify_qp(
        &mut self,
        qpn: QpNum,
        m: QpModify,
        p: &NicParams,
        eff: &mut Effects,
    ) -> Result<(), VerbsError> {
        let q = self.qp_mut(qpn)?;
        match m {
            QpModify::UdpSport(s) => {
                q.sport = s;
                q.t.set_sport(s);
            }
            QpModify::Error => self.enter_error(qpn, None, eff),
            QpModify::Reset => self.reset_qp(qpn, p),
        }
        Ok(())
    }

    /// Moves a QP to Error: the send queue completes in order (WR `fail.0`, if given, with status
    /// `fail.1`, every other one `Flushed`), then the receive queue `Flushed`. Stale transport
    /// timers are ignored from now on; READ responses being sent are dropped.
    pub(super) fn enter_error(
        &mut self,
        qpn: QpNum,
        fail: Option<(usize, WcStatus)>,
        eff: &mut Effects,
    ) {
        let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
            return;
        };
        if q.state == QpState::Error {
            return;
        }
        q.state = QpState::Error;
        q.epoch = q.epoch.wrapping_add(1);
        let sq = std::mem::take(&mut q.sq);
        let rq = std::mem::take(&mut q.rq);
        q.sq_base += sq.len() as u64;
        q.recv_base += rq.len() as u64;
        q.cur = 0;
        q.cur_pkt = 0;
        q.reads.clear();
        q.rx_pending.clear();
        let (scq, rcq) = (q.send_cq, q.recv_cq);
        for (i, w) in sq.iter().enumerate() {
            let status = match fail {
                Some((j, st)) if j == i => st,
                _ => WcStatus::Flushed,
            };
            self.push_cqe(scq, wc(w.wr.wr_id, status, op_of(&w.wr.op), 0, qpn), eff);
        }
        for r in &rq {
            self.push_cqe(
                rcq,
                wc(r.wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn),
                eff,
            );
        }
    }

    /// Moves a QP to Reset (see [`Nic::modify_qp`]).
    fn reset_qp(&mut self, qpn: QpNum, p: &NicParams) {
        let (qp_type, sport, retry, dest_rd) = match self.qp(qpn) {
            Some(q) => (q.qp_type, q.default_sport, q.retry, q.max_dest_rd_atomic),
            None => return,
        };
        let t = self.make_transport(qp_type, qpn, sport, retry, dest_rd, p);
        let q = self.qps[qpn as usize].as_mut().expect("checked");
        q.state = QpState::Reset;
        q.epoch = q.epoch.wrapping_add(1);
        q.t = t;
        q.remote_host = u32::MAX;
        q.remote_qpn = 0;
        q.sport = sport;
        q.sq.clear();
        q.sq_base = 0;
        q.send_enabled = 0;
        q.cur = 0;
        q.cur_pkt = 0;
        q.next_psn = 0;
        q.wqe_q = Default::default();
        q.read_rewound = false;
        q.rq.clear();
        q.recv_enabled = 0;
        q.recv_base = 0;
        q.uc_epsn = 0;
        q.uc_discard = false;
        q.recv_off = 0;
        q.reads.clear();
        q.send_msn = 0;
        q.rx_pending.clear();
        if let Some(a) = q.rx_audit.as_mut() {
            *a = PsnSet::default();
        }
        let (scq, rcq) = (q.send_cq, q.recv_cq);
        for cq in [scq, rcq] {
            if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
                c.entries.retain(|e| e.qp_num != qpn);
                c.waiters.retain(|&w| w != qpn);
            }
        }
        self.cache.forget(qpn);
    }

    /// ibv_query_qp.
    pub fn query_qp(&self, qpn: QpNum) -> Result<QpAttr, VerbsError> {
        let q = self.qp(qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let connected = q.state == QpState::Rts && q.qp_type != QpType::Ud;
        Ok(QpAttr {
            qpn,
            qp_type: q.qp_type,
            state: q.state.verbs(),
            local_addr: q.local_addr,
            udp_sport: q.sport,
            remote: connected.then_some(RemoteQp {
                host: q.remote_host,
                qpn: q.remote_qpn,
                udp_sport: Some(q.sport),
            }),
            retry_cnt: q.retry.retry_cnt,
            rnr_retry: q.retry.rnr_retry,
            cross_channel: q.cross_channel,
            send_cq: q.send_cq,
            recv_cq: q.recv_cq,
            send_outstanding: q.sq.len() as u32,
        })
    }

    pub fn create_qp(&mut self, init: &QpInit, p: &NicParams) -> Result<QpNum, VerbsError> {
        let qpn = self.qp_next;
        self.create_qp_numbered(init, p, qpn)
    }

    /// Creates QP `qpn` (the next number, or a reserved one: `nic/reserve.rs`).
    pub(super) fn create_qp_numbered(
        &mut self,
        init: &QpInit,
        p: &NicParams,
        qpn: QpNum,
    ) -> Result<QpNum, VerbsError> {
        for cq in [init.send_cq, init.recv_cq] {
            if !matches!(self.cqs.get(cq as usize), Some(Some(_))) {
                return Err(VerbsError::NoSuchCq(cq));
            }
        }
        if qpn > QPN_MASK {
            return Err(VerbsError::Unsupported("QP numbers are 24 bits"));
        }
        if init.local_addr >= self.addresses {
            return Err(VerbsError::InvalidArgument(
                "local_addr: no such address (caps.local_addrs; nic.addresses)",
            ));
        }
        init.check_rd_atomic()?;
        if init.retry_cnt > 7 || init.rnr_retry > 7 {
            return Err(VerbsError::InvalidArgument(
                "retry_cnt and rnr_retry are 0..=7",
            ));
        }
        let retry = RetryLimits {
            retry_cnt: init.retry_cnt,
            rnr_retry: init.rnr_retry,
        };
        let sport = self.default_sport(qpn);
        let t = self.make_transport(init.qp_type, qpn, sport, retry, init.max_dest_rd_atomic, p);
        // Every connected QP, MP-RDMA's too: a multipath receiver maps a wire PSN back near its
        // expected PSN (an ACK near what is acknowledged), and its out-of-order window is far
        // below the 2^23 the modulo rule leaves either side.
        let wire_psn = init.qp_type != QpType::Ud;
        let sq_psn = self.initial_psn(self.host, qpn);
        if self.qps.len() <= qpn as usize {
            self.qps.resize_with(qpn as usize + 1, || None);
        }
        self.qp_next = self.qp_next.max(qpn + 1);
        self.qps[qpn as usize] = Some(Qp {
            qpn,
            qp_type: init.qp_type,
            pd: 0,
            space: 0,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            sq_sig_all: init.sq_sig_all,
            managed_send: init.managed_send,
            managed_recv: init.managed_recv,
            cross_channel: init.is_cross_channel(),
            retry,
            local_addr: host_alias(self.host, init.local_addr),
            default_sport: sport,
            epoch: 0,
            max_send_wr: init.max_send_wr,
            max_recv_wr: init.max_recv_wr,
            max_rd_atomic: init.max_rd_atomic,
            max_dest_rd_atomic: init.max_dest_rd_atomic,
            wire_psn,
            sq_psn,
            rq_psn: 0,
            prio: init.priority.unwrap_or(p.nic.priority),
            state: QpState::Init,
            remote_host: u32::MAX,
            remote_qpn: 0,
            sport,
            sq: VecDeque::new(),
            sq_base: 0,
            send_enabled: 0,
            cur: 0,
            cur_pkt: 0,
            next_psn: 0,
            wqe_q: Default::default(),
            read_rewound: false,
            t,
            rq: VecDeque::new(),
            recv_enabled: 0,
            recv_base: 0,
            uc_epsn: 0,
            uc_discard: false,
            recv_off: 0,
            reads: VecDeque::new(),
            in_active: false,
            send_msn: 0,
            rx_pending: Default::default(),
            rx_audit: p.nic.data_check.then(PsnSet::default),
            rx_bytes: 0,
            tx_bytes: 0,
            retx_pkts: 0,
        });
        Ok(qpn)
    }

    /// The UDP source port QP `qpn` is created with: RoCEv2 NICs derive it from the QP; here a
    /// seeded hash, in 49152..65535.
    pub(super) fn default_sport(&self, qpn: QpNum) -> u16 {
        0xC000
            | (braid_engine::derive_seed(self.sport_seed, "sport", &[self.host as u64, qpn as u64])
                & 0x3FFF) as u16
    }

    /// The transport a new QP runs (per the scenario's `transport.kind`).
    fn make_transport(
        &self,
        qp_type: QpType,
        qpn: QpNum,
        sport: u16,
        retry: RetryLimits,
        max_dest_rd_atomic: u8,
        p: &NicParams,
    ) -> super::QpTransport {
        let cc = match p.transport.kind {
            // The keys the scenario left out follow this port's link rate.
            TransportKind::Dcqcn if qp_type != QpType::Ud => {
                Some(p.transport.controller(self.line_rate))
            }
            _ => None,
        };
        let rc = RcConfig {
            reliable: qp_type == QpType::Rc,
            sport,
            line_rate: self.line_rate,
            mtu: p.nic.mtu,
            rto: p.nic.rto.0,
            rnr_delay: p.nic.rnr_delay.0,
            ack_every: p.nic.ack_every,
            cc,
            retry,
            read_resources: max_dest_rd_atomic as usize,
            // Selective repeat is the reliable connection's; UC keeps its own sequencing.
            irn: (p.transport.recovery == Recovery::Irn && qp_type == QpType::Rc)
                .then(|| p.transport.irn.params(self.line_rate, p.nic.mtu)),
        };
        match &self.transport_factory {
            Some(f) => f(&crate::transport::TransportCtx {
                rc,
                host: self.host,
                qpn,
            })
            .into(),
            None if p.transport.kind == TransportKind::MpRdma && qp_type == QpType::Rc => {
                super::QpTransport::Other(Box::new(MpRdmaTransport::new(MpRdmaParams {
                    cfg: p.transport.mp_rdma.clone(),
                    mtu: p.nic.mtu,
                    rto: p.nic.rto.0,
                    rnr_delay: p.nic.rnr_delay.0,
                    sport,
                    seed: self.sport_seed,
                    host: self.host,
                    qpn,
                    retry,
                })))
            }
            None => super::QpTransport::Rc(Box::new(RcTransport::new(rc))),
        }
    }

    /// Carries out what a transport asked for. Timers carry the QP's epoch above its 24-bit
    /// number; a transport that gives up fails the head WR and moves its QP to Error.
    #[inline(always)]
    pub(super) fn transport_fx(&mut self, qpn: QpNum, fx: TxFx, eff: &mut Effects) {
        // Most calls (a packet sent, an ACK taken) want nothing.
        if fx.timers.is_empty() && fx.fatal.is_none() && !fx.kick {
            return;
        }
        self.transport_fx_some(qpn, fx, eff);
    }

    fn transport_fx_some(&mut self, qpn: QpNum, fx: TxFx, eff: &mut Effects) {
        let epoch = self.qp(qpn).map_or(0, |q| q.epoch);
        for (t, kind, gen) in fx.timers {
            eff.list.push(Effect::Timer(
                t,
                kind,
                qpn | (epoch as u32) << QPN_BITS,
                gen,
            ));
        }
        if let Some(f) = fx.fatal {
            let status = match f {
                Fatal::RetryExceeded => WcStatus::RetryExceeded,
                Fatal::RnrRetryExceeded => WcStatus::RnrRetryExceeded,
            };
            self.enter_error(qpn, Some((0, status)), eff);
            return;
        }
        if fx.kick {
            self.activate(qpn, eff);
        }
    }

    /// ibv_modify_qp INIT (or RESET) -> RTR -> RTS.
    pub fn connect_qp(&mut self, qpn: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        let q = self.qp_mut(qpn)?;
        if !matches!(q.state, QpState::Init | QpState::Reset) {
            return Err(VerbsError::InvalidState(
                "connect_qp needs a QP in Init or Reset (modify it to Reset first)",
            ));
        }
        if q.qp_type != QpType::Ud {
            q.remote_host = remote.host;
            q.remote_qpn = remote.qpn;
        }
        // RTR's rq_psn: the remote QP's initial PSN.
        let rq_psn = self.initial_psn(addr_node(remote.host), remote.qpn);
        let q = self.qp_mut(qpn)?;
        q.rq_psn = rq_psn;
        if let Some(s) = remote.udp_sport {
            q.sport = s;
            q.t.set_sport(s);
        }
        q.state = QpState::Rts;
        Ok(())
    }

    pub fn destroy_qp(&mut self, qpn: QpNum, eff: &mut Effects) -> Result<(), VerbsError> {
        let q = self
            .qps
            .get_mut(qpn as usize)
            .and_then(|q| q.take())
            .ok_or(VerbsError::NoSuchQp(qpn))?;
        // ibv_destroy_qp discards the outstanding WRs without completions (only a move to
        // Error flushes), and removes the QP's completions still in its CQs (libmlx5's
        // `cq_clean`): nothing of a destroyed QP is ever polled.
        let _ = eff;
        for cq in [q.send_cq, q.recv_cq] {
            if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
                c.entries.retain(|e| e.qp_num != qpn);
                c.waiters.retain(|&w| w != qpn);
            }
        }
        self.arb.remove(qpn);
        self.cache.forget(qpn);
        Ok(())
    }

    pub fn post_send(
        &mut self,
        qpn: QpNum,
        wr: SendWr,
        now: Time,
        p: &NicParams,
        eff: &mut Effects,
    ) -> Result<(), VerbsError> {
        let data_check = p.nic.data_check;
        let mtu = p.nic.mtu as u64;
        // Validate before touching the queue, as the driver would.
        let bytes = wr.len();
        let pd = self.qp_mut(qpn)?.pd;
        let mut loc_prot = false;
        if !wr.inline {
            for s in &wr.sg_list {
                match self.mem.check_sge_in(s, pd) {
                    Ok(()) => {}
                    Err(SgeFault::OtherPd) => loc_prot = true,
                    Err(SgeFault::Invalid(e)) => return Err(e),
                }
            }
        }
        let q = self.qp_mut(qpn)?;
        if !matches!(q.state, QpState::Rts | QpState::Error) {
            return Err(VerbsError::InvalidState("QP is not connected"));
        }
        let cross = matches!(
            wr.op,
            SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. }
        );
        if cross && !q.cross_channel {
            return Err(VerbsError::InvalidWr(
                "WAIT/SEND_ENABLE/RECV_ENABLE need a QP created with cross_channel",
            ));
        }
        let in_error = q.state == QpState::Error;
        if !in_error && q.sq.len() as u32 >= q.max_send_wr {
            return Err(VerbsError::QueueFull);
        }
        match (q.qp_type, &wr.op) {
            (QpType::Ud, SendOp::Send | SendOp::SendWithImm(_)) => {
                if wr.ud_dest.is_none() {
                    return Err(VerbsError::InvalidWr("UD send needs ud_dest"));
                }
                if bytes > mtu {
                    return Err(VerbsError::InvalidWr("UD message larger than the MTU"));
                }
            }
            (QpType::Ud, op) if op.carries_data() => {
                return Err(VerbsError::InvalidWr("UD QPs only SEND"))
            }
            (QpType::Uc, SendOp::Read) => return Err(VerbsError::InvalidWr("UC QPs cannot READ")),
            _ => {}
        }
        let npkts = if wr.op.carries_data() {
            bytes.div_ceil(mtu).max(1) as u32
        } else {
            0
        };
        let signaled = wr.signaled || q.sq_sig_all;
        let _ = data_check;
        let send_cq = q.send_cq;
        // A WAIT's target is fixed at post time, as libmlx5 computes it: the CQ's cumulative
        // wait index plus the count, which becomes the new index. A zero-count WAIT (PeRF's
        // 0_WAIT) therefore waits only for what earlier WAITs on that CQ wait for: on a CQ no
        // counted WAIT uses, it completes as soon as it executes.
        let wait_target = match wr.op {
            SendOp::Wait { cq, count } => match self.cqs.get_mut(cq as usize) {
                Some(Some(c)) => {
                    c.wait_index += count as u64;
                    Some(c.wait_index)
                }
                _ => return Err(VerbsError::NoSuchCq(cq)),
            },
            _ => None,
        };
        if in_error {
            // ibverbs on mlx5: a WR posted to a QP in Error completes at once, flushed.
            let c = wc(wr.wr_id, WcStatus::Flushed, op_of(&wr.op), 0, qpn);
            self.push_cqe(send_cq, c, eff);
            return Ok(());
        }
        let space = self.qps[qpn as usize].as_ref().expect("checked").space;
        let inline_data = (wr.inline && self.mem.sges_tracked(space, &wr.sg_list))
            .then(|| self.mem.gather(space, &wr.sg_list, 0, bytes));
        let q = self.qps[qpn as usize].as_mut().expect("checked");
        q.sq.push_back(SendWqe {
            wr,
            bytes,
            inline_data,
            first_psn: None,
            npkts,
            post_ps: now,
            ready_ps: None,
            done: false,
            wait_target,
            read_got: 0,
            read_ahead: Default::default(),
            signaled,
            msn: 0,
            loc_prot,
        });
        self.activate(qpn, eff);
        Ok(())
    }

    pub fn post_recv(
        &mut self,
        qpn: QpNum,
        wr: RecvWr,
        eff: &mut Effects,
    ) -> Result<(), VerbsError> {
        let pd = self.qp_mut(qpn)?.pd;
        for s in &wr.sg_list {
            // A RECV buffer of another PD: refused at post (simpler than ibverbs, where the
            // responder finds it when a SEND arrives; docs/middleware.md, Protection).
            match self.mem.check_sge_in(s, pd) {
                Ok(()) => {}
                Err(SgeFault::OtherPd) => return Err(VerbsError::BadKey(s.lkey)),
                Err(SgeFault::Invalid(e)) => return Err(e),
            }
        }
        let q = self.qp_mut(qpn)?;
        match q.state {
            QpState::Reset => return Err(VerbsError::InvalidState("post_recv on a QP in Reset")),
            QpState::Error => {
                // As a send: flushed at once.
                let (cq, c) = (
                    q.recv_cq,
                    wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn),
                );
                self.push_cqe(cq, c, eff);
                return Ok(());
            }
            QpState::Init | QpState::Rts => {}
        }
        if q.rq.len() as u32 >= q.max_recv_wr {
            return Err(VerbsError::QueueFull);
        }
        q.rq.push_back(RecvWqe { wr });
        // A sender held back by receiver-not-ready retries on its own timer; nothing to kick here.
        Ok(())
    }

    pub fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        let Some(Some(c)) = self.cqs.get_mut(cq as usize) else {
            return 0;
        };
        let n = max.min(c.entries.len());
        out.extend(c.entries.drain(..n));
        n
    }

    pub(super) fn push_cqe(&mut self, cq: CqId, w: WorkCompletion, eff: &mut Effects) {
        let Some(Some(c)) = self.cqs.get_mut(cq as usize) else {
            return;
        };
        if c.entries.len() as u32 >= c.depth && c.depth > 0 {
            c.overruns += 1;
            self.stats.cq_overruns += 1;
        }
        c.entries.push_back(w);
        c.total += 1;
        // ibverbs: only an armed CQ notifies, once, and is disarmed by it.
        if c.armed {
            c.armed = false;
            eff.list.push(Effect::Notify(cq));
        }
        // QPs whose WAIT watches this CQ may proceed.
        if !c.waiters.is_empty() {
            let waiters = std::mem::take(&mut c.waiters);
            for q in waiters {
                self.activate(q, eff);
            }
        }
    }
}
