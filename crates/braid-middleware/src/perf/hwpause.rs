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
//!
//! A QP that goes away (destroyed, or failed: `modify_qp(Error)` or an error completion) while
//! in the rotation must not stall the others ([`HwPause::forget`]): a paused one leaves a
//! *ghost* in `waiting` (its WAIT target stays counted: the hand-over that reaches it releases
//! it and the next real QP together, two marks and `SEND_ENABLE(mqp, 2)`); a leader's slot goes
//! at once to the next paused QP, with the marks enabled from the tenant's *kick QP* (an
//! unmanaged cross-channel QP of its own) instead of behind a leader's work; and since a gone
//! QP's own hand-over SEND_ENABLEs may never run (flushed, or destroyed with its queue; they are
//! signaled, so the layer knows which ran), the kick QP enables their marks too. On a NIC with
//! libmlx5's cumulative enable index (the fake NIC) such a count is refused as beyond the posted
//! marks and the kick enables all posted marks (count 0) instead; braid's simulated NIC adds
//! counts. Either may start a hand-over queued behind another leader early (briefly one active
//! QP more than the limit), never late.

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
    /// An unmanaged cross-channel QP whose SEND_ENABLEs of `mqp` run at once (hand-overs
    /// when a QP went away), and its CQ (its signaled WRs complete there).
    pub kick: QpNum,
    pub kcq: CqId,
    /// Kick WRs whose completion has not been polled.
    pub kicks: u32,
    /// Enabled QPs, first the longest enabled.
    leaders: VecDeque<QpNum>,
    /// QPs held behind a WAIT on `mcq`, in the order of their WAITs; None: a QP that went
    /// away while paused (its WAIT target still counts).
    waiting: VecDeque<Option<QpNum>>,
    turns: BTreeMap<QpNum, Turn>,
    /// Hand-over SEND_ENABLEs (their counts) each QP posted that have not completed yet
    /// (signaled: a QP that goes away leaves these marks without an enable).
    pending_en: BTreeMap<QpNum, VecDeque<u32>>,
    /// Hand-over WAITs queued on `mqp` whose completion has not been polled (the layer polls
    /// `mcq` only while some are: a poll costs CPU).
    pub marks: u32,
    pub pauses: u64,
    pub resumes: u64,
}

/// What the layer must post (in this order) for a decision: (QP, WR).
pub type Posts = Vec<(QpNum, SendWr)>;

