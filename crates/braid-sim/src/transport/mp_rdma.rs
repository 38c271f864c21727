//! MP-RDMA (Lu et al., NSDI'18): one RDMA connection spread over many virtual paths.
//!
//! - A virtual path (VP) is a UDP source port; ECMP maps it to a physical path.
//! - One congestion window for all paths: +1/cwnd per ACK without ECN, −1/2 per ECN ACK (§3.2).
//! - Multi-path ACK clocking: the packets an ACK allows go out on the VP that ACK echoes, at most
//!   `max_per_ack` (2) per ACK; the rest wait for later ACKs or the burst timer (RTT/2 with no
//!   ACK), which sends them on random VPs (§3.5 burst control).
//! - awnd = cwnd + inflate − (snd_nxt − snd_una); inflate +1 per ACK, −(aack − snd_una) when the
//!   cumulative point moves.
//! - OOO-aware path selection (§3.3.2): snd_ooh is the highest SACKed PSN, snd_ool = snd_ooh − Δ;
//!   an ACK (of a non-retransmitted packet) with SACK < snd_ool shrinks cwnd by one and clocks
//!   nothing.
//! - Receiver: a cyclic bitmap of L two-bit slots from rcv_nxt; a packet at or beyond rcv_nxt + L
//!   is dropped and the receiver NACKs rcv_nxt (once per rcv_nxt value).
//! - Loss recovery (§3.5): a NACK starts recovery (recovery = snd_nxt, snd_retx = NACKed PSN); while
//!   in recovery ACKs clock retransmissions from snd_retx; recovery ends when snd_una reaches
//!   `recovery`. A NACK echoes the dropped packet's VP and clocks on it like an ACK
//!   (`nack_clocks`). With no new data, unacknowledged packets are retransmitted early (FUSO). RTO
//!   is the last resort and retransmits everything unacknowledged.
//! - Probing: once per RTT, with probability p, the next packet goes to a new random VP.
//! - Path window reduction ("use it or lose it"): a clock with nothing to send shrinks cwnd by one.
//! - Restart from IW after `restart_rtts` RTTs idle.
//!
//! The NIC does data placement and completions (see `nic.rs`, `accept_data_mp`): a packet the
//! bitmap accepts is placed directly; a message completes when rcv_nxt passes its tail.
//! - Synchronise (§3.4, `mp_sync.rs`): a message flagged synchronise (`SendWr::fence`) is held
//!   back at the sender; one of its packets arriving before every earlier message is complete is
//!   dropped and NACKed.

use super::mp_sync::{Hold, SyncSender};
use super::{
    DataInfo, Feedback, Plan, Reply, RetryBudget, RetryLimits, RxClass, TimerKind, Transport, TxFx,
};
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
    /// The QP's `retry_cnt` and `rnr_retry`: past them the connection gives up (as RC does).
    pub retry: RetryLimits,
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
    /// Hole retransmissions granted by the hole timer (no ACK left to clock them).
    pub hole_timer: u64,
    /// Receiver: packets dropped beyond the bitmap, and the out-of-order degree seen.
    pub bitmap_drops: u64,
    /// Receiver: duplicates (a retransmission of a packet already received).
    pub dup_rx: u64,
    pub max_ood: u32,
    /// Receiver: synchronise messages that arrived early (a packet came before an earlier
    /// message was complete: Fig. 18's "OOO synchronise"), and their packets dropped and NACKed.
    pub sync_early: u64,
    pub sync_dropped: u64,
    /// Out-of-order degree of every accepted packet (psn − rcv_nxt): entry d counts packets d
    /// ahead. L entries, exact: a packet L or more ahead is dropped, never accepted.
    pub ood_hist: Vec<u64>,
    /// Packets sent, by what allowed them (`Src`) and what they carried (`Pick`): the accounting
    /// of where a connection's packets come from (instrumentation only).
    pub sent: [[u64; PICKS]; SRCS],
    /// Packets sent per VP, by `Src` (index `SRCS` counts probes, whatever their source).
    pub vp_sent: std::collections::BTreeMap<u16, [u64; SRCS + 1]>,
}

