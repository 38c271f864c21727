//! RoCEv2 reliable connection: PSNs, cumulative ACK (per packet or coalesced), NAK on a
//! sequence error, go-back-N on NAK and on retransmission timeout, receiver-not-ready retries,
//! and DCQCN rate control (reaction point here, notification point on the receive side).
//! Unreliable connections (UC) use the same state for rate control only.
//! With `transport.recovery = "irn"` loss recovery is selective repeat instead (`irn.rs`, glued
//! in by `rc_irn.rs`).

use super::irn::{IrnParams, SelectiveRepeat};
use super::{
    DataInfo, Feedback, Plan, Reply, RetryBudget, RetryLimits, RxClass, TimerKind, Transport, TxFx,
};
use crate::config::{DcqcnConfig, DcqcnNotify};
use crate::dcqcn::{Arm, CcTimer, ReactionPoint};
use crate::packet::ROCE_HEADER;
use braid_engine::time::{serialization, Time, S};

/// Settings an RC transport takes from the scenario.
#[derive(Debug, Clone)]
pub struct RcConfig {
    pub reliable: bool,
    pub sport: u16,
    pub line_rate: u64,
    pub mtu: u32,
    pub rto: Time,
    pub rnr_delay: Time,
    pub ack_every: u32,
    /// DCQCN parameters, or None for line rate without congestion control.
    pub dcqcn: Option<DcqcnConfig>,
    /// The QP's `retry_cnt` and `rnr_retry` (reliable connections give up past them).
    pub retry: RetryLimits,
    /// How many executed READs the responder remembers to serve again: its READ resources,
    /// the QP's `max_dest_rd_atomic` (16 by default, ConnectX's `max_qp_rd_atom`). Its
    /// requester keeps no more than its own `max_rd_atomic` outstanding, so with equal
    /// values every READ still awaiting its response is remembered.
    pub read_resources: usize,
    /// Selective repeat (IRN) instead of go-back-N, with its parameters.
    pub irn: Option<IrnParams>,
}

#[derive(Debug)]
pub struct RcTransport {
    cfg: RcConfig,
    // sender
    snd_una: u32,
    snd_nxt: u32,
    max_sent: u32,
    next_tx_ps: Time,
    rnr_until: Time,
    last_progress: Time,
    rto_pending: bool,
    cc: Option<Box<dyn ReactionPoint>>,
    /// The last pacing step (`pace`) and the wire size and rate (bits of the f64) it was
    /// computed for: the rate changes at timers and cuts, the size at a message's last packet,
    /// so most packets reuse it instead of an f64 and a u128 division.
    pace_wire: u32,
    pace_rate: u64,
    pace_step: Time,
    /// Generation of each reaction-point timer kind (`CcTimer as usize`): older ones are void.
    cc_gen: [u32; 3],
    timeouts: u64,
    budget: RetryBudget,
    // receiver
    epsn: u32,
    nak_sent: bool,
    unacked: u32,
    last_cnp: Option<Time>,
    // Cold, at the end: touched only by READ requests.
    /// The READs this responder executed most recently, (first PSN, PSNs), a ring of
    /// `read_resources`: a duplicate READ is served again only when it falls inside one of
    /// them (a re-request after a lost response); any other duplicate is dropped silently, as
    /// rxe does (`duplicate_request`: no matching responder resource, a class D error, drop).
    /// Without this, a READ at an old PSN from whoever can reach the QP was executed anew, and
    /// one failing the access check put the QP in Error (docs/perf.md, the QP hijacker).
    /// Allocated at the first READ served (most QPs never serve one).
    read_res: Vec<(u32, u32)>,
    read_res_next: usize,
    /// Selective repeat (`transport.recovery = "irn"`); None for go-back-N.
    sr: Option<Box<SelectiveRepeat>>,
}

#[path = "rc_irn.rs"]
mod irn_glue;

