//! MP-RDMA synchronise operations (Lu et al., NSDI'18 §3.4): the sender's hold and the
//! retransmission of synchronise packets the receiver dropped.
//!
//! An MP-RDMA receiver places packets in memory as they arrive, out of order. An application
//! that needs "this operation updates memory only after all earlier ones" flags it synchronise;
//! in braid that is the verbs `SendWr::fence` flag (ibverbs' IBV_SEND_FENCE also orders a WR
//! after earlier ones; single-path transports deliver in order and ignore it).
//!
//! - Sender, `sync_mode = "delay"` (the paper's MP-RDMA): the message's first packet leaves
//!   Δt = α·Δ / (cwnd / RTT) after the last packet of its predecessors left. A retransmission of
//!   a predecessor is such a packet too, so it restarts the count ("after all its predecessors'
//!   packets were sent"). cwnd and the smoothed RTT are read when the hold is checked.
//! - Sender, `sync_mode = "stop-wait"` (the paper's MP-RDMA (Stop-Wait), §5.2.5), and `"delay"`
//!   with `delta = 0`: Δ = ∞ bounds nothing, so Δt would be infinite; instead the message waits
//!   until every earlier PSN is acknowledged. Nothing is sent beyond the predecessors meanwhile,
//!   so a lost tail packet would never be reported by a NACK: if nothing moved for 2 srtt the
//!   oldest unacknowledged packet is resent (a tail-loss probe).
//! - Either way a message whose predecessors are all acknowledged goes at once.
//! - While a message is held, the ACK clocks it would have used are kept (not lost to "use it or
//!   lose it", not spent on early retransmissions) and all leave when the hold ends: the burst
//!   the paper observes (§5.2.5, "This results in burst traffic").
//! - Receiver (in `mp_rdma/receiver.rs`): a synchronise packet arriving while its receiver's
//!   rcv_nxt is below its message's first PSN (an earlier message is incomplete) is dropped and
//!   answered with a NACK naming it ([`super::Feedback::SyncNak`]). The sender resends the PSNs so
//!   reported once the hole the NACK names is acknowledged (sending them earlier would likely
//!   have them dropped again); the NACK also starts the usual recovery of that hole, since
//!   dropped synchronise packets never fill the bitmap and so never cause the overflow NACK that
//!   would otherwise report a lost predecessor.

use crate::transport::config::SyncMode;
use braid_engine::Time;

/// What the sender may do with the synchronise message at its cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Send it (or there is none).
    Go,
    /// Hold it until this time (delay mode).
    Until(Time),
    /// Hold it until every earlier PSN is acknowledged; resend the oldest unacknowledged packet
    /// if nothing moved by `probe_at`.
    Acked { probe_at: Time },
}

/// Counters of the synchronise mechanism at one sender.
#[derive(Debug, Default, Clone)]
pub struct SyncStats {
    /// Synchronise messages whose first packet was sent.
    pub sent: u64,
    /// Total time synchronise messages were held (from ready at the cursor to their first send).
    pub held_ps: u64,
    /// NACKs of dropped synchronise packets received.
    pub nacks: u64,
    /// Dropped synchronise packets resent.
    pub retx: u64,
    /// Tail-loss probes while waiting for acknowledgements.
    pub probes: u64,
}

/// Dropped synchronise packets to resend: [next, end), once snd_una has passed `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resend {
    after: u32,
    next: u32,
    end: u32,
}

/// The sender side of synchronise for one QP.
#[derive(Debug)]
pub struct SyncSender {
    mode: SyncMode,
    alpha: f64,
    delta: u32,
    /// The synchronise message at the send cursor: its first PSN, and when it was first ready
    /// to go (the start of its hold).
    pending: Option<(u32, Option<Time>)>,
    /// When the last packet left. Every packet sent while a message waits at the cursor is one
    /// of its predecessors (or a retransmission of one).
    last_sent: Option<Time>,
    resend: Option<Resend>,
    pub stats: SyncStats,
}

impl SyncSender {
    pub fn new(mode: SyncMode, alpha: f64, delta: u32) -> Self {
        SyncSender {
            mode,
            alpha,
            delta,
            pending: None,
            last_sent: None,
            resend: None,
            stats: SyncStats::default(),
        }
    }

    /// Δt = α·Δ / (cwnd / RTT) in picoseconds (`srtt` in ps, `cwnd` in packets).
    pub fn delay(&self, cwnd: f64, srtt: f64) -> Time {
        (self.alpha * self.delta as f64 * srtt / cwnd.max(1.0)).ceil() as Time
    }

