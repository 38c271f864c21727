//! MP-RDMA (Lu et al., NSDI'18): one RDMA connection spread over many virtual paths.
//!
//! - A virtual path (VP) is a UDP source port; ECMP maps it to a physical path.
//! - One congestion window for all paths: +1/cwnd per ACK without ECN, −1/2 per ECN ACK (§3.2).
//! - Multi-path ACK clocking: the packets an ACK allows go out on the VP that ACK echoes, at most
//!   `max_per_ack` (2) per ACK; the rest wait for later ACKs or the burst timer (RTT/2), which sends
//!   them on random VPs (§3.5 burst control).
//! - awnd = cwnd + inflate − (snd_nxt − snd_una); inflate +1 per ACK, −(aack − snd_una) when the
//!   cumulative point moves.
//! - OOO-aware path selection (§3.3.2): snd_ooh is the highest SACKed PSN, snd_ool = snd_ooh − Δ;
//!   an ACK (of a non-retransmitted packet) with SACK < snd_ool shrinks cwnd by one and clocks
//!   nothing.
//! - Receiver: a cyclic bitmap of L two-bit slots from rcv_nxt; a packet at or beyond rcv_nxt + L
//!   is dropped and the receiver NACKs rcv_nxt (once per rcv_nxt value).
//! - Loss recovery (§3.5): a NACK starts recovery (recovery = snd_nxt, snd_retx = NACKed PSN); while
//!   in recovery ACKs clock retransmissions from snd_retx; recovery ends when snd_una reaches
//!   `recovery`. With no new data, unacknowledged packets are retransmitted early (FUSO). RTO is the
//!   last resort and retransmits everything unacknowledged.
//! - Probing: once per RTT, with probability p, the next packet goes to a new random VP.
//! - Path window reduction ("use it or lose it"): a clock with nothing to send shrinks cwnd by one.
//! - Restart from IW after `restart_rtts` RTTs idle.
//!
//! The NIC does data placement and completions (see `nic.rs`, `accept_data_mp`): a packet the
//! bitmap accepts is placed directly; a message completes when rcv_nxt passes its tail.
//! Synchronise (fence) operations are not implemented yet.

use super::{DataInfo, Feedback, Plan, Reply, RxClass, TimerKind, Transport, TxFx};
use crate::config::MpRdmaConfig;
use braid_engine::{RngStream, Time};
use std::collections::VecDeque;

/// Slot states of the receive bitmap (2 bits each in hardware).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Slot {
    Empty = 0,
    Received = 1,
    Tail = 2,
    TailWithCompletion = 3,
}

/// Settings an MP-RDMA transport takes from the scenario.
#[derive(Debug, Clone)]
pub struct MpRdmaParams {
    pub cfg: MpRdmaConfig,
    pub mtu: u32,
    pub rto: Time,
    pub rnr_delay: Time,
    pub sport: u16,
    /// Seed of the transport's own random stream (VP choice, probing).
    pub seed: u64,
    pub host: u32,
    pub qpn: u32,
}

/// Counters of one MP-RDMA QP.
#[derive(Debug, Default, Clone)]
pub struct MpStats {
    pub acks: u64,
    pub ecn_acks: u64,
    /// ACKs whose SACK fell below snd_ool (slow path pruned).
    pub ooo_pruned: u64,
    pub nacks: u64,
    pub recoveries: u64,
    pub retx: u64,
    pub early_retx: u64,
    pub probes: u64,
    pub burst_timer_pkts: u64,
    pub window_reductions: u64,
    pub restarts: u64,
    /// Receiver: packets dropped beyond the bitmap, and the out-of-order degree seen.
    pub bitmap_drops: u64,
    pub max_ood: u32,
    /// Out-of-order degree of every accepted packet (psn − rcv_nxt), capped at the last bucket.
    pub ood_hist: Vec<u64>,
}

