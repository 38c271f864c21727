//! The Multi-QP Scheduling Engine's PAUSE/RESUME, in software: which of a tenant's QPs may post.
//!
//! The agent sets how many QPs the tenant may have active (`allowed`). A QP that posts takes a
//! free slot, or waits (FIFO) — it is *paused*: what the application gives it stays in the
//! layer's software queue. A slot holder's turn is over after `rotate_wrs` application WRs,
//! `rotate_bytes` bytes or `release_after`; with others waiting it then stops posting and
//! *drains*: it keeps its slot until the data WRs it already posted (of any size: PeRF pauses
//! QPs whatever their messages) are through, so that the NIC never has more of the tenant's QPs
//! sending than allowed. A holder keeps its slot likewise while it has work or data in the NIC. (The
//! artifact does the hand-over in hardware: a WAIT behind the paused QP's work, released by a
//! SEND_ENABLE through a managed loopback QP.) The layer marks the end of a draining QP's work
//! with a signaled 0_WAIT, so that its completion frees the slot.

use super::queue::QpQueue;
use super::state::UNGATED;
use super::PerfConfig;
use braid_verbs::QpNum;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Debug, Default)]
pub struct Slots {
    /// May post.
    holders: Vec<QpNum>,
    /// Turn over: not posting, slot held until their data WRs in the NIC are through.
    draining: Vec<QpNum>,
    /// Newly draining (the layer marks the end of their work).
    pub new_draining: Vec<QpNum>,
    /// Paused QPs with work, first come first served (and the same as a set: membership is
    /// asked on every post).
    waiting: VecDeque<QpNum>,
    in_waiting: BTreeSet<QpNum>,
    /// The last decision was made under a limit (see [`Slots::gated`]).
    gated: bool,
    blocked: BTreeSet<QpNum>,
    pub pauses: u64,
    pub resumes: u64,
    /// When a holder's turn ends (come back then).
    pub timer: Option<u64>,
}

impl Slots {
    /// Whether the last decision was made under a limit: then every QP with work has been
    /// through [`Slots::may_post`] since and is a holder or waiting.
    pub fn gated(&self) -> bool {
        self.gated
    }

    /// The QPs that may post.
    pub fn holders(&self) -> Vec<QpNum> {
        self.holders.clone()
    }

    /// The first paused QP.
    pub fn first_waiting(&self) -> Option<QpNum> {
        self.waiting.front().copied()
    }

    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// Takes a QP with nothing left to post off the queue of paused QPs.
    pub fn drop_waiting(&mut self, qpn: QpNum) {
        if self.in_waiting.remove(&qpn) {
            self.waiting.retain(|&q| q != qpn);
        }
    }

    pub fn forget(&mut self, qpn: QpNum) {
        self.holders.retain(|&q| q != qpn);
        self.draining.retain(|&q| q != qpn);
        self.drop_waiting(qpn);
        self.blocked.remove(&qpn);
    }

    /// Whether `qpn` may post now; `allowed` QPs per the agent, `paused`: the whole tenant.
    pub fn may_post(
        &mut self,
        qpn: QpNum,
        now: u64,
        allowed: u32,
        paused: bool,
        qps: &mut BTreeMap<QpNum, QpQueue>,
        cfg: &PerfConfig,
    ) -> bool {
        let ok = self.decide(qpn, now, allowed, paused, qps, cfg);
        if ok {
            if self.blocked.remove(&qpn) {
                self.resumes += 1;
            }
        } else if self.blocked.insert(qpn) {
            self.pauses += 1;
        }
        ok
    }

    fn enqueue(&mut self, qpn: QpNum) {
        if self.in_waiting.insert(qpn) {
            self.waiting.push_back(qpn);
        }
    }

    /// Takes `q` off the holders: draining if it has data WRs in the NIC, waiting if it has
    /// work.
    fn hand_over(&mut self, q: QpNum, qps: &BTreeMap<QpNum, QpQueue>) {
        self.holders.retain(|&x| x != q);
        let Some(x) = qps.get(&q) else { return };
        if x.data_in_nic() {
            self.draining.push(q);
            self.new_draining.push(q);
        }
        if x.has_work() {
            self.enqueue(q);
        }
    }

    fn decide(
        &mut self,
        qpn: QpNum,
        now: u64,
        allowed: u32,
        paused: bool,
        qps: &mut BTreeMap<QpNum, QpQueue>,
        cfg: &PerfConfig,
    ) -> bool {
        if allowed == UNGATED && !paused {
            self.holders.clear();
            self.draining.clear();
            self.waiting.clear();
            self.in_waiting.clear();
            self.gated = false;
            return true;
        }
        self.gated = true;
        // Drained QPs free their slots; holders with nothing left give theirs up.
        self.draining
            .retain(|q| qps.get(q).is_some_and(|x| x.data_in_nic()));
        self.holders
            .retain(|q| qps.get(q).is_some_and(|x| x.has_work() || x.data_in_nic()));
        let allowed = if paused { 0 } else { allowed.max(1) as usize };
        // The allowance shrank (or the tenant is paused): the newest holders hand over.
        while self.holders.len() + self.draining.len() > allowed && !self.holders.is_empty() {
            let q = *self.holders.last().expect("non-empty");
            self.hand_over(q, qps);
        }
        let turn_over = |x: &QpQueue| {
            x.slot_wrs >= cfg.rotate_wrs
                || x.slot_bytes >= cfg.rotate_bytes.0
                || now >= x.slot_since + cfg.release_after.0
        };
        if self.holders.contains(&qpn) {
            let others = self.waiting.len() > usize::from(self.in_waiting.contains(&qpn));
            if !(others && turn_over(&qps[&qpn])) {
                return true;
            }
            self.hand_over(qpn, qps);
        }
        self.enqueue(qpn);
        if paused || self.waiting.front() != Some(&qpn) {
            return false;
        }
        if self.holders.len() + self.draining.len() >= allowed {
            if let Some(&h) = self.holders.iter().find(|q| turn_over(&qps[q])) {
                self.hand_over(h, qps);
                self.draining
                    .retain(|q| qps.get(q).is_some_and(|x| x.data_in_nic()));
            }
        }
        if self.holders.len() + self.draining.len() >= allowed {
            // Come back when the first holder's turn is over (draining ones end on completions).
            self.timer = self
                .holders
                .iter()
                .map(|q| qps[q].slot_since + cfg.release_after.0)
                .min();
            return false;
        }
        self.waiting.pop_front();
        self.in_waiting.remove(&qpn);
        self.holders.push(qpn);
        let x = qps.get_mut(&qpn).expect("a QP of the layer");
        x.slot_since = now;
        x.slot_wrs = 0;
        x.slot_bytes = 0;
        true
    }
}
