//! MP-RDMA requester side of READ: what acknowledges a READ's PSNs, and how a missing READ
//! response is asked for again.
//!
//! The paper treats a READ as a transfer in the reverse direction: the responses are the data,
//! the requester is their receiver (its bitmap marks a READ response tail "with completion",
//! §3.3.1) and they are placed by the address they carry (§3.1). So a READ's PSNs are
//! acknowledged by their responses arriving, never by what the responder says about the
//! *requests* it has received: its NAK of an early READ request names the request it waits for
//! (its rcv_nxt), and every response below that may still be missing. Taking that NAK as a
//! cumulative ACK (as for WRITE data) moved snd_una past READs whose responses were lost, and
//! every retransmission then named the next READ's PSN, never the missing one (issue 27).
//!
//! braid's responses travel in order on one path and the responder serves requests in order;
//! a re-request replaces every answer in progress from its PSN on (`nic/rx.rs`,
//! `on_read_req`). A missing response is therefore recovered go-back-N, as RoCE RC does: the
//! READ from its first missing response PSN, then every later READ, asked for again in order on
//! one VP (requests on several VPs could overtake each other, and a late re-request would wipe
//! the answer to an earlier-arriving one). The WRITE machinery (hole, walk, early
//! retransmission) leaves READ PSNs alone: a re-request of a PSN in the middle of a READ whose
//! responses are flowing restarts that READ at the responder and drops every answer after it.

use super::{MpRdmaTransport, Src};
use crate::transport::{TimerKind, TxFx};
use braid_engine::Time;

/// A READ outstanding at the requester: its PSNs [first, end), and the next response PSN it
/// waits for (responses arrive in order; the NIC hands over only the one it waits for).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadOut {
    pub first: u32,
    pub end: u32,
    pub got: u32,
}

/// A go-back-N re-request of READs in progress.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rewind {
    /// The next PSN to ask again from (a READ at or after it).
    pub next: u32,
    /// The VP every re-request of this rewind takes (in order at the responder).
    pub vp: u16,
    /// What started it (`Src::Nack`: a gap in the responses or the responder's NAK; `Src::Rto`).
    pub src: Src,
}

impl MpRdmaTransport {
    /// A new READ request covering [first, first + npsn) went out.
    pub(super) fn read_sent(&mut self, first: u32, npsn: u32) {
        self.reads.push_back(ReadOut {
            first,
            end: first + npsn,
            got: first,
        });
    }

    /// Index of the first outstanding READ ending after `psn` (the list is in PSN order and its
    /// ranges are disjoint: a binary search, since `plan` asks per packet).
    fn read_idx(&self, psn: u32) -> usize {
        self.reads.partition_point(|r| r.end <= psn)
    }

    /// The READ outstanding at `psn`, if any.
    pub(super) fn read_at(&self, psn: u32) -> Option<ReadOut> {
        self.reads
            .get(self.read_idx(psn))
            .filter(|r| psn >= r.first)
            .copied()
    }

    /// The first PSN whose READ response has not arrived (u32::MAX: none outstanding). The
    /// cumulative point never passes it.
    pub(super) fn read_floor(&self) -> u32 {
        self.reads.front().map_or(u32::MAX, |r| r.got)
    }

    /// An ACK SACKed `psn`: if it is a READ's, its response arrived (in order).
    pub(super) fn read_response(&mut self, psn: u32) {
        let i = self.read_idx(psn);
        if let Some(r) = self.reads.get_mut(i).filter(|r| psn >= r.first) {
            r.got = r.got.max(psn + 1);
        }
        while self.reads.front().is_some_and(|r| r.got >= r.end) {
            self.reads.pop_front();
        }
    }

    /// Asks again for every READ from `from` on (go-back-N), on `vp`.
    pub(super) fn rewind_reads(&mut self, from: u32, vp: u16, src: Src) {
        if self.reads.back().is_some_and(|r| r.end > from) {
            self.stats.read_rewinds += 1;
            self.read_rewind = Some(Rewind {
                next: from,
                vp,
                src,
            });
        }
    }

    /// The next READ request of the rewind in progress: the READ at or after its `next` PSN,
    /// from its first missing response. Ends the rewind when none is left.
    pub(super) fn read_rewind_next(&mut self) -> Option<(u32, Rewind)> {
        let rw = self.read_rewind?;
        match self.reads.get(self.read_idx(rw.next)) {
            Some(r) => Some((rw.next.max(r.got), rw)),
            None => {
                self.read_rewind = None;
                None
            }
        }
    }

    /// The READ re-request timer: the early retransmission of READs (`early_retx`, FUSO's
    /// principle, §3.5 of the paper: recover a tail loss before the RTO). A lost response is
    /// revealed by the next one (a gap), but a lost *last* response, or a lost re-request,
    /// reveals itself to nothing before the RTO. While READs are outstanding, one timer waits
    /// for the loss-suspicion age (srtt + 4·rttvar, as early retransmission) after the READs'
    /// last progress; with no progress by then the READs are asked for again from the first
    /// missing response (go-back-N, on the latest ACK's VP: a path that delivers).
    pub(super) fn arm_read_timer(&mut self, now: Time, fx: &mut TxFx) {
        if !self.p.cfg.early_retx || self.read_timer_armed || self.reads.is_empty() {
            return;
        }
        self.read_timer_armed = true;
        let age = self.suspicion_age().max(1);
        let mut due = self.read_progress + age;
        if due <= now {
            // Progress is older than the age but a re-request is still to go out (or just
            // went): look again an age from now, never in a loop.
            due = now + age;
        }
        fx.timers.push((due, TimerKind::ReadRetry, 0));
    }

    pub(super) fn read_timer_fired(&mut self, now: Time, fx: &mut TxFx) {
        self.read_timer_armed = false;
        let floor = self.read_floor();
        if floor == u32::MAX || self.read_rewind.is_some() {
            // Nothing outstanding, or a re-request is already on its way (it progresses).
            return;
        }
        if now < self.read_progress + self.suspicion_age() {
            // Progress since it was armed: `arm_read_timer` (after this) waits again.
            return;
        }
        self.stats.read_timer += 1;
        self.read_progress = now;
        let vp = match self.last_ack_vp {
            Some(vp) => vp,
            None => self.random_vp(),
        };
        self.rewind_reads(floor, vp, Src::Nack);
        fx.kick = true;
    }
}
