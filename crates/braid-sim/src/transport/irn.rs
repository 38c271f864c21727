//! Selective repeat for RoCEv2 RC, after IRN ("Revisiting Network Support for RDMA", Mittal et
//! al., SIGCOMM '18): `transport.recovery = "irn"`. Go-back-N (`"go-back-n"`) stays the default
//! and lives in `rc.rs`; this file is everything the RC transport does differently under IRN.
//!
//! What IRN changes in the NIC (§3 of the paper), and what is modelled here:
//! - **Receiver**: a packet ahead of the expected PSN is accepted and placed (WRITE data at its
//!   address, SEND data at its offset in the RECV its MSN names; the NIC's out-of-order path,
//!   shared with MP-RDMA), and recorded in a bitmap; each such packet is answered with a NACK
//!   carrying the cumulative acknowledgement and its own PSN (the SACK). Messages still complete
//!   in order: a RECV completes once the cumulative point passes its message's tail.
//! - **Sender**: a NACK starts loss recovery. A PSN is lost when it is neither acknowledged nor
//!   SACKed and a later PSN has been SACKed; lost PSNs are retransmitted once each per recovery
//!   episode, before any new packet. Recovery ends when the cumulative acknowledgement passes the
//!   last PSN sent before it began (the recovery sequence). A timeout starts recovery with every
//!   unacknowledged, un-SACKed PSN lost. With `loss_detection = "rack"` the time-based rule of
//!   RFC 8985 (`irn_rack.rs`) decides what is lost instead, tolerating reordering.
//! - **Two timeouts**: RTO_low when fewer than N PSNs are in flight (a lost tail would otherwise
//!   wait for the long timeout), RTO_high otherwise.
//! - **BDP-FC**: at most one bandwidth-delay product of PSNs outstanding beyond the cumulative
//!   acknowledgement. It bounds the bitmaps (the receiver never sees a PSN further ahead) and
//!   keeps queues short without PFC.
//! - **READ responses** (the requester is their receiver): placed out of order into the READ's
//!   buffer like WRITE data (`nic/rx.rs`); a gap asks once for the missing run only, and the
//!   responder answers that run without restarting its other answers. A timeout still asks
//!   for everything from the first missing response on.
//!
//! Not modelled: IRN's per-packet header extensions (a NACK here is a BTH-sized control packet
//! like any other), and the NIC resource costs.