#[derive(Debug)]
pub struct MpRdmaTransport {
    p: MpRdmaParams,
    iw: f64,
    rng: RngStream,
    // ---- sender ----
    pub cwnd: f64,
    pub inflate: f64,
    pub snd_una: u32,
    pub snd_nxt: u32,
    /// Highest SACKed PSN (+1, so 0 = none yet).
    snd_ooh1: u32,
    pub in_recovery: bool,
    pub recovery: u32,
    pub snd_retx: u32,
    /// A single retransmission asked for outside the recovery walk (a repeated NACK).
    retx_one: Option<u32>,
    early_ptr: u32,
    /// Packets allowed but not sent yet, each with the VP it goes to.
    credits: VecDeque<u16>,
    /// What `plan` chose, confirmed by `on_sent`: (psn, vp, kind).
    planned: Option<(u32, u16, Pick)>,
    burst_armed: bool,
    burst_gen: u32,
    probe_next: bool,
    probe_vp: Option<u16>,
    probe_epoch_end: u32,
    srtt: f64,
    rttvar: f64,
    rtt_seq: Option<(u32, Time)>,
    started: bool,
    last_activity: Time,
    rnr_until: Time,
    rto_pending: bool,
    last_progress: Time,
    timeouts: u64,
    /// VPs that carried at least one packet (for tests and reports; a NIC would not keep this).
    pub vps_used: std::collections::BTreeSet<u16>,
    // ---- receiver ----
    pub rcv_nxt: u32,
    bitmap: Vec<Slot>,
    nak_sent_for: Option<u32>,
    pub stats: MpStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    New,
    Recovery,
    One,
    Early,
}