impl HwPause {
    pub fn new(mqp: QpNum, mcq: CqId, idle_cq: CqId, kick: QpNum, kcq: CqId) -> Self {
        HwPause {
            mqp,
            mcq,
            idle_cq,
            kick,
            kcq,
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

    /// `n` signaled WAITs queued on `mqp` (each, run when enabled, is one completion on `mcq`:
    /// one paused QP's WAIT target).
    fn marks(&mut self, n: u32) -> Posts {
        self.marks += n;
        (0..n)
            .map(|_| {
                let mut mark = SendWr::new(
                    0,
                    SendOp::Wait {
                        cq: self.idle_cq,
                        count: 0,
                    },
                    vec![],
                );
                mark.signaled = true;
                (self.mqp, mark)
            })
            .collect()
    }

    /// A hand-over of `n` WAIT targets from `leader`: the marks queued on `mqp` and the
    /// SEND_ENABLE behind the leader's work.
    fn release(&mut self, leader: QpNum, n: u32) -> Posts {
        let mut posts = self.marks(n);
        let mut en = SendWr::new(
            0,
            SendOp::SendEnable {
                qp: self.mqp,
                count: n,
            },
            vec![],
        );
        // Signaled: its completion says it ran (else, if `leader` goes away, its marks are
        // enabled from the kick QP).
        en.signaled = true;
        self.pending_en.entry(leader).or_default().push_back(n);
        posts.push((leader, en));
        posts
    }

    /// A hand-over SEND_ENABLE posted on `qpn` completed: it ran.
    pub fn enable_ran(&mut self, qpn: QpNum) {
        if let Some(p) = self.pending_en.get_mut(&qpn) {
            p.pop_front();
        }
    }

    /// Enables `count` more marks of `mqp` at once, from the kick QP. (On a NIC with libmlx5's
    /// cumulative enable index a lost SEND_ENABLE is covered by any later one and a count
    /// beyond the posted marks is refused: the layer then posts count 0, "all posted".)
    fn kick(&mut self, count: u32) -> (QpNum, SendWr) {
        let mut en = SendWr::new(
            0,
            SendOp::SendEnable {
                qp: self.mqp,
                count,
            },
            vec![],
        );
        // Signaled: its completion frees its slot in the kick QP's queue.
        en.signaled = true;
        self.kicks += 1;
        (self.kick, en)
    }

    /// Paused QPs still there.
    fn real_waiting(&self) -> usize {
        self.waiting.iter().filter(|w| w.is_some()).count()
    }

    /// Takes the next paused QP and the ghosts before it: (QP, WAIT targets to release).
    fn pop_waiter(&mut self) -> Option<(QpNum, u32)> {
        let i = self.waiting.iter().position(|w| w.is_some())?;
        let w = self
            .waiting
            .drain(..=i)
            .next_back()
            .flatten()
            .expect("found");
        Some((w, i as u32 + 1))
    }

    /// `qpn` is destroyed or failed: it leaves the rotation without stalling it (module doc).
    /// Returns the WRs to post (on `mqp` and the kick QP only).
    pub fn forget(&mut self, qpn: QpNum, now: u64) -> Posts {
        self.turns.remove(&qpn);
        // Marks its unfinished SEND_ENABLEs were to enable (they will not run).
        let lost: u32 = self.pending_en.remove(&qpn).map_or(0, |p| p.iter().sum());
        let mut posts = Vec::new();
        if let Some(i) = self.leaders.iter().position(|&l| l == qpn) {
            self.leaders.remove(i);
            // Its slot goes to the next paused QP now (no leader's work to wait behind).
            if let Some((w, n)) = self.pop_waiter() {
                posts.extend(self.marks(n));
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
        }
        for w in self.waiting.iter_mut() {
            if *w == Some(qpn) {
                *w = None;
            }
        }
        // Trailing ghosts are released with the next real QP; with nobody left but ghosts the
        // targets are consumed now, so that a later WAIT's target is not behind them.
        if self.real_waiting() == 0 && !self.waiting.is_empty() {
            let n = self.waiting.len() as u32;
            self.waiting.clear();
            posts.extend(self.marks(n));
        }
        let count = posts.len() as u32 + lost;
        if count > 0 {
            posts.push(self.kick(count));
        }
        posts
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
        self.waiting.push_back(Some(qpn));
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
        for _ in 0..self.real_waiting() {
            let Some(&l) = self.leaders.front() else {
                break;
            };
            if self.real_waiting() == 0 {
                break;
            }
            let t = self.turns[&l];
            let budget = over_budget(&t);
            let expired = now >= t.since + release_after || idle(l);
            if !budget && !expired {
                break;
            }
            self.leaders.pop_front();
            let (w, n) = self.pop_waiter().expect("a real QP waits");
            posts.extend(self.release(l, n));
            if budget && !idle(l) {
                // Back to the end of the paused QPs, behind its own SEND_ENABLE.
                posts.push((l, self.wait()));
                self.waiting.push_back(Some(l));
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
        let next = if self.real_waiting() == 0 {
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
        let n = self.waiting.len() as u32;
        if n > 0 {
            match self.leaders.front() {
                Some(&l) => posts.extend(self.release(l, n)),
                // No leader to queue behind (gone): release them at once.
                None => {
                    posts.extend(self.marks(n));
                    posts.push(self.kick(n));
                }
            }
            self.resumes += self.real_waiting() as u64;
        }
        self.leaders.clear();
        self.waiting.clear();
        self.turns.clear();
        posts
    }
}