use super::irn_rack::Rack;
use super::{Feedback, Reply, RxClass, TimerKind, TxFx};
use braid_engine::time::{Time, S};
use braid_topo::units::{Bytes, Duration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How an RC QP recovers from loss (`transport.recovery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// RoCEv2 as specified: the receiver drops out-of-order packets and NAKs; the sender
    /// resends everything from the NAKed PSN.
    #[default]
    GoBackN,
    /// Selective repeat with SACK NACKs, two timeouts and BDP-FC (IRN, SIGCOMM '18).
    Irn,
}

impl Recovery {
    pub fn is_default(&self) -> bool {
        *self == Recovery::GoBackN
    }
}

/// How the selective-repeat sender decides a PSN is lost (`transport.irn.loss_detection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LossDetection {
    /// IRN's rule (§3.1 of the paper): a NACK reports a later PSN SACKed, so every PSN not
    /// acknowledged or SACKed below it is lost at once. Any reordering is taken as loss.
    #[default]
    Nack,
    /// Time-based, RACK (RFC 8985): lost once a PSN sent later was delivered and a reordering
    /// window (min_RTT / 4, grown by DSACKs) has passed (`irn_rack.rs`).
    Rack,
}

impl LossDetection {
    pub fn is_default(&self) -> bool {
        *self == LossDetection::Nack
    }
}

/// IRN's parameters (`[transport.irn]`). Defaults are the paper's (§4.1, its default
/// 40 Gbit/s three-tier fat tree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IrnConfig {
    /// The round trip BDP-FC covers: the cap is the link rate times this, in MTU packets. The
    /// paper's BDP is 120 KB at 40 Gbit/s, i.e. 24 us; set it to the fabric's longest
    /// unloaded RTT.
    pub bdp_rtt: Duration,
    /// The cap in bytes, replacing `bdp_rtt` × link rate when set.
    pub bdp: Option<Bytes>,
    /// Timeout while fewer than `low_threshold` PSNs are in flight (paper: 100 us).
    pub rto_low: Duration,
    /// Timeout otherwise (paper: 320 us).
    pub rto_high: Duration,
    /// N: the in-flight count below which `rto_low` applies (paper: 3).
    pub low_threshold: u32,
    /// `"nack"` (IRN's, the default) or `"rack"` (RFC 8985's time-based detection, which
    /// tolerates reordering: what a NIC behind packet-spraying switches needs).
    #[serde(skip_serializing_if = "LossDetection::is_default")]
    pub loss_detection: LossDetection,
    /// RACK only: a fixed reordering window in place of RFC 8985's adaptive one (min_RTT / 4,
    /// grown by DSACKs, at most SRTT). Not from the RFC: for a fabric whose path-delay spread
    /// is known (e.g. the deepest queue a sprayed path can hold, over its rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reo_wnd: Option<Duration>,
}

impl Default for IrnConfig {
    fn default() -> Self {
        IrnConfig {
            bdp_rtt: Duration(24_000_000),
            bdp: None,
            rto_low: Duration(100_000_000),
            rto_high: Duration(320_000_000),
            low_threshold: 3,
            loss_detection: LossDetection::Nack,
            reo_wnd: None,
        }
    }
}

impl IrnConfig {
    pub fn is_default(&self) -> bool {
        *self == IrnConfig::default()
    }

    /// The BDP-FC cap in PSNs (MTU packets) for a port of `line_rate` bit/s, at least 1.
    pub fn cap_packets(&self, line_rate: u64, mtu: u32) -> u32 {
        let bytes = match self.bdp {
            Some(b) => b.0 as u128,
            None => line_rate as u128 * self.bdp_rtt.0 as u128 / (8 * S as u128),
        };
        (bytes.div_ceil(mtu.max(1) as u128)).clamp(1, 1 << 20) as u32
    }

    /// What one QP on a port of `line_rate` bit/s runs with (the factory's input:
    /// [`SelectiveRepeat::new`]).
    pub fn params(&self, line_rate: u64, mtu: u32) -> IrnParams {
        IrnParams {
            cap: self.cap_packets(line_rate, mtu),
            rto_low: self.rto_low.0,
            rto_high: self.rto_high.0,
            low_threshold: self.low_threshold,
            rack: self.loss_detection == LossDetection::Rack,
            reo_wnd: self.reo_wnd.map(|d| d.0),
        }
    }
}

/// What one QP's selective repeat runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrnParams {
    /// BDP-FC: PSNs outstanding beyond the cumulative acknowledgement; also the bitmaps' span.
    pub cap: u32,
    pub rto_low: Time,
    pub rto_high: Time,
    pub low_threshold: u32,
    /// RACK's time-based loss detection instead of IRN's NACK rule.
    pub rack: bool,
    /// RACK's fixed reordering window, if set (else RFC 8985's adaptive one).
    pub reo_wnd: Option<Time>,
}

/// A window of PSN flags from `base` (inclusive) over `span` PSNs, on a ring of 64-bit words
/// indexed by PSN modulo the ring's size. PSNs are the QP's internal 32-bit numbering
/// (`psn.rs`); the ring wraps every `span` PSNs, independent of the 24-bit wire wrap.
#[derive(Debug, Clone)]
pub struct PsnBitmap {
    words: Vec<u64>,
    base: u32,
}

