//! Queue pairs: creation, the state machine (INIT, RTR, RTS through `connect_qp`, `modify_qp`),
//! queries, address handles, destruction.

use super::*;

impl Nic {
    fn modify(
        &self,
        qp: NonNull<sys::ibv_qp>,
        attr: &mut sys::ibv_qp_attr,
        mask: i32,
    ) -> Result<(), VerbsError> {
        // SAFETY: a valid QP and attribute block.
        let r = unsafe { sys::ibv_modify_qp(qp.as_ptr(), attr, mask) };
        if r != 0 {
            return Err(VerbsError::InvalidState(
                "ibv_modify_qp refused the transition",
            ));
        }
        Ok(())
    }

    fn to_init(&self, qp: NonNull<sys::ibv_qp>, ty: QpType) -> Result<(), VerbsError> {
        // SAFETY: zeroed is a valid ibv_qp_attr.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.port;
        let mut mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        match ty {
            QpType::Ud => {
                a.qkey = QKEY;
                mask |= IBV_QP_QKEY;
            }
            QpType::Rc => {
                a.qp_access_flags =
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
                mask |= IBV_QP_ACCESS_FLAGS;
            }
            QpType::Uc => {
                a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
                mask |= IBV_QP_ACCESS_FLAGS;
            }
        }
        self.modify(qp, &mut a, mask)
    }

    pub fn create_qp(&mut self, t: TenantId, init: &QpInit) -> Result<QpNum, VerbsError> {
        let scq = self.own_cq(t, init.send_cq)?;
        let rcq = self.own_cq(t, init.recv_cq)?;
        if init.is_cross_channel() && !self.caps.cross_channel {
            return Err(VerbsError::Unsupported(
                "cross-channel QPs (WAIT/SEND_ENABLE/RECV_ENABLE): upstream rdma-core has no such verbs (caps.cross_channel = false)",
            ));
        }
        if init.local_addr as usize >= self.caps.local_addrs.len() {
            return Err(VerbsError::InvalidArgument(
                "local_addr is not an index of caps().local_addrs",
            ));
        }
        // The seam refuses 0 as the simulator and the fake NIC do (ibverbs would take it and
        // leave the QP unable to READ).
        init.check_rd_atomic()?;
        let pd = self.ibv_pd(t, init.pd)?;
        let ud = init.qp_type == QpType::Ud;
        // SAFETY: zeroed is a valid ibv_qp_init_attr.
        let mut ia: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        ia.send_cq = scq.as_ptr();
        ia.recv_cq = rcq.as_ptr();
        let max = self.caps.max_qp_wr;
        ia.cap.max_send_wr = init.max_send_wr.clamp(1, max);
        ia.cap.max_recv_wr = init.max_recv_wr.clamp(1, max);
        ia.cap.max_send_sge = 4;
        ia.cap.max_recv_sge = if ud { 5 } else { 4 };
        ia.cap.max_inline_data = 128;
        ia.qp_type = match init.qp_type {
            QpType::Rc => IBV_QPT_RC,
            QpType::Uc => IBV_QPT_UC,
            QpType::Ud => IBV_QPT_UD,
        };
        ia.sq_sig_all = init.sq_sig_all as i32;
        // SAFETY: valid PD and attributes.
        let qp = unsafe { sys::ibv_create_qp(pd.as_ptr(), &mut ia) };
        let qp = NonNull::new(qp).ok_or(VerbsError::InvalidArgument("ibv_create_qp failed"))?;
        if let Err(e) = self.to_init(qp, init.qp_type) {
            // SAFETY: just created.
            unsafe { sys::ibv_destroy_qp(qp.as_ptr()) };
            return Err(e);
        }
        let grh = if ud {
            match Self::grh_area(pd, ia.cap.max_recv_wr as u64) {
                Ok(g) => Some(g),
                Err(e) => {
                    // SAFETY: just created.
                    unsafe { sys::ibv_destroy_qp(qp.as_ptr()) };
                    return Err(e);
                }
            }
        } else {
            None
        };
        // SAFETY: valid QP.
        let qpn = unsafe { (*qp.as_ptr()).qp_num };
        let sq_psn = crate::psn::draw(qpn);
        // Under every address of the host: a peer names it by the one it connects to.
        for &a in &self.caps.local_addrs {
            crate::psn::record(a, qpn, sq_psn);
        }
        self.qps.insert(
            qpn,
            Qp {
                qp,
                owner: t,
                pd,
                init: init.clone(),
                remote: None,
                flow_label: 0,
                udp_sport: 0,
                sq_psn,
                wrs: WrLedger::default(),
                grh_next: 0,
                grh,
            },
        );
        Ok(qpn)
    }

