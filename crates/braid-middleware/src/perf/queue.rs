//! One QP's software queue and the bookkeeping that maps the NIC's completions back to the
//! application's work requests.
//!
//! Every WR the layer posts below carries a per-QP sequence number as its `wr_id`; the QP's
//! hardware list (`hw`) remembers, for each, which application WR it belongs to (`ord`) and
//! whether it is that WR's last part. RC completes a send queue in order, so a completion for
//! sequence `s` retires every entry up to `s`: application WRs whose last part is retired are
//! done (silently if they were unsignaled); the completion itself reaches the application only if
//! it is the last part of a signaled application WR. Intermediate sub-WRs and 0_WAITs never
//! reach it.

use braid_verbs::{QpNum, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use std::collections::VecDeque;

/// An application WR waiting (wholly or in part) in the software queue.
#[derive(Debug, Clone)]
pub struct AppWr {
    pub ord: u64,
    pub wr: SendWr,
    pub bytes: u64,
    /// At least `large_msg`: scheduled by the LMSE (window, 0_WAIT credit, splitting).
    pub large: bool,
    /// Bytes already posted as sub-WRs.
    pub offset: u64,
    /// Whether it is being split (decided when its first part is posted).
    pub split: Option<bool>,
    /// Holder side of a converted READ: the layer's own WRITE serving (peer host, request id).
    pub serve: Option<(u32, u32)>,
}

/// A converted READ (requester side): its data comes from the holder's WRITEs, its completion
/// when both the holder's DONE arrived and the QP's earlier WRs are through (the signaled
/// marker posted in its place completed).
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    pub id: u32,
    /// The answer: Success (served), RemoteAccessError (refused: bad key, range or
    /// permission) or RetryExceeded (the agents' link to the holder failed).
    pub done: Option<WcStatus>,
    /// The marker in its place in the send queue completed.
    pub marker: bool,
}

/// What the layer remembers of an application WR with parts in the NIC.
#[derive(Debug, Clone)]
pub struct AppMeta {
    pub ord: u64,
    pub wr_id: u64,
    pub signaled: bool,
    pub bytes: u64,
    pub opcode: WcOpcode,
    /// Its last part has been posted.
    pub complete_posted: bool,
    /// An error completion has been given to the application for it.
    pub reported: bool,
    /// See [`AppWr::serve`]: no application completion; its outcome goes back to the peer.
    pub serve: Option<(u32, u32)>,
    /// A converted READ.
    pub remote: Option<Remote>,
}

/// One WR in the NIC's send queue.
#[derive(Debug, Clone, Copy)]
pub struct HwEntry {
    pub seq: u64,
    pub ord: u64,
    pub last: bool,
    /// Bytes of large-message data it carries (counted against the window).
    pub large_bytes: u64,
    pub signaled: bool,
    /// It carries data (a part of a data WR, of any size; not a 0_WAIT).
    pub data: bool,
}

/// A QP under PeRF.
#[derive(Debug)]
pub struct QpQueue {
    pub qpn: QpNum,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub sig_all: bool,
    /// What the application asked for as its send queue depth.
    pub app_max_send_wr: u32,
    pub sw: VecDeque<AppWr>,
    pub hw: VecDeque<HwEntry>,
    pub metas: VecDeque<AppMeta>,
    pub next_seq: u64,
    pub next_ord: u64,
    /// Large-message bytes in the NIC.
    pub hw_large: u64,
    /// Data-carrying WRs in the NIC, of any size (0_WAITs are not counted): the MQSE keeps a
    /// QP's slot while it has some.
    pub hw_data: u32,
    /// Signaled entries in the NIC (a completion will come).
    pub hw_signaled: u32,
    /// Sub-WRs posted since the last signaled one.
    pub since_signal: u32,
    /// Large bytes sent since the last batch of 0_WAITs, and 0_WAITs owed.
    pub zw_credit: u64,
    pub zw_pending: u32,
    /// Application WRs not known complete, and their bytes.
    pub outstanding: u32,
    pub out_bytes: u64,
    /// The QP failed: what is queued is flushed.
    pub failed: bool,
    /// MQSE: when it took its slot, and what it posted since.
    pub slot_since: u64,
    pub slot_wrs: u32,
    pub slot_bytes: u64,
    /// Converted READs not finished yet (their metas are kept until then).
    pub remote_pending: u32,
    /// Application completions held behind an unfinished converted READ (a send queue
    /// completes in order), with their `ord`.
    pub parked: VecDeque<(u64, WorkCompletion)>,
    /// Serving WRs (holder side) not known complete: not the application's, so they do not
    /// count against its send queue depth.
    pub serving: u32,
    /// Serving WRs finished: (peer host, request id, ok), for the agent to answer.
    pub served: Vec<(u32, u32, bool)>,
    /// A converted READ was refused (the QP fails), and the layer moved the QP to Error.
    pub refused: bool,
    pub moved_to_error: bool,
    /// The host and QP it is connected to (for READ conversion).
    pub peer: Option<(u32, QpNum)>,
}