impl PsnBitmap {
    pub fn new(span: u32) -> Self {
        let n = span.div_ceil(64).max(1) as usize;
        PsnBitmap {
            words: vec![0; n],
            base: 0,
        }
    }
    /// How many PSNs from `base` it can hold.
    pub fn span(&self) -> u32 {
        self.words.len() as u32 * 64
    }
    pub fn base(&self) -> u32 {
        self.base
    }
    fn slot(&self, psn: u32) -> (usize, u64) {
        let i = psn % self.span();
        ((i / 64) as usize, 1u64 << (i % 64))
    }
    fn covers(&self, psn: u32) -> bool {
        psn >= self.base && psn - self.base < self.span()
    }
    /// Sets `psn`'s flag; false (and nothing set) when it lies outside the window.
    pub fn set(&mut self, psn: u32) -> bool {
        if !self.covers(psn) {
            return false;
        }
        let (w, b) = self.slot(psn);
        self.words[w] |= b;
        true
    }
    /// Clears `psn`'s flag; whether it was set (inside the window).
    pub fn unset(&mut self, psn: u32) -> bool {
        if !self.covers(psn) {
            return false;
        }
        let (w, b) = self.slot(psn);
        let was = self.words[w] & b != 0;
        self.words[w] &= !b;
        was
    }
    /// Whether `psn` is flagged: below the window counts as flagged (it is behind the base).
    pub fn get(&self, psn: u32) -> bool {
        if psn < self.base {
            return true;
        }
        if !self.covers(psn) {
            return false;
        }
        let (w, b) = self.slot(psn);
        self.words[w] & b != 0
    }
    /// Moves the base forward to `to`, clearing the flags it passes.
    pub fn advance_to(&mut self, to: u32) {
        if to <= self.base {
            return;
        }
        if to - self.base >= self.span() {
            self.words.iter_mut().for_each(|w| *w = 0);
        } else {
            for p in self.base..to {
                let (w, b) = self.slot(p);
                self.words[w] &= !b;
            }
        }
        self.base = to;
    }
    /// Clears every flag (the base stays).
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }
    /// Moves the base over the run of flagged PSNs at it; returns the new base.
    pub fn advance_run(&mut self) -> u32 {
        loop {
            let (w, b) = self.slot(self.base);
            if self.words[w] & b == 0 {
                return self.base;
            }
            self.words[w] &= !b;
            self.base += 1;
        }
    }
    /// Flagged PSNs in [base, end).
    pub fn count_below(&self, end: u32) -> u32 {
        let end = end.min(self.base.saturating_add(self.span()));
        (self.base..end).filter(|&p| self.get(p)).count() as u32
    }
}

/// Counters of one QP's selective repeat (the `transport` table's columns).
#[derive(Debug, Clone, Copy, Default)]
pub struct IrnStats {
    /// NACKs (SACK-carrying) received by the sender.
    pub nacks: u64,
    /// Recovery episodes started (by a NACK or a timeout).
    pub recoveries: u64,
    /// PSNs retransmitted.
    pub retransmitted: u64,
    /// Looks of the NIC's scheduler at a ready new packet that the BDP cap held back.
    pub capped: u64,
    /// Out-of-order packets the receiver accepted into its bitmap.
    pub ooo_accepted: u64,
}

/// One RC QP's IRN state: the sender's SACK scoreboard and recovery, the receiver's bitmap.
/// The cumulative points (`snd_una`, `max_sent`, `epsn`) stay the RC transport's and are passed
/// in.
#[derive(Debug, Clone)]
pub struct SelectiveRepeat {
    p: IrnParams,
    // ---- sender ----
    /// PSNs SACKed beyond the cumulative acknowledgement (base = snd_una).
    sacked: PsnBitmap,
    /// PSNs retransmitted since the last timeout (base = snd_una): a later recovery episode
    /// does not send them again while their retransmission may still be on its way (as TCP's
    /// SACK recovery, RFC 6675, retransmits a segment once until a timeout).
    resent: PsnBitmap,
    /// One past the highest PSN SACKed.
    high_sack: u32,
    in_recovery: bool,
    /// `max_sent` when recovery began: it ends once everything below is acknowledged.
    recovery_seq: u32,
    /// The next PSN recovery considers for retransmission (each goes out once per episode).
    retx_next: u32,
    /// PSNs below this (not SACKed, at or past `retx_next`) are lost: the highest SACK after a
    /// NACK, everything sent after a timeout.
    lost_limit: u32,
    /// A READ whose response went missing, to ask for again from this PSN (before anything).
    reread: Option<u32>,
    /// RACK's time-based loss detection (`loss_detection = "rack"`); None: IRN's NACK rule.
    rack: Option<Box<Rack>>,
    /// Generation of the pending retransmission timer (older ones are void) and when it fires.
    rto_gen: u32,
    rto_at: Option<Time>,
    // ---- receiver ----
    /// PSNs received beyond the expected one (base = epsn).
    received: PsnBitmap,
    pub stats: IrnStats,
}