    /// Whether the message waits for acknowledgements rather than for Δt.
    fn waits_for_acks(&self) -> bool {
        self.mode == SyncMode::StopWait || self.delta == 0
    }

    /// The NIC's cursor is at the first packet (`psn`) of a synchronise message.
    pub fn at_cursor(&mut self, psn: u32) {
        if self.pending.map(|p| p.0) != Some(psn) {
            self.pending = Some((psn, None));
        }
    }

    /// May the new packet `next_new` go now? `last_progress` is when the cumulative point last
    /// moved.
    pub fn hold(
        &mut self,
        now: Time,
        next_new: u32,
        snd_una: u32,
        cwnd: f64,
        srtt: f64,
        last_progress: Time,
    ) -> Hold {
        let Some((psn, since)) = self.pending.as_mut() else {
            return Hold::Go;
        };
        if *psn != next_new {
            return Hold::Go;
        }
        since.get_or_insert(now);
        if snd_una >= next_new {
            // Every predecessor is acknowledged: nothing can overtake.
            return Hold::Go;
        }
        let last = self.last_sent.unwrap_or(0);
        if self.waits_for_acks() {
            let probe_at = last.max(last_progress) + (2.0 * srtt).ceil() as Time;
            return Hold::Acked { probe_at };
        }
        let until = last + self.delay(cwnd, srtt);
        if now >= until {
            Hold::Go
        } else {
            Hold::Until(until)
        }
    }

    /// A packet left: new data if `new`, else a retransmission.
    pub fn on_sent(&mut self, now: Time, psn: u32, new: bool) {
        self.last_sent = Some(now);
        if let Some(r) = self.resend.as_mut() {
            // Resent by loss recovery (as the new hole): not again.
            if !new && r.next == psn {
                r.next += 1;
            }
        }
        if let Some((p, since)) = self.pending {
            if new && p == psn {
                self.stats.sent += 1;
                self.stats.held_ps += now - since.unwrap_or(now);
                self.pending = None;
            }
        }
    }

    /// A tail-loss probe is being sent.
    pub fn probed(&mut self) {
        self.stats.probes += 1;
    }

    /// The receiver dropped synchronise packet `psn` while waiting for `expected`.
    pub fn on_nak(&mut self, expected: u32, psn: u32) {
        self.stats.nacks += 1;
        let (next, end) = match self.resend {
            None => (psn, psn + 1),
            Some(r) => (r.next.min(psn), r.end.max(psn + 1)),
        };
        // The receiver's hole gates the resend, unless it is itself a dropped synchronise packet
        // (an earlier synchronise message dropped in turn): the resend fills it. Gating on it
        // would resend one packet per round trip.
        let prev = self.resend.map(|r| r.after);
        let after = if (next..end).contains(&expected) {
            prev.unwrap_or(expected.saturating_sub(1))
        } else {
            prev.unwrap_or(0).max(expected)
        };
        self.resend = Some(Resend { after, next, end });
    }

    /// The next dropped synchronise packet to resend, if it may go now: once snd_una passed the
    /// hole that made the receiver drop it, and below `limit` (snd_una + L: beyond it the
    /// receiver's bitmap would drop it).
    pub fn resend_next(&mut self, snd_una: u32, limit: u32) -> Option<u32> {
        let r = self.resend.as_mut()?;
        r.next = r.next.max(snd_una);
        if r.next >= r.end {
            self.resend = None;
            return None;
        }
        (snd_una > r.after && r.next < limit).then_some(r.next)
    }