impl MpRdmaTransport {
    pub fn new(p: MpRdmaParams) -> Self {
        let iw = p.cfg.iw.unwrap_or_else(|| (p.cfg.bdp.0 as f64 / p.mtu as f64).ceil().max(1.0) as u32).max(1) as f64;
        let rng = RngStream::new(p.seed, "mp-rdma", &[p.host as u64, p.qpn as u64]);
        let l = p.cfg.bitmap as usize;
        let srtt = p.cfg.initial_rtt.0 as f64;
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
            early_ptr: 0,
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
            last_activity: 0,
            rnr_until: 0,
            rto_pending: false,
            last_progress: 0,
            timeouts: 0,
            vps_used: Default::default(),
            rcv_nxt: 0,
            bitmap: vec![Slot::Empty; l],
            nak_sent_for: None,
            stats: MpStats { ood_hist: vec![0; l.max(64) * 2 + 1], ..Default::default() },
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

    fn random_vp(&mut self) -> u16 {
        let (lo, hi) = (self.p.cfg.vp_min as u64, self.p.cfg.vp_max as u64);
        (lo + self.rng.below(hi - lo + 1)) as u16
    }

    /// The new VP a probe goes to (drawn once, kept until the probe is sent).
    fn random_vp_peek(&mut self) -> u16 {
        match self.probe_vp {
            Some(v) => v,
            None => {
                let v = self.random_vp();
                self.probe_vp = Some(v);
                v
            }
        }
    }

    fn outstanding(&self) -> f64 {
        (self.snd_nxt - self.snd_una) as f64
    }

    /// awnd = cwnd + inflate − (snd_nxt − snd_una), less what is already allowed but unsent.
    fn free_window(&self) -> i64 {
        let awnd = self.cwnd + self.inflate - self.outstanding();
        awnd.floor() as i64 - self.credits.len() as i64
    }

    fn shrink(&mut self, by: f64) {
        self.cwnd = (self.cwnd - by).max(1.0);
    }

    fn arm_burst(&mut self, now: Time, fx: &mut TxFx) {
        if !self.burst_armed {
            self.burst_armed = true;
            self.burst_gen += 1;
            let wait = (self.srtt * self.p.cfg.burst_rtt_frac).max(1.0) as Time;
            fx.timers.push((now + wait, TimerKind::Burst, self.burst_gen));
        }
    }

    fn rto_arm(&mut self, now: Time, fx: &mut TxFx) {
        if !self.rto_pending {
            self.rto_pending = true;
            self.last_progress = now;
            fx.timers.push((now + self.p.rto, TimerKind::Rto, 0));
        }
    }

    fn ack_point(&mut self, now: Time, cum: u32) {
        if cum > self.snd_una {
            self.inflate = (self.inflate - (cum - self.snd_una) as f64).max(0.0);
            self.snd_una = cum;
            self.last_progress = now;
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
        }
        self.snd_retx = self.snd_retx.max(self.snd_una);
        self.early_ptr = self.early_ptr.max(self.snd_una);
        self.inflate = self.inflate.min(self.outstanding());
    }

    fn rtt_sample(&mut self, now: Time, sack: u32) {
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

    fn enter_recovery(&mut self, from: u32) {
        if !self.in_recovery {
            self.in_recovery = true;
            self.stats.recoveries += 1;
            self.recovery = self.snd_nxt;
            self.snd_retx = from.max(self.snd_una);
        } else if from < self.snd_retx {
            // Already walked past it (its retransmission may be lost): resend that one PSN.
            self.retx_one = Some(from);
        } else {
            self.snd_retx = from;
        }
    }

    /// Receiver side: the slot of a PSN within the window.
    fn slot(&mut self, psn: u32) -> &mut Slot {
        let l = self.bitmap.len();
        &mut self.bitmap[psn as usize % l]
    }
}

impl Transport for MpRdmaTransport {
    fn set_sport(&mut self, sport: u16) {
        self.p.sport = sport;
    }

    fn plan(&mut self, now: Time, next_new: u32, have_new: bool) -> Plan {
        self.planned = None;
        if self.rnr_until > now {
            return Plan::Wait(self.rnr_until);
        }
        // Nothing in flight and nothing allowed: no ACK will come to clock anything. Start (or
        // restart after idle, from IW) on random VPs.
        if have_new && self.credits.is_empty() && self.snd_una == self.snd_nxt && !self.in_recovery {
            let idle = now.saturating_sub(self.last_activity) as f64;
            if !self.started || idle > self.p.cfg.restart_rtts * self.srtt {
                if self.started {
                    self.stats.restarts += 1;
                }
                self.cwnd = self.iw;
                self.inflate = 0.0;
            }
            self.started = true;
            let n = self.free_window().max(1);
            for _ in 0..n {
                let vp = self.random_vp();
                self.credits.push_back(vp);
            }
        }
        loop {
            let Some(&vp) = self.credits.front() else { return Plan::Blocked };
            let (psn, pick) = if let Some(r) = self.retx_one.filter(|&r| r >= self.snd_una) {
                (r, Pick::One)
            } else if self.in_recovery && self.snd_retx.max(self.snd_una) < self.recovery {
                (self.snd_retx.max(self.snd_una), Pick::Recovery)
            } else if have_new {
                (next_new, Pick::New)
            } else if self.p.cfg.early_retx && self.early_ptr.max(self.snd_una) < self.snd_nxt {
                (self.early_ptr.max(self.snd_una), Pick::Early)
            } else {
                // Use it or lose it: this clock finds nothing to send.
                self.credits.pop_front();
                if self.p.cfg.path_window_reduction {
                    self.stats.window_reductions += 1;
                    self.shrink(1.0);
                }
                continue;
            };
            let vp = if self.probe_next { self.random_vp_peek() } else { vp };
            self.planned = Some((psn, vp, pick));
            return Plan::Send { psn, sport: vp };
        }
    }

    fn response_gate(&self) -> Time {
        0
    }

    fn on_sent(&mut self, now: Time, psn: u32, npsn: u32, _wire: u32, reliable: bool, fx: &mut TxFx) {
        self.last_activity = now;
        let planned = self.planned.take();
        let (vp, pick) = match planned {
            Some((p, vp, pick)) if p == psn => (vp, pick),
            _ => (self.p.sport, if psn >= self.snd_nxt { Pick::New } else { Pick::Early }),
        };
        if planned.is_some() {
            self.credits.pop_front();
            if self.probe_next {
                self.probe_next = false;
                self.stats.probes += 1;
                self.probe_vp = None;
            }
        }
        self.vps_used.insert(vp);
        match pick {
            Pick::New => {
                if self.rtt_seq.is_none() {
                    self.rtt_seq = Some((psn, now));
                }
            }
            Pick::Recovery => {
                self.snd_retx = psn + npsn;
                self.stats.retx += 1;
            }
            Pick::One => {
                self.retx_one = None;
                self.stats.retx += 1;
            }
            Pick::Early => {
                self.early_ptr = psn + npsn;
                self.stats.early_retx += 1;
            }
        }
        self.snd_nxt = self.snd_nxt.max(psn + npsn);
        if reliable {
            self.rto_arm(now, fx);
        }
    }

    fn on_response_sent(&mut self, _now: Time, _wire: u32) {}

    fn on_feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        match fb {
            Feedback::Ack { cum, sack, echo_sport, ece, retx } => {
                self.stats.acks += 1;
                self.last_activity = now;
                // Congestion control, per ACK.
                if ece {
                    self.stats.ecn_acks += 1;
                    self.shrink(0.5);
                } else {
                    self.cwnd += 1.0 / self.cwnd;
                }
                self.inflate += 1.0;
                self.ack_point(now, cum);
                let mut clock = true;
                if let (Some(s), false) = (sack, retx) {
                    self.rtt_sample(now, s);
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
                        for _ in 0..k {
                            self.credits.push_back(echo_sport);
                        }
                        if n > k {
                            self.arm_burst(now, fx);
                        }
                        fx.kick = true;
                    }
                }
            }
            Feedback::Nak { expected } => {
                self.stats.nacks += 1;
                self.ack_point(now, expected);
                self.last_progress = now;
                self.enter_recovery(expected);
                if self.credits.is_empty() {
                    // The NACK itself clocks the first retransmission (on a random VP).
                    let vp = self.random_vp();
                    self.credits.push_back(vp);
                }
                fx.kick = true;
            }
            Feedback::RnrNak { psn } => {
                self.ack_point(now, psn);
                self.last_progress = now;
                self.rnr_until = now + self.p.rnr_delay;
                self.enter_recovery(psn);
                if self.credits.is_empty() {
                    let vp = self.random_vp();
                    self.credits.push_back(vp);
                }
                fx.kick = true;
            }
            Feedback::Cnp => {}
        }
    }

