//! The data path: posting send and receive work requests, polling completions and converting
//! them to the seam's `WorkCompletion`.

use super::*;

impl Nic {
    pub fn post_send_list(&mut self, t: TenantId, qpn: QpNum, wrs: &[SendWr]) -> Result<(), BadWr> {
        if wrs.is_empty() {
            return Ok(());
        }
        let bad0 = |error| BadWr { index: 0, error };
        let (qp, pd, init, tag0) = {
            let q = self.own_qp(t, qpn).map_err(bad0)?;
            (q.qp, q.pd, q.init.clone(), q.wrs.send_tag(0))
        };
        let mut sges: Vec<Vec<sys::ibv_sge>> = Vec::with_capacity(wrs.len());
        let mut raw: Vec<sys::ibv_send_wr> = Vec::with_capacity(wrs.len());
        for (index, wr) in wrs.iter().enumerate() {
            let bad = |error| BadWr { index, error };
            let opcode = match (wr.op, init.qp_type) {
                (SendOp::Send, _) => IBV_WR_SEND,
                (SendOp::SendWithImm(_), _) => IBV_WR_SEND_WITH_IMM,
                (_, QpType::Ud) => return Err(bad(VerbsError::InvalidWr("UD QPs only SEND"))),
                (SendOp::Write, _) => IBV_WR_RDMA_WRITE,
                (SendOp::WriteWithImm(_), _) => IBV_WR_RDMA_WRITE_WITH_IMM,
                (SendOp::Read, QpType::Uc) => {
                    return Err(bad(VerbsError::InvalidWr("UC QPs cannot READ")))
                }
                (SendOp::Read, _) => IBV_WR_RDMA_READ,
                (
                    SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. },
                    _,
                ) => {
                    return Err(bad(VerbsError::Unsupported(
                        "cross-channel WAIT/SEND_ENABLE/RECV_ENABLE on this device",
                    )))
                }
                (SendOp::Nop, _) => {
                    return Err(bad(VerbsError::Unsupported(
                        "NOP work requests through ibv_post_send",
                    )))
                }
            };
            if !wr.inline {
                for s in &wr.sg_list {
                    if s.length > 0 {
                        self.own_lkey(t, s.lkey).map_err(bad)?;
                    }
                }
            }
            let mut list = Vec::with_capacity(wr.sg_list.len());
            for s in &wr.sg_list {
                if s.length == 0 {
                    continue;
                }
                // Inline data is read by the CPU at post time: from the real bytes.
                let addr = if wr.inline {
                    let len = s.length as u64;
                    self.owns_range(t, s.addr, len)
                        .ok()
                        .and_then(|space| self.mem.get(&space))
                        .and_then(|m| m.real(s.addr, len))
                        .ok_or_else(|| {
                            bad(VerbsError::InvalidArgument(
                                "inline data outside registered memory",
                            ))
                        })? as u64
                } else {
                    s.addr
                };
                list.push(sys::ibv_sge {
                    addr,
                    length: s.length,
                    lkey: s.lkey,
                });
            }
            let mut flags = 0;
            if wr.signaled || init.sq_sig_all {
                flags |= IBV_SEND_SIGNALED;
            }
            if wr.inline {
                flags |= IBV_SEND_INLINE;
            }
            if wr.fence {
                flags |= IBV_SEND_FENCE;
            }
            let imm = match wr.op {
                SendOp::SendWithImm(i) | SendOp::WriteWithImm(i) => i.to_be(),
                _ => 0,
            };
            // SAFETY: zeroed is a valid ibv_send_wr (null pointers, zero counts).
            let mut w: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
            // The device sees the ledger's tag; completions map it back to wr.wr_id.
            w.wr_id = (tag0 + index as u64) & !(1 << 63);
            w.num_sge = list.len() as i32;
            w.opcode = opcode;
            w.send_flags = flags;
            w.imm_data_invalidated_rkey_union.imm_data = imm;
            if init.qp_type == QpType::Ud {
                let d = wr
                    .ud_dest
                    .ok_or_else(|| bad(VerbsError::InvalidWr("UD send needs ud_dest")))?;
                let ah = self
                    .ah(pd, d.host, init.local_addr, init.priority.unwrap_or(0))
                    .map_err(bad)?;
                w.wr.ud = sys::ud_t {
                    ah,
                    remote_qpn: d.qpn,
                    remote_qkey: QKEY,
                };
            } else {
                w.wr.rdma = sys::rdma_t {
                    remote_addr: wr.remote_addr,
                    rkey: wr.rkey,
                };
            }
            sges.push(list);
            raw.push(w);
        }
        for i in 0..raw.len() {
            raw[i].sg_list = if sges[i].is_empty() {
                null_mut()
            } else {
                sges[i].as_mut_ptr()
            };
            let next = if i + 1 < raw.len() {
                &mut raw[i + 1] as *mut _
            } else {
                null_mut()
            };
            raw[i].next = next;
        }
        let mut bad: *mut sys::ibv_send_wr = null_mut();
        // SAFETY: a valid QP and a well-formed list whose SGEs outlive the call.
        let r = unsafe { sys::ibv_post_send(qp.as_ptr(), raw.as_mut_ptr(), &mut bad) };
        let posted = if r == 0 {
            raw.len()
        } else if bad.is_null() {
            0
        } else {
            // SAFETY: bad points into raw.
            unsafe { bad.offset_from(raw.as_ptr()) as usize }
        };
        let q = self.qps.get_mut(&qpn).expect("owned");
        for (w, wr) in raw[..posted].iter().zip(wrs) {
            let op = match wr.op {
                SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
                SendOp::Read => WcOpcode::Read,
                _ => WcOpcode::Send,
            };
            q.wrs.push_send(PostedSend {
                tag: w.wr_id,
                wr_id: wr.wr_id,
                signaled: w.send_flags & IBV_SEND_SIGNALED != 0,
                op,
            });
        }
        if r != 0 {
            return Err(BadWr {
                index: posted,
                error: if r == libc::ENOMEM {
                    VerbsError::QueueFull
                } else {
                    VerbsError::InvalidState("ibv_post_send refused the work request")
                },
            });
        }
        Ok(())
    }

    pub fn post_recv(&mut self, t: TenantId, qpn: QpNum, wr: &RecvWr) -> Result<(), VerbsError> {
        for s in &wr.sg_list {
            if s.length > 0 {
                self.own_lkey(t, s.lkey)?;
            }
        }
        let q = self.own_qp(t, qpn)?;
        let grh = q.grh.as_ref().map(|(mr, buf, n)| {
            // SAFETY: a valid MR.
            (unsafe { (*mr.as_ptr()).lkey }, buf.as_ptr() as u64, *n)
        });
        let mut list = Vec::with_capacity(wr.sg_list.len() + 1);
        let ud = q.init.qp_type == QpType::Ud;
        let slot = q.grh_next % grh.map_or(1, |g| g.2);
        let tag = q.wrs.recv_tag();
        if ud {
            let (lkey, base, _) = grh.expect("UD QPs have a GRH area");
            list.push(sys::ibv_sge {
                addr: base + slot * GRH_BYTES as u64,
                length: GRH_BYTES,
                lkey,
            });
        }
        for s in wr.sg_list.iter().filter(|s| s.length > 0) {
            list.push(sys::ibv_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            });
        }
        // SAFETY: zeroed is a valid ibv_recv_wr.
        let mut w: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
        w.wr_id = tag;
        w.num_sge = list.len() as i32;
        w.sg_list = if list.is_empty() {
            null_mut()
        } else {
            list.as_mut_ptr()
        };
        let mut bad = null_mut();
        // SAFETY: a valid QP and WR.
        let r = unsafe { sys::ibv_post_recv(q.qp.as_ptr(), &mut w, &mut bad) };
        if r != 0 {
            return Err(if r == libc::ENOMEM {
                VerbsError::QueueFull
            } else {
                VerbsError::InvalidState("ibv_post_recv refused the work request")
            });
        }
        if ud {
            q.grh_next += 1;
        }
        q.wrs.push_recv(PostedRecv {
            tag,
            wr_id: wr.wr_id,
            slot,
        });
        Ok(())
    }

    pub fn poll_cq(
        &mut self,
        t: TenantId,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        let Ok(p) = self.own_cq(t, cq) else {
            return 0;
        };
        let mut n = 0;
        let stash = &mut self.cqs[cq as usize].as_mut().expect("owned").stash;
        while n < max {
            let Some(w) = stash.pop_front() else { break };
            out.push(w);
            n += 1;
        }
        let mut wcs: Vec<sys::ibv_wc> = Vec::with_capacity(max.min(256));
        while n < max {
            let k = (max - n).min(256);
            // SAFETY: room for k entries.
            let got = unsafe { sys::ibv_poll_cq(p.as_ptr(), k as i32, wcs.as_mut_ptr()) };
            if got <= 0 {
                break;
            }
            // SAFETY: the provider filled `got` entries.
            unsafe { wcs.set_len(got as usize) };
            for w in wcs.drain(..) {
                // A completion of a request no QP has any more (reset) is not reported.
                if let Some(c) = self.convert(&w) {
                    out.push(c);
                    n += 1;
                }
            }
            if (got as usize) < k {
                break;
            }
        }
        n
    }

    /// The seam's completion for a device one, or None when it retired no outstanding request
    /// of a QP of this device (a QP since reset or destroyed: mlx5 removes those from the CQ).
    pub(super) fn convert(&mut self, w: &sys::ibv_wc) -> Option<WorkCompletion> {
        let status = WcStatus::from_ibv(w.status);
        let mut imm = (w.wc_flags & IBV_WC_WITH_IMM != 0)
            // SAFETY: the union's imm member is what WITH_IMM says is valid.
            .then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data }));
        let mut byte_len = w.byte_len as u64;
        let (mut src_host, mut src_qp) = (0, 0);
        let mut opcode = match w.opcode {
            IBV_WC_SEND => WcOpcode::Send,
            IBV_WC_RDMA_WRITE => WcOpcode::Write,
            IBV_WC_RDMA_READ => WcOpcode::Read,
            IBV_WC_RECV if imm.is_some() => WcOpcode::RecvWithImm,
            IBV_WC_RECV => WcOpcode::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvWithImm,
            _ => WcOpcode::Nop,
        };
        let q = self.qps.get_mut(&w.qp_num)?;
        let grh = q.grh.as_ref().map(|g| g.1.as_ptr());
        let ok = w.status == IBV_WC_SUCCESS;
        // The tag says whether a send or a receive completed (an error completion's opcode
        // is undefined in ibverbs, and a send and a receive may share a wr_id).
        let wr_id = match q.wrs.complete(w.wr_id)? {
            Retired::Send(s) => {
                // ibverbs defines imm_data for receive completions only (rxe also flags
                // the requester's completion of a *_WITH_IMM).
                imm = None;
                if !ok {
                    opcode = s.op;
                }
                s.wr_id
            }
            Retired::Recv(r) => {
                if !ok {
                    opcode = WcOpcode::Recv;
                } else if q.init.qp_type == QpType::Ud {
                    byte_len = byte_len.saturating_sub(GRH_BYTES as u64);
                    src_qp = w.src_qp;
                    if let Some(b) = grh {
                        // SAFETY: the slot lies inside the GRH buffer.
                        let g = unsafe {
                            std::slice::from_raw_parts(
                                b.add((r.slot * GRH_BYTES as u64) as usize),
                                GRH_BYTES as usize,
                            )
                        };
                        // RoCEv2 over IPv4: 20 bytes of zeros, then the IPv4 header (source
                        // address at its bytes 12..16). Otherwise a GRH: source GID at 8..24.
                        src_host = if g[20] >> 4 == 4 {
                            u32::from_be_bytes([g[32], g[33], g[34], g[35]])
                        } else {
                            let mut raw = [0u8; 16];
                            raw.copy_from_slice(&g[8..24]);
                            ipv4_of_gid(&raw).unwrap_or(0)
                        };
                    }
                } else if let Some(rq) = q.remote {
                    src_host = rq.host;
                    src_qp = rq.qpn;
                }
                r.wr_id
            }
        };
        let wc = WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len,
            imm,
            qp_num: w.qp_num,
            src_host,
            src_qp,
        };
        if !ok && self.errors.len() < ERRORS_KEPT {
            self.errors.push(format!(
                "QP {} wr {} {:?} {:?} (vendor error {:#x}) at {} us",
                w.qp_num,
                wr_id,
                status,
                opcode,
                w.vendor_err,
                self.epoch.elapsed().as_micros()
            ));
        }
        Some(wc)
    }
}