impl QpQueue {
    pub fn new(qpn: QpNum, send_cq: u32, recv_cq: u32, sig_all: bool, app_max: u32) -> Self {
        QpQueue {
            qpn,
            send_cq,
            recv_cq,
            sig_all,
            app_max_send_wr: app_max,
            sw: VecDeque::new(),
            hw: VecDeque::new(),
            metas: VecDeque::new(),
            next_seq: 0,
            next_ord: 0,
            hw_large: 0,
            hw_data: 0,
            hw_signaled: 0,
            since_signal: 0,
            zw_credit: 0,
            zw_pending: 0,
            outstanding: 0,
            out_bytes: 0,
            failed: false,
            slot_since: 0,
            slot_wrs: 0,
            slot_bytes: 0,
            remote_pending: 0,
            parked: VecDeque::new(),
            serving: 0,
            served: Vec::new(),
            refused: false,
            moved_to_error: false,
            peer: None,
        }
    }

    /// Whether it has anything left to post.
    pub fn has_work(&self) -> bool {
        !self.sw.is_empty() || self.zw_pending > 0
    }

    /// Whether WRs it posted that carry data (of any size) are still in the NIC: the MQSE
    /// counts it as sending (a holder keeps its slot, a paused one is draining) until they are
    /// through. 0_WAITs left behind a completion are not counted. A failed QP sends nothing
    /// more (the NIC flushes what it holds), so it holds no slot.
    pub fn data_in_nic(&self) -> bool {
        self.hw_data > 0 && !self.failed
    }

    /// Queues an application WR.
    pub fn push(&mut self, wr: SendWr, large: bool) -> u64 {
        let ord = self.next_ord;
        self.next_ord += 1;
        let bytes = wr.len();
        self.outstanding += 1;
        self.out_bytes += bytes;
        self.sw.push_back(AppWr {
            ord,
            wr,
            bytes,
            large,
            offset: 0,
            split: None,
            serve: None,
        });
        ord
    }

    /// Queues a WRITE serving a peer's converted READ (holder side).
    pub fn push_serve(&mut self, wr: SendWr, large: bool, peer: u32, id: u32) -> u64 {
        let ord = self.push(wr, large);
        self.serving += 1;
        self.sw.back_mut().expect("pushed").serve = Some((peer, id));
        ord
    }

    /// Application WRs outstanding (serving WRs excluded).
    pub fn app_outstanding(&self) -> u32 {
        self.outstanding.saturating_sub(self.serving)
    }

    /// Records a WR posted below (its `wr_id` is `seq`).
    pub fn posted(&mut self, e: HwEntry) {
        self.next_seq = e.seq + 1;
        self.hw_large += e.large_bytes;
        if e.data {
            self.hw_data += 1;
        }
        if e.signaled {
            self.hw_signaled += 1;
        }
        self.hw.push_back(e);
    }

