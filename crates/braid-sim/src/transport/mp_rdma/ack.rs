//! MP-RDMA sender feedback: the cumulative point, RTT samples, entering loss recovery, and
//! what each ACK / NACK / synchronise NACK does to the window and the credits (§3.2, §3.3, §3.5).

use super::{Credit, MpRdmaTransport, Src};
use crate::transport::{Feedback, TxFx};
use braid_engine::Time;

impl MpRdmaTransport {
    pub(super) fn ack_point(&mut self, now: Time, cum: u32) {
        // A READ's PSNs are acknowledged by its responses only (`read.rs`).
        let cum = cum.min(self.read_floor());
        if cum > self.snd_una {
            self.window_moved = true;
            self.inflate = (self.inflate - (cum - self.snd_una) as f64).max(0.0);
            let gone = ((cum - self.snd_una) as usize).min(self.sent_at.len());
            self.sent_at.drain(..gone);
            self.snd_una = cum;
            self.last_progress = now;
            self.budget.progress();
            if let Some((s, _)) = self.rtt_seq {
                if s < cum {
                    // Its own SACK did not come back (lost, or a retransmission): no sample.
                    self.rtt_seq = None;
                }
            }
            if cum >= self.probe_epoch_end {
                // One RTT of data acknowledged: maybe probe a new path with the next packet.
                self.probe_epoch_end = self.snd_nxt.max(cum + 1);
                if self.rng.bernoulli(self.p.cfg.probe_p) {
                    self.probe_next = true;
                }
            }
            if self.in_recovery && self.snd_una >= self.recovery {
                self.in_recovery = false;
            }
            if self.in_recovery && cum >= self.walk_from && cum < self.snd_retx {
                // The new hole was resent by the walk, just after the copy whose ACK moved the
                // cumulative point here, i.e. about an RTT ago: resending it at once makes a
                // duplicate (measured: ~1 per bitmap drop) whose ACK inflates the window a
                // second time. Count it as resent an RTT ago; the hole timer (or the next clock)
                // resends it if the point has not moved half an RTT from now.
                self.hole_retx = Some((cum, now.saturating_sub(self.srtt as Time)));
                self.hole_rearm = true;
            }
        }
        self.snd_retx = self.snd_retx.max(self.snd_una);
        self.early_ptr = self.early_ptr.max(self.snd_una);
        self.inflate = self.inflate.min(self.outstanding());
    }

    pub(super) fn rtt_sample(&mut self, now: Time, sack: u32) {
        if let Some((s, t0)) = self.rtt_seq {
            if s == sack {
                let r = (now - t0) as f64;
                let err = r - self.srtt;
                self.srtt += err / 8.0;
                self.rttvar += (err.abs() - self.rttvar) / 4.0;
                self.rtt_seq = None;
            }
        }
    }

    pub(super) fn enter_recovery(&mut self, now: Time, from: u32) {
        if let Some((h, t)) = self.hole_retx {
            if h == from && ((now - t) as f64) < self.srtt * 1.5 {
                // Its retransmission is on its way.
                return;
            }
        }
        if !self.in_recovery {
            // The hole goes first; [from + 1, from + L) most likely arrived; what was sent at or
            // beyond from + L was dropped by the receiver's bitmap: the walk resends it.
            self.in_recovery = true;
            self.stats.recoveries += 1;
            self.recovery = self.snd_nxt;
            self.snd_retx = from.max(self.snd_una) + self.bitmap.len() as u32;
            self.walk_from = self.snd_retx;
        }
    }

