//! Time-based loss detection for selective repeat, after RACK (RFC 8985, "The RACK-TLP Loss
//! Detection Algorithm for TCP"): `[transport.irn] loss_detection = "rack"`.
//!
//! IRN's own rule (`"nack"`, the default) calls a PSN lost as soon as a later PSN is SACKed,
//! which makes every packet overtaken on a faster path a loss when a switch sprays. RACK calls
//! a PSN lost only when a PSN *sent* after it has been delivered and a reordering window has
//! passed since: lost when `xmit_ts + RACK.rtt + reo_wnd <= now` (RFC 8985 §6.2 step 5), where
//! RACK.xmit_ts / RACK.rtt are the send time and RTT of the most recently sent delivered PSN.
//! What the RFC defines and is modelled here:
//! - `reo_wnd = min(reo_wnd_mult × min_RTT / 4, SRTT)` (§6.2 step 4), 0 while no reordering has
//!   been seen and the sender is in recovery or holds at least DupThresh = 3 SACKs.
//! - Reordering is seen when a PSN never retransmitted is delivered below the highest SACKed one
//!   (RACK.fack, §6.2 step 3), or when a DSACK reports a spurious retransmission (RFC 3708).
//! - DSACK adaptation (§6.2 step 4): a report that a retransmitted PSN arrived twice grows
//!   `reo_wnd_mult` by one, at most once per round trip; 16 recoveries without one reset it.
//!   The receiver's answer to a duplicate (an ACK echoing the ReTx bit and naming a PSN the
//!   sender already knew delivered) is the DSACK.
//! - RTT samples skip a retransmitted PSN acknowledged sooner than min_RTT after its resend
//!   (the ACK is likely the original's, §6.2 step 2).
//! - A reordering timer fires when the earliest suspect's window would expire (§6.2 step 6;
//!   the RFC arms it at the latest of the remaining times, as here).
//! - On a timeout, the PSN at the cumulative point and every PSN whose window expired are lost
//!   (§6.3).
//!
//! Not modelled: the tail-loss probe (§7). A lost tail waits for IRN's RTO_low, which IRN
//! introduced for the same purpose (fewer than N PSNs in flight).

use super::irn::PsnBitmap;
use braid_engine::time::Time;

/// RFC 8985 §6.2: DupThresh, the SACK count beyond which a reordering-free sender stops
/// waiting (RFC 6675's value).
const DUP_THRESH: u32 = 3;
/// RFC 8985 §6.2 step 4: the DSACK-grown window persists over this many recoveries.
const REO_WND_PERSIST: u32 = 16;

/// One QP's RACK state (the sender's side; the receiver is IRN's unchanged).
#[derive(Debug, Clone)]
pub struct Rack {
    /// Send time of each PSN's latest transmission, indexed as the bitmaps (PSN mod span).
    xmit: Vec<Time>,
    /// PSNs ever retransmitted (base = snd_una).
    retransmitted: PsnBitmap,
    /// PSNs marked lost and not yet sent again (base = snd_una).
    lost: PsnBitmap,
    lost_count: u32,
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent PSN known delivered.
    rack_xmit: Time,
    rack_end: u32,
    /// RACK.rtt: that PSN's RTT.
    rack_rtt: Time,
    min_rtt: Option<Time>,
    srtt: Option<Time>,
    /// RACK.fack: one past the highest PSN delivered.
    fack: u32,
    /// RACK.reord: reordering has been seen.
    reord: bool,
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    /// `max_sent` when the window last grew: one growth per round trip.
    dsack_round: Option<u32>,
    /// The reordering timer's generation and deadline.
    timer_gen: u32,
    timer_at: Option<Time>,
    /// A fixed reordering window (`transport.irn.reo_wnd`) replacing the adaptive one.
    fixed_reo_wnd: Option<Time>,
    /// DSACKs received (spurious retransmissions the receiver reported).
    pub dsacks: u64,
}

impl Rack {
    pub fn new(span_psns: u32, fixed_reo_wnd: Option<Time>) -> Self {
        let lost = PsnBitmap::new(span_psns);
        Rack {
            xmit: vec![0; lost.span() as usize],
            retransmitted: PsnBitmap::new(span_psns),
            lost,
            lost_count: 0,
            rack_xmit: 0,
            rack_end: 0,
            rack_rtt: 0,
            min_rtt: None,
            srtt: None,
            fack: 0,
            reord: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            timer_gen: 0,
            timer_at: None,
            fixed_reo_wnd,
            dsacks: 0,
        }
    }

