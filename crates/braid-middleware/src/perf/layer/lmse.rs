//! The Large Message Scheduling Engine's posting: what one QP's software queue may post now
//! (0_WAIT lists owed, the window of large bytes, the token bucket, splitting into sub-WRs,
//! signaling, and the hardware PAUSE's admission of a QP that starts posting).

use super::*;

impl PerfLayer {
    /// [`PerfLayer::refill`] without the bookkeeping of `work`.
    pub(super) fn refill_qp(
        &mut self,
        below: &mut dyn Verbs,
        qpn: QpNum,
        first_of: Option<u64>,
    ) -> Result<(), VerbsError> {
        let sub = self.cfg.sub_wr.0;
        let zw_per_sub = self.cfg.zero_waits_per_sub_wr();
        loop {
            let Some(q) = self.qps.get(&qpn) else {
                return Ok(());
            };
            if q.failed || !q.has_work() {
                return Ok(());
            }
            let now = below.now();
            if !self.may_post(below, qpn, now) {
                return Ok(());
            }
            let small = self.host.borrow().small_active(now, self.tenant);
            let q = self.qps.get_mut(&qpn).expect("checked");
            // 0_WAITs owed come first (only while a small tenant is there to use the turns).
            if q.zw_pending > 0 {
                if !small {
                    q.zw_pending = 0;
                    continue;
                }
                let cq = match self.dummy_cq {
                    Some(c) => c,
                    None => return Ok(()),
                };
                // All of them in one post list (one doorbell), as the artifact posts its
                // chain of 0_WAITs; the list is built once per QP (`create_qp`), so only the
                // post is charged here.
                let n = q.zw_pending;
                let wrs: Vec<SendWr> = (0..n as u64)
                    .map(|i| {
                        let mut wr =
                            SendWr::new(q.next_seq + i, SendOp::Wait { cq, count: 0 }, vec![]);
                        wr.signaled = false;
                        wr
                    })
                    .collect();
                let (posted, err) = match below.post_send_list(qpn, wrs) {
                    Ok(()) => (n, None),
                    Err(b) => (b.index as u32, Some(b.error)),
                };
                let ord = q.next_ord.saturating_sub(1);
                for _ in 0..posted {
                    let seq = q.next_seq;
                    q.posted(HwEntry {
                        seq,
                        ord,
                        last: false,
                        large_bytes: 0,
                        signaled: false,
                        data: false,
                    });
                }
                q.zw_pending -= posted;
                self.c.zero_waits += posted as u64;
                match err {
                    None => continue,
                    // Full below: the rest waits for completions to free the queue.
                    Some(VerbsError::QueueFull) => return Ok(()),
                    Some(_) => {
                        q.zw_pending = 0;
                        continue;
                    }
                }
            }
            // A large READ to a peer whose host runs PeRF becomes a request its agent serves.
            match self.convert_read(below, qpn) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(VerbsError::QueueFull) => return Ok(()),
                Err(e) => return Err(e),
            }
            let q = self.qps.get_mut(&qpn).expect("checked");
            let a = q.sw.front().expect("has work");
            // The window of large bytes in the NIC.
            if a.large && q.hw_large > 0 {
                let next = if a.split == Some(true) {
                    sub.min(a.bytes - a.offset)
                } else {
                    a.bytes - a.offset
                };
                // (Past the window only while a completion is coming to refill it.)
                if q.hw_large + next > self.cfg.sq_bytes.0 && q.hw_signaled > 0 {
                    return Ok(());
                }
            }
            // The token bucket (READs bring data in; they are not charged).
            let charged = a.wr.op.carries_data() && a.wr.op != SendOp::Read;
            if charged {
                if let Some(b) = self.bucket.as_mut() {
                    b.refill(now);
                    if b.level <= 0.0 {
                        let at = b.ready_at();
                        self.c.bucket_waits += 1;
                        self.rearm_timer_at(at);
                        return Ok(());
                    }
                }
            }
            // Hardware PAUSE: a QP starting to post under the limit leads or is paused behind
            // a WAIT (posted first, so that its data waits in the NIC).
            if let Some(h) = self.hwp.as_mut() {
                let f = q.sw.front().expect("has work");
                if f.offset == 0 && f.wr.op.carries_data() {
                    let allowed = self
                        .host
                        .borrow()
                        .tenants
                        .get(&self.tenant)
                        .map_or(UNGATED, |t| t.allowed_qps);
                    if allowed != UNGATED {
                        let bytes = f.bytes;
                        for (_, w) in h.admit(qpn, now, allowed as usize) {
                            post_ctrl(below, Some(&mut *q), qpn, w);
                        }
                        h.account(qpn, bytes);
                    }
                }
            }
            let a = q.sw.front_mut().expect("has work");
            let first = a.offset == 0;
            let split = *a
                .split
                .get_or_insert(a.large && small && splittable(&a.wr) && a.bytes > sub);
            let len = if split {
                sub.min(a.bytes - a.offset)
            } else {
                a.bytes - a.offset
            };
            let last = a.offset + len >= a.bytes;
            let carries = a.wr.op.carries_data();
            let app_signaled = a.wr.signaled || q.sig_all;
            let large_bytes = if a.large { len } else { 0 };
            // Signal the application's own, one sub-WR in `signal_every`, whole large WRs (the
            // window refills on their completion), and the part that fills the window.
            let sig = (last && app_signaled)
                || (split && q.since_signal + 1 >= self.cfg.signal_every)
                || (a.large && !split)
                || (a.large && q.hw_large + len + sub > self.cfg.sq_bytes.0);
            let seq = q.next_seq;
            let wr = if split {
                let mut w = a.wr.clone();
                w.wr_id = seq;
                w.sg_list = slice_sges(&a.wr.sg_list, a.offset, len);
                w.remote_addr = a.wr.remote_addr + a.offset;
                w.signaled = sig;
                w.fence = a.wr.fence && first;
                if !last {
                    if let SendOp::WriteWithImm(_) = w.op {
                        w.op = SendOp::Write;
                    }
                }
                below.charge(Work::WrBuilt(1));
                w
            } else {
                let mut w = a.wr.clone();
                w.wr_id = seq;
                w.signaled = sig;
                w
            };
            match below.post_send(qpn, wr) {
                Ok(()) => {}
                // Full below: it stays queued until completions free the queue.
                Err(VerbsError::QueueFull) => return Ok(()),
                Err(e) => {
                    if first && first_of == Some(a.ord) {
                        return Err(e);
                    }
                    // A later part failed: the application WR fails as a whole.
                    let a = q.sw.pop_front().expect("front");
                    q.outstanding = q.outstanding.saturating_sub(1);
                    q.out_bytes = q.out_bytes.saturating_sub(a.bytes);
                    let reported = q.metas.iter().any(|m| m.ord == a.ord && m.reported);
                    q.metas.retain(|m| m.ord != a.ord);
                    if !reported {
                        let wc = WorkCompletion {
                            wr_id: a.wr.wr_id,
                            status: WcStatus::Flushed,
                            opcode: opcode_of(&a.wr.op),
                            byte_len: 0,
                            imm: None,
                            qp_num: qpn,
                            src_host: 0,
                            src_qp: 0,
                        };
                        let cq = q.send_cq;
                        self.deliver_local(below, cq, wc);
                    }
                    continue;
                }
            }
            if first {
                q.metas.push_back(AppMeta {
                    ord: a.ord,
                    wr_id: a.wr.wr_id,
                    signaled: app_signaled,
                    bytes: a.bytes,
                    opcode: opcode_of(&a.wr.op),
                    complete_posted: false,
                    reported: false,
                    serve: a.serve,
                    remote: None,
                });
                q.slot_wrs += 1;
                if split {
                    self.c.split_msgs += 1;
                }
            }
            q.slot_bytes += len;
            if split {
                self.c.sub_wrs += 1;
                q.since_signal = if sig { 0 } else { q.since_signal + 1 };
            }
            if charged {
                if let Some(b) = self.bucket.as_mut() {
                    b.level -= len as f64;
                }
            }
            let ord = a.ord;
            a.offset += len;
            if last {
                if let Some(m) = q.metas.back_mut() {
                    m.complete_posted = true;
                }
                q.sw.pop_front();
            }
            q.posted(HwEntry {
                seq,
                ord,
                last,
                large_bytes,
                signaled: sig,
                data: carries,
            });
            // 0_WAIT credit: sent large (non-READ) bytes, only beside a small tenant.
            if small && large_bytes > 0 && charged {
                let q = self.qps.get_mut(&qpn).expect("checked");
                q.zw_credit += len;
                while q.zw_credit >= sub {
                    q.zw_credit -= sub;
                    q.zw_pending += zw_per_sub;
                }
            } else if !small {
                self.qps.get_mut(&qpn).expect("checked").zw_credit = 0;
            }
        }
    }
}
