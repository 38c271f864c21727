//! The poller: busy-polls the one shared CQ and hands every completion to its tenant at the
//! decided CQE rates, by connection id (`wr_id` locally, the immediate data for what peers
//! send); kept apart so that `agent.rs` stays the scheduler.

use super::*;

impl DrumAgent {
    /// The poller: every completion of the shared CQ, by connection id.
    pub(super) fn poll(&mut self, v: &mut dyn Verbs) {
        let Some(cq) = self.cq else {
            return;
        };
        let mut wcs = Vec::new();
        if poll_and_rearm(v, cq, &mut wcs).is_err() {
            return;
        }
        self.cqe_polled += wcs.len() as u64;
        let convert = ps(self.st.borrow().cfg.convert_ns);
        for wc in wcs {
            if let Some(ud) = self.ud.as_mut().filter(|u| u.qp == wc.qp_num) {
                ud.on_wc(v, &mut self.st.borrow_mut(), &wc, convert);
                continue;
            }
            let Some(&(peer, gi)) = self.by_qpn.get(&wc.qp_num) else {
                continue;
            };
            if wc.wr_id & RECV_BIT != 0 {
                if wc.status != WcStatus::Success {
                    // The pipe's QP is in Error (flushed with it, or failed as responder).
                    self.pipe_failed((peer, gi), None);
                    continue;
                }
                let slot = wc.wr_id as u32;
                let (pidx, tracked) = self
                    .pipes
                    .get(&(peer, gi))
                    .map_or((0, false), |p| (p.index, p.tracked));
                let data = match (self.layout, wc.imm) {
                    (Some(l), Some(imm)) if tracked && imm & IMM_SEND != 0 && wc.byte_len > 0 => {
                        // The payload, out of the slot before the slot is posted again.
                        v.read_local(l.slot(pidx, slot), wc.byte_len).ok()
                    }
                    _ => None,
                };
                if let Some(l) = self.layout {
                    let _ = v.post_recv(wc.qp_num, l.recv(pidx, slot));
                }
                // The companion of a WR with the application's immediate value (imm.rs).
                let held = self
                    .pipes
                    .get_mut(&(peer, gi))
                    .and_then(|p| p.pairing.companion_of());
                if let Some((local, mut a)) = held {
                    a.imm = wc.imm;
                    if let Some(local) = local {
                        self.st.borrow_mut().arrive(local, a);
                    }
                    continue;
                }
                // verb_convertor: the peer's connection id from the immediate data.
                v.charge(Work::Ns(convert / 1000));
                self.cpu_convert_ps += convert;
                let imm = wc.imm.unwrap_or(u32::MAX);
                let sender = imm & 0xFF_FFFF;
                if imm & (IMM_SEND | IMM_CTRL) == IMM_CTRL {
                    // A control message of the peer's agent about its connection `sender`.
                    self.on_ctrl(peer, sender, imm & CTRL_KIND);
                    continue;
                }
                let local = self.st.borrow().by_remote.get(&(peer, sender)).copied();
                let send = imm & IMM_SEND != 0;
                if send && wc.byte_len > 0 && data.is_none() {
                    // A SEND's payload is copied from the agent's buffer to the tenant's (a
                    // WRITE_WITH_IMM placed its data directly). With tracked memory the copy
                    // is real, and charged where it is made (the tenant's layer).
                    v.charge(Work::Copy(wc.byte_len));
                }
                // A segment of a long SEND waits for the rest; the last one completes it.
                let Some((len, data)) = self.join_segments(
                    (peer, sender),
                    send,
                    imm & IMM_MORE != 0,
                    wc.byte_len,
                    data,
                ) else {
                    continue;
                };
                let a = Arrival {
                    opcode: if imm & IMM_APP != 0 {
                        WcOpcode::RecvWithImm
                    } else {
                        WcOpcode::Recv
                    },
                    len,
                    src_host: peer,
                    send,
                    data,
                    imm: None,
                };
                if local.is_none() {
                    self.unknown_conn += 1;
                }
                if imm & IMM_APP != 0 {
                    if let Some(p) = self.pipes.get_mut(&(peer, gi)) {
                        p.pairing.hold((local, a));
                    }
                    continue;
                }
                if let Some(local) = local {
                    self.st.borrow_mut().arrive(local, a);
                }
                continue;
            }
            let vq = (wc.wr_id >> 32) as QpNum;
            if wc.status != WcStatus::Success {
                // The shared QP failed: every connection on it sees it (fail.rs).
                self.pipe_failed(
                    (peer, gi),
                    Some(Culprit {
                        conn: vq,
                        status: wc.status,
                    }),
                );
                continue;
            }
            if let Some(p) = self.pipes.get_mut(&(peer, gi)) {
                p.completed(v.now());
            }
            let seq = wc.wr_id as u32;
            let mut st = self.st.borrow_mut();
            let Some(c) = st.conns.get_mut(&vq) else {
                continue; // destroyed meanwhile
            };
            let Some(f) = c.inflight.pop_front() else {
                continue; // flushed with its pipe already
            };
            debug_assert_eq!(f.seq, seq, "a shared QP completes in order");
            if f.aux {
                continue; // the agent's helper WR: its application WR completes next
            }
            if let Some(status) = f.refused {
                // The refusal reached the peer's agent, behind everything the connection had
                // on the shared QP: the refused WR completes with its error, the rest is
                // flushed and the connection goes to Error, as on its own RC QP.
                let status = if c.state == QpState::Error {
                    WcStatus::Flushed
                } else {
                    status
                };
                c.done.push_back(WorkCompletion {
                    status,
                    ..flush(vq, f.app_wr_id, f.opcode)
                });
                st.has_done.insert(vq);
                st.fail_conn(vq);
                continue;
            }
            c.completed += 1;
            // A connection moved to Error by itself (its tenant, a refused remote key) while
            // this was on the shared QP: flushed, as on its own QP.
            let status = if c.state == QpState::Error {
                WcStatus::Flushed
            } else {
                WcStatus::Success
            };
            if f.signaled || status != WcStatus::Success {
                c.done.push_back(WorkCompletion {
                    wr_id: f.app_wr_id,
                    status,
                    opcode: f.opcode,
                    byte_len: if status == WcStatus::Success {
                        f.len
                    } else {
                        0
                    },
                    imm: None,
                    qp_num: vq,
                    src_host: 0,
                    src_qp: 0,
                });
                st.has_done.insert(vq);
            }
        }
    }
}
