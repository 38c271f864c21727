//! MP-RDMA sender timers: burst control, RTO, the hole timer and early retransmission (§3.5);
//! the READ re-request timer is in `read.rs`.

use super::{Credit, MpRdmaTransport, Src};
use crate::transport::rto::RtoFired;
use crate::transport::{TimerKind, TxFx};
use braid_engine::Time;

impl MpRdmaTransport {
    pub(super) fn timer(
        &mut self,
        now: Time,
        kind: TimerKind,
        gen: u32,
        first_missing: u32,
        fx: &mut TxFx,
    ) {
        match kind {
            TimerKind::Burst => {
                if gen != self.burst_gen {
                    return;
                }
                if self.p.cfg.burst_after_last_ack {
                    // Only if no ACK came for the timer's length: while ACKs return, they clock
                    // the rest of the burst onto their own VPs.
                    let due =
                        self.last_ack + (self.srtt * self.p.cfg.burst_rtt_frac).max(1.0) as Time;
                    if now < due {
                        fx.timers.push((due, TimerKind::Burst, gen));
                        return;
                    }
                }
                self.burst_armed = false;
                if self.p.cfg.burst_after_last_ack && !self.credits.is_empty() {
                    // Packets already allowed are still waiting (for the NIC, or in recovery
                    // for the hole to fill): the pipe is not empty, and more on random VPs
                    // would only re-spread the window. The next ACK with an excess re-arms it.
                    return;
                }
                let n = self.free_window();
                for _ in 0..n.max(0) {
                    let vp = self.random_vp();
                    self.credits.push_back(Credit::new(vp, Src::Burst));
                    self.stats.burst_timer_pkts += 1;
                }
                if n > 0 {
                    fx.kick = true;
                }
            }
            TimerKind::Rto => {
                let fired = self.rto.fire(
                    now,
                    self.p.rto,
                    self.snd_una < self.snd_nxt,
                    &mut self.last_progress,
                    &mut self.budget,
                    fx,
                );
                self.timeouts += fired.timed_out() as u64;
                if fired != RtoFired::Retransmit {
                    return;
                }
                // Last resort: retransmit everything unacknowledged, clocked from IW random VPs.
                self.in_recovery = true;
                self.stats.recoveries += 1;
                self.recovery = self.snd_nxt;
                self.snd_retx = first_missing.max(self.snd_una);
                self.walk_from = self.snd_retx;
                self.retx_one = None;
                self.hole_retx = None;
                self.credits.clear();
                let n = self.cwnd.min(self.iw).max(1.0) as u32;
                // Everything outstanding is presumed lost and has left the network as far as the
                // window is concerned, except the n packets resent now: once they are out,
                // awnd = cwnd − n and each ACK of a resent packet clocks one more. With inflate = 0
                // the lost packets kept awnd negative whenever more than cwnd were outstanding,
                // the ACKs of the resent packets clocked nothing and the flow waited for the next
                // RTO (found with Fig. 11b, seed 2: 50 ms at 0 Gbps). With `nack_clocks` each
                // resent copy at or beyond walk_from (= snd_una here) re-enters the window as it
                // goes out (see on_sent), so all of it counts as gone now.
                let resent_now = if self.p.cfg.nack_clocks {
                    0.0
                } else {
                    n as f64
                };
                self.inflate = (self.outstanding() - resent_now).max(0.0);
                for _ in 0..n {
                    let vp = self.random_vp();
                    self.credits.push_back(Credit::new(vp, Src::Rto));
                }
                // READs without their responses are asked for again from the first missing one
                // (the walk leaves READ PSNs alone, `read.rs`).
                let floor = self.read_floor();
                if floor != u32::MAX {
                    let vp = self.random_vp();
                    self.rewind_reads(floor, vp, Src::Rto);
                }
                fx.kick = true;
            }
            TimerKind::Hole => {
                // The hole `gen` is still the hole, its retransmission is stale and nothing is
                // allowed to send: grant one packet on a random VP (plan() resends the hole).
                let stale = matches!(self.hole_retx, Some((h, t)) if h == gen && ((now - t) as f64) >= self.srtt * 1.5);
                if self.in_recovery && gen == self.snd_una && stale && self.credits.is_empty() {
                    let vp = self.random_vp();
                    self.credits.push_back(Credit::new(vp, Src::HoleTimer));
                    self.stats.hole_timer += 1;
                    fx.kick = true;
                }
            }
            TimerKind::Early => {
                // A packet may now be suspected lost: let a waiting credit resend it (plan()
                // decides; `arm_early` after this looks for the next candidate).
                self.early_armed = false;
                if self.early_wait && !self.credits.is_empty() {
                    fx.kick = true;
                }
            }
            TimerKind::ReadRetry => self.read_timer_fired(now, fx),
            TimerKind::Alpha | TimerKind::RateInc | TimerKind::RateDec => {}
        }
    }
}