/// What allowed a packet out: the credit it used. Instrumentation, and where a credit's VP
/// came from (only `Ack` credits go to a VP an ACK echoed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// Clocked by an ACK, on the VP it echoes.
    Ack = 0,
    /// The burst timer.
    Burst,
    /// First start (nothing in flight, not idle long).
    Start,
    /// Restart after idle (from IW).
    Restart,
    /// A NACK (or RNR NAK / missing READ response) with nothing else allowed.
    Nack,
    /// The hole timer.
    HoleTimer,
    /// A retransmission timeout.
    Rto,
}
pub const SRCS: usize = 7;
pub const SRC_NAMES: [&str; SRCS] = [
    "ack",
    "burst",
    "start",
    "restart",
    "nack",
    "hole_timer",
    "rto",
];
pub const PICKS: usize = 5;
pub const PICK_NAMES: [&str; PICKS] = ["new", "recovery", "hole", "early", "sync_retx"];

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
    /// The last retransmission of the receiver's first hole (snd_una) and when it left: a NACK
    /// for that PSN within an RTT of it is not acted on again.
    hole_retx: Option<(u32, Time)>,
    /// The first PSN the recovery walk resends (hole + L): a PSN in [walk_from, snd_retx) that
    /// becomes the hole already has the walk's copy on its way.
    walk_from: u32,
    /// The cumulative point moved onto such a PSN: arm the hole timer for it.
    hole_rearm: bool,
    early_ptr: u32,
    /// Packets allowed but not sent yet, each with the VP it goes to (and what allowed it).
    credits: VecDeque<(u16, Src)>,
    /// What `plan` chose, confirmed by `on_sent`: (psn, vp, kind, source).
    planned: Option<(u32, u16, Pick, Src)>,
    burst_armed: bool,
    burst_gen: u32,
    probe_next: bool,
    probe_vp: Option<u16>,
    probe_epoch_end: u32,
    srtt: f64,
    rttvar: f64,
    rtt_seq: Option<(u32, Time)>,
    started: bool,
    /// The cumulative point moved (a held clock in recovery may go now).
    window_moved: bool,
    last_activity: Time,
    /// When the last ACK arrived: the burst timer waits for ACKs to stop.
    last_ack: Time,
    rnr_until: Time,
    rto_pending: bool,
    last_progress: Time,
    timeouts: u64,
    budget: RetryBudget,
    /// VPs that carried at least one packet (for tests and reports; a NIC would not keep this).
    pub vps_used: std::collections::BTreeSet<u16>,
    /// Synchronise: the hold of a flagged message and the resending of dropped ones.
    pub sync: SyncSender,
    // ---- receiver ----
    pub rcv_nxt: u32,
    bitmap: Vec<Slot>,
    nak_sent_for: Option<u32>,
    /// First PSN of the latest synchronise message counted as early (each counts once).
    sync_early_hi: Option<u32>,
    pub stats: MpStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    New = 0,
    Recovery,
    One,
    Early,
    /// A synchronise packet the receiver dropped.
    SyncRetx,
}

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
            rto_pending: false,
            last_progress: 0,
            timeouts: 0,
            budget,
            vps_used: Default::default(),
            sync: SyncSender::new(p.cfg.sync_mode, p.cfg.alpha, p.cfg.delta),
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
            fx.timers
                .push((now + wait, TimerKind::Burst, self.burst_gen));
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
            self.window_moved = true;
            self.inflate = (self.inflate - (cum - self.snd_una) as f64).max(0.0);
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

    fn enter_recovery(&mut self, now: Time, from: u32) {
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

    /// Receiver side: the slot of a PSN within the window.
    fn slot(&mut self, psn: u32) -> &mut Slot {
        let l = self.bitmap.len();
        &mut self.bitmap[psn as usize % l]
    }

    fn feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        match fb {
            Feedback::Ack {
                cum,
                sack,
                echo_sport,
                ece,
                retx,
            } => {
                self.stats.acks += 1;
                self.last_activity = now;
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
                self.ack_point(now, cum);
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
                        for _ in 0..k {
                            self.credits.push_back((echo_sport, Src::Ack));
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
                            self.credits.push_back((echo_sport, Src::Nack));
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
                    self.credits.push_back((echo_sport, Src::Nack));
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
                    self.credits.push_back((vp, Src::Nack));
                }
                fx.kick = true;
            }
            Feedback::Cnp => {}
        }
    }

    fn timer(&mut self, now: Time, kind: TimerKind, gen: u32, first_missing: u32, fx: &mut TxFx) {
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
                    self.credits.push_back((vp, Src::Burst));
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
                if let Err(f) = self.budget.timeout() {
                    // retry_cnt timeouts in a row without progress: give up (as RC does).
                    self.rto_pending = false;
                    fx.fatal = Some(f);
                    return;
                }
                self.last_progress = now;
                fx.timers.push((now + self.p.rto, TimerKind::Rto, 0));
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
                    self.credits.push_back((vp, Src::Rto));
                }
                fx.kick = true;
            }
            TimerKind::Hole => {
                // The hole `gen` is still the hole, its retransmission is stale and nothing is
                // allowed to send: grant one packet on a random VP (plan() resends the hole).
                let stale = matches!(self.hole_retx, Some((h, t)) if h == gen && ((now - t) as f64) >= self.srtt * 1.5);
                if self.in_recovery && gen == self.snd_una && stale && self.credits.is_empty() {
                    let vp = self.random_vp();
                    self.credits.push_back((vp, Src::HoleTimer));
                    self.stats.hole_timer += 1;
                    fx.kick = true;
                }
            }
            TimerKind::Alpha | TimerKind::RateInc | TimerKind::RateDec => {}
        }
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
        // A synchronise message at the cursor may have to wait (§3.4); meanwhile the clocks it
        // would use are kept for it.
        let hold = if have_new {
            self.sync.hold(
                now,
                next_new,
                self.snd_una,
                self.cwnd,
                self.srtt,
                self.last_progress,
            )
        } else {
            Hold::Go
        };
        let may_new = have_new && hold == Hold::Go;
        // Nothing in flight and nothing allowed: no ACK will come to clock anything. Start (or
        // restart after idle, from IW) on random VPs.
        if have_new && self.credits.is_empty() && self.snd_una == self.snd_nxt && !self.in_recovery
        {
            let idle = now.saturating_sub(self.last_activity) as f64;
            let mut src = Src::Start;
            if !self.started || idle > self.p.cfg.restart_rtts * self.srtt {
                if self.started {
                    self.stats.restarts += 1;
                    src = Src::Restart;
                }
                self.cwnd = self.iw;
                self.inflate = 0.0;
            }
            self.started = true;
            let n = self.free_window().max(1);
            for _ in 0..n {
                let vp = self.random_vp();
                self.credits.push_back((vp, src));
            }
        }
        loop {
            let Some(&(vp, src)) = self.credits.front() else {
                return match hold {
                    Hold::Until(t) => Plan::Wait(t),
                    _ => Plan::Blocked,
                };
            };
            let limit = self.snd_una + self.bitmap.len() as u32;
            let sync_resend = self.sync.resend_next(self.snd_una, limit);
            // Recovery (§3.5). The receiver's window is stuck at snd_una, its first hole:
            // - the hole is retransmitted first (again if an RTT and a half passed without the
            //   cumulative point moving: its retransmission was lost too, and since nothing
            //   beyond the window goes out, no NACK will say so);
            // - then the walk from snd_retx to `recovery` (what was sent beyond the window before
            //   the NACK came back was dropped), never at or beyond snd_una + L;
            // - then new data below snd_una + L; otherwise the clock waits for snd_una to move.
            let (psn, pick) = if self.in_recovery {
                let una = self.snd_una;
                let fresh = match self.hole_retx {
                    Some((h, t)) if h == una && ((now - t) as f64) < self.srtt * 1.5 => Some(t),
                    _ => None,
                };
                let walk = self.snd_retx.max(una + 1);
                match (fresh, sync_resend) {
                    (None, _) => (una, Pick::One),
                    (Some(_), Some(s)) => (s, Pick::SyncRetx),
                    (Some(_), None) if walk < self.recovery.min(limit) => (walk, Pick::Recovery),
                    (Some(_), None) if may_new && next_new < limit && walk >= self.recovery => {
                        (next_new, Pick::New)
                    }
                    (Some(t), None) => {
                        let hole_check = t + (self.srtt * 1.5).ceil() as Time + 1;
                        return Plan::Wait(match hold {
                            Hold::Until(u) => hole_check.min(u),
                            _ => hole_check,
                        });
                    }
                }
            } else if let Some(r) = self.retx_one.filter(|&r| r >= self.snd_una) {
                (r, Pick::One)
            } else if let Some(s) = sync_resend {
                (s, Pick::SyncRetx)
            } else if may_new {
                (next_new, Pick::New)
            } else if have_new {
                // The synchronise message at the cursor is held: keep the clock for it (no early
                // retransmission, no window reduction).
                match hold {
                    Hold::Until(t) => return Plan::Wait(t),
                    Hold::Acked { probe_at } if now >= probe_at => {
                        // Nothing is sent beyond the predecessors, so a lost one would never be
                        // NACKed: resend the oldest unacknowledged packet.
                        self.sync.probed();
                        self.retx_one = Some(self.snd_una);
                        continue;
                    }
                    Hold::Acked { probe_at } => return Plan::Wait(probe_at),
                    Hold::Go => unreachable!("may_new covers Go"),
                }
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
            let vp = if self.probe_next {
                self.random_vp_peek()
            } else {
                vp
            };
            self.planned = Some((psn, vp, pick, src));
            return Plan::Send { psn, sport: vp };
        }
    }

    fn response_gate(&self) -> Time {
        0
    }

    fn on_sent(
        &mut self,
        now: Time,
        psn: u32,
        npsn: u32,
        _wire: u32,
        reliable: bool,
        fx: &mut TxFx,
    ) {
        self.last_activity = now;
        let planned = self.planned.take();
        let (vp, pick, src) = match planned {
            Some((p, vp, pick, src)) if p == psn => (vp, pick, src),
            _ => (
                self.p.sport,
                if psn >= self.snd_nxt {
                    Pick::New
                } else {
                    Pick::Early
                },
                Src::Ack,
            ),
        };
        let mut probe = false;
        if planned.is_some() {
            self.credits.pop_front();
            if self.probe_next {
                self.probe_next = false;
                self.stats.probes += 1;
                self.probe_vp = None;
                probe = true;
            }
        }
        self.vps_used.insert(vp);
        self.sync.on_sent(now, psn, pick == Pick::New);
        self.stats.sent[src as usize][pick as usize] += 1;
        let per_vp = self.stats.vp_sent.entry(vp).or_default();
        per_vp[if probe { SRCS } else { src as usize }] += 1;
        match pick {
            Pick::SyncRetx => {
                self.sync.resent(psn);
                self.stats.retx += 1;
            }
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
            Pick::Early => {}
        }
        if self.p.cfg.nack_clocks
            && self.in_recovery
            && matches!(pick, Pick::Recovery | Pick::One)
            && psn >= self.walk_from
        {
            // The walk resends what the bitmap dropped (or, after RTO, everything): its NACK (or
            // the timeout) counted it as gone, so the copy re-enters the window (its ACK will
            // count it gone again). Holes below walk_from were never counted and need nothing.
            self.inflate = (self.inflate - 1.0).max(0.0);
        }

        if pick != Pick::New && psn == self.snd_una {
            self.hole_retx = Some((psn, now));
            // If this retransmission (or its ACK) is lost when the window is full of packets the
            // receiver dropped beyond its bitmap, no ACK comes back to clock another try: check
            // again after 1.5 srtt (a failed path otherwise stalls the flow until RTO).
            fx.timers.push((
                now + (self.srtt * 1.5).ceil() as Time + 1,
                TimerKind::Hole,
                psn,
            ));
        }
        match pick {
            Pick::New | Pick::Recovery | Pick::One | Pick::SyncRetx => {}
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
        self.window_moved = false;
        self.hole_rearm = false;
        self.feedback(now, fb, fx);
        if let (true, Some((h, t))) = (self.hole_rearm, self.hole_retx) {
            fx.timers
                .push((t + (self.srtt * 1.5).ceil() as Time + 1, TimerKind::Hole, h));
        }
        if self.window_moved && !self.credits.is_empty() {
            fx.kick = true;
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
        self.timer(now, kind, gen, first_missing, fx)
    }

    fn acked(&self) -> u32 {
        self.snd_una
    }

    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx) {
        // A READ response is missing: ask again from there.
        self.last_progress = now;
        self.hole_retx = None;
        self.enter_recovery(now, psn);
        if self.credits.is_empty() {
            let vp = self.random_vp();
            self.credits.push_back((vp, Src::Nack));
        }
        fx.kick = true;
    }

    fn on_data(&mut self, _now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        if d.read_response {
            return RxClass::Accept;
        }

        let l = self.bitmap.len() as u32;
        let dup =
            d.psn < self.rcv_nxt || (d.psn - self.rcv_nxt < l && *self.slot(d.psn) != Slot::Empty);
        if dup {
            self.stats.dup_rx += 1;
            out.push(Reply::Ack {
                cum: self.rcv_nxt,
                sack: Some(d.psn),
                echo_sport: d.sport,
                ece: d.ce,
                retx: d.retx,
            });
            return RxClass::Duplicate;
        }
        if d.psn - self.rcv_nxt >= l {
            // Beyond the bitmap: drop, and NACK the PSN that holds the window back (every such
            // drop: the sender ignores repeats while that PSN's retransmission is in flight).
            self.stats.bitmap_drops += 1;
            out.push(Reply::Nak {
                expected: self.rcv_nxt,
            });
            return RxClass::Drop;
        }
        if let Some(first) = d.sync_first {
            if self.rcv_nxt < first {
                // §3.4: a synchronise message updates memory only after every earlier message is
                // complete. Drop it and NACK it: the sender resends it once the hole is filled.
                self.stats.sync_dropped += 1;
                if self.sync_early_hi.is_none_or(|h| first > h) {
                    self.sync_early_hi = Some(first);
                    self.stats.sync_early += 1;
                }
                out.push(Reply::SyncNak {
                    expected: self.rcv_nxt,
                    psn: d.psn,
                });
                return RxClass::Drop;
            }
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
        out.push(Reply::Ack {
            cum: self.rcv_nxt,
            sack: Some(d.psn),
            echo_sport: d.sport,
            ece: d.ce,
            retx: d.retx,
        });
    }

    fn on_read_request(
        &mut self,
        _now: Time,
        psn: u32,
        npsn: u32,
        out: &mut Vec<Reply>,
    ) -> RxClass {
        // READ requests are served in order (their responses use the connection's own port).
        if psn > self.rcv_nxt {
            if self.nak_sent_for != Some(self.rcv_nxt) {
                self.nak_sent_for = Some(self.rcv_nxt);
                out.push(Reply::Nak {
                    expected: self.rcv_nxt,
                });
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

    fn sync_at(&mut self, psn: u32) {
        self.sync.at_cursor(psn);
    }

    fn timeouts(&self) -> u64 {
        self.timeouts
    }

    fn out_of_order(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        let mut v = vec![
            ("cwnd", self.cwnd),
            ("inflate", self.inflate),
            ("snd_una", self.snd_una as f64),
            ("snd_nxt", self.snd_nxt as f64),
            ("in_recovery", self.in_recovery as u8 as f64),
            ("recovery", self.recovery as f64),
            ("snd_retx", self.snd_retx as f64),
            ("credits", self.credits.len() as f64),
            ("srtt_us", self.srtt / 1e6),
            ("rcv_nxt", self.rcv_nxt as f64),
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
            ("hole_timer", s.hole_timer as f64),
            ("bitmap_drops", s.bitmap_drops as f64),
            ("dup_rx", s.dup_rx as f64),
            ("max_ood", s.max_ood as f64),
            ("vps_used", self.vps_used.len() as f64),
            ("sync_sent", self.sync.stats.sent as f64),
            ("sync_held_us", self.sync.stats.held_ps as f64 / 1e6),
            ("sync_nacks", self.sync.stats.nacks as f64),
            ("sync_retx", self.sync.stats.retx as f64),
            ("sync_probes", self.sync.stats.probes as f64),
            ("sync_early", s.sync_early as f64),
            ("sync_dropped", s.sync_dropped as f64),
        ];
        // The accounting: packets sent by what allowed them, and by what they carried.
        const BY_SRC: [&str; SRCS] = [
            "sent_ack",
            "sent_burst",
            "sent_start",
            "sent_restart",
            "sent_nack",
            "sent_hole_timer",
            "sent_rto",
        ];
        const BY_PICK: [&str; PICKS] = [
            "sent_new",
            "sent_recovery",
            "sent_hole",
            "sent_early",
            "sent_sync_retx",
        ];
        for (i, name) in BY_SRC.iter().enumerate() {
            v.push((name, s.sent[i].iter().sum::<u64>() as f64));
        }
        for (j, name) in BY_PICK.iter().enumerate() {
            v.push((name, s.sent.iter().map(|r| r[j]).sum::<u64>() as f64));
        }
        v
    }

    fn vp_counters(&self) -> Vec<(u16, &'static str, u64)> {
        let mut v = vec![];
        for (&vp, n) in &self.stats.vp_sent {
            for (i, &c) in n.iter().enumerate() {
                if c > 0 {
                    v.push((vp, if i < SRCS { SRC_NAMES[i] } else { "probe" }, c));
                }
            }
        }
        v
    }

    fn kind(&self) -> &'static str {
        "mp-rdma"
    }

    /// One window for all paths (§3.2): MP-RDMA keeps no per-path window or in-flight count to
    /// sample.
    fn cc_state(&self, _now: braid_engine::Time) -> Option<super::CcState> {
        Some(super::CcState {
            cwnd: Some(self.cwnd),
            inflight: Some(self.outstanding()),
            srtt_us: Some(self.srtt / 1e6),
            signals: Some(self.stats.ecn_acks),
            ..Default::default()
        })
    }

    fn totals(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        vec![
            ("acks", s.acks),
            ("ecn_acks", s.ecn_acks),
            ("ooo_pruned", s.ooo_pruned),
            ("nacks", s.nacks),
            ("recoveries", s.recoveries),
            ("retx", s.retx),
            ("early_retx", s.early_retx),
            ("probes", s.probes),
            ("burst_timer_pkts", s.burst_timer_pkts),
            ("window_reductions", s.window_reductions),
            ("restarts", s.restarts),
            ("hole_timer", s.hole_timer),
            ("bitmap_drops", s.bitmap_drops),
            ("sync_sent", self.sync.stats.sent),
            ("sync_nacks", self.sync.stats.nacks),
            ("sync_retx", self.sync.stats.retx),
            ("sync_probes", self.sync.stats.probes),
            ("sync_early", s.sync_early),
            ("sync_dropped", s.sync_dropped),
        ]
    }

    fn ood_histogram(&self) -> Option<&[u64]> {
        Some(&self.stats.ood_hist)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_engine::time::US;

    fn t(cfg: MpRdmaConfig) -> MpRdmaTransport {
        MpRdmaTransport::new(MpRdmaParams {
            cfg,
            mtu: 1000,
            rto: 1_000 * US,
            rnr_delay: 10 * US,
            sport: 50000,
            seed: 7,
            host: 0,
            qpn: 0,
            retry: Default::default(),
        })
    }

    /// Sends everything the transport allows now (new data always available); returns (psn, vp).
    fn drain(m: &mut MpRdmaTransport, now: Time, next: &mut u32) -> Vec<(u32, u16)> {
        let mut out = vec![];
        let mut fx = TxFx::default();
        while let Plan::Send { psn, sport } = m.plan(now, *next, true) {
            m.on_sent(now, psn, 1, 1058, true, &mut fx);
            if psn == *next {
                *next += 1;
            }
            out.push((psn, sport));
        }
        out
    }

    fn ack(m: &mut MpRdmaTransport, now: Time, cum: u32, sack: u32, vp: u16, ece: bool) -> TxFx {
        let mut fx = TxFx::default();
        m.on_feedback(
            now,
            Feedback::Ack {
                cum,
                sack: Some(sack),
                echo_sport: vp,
                ece,
                retx: false,
            },
            &mut fx,
        );
        fx
    }

    #[test]
    fn initial_window_goes_to_iw_random_vps() {
        let mut m = t(MpRdmaConfig {
            iw: Some(16),
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        assert_eq!(sent.len(), 16);
        let vps: std::collections::BTreeSet<u16> = sent.iter().map(|x| x.1).collect();
        assert!(vps.len() >= 14, "IW packets on IW random VPs: {vps:?}");
    }

    #[test]
    fn an_ack_clocks_its_packets_onto_its_own_vp() {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        // Each in-order ACK clocks one packet (and a second when cwnd grows past an integer) onto
        // the VP it echoes.
        for (i, &(psn, vp)) in sent.iter().enumerate() {
            let now = 10 * US + i as Time;
            ack(&mut m, now, psn + 1, psn, vp, false);
            let out = drain(&mut m, now, &mut next);
            assert!(
                !out.is_empty() && out.len() <= 2,
                "one ACK clocks one or two packets: {out:?}"
            );
            assert!(
                out.iter().all(|&(_, v)| v == vp),
                "clocked onto the ACK's VP {vp}: {out:?}"
            );
        }
        // cwnd grew by about 1/cwnd per ACK: 8 ACKs ≈ +1.
        assert!((m.cwnd - 9.0).abs() < 0.1, "cwnd {}", m.cwnd);
    }

    #[test]
    fn ecn_acks_shrink_the_window_by_half_a_packet_and_clock_less() {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        let mut clocked = 0;
        for &(psn, vp) in &sent {
            ack(&mut m, 10 * US, psn + 1, psn, vp, true);
            clocked += drain(&mut m, 10 * US, &mut next).len();
        }
        assert!(
            (m.cwnd - 4.0).abs() < 1e-9,
            "8 ECN ACKs: 8 - 8/2 = 4, got {}",
            m.cwnd
        );
        assert_eq!(
            clocked, 4,
            "the window shrank by 4, so 4 of 8 ACKs clocked a packet"
        );
    }

    #[test]
    fn an_ack_far_behind_the_highest_sack_prunes_its_path() {
        let mut m = t(MpRdmaConfig {
            iw: Some(64),
            delta: 16,
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        // The fast path delivered PSN 40 first (cum stays 0: 0..39 outstanding).
        let (_, fast) = sent[40];
        ack(&mut m, 10 * US, 0, 40, fast, false);
        let c0 = m.cwnd;
        let before = drain(&mut m, 10 * US, &mut next);
        assert!(before.iter().all(|x| x.1 == fast));
        // PSN 10 arrives late on its own (slow) VP: 10 < snd_ool = 40 − 16. No clock, cwnd − 1.
        let (_, slow) = sent[10];
        ack(&mut m, 20 * US, 0, 10, slow, false);
        assert!(
            drain(&mut m, 20 * US, &mut next).is_empty(),
            "a pruned ACK clocks nothing"
        );
        assert!(m.cwnd < c0, "pruned: cwnd {} < {c0}", m.cwnd);
        assert_eq!(m.stats.ooo_pruned, 1);
        // PSN 30 (30 ≥ 24) is within Δ and clocks normally.
        let (_, mid) = sent[30];
        ack(&mut m, 21 * US, 0, 30, mid, false);
        let out = drain(&mut m, 21 * US, &mut next);
        assert!(!out.is_empty() && out.iter().all(|x| x.1 == mid), "{out:?}");
        // A retransmission's ACK is exempt, however low its SACK.
        let mut fx = TxFx::default();
        m.on_feedback(
            22 * US,
            Feedback::Ack {
                cum: 0,
                sack: Some(1),
                echo_sport: slow,
                ece: false,
                retx: true,
            },
            &mut fx,
        );
        assert_eq!(m.stats.ooo_pruned, 1);
    }

    #[test]
    fn receiver_drops_beyond_the_bitmap_and_nacks_the_hole() {
        let mut m = t(MpRdmaConfig {
            bitmap: 64,
            ..Default::default()
        });
        let d = |psn| DataInfo {
            psn,
            first: true,
            last: true,
            ce: false,
            sport: 1,
            read_response: false,
            retx: false,
            completion: false,
            sync_first: None,
        };
        let mut out = vec![];
        // PSN 0 is lost; 1..=63 fit in the bitmap.
        for psn in 1..64 {
            assert_eq!(m.on_data(0, d(psn), &mut out), RxClass::Accept);
            m.on_accepted(0, d(psn), &mut out);
        }
        assert!(out.iter().all(|r| matches!(r, Reply::Ack { cum: 0, .. })));
        out.clear();
        assert_eq!(m.on_data(0, d(64), &mut out), RxClass::Drop);
        assert_eq!(m.on_data(0, d(65), &mut out), RxClass::Drop);
        assert_eq!(
            out,
            vec![Reply::Nak { expected: 0 }; 2],
            "each drop NACKs the hole"
        );
        // The retransmission fills the hole: the cumulative point jumps to 64.
        out.clear();
        let mut r = d(0);
        r.retx = true;
        assert_eq!(m.on_data(0, r, &mut out), RxClass::Accept);
        m.on_accepted(0, r, &mut out);
        assert_eq!(
            out,
            vec![Reply::Ack {
                cum: 64,
                sack: Some(0),
                echo_sport: 1,
                ece: false,
                retx: true
            }]
        );
        assert_eq!(m.on_data(0, d(5), &mut out), RxClass::Duplicate);
    }

    #[test]
    fn a_nack_starts_recovery_and_acks_clock_retransmissions() {
        // The NACK itself clocks only the hole (braid's earlier rule; see the next test for
        // `nack_clocks`).
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            nack_clocks: false,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        let mut fx = TxFx::default();
        m.on_feedback(
            5 * US,
            Feedback::Nak {
                expected: 2,
                echo_sport: 1,
            },
            &mut fx,
        );
        assert!(m.in_recovery && m.recovery == 8 && m.snd_una == 2);
        let out = drain(&mut m, 5 * US, &mut next);
        assert_eq!(
            out.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![2],
            "the NACK clocks the first retransmission"
        );
        ack(&mut m, 6 * US, 3, 2, sent[3].1, false);
        let out = drain(&mut m, 6 * US, &mut next);
        assert_eq!(
            out[0].0, 3,
            "in recovery an ACK clocks a retransmission, not new data: {out:?}"
        );
        ack(&mut m, 7 * US, 8, 7, sent[7].1, false);
        assert!(!m.in_recovery, "snd_una reached `recovery`");
    }

    #[test]
    fn a_lost_hole_retransmission_is_resent_by_the_hole_timer() {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            nack_clocks: false,
            ..Default::default()
        });
        let mut next = 0;
        drain(&mut m, 0, &mut next);
        let mut fx = TxFx::default();
        m.on_feedback(
            5 * US,
            Feedback::Nak {
                expected: 2,
                echo_sport: 1,
            },
            &mut fx,
        );
        // The NACK clocks the hole; its send arms the hole timer.
        let Plan::Send { psn, .. } = m.plan(5 * US, next, true) else {
            panic!("the hole goes first")
        };
        assert_eq!(psn, 2);
        let mut fx = TxFx::default();
        m.on_sent(5 * US, psn, 1, 1058, true, &mut fx);
        let (at, kind, gen) = fx
            .timers
            .iter()
            .copied()
            .find(|x| x.1 == TimerKind::Hole)
            .expect("hole timer armed");
        assert_eq!((kind, gen), (TimerKind::Hole, 2));
        assert!(
            m.credits() == 0 && matches!(m.plan(5 * US, next, true), Plan::Blocked),
            "nothing else may go"
        );
        // Neither the retransmission nor its ACK came back: the timer grants one packet, the hole.
        let mut fx = TxFx::default();
        m.on_timer(at, TimerKind::Hole, gen, 0, &mut fx);
        assert!(fx.kick && m.credits() == 1);
        assert!(matches!(m.plan(at, next, true), Plan::Send { psn: 2, .. }));
        // Once the hole is filled a late timer does nothing.
        let mut m2 = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            nack_clocks: false,
            ..Default::default()
        });
        let mut next2 = 0;
        let sent = drain(&mut m2, 0, &mut next2);
        m2.on_feedback(
            5 * US,
            Feedback::Nak {
                expected: 2,
                echo_sport: 1,
            },
            &mut TxFx::default(),
        );
        drain(&mut m2, 5 * US, &mut next2);
        ack(&mut m2, 6 * US, 8, 2, sent[2].1, false);
        let before = m2.credits();
        let mut fx = TxFx::default();
        m2.on_timer(at, TimerKind::Hole, 2, 0, &mut fx);
        assert_eq!(m2.credits(), before);
    }

    #[test]
    fn burst_control_sends_at_most_two_per_ack_and_the_rest_on_the_timer() {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        // One ACK acknowledges all 8 (a cumulative jump): 8+ packets allowed, 2 go now.
        let fx = ack(&mut m, 10 * US, 8, 7, sent[7].1, false);
        let out = drain(&mut m, 10 * US, &mut next);
        assert_eq!(out.len(), 2);
        let (at, kind, gen) = fx
            .timers
            .iter()
            .copied()
            .find(|x| x.1 == TimerKind::Burst)
            .expect("burst timer armed");
        assert_eq!(at, 10 * US + m.srtt() / 2);
        let mut fx = TxFx::default();
        m.on_timer(at, kind, gen, 0, &mut fx);
        let out = drain(&mut m, at, &mut next);
        assert!(out.len() >= 6, "the rest leave on the burst timer: {out:?}");
        let vps: std::collections::BTreeSet<u16> = out.iter().map(|x| x.1).collect();
        assert!(vps.len() >= 4, "on random VPs: {vps:?}");
    }

    #[test]
    fn the_burst_timer_waits_while_acks_keep_coming() {
        for after_last_ack in [true, false] {
            let mut m = t(MpRdmaConfig {
                iw: Some(8),
                probe_p: 0.0,
                burst_after_last_ack: after_last_ack,
                ..Default::default()
            });
            let mut next = 0;
            let sent = drain(&mut m, 0, &mut next);
            // A cumulative jump allows 8+ packets: 2 go on the ACK's VP, the timer is armed.
            let fx = ack(&mut m, 10 * US, 4, 3, sent[3].1, false);
            drain(&mut m, 10 * US, &mut next);
            let (at, _, gen) = fx
                .timers
                .iter()
                .copied()
                .find(|x| x.1 == TimerKind::Burst)
                .expect("burst timer armed");
            // An ACK arrives just before the timer; it clocks (up to) two on its own VP.
            let late = at - 1;
            ack(&mut m, late, 5, 4, sent[4].1, false);
            let clocked = drain(&mut m, late, &mut next);
            assert!(clocked.iter().all(|x| x.1 == sent[4].1), "{clocked:?}");
            let mut fx = TxFx::default();
            m.on_timer(at, TimerKind::Burst, gen, 0, &mut fx);
            let fired = drain(&mut m, at, &mut next);
            if after_last_ack {
                // §3.5: "if no subsequent ACKs return": one just did, so nothing goes on random
                // VPs yet; the timer is re-armed srtt/2 after that ACK.
                assert!(
                    fired.is_empty() && m.stats.burst_timer_pkts == 0,
                    "{fired:?}"
                );
                let (at2, kind, gen2) = fx.timers[0];
                assert_eq!(
                    (at2, kind, gen2),
                    (late + m.srtt() / 2, TimerKind::Burst, gen)
                );
                // No ACK since: now the rest goes, on random VPs.
                m.on_timer(at2, kind, gen2, 0, &mut TxFx::default());
                let out = drain(&mut m, at2, &mut next);
                assert!(!out.is_empty() && m.stats.burst_timer_pkts == out.len() as u64);
            } else {
                assert!(
                    !fired.is_empty() && m.stats.burst_timer_pkts > 0,
                    "fixed timer: fires regardless"
                );
            }
        }
    }

    #[test]
    fn a_timeout_lets_the_acks_of_the_resent_packets_clock_again() {
        let mut m = t(MpRdmaConfig {
            iw: Some(16),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        drain(&mut m, 0, &mut next);
        // Nothing comes back (all 16 lost on failed paths) and cwnd has meanwhile fallen to 4:
        // RTO resends from snd_una on 4 random VPs.
        m.cwnd = 4.0;
        let mut fx = TxFx::default();
        m.on_timer(1_000 * US, TimerKind::Rto, 0, 0, &mut fx);
        let resent = drain(&mut m, 1_000 * US, &mut next);
        assert_eq!(
            resent.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        // The resent PSN 1 is acknowledged (PSN 0's copy is lost again): the 16 presumed-lost
        // packets count as gone, so this ACK clocks the next retransmission on its VP. (With
        // inflate reset to 0, awnd = 4 + 1 − 16 < 0: no clock, and the flow waits for the next RTO.)
        let vp = resent[1].1;
        m.on_feedback(
            1_010 * US,
            Feedback::Ack {
                cum: 0,
                sack: Some(1),
                echo_sport: vp,
                ece: false,
                retx: true,
            },
            &mut TxFx::default(),
        );
        let out = drain(&mut m, 1_010 * US, &mut next);
        assert!(
            !out.is_empty() && out.iter().all(|x| x.1 == vp),
            "clocked on the ACK's VP: {out:?}"
        );
    }

    #[test]
    fn nack_credits_go_back_to_their_vps_and_wait_for_the_hole() {
        // L = 4: PSN 0 is lost, 1..3 fill the bitmap, 4 and 5 are dropped beyond it (NACKs).
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            bitmap: 4,
            delta: 2,
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        drain(&mut m, 0, &mut next);
        let (x, y) = (50001, 50002);
        m.on_feedback(
            5 * US,
            Feedback::Nak {
                expected: 0,
                echo_sport: x,
            },
            &mut TxFx::default(),
        );
        // Its credit is X's: it resends the hole there.
        assert_eq!(drain(&mut m, 5 * US, &mut next), vec![(0, x)]);
        m.on_feedback(
            6 * US,
            Feedback::Nak {
                expected: 0,
                echo_sport: y,
            },
            &mut TxFx::default(),
        );
        // Y's credits (PSNs 4 and 5 have left the network, so two of 8 are free) cannot go:
        // everything below snd_una + L is received or resent. They wait, on Y.
        assert!(drain(&mut m, 6 * US, &mut next).is_empty() && m.credits() == 2);
        // The hole's copy arrives (cum 0 → 4): Y's credits resend PSNs 4, 5 (dropped) on Y.
        let mut fx = TxFx::default();
        m.on_feedback(
            15 * US,
            Feedback::Ack {
                cum: 4,
                sack: Some(0),
                echo_sport: x,
                ece: false,
                retx: true,
            },
            &mut fx,
        );
        let out = drain(&mut m, 15 * US, &mut next);
        assert_eq!(out[..2], [(4, y), (5, y)], "{out:?}");
        // Under the earlier rule a NACK counts nothing for the window: only the one credit a
        // NACK grants when nothing else is allowed.
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            bitmap: 4,
            delta: 2,
            probe_p: 0.0,
            nack_clocks: false,
            ..Default::default()
        });
        let mut next = 0;
        drain(&mut m, 0, &mut next);
        m.on_feedback(
            5 * US,
            Feedback::Nak {
                expected: 0,
                echo_sport: x,
            },
            &mut TxFx::default(),
        );
        drain(&mut m, 5 * US, &mut next);
        m.on_feedback(
            6 * US,
            Feedback::Nak {
                expected: 0,
                echo_sport: y,
            },
            &mut TxFx::default(),
        );
        assert!(
            m.inflate == 0.0 && m.credits() == 1,
            "inflate {} credits {}",
            m.inflate,
            m.credits()
        );
    }

    #[test]
    fn a_nack_with_nothing_allowed_resends_the_hole_on_its_echoed_vp() {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        drain(&mut m, 0, &mut next);
        let mut fx = TxFx::default();
        m.on_feedback(
            5 * US,
            Feedback::Nak {
                expected: 2,
                echo_sport: 50123,
            },
            &mut fx,
        );
        assert_eq!(
            m.plan(5 * US, next, true),
            Plan::Send {
                psn: 2,
                sport: 50123
            }
        );
    }

    #[test]
    fn no_new_data_retransmits_early_then_loses_the_window() {
        let mut m = t(MpRdmaConfig {
            iw: Some(4),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        // PSN 3 was delivered, 0..2 are outstanding; no new data: early retransmissions of 0, 1.
        ack(&mut m, 10 * US, 0, 3, sent[3].1, false);
        let mut fx = TxFx::default();
        let mut got = vec![];
        while let Plan::Send { psn, .. } = m.plan(10 * US, 4, false) {
            m.on_sent(10 * US, psn, 1, 1058, true, &mut fx);
            got.push(psn);
        }
        assert_eq!(
            got,
            vec![0],
            "one clock, one early retransmission of the oldest unacknowledged PSN"
        );
        // Everything acknowledged, nothing to send: the clock is lost and cwnd shrinks by one.
        let c = m.cwnd;
        ack(&mut m, 11 * US, 4, 0, sent[0].1, false);
        assert_eq!(m.plan(11 * US, 4, false), Plan::Blocked);
        assert!(m.cwnd < c, "use it or lose it");
    }

    // ---- synchronise (§3.4) ----

    #[test]
    fn a_sync_message_leaves_delta_t_after_its_predecessors_and_keeps_its_clock() {
        // Δ = 32, α = 1.0 (defaults), srtt = initial_rtt = 12 µs (no sample taken below).
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        m.sync_at(8);
        // An ACK for PSN 3 (not the timed PSN 0: no RTT sample) clocks a packet onto its VP.
        ack(&mut m, US, 0, 3, sent[3].1, false);
        m.cwnd = 64.0;
        // Δt = α·Δ / (cwnd / RTT) = 32 / (64 / 12 µs) = 6 µs after the last predecessor (t = 0).
        assert_eq!(m.plan(US, 8, true), Plan::Wait(6 * US));
        assert_eq!(m.plan(5 * US, 8, true), Plan::Wait(6 * US));
        assert!(
            m.credits() >= 1,
            "the clock is kept for the held message, not lost"
        );
        assert_eq!(m.stats.window_reductions + m.stats.early_retx, 0);
        let Plan::Send { psn, sport } = m.plan(6 * US, 8, true) else {
            panic!("Δt has passed")
        };
        assert_eq!(
            (psn, sport),
            (8, sent[3].1),
            "on the VP of the ACK that clocked it"
        );
        m.on_sent(6 * US, 8, 1, 1058, true, &mut TxFx::default());
        let c: std::collections::BTreeMap<_, _> = m.counters().into_iter().collect();
        assert_eq!(
            (c["sync_sent"], c["sync_held_us"]),
            (1.0, 5.0),
            "held from 1 µs (ready) to 6 µs"
        );
        // The rest of the message is not held.
        assert!(matches!(
            m.plan(6 * US, 9, true),
            Plan::Send { psn: 9, .. } | Plan::Blocked
        ));
    }

    #[test]
    fn with_alpha_zero_or_acknowledged_predecessors_a_sync_message_goes_at_once() {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            alpha: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        m.sync_at(8);
        ack(&mut m, US, 0, 3, sent[3].1, false);
        assert!(
            matches!(m.plan(US, 8, true), Plan::Send { psn: 8, .. }),
            "α = 0: Δt = 0"
        );
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        m.sync_at(8);
        ack(&mut m, US, 8, 7, sent[7].1, false);
        assert!(
            matches!(m.plan(US, 8, true), Plan::Send { psn: 8, .. }),
            "nothing earlier is outstanding"
        );
    }

    #[test]
    fn stop_wait_sends_a_sync_message_only_when_everything_before_is_acknowledged() {
        use crate::config::SyncMode;
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            sync_mode: SyncMode::StopWait,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        m.sync_at(8);
        // 0..6 acknowledged at 10 µs; PSN 7 is lost. Held long past Δt (6 µs at cwnd 64).
        ack(&mut m, 10 * US, 7, 6, sent[6].1, false);
        m.cwnd = 64.0;
        // Nothing goes beyond the predecessors, so no NACK will report PSN 7: 2 srtt after the
        // last progress (10 µs) the oldest unacknowledged packet is probed.
        assert_eq!(m.plan(20 * US, 8, true), Plan::Wait(34 * US));
        let Plan::Send { psn, .. } = m.plan(34 * US, 8, true) else {
            panic!("tail-loss probe")
        };
        assert_eq!(psn, 7);
        m.on_sent(34 * US, 7, 1, 1058, true, &mut TxFx::default());
        assert_eq!(m.sync.stats.probes, 1);
        assert_eq!(
            m.plan(35 * US, 8, true),
            Plan::Wait(58 * US),
            "next probe 2 srtt after it"
        );
        // Its ACK completes the predecessors: the synchronise message goes.
        let mut fx = TxFx::default();
        m.on_feedback(
            40 * US,
            Feedback::Ack {
                cum: 8,
                sack: Some(7),
                echo_sport: sent[0].1,
                ece: false,
                retx: true,
            },
            &mut fx,
        );
        assert!(fx.kick);
        assert!(matches!(
            m.plan(40 * US, 8, true),
            Plan::Send { psn: 8, .. }
        ));
        // With delta = 0 (no OOO bound) the delay mode falls back to the same wait.
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            delta: 0,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        m.sync_at(8);
        ack(&mut m, 10 * US, 7, 6, sent[6].1, false);
        assert_eq!(m.plan(20 * US, 8, true), Plan::Wait(34 * US));
    }

    #[test]
    fn an_early_sync_packet_is_dropped_and_nacked_and_accepted_once_earlier_messages_complete() {
        let mut m = t(MpRdmaConfig {
            bitmap: 64,
            ..Default::default()
        });
        // Message A = PSNs 0..=4, synchronise message B = 5..=6.
        let d = |psn: u32| DataInfo {
            psn,
            first: psn == 0 || psn == 5,
            last: psn == 4 || psn == 6,
            ce: false,
            sport: 9,
            read_response: false,
            retx: false,
            completion: false,
            sync_first: (psn >= 5).then_some(5),
        };
        let mut out = vec![];
        for psn in [0, 1, 2, 4] {
            assert_eq!(m.on_data(0, d(psn), &mut out), RxClass::Accept);
            m.on_accepted(0, d(psn), &mut out);
        }
        out.clear();
        // PSN 3 of A is missing: B must not touch memory.
        assert_eq!(m.on_data(0, d(5), &mut out), RxClass::Drop);
        assert_eq!(m.on_data(0, d(6), &mut out), RxClass::Drop);
        assert_eq!(
            out,
            vec![
                Reply::SyncNak {
                    expected: 3,
                    psn: 5
                },
                Reply::SyncNak {
                    expected: 3,
                    psn: 6
                }
            ]
        );
        assert_eq!(
            (m.stats.sync_early, m.stats.sync_dropped),
            (1, 2),
            "one message early, two packets dropped"
        );
        // A completes; B's resent packets are placed.
        for psn in [3, 6, 5] {
            assert_eq!(m.on_data(0, d(psn), &mut out), RxClass::Accept, "PSN {psn}");
            m.on_accepted(0, d(psn), &mut out);
        }
        assert_eq!(m.rcv_nxt, 7);
        assert_eq!(m.stats.sync_early, 1);
    }

    #[test]
    fn a_sync_nack_recovers_the_hole_then_resends_the_dropped_packets() {
        let mut m = t(MpRdmaConfig {
            iw: Some(16),
            probe_p: 0.0,
            ..Default::default()
        });
        let mut next = 0;
        drain(&mut m, 0, &mut next);
        // PSNs 10..=15 are a synchronise message; the receiver waits for PSN 3 and dropped 10, 11.
        let mut fx = TxFx::default();
        m.on_feedback(
            20 * US,
            Feedback::SyncNak {
                expected: 3,
                psn: 10,
                echo_sport: 5,
            },
            &mut fx,
        );
        m.on_feedback(
            20 * US,
            Feedback::SyncNak {
                expected: 3,
                psn: 11,
                echo_sport: 5,
            },
            &mut fx,
        );
        assert!(fx.kick && m.in_recovery);
        let Plan::Send { psn, .. } = m.plan(20 * US, 16, true) else {
            panic!("the hole goes first")
        };
        assert_eq!(psn, 3);
        m.on_sent(20 * US, 3, 1, 1058, true, &mut TxFx::default());
        // The hole's ACK: the receiver now waits for 10 (the first dropped synchronise packet).
        let mut fx = TxFx::default();
        m.on_feedback(
            30 * US,
            Feedback::Ack {
                cum: 10,
                sack: Some(3),
                echo_sport: 7,
                ece: false,
                retx: true,
            },
            &mut fx,
        );
        let mut got = vec![];
        while let Plan::Send { psn, .. } = m.plan(30 * US, 16, true) {
            m.on_sent(30 * US, psn, 1, 1058, true, &mut TxFx::default());
            got.push(psn);
            if got.len() == 3 {
                break;
            }
        }
        assert_eq!(
            &got[..2],
            &[10, 11],
            "each dropped packet resent once: {got:?}"
        );
        assert_eq!(m.sync.stats.nacks, 2);
    }
}