    /// The application's completions for a NIC completion of this QP (none, its own, or
    /// completions it releases from behind a converted READ), appended to `out`.
    pub fn on_cqe(&mut self, wc: &WorkCompletion, out: &mut Vec<WorkCompletion>) {
        let seq = wc.wr_id;
        // `hw` holds consecutive sequence numbers (each post takes `next_seq`): index, not scan.
        let Some(first) = self.hw.front().map(|e| e.seq) else {
            return;
        };
        let Some(&entry) = seq.checked_sub(first).and_then(|i| self.hw.get(i as usize)) else {
            return;
        };
        debug_assert_eq!(entry.seq, seq);
        let mut mine = None;
        if wc.status != WcStatus::Success {
            self.failed = true;
            if let Some(m) = self.metas.iter_mut().find(|m| m.ord == entry.ord) {
                if let Some((peer, id)) = m.serve {
                    if !m.reported {
                        self.served.push((peer, id, false));
                    }
                    m.reported = true;
                } else if !m.reported {
                    m.reported = true;
                    mine = Some(WorkCompletion {
                        wr_id: m.wr_id,
                        opcode: m.opcode,
                        byte_len: 0,
                        ..*wc
                    });
                }
            }
        } else if entry.last {
            if let Some(m) = self.metas.iter().find(|m| m.ord == entry.ord) {
                if let Some((peer, id)) = m.serve {
                    self.served.push((peer, id, true));
                } else if m.signaled && !m.reported && m.remote.is_none() {
                    mine = Some(WorkCompletion {
                        wr_id: m.wr_id,
                        opcode: m.opcode,
                        byte_len: m.bytes,
                        ..*wc
                    });
                }
            }
        }
        if let Some(c) = mine {
            self.parked.push_back((entry.ord, c));
        }
        // In-order completion: everything up to `seq` is done.
        while self.hw.front().is_some_and(|e| e.seq <= seq) {
            let e = self.hw.pop_front().expect("front");
            self.hw_large -= e.large_bytes;
            if e.data {
                self.hw_data -= 1;
            }
            if e.signaled {
                self.hw_signaled -= 1;
            }
            if e.last {
                self.retire(e.ord);
            }
        }
        self.settle(out);
    }

    fn retire(&mut self, ord: u64) {
        if let Some(i) = self.metas.iter().position(|m| m.ord == ord) {
            if let Some(r) = self.metas[i].remote.as_mut() {
                // A converted READ's marker: the READ itself waits for the holder's answer.
                r.marker = true;
                return;
            }
            let m = self.metas.remove(i).expect("index");
            self.outstanding = self.outstanding.saturating_sub(1);
            self.out_bytes = self.out_bytes.saturating_sub(m.bytes);
            if m.serve.is_some() {
                self.serving = self.serving.saturating_sub(1);
            }
        }
    }

    /// Records the holder's answer for converted READ `id`; returns whether it was ours.
    pub fn remote_done(&mut self, id: u32, st: WcStatus, out: &mut Vec<WorkCompletion>) -> bool {
        let Some(r) = self
            .metas
            .iter_mut()
            .filter_map(|m| m.remote.as_mut())
            .find(|r| r.id == id)
        else {
            return false;
        };
        r.done.get_or_insert(st);
        self.settle(out);
        true
    }

    /// Hands out, in send-queue order, the completions no unfinished converted READ holds
    /// back, and finishes the converted READs that are done. A refused READ completes with
    /// `RemoteAccessError` and fails the QP (the caller moves it to Error); what it held back
    /// is then flushed, as a real READ's error flushes the WRs behind it.
    pub fn settle(&mut self, out: &mut Vec<WorkCompletion>) {
        loop {
            let pending = if self.remote_pending == 0 {
                None
            } else {
                self.metas.iter().position(|m| m.remote.is_some())
            };
            let bound = pending.map(|i| self.metas[i].ord);
            while self
                .parked
                .front()
                .is_some_and(|(o, _)| bound.is_none_or(|b| *o < b))
            {
                let (_, mut c) = self.parked.pop_front().expect("front");
                if self.failed && c.status == WcStatus::Success {
                    c.status = WcStatus::Flushed;
                    c.byte_len = 0;
                }
                out.push(c);
            }
            let Some(i) = pending else { return };
            let m = &self.metas[i];
            let r = m.remote.expect("pending");
            // Finished: answered and the WRs before it through, or the QP failed meanwhile.
            let status = match (r.done, r.marker, self.failed) {
                (_, _, true) => WcStatus::Flushed,
                (Some(st), true, _) => st,
                _ => return,
            };
            let m = self.metas.remove(i).expect("index");
            self.remote_pending -= 1;
            self.outstanding = self.outstanding.saturating_sub(1);
            self.out_bytes = self.out_bytes.saturating_sub(m.bytes);
            if !matches!(status, WcStatus::Success | WcStatus::Flushed) {
                self.failed = true;
                self.refused = true;
            }
            if !m.reported && (m.signaled || status != WcStatus::Success) {
                out.push(WorkCompletion {
                    wr_id: m.wr_id,
                    status,
                    opcode: WcOpcode::Read,
                    byte_len: if status == WcStatus::Success {
                        m.bytes
                    } else {
                        0
                    },
                    imm: None,
                    qp_num: self.qpn,
                    src_host: 0,
                    src_qp: 0,
                });
            }
        }
    }

