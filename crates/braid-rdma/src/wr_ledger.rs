//! Which posted work request a completion belongs to. An error completion's opcode is undefined
//! in ibverbs (`ibv_poll_cq(3)`: only `wr_id`, `status`, `qp_num` and `vendor_err` are valid),
//! so a flushed or failed completion cannot say by itself whether it retired a send or a
//! receive, and the application's `wr_id` cannot either: a send and a receive may share one
//! (perftest and braid's own `perf` apps use the QP index for both). So the backend posts every
//! work request under a tag of its own, unique on the QP, with the top bit telling a receive
//! from a send, keeps the QP's send and receive queues in posting order, and maps each
//! completion's tag back to the application's request.

use braid_verbs::WcOpcode;
use std::collections::VecDeque;

/// Set in the tag of every receive (never in a send's: a QP would need 2^63 posts).
const RECV: u64 = 1 << 63;

/// A send posted and not yet retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostedSend {
    pub tag: u64,
    pub wr_id: u64,
    pub signaled: bool,
    /// What its completion reports when the device's opcode is undefined (error completions).
    pub op: WcOpcode,
}

/// A receive posted and not yet completed; `slot` is its UD GRH slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostedRecv {
    pub tag: u64,
    pub wr_id: u64,
    pub slot: u64,
}

/// What a completion retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    Send(PostedSend),
    Recv(PostedRecv),
}

/// One QP's outstanding work requests, in posting order.
#[derive(Debug, Default)]
pub struct WrLedger {
    next: u64,
    sends: VecDeque<PostedSend>,
    recvs: VecDeque<PostedRecv>,
}

impl WrLedger {
    /// The tag the `i`-th send of the list about to be posted goes under.
    pub fn send_tag(&self, i: usize) -> u64 {
        (self.next + i as u64) & !RECV
    }
    /// Records a posted send (its tag from [`WrLedger::send_tag`], in list order).
    pub fn push_send(&mut self, s: PostedSend) {
        self.next += 1;
        self.sends.push_back(s);
    }
    /// The tag the next receive goes under.
    pub fn recv_tag(&self) -> u64 {
        self.next | RECV
    }
    /// Records a posted receive (its tag from [`WrLedger::recv_tag`]).
    pub fn push_recv(&mut self, r: PostedRecv) {
        self.next += 1;
        self.recvs.push_back(r);
    }
    /// Sends not yet retired (unsignaled ones retire with the next completion behind them).
    pub fn send_outstanding(&self) -> usize {
        self.sends.len()
    }
    /// Forgets every outstanding request (the QP went to Reset: the device forgets them too).
    pub fn clear(&mut self) {
        self.sends.clear();
        self.recvs.clear();
    }

    /// The request a completion with device wr_id `tag` retired, or None when no outstanding
    /// request has that tag (the QP was reset; providers such as mlx5 remove those completions
    /// from the CQ themselves). A send completion also retires the unsignaled sends posted
    /// before it (ibverbs: they complete with it).
    pub fn complete(&mut self, tag: u64) -> Option<Retired> {
        if tag & RECV != 0 {
            let i = self.recvs.iter().position(|r| r.tag == tag)?;
            return self.recvs.remove(i).map(Retired::Recv);
        }
        let i = self.sends.iter().position(|s| s.tag == tag)?;
        let mut last = None;
        for _ in 0..=i {
            last = self.sends.pop_front();
        }
        last.map(Retired::Send)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(l: &mut WrLedger, wr_id: u64, signaled: bool, op: WcOpcode) -> u64 {
        let tag = l.send_tag(0);
        l.push_send(PostedSend {
            tag,
            wr_id,
            signaled,
            op,
        });
        tag
    }
    fn recv(l: &mut WrLedger, wr_id: u64) -> u64 {
        let tag = l.recv_tag();
        l.push_recv(PostedRecv {
            tag,
            wr_id,
            slot: 0,
        });
        tag
    }

    /// The review's repro (a send and a receive sharing wr_id 7, both flushed, the receive's
    /// flush polled first): each flush retires its own request, and the send stays outstanding
    /// until its own flush. Told apart by wr_id, the receive's flush took the send.
    #[test]
    fn a_send_and_a_receive_sharing_a_wr_id_are_told_apart() {
        let mut l = WrLedger::default();
        let r = recv(&mut l, 7);
        let s = send(&mut l, 7, true, WcOpcode::Write);
        assert_ne!(r, s);
        assert_eq!(
            l.complete(r),
            Some(Retired::Recv(PostedRecv {
                tag: r,
                wr_id: 7,
                slot: 0
            }))
        );
        assert_eq!(l.send_outstanding(), 1);
        match l.complete(s) {
            Some(Retired::Send(p)) => assert_eq!((p.wr_id, p.op), (7, WcOpcode::Write)),
            other => panic!("the send's flush retired {other:?}"),
        }
        assert_eq!(l.send_outstanding(), 0);
    }

    #[test]
    fn a_send_completion_retires_the_unsignaled_sends_before_it() {
        let mut l = WrLedger::default();
        send(&mut l, 1, false, WcOpcode::Write);
        send(&mut l, 2, false, WcOpcode::Write);
        let s = send(&mut l, 3, true, WcOpcode::Read);
        let later = send(&mut l, 4, true, WcOpcode::Send);
        assert!(matches!(l.complete(s), Some(Retired::Send(p)) if p.wr_id == 3));
        assert_eq!(l.send_outstanding(), 1);
        assert!(matches!(l.complete(later), Some(Retired::Send(p)) if p.wr_id == 4));
    }

    #[test]
    fn tags_are_unique_and_forgotten_after_a_reset() {
        let mut l = WrLedger::default();
        let a = send(&mut l, 5, true, WcOpcode::Send);
        let b = recv(&mut l, 5);
        let c = send(&mut l, 5, true, WcOpcode::Send);
        assert!(a != b && b != c && a != c);
        l.clear();
        assert_eq!(l.complete(a), None);
        assert_eq!(l.complete(b), None);
        // A list: consecutive tags for the WRs about to be posted.
        assert_eq!(l.send_tag(1), l.send_tag(0) + 1);
    }
}