/// What recovery wants sent next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Psn(u32),
    /// Nothing: no loss to repair and no new packet (none ready, or the BDP cap holds it).
    Nothing,
}

impl SelectiveRepeat {
    pub fn new(p: IrnParams) -> Self {
        SelectiveRepeat {
            p,
            sacked: PsnBitmap::new(p.cap),
            resent: PsnBitmap::new(p.cap),
            high_sack: 0,
            in_recovery: false,
            recovery_seq: 0,
            retx_next: 0,
            lost_limit: 0,
            reread: None,
            rack: p.rack.then(|| Box::new(Rack::new(p.cap, p.reo_wnd))),
            rto_gen: 0,
            rto_at: None,
            received: PsnBitmap::new(p.cap),
            stats: IrnStats::default(),
        }
    }

    pub fn params(&self) -> &IrnParams {
        &self.p
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    // ---------------- sender ----------------

    /// The PSN to send next: a READ re-request, then the lost PSNs in order, then new data
    /// within the BDP cap.
    pub fn next(&mut self, snd_una: u32, next_new: u32, have_new: bool) -> Next {
        if let Some(r) = self.reread {
            // Possibly below `snd_una`: a READ's PSNs are acknowledged by whatever the responder
            // answers after executing it, its responses may still be missing.
            if r < next_new {
                return Next::Psn(r);
            }
            self.reread = None;
        }
        if let Some(r) = self.rack.as_deref() {
            if let Some(p) = r.first_lost(snd_una, next_new) {
                return Next::Psn(p);
            }
        } else if self.in_recovery {
            self.retx_next = self.retx_next.max(snd_una);
            while self.retx_next < self.lost_limit.min(next_new) {
                if !self.sacked.get(self.retx_next) && !self.resent.get(self.retx_next) {
                    return Next::Psn(self.retx_next);
                }
                self.retx_next += 1;
            }
        }
        if !have_new {
            return Next::Nothing;
        }
        if next_new.saturating_sub(snd_una) >= self.p.cap {
            self.stats.capped += 1;
            return Next::Nothing;
        }
        Next::Psn(next_new)
    }

    /// A packet covering `npsn` PSNs from `psn` left at `now`; `max_sent` is the end of what
    /// was sent before it.
    pub fn on_sent(&mut self, now: Time, psn: u32, npsn: u32, snd_una: u32, max_sent: u32) {
        if let Some(r) = self.rack.as_deref_mut() {
            r.on_sent(now, psn, npsn, snd_una, psn < max_sent);
            if psn < max_sent {
                self.stats.retransmitted += 1;
                if self.reread == Some(psn) {
                    self.reread = None;
                }
            }
            return;
        }
        if psn < max_sent {
            self.stats.retransmitted += 1;
            if self.reread == Some(psn) {
                self.reread = None;
            }
            if self.in_recovery && psn >= self.retx_next {
                self.retx_next = psn + npsn;
            }
            for p in psn..psn + npsn.min(self.resent.span()) {
                self.resent.set(p);
            }
        }
    }

    /// The cumulative acknowledgement moved to `snd_una` (already applied by the caller).
    fn acked_to(&mut self, snd_una: u32) {
        self.sacked.advance_to(snd_una);
        self.resent.advance_to(snd_una);
        if self.in_recovery && snd_una >= self.recovery_seq {
            self.in_recovery = false;
            if let Some(r) = self.rack.as_deref_mut() {
                r.recovery_ended();
            }
        }
    }

    fn sack(&mut self, psn: u32) {
        if self.sacked.set(psn) {
            self.high_sack = self.high_sack.max(psn + 1);
        }
    }

    fn enter_recovery(&mut self, snd_una: u32, max_sent: u32, lost_limit: u32) {
        if !self.in_recovery {
            self.in_recovery = true;
            self.stats.recoveries += 1;
            self.recovery_seq = max_sent;
            self.retx_next = snd_una;
            self.lost_limit = lost_limit;
        } else {
            self.lost_limit = self.lost_limit.max(lost_limit);
        }
    }

    /// Feedback at `now` after the caller moved its cumulative point to `snd_una`. Returns
    /// whether the sender may have something to (re)send now.
    pub fn on_feedback(
        &mut self,
        now: Time,
        fb: Feedback,
        snd_una: u32,
        max_sent: u32,
        fx: &mut TxFx,
    ) -> bool {
        if self.rack.is_some() {
            return self.rack_feedback(now, fb, snd_una, max_sent, fx);
        }
        self.acked_to(snd_una);
        match fb {
            Feedback::Ack { sack, .. } => {
                if let Some(s) = sack.filter(|&s| s >= snd_una) {
                    self.sack(s);
                }
                false
            }
            Feedback::SackNak { sack, .. } => {
                // The receiver holds `sack` out of order: what it lacks below it is lost.
                self.stats.nacks += 1;
                if sack >= snd_una {
                    self.sack(sack);
                }
                if self.high_sack > snd_una {
                    self.enter_recovery(snd_una, max_sent, self.high_sack);
                }
                true
            }
            Feedback::Nak { .. } | Feedback::SyncNak { .. } => {
                // A packet was dropped unplaced (beyond the bitmap, or a READ request that
                // came early): nothing after the expected PSN can be trusted to have arrived
                // unless SACKed.
                self.stats.nacks += 1;
                self.restart_recovery(snd_una, max_sent);
                true
            }
            Feedback::RnrNak { .. } => {
                // The SEND at `snd_una` found no RECV: resend it and whatever the receiver did
                // not SACK after it (later SENDs most likely met the same empty queue).
                self.restart_recovery(snd_una, max_sent);
                true
            }
            Feedback::Cnp => false,
        }
    }

    /// Feedback under RACK: record what was delivered (RFC 8985 §6.2 steps 1–4), then call
    /// lost what was sent before the latest delivered PSN by more than the reordering window
    /// (step 5), arming the reordering timer for the rest (step 6).
    fn rack_feedback(
        &mut self,
        now: Time,
        fb: Feedback,
        snd_una: u32,
        max_sent: u32,
        fx: &mut TxFx,
    ) -> bool {
        let una_before = self.sacked.base();
        let (sack, dsack) = match fb {
            Feedback::Ack { sack, retx, .. } => {
                // The receiver answers a duplicate with an ACK echoing its ReTx bit and naming
                // it: a resent PSN the sender already knew delivered is a DSACK.
                let dup = sack.is_some_and(|s| s < una_before || self.sacked.get(s));
                (sack, retx && dup)
            }
            Feedback::SackNak { sack, .. } => (Some(sack), false),
            _ => (None, false),
        };
        let r = self.rack.as_deref_mut().expect("rack");
        r.on_feedback(
            now,
            una_before,
            snd_una,
            sack,
            &self.sacked,
            dsack,
            max_sent,
        );
        self.acked_to(snd_una);
        let mut kick = false;
        if matches!(
            fb,
            Feedback::SackNak { .. } | Feedback::Nak { .. } | Feedback::SyncNak { .. }
        ) {
            self.stats.nacks += 1;
        }
        match fb {
            Feedback::Ack { sack: Some(s), .. } | Feedback::SackNak { sack: s, .. }
                if s >= snd_una =>
            {
                self.sack(s);
            }
            Feedback::Nak { .. } | Feedback::SyncNak { .. } | Feedback::RnrNak { .. } => {
                // The receiver kept nothing it did not SACK (see `on_feedback`).
                self.restart_recovery(snd_una, max_sent);
                kick = true;
            }
            _ => {}
        }
        self.rack_detect(now, snd_una, max_sent, fx) || kick
    }

    /// RACK's loss detection now; arms the reordering timer for PSNs still within the window.
    fn rack_detect(&mut self, now: Time, snd_una: u32, max_sent: u32, fx: &mut TxFx) -> bool {
        let sacked_count = self.sacked.count_below(max_sent);
        let r = self.rack.as_deref_mut().expect("rack");
        let reo = r.reo_wnd(self.in_recovery, sacked_count);
        let (found, wait) = r.detect(now, snd_una, max_sent, &self.sacked, reo);
        if let Some((at, gen)) = r.arm(now, wait) {
            fx.timers.push((at, TimerKind::Early, gen));
        }
        if found > 0 {
            self.enter_recovery(snd_una, max_sent, max_sent);
        }
        found > 0
    }

    /// The reordering timer fired: detect again. Returns whether something is now lost.
    pub fn on_reorder_timer(
        &mut self,
        now: Time,
        gen: u32,
        snd_una: u32,
        max_sent: u32,
        fx: &mut TxFx,
    ) -> bool {
        let live = self.rack.as_deref_mut().is_some_and(|r| r.timer_fired(gen));
        live && self.rack_detect(now, snd_una, max_sent, fx)
    }

    /// A new recovery episode in which everything sent and not SACKed is lost (retransmitted
    /// or not: the receiver dropped or refused what it did not SACK).
    fn restart_recovery(&mut self, snd_una: u32, max_sent: u32) {
        self.resent.clear();
        self.in_recovery = false;
        self.enter_recovery(snd_una, max_sent, max_sent);
        if let Some(r) = self.rack.as_deref_mut() {
            r.all_lost(snd_una, snd_una, max_sent, &self.sacked);
        }
    }

    /// The retransmission timer expired with no progress at `now`: under IRN's rule every
    /// PSN not SACKed goes again (retransmissions may have been lost too); under RACK the one
    /// at the cumulative point and those whose reordering window expired (RFC 8985 §6.3).
    pub fn on_timeout(&mut self, now: Time, snd_una: u32, max_sent: u32) {
        let Some(r) = self.rack.as_deref_mut() else {
            return self.restart_recovery(snd_una, max_sent);
        };
        self.resent.clear();
        self.in_recovery = false;
        let sacked_count = self.sacked.count_below(max_sent);
        // In RTO recovery: the window is 0 until reordering has been seen.
        let reo = r.reo_wnd(true, sacked_count);
        r.on_timeout(now, snd_una, max_sent, &self.sacked, reo);
        self.enter_recovery(snd_una, max_sent, max_sent);
    }

    /// A READ response is missing: ask again from `psn`. The responder's answer to the
    /// re-request replaces every answer it had in progress from that PSN on, so every later READ
    /// request must go again too (what go-back-N's rewind does): a recovery episode from `psn`
    /// in which everything unSACKed is lost (READ requests are never SACKed).
    pub fn reread_from(&mut self, psn: u32, snd_una: u32, max_sent: u32) {
        self.reread = Some(psn);
        self.restart_recovery(snd_una, max_sent);
        self.retx_next = psn.max(snd_una);
        if let Some(r) = self.rack.as_deref_mut() {
            // Lost from the re-requested PSN on, as under IRN's rule (not what precedes it).
            r.clear_lost_below(psn.max(snd_una));
        }
    }

    /// A READ response is missing while later ones were placed out of order: ask again for the
    /// missing run alone (the requester names it), outside any recovery episode.
    pub fn reread(&mut self, psn: u32) {
        self.reread = Some(psn);
    }

    /// PSNs in flight: sent, not acknowledged and not SACKed.
    pub fn in_flight(&self, snd_una: u32, max_sent: u32) -> u32 {
        max_sent.saturating_sub(snd_una) - self.sacked.count_below(max_sent)
    }

    /// The timeout for the current flight: RTO_low below N PSNs in flight, else RTO_high.
    pub fn rto(&self, snd_una: u32, max_sent: u32) -> Time {
        if self.in_flight(snd_una, max_sent) < self.p.low_threshold {
            self.p.rto_low
        } else {
            self.p.rto_high
        }
    }

    /// Keeps one live retransmission timer at `last_progress` + the current timeout while
    /// anything is outstanding: armed when none is, pulled earlier when the flight shrank
    /// below N.
    pub fn arm(&mut self, last_progress: Time, snd_una: u32, max_sent: u32, fx: &mut TxFx) {
        if snd_una >= max_sent {
            return;
        }
        let at = last_progress + self.rto(snd_una, max_sent);
        if self.rto_at.is_some_and(|t| t <= at) {
            return;
        }
        self.rto_gen = self.rto_gen.wrapping_add(1);
        self.rto_at = Some(at);
        fx.timers.push((at, TimerKind::Rto, self.rto_gen));
    }

    /// Whether a fired timer is the live one (it then is no longer pending).
    pub fn timer_fired(&mut self, gen: u32) -> bool {
        if gen != self.rto_gen || self.rto_at.is_none() {
            return false;
        }
        self.rto_at = None;
        true
    }

    // ---------------- receiver ----------------

    /// Classifies a data packet (not a READ response) at a receiver expecting `epsn`; replies
    /// are appended. An accepted packet is recorded by [`SelectiveRepeat::on_accepted`].
    pub fn on_data(
        &mut self,
        psn: u32,
        epsn: u32,
        sport: u16,
        ce: bool,
        retx: bool,
        out: &mut Vec<Reply>,
    ) -> RxClass {
        self.received.advance_to(epsn);
        if psn < epsn || self.received.get(psn) {
            // Already here: tell the sender again where the receiver stands.
            out.push(Reply::Ack {
                cum: epsn,
                sack: Some(psn),
                echo_sport: sport,
                ece: ce,
                retx,
            });
            return RxClass::Duplicate;
        }
        if psn > epsn && psn - epsn >= self.received.span() {
            // Beyond the bitmap (the sender broke its BDP cap, or a READ moved far ahead).
            out.push(Reply::Nak { expected: epsn });
            return RxClass::Drop;
        }
        RxClass::Accept
    }

    /// The NIC placed `psn`. Returns the new expected PSN and whether the packet came out of
    /// order (then a NACK carrying it has been appended).
    pub fn on_accepted(&mut self, psn: u32, epsn: u32, out: &mut Vec<Reply>) -> (u32, bool) {
        self.received.advance_to(epsn);
        if psn == epsn {
            self.received.advance_to(epsn + 1);
            return (self.received.advance_run(), false);
        }
        self.received.set(psn);
        self.stats.ooo_accepted += 1;
        out.push(Reply::SackNak {
            expected: epsn,
            sack: psn,
        });
        (epsn, true)
    }

    /// The receiver's expected PSN jumped to `epsn` (a READ request executed): carry on over
    /// what already arrived beyond it.
    pub fn advance(&mut self, epsn: u32) -> u32 {
        self.received.advance_to(epsn);
        self.received.advance_run()
    }

    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        let mut c = vec![
            ("irn_nacks", s.nacks),
            ("irn_recoveries", s.recoveries),
            ("irn_retransmitted", s.retransmitted),
            ("irn_capped", s.capped),
            ("irn_ooo_accepted", s.ooo_accepted),
        ];
        if let Some(r) = self.rack.as_deref() {
            // (Only under RACK, so that IRN's tables keep their columns.)
            c.push(("irn_dsacks", r.dsacks));
            c.push(("irn_reo_wnd_ps", r.reo_wnd(false, 0)));
        }
        c
    }
}

#[cfg(test)]
#[path = "irn_tests.rs"]
mod tests;