    fn on_timer(&mut self, now: Time, kind: TimerKind, gen: u32, first_missing: u32, fx: &mut TxFx) {
        match kind {
            TimerKind::Burst => {
                if gen != self.burst_gen {
                    return;
                }
                self.burst_armed = false;
                let n = self.free_window();
                for _ in 0..n.max(0) {
                    let vp = self.random_vp();
                    self.credits.push_back(vp);
                    self.stats.burst_timer_pkts += 1;
                }
                if n > 0 {
                    fx.kick = true;
                }
            }
            TimerKind::Rto => {
                if self.snd_una >= self.snd_nxt {
                    self.rto_pending = false;
                    return;
                }
                let deadline = self.last_progress + self.p.rto;
                if now < deadline {
                    fx.timers.push((deadline, TimerKind::Rto, 0));
                    return;
                }
                // Last resort: retransmit everything unacknowledged, clocked from IW random VPs.
                self.timeouts += 1;
                self.last_progress = now;
                fx.timers.push((now + self.p.rto, TimerKind::Rto, 0));
                self.in_recovery = true;
                self.stats.recoveries += 1;
                self.recovery = self.snd_nxt;
                self.snd_retx = first_missing.max(self.snd_una);
                self.retx_one = None;
                self.inflate = 0.0;
                self.credits.clear();
                let n = self.cwnd.min(self.iw).max(1.0) as u32;
                for _ in 0..n {
                    let vp = self.random_vp();
                    self.credits.push_back(vp);
                }
                fx.kick = true;
            }
            TimerKind::Alpha | TimerKind::RateInc => {}
        }
    }

