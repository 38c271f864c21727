//! The Multi-QP Scheduling Engine's PAUSE/RESUME in hardware (`hw_pause = true`), as the
//! artifact does it with cross-channel work requests.
//!
//! The tenant has a *managed loopback QP* (`mqp`, created with a managed send queue: its WRs
//! run only when a SEND_ENABLE allows them) whose send CQ (`mcq`) counts hand-overs. While the
//! agent limits the tenant's active QPs, a QP that starts posting beyond the limit first gets a
//! `WAIT(mcq, 1)` at the head of its work and then posts as usual: the NIC holds it behind the
//! WAIT (*paused*). When a leading QP's turn is over, the layer appends to the leader a
//! `SEND_ENABLE(mqp, 1)` and queues on `mqp` a signaled `WAIT` that is satisfied at once: when
//! the leader's work before the SEND_ENABLE has been executed, the NIC runs that WAIT, its
//! completion lands on `mcq` and satisfies the next paused QP's WAIT (*resumed*), with no
//! software round trip. A leader that handed over because of `rotate_wrs` / `rotate_bytes`
//! gets a `WAIT(mcq, 1)` behind the SEND_ENABLE and joins the paused QPs again; one released by
//! `release_after` leaves the rotation (its next post enters again). WAIT counts are relative to
//! the previous WAIT on the CQ (mlx5's `wait_index`), so the paused QPs are released in the
//! order their WAITs were posted, which is the order of `waiting`.
//!
//! Not covered: destroying or failing a paused QP while gated (its WAIT still counts, so the
//! next one would wait for one more hand-over); the software MQSE is the default.

use braid_verbs::{CqId, QpNum, SendOp, SendWr};
use std::collections::{BTreeMap, VecDeque};

/// Where a QP stands in the hardware rotation.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    /// When it was enabled (became a leader).
    pub since: u64,
    /// Application WRs and bytes it posted since.
    pub wrs: u32,
    pub bytes: u64,
}

#[derive(Debug, Default)]
pub struct HwPause {
    /// The managed loopback QP and its send CQ (one completion per hand-over).
    pub mqp: QpNum,
    pub mcq: CqId,
    /// The CQ the hand-over WAITs on `mqp` wait on (nothing completes there: count 0 is met
    /// at once when the NIC reaches the WAIT).
    pub idle_cq: CqId,
    /// Enabled QPs, first the longest enabled.
    leaders: VecDeque<QpNum>,
    /// QPs held behind a WAIT on `mcq`, in the order of their WAITs.
    waiting: VecDeque<QpNum>,
    turns: BTreeMap<QpNum, Turn>,
    /// Hand-over WAITs queued on `mqp` whose completion has not been polled (the layer polls
    /// `mcq` only while some are: a poll costs CPU).
    pub marks: u32,
    pub pauses: u64,
    pub resumes: u64,
}

/// What the layer must post (in this order) for a decision: (QP, WR).
pub type Posts = Vec<(QpNum, SendWr)>;

impl HwPause {
    pub fn new(mqp: QpNum, mcq: CqId, idle_cq: CqId) -> Self {
        HwPause {
            mqp,
            mcq,
            idle_cq,
            ..Default::default()
        }
    }

    fn wait(&self) -> SendWr {
        let mut w = SendWr::new(
            0,
            SendOp::Wait {
                cq: self.mcq,
                count: 1,
            },
            vec![],
        );
        w.signaled = false;
        w
    }

    /// A hand-over from `leader`: the signaled WAIT queued on `mqp` (run when enabled) and the
    /// SEND_ENABLE behind the leader's work.
    fn release(&mut self, leader: QpNum) -> Posts {
        self.marks += 1;
        let mut mark = SendWr::new(
            0,
            SendOp::Wait {
                cq: self.idle_cq,
                count: 0,
            },
            vec![],
        );
        mark.signaled = true;
        let mut en = SendWr::new(
            0,
            SendOp::SendEnable {
                qp: self.mqp,
                count: 1,
            },
            vec![],
        );
        en.signaled = false;
        vec![(self.mqp, mark), (leader, en)]
    }

    /// Whether the QP is in the rotation (leading or paused).
    pub fn member(&self, qpn: QpNum) -> bool {
        self.turns.contains_key(&qpn)
    }

    /// `qpn` is about to post data under a limit of `allowed` active QPs: it leads if a slot
    /// is free, else it is paused behind a WAIT (returned, to post before its data).
    pub fn admit(&mut self, qpn: QpNum, now: u64, allowed: usize) -> Posts {
        if self.member(qpn) {
            return Vec::new();
        }
        self.turns.insert(
            qpn,
            Turn {
                since: now,
                wrs: 0,
                bytes: 0,
            },
        );
        if self.leaders.len() < allowed.max(1) {
            self.leaders.push_back(qpn);
            return Vec::new();
        }
        self.waiting.push_back(qpn);
        self.pauses += 1;
        vec![(qpn, self.wait())]
    }

    /// A leader posted an application WR of `bytes`.
    pub fn account(&mut self, qpn: QpNum, bytes: u64) {
        if let Some(t) = self.turns.get_mut(&qpn) {
            t.wrs += 1;
            t.bytes += bytes;
        }
    }

    /// Rotates the first leader if its turn is over and a QP waits: `rotate` (the WR or byte
    /// budget is spent: it re-pauses behind its SEND_ENABLE) or `expired` (timed release, or
    /// nothing left to send: it leaves the rotation). Returns the WRs to post and when to come
    /// back (the first leader's timed release).
    pub fn rotate(
        &mut self,
        now: u64,
        over_budget: impl Fn(&Turn) -> bool,
        release_after: u64,
        idle: impl Fn(QpNum) -> bool,
    ) -> (Posts, Option<u64>) {
        let mut posts = Vec::new();
        // At most one hand-over per waiting QP per call.
        for _ in 0..self.waiting.len() {
            let Some(&l) = self.leaders.front() else {
                break;
            };
            if self.waiting.is_empty() {
                break;
            }
            let t = self.turns[&l];
            let budget = over_budget(&t);
            let expired = now >= t.since + release_after || idle(l);
            if !budget && !expired {
                break;
            }
            self.leaders.pop_front();
            posts.extend(self.release(l));
            if budget && !idle(l) {
                // Back to the end of the paused QPs, behind its own SEND_ENABLE.
                posts.push((l, self.wait()));
                self.waiting.push_back(l);
                self.pauses += 1;
                self.turns.insert(
                    l,
                    Turn {
                        since: now,
                        wrs: 0,
                        bytes: 0,
                    },
                );
            } else {
                self.turns.remove(&l);
            }
            let w = self.waiting.pop_front().expect("checked");
            self.leaders.push_back(w);
            self.resumes += 1;
            self.turns.insert(
                w,
                Turn {
                    since: now,
                    wrs: 0,
                    bytes: 0,
                },
            );
        }
        let next = if self.waiting.is_empty() {
            None
        } else {
            self.leaders
                .front()
                .map(|l| self.turns[l].since + release_after)
        };
        (posts, next)
    }

    /// The limit is lifted: every paused QP is released (hand-overs from the first leader)
    /// and the rotation forgotten.
    pub fn ungate(&mut self) -> Posts {
        let mut posts = Vec::new();
        if let Some(&l) = self.leaders.front() {
            for _ in 0..self.waiting.len() {
                posts.extend(self.release(l));
            }
            self.resumes += self.waiting.len() as u64;
        }
        self.leaders.clear();
        self.waiting.clear();
        self.turns.clear();
        posts
    }
}