impl RcTransport {
    pub fn new(cfg: RcConfig) -> Self {
        let cc = cfg.dcqcn.as_ref().map(|d| d.reaction_point(cfg.line_rate));
        let budget = RetryBudget::new(cfg.retry);
        let sr = cfg.irn.map(|p| Box::new(SelectiveRepeat::new(p)));
        RcTransport {
            cfg,
            snd_una: 0,
            snd_nxt: 0,
            max_sent: 0,
            next_tx_ps: 0,
            rnr_until: 0,
            last_progress: 0,
            rto_pending: false,
            cc,
            pace_wire: 0,
            pace_rate: u64::MAX,
            pace_step: 0,
            cc_gen: [0; 3],
            timeouts: 0,
            budget,
            epsn: 0,
            read_res: Vec::new(),
            read_res_next: 0,
            nak_sent: false,
            unacked: 0,
            last_cnp: None,
            sr,
        }
    }

    /// Paces the next packet: it may leave once this one would have at the current rate.
    fn pace(&mut self, now: Time, wire: u32) {
        if let (Some(cc), Some(d)) = (&mut self.cc, &self.cfg.dcqcn) {
            let rate = cc.rate();
            if wire != self.pace_wire || rate.to_bits() != self.pace_rate {
                let gap = (wire as f64 * 8.0 * S as f64 / rate) as Time;
                let line = serialization(wire as u64, self.cfg.line_rate);
                self.pace_wire = wire;
                self.pace_rate = rate.to_bits();
                self.pace_step = gap.max(line);
            }
            self.next_tx_ps = now + self.pace_step;
            cc.on_sent(wire as u64, d);
        }
    }

    /// Runs the timers a reaction point asked for.
    fn arm(&mut self, arms: &[Arm], fx: &mut TxFx) {
        for a in arms {
            let i = a.timer as usize;
            if a.restart {
                self.cc_gen[i] += 1;
            }
            let kind = match a.timer {
                CcTimer::Alpha => TimerKind::Alpha,
                CcTimer::RateInc => TimerKind::RateInc,
                CcTimer::RateDec => TimerKind::RateDec,
            };
            fx.timers.push((a.at, kind, self.cc_gen[i]));
        }
    }

    fn notified(&mut self, now: Time, fx: &mut TxFx) {
        let (Some(cc), Some(d)) = (&mut self.cc, &self.cfg.dcqcn) else {
            return;
        };
        let mut arms = Vec::new();
        cc.on_cnp(now, d, &mut arms);
        // A slower rate never needs an earlier send, so no kick.
        self.arm(&arms, fx);
    }

    fn ack_point(&mut self, now: Time, cum: u32) {
        if cum > self.snd_una {
            self.snd_una = cum;
            self.last_progress = now;
            self.budget.progress();
        }
        self.snd_nxt = self.snd_nxt.max(self.snd_una);
    }
}

impl Transport for RcTransport {
    fn set_sport(&mut self, sport: u16) {
        self.cfg.sport = sport;
    }

    fn plan(&mut self, now: Time, next_new: u32, have_new: bool) -> Plan {
        let psn = if let Some(sr) = self.sr.as_deref_mut() {
            match sr.next(self.snd_una, next_new, have_new) {
                super::irn::Next::Psn(p) => p,
                super::irn::Next::Nothing => return Plan::Blocked,
            }
        } else if self.snd_nxt < next_new {
            // Going back: resend what follows the receiver's expectation.
            self.snd_nxt
        } else if have_new {
            next_new
        } else {
            return Plan::Blocked;
        };
        let gate = self.next_tx_ps.max(self.rnr_until);
        if gate > now {
            Plan::Wait(gate)
        } else {
            Plan::Send {
                psn,
                sport: self.cfg.sport,
            }
        }
    }

    fn response_gate(&self) -> Time {
        self.next_tx_ps
    }

    fn on_sent(
        &mut self,
        now: Time,
        psn: u32,
        npsn: u32,
        wire: u32,
        reliable: bool,
        fx: &mut TxFx,
    ) {
        if self.sr.is_some() {
            return self.sr_sent(now, psn, npsn, wire, reliable, fx);
        }
        self.snd_nxt = psn + npsn;
        self.max_sent = self.max_sent.max(psn + npsn);
        self.pace(now, wire);
        if reliable && self.cfg.reliable && !self.rto_pending {
            self.rto_pending = true;
            self.last_progress = now;
            fx.timers.push((now + self.cfg.rto, TimerKind::Rto, 0));
        }
    }

