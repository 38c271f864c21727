//! The layer's side of the hardware PAUSE (`hw_pause`, [`super::super::hwpause`]): the managed
//! loopback QP, the rotation on posts and completions, and the control WRs it posts.

use super::*;

impl PerfLayer {
    /// Hardware PAUSE: consumes the hand-over completions, rotates the first leader when its
    /// turn is over, releases everyone when the limit is lifted.
    pub(super) fn hw_rotate(&mut self, below: &mut dyn Verbs) {
        let Some(h) = self.hwp.as_mut() else { return };
        let mut sink = Vec::new();
        while h.marks > 0 {
            let n = below.poll_cq(h.mcq, 256, &mut sink);
            if n == 0 {
                break;
            }
            h.marks = h.marks.saturating_sub(n as u32);
            sink.clear();
        }
        while h.kicks > 0 {
            let n = below.poll_cq(h.kcq, 256, &mut sink);
            if n == 0 {
                break;
            }
            h.kicks = h.kicks.saturating_sub(n as u32);
            sink.clear();
        }
        let allowed = self
            .host
            .borrow()
            .tenants
            .get(&self.tenant)
            .map_or(UNGATED, |t| t.allowed_qps);
        let now = below.now();
        let posts: Posts = if allowed == UNGATED {
            h.ungate()
        } else {
            let (wrs, bytes) = (self.cfg.rotate_wrs, self.cfg.rotate_bytes.0);
            let qps = &self.qps;
            let (posts, next) = h.rotate(
                now,
                |t| t.wrs >= wrs || t.bytes >= bytes,
                self.cfg.release_after.0,
                |l| {
                    qps.get(&l)
                        .is_none_or(|q| !q.has_work() && !q.data_in_nic())
                },
            );
            if let Some(at) = next {
                self.rearm_timer_at(at);
            }
            posts
        };
        self.post_hw(below, posts);
    }

    /// Posts the hardware PAUSE's control WRs (the kick QP's as [`post_kick`]).
    fn post_hw(&mut self, below: &mut dyn Verbs, posts: Posts) {
        let kick = self.hwp.as_ref().map(|h| h.kick);
        for (target, w) in posts {
            if Some(target) == kick {
                post_kick(below, target, w);
            } else {
                post_ctrl(below, self.qps.get_mut(&target), target, w);
            }
        }
    }

    /// Creates the managed loopback QP of the hardware PAUSE (`hw_pause`); on failure the
    /// software PAUSE stays in charge.
    pub(super) fn start_hw_pause(&mut self, below: &mut dyn Verbs) -> Result<(), VerbsError> {
        let idle = self.dummy_cq(below)?;
        let mcq = below.create_cq(4096)?;
        let init = QpInit {
            managed_send: true,
            cross_channel: true,
            max_send_wr: 4096,
            ..QpInit::rc(mcq)
        };
        let mqp = below.create_qp(&init)?;
        let me = RemoteQp {
            host: below.local_host(),
            qpn: mqp,
            udp_sport: None,
        };
        below.connect_qp(mqp, me)?;
        // The kick QP: enables `mqp`'s marks at once when a QP leaves the rotation.
        let kcq = below.create_cq(256)?;
        let kinit = QpInit {
            cross_channel: true,
            max_send_wr: 256,
            ..QpInit::rc(kcq)
        };
        let kick = below.create_qp(&kinit)?;
        below.connect_qp(kick, RemoteQp { qpn: kick, ..me })?;
        self.hwp = Some(HwPause::new(mqp, mcq, idle, kick, kcq));
        Ok(())
    }

    /// `qpn` was destroyed or failed: the hardware rotation goes on without it (`hwpause`).
    pub(super) fn hw_forget(&mut self, below: &mut dyn Verbs, qpn: QpNum) {
        let Some(h) = self.hwp.as_mut() else { return };
        let posts = h.forget(qpn, below.now());
        self.post_hw(below, posts);
    }
}

/// Posts a control WR (WAIT, SEND_ENABLE) of the hardware PAUSE. On one of the tenant's QPs
/// (`q`) it takes the next sequence number and a place in the QP's hardware list (no data, no
/// completion); on the managed QP it is the layer's own.
pub(super) fn post_ctrl(
    below: &mut dyn Verbs,
    q: Option<&mut QpQueue>,
    qpn: QpNum,
    mut wr: SendWr,
) {
    below.charge(Work::WrBuilt(1));
    match q {
        Some(q) => {
            let seq = q.next_seq;
            wr.wr_id = seq;
            let signaled = wr.signaled;
            if below.post_send(qpn, wr).is_ok() {
                let ord = q.next_ord.saturating_sub(1);
                q.posted(HwEntry {
                    seq,
                    ord,
                    last: false,
                    large_bytes: 0,
                    signaled,
                    data: false,
                });
            }
        }
        None => {
            let _ = below.post_send(qpn, wr);
        }
    }
}

/// Posts a kick SEND_ENABLE; if the NIC refuses its count (libmlx5's cumulative index: the
/// lost SEND_ENABLEs' marks are already counted as enabled-to-be), enables all posted marks.
fn post_kick(below: &mut dyn Verbs, kick: QpNum, mut wr: SendWr) {
    below.charge(Work::WrBuilt(1));
    if below.post_send(kick, wr.clone()).is_ok() {
        return;
    }
    if let SendOp::SendEnable { count, .. } = &mut wr.op {
        *count = 0;
    }
    let _ = below.post_send(kick, wr);
}