    fn slot(&self, psn: u32) -> usize {
        (psn % self.xmit.len() as u32) as usize
    }

    /// Whether a PSN is within the window the ring covers from `snd_una`.
    fn in_window(&self, psn: u32, snd_una: u32) -> bool {
        psn >= snd_una && psn - snd_una < self.xmit.len() as u32
    }

    /// A transmission of `npsn` PSNs from `psn` left at `now`.
    pub fn on_sent(&mut self, now: Time, psn: u32, npsn: u32, snd_una: u32, retransmission: bool) {
        for p in psn..psn + npsn {
            if !self.in_window(p, snd_una) {
                continue;
            }
            let s = self.slot(p);
            self.xmit[s] = now;
            if retransmission {
                self.retransmitted.set(p);
                if self.lost.get(p) && p >= self.lost.base() {
                    self.lost_clear(p);
                }
            }
        }
    }

    fn lost_clear(&mut self, psn: u32) {
        if self.lost.unset(psn) {
            self.lost_count -= 1;
        }
    }

    fn mark_lost(&mut self, psn: u32) {
        if !self.lost.get(psn) && self.lost.set(psn) {
            self.lost_count += 1;
        }
    }

    /// Whether any PSN is marked lost and not sent again.
    pub fn has_lost(&self) -> bool {
        self.lost_count > 0
    }

    /// The first lost PSN in [from, end), if any.
    pub fn first_lost(&self, from: u32, end: u32) -> Option<u32> {
        if self.lost_count == 0 {
            return None;
        }
        (from.max(self.lost.base())..end).find(|&p| self.lost.get(p))
    }

    /// RACK_sent_after (§6.2): whether (t1, s1) was sent after (t2, s2).
    fn sent_after(t1: Time, s1: u32, t2: Time, s2: u32) -> bool {
        t1 > t2 || (t1 == t2 && s1 > s2)
    }

    /// PSN `p` was delivered (cumulatively or by SACK), reported at `now`: RACK's steps 1–3.
    fn delivered(&mut self, now: Time, p: u32, snd_una_before: u32) {
        if !self.in_window(p, snd_una_before) {
            return;
        }
        let ts = self.xmit[self.slot(p)];
        let retx = self.retransmitted.get(p) && p >= self.retransmitted.base();
        if !retx && p < self.fack {
            self.reord = true;
        }
        self.fack = self.fack.max(p + 1);
        let rtt = now.saturating_sub(ts);
        if retx && self.min_rtt.is_some_and(|m| rtt < m) {
            // Acknowledged sooner than any round trip: the original's ACK, not the resend's.
            return;
        }
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        // RFC 6298's smoothing (alpha = 1/8).
        self.srtt = Some(self.srtt.map_or(rtt, |s| s - s / 8 + rtt / 8));
        if Self::sent_after(ts, p + 1, self.rack_xmit, self.rack_end) {
            self.rack_xmit = ts;
            self.rack_end = p + 1;
            self.rack_rtt = rtt;
        }
    }