    /// A registered area for `slots` receive GRHs.
    fn grh_area(
        pd: NonNull<sys::ibv_pd>,
        slots: u64,
    ) -> Result<(NonNull<sys::ibv_mr>, Vec<u8>, u64), VerbsError> {
        let mut buf = vec![0u8; (slots.max(1) * GRH_BYTES as u64) as usize];
        // SAFETY: registering our own buffer, which lives with the MR in the QP's record.
        let mr = unsafe {
            sys::ibv_reg_mr(
                pd.as_ptr(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                IBV_ACCESS_LOCAL_WRITE as i32,
            )
        };
        let mr =
            NonNull::new(mr).ok_or(VerbsError::InvalidArgument("ibv_reg_mr (GRH area) failed"))?;
        Ok((mr, buf, slots.max(1)))
    }

    fn ah_attr(&self, host: u32, local_addr: u8, flow_label: u32, tc: u8) -> sys::ibv_ah_attr {
        // SAFETY: zeroed is a valid ibv_ah_attr.
        let mut ah: sys::ibv_ah_attr = unsafe { std::mem::zeroed() };
        ah.is_global = 1;
        ah.port_num = self.port;
        ah.grh.dgid = gid_of_ipv4(host);
        ah.grh.sgid_index = self.gid_index[local_addr as usize];
        ah.grh.hop_limit = 64;
        ah.grh.flow_label = flow_label;
        ah.grh.traffic_class = tc;
        ah.sl = tc & 7;
        ah
    }

    pub fn connect_qp(
        &mut self,
        t: TenantId,
        qpn: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let (qp, init, sq_psn) = {
            let q = self.own_qp(t, qpn)?;
            (q.qp, q.init.clone(), q.sq_psn)
        };
        let state = self.state(qp)?;
        if state == QpState::Reset {
            self.to_init(qp, init.qp_type)?;
        } else if state != QpState::Init {
            return Err(VerbsError::InvalidState(
                "connect_qp needs a QP in Init or Reset (modify it to Reset first)",
            ));
        }
        let fl = remote.udp_sport.map(flow_label_for_sport).unwrap_or(0);
        let tc = init.priority.unwrap_or(0);
        // SAFETY: zeroed is a valid ibv_qp_attr.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = IBV_QPS_RTR;
        let mut mask = IBV_QP_STATE;
        if init.qp_type != QpType::Ud {
            a.path_mtu = match self.caps.mtu {
                256 => 1,
                512 => 2,
                1024 => 3,
                2048 => 4,
                _ => 5,
            };
            a.dest_qp_num = remote.qpn;
            // The remote QP's own initial PSN, as its endpoint brought it (`oob`), or as this
            // host drew it (loopback).
            a.rq_psn = crate::psn::lookup(remote.host, remote.qpn).ok_or(
                VerbsError::InvalidState(
                    "the remote QP's initial PSN is unknown: exchange its endpoint out of band (braid_rdma::oob) before connecting",
                ),
            )?;
            a.ah_attr = self.ah_attr(remote.host, init.local_addr, fl, tc);
            mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
            if init.qp_type == QpType::Rc {
                a.max_dest_rd_atomic = init.max_dest_rd_atomic;
                a.min_rnr_timer = 1; // 0.01 ms
                mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
            }
        }
        self.modify(qp, &mut a, mask)?;
        // SAFETY: as above.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = sq_psn;
        let mut mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if init.qp_type == QpType::Rc {
            a.timeout = 14; // 4.096 us * 2^14 = 67 ms
            a.retry_cnt = init.retry_cnt.min(7);
            a.rnr_retry = init.rnr_retry.min(7);
            a.max_rd_atomic = init.max_rd_atomic;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        self.modify(qp, &mut a, mask)?;
        let mut sport = 0;
        if let (Some(p), true, true) = (
            remote.udp_sport,
            self.caps.sport_control,
            init.qp_type != QpType::Ud,
        ) {
            self.set_udp_sport(qp, p)?;
            sport = p;
        }
        let q = self.qps.get_mut(&qpn).expect("owned");
        q.remote = (init.qp_type != QpType::Ud).then_some(remote);
        q.flow_label = fl;
        q.udp_sport = sport;
        Ok(())
    }

    /// mlx5dv_modify_qp_udp_sport on an RC/UC QP in RTS.
    fn set_udp_sport(&self, qp: NonNull<sys::ibv_qp>, sport: u16) -> Result<(), VerbsError> {
        // SAFETY: a valid QP; the wrapper returns EOPNOTSUPP where libmlx5 is absent.
        match unsafe { sys::mlx5dv_modify_qp_udp_sport(qp.as_ptr(), sport) } {
            0 => Ok(()),
            libc::EOPNOTSUPP => Err(VerbsError::Unsupported(
                "mlx5dv_modify_qp_udp_sport: not supported by this device or firmware",
            )),
            _ => Err(VerbsError::InvalidState(
                "mlx5dv_modify_qp_udp_sport refused (the QP must be RC or UC and in RTS)",
            )),
        }
    }

    fn state(&self, qp: NonNull<sys::ibv_qp>) -> Result<QpState, VerbsError> {
        // SAFETY: zeroed attribute blocks; a valid QP.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        let mut ia: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        if unsafe { sys::ibv_query_qp(qp.as_ptr(), &mut a, IBV_QP_STATE, &mut ia) } != 0 {
            return Err(VerbsError::InvalidState("ibv_query_qp failed"));
        }
        Ok(match a.qp_state {
            IBV_QPS_RESET => QpState::Reset,
            IBV_QPS_INIT => QpState::Init,
            IBV_QPS_RTR => QpState::Rtr,
            IBV_QPS_RTS => QpState::Rts,
            _ => QpState::Error,
        })
    }

    pub fn modify_qp(&mut self, t: TenantId, qpn: QpNum, m: QpModify) -> Result<(), VerbsError> {
        let qp = self.own_qp(t, qpn)?.qp;
        // SAFETY: as above.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        match m {
            QpModify::Error => {
                a.qp_state = IBV_QPS_ERR;
                self.modify(qp, &mut a, IBV_QP_STATE)
            }
            QpModify::Reset => {
                a.qp_state = IBV_QPS_RESET;
                self.modify(qp, &mut a, IBV_QP_STATE)?;
                let q = self.qps.get_mut(&qpn).expect("owned");
                q.remote = None;
                q.udp_sport = 0;
                q.wrs.clear();
                Ok(())
            }
            QpModify::UdpSport(p) if self.caps.sport_control => {
                if self.state(qp)? != QpState::Rts {
                    return Err(VerbsError::InvalidState(
                        "the UDP source port changes on a connected QP (Rts) only",
                    ));
                }
                self.set_udp_sport(qp, p)?;
                self.qps.get_mut(&qpn).expect("owned").udp_sport = p;
                Ok(())
            }
            QpModify::UdpSport(_) => Err(VerbsError::Unsupported(
                "changing the UDP source port of a connected QP (this NIC derives it from the QPN: caps().sport_control is false; only mlx5 devices have mlx5dv_modify_qp_udp_sport)",
            )),
        }
    }

