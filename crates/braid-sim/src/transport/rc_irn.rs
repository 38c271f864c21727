//! The RC transport's calls into selective repeat (`irn.rs`) where they need its private state
//! (cumulative points, pacing, retry budget): sending, feedback, the retransmission timer and the
//! receiver's cumulative point. A child module of `rc.rs`, so go-back-N's code stays as it was.

use super::super::irn::SelectiveRepeat;
use super::super::{DataInfo, Feedback, Reply, TxFx};
use super::RcTransport;
use braid_engine::time::Time;

impl RcTransport {
    fn sr(&mut self) -> &mut SelectiveRepeat {
        self.sr.as_deref_mut().expect("selective repeat is on")
    }

    /// A packet left under selective repeat: the cumulative points, pacing, and the timer
    /// (armed when nothing was outstanding, kept at the current timeout otherwise).
    pub(super) fn sr_sent(
        &mut self,
        now: Time,
        psn: u32,
        npsn: u32,
        wire: u32,
        reliable: bool,
        fx: &mut TxFx,
    ) {
        let before = self.max_sent;
        self.snd_nxt = psn + npsn;
        self.max_sent = self.max_sent.max(psn + npsn);
        self.pace(now, wire);
        let idle = self.snd_una >= before;
        let (una, max) = (self.snd_una, self.max_sent);
        self.sr().on_sent(now, psn, npsn, una, before);
        if reliable && self.cfg.reliable {
            if idle {
                self.last_progress = now;
            }
            let lp = self.last_progress;
            self.sr().arm(lp, una, max, fx);
        }
    }

    pub(super) fn sr_feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        let una_before = self.snd_una;
        match fb {
            Feedback::Ack {
                cum,
                sack,
                ece,
                endpoint,
                ..
            } => {
                let old_una = self.snd_una;
                self.ack_point(now, cum);
                self.ack_cc(now, old_una, sack, ece, endpoint, fx);
            }
            Feedback::Nak { expected, .. }
            | Feedback::SyncNak { expected, .. }
            | Feedback::SackNak { expected, .. } => {
                // Everything below the expected PSN arrived, and the receiver is alive.
                self.ack_point(now, expected);
                self.last_progress = now;
            }
            Feedback::RnrNak { psn } => {
                self.ack_point(now, psn);
                self.last_progress = now;
                if let Err(f) = self.budget.rnr() {
                    fx.fatal = Some(f);
                    return;
                }
                self.rnr_until = now + self.cfg.rnr_delay;
            }
            Feedback::Cnp => return self.notified(now, fx),
        }
        let (una, max, lp) = (self.snd_una, self.max_sent, self.last_progress);
        let sr = self.sr();
        // Moving the cumulative point may open the BDP cap; a NACK may leave a hole to repair.
        let kick = sr.on_feedback(now, fb, una, max, fx) || una > una_before;
        if una < max {
            // The flight may have shrunk below N: the timer comes earlier (RTO_low).
            sr.arm(lp, una, max, fx);
        }
        if kick {
            fx.kick = true;
        }
    }

    /// The retransmission timer under selective repeat: only the live one counts; a timeout
    /// without progress for the current RTO (low or high by the flight) starts recovery.
    pub(super) fn sr_timeout(&mut self, now: Time, gen: u32, first_missing: u32, fx: &mut TxFx) {
        let (una, max, lp) = (self.snd_una, self.max_sent, self.last_progress);
        let sr = self.sr();
        if !sr.timer_fired(gen) {
            return;
        }
        if una >= max && first_missing >= max {
            return;
        }
        let deadline = lp + sr.rto(una, max);
        if now < deadline {
            sr.arm(lp, una, max, fx);
            return;
        }
        self.timeouts += 1;
        if let Err(f) = self.budget.timeout() {
            // retry_cnt retransmissions went unanswered: give up.
            fx.fatal = Some(f);
            return;
        }
        self.last_progress = now;
        let sr = self.sr();
        sr.on_timeout(now, una, max);
        if first_missing < una {
            // A READ's responses went missing after its PSNs were acknowledged by later
            // traffic: ask for them again.
            sr.reread_from(first_missing, una, max);
        }
        sr.arm(now, una, max, fx);
        // The congestion controller hears of a timeout as under go-back-N (a SACKed hole is
        // repaired without telling it: IRN leaves congestion to the controller's own signals).
        self.lost(now, fx);
        fx.kick = true;
    }

    /// RACK's reordering timer (`loss_detection = "rack"`): PSNs whose window ran out are lost.
    pub(super) fn sr_reorder_timer(&mut self, now: Time, gen: u32, fx: &mut TxFx) {
        let (una, max) = (self.snd_una, self.max_sent);
        if self.sr().on_reorder_timer(now, gen, una, max, fx) {
            fx.kick = true;
        }
    }

    /// The NIC placed a packet the selective-repeat receiver accepted: move the cumulative point
    /// over what is contiguous now and acknowledge per `ack_every` (an out-of-order packet was
    /// NACKed with its SACK instead).
    pub(super) fn sr_accepted(&mut self, d: DataInfo, out: &mut Vec<Reply>) {
        let epsn = self.epsn;
        let (next, ooo) = self.sr().on_accepted(d.psn, epsn, out);
        self.epsn = next;
        if ooo {
            return;
        }
        self.nak_sent = false;
        self.unacked += 1;
        if d.last || self.unacked >= self.cfg.ack_every || next > d.psn + 1 {
            // A packet that filled a hole is acknowledged at once: the sender's recovery ends on it.
            self.unacked = 0;
            out.push(Reply::Ack {
                cum: self.epsn,
                sack: Some(d.psn),
                echo_sport: d.sport,
                ece: d.ce,
                retx: d.retx,
            });
        }
    }
}