    /// Dropped synchronise packet `psn` was resent (after [`SyncSender::on_sent`]).
    pub fn resent(&mut self, psn: u32) {
        self.stats.retx += 1;
        if let Some(r) = self.resend.as_mut() {
            r.next = r.next.max(psn + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_engine::time::US;

    #[test]
    fn delta_t_is_alpha_delta_over_the_sending_rate() {
        // §3.4: Δt = α·Δ / (cwnd / RTT). Δ = 32, cwnd = 64 packets, RTT = 12 µs: the connection
        // sends 64 packets per 12 µs, so 32 packets take 6 µs; α = 1.0 → 6 µs, α = 0.5 → 3 µs.
        let s = SyncSender::new(SyncMode::Delay, 1.0, 32);
        assert_eq!(s.delay(64.0, (12 * US) as f64), 6 * US);
        let s = SyncSender::new(SyncMode::Delay, 0.5, 32);
        assert_eq!(s.delay(64.0, (12 * US) as f64), 3 * US);
        let s = SyncSender::new(SyncMode::Delay, 0.0, 32);
        assert_eq!(s.delay(64.0, (12 * US) as f64), 0);
    }

    #[test]
    fn the_hold_counts_from_the_last_predecessor_send_and_restarts_on_a_retransmission() {
        let mut s = SyncSender::new(SyncMode::Delay, 1.0, 32);
        s.on_sent(10 * US, 99, true);
        s.at_cursor(100);
        let h = |s: &mut SyncSender, now| s.hold(now, 100, 50, 64.0, (12 * US) as f64, 0);
        assert_eq!(h(&mut s, 11 * US), Hold::Until(16 * US));
        // A predecessor is retransmitted at 13 µs: it too must be sent Δt before.
        s.on_sent(13 * US, 60, false);
        assert_eq!(h(&mut s, 14 * US), Hold::Until(19 * US));
        assert_eq!(h(&mut s, 19 * US), Hold::Go);
        s.on_sent(19 * US, 100, true);
        assert_eq!(
            (s.stats.sent, s.stats.held_ps),
            (1, 8 * US),
            "held from 11 µs (first ready) to 19 µs"
        );
        // Not at the cursor any more: later packets go freely.
        assert_eq!(
            s.hold(20 * US, 101, 50, 64.0, (12 * US) as f64, 0),
            Hold::Go
        );
    }

    #[test]
    fn acknowledged_predecessors_release_the_hold_in_both_modes() {
        for mode in [SyncMode::Delay, SyncMode::StopWait] {
            let mut s = SyncSender::new(mode, 1.0, 32);
            s.on_sent(10 * US, 99, true);
            s.at_cursor(100);
            assert_ne!(
                s.hold(10 * US, 100, 99, 64.0, (12 * US) as f64, 0),
                Hold::Go,
                "{mode:?}"
            );
            assert_eq!(
                s.hold(10 * US, 100, 100, 64.0, (12 * US) as f64, 0),
                Hold::Go,
                "{mode:?}"
            );
        }
    }

    #[test]
    fn stop_wait_and_unbounded_delta_wait_for_acknowledgements_with_a_tail_probe() {
        for (mode, delta) in [(SyncMode::StopWait, 32), (SyncMode::Delay, 0)] {
            let mut s = SyncSender::new(mode, 1.0, delta);
            s.on_sent(10 * US, 99, true);
            s.at_cursor(100);
            // Long after Δt, still held: only acknowledgements release it. The probe is due 2 srtt
            // after the later of the last send and the last progress of the cumulative point.
            assert_eq!(
                s.hold(100 * US, 100, 99, 64.0, (12 * US) as f64, 30 * US),
                Hold::Acked { probe_at: 54 * US }
            );
        }
    }

    #[test]
    fn dropped_sync_packets_are_resent_once_the_hole_is_acknowledged() {
        let mut s = SyncSender::new(SyncMode::Delay, 1.0, 32);
        // The receiver waited for PSN 90 and dropped 100, 101 and 103 of a message from 100.
        s.on_nak(90, 101);
        s.on_nak(90, 100);
        s.on_nak(90, 103);
        assert_eq!(
            s.resend_next(90, 154),
            None,
            "the hole is not acknowledged yet"
        );
        assert_eq!(s.resend_next(100, 154), Some(100));
        s.resent(100);
        assert_eq!(s.resend_next(100, 154), Some(101));
        s.resent(101);
        // 102 lies in the range (one duplicate at worst); beyond the bitmap nothing goes.
        assert_eq!(s.resend_next(100, 102), None);
        assert_eq!(s.resend_next(102, 154), Some(102));
        s.resent(102);
        s.resent(103);
        assert_eq!(s.resend_next(102, 154), None, "done");
        assert_eq!((s.stats.nacks, s.stats.retx), (3, 4));
    }

    #[test]
    fn a_hole_that_is_itself_a_dropped_sync_packet_does_not_gate_the_resend() {
        let mut s = SyncSender::new(SyncMode::Delay, 1.0, 32);
        // Message A from 100 was dropped waiting for 90; message B from 132 was then dropped
        // waiting for 100 (A's first packet, itself dropped).
        s.on_nak(90, 100);
        s.on_nak(100, 132);
        assert_eq!(
            s.resend_next(90, 200),
            None,
            "PSN 90 is not acknowledged yet"
        );
        // Once 90 is, A and B go back to back (not one per round trip as 100 becomes the hole).
        assert_eq!(s.resend_next(100, 200), Some(100));
        s.resent(100);
        assert_eq!(s.resend_next(100, 200), Some(101));
    }
}