    fn acked(&self) -> u32 {
        self.snd_una
    }

    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx) {
        // A READ response is missing: ask again from there.
        self.last_progress = now;
        self.enter_recovery(psn);
        if self.credits.is_empty() {
            let vp = self.random_vp();
            self.credits.push_back(vp);
        }
        fx.kick = true;
    }

    fn on_data(&mut self, _now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        if d.read_response {
            return RxClass::Accept;
        }
        let l = self.bitmap.len() as u32;
        let dup = d.psn < self.rcv_nxt || (d.psn - self.rcv_nxt < l && *self.slot(d.psn) != Slot::Empty);
        if dup {
            out.push(Reply::Ack { cum: self.rcv_nxt, sack: Some(d.psn), echo_sport: d.sport, ece: d.ce, retx: d.retx });
            return RxClass::Duplicate;
        }
        if d.psn - self.rcv_nxt >= l {
            // Beyond the bitmap: drop, and NACK the PSN that holds the window back.
            self.stats.bitmap_drops += 1;
            if self.nak_sent_for != Some(self.rcv_nxt) {
                self.nak_sent_for = Some(self.rcv_nxt);
                out.push(Reply::Nak { expected: self.rcv_nxt });
            }
            return RxClass::Drop;
        }
        RxClass::Accept
    }

    fn on_accepted(&mut self, _now: Time, d: DataInfo, out: &mut Vec<Reply>) {
        if d.read_response {
            return;
        }
        let ood = d.psn - self.rcv_nxt;
        self.stats.max_ood = self.stats.max_ood.max(ood);
        let last = self.stats.ood_hist.len() - 1;
        self.stats.ood_hist[(ood as usize).min(last)] += 1;
        *self.slot(d.psn) = match (d.last, d.completion) {
            (false, _) => Slot::Received,
            (true, false) => Slot::Tail,
            (true, true) => Slot::TailWithCompletion,
        };
        // Advance over every received slot (the NIC completes messages whose tail it passed).
        while *self.slot(self.rcv_nxt) != Slot::Empty {
            let n = self.rcv_nxt;
            *self.slot(n) = Slot::Empty;
            self.rcv_nxt += 1;
        }
        out.push(Reply::Ack { cum: self.rcv_nxt, sack: Some(d.psn), echo_sport: d.sport, ece: d.ce, retx: d.retx });
    }

    fn on_read_request(&mut self, _now: Time, psn: u32, npsn: u32, out: &mut Vec<Reply>) -> RxClass {
        // READ requests are served in order (their responses use the connection's own port).
        if psn > self.rcv_nxt {
            if self.nak_sent_for != Some(self.rcv_nxt) {
                self.nak_sent_for = Some(self.rcv_nxt);
                out.push(Reply::Nak { expected: self.rcv_nxt });
            }
            return RxClass::Drop;
        }
        if psn == self.rcv_nxt {
            for k in 0..npsn {
                *self.slot(psn + k) = Slot::Empty;
            }
            self.rcv_nxt += npsn;
            while *self.slot(self.rcv_nxt) != Slot::Empty {
                let n = self.rcv_nxt;
                *self.slot(n) = Slot::Empty;
                self.rcv_nxt += 1;
            }
        }
        RxClass::Accept
    }

    fn expected(&self) -> u32 {
        self.rcv_nxt
    }

    fn timeouts(&self) -> u64 {
        self.timeouts
    }

    fn out_of_order(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        vec![
            ("cwnd", self.cwnd),
            ("acks", s.acks as f64),
            ("ecn_acks", s.ecn_acks as f64),
            ("ooo_pruned", s.ooo_pruned as f64),
            ("nacks", s.nacks as f64),
            ("recoveries", s.recoveries as f64),
            ("retx", s.retx as f64),
            ("early_retx", s.early_retx as f64),
            ("probes", s.probes as f64),
            ("burst_timer_pkts", s.burst_timer_pkts as f64),
            ("window_reductions", s.window_reductions as f64),
            ("restarts", s.restarts as f64),
            ("bitmap_drops", s.bitmap_drops as f64),
            ("max_ood", s.max_ood as f64),
            ("vps_used", self.vps_used.len() as f64),
        ]
    }
}
