//! MP-RDMA sender state: construction, window arithmetic (awnd), virtual-path choice and
//! arming of the burst and RTO timers.

use super::{MpRdmaParams, MpRdmaTransport, MpStats, Slot};
use crate::transport::mp_sync::SyncSender;
use crate::transport::{RetryBudget, TimerKind, TxFx};
use braid_engine::{RngStream, Time};
use std::collections::VecDeque;

impl MpRdmaTransport {
    pub fn new(p: MpRdmaParams) -> Self {
        let iw = p
            .cfg
            .iw
            .unwrap_or_else(|| (p.cfg.bdp.0 as f64 / p.mtu as f64).ceil().max(1.0) as u32)
            .max(1) as f64;
        let rng = RngStream::new(p.seed, "mp-rdma", &[p.host as u64, p.qpn as u64]);
        let l = p.cfg.bitmap as usize;
        let srtt = p.cfg.initial_rtt.0 as f64;
        let budget = RetryBudget::new(p.retry);
        MpRdmaTransport {
            iw,
            rng,
            cwnd: iw,
            inflate: 0.0,
            snd_una: 0,
            snd_nxt: 0,
            snd_ooh1: 0,
            in_recovery: false,
            recovery: 0,
            snd_retx: 0,
            retx_one: None,
            hole_retx: None,
            walk_from: 0,
            hole_rearm: false,
            early_ptr: 0,
            sent_at: VecDeque::new(),
            early_armed: false,
            early_wait: false,
            no_data: false,
            last_ack_vp: None,
            credits: VecDeque::new(),
            planned: None,
            burst_armed: false,
            burst_gen: 0,
            probe_next: false,
            probe_vp: None,
            probe_epoch_end: 0,
            srtt,
            rttvar: srtt / 2.0,
            rtt_seq: None,
            started: false,
            window_moved: false,
            last_activity: 0,
            last_ack: 0,
            rnr_until: 0,
            rto: Default::default(),
            last_progress: 0,
            read_progress: 0,
            read_timer_armed: false,
            timeouts: 0,
            budget,
            vps_used: Default::default(),
            sync: SyncSender::new(p.cfg.sync_mode, p.cfg.alpha, p.cfg.delta),
            reads: VecDeque::new(),
            read_rewind: None,
            rcv_nxt: 0,
            bitmap: vec![Slot::Empty; l],
            nak_sent_for: None,
            sync_early_hi: None,
            stats: MpStats {
                ood_hist: vec![0; l.max(1)],
                ..Default::default()
            },
            p,
        }
    }

    pub fn iw(&self) -> f64 {
        self.iw
    }
    pub fn srtt(&self) -> Time {
        self.srtt as Time
    }
    /// Packets allowed but not yet sent.
    pub fn credits(&self) -> usize {
        self.credits.len()
    }

    pub(super) fn random_vp(&mut self) -> u16 {
        let (lo, hi) = (self.p.cfg.vp_min as u64, self.p.cfg.vp_max as u64);
        (lo + self.rng.below(hi - lo + 1)) as u16
    }

    /// The new VP a probe goes to (drawn once, kept until the probe is sent).
    pub(super) fn random_vp_peek(&mut self) -> u16 {
        match self.probe_vp {
            Some(v) => v,
            None => {
                let v = self.random_vp();
                self.probe_vp = Some(v);
                v
            }
        }
    }

    pub(super) fn outstanding(&self) -> f64 {
        (self.snd_nxt - self.snd_una) as f64
    }

    /// awnd = cwnd + inflate − (snd_nxt − snd_una), less what is already allowed but unsent.
    pub(super) fn free_window(&self) -> i64 {
        let awnd = self.cwnd + self.inflate - self.outstanding();
        awnd.floor() as i64 - self.credits.len() as i64
    }

    /// How long a packet may stay unacknowledged before loss is suspected: srtt + 4·rttvar,
    /// the retransmission timeout of RFC 6298 (§2.3) without its 1 s floor. Below it, an
    /// unacknowledged packet is most likely still on its way (on a slower path).
    pub(super) fn suspicion_age(&self) -> Time {
        (self.srtt + 4.0 * self.rttvar).ceil() as Time
    }

    /// The next early-retransmission candidate and when loss becomes suspected for it: the
    /// first PSN at or after early_ptr that no ACK SACKed (early_ptr moves past SACKed ones).
    pub(super) fn early_candidate(&mut self) -> Option<(u32, Time)> {
        let una = self.snd_una;
        let mut psn = self.early_ptr.max(una);
        while psn < self.snd_nxt {
            if let Some(r) = self.read_at(psn) {
                // A READ's responses are recovered by `read.rs`: a re-request in the middle of
                // a READ whose responses are on their way restarts it at the responder.
                psn = r.end;
                continue;
            }
            match self.sent_at.get((psn - una) as usize) {
                Some(&(_, true)) => psn += 1,
                Some(&(t, false)) => {
                    self.early_ptr = psn;
                    return Some((psn, t + self.suspicion_age()));
                }
                None => break,
            }
        }
        self.early_ptr = psn;
        None
    }

    /// Makes sure an allowed packet waiting for loss to be suspected is looked at again then:
    /// one timer at a time, at the candidate's suspicion time (or a kick if that has come and
    /// `plan` is waiting). Armed whenever credits wait, since `plan` (which knows whether there
    /// is new data) cannot arm timers; it wakes the QP only if `plan` did wait.
    pub(super) fn arm_early(&mut self, now: Time, fx: &mut TxFx) {
        if !self.p.cfg.early_retx || self.early_armed || self.credits.is_empty() || self.in_recovery
        {
            return;
        }
        if let Some((_, due)) = self.early_candidate() {
            if due > now {
                self.early_armed = true;
                fx.timers.push((due, TimerKind::Early, 0));
            } else if self.early_wait {
                fx.kick = true;
            }
        }
    }

    pub(super) fn shrink(&mut self, by: f64) {
        self.cwnd = (self.cwnd - by).max(1.0);
    }

    pub(super) fn arm_burst(&mut self, now: Time, fx: &mut TxFx) {
        if !self.burst_armed {
            self.burst_armed = true;
            self.burst_gen += 1;
            let wait = (self.srtt * self.p.cfg.burst_rtt_frac).max(1.0) as Time;
            fx.timers
                .push((now + wait, TimerKind::Burst, self.burst_gen));
        }
    }

    pub(super) fn rto_arm(&mut self, now: Time, fx: &mut TxFx) {
        self.rto.start(now, self.p.rto, &mut self.last_progress, fx);
    }
}