    fn on_response_sent(&mut self, now: Time, wire: u32) {
        self.pace(now, wire);
    }

    fn on_feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        if self.sr.is_some() {
            return self.sr_feedback(now, fb, fx);
        }
        match fb {
            Feedback::Ack { cum, ece, .. } => {
                self.ack_point(now, cum);
                if ece
                    && self
                        .cfg
                        .dcqcn
                        .as_ref()
                        .is_some_and(|d| d.notify == DcqcnNotify::Ack)
                {
                    self.notified(now, fx);
                }
            }
            Feedback::Nak { expected, .. }
            | Feedback::SyncNak { expected, .. }
            | Feedback::SackNak { expected, .. }
            | Feedback::RnrNak { psn: expected } => {
                // Everything below the expected PSN arrived; go back to it.
                self.ack_point(now, expected);
                self.last_progress = now;
                self.snd_nxt = expected;
                if matches!(fb, Feedback::RnrNak { .. }) {
                    if let Err(f) = self.budget.rnr() {
                        fx.fatal = Some(f);
                        return;
                    }
                    self.rnr_until = now + self.cfg.rnr_delay;
                }
                fx.kick = true;
            }
            Feedback::Cnp => self.notified(now, fx),
        }
    }

    fn on_timer(
        &mut self,
        now: Time,
        kind: TimerKind,
        gen: u32,
        first_missing: u32,
        fx: &mut TxFx,
    ) {
        match kind {
            TimerKind::Alpha | TimerKind::RateInc | TimerKind::RateDec => {
                let t = match kind {
                    TimerKind::Alpha => CcTimer::Alpha,
                    TimerKind::RateInc => CcTimer::RateInc,
                    _ => CcTimer::RateDec,
                };
                if gen != self.cc_gen[t as usize] {
                    return;
                }
                let (Some(cc), Some(d)) = (&mut self.cc, &self.cfg.dcqcn) else {
                    return;
                };
                let mut arms = Vec::new();
                let faster = cc.on_timer(now, t, d, &mut arms);
                if faster {
                    // A faster rate may allow the next packet earlier than planned.
                    let min_next = now
                        + (8.0 * (self.cfg.mtu + ROCE_HEADER) as f64 * S as f64 / cc.rate())
                            as Time;
                    if self.next_tx_ps > min_next {
                        self.next_tx_ps = min_next;
                    }
                }
                self.arm(&arms, fx);
                if faster {
                    fx.kick = true;
                }
            }
            TimerKind::Rto if self.sr.is_some() => self.sr_timeout(now, gen, first_missing, fx),
            TimerKind::Rto => {
                if self.snd_una >= self.max_sent && first_missing >= self.max_sent {
                    self.rto_pending = false;
                    return;
                }
                let deadline = self.last_progress + self.cfg.rto;
                if now < deadline {
                    fx.timers.push((deadline, TimerKind::Rto, 0));
                    return;
                }
                self.timeouts += 1;
                if let Err(f) = self.budget.timeout() {
                    // retry_cnt retransmissions went unanswered: give up.
                    self.rto_pending = false;
                    fx.fatal = Some(f);
                    return;
                }
                self.last_progress = now;
                fx.timers.push((now + self.cfg.rto, TimerKind::Rto, 0));
                self.snd_nxt = first_missing;
                fx.kick = true;
            }
            TimerKind::Burst | TimerKind::Hole | TimerKind::Early => {}
        }
    }

    fn acked(&self) -> u32 {
        self.snd_una
    }

    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx) {
        if let Some(sr) = self.sr.as_deref_mut() {
            sr.reread_from(psn, self.snd_una, self.max_sent);
        }
        self.last_progress = now;
        self.snd_nxt = psn;
        fx.kick = true;
    }

    fn on_data(&mut self, now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        // Notification point: answer a marked packet with a CNP, at most one per interval (with
        // `notify = "ack"` the ACK's ECE bit is the notification).
        if d.ce {
            if let Some(dc) = self
                .cfg
                .dcqcn
                .as_ref()
                .filter(|d| d.notify == DcqcnNotify::Cnp)
            {
                if self.last_cnp.is_none_or(|t| now >= t + dc.cnp_interval.0) {
                    self.last_cnp = Some(now);
                    out.push(Reply::Cnp);
                }
            }
        }
        if !self.cfg.reliable || d.read_response {
            // UC sequencing and READ responses are the NIC's (they carry message state).
            return RxClass::Accept;
        }
        if let Some(sr) = self.sr.as_deref_mut() {
            return sr.on_data(d.psn, self.epsn, d.sport, d.ce, d.retx, out);
        }
        if d.psn < self.epsn {
            // Duplicate: re-acknowledge so the sender can move on.
            out.push(Reply::Ack {
                cum: self.epsn,
                sack: Some(d.psn),
                echo_sport: d.sport,
                ece: d.ce,
                retx: d.retx,
            });
            return RxClass::Duplicate;
        }
        if d.psn > self.epsn {
            if !self.nak_sent {
                self.nak_sent = true;
                out.push(Reply::Nak {
                    expected: self.epsn,
                });
            }
            return RxClass::Drop;
        }
        RxClass::Accept
    }

    fn on_accepted(&mut self, _now: Time, d: DataInfo, out: &mut Vec<Reply>) {
        if !self.cfg.reliable || d.read_response {
            return;
        }
        if self.sr.is_some() {
            return self.sr_accepted(d, out);
        }
        self.epsn = d.psn + 1;
        self.nak_sent = false;
        self.unacked += 1;
        if d.last || self.unacked >= self.cfg.ack_every {
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

    fn on_read_request(
        &mut self,
        _now: Time,
        psn: u32,
        npsn: u32,
        out: &mut Vec<Reply>,
    ) -> RxClass {
        if psn > self.epsn {
            if !self.nak_sent {
                self.nak_sent = true;
                out.push(Reply::Nak {
                    expected: self.epsn,
                });
            }
            return RxClass::Drop;
        }
        if psn == self.epsn {
            let cap = self.cfg.read_resources.max(1);
            if self.read_res.len() < cap {
                self.read_res.push((psn, npsn));
            } else {
                self.read_res[self.read_res_next] = (psn, npsn);
                self.read_res_next = (self.read_res_next + 1) % cap;
            }
            self.epsn += npsn;
            if let Some(sr) = self.sr.as_deref_mut() {
                // Packets after the READ may have arrived before it.
                self.epsn = sr.advance(self.epsn);
            }
            self.nak_sent = false;
            return RxClass::Accept;
        }
        let executed = self
            .read_res
            .iter()
            .any(|&(first, n)| psn >= first && psn < first + n);
        if executed {
            RxClass::Accept
        } else {
            RxClass::Drop
        }
    }

    fn expected(&self) -> u32 {
        self.epsn
    }

    fn rate_bps(&self) -> Option<f64> {
        self.cc.as_ref().map(|c| c.rate())
    }

    fn out_of_order(&self) -> bool {
        self.sr.is_some()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        self.sr.as_ref().map_or_else(Vec::new, |sr| {
            sr.counters().iter().map(|&(k, v)| (k, v as f64)).collect()
        })
    }

    fn timeouts(&self) -> u64 {
        self.timeouts
    }

    fn cc_state(&self, now: Time) -> Option<super::CcState> {
        let (cc, d) = (self.cc.as_ref()?, self.cfg.dcqcn.as_ref()?);
        let st = cc.state(now, d);
        Some(super::CcState {
            rate_bps: Some(st.rate),
            target_bps: Some(st.target),
            alpha: Some(st.alpha),
            inflight: Some(self.max_sent.saturating_sub(self.snd_una) as f64),
            signals: Some(st.notifications),
            cuts: Some(st.cuts),
            ..Default::default()
        })
    }

    fn kind(&self) -> &'static str {
        if self.cc.is_some() {
            "dcqcn"
        } else {
            "none"
        }
    }
}
