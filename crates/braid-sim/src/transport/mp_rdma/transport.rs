//! The `Transport` impl of MP-RDMA: packet planning (ACK clocking, recovery, probing, synchronise
//! holds), bookkeeping of sent packets, and the glue to the sender and receiver halves.

use super::{Credit, MpRdmaTransport, Pick, Src, PICKS, SRCS, SRC_NAMES};
use crate::transport::mp_sync::Hold;
use crate::transport::{
    CcState, DataInfo, Feedback, Plan, Reply, RxClass, TimerKind, Transport, TxFx,
};
use braid_engine::Time;

impl Transport for MpRdmaTransport {
    fn set_sport(&mut self, sport: u16) {
        self.p.sport = sport;
    }

    fn plan(&mut self, now: Time, next_new: u32, have_new: bool) -> Plan {
        self.planned = None;
        self.early_wait = false;
        self.no_data = !have_new;
        if self.rnr_until > now {
            return Plan::Wait(self.rnr_until);
        }
        // READs asked for again go first, without a credit: their PSNs are outstanding already
        // and a re-request adds no data to the network beyond them.
        if let Some((psn, rw)) = self.read_rewind_next() {
            self.planned = Some((psn, rw.vp, Pick::ReadRetx, rw.src));
            return Plan::Send { psn, sport: rw.vp };
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
                self.credits.push_back(Credit::new(vp, src));
            }
        }
        loop {
            let Some(&Credit { vp, src, lose }) = self.credits.front() else {
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
                    // A READ's missing response is recovered by `read.rs`, never by resending
                    // a PSN in its middle.
                    _ if self.read_at(una).is_some() => Some(now),
                    _ => None,
                };
                let mut walk = self.snd_retx.max(una + 1);
                while let Some(r) = self.read_at(walk) {
                    walk = r.end;
                }
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
            } else if let Some((psn, due)) = self
                .p
                .cfg
                .early_retx
                .then(|| self.early_candidate())
                .flatten()
            {
                // No new data, awnd allows: early retransmission (§3.5, after FUSO), but only of
                // a packet suspected lost (unacknowledged for longer than `suspicion_age`, and
                // not SACKed). Until then the credit waits: the packet is most likely on its way
                // and its ACK will come (an `Early` timer looks again at `due`).
                if now < due {
                    self.early_wait = true;
                    return Plan::Blocked;
                }
                (psn, Pick::Early)
            } else {
                // This clock finds nothing to send. Use it or lose it (§3.5): the window an ACK
                // opened shrinks by one; unused room of the initial (or restart) window, or a
                // second packet the same ACK allowed, is simply not used.
                self.credits.pop_front();
                if lose && self.p.cfg.path_window_reduction {
                    self.stats.window_reductions += 1;
                    self.shrink(1.0);
                }
                continue;
            };
            let vp = if self.probe_next {
                self.random_vp_peek()
            } else if pick == Pick::Early && src != Src::Ack {
                self.last_ack_vp.unwrap_or(vp)
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
        if planned.is_some() && pick != Pick::ReadRetx {
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
            Pick::ReadRetx => {
                // The request covers the rest of its READ: the rewind goes on after it.
                if let Some(rw) = self.read_rewind.as_mut() {
                    rw.next = psn + npsn;
                }
                self.stats.read_retx += 1;
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

        if !matches!(pick, Pick::New | Pick::ReadRetx) && psn == self.snd_una {
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
            Pick::New | Pick::Recovery | Pick::One | Pick::SyncRetx | Pick::ReadRetx => {}
            Pick::Early => {
                self.early_ptr = psn + npsn;
                self.stats.early_retx += 1;
            }
        }
        // Scoreboard: this PSN left now (again, if a retransmission) and is not SACKed.
        for q in psn.max(self.snd_una)..psn + npsn {
            let i = (q - self.snd_una) as usize;
            match self.sent_at.get_mut(i) {
                Some(e) => *e = (now, false),
                None => {
                    while self.sent_at.len() < i {
                        self.sent_at.push_back((now, false));
                    }
                    self.sent_at.push_back((now, false));
                }
            }
        }
        self.snd_nxt = self.snd_nxt.max(psn + npsn);
        if pick == Pick::ReadRetx || (pick == Pick::New && self.read_at(psn).is_some()) {
            self.read_progress = now;
        }
        self.arm_early(now, fx);
        self.arm_read_timer(now, fx);
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
        if self.no_data && self.snd_una == self.snd_nxt && !self.in_recovery {
            // Everything is acknowledged and there was no data: the waiting credits find
            // nothing now (the NIC may not ask `plan` again before new work comes). Use it or
            // lose it for the room ACKs opened; the rest of the room stays in awnd.
            while let Some(c) = self.credits.pop_front() {
                if c.lose && self.p.cfg.path_window_reduction {
                    self.stats.window_reductions += 1;
                    self.shrink(1.0);
                }
            }
        }
        if self.window_moved && !self.credits.is_empty() {
            fx.kick = true;
        }
        self.arm_early(now, fx);
        self.arm_read_timer(now, fx);
    }

    fn on_timer(
        &mut self,
        now: Time,
        kind: TimerKind,
        gen: u32,
        first_missing: u32,
        fx: &mut TxFx,
    ) {
        self.timer(now, kind, gen, first_missing, fx);
        self.arm_early(now, fx);
        self.arm_read_timer(now, fx);
    }

    fn acked(&self) -> u32 {
        self.snd_una
    }

    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx) {
        // A READ response is missing (a later one arrived): ask again from there, and for every
        // later READ (go-back-N, `read.rs`), on the VP of the latest ACK (a path that delivers).
        self.last_progress = now;
        let vp = self.last_ack_vp.unwrap_or(self.p.sport);
        self.rewind_reads(psn, vp, Src::Nack);
        fx.kick = true;
    }

    fn on_read_sent(&mut self, first: u32, npsn: u32) {
        self.read_sent(first, npsn);
    }

    fn on_data(&mut self, _now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        self.rx_data(d, out)
    }

    fn on_accepted(&mut self, _now: Time, d: DataInfo, out: &mut Vec<Reply>) {
        self.rx_accepted(d, out)
    }

    fn on_read_request(
        &mut self,
        _now: Time,
        psn: u32,
        npsn: u32,
        out: &mut Vec<Reply>,
    ) -> RxClass {
        self.rx_read_request(psn, npsn, out)
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
            ("read_rewinds", s.read_rewinds as f64),
            ("read_retx", s.read_retx as f64),
            ("read_timer", s.read_timer as f64),
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
            "sent_read_retx",
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
    fn cc_state(&self, _now: braid_engine::Time) -> Option<CcState> {
        Some(CcState {
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