    pub(super) fn feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        match fb {
            Feedback::Ack {
                cum,
                sack,
                echo_sport,
                ece,
                retx,
                ..
            } => {
                self.stats.acks += 1;
                self.last_activity = now;
                self.last_ack_vp = Some(echo_sport);
                // The window had no unused room: this ACK is what lets the next packet out, and
                // if there is none, the room it opens is lost (§3.5). Room an earlier such ACK
                // opened and that waits (for loss suspicion) counts as taken (the paper takes it
                // back at once); any other waiting credit is unused room (an application-limited
                // sender: its ACKs kick nothing out).
                let opens = self.free_window() <= 0 && self.credits.iter().all(|c| c.lose);
                self.last_ack = now;
                // Congestion control, per ACK.
                if ece {
                    self.stats.ecn_acks += 1;
                    self.shrink(0.5);
                } else if !self.p.cfg.cwnd_validation
                    || self.credits.len() < self.p.cfg.max_per_ack as usize
                {
                    self.cwnd += 1.0 / self.cwnd;
                }
                self.inflate += 1.0;
                // Sample before moving the cumulative point: an in-order ACK of the timed PSN
                // also moves cum past it, which ack_point takes as "its own SACK never came".
                if let (Some(s), false) = (sack, retx) {
                    self.rtt_sample(now, s);
                }
                if let Some(s) = sack {
                    if self.read_at(s).is_some() {
                        // A READ response: the READ re-request timer waits from here.
                        self.read_progress = now;
                    }
                    self.read_response(s);
                }
                self.ack_point(now, cum);
                if let Some(s) = sack.filter(|&s| s >= self.snd_una) {
                    if let Some(e) = self.sent_at.get_mut((s - self.snd_una) as usize) {
                        e.1 = true;
                    }
                }
                let mut clock = true;
                if let (Some(s), false) = (sack, retx) {
                    let delta = self.p.cfg.delta;
                    if delta > 0 && self.snd_ooh1 > delta && s < self.snd_ooh1 - 1 - delta {
                        // A slow path: prune it (one window unit less, no clock on its VP).
                        self.stats.ooo_pruned += 1;
                        self.shrink(1.0);
                        clock = false;
                    }
                    self.snd_ooh1 = self.snd_ooh1.max(s + 1);
                }
                self.inflate = self.inflate.min(self.outstanding());
                if clock {
                    let n = self.free_window();
                    if n > 0 {
                        let k = n.min(self.p.cfg.max_per_ack as i64);
                        for i in 0..k {
                            let mut c = Credit::new(echo_sport, Src::Ack);
                            // One ACK, at most one window unit lost.
                            c.lose = opens && i == 0;
                            self.credits.push_back(c);
                        }
                        if n > k {
                            self.arm_burst(now, fx);
                        }
                        fx.kick = true;
                    }
                }
            }
            Feedback::Nak {
                expected,
                echo_sport,
            }
            | Feedback::SyncNak {
                expected,
                echo_sport,
                ..
            } => {
                // A packet beyond the receiver's bitmap was dropped; `expected` is the hole
                // holding the window back. The dropped packet stays outstanding (no inflate):
                // its retransmission's ACK will return its credit, on a path that works.
                self.stats.nacks += 1;
                self.ack_point(now, expected);
                if let (Feedback::Nak { .. }, Some(r)) = (fb, self.read_at(expected)) {
                    // The responder dropped an early READ request and waits for the one at
                    // `expected` (lost, or overtaken on another path): ask for that READ and every
                    // later one again, in order (`read.rs`). No WRITE data was dropped.
                    self.rewind_reads(r.got.max(expected), echo_sport, Src::Nack);
                    fx.kick = true;
                    return;
                }
                self.enter_recovery(now, expected);
                let sync = if let Feedback::SyncNak { psn, .. } = fb {
                    // A synchronise packet came early and was dropped: resend it once the hole
                    // is filled. The hole itself is recovered as for any NACK (above): if it was
                    // lost, nothing else would report it (dropped packets never fill the bitmap).
                    self.sync.on_nak(expected, psn);
                    true
                } else {
                    false
                };
                if sync || self.p.cfg.nack_clocks {
                    // The dropped packet crossed the network on `echo_sport`: its credit goes back
                    // to that VP, as an ACK's would. Otherwise every loss empties the ACK clock
                    // (with L ≈ one BDP the whole window in flight when the NACK returns is
                    // dropped) and the window regrows from the few VPs whose ACKs come first:
                    // a reshuffle of the VPs per loss that drowns the loss signal (lossy VPs
                    // losing their lost packets' credits). A dropped synchronise packet always
                    // counts so: otherwise a window full of them leaves no ACK to clock their
                    // resend.
                    self.last_ack = now;
                    self.inflate = (self.inflate + 1.0).min(self.outstanding());
                    let n = self.free_window();
                    if n > 0 {
                        let k = n.min(self.p.cfg.max_per_ack as i64);
                        for _ in 0..k {
                            self.credits.push_back(Credit::new(echo_sport, Src::Nack));
                        }
                        if n > k {
                            self.arm_burst(now, fx);
                        }
                    }
                }
                // The ACKs that follow clock the retransmissions onto their (good) paths; the
                // NACK starts one itself when nothing else is allowed (the hole must go out), on
                // the VP it echoes: the dropped packet's, which just crossed the network (a
                // random VP is most likely a lossy or failed one when most paths are).
                if self.credits.is_empty() {
                    self.credits.push_back(Credit::new(echo_sport, Src::Nack));
                }
                fx.kick = true;
            }
            Feedback::RnrNak { psn } => {
                self.ack_point(now, psn);
                if let Err(f) = self.budget.rnr() {
                    fx.fatal = Some(f);
                    return;
                }
                self.last_progress = now;
                self.rnr_until = now + self.p.rnr_delay;
                self.hole_retx = None;
                self.enter_recovery(now, psn);
                if self.credits.is_empty() {
                    let vp = self.random_vp();
                    self.credits.push_back(Credit::new(vp, Src::Nack));
                }
                fx.kick = true;
            }
            // Only selective-repeat RC receivers send these.
            Feedback::SackNak { .. } | Feedback::Cnp => {}
        }
    }
}