    /// Flushes the software queue (the QP failed or went to Error): every queued application WR
    /// completes with `Flushed`, signaled or not, as the NIC flushes its own.
    pub fn flush_sw(&mut self, out: &mut Vec<WorkCompletion>) {
        self.zw_pending = 0;
        while let Some(a) = self.sw.pop_back() {
            self.outstanding = self.outstanding.saturating_sub(1);
            self.out_bytes = self.out_bytes.saturating_sub(a.bytes);
            if let Some((peer, id)) = a.serve {
                // Not the application's: the peer learns its READ failed.
                self.serving = self.serving.saturating_sub(1);
                self.metas.retain(|m| m.ord != a.ord);
                self.served.push((peer, id, false));
                continue;
            }
            let reported = self
                .metas
                .iter()
                .find(|m| m.ord == a.ord)
                .is_some_and(|m| m.reported);
            self.metas.retain(|m| m.ord != a.ord);
            if !reported {
                out.push(WorkCompletion {
                    wr_id: a.wr.wr_id,
                    status: WcStatus::Flushed,
                    opcode: opcode_of(&a.wr.op),
                    byte_len: 0,
                    imm: None,
                    qp_num: self.qpn,
                    src_host: 0,
                    src_qp: 0,
                });
            }
        }
        // Flushed in software order: reverse what pop_back gave.
        out.reverse();
        // Converted READs still waiting, and what they held back, are flushed first.
        let mut before = Vec::new();
        self.settle(&mut before);
        before.append(out);
        *out = before;
    }
}

/// The completion opcode of a send WR.
pub fn opcode_of(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
        SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
        SendOp::Read => WcOpcode::Read,
        SendOp::Wait { .. } => WcOpcode::Wait,
        SendOp::SendEnable { .. } => WcOpcode::SendEnable,
        SendOp::RecvEnable { .. } => WcOpcode::RecvEnable,
        SendOp::Nop => WcOpcode::Nop,
    }
}

/// Whether a WR may be cut into sub-WRs without changing what the peer sees: one-sided WRITEs
/// (the immediate goes with the last part) and READs. A SEND consumes one RECV per message, so it
/// is never cut.
pub fn splittable(wr: &SendWr) -> bool {
    !wr.inline
        && matches!(
            wr.op,
            SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read
        )
}

#[cfg(test)]
mod tests {
    use braid_verbs::{slice_sges, Sge};

    #[test]
    fn slices_cover_exactly_the_range_across_elements() {
        let sg = vec![
            Sge {
                addr: 100,
                length: 10,
                lkey: 1,
            },
            Sge {
                addr: 500,
                length: 20,
                lkey: 2,
            },
        ];
        assert_eq!(
            slice_sges(&sg, 0, 10),
            vec![Sge {
                addr: 100,
                length: 10,
                lkey: 1
            }]
        );
        assert_eq!(
            slice_sges(&sg, 5, 10),
            vec![
                Sge {
                    addr: 105,
                    length: 5,
                    lkey: 1
                },
                Sge {
                    addr: 500,
                    length: 5,
                    lkey: 2
                }
            ]
        );
        assert_eq!(
            slice_sges(&sg, 25, 5),
            vec![Sge {
                addr: 515,
                length: 5,
                lkey: 2
            }]
        );
        let total: u32 = (0..30)
            .step_by(7)
            .flat_map(|o| slice_sges(&sg, o, 7.min(30 - o)))
            .map(|s| s.length)
            .sum();
        assert_eq!(total, 30);
    }
}
