//! The fake NIC's verbs: what a consumer's calls do to its queues, memory and CQs (the
//! requester's wire work is in `wire.rs`).

use super::*;

impl FakeNic {
    // ------------------------------------------------------------------ verbs

    pub(in crate::testing::fake_nic) fn create_cq(
        &mut self,
        tenant: TenantId,
        depth: u32,
    ) -> Result<CqId, VerbsError> {
        if depth == 0 {
            return Err(VerbsError::InvalidArgument("a CQ needs at least one entry"));
        }
        let id = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(
            id,
            Cq {
                owner: tenant,
                depth,
                entries: VecDeque::new(),
                armed: false,
                total: 0,
                overruns: 0,
                wait_index: 0,
                waiters: BTreeSet::new(),
            },
        );
        Ok(id)
    }

    pub(in crate::testing::fake_nic) fn destroy_cq(
        &mut self,
        tenant: TenantId,
        cq: CqId,
    ) -> Result<(), VerbsError> {
        self.own_cq(tenant, cq)?;
        if self
            .qps
            .values()
            .any(|q| q.init.send_cq == cq || q.init.recv_cq == cq)
        {
            // ibv_destroy_cq fails with EBUSY while a QP uses the CQ.
            return Err(VerbsError::InvalidState("the CQ is still used by a QP"));
        }
        self.cqs.remove(&cq);
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn req_notify_cq(
        &mut self,
        tenant: TenantId,
        cq: CqId,
    ) -> Result<(), VerbsError> {
        self.own_cq(tenant, cq)?;
        self.cqs.get_mut(&cq).expect("owned").armed = true;
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn poll_cq(
        &mut self,
        tenant: TenantId,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        if self.own_cq(tenant, cq).is_err() {
            return 0;
        }
        let c = self.cqs.get_mut(&cq).expect("owned");
        let n = max.min(c.entries.len());
        let polled: Vec<Cqe> = c.entries.drain(..n).collect();
        for e in polled {
            match e.slot {
                Slot::Send { qp, epoch, seq } => {
                    if let Some(q) = self.qps.get_mut(&qp).filter(|q| q.epoch == epoch) {
                        q.sq_freed = q.sq_freed.max(seq + 1);
                    }
                }
                Slot::Recv { qp, epoch } => {
                    if let Some(q) = self.qps.get_mut(&qp).filter(|q| q.epoch == epoch) {
                        q.rq_freed += 1;
                    }
                }
            }
            out.push(e.wc);
        }
        n
    }

    pub(in crate::testing::fake_nic) fn create_qp(
        &mut self,
        tenant: TenantId,
        init: &QpInit,
    ) -> Result<QpNum, VerbsError> {
        self.own_cq(tenant, init.send_cq)?;
        self.own_cq(tenant, init.recv_cq)?;
        self.own_pd(tenant, init.pd)?;
        if init.is_cross_channel() && !self.caps.cross_channel {
            return Err(VerbsError::Unsupported(
                "cross-channel QPs (this NIC has caps.cross_channel = false)",
            ));
        }
        let src_addr = *self.caps.local_addrs.get(init.local_addr as usize).ok_or(
            VerbsError::InvalidArgument("local_addr is not an index into caps.local_addrs"),
        )?;
        if init.max_send_wr > self.caps.max_qp_wr || init.max_recv_wr > self.caps.max_qp_wr {
            return Err(VerbsError::InvalidArgument(
                "max_send_wr/max_recv_wr above caps.max_qp_wr",
            ));
        }
        init.check_rd_atomic()?;
        if init.retry_cnt > 7 || init.rnr_retry > 7 {
            return Err(VerbsError::InvalidArgument(
                "retry_cnt and rnr_retry are 3-bit (0-7)",
            ));
        }
        // QP numbers: 24 bits, the host's index + 1 above the low 16, so that a local QPN used
        // as a remote one is caught.
        let qpn = ((self.index as u32 + 1) << 16) | (self.next_qp & 0xffff);
        self.next_qp += 1;
        let sport = 49152 + ((qpn.wrapping_mul(2654435761) >> 16) % 16384) as u16;
        self.qps.insert(
            qpn,
            Qp {
                owner: tenant,
                init: init.clone(),
                state: QpState::Init,
                remote: None,
                src_addr,
                sport,
                epoch: 0,
                sq: VecDeque::new(),
                cursor: 0,
                rq: VecDeque::new(),
                sq_posted: 0,
                sq_freed: 0,
                rq_posted: 0,
                rq_freed: 0,
                send_en_index: 0,
                send_enabled: 0,
                recv_en_index: 0,
                recv_enabled: 0,
                next_psn: 0,
                expected_psn: 0,
                last_reply_at: 0,
                reads_served_until: Vec::new(),
                retry_left: init.retry_cnt,
                rnr_left: init.rnr_retry,
                timer_gen: 0,
                timer_armed: false,
                paused_until: 0,
                lose_next: 0,
            },
        );
        Ok(qpn)
    }

    pub(in crate::testing::fake_nic) fn connect_qp(
        &mut self,
        tenant: TenantId,
        qpn: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let sport_control = self.caps.sport_control;
        let q = self.own_qp_mut(tenant, qpn)?;
        if !matches!(q.state, QpState::Init | QpState::Reset) {
            return Err(VerbsError::InvalidState(
                "connect_qp needs a QP in Init or Reset (modify it to Reset first)",
            ));
        }
        if q.init.qp_type != QpType::Ud {
            q.remote = Some(remote);
            if let (true, Some(p)) = (sport_control, remote.udp_sport) {
                q.sport = p;
            }
        }
        q.state = QpState::Rts;
        q.retry_left = q.init.retry_cnt;
        q.rnr_left = q.init.rnr_retry;
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn modify_qp(
        &mut self,
        s: &mut Sched,
        tenant: TenantId,
        qpn: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        let sport_control = self.caps.sport_control;
        let q = self.own_qp_mut(tenant, qpn)?;
        match m {
            QpModify::Error => self.enter_error(s, qpn),
            QpModify::Reset => {
                // Queues emptied without completions; indices back to zero (as libmlx5's
                // init_qp_indices); whatever is in flight belongs to the old incarnation.
                q.state = QpState::Reset;
                q.remote = None;
                q.epoch += 1;
                q.sq.clear();
                q.rq.clear();
                q.cursor = 0;
                q.sq_posted = 0;
                q.sq_freed = 0;
                q.rq_posted = 0;
                q.rq_freed = 0;
                q.send_en_index = 0;
                q.send_enabled = 0;
                q.recv_en_index = 0;
                q.recv_enabled = 0;
                q.next_psn = 0;
                q.expected_psn = 0;
                q.last_reply_at = 0;
                q.reads_served_until.clear();
                q.timer_armed = false;
                q.timer_gen += 1;
                q.paused_until = 0;
                // libmlx5 cleans the QP's completions out of its CQs on the way to Reset.
                let (scq, rcq) = (q.init.send_cq, q.init.recv_cq);
                for cq in [scq, rcq] {
                    if let Some(c) = self.cqs.get_mut(&cq) {
                        c.entries.retain(|e| e.wc.qp_num != qpn);
                        c.waiters.remove(&qpn);
                    }
                }
            }
            QpModify::UdpSport(p) => {
                // Without sport control the call is accepted and has no effect (Caps docs).
                if sport_control {
                    q.sport = p;
                }
            }
        }
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn query_qp(
        &self,
        tenant: TenantId,
        qpn: QpNum,
    ) -> Result<QpAttr, VerbsError> {
        Ok(self.own_qp(tenant, qpn)?.attr(qpn))
    }

    pub(in crate::testing::fake_nic) fn destroy_qp(
        &mut self,
        tenant: TenantId,
        qpn: QpNum,
    ) -> Result<(), VerbsError> {
        let q = self.own_qp(tenant, qpn)?;
        let (scq, rcq) = (q.init.send_cq, q.init.recv_cq);
        // No completions for what was outstanding; the QP's completions still in its CQs are
        // removed (libmlx5's cq_clean on destroy).
        self.qps.remove(&qpn);
        for cq in [scq, rcq] {
            if let Some(c) = self.cqs.get_mut(&cq) {
                c.entries.retain(|e| e.wc.qp_num != qpn);
                c.waiters.remove(&qpn);
            }
        }
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn alloc_pd(&mut self, tenant: TenantId) -> PdId {
        let pd = self.next_pd;
        self.next_pd += 1;
        self.pds.insert(pd, tenant);
        pd
    }

    /// ibv_dealloc_pd: EBUSY while a QP or a region of it exists.
    pub(in crate::testing::fake_nic) fn dealloc_pd(
        &mut self,
        tenant: TenantId,
        pd: PdId,
    ) -> Result<(), VerbsError> {
        if pd == DEFAULT_PD {
            return Err(VerbsError::InvalidState(
                "the default protection domain lives as long as the tenant",
            ));
        }
        self.own_pd(tenant, pd)?;
        let busy = self
            .qps
            .values()
            .any(|q| q.owner == tenant && q.init.pd == pd)
            || self.mrs.values().any(|m| m.owner == tenant && m.pd == pd);
        if busy {
            return Err(VerbsError::InvalidState(
                "protection domain still used by a QP or memory region (EBUSY)",
            ));
        }
        self.pds.remove(&pd);
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn reg_mr(
        &mut self,
        tenant: TenantId,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        if len == 0 || addr.checked_add(len).is_none() {
            return Err(VerbsError::InvalidArgument(
                "a memory region needs 1..2^64-addr bytes",
            ));
        }
        if access.remote_write && !access.local_write {
            // ibv_reg_mr: REMOTE_WRITE requires LOCAL_WRITE (EINVAL).
            return Err(VerbsError::InvalidArgument(
                "remote_write needs local_write",
            ));
        }
        self.own_pd(tenant, pd)?;
        if access.track && !self.caps.data_tracking {
            return Err(VerbsError::Unsupported(
                "memory contents are not tracked (caps.data_tracking = false)",
            ));
        }
        if let Err(e) = self.check_mr_limits(tenant, len) {
            self.mr_refused += 1;
            return Err(e);
        }
        let shared = self.maps_agent_memory(tenant, addr, len);
        let n = self.next_mr;
        self.next_mr += 1;
        // Keys carry the host, so a key used on the wrong host fails; lkey != rkey, so one
        // used for the other fails.
        let base = ((self.index as u32 & 0xff) << 24) | ((n & 0xf_ffff) << 4);
        let (lkey, rkey) = (base | 0x1, base | 0x2);
        self.mrs.insert(
            lkey,
            Mr {
                owner: tenant,
                pd,
                addr,
                len,
                access,
                rkey,
                shared,
            },
        );
        self.rkeys.insert(rkey, lkey);
        Ok(MemoryRegion {
            addr,
            len,
            lkey,
            rkey,
        })
    }

    pub(in crate::testing::fake_nic) fn dereg_mr(
        &mut self,
        tenant: TenantId,
        mr: &MemoryRegion,
    ) -> Result<(), VerbsError> {
        match self.mrs.get(&mr.lkey) {
            Some(m) if m.owner == tenant => {
                self.rkeys.remove(&m.rkey);
                self.mrs.remove(&mr.lkey);
                Ok(())
            }
            _ => Err(VerbsError::BadKey(mr.lkey)),
        }
    }

    pub(in crate::testing::fake_nic) fn post_send(
        &mut self,
        s: &mut Sched,
        cfg: &NetConfig,
        tenant: TenantId,
        qpn: QpNum,
        wr: SendWr,
        ready_at: u64,
    ) -> Result<(), VerbsError> {
        let q = self.own_qp(tenant, qpn)?;
        if !matches!(q.state, QpState::Rts | QpState::Error) {
            return Err(VerbsError::InvalidState(
                "post_send needs a connected QP (RTS)",
            ));
        }
        let bytes = wr.len();
        let qp_type = q.init.qp_type;
        let cross = q.init.is_cross_channel();
        match wr.op {
            SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. } => {
                if !self.caps.cross_channel {
                    return Err(VerbsError::Unsupported(
                        "cross-channel WRs (caps.cross_channel = false)",
                    ));
                }
                if !cross {
                    return Err(VerbsError::InvalidWr(
                        "WAIT/SEND_ENABLE/RECV_ENABLE need a QP created with cross_channel",
                    ));
                }
            }
            SendOp::Send | SendOp::SendWithImm(_) => {
                if qp_type == QpType::Ud {
                    if wr.ud_dest.is_none() {
                        return Err(VerbsError::InvalidWr("a UD send needs ud_dest"));
                    }
                    if bytes > self.caps.mtu as u64 {
                        return Err(VerbsError::InvalidWr("a UD message is at most one MTU"));
                    }
                }
            }
            SendOp::Write | SendOp::WriteWithImm(_) => {
                if qp_type == QpType::Ud {
                    return Err(VerbsError::InvalidWr("UD QPs only SEND"));
                }
            }
            SendOp::Read => {
                if qp_type != QpType::Rc {
                    return Err(VerbsError::InvalidWr("only RC QPs READ"));
                }
                if wr.inline {
                    return Err(VerbsError::InvalidWr("a READ cannot be inline"));
                }
            }
            SendOp::Nop => {}
        }
        if wr.op.carries_data() {
            if wr.inline {
                if bytes > cfg.max_inline as u64 {
                    return Err(VerbsError::InvalidWr(
                        "inline data above the NIC's inline limit",
                    ));
                }
            } else {
                self.check_sges(tenant, &wr.sg_list, matches!(wr.op, SendOp::Read))?;
            }
        }
        // Accepted by the post; the NIC finds the foreign-PD lkey when it fetches the data.
        let loc_prot =
            wr.op.carries_data() && !wr.inline && !self.sges_in_pd(tenant, q.init.pd, &wr.sg_list);
        if q.sq_posted - q.sq_freed >= q.init.max_send_wr as u64 {
            return Err(VerbsError::QueueFull);
        }
        // Post-time indices of the cross-channel WRs (libmlx5 computes them in post_send).
        let target = match wr.op {
            SendOp::Wait { cq, count } => {
                let c = self.own_cq(tenant, cq)?;
                c.wait_index + count as u64
            }
            SendOp::SendEnable { qp, count } => {
                let t = self.own_qp(tenant, qp)?;
                if !t.init.managed_send {
                    return Err(VerbsError::InvalidWr(
                        "SEND_ENABLE of a QP without managed_send",
                    ));
                }
                let idx = if count == 0 {
                    t.sq_posted
                } else {
                    t.send_en_index + count as u64
                };
                if idx > t.sq_posted {
                    return Err(VerbsError::InvalidWr(
                        "SEND_ENABLE beyond the WRs posted to the target queue",
                    ));
                }
                idx
            }
            SendOp::RecvEnable { qp, count } => {
                let t = self.own_qp(tenant, qp)?;
                if !t.init.managed_recv {
                    return Err(VerbsError::InvalidWr(
                        "RECV_ENABLE of a QP without managed_recv",
                    ));
                }
                let idx = if count == 0 {
                    t.rq_posted
                } else {
                    t.recv_en_index + count as u64
                };
                if idx > t.rq_posted {
                    return Err(VerbsError::InvalidWr(
                        "RECV_ENABLE beyond the RECVs posted to the target queue",
                    ));
                }
                idx
            }
            _ => 0,
        };
        // Accepted: commit.
        match wr.op {
            SendOp::Wait { cq, .. } => self.cqs.get_mut(&cq).expect("checked").wait_index = target,
            SendOp::SendEnable { qp, .. } => {
                self.qps.get_mut(&qp).expect("checked").send_en_index = target
            }
            SendOp::RecvEnable { qp, .. } => {
                self.qps.get_mut(&qp).expect("checked").recv_en_index = target
            }
            _ => {}
        }
        let inline_data = if wr.inline && wr.op.carries_data() {
            Some(
                self.gather(tenant, &wr.sg_list)
                    .unwrap_or_else(|| vec![0; bytes as usize]),
            )
        } else {
            None
        };
        let q = self.qps.get_mut(&qpn).expect("owned");
        let seq = q.sq_posted;
        q.sq_posted += 1;
        if q.state == QpState::Error {
            let c = wc(wr.wr_id, WcStatus::Flushed, wc_opcode(&wr.op), 0, qpn);
            let slot = Slot::Send {
                qp: qpn,
                epoch: q.epoch,
                seq,
            };
            let cq = q.init.send_cq;
            self.push_cqe(s, cq, c, slot);
            return Ok(());
        }
        let signaled = wr.signaled || q.init.sq_sig_all;
        q.sq.push_back(SendWqe {
            seq,
            wr,
            signaled,
            bytes,
            inline_data,
            ready_at,
            target,
            psn: None,
            sent: false,
            tx_end: 0,
            done: false,
            loc_prot,
        });
        s.at(
            ready_at,
            Ev::Kick {
                host: self.index,
                qp: qpn,
            },
        );
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn post_recv(
        &mut self,
        s: &mut Sched,
        tenant: TenantId,
        qpn: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        let q = self.own_qp(tenant, qpn)?;
        if q.state == QpState::Reset {
            return Err(VerbsError::InvalidState("post_recv on a QP in Reset"));
        }
        self.check_sges(tenant, &wr.sg_list, true)?;
        if !self.sges_in_pd(tenant, q.init.pd, &wr.sg_list) {
            // Refused at post, as on the simulated NIC (ibverbs finds it when a SEND arrives).
            let lkey = wr.sg_list.iter().map(|s| s.lkey).next().unwrap_or(0);
            return Err(VerbsError::BadKey(lkey));
        }
        if q.rq_posted - q.rq_freed >= q.init.max_recv_wr as u64 {
            return Err(VerbsError::QueueFull);
        }
        let q = self.qps.get_mut(&qpn).expect("owned");
        let seq = q.rq_posted;
        q.rq_posted += 1;
        if q.state == QpState::Error {
            let c = wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn);
            let slot = Slot::Recv {
                qp: qpn,
                epoch: q.epoch,
            };
            let cq = q.init.recv_cq;
            self.push_cqe(s, cq, c, slot);
            return Ok(());
        }
        q.rq.push_back(RecvWqe { seq, wr });
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn write_local(
        &mut self,
        tenant: TenantId,
        addr: u64,
        data: &[u8],
    ) -> Result<(), VerbsError> {
        self.check_tracked(tenant, addr, data.len() as u64)?;
        self.write_mem(tenant, addr, data);
        Ok(())
    }

    pub(in crate::testing::fake_nic) fn read_local(
        &self,
        tenant: TenantId,
        addr: u64,
        len: u64,
    ) -> Result<Vec<u8>, VerbsError> {
        self.check_tracked(tenant, addr, len)?;
        Ok(self.read_mem(tenant, addr, len))
    }

    pub(super) fn check_tracked(
        &self,
        tenant: TenantId,
        addr: u64,
        len: u64,
    ) -> Result<(), VerbsError> {
        if !self.caps.data_tracking {
            return Err(VerbsError::Unsupported(
                "memory contents are not tracked (caps.data_tracking = false)",
            ));
        }
        if !self.owns_tracked(tenant, addr, len) {
            return Err(VerbsError::Unsupported(
                "not inside one of this tenant's regions registered with Access::track",
            ));
        }
        Ok(())
    }
}