    /// Feedback delivered `[una_before, una_after)` cumulatively and `sack` selectively;
    /// `sacked` is the SACK scoreboard before this feedback. `dsack`: the receiver reported
    /// a retransmission it already had. Call before the bitmaps move to `una_after`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_feedback(
        &mut self,
        now: Time,
        una_before: u32,
        una_after: u32,
        sack: Option<u32>,
        sacked: &PsnBitmap,
        dsack: bool,
        max_sent: u32,
    ) {
        for p in una_before..una_after {
            if !sacked.get(p) {
                self.delivered(now, p, una_before);
            }
        }
        if let Some(s) = sack.filter(|&s| s >= una_after && !sacked.get(s)) {
            self.delivered(now, s, una_before);
        }
        if self.dsack_round.is_some_and(|r| una_after >= r) {
            self.dsack_round = None;
        }
        if dsack {
            // A spurious retransmission: the original was late, not lost, which is reordering
            // (how RFC 3708 uses DSACK, and Linux's RACK counts it as reordering seen).
            self.reord = true;
            self.dsacks += 1;
            if self.dsack_round.is_none() {
                self.dsack_round = Some(max_sent);
                self.reo_wnd_mult += 1;
                self.reo_wnd_persist = REO_WND_PERSIST;
            }
        }
        self.retransmitted.advance_to(una_after);
        self.advance_lost(una_after);
    }

    fn advance_lost(&mut self, to: u32) {
        if to <= self.lost.base() || self.lost_count == 0 {
            self.lost.advance_to(to);
            return;
        }
        let gone = self.lost.count_below(to);
        self.lost.advance_to(to);
        self.lost_count -= gone;
    }

    /// A recovery episode ended: the DSACK-grown window decays (§6.2 step 4).
    pub fn recovery_ended(&mut self) {
        if self.reo_wnd_persist > 0 {
            self.reo_wnd_persist -= 1;
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// RACK.reo_wnd (§6.2 step 4).
    pub fn reo_wnd(&self, in_recovery: bool, sacked_count: u32) -> Time {
        if let Some(w) = self.fixed_reo_wnd {
            return w;
        }
        if !self.reord && (in_recovery || sacked_count >= DUP_THRESH) {
            return 0;
        }
        let Some(min_rtt) = self.min_rtt else {
            return 0;
        };
        let w = self.reo_wnd_mult as Time * min_rtt / 4;
        self.srtt.map_or(w, |s| w.min(s))
    }

    /// RACK_detect_loss (§6.2 step 5) over `[snd_una, max_sent)`: marks the PSNs whose window
    /// expired and returns how many, and how long until the last pending one's does (0: none).
    pub fn detect(
        &mut self,
        now: Time,
        snd_una: u32,
        max_sent: u32,
        sacked: &PsnBitmap,
        reo_wnd: Time,
    ) -> (u32, Time) {
        let (mut found, mut wait) = (0, 0);
        let end = max_sent.min(snd_una + self.xmit.len() as u32);
        for p in snd_una..end {
            if sacked.get(p) || self.lost.get(p) {
                continue;
            }
            let ts = self.xmit[self.slot(p)];
            if !Self::sent_after(self.rack_xmit, self.rack_end, ts, p + 1) {
                continue;
            }
            let deadline = ts + self.rack_rtt + reo_wnd;
            if deadline <= now {
                self.mark_lost(p);
                found += 1;
            } else {
                wait = wait.max(deadline - now);
            }
        }
        (found, wait)
    }

    /// RACK_mark_losses_on_RTO (§6.3): the PSN at the cumulative point and every one whose
    /// window expired.
    pub fn on_timeout(
        &mut self,
        now: Time,
        snd_una: u32,
        max_sent: u32,
        sacked: &PsnBitmap,
        reo_wnd: Time,
    ) {
        let end = max_sent.min(snd_una + self.xmit.len() as u32);
        for p in snd_una..end {
            if sacked.get(p) {
                continue;
            }
            let ts = self.xmit[self.slot(p)];
            if p == snd_una || ts + self.rack_rtt + reo_wnd <= now {
                self.mark_lost(p);
            }
        }
    }

    /// Every unSACKed PSN from `from` is lost (the receiver said it kept nothing else).
    pub fn all_lost(&mut self, from: u32, snd_una: u32, max_sent: u32, sacked: &PsnBitmap) {
        let end = max_sent.min(snd_una + self.xmit.len() as u32);
        for p in from.max(snd_una)..end {
            if !sacked.get(p) {
                self.mark_lost(p);
            }
        }
    }

    /// Unmarks the lost PSNs below `to`.
    pub fn clear_lost_below(&mut self, to: u32) {
        for p in self.lost.base()..to {
            self.lost_clear(p);
        }
    }

    /// Arms the reordering timer `wait` from `now` (a new generation replaces the pending
    /// one); returns the (deadline, generation) to schedule, if any.
    pub fn arm(&mut self, now: Time, wait: Time) -> Option<(Time, u32)> {
        if wait == 0 {
            return None;
        }
        let at = now + wait;
        if self.timer_at == Some(at) {
            return None;
        }
        self.timer_gen = self.timer_gen.wrapping_add(1);
        self.timer_at = Some(at);
        Some((at, self.timer_gen))
    }

    /// Whether a fired reordering timer is the live one (it then is no longer pending).
    pub fn timer_fired(&mut self, gen: u32) -> bool {
        if gen != self.timer_gen || self.timer_at.is_none() {
            return false;
        }
        self.timer_at = None;
        true
    }
}
