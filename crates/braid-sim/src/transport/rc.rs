//! RoCEv2 reliable connection: PSNs, cumulative ACK (per packet or coalesced), NAK on a
//! sequence error, go-back-N on NAK and on retransmission timeout, receiver-not-ready retries,
//! and congestion control: the sender's controller (`crate::cc`, DCQCN by default) is driven
//! from here, the notification point (CNPs) is on the receive side.
//! Unreliable connections (UC) use the same state for rate control only.
//! With `transport.recovery = "irn"` loss recovery is selective repeat instead (`irn.rs`, glued
//! in by `rc_irn.rs`).

use super::irn::{IrnParams, SelectiveRepeat};
use super::rto::{RtoFired, RtoTimer};
use super::{
    DataInfo, Feedback, Plan, Reply, RetryBudget, RetryLimits, RxClass, TimerKind, Transport, TxFx,
};
use crate::cc::{AckSignal, Arm, CcTimer, CongestionConfig, CongestionControl};
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
    /// The congestion controller (`transport.cc`, DCQCN by default), or None for line rate
    /// without congestion control.
    pub cc: Option<CongestionConfig>,
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
    rto: RtoTimer,
    cc: Option<Box<dyn CongestionControl>>,
    /// The controller limits bytes in flight ([`CongestionControl::window`]).
    windowed: bool,
    /// (PSN past the packet, first send time) of packets in flight, oldest first, kept only
    /// when the controller wants RTT samples; cleared on going back (Karn's rule).
    sent_at: std::collections::VecDeque<(u32, Time)>,
    wants_rtt: bool,
    /// The controller reads ACKs ([`CongestionControl::reads_acks`]).
    reads_acks: bool,
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
    /// Notification point: at most one CNP per this interval (None: the controller reads ECN
    /// from ACKs, or there is none).
    cnp_interval: Option<Time>,
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
        let cc = cfg.cc.as_ref().map(|c| c.kind().build(cfg.line_rate));
        let cnp_interval = cfg.cc.as_ref().and_then(|c| c.kind().cnp_interval());
        // UC has no ACKs to open a window again: only the rate applies there.
        let windowed = cfg.reliable && cc.as_ref().is_some_and(|c| c.window().is_some());
        let wants_rtt = cc.as_ref().is_some_and(|c| c.wants_rtt());
        let reads_acks = cc.as_ref().is_some_and(|c| c.reads_acks());
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
            rto: RtoTimer::default(),
            cc,
            windowed,
            sent_at: Default::default(),
            wants_rtt,
            reads_acks,
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
            cnp_interval,
            sr,
        }
    }

    /// Paces the next packet: it may leave once this one would have at the current rate.
    fn pace(&mut self, now: Time, wire: u32) {
        if let Some(cc) = &mut self.cc {
            let rate = cc.rate();
            if wire != self.pace_wire || rate.to_bits() != self.pace_rate {
                let gap = (wire as f64 * 8.0 * S as f64 / rate) as Time;
                let line = serialization(wire as u64, self.cfg.line_rate);
                self.pace_wire = wire;
                self.pace_rate = rate.to_bits();
                self.pace_step = gap.max(line);
            }
            self.next_tx_ps = now + self.pace_step;
            cc.on_sent(now, wire as u64);
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
        let Some(cc) = &mut self.cc else {
            return;
        };
        let mut arms = Vec::new();
        cc.on_cnp(now, &mut arms);
        // A slower rate never needs an earlier send, so no kick.
        self.arm(&arms, fx);
    }

    /// Tells the controller of an ACK (`old_una`: the acknowledged point before it;
    /// `endpoint`: the NICs' share of its round trip).
    fn ack_cc(
        &mut self,
        now: Time,
        old_una: u32,
        sack: Option<u32>,
        ece: bool,
        endpoint: Time,
        fx: &mut TxFx,
    ) {
        if !self.reads_acks {
            return;
        }
        let Some(cc) = &mut self.cc else {
            return;
        };
        let mut rtt = None;
        if self.wants_rtt {
            // The newest packet this ACK covers gives the sample (the one that triggered it
            // when ACKs are per packet).
            let upto = self.snd_una.max(sack.map_or(0, |p| p + 1));
            while let Some(&(end, t)) = self.sent_at.front() {
                if end > upto {
                    break;
                }
                rtt = Some(now - t);
                self.sent_at.pop_front();
            }
        }
        let sig = AckSignal {
            cum: self.snd_una,
            newly_acked: self.snd_una - old_una,
            ece,
            rtt,
            endpoint,
            snd_nxt: self.max_sent,
            mss: self.cfg.mtu + ROCE_HEADER,
        };
        let mut arms = Vec::new();
        let faster = cc.on_ack(now, &sig, &mut arms);
        if faster {
            self.sooner(now);
        }
        self.arm(&arms, fx);
        // A window-limited sender may send again once the acknowledged point moved.
        if faster || (self.windowed && sig.newly_acked > 0) {
            fx.kick = true;
        }
    }

    /// The rate may have risen: the next packet may leave earlier than planned.
    fn sooner(&mut self, now: Time) {
        let Some(cc) = &self.cc else { return };
        let min_next =
            now + (8.0 * (self.cfg.mtu + ROCE_HEADER) as f64 * S as f64 / cc.rate()) as Time;
        if self.next_tx_ps > min_next {
            self.next_tx_ps = min_next;
        }
    }

    /// A loss was signalled (NAK or timeout): the controller hears of it, and send times of
    /// the packets to be resent no longer give RTT samples.
    fn lost(&mut self, now: Time, fx: &mut TxFx) {
        self.sent_at.clear();
        let Some(cc) = &mut self.cc else { return };
        let mut arms = Vec::new();
        cc.on_loss(now, &mut arms);
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
        if self.windowed {
            if let Some(w) = self.cc.as_ref().and_then(|c| c.window()) {
                let inflight =
                    (self.snd_nxt - self.snd_una) as f64 * (self.cfg.mtu + ROCE_HEADER) as f64;
                if inflight >= w {
                    return Plan::Blocked;
                }
            }
        }
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
        if self.wants_rtt && psn >= self.max_sent {
            self.sent_at.push_back((psn + npsn, now));
        }
        if self.sr.is_some() {
            return self.sr_sent(now, psn, npsn, wire, reliable, fx);
        }
        self.snd_nxt = psn + npsn;
        self.max_sent = self.max_sent.max(psn + npsn);
        self.pace(now, wire);
        if reliable && self.cfg.reliable {
            self.rto
                .start(now, self.cfg.rto, &mut self.last_progress, fx);
        }
    }

    fn on_response_sent(&mut self, now: Time, wire: u32) {
        self.pace(now, wire);
    }

    fn on_int(&mut self, now: Time, int: &crate::net::int::IntStack) {
        if let Some(cc) = &mut self.cc {
            cc.on_int(now, int);
        }
    }

    fn on_feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        if self.sr.is_some() {
            return self.sr_feedback(now, fb, fx);
        }
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
                } else {
                    self.lost(now, fx);
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
                let Some(cc) = &mut self.cc else {
                    return;
                };
                let mut arms = Vec::new();
                let faster = cc.on_timer(now, t, &mut arms);
                if faster {
                    // A faster rate may allow the next packet earlier than planned.
                    self.sooner(now);
                }
                self.arm(&arms, fx);
                if faster {
                    fx.kick = true;
                }
            }
            TimerKind::Rto if self.sr.is_some() => self.sr_timeout(now, gen, first_missing, fx),
            // Selective repeat's RACK reordering timer (`irn_rack.rs`).
            TimerKind::Early if self.sr.is_some() => self.sr_reorder_timer(now, gen, fx),
            TimerKind::Rto => {
                let outstanding = self.snd_una < self.max_sent || first_missing < self.max_sent;
                let fired = self.rto.fire(
                    now,
                    self.cfg.rto,
                    outstanding,
                    &mut self.last_progress,
                    &mut self.budget,
                    fx,
                );
                self.timeouts += fired.timed_out() as u64;
                if fired != RtoFired::Retransmit {
                    return;
                }
                self.snd_nxt = first_missing;
                self.lost(now, fx);
                fx.kick = true;
            }
            TimerKind::Burst | TimerKind::Hole | TimerKind::Early | TimerKind::ReadRetry => {}
        }
    }

    fn acked(&self) -> u32 {
        self.snd_una
    }

    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx) {
        self.last_progress = now;
        if let Some(sr) = self.sr.as_deref_mut() {
            // The requester placed the later responses and asks again only for the missing
            // run (`nic/build.rs`); the responder's other answers go on.
            sr.reread(psn);
            fx.kick = true;
            return;
        }
        self.snd_nxt = psn;
        fx.kick = true;
    }

    fn on_data(&mut self, now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        // Notification point: answer a marked packet with a CNP, at most one per interval (with
        // `notify = "ack"` the ACK's ECE bit is the notification).
        if d.ce {
            if let Some(interval) = self.cnp_interval {
                if self.last_cnp.is_none_or(|t| now >= t + interval) {
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
        let mut st = self.cc.as_ref()?.state(now);
        st.inflight = Some(self.max_sent.saturating_sub(self.snd_una) as f64);
        Some(st)
    }

    fn kind(&self) -> &'static str {
        self.cc.as_ref().map_or("none", |c| c.name())
    }
}