    pub fn query_qp(&mut self, t: TenantId, qpn: QpNum) -> Result<QpAttr, VerbsError> {
        let (qp, init, remote, outstanding, udp_sport) = {
            let q = self.own_qp(t, qpn)?;
            (
                q.qp,
                q.init.clone(),
                q.remote,
                q.wrs.send_outstanding() as u32,
                q.udp_sport,
            )
        };
        let state = self.state(qp)?;
        Ok(QpAttr {
            qpn,
            qp_type: init.qp_type,
            state,
            local_addr: self.caps.local_addrs[init.local_addr as usize],
            udp_sport,
            remote: if state == QpState::Rts { remote } else { None },
            retry_cnt: init.retry_cnt,
            rnr_retry: init.rnr_retry,
            cross_channel: false,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            send_outstanding: outstanding,
        })
    }

    pub fn destroy_qp(&mut self, t: TenantId, qpn: QpNum) -> Result<(), VerbsError> {
        let qp = self.own_qp(t, qpn)?.qp;
        // SAFETY: a QP we created.
        if unsafe { sys::ibv_destroy_qp(qp.as_ptr()) } != 0 {
            return Err(VerbsError::InvalidState("ibv_destroy_qp failed"));
        }
        if let Some(q) = self.qps.remove(&qpn) {
            if let Some((mr, _, _)) = q.grh {
                // SAFETY: the QP is gone; nothing uses its GRH area.
                unsafe { sys::ibv_dereg_mr(mr.as_ptr()) };
            }
        }
        Ok(())
    }

    pub(super) fn ah(
        &mut self,
        pd: NonNull<sys::ibv_pd>,
        host: u32,
        local_addr: u8,
        tc: u8,
    ) -> Result<*mut sys::ibv_ah, VerbsError> {
        let key = (pd.as_ptr() as usize, host, local_addr, tc as u32);
        if let Some(a) = self.ahs.get(&key) {
            return Ok(a.as_ptr());
        }
        let mut attr = self.ah_attr(host, local_addr, 0, tc);
        // SAFETY: valid PD and attributes.
        let ah = NonNull::new(unsafe { sys::ibv_create_ah(pd.as_ptr(), &mut attr) }).ok_or(
            VerbsError::InvalidArgument("ibv_create_ah failed (unreachable address?)"),
        )?;
        self.ahs.insert(key, ah);
        Ok(ah.as_ptr())
    }
}
