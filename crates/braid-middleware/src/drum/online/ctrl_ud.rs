//! `ctrl = "ud"`: the online solver's messages as UD SENDs, one UD QP per agent, addressed by
//! the board (each agent publishes its UD QP; a sender looks its peer's up). Nothing retransmits
//! them: a packet the fabric drops is a message the solver does not get, and the paper's window
//! rule (the last round's value) covers it.
//!
//! **Larger than an MTU.** A UD SEND carries at most one MTU, so a message is cut into segments
//! of `mtu - 16` bytes, each behind a 16-byte header (magic, the sender's host, the message's
//! sequence number toward that peer, the segment's index and the count); the receiver rebuilds
//! it and hands it over only when every segment arrived. A message missing a segment is lost as a
//! whole. Messages are bounded by `slot` (as on RC) and by [`MAX_SEGS`] segments.
//!
//! **Loss measured.** Sequence numbers are per (sender, receiver) and given when a message's
//! first segment is posted, so the receiver counts as lost every number it skipped (the fabric
//! lost a segment of it); messages lost after the last one received are not counted.
//! Injected losses (`ctrl_loss`) are dropped before they get a number and are counted apart.

use super::ctrl::CtrlStats;
use braid_verbs::rendezvous::{Endpoint, SharedBoard, Side};
use braid_verbs::*;
use std::collections::{BTreeMap, VecDeque};

/// Bytes of a segment header.
pub const SEG_HDR: usize = 16;
const MAGIC: u16 = 0x4354;
/// Segments of one message at most.
pub const MAX_SEGS: usize = 64;
/// wr_id tags (the slot in the low bits).
const TX: u64 = 0x5443_0000 << 32;
const RX: u64 = 0x5243_0000 << 32;
/// Messages held per peer while its QP is unknown or the send slots are busy (the oldest goes).
const MAX_QUEUED: usize = 16;

/// Board key of host `h`'s control UD QP.
fn ud_ctrl_key(h: u32) -> u64 {
    (1 << 63) | (0x31 << 56) | (h as u64 & 0xFF_FFFF)
}

struct Seg {
    from: u32,
    seq: u32,
    idx: u16,
    count: u16,
}

fn header(s: &Seg) -> [u8; SEG_HDR] {
    let mut b = [0u8; SEG_HDR];
    b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
    b[2] = 1;
    b[4..8].copy_from_slice(&s.from.to_le_bytes());
    b[8..12].copy_from_slice(&s.seq.to_le_bytes());
    b[12..14].copy_from_slice(&s.idx.to_le_bytes());
    b[14..16].copy_from_slice(&s.count.to_le_bytes());
    b
}

fn parse(b: &[u8]) -> Option<Seg> {
    if b.len() < SEG_HDR || u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != 1 {
        return None;
    }
    let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let h = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let s = Seg {
        from: u(4),
        seq: u(8),
        idx: h(12),
        count: h(14),
    };
    (s.count >= 1 && (s.count as usize) <= MAX_SEGS && s.idx < s.count).then_some(s)
}

/// A message being rebuilt from one peer.
struct Partial {
    seq: u32,
    parts: Vec<Option<Vec<u8>>>,
}

#[derive(Default)]
struct Peer {
    dest: Option<RemoteQp>,
    queue: VecDeque<Vec<u8>>,
    next_seq: u32,
    /// Receiving: the next sequence number expected from this peer, the message being rebuilt.
    expect: u32,
    partial: Option<Partial>,
}

pub struct UdCtrl {
    board: SharedBoard,
    me: u32,
    qp: QpNum,
    mr: MemoryRegion,
    /// Bytes of a segment (the MTU).
    seg: u64,
    recvs: u32,
    free: Vec<u32>,
    peers: BTreeMap<u32, Peer>,
}

impl UdCtrl {
    /// Creates the UD QP on `cq` with its slots at `addr`, posts its receives, publishes it.
    pub fn start(
        v: &mut dyn Verbs,
        board: SharedBoard,
        cq: CqId,
        addr: u64,
        recvs: u32,
        sends: u32,
    ) -> Result<UdCtrl, VerbsError> {
        let seg = v.caps().mtu as u64;
        if seg <= SEG_HDR as u64 {
            return Err(VerbsError::InvalidArgument(
                "MTU too small for control segments",
            ));
        }
        let mr = v.reg_mr(addr, (recvs + sends) as u64 * seg, Access::LOCAL.tracked())?;
        let qp = crate::drum::ud::open_ud_qp(v, cq, sends, recvs)?;
        let me = v.local_host();
        let u = UdCtrl {
            board: board.clone(),
            me,
            qp,
            mr,
            seg,
            recvs,
            free: (0..sends).rev().collect(),
            peers: BTreeMap::new(),
        };
        for i in 0..recvs {
            v.post_recv(qp, u.recv_wr(i))?;
        }
        board.borrow_mut().publish(
            ud_ctrl_key(me),
            Side::Server,
            Endpoint {
                host: me,
                qpn: qp,
                addr: 0,
                rkey: 0,
            },
        );
        Ok(u)
    }

    /// The region the QP's slots take.
    pub fn region_len(recvs: u32, sends: u32, mtu: u32) -> u64 {
        (recvs + sends) as u64 * mtu as u64
    }

    pub fn qp(&self) -> QpNum {
        self.qp
    }

    fn recv_wr(&self, i: u32) -> RecvWr {
        RecvWr {
            wr_id: RX | i as u64,
            sg_list: vec![Sge {
                addr: self.mr.addr + i as u64 * self.seg,
                length: self.seg as u32,
                lkey: self.mr.lkey,
            }],
        }
    }

    /// Segments a message of `len` bytes takes (None: more than [`MAX_SEGS`]).
    pub fn segments(&self, len: usize) -> Option<usize> {
        let n = len.div_ceil(self.seg as usize - SEG_HDR).max(1);
        (n <= MAX_SEGS).then_some(n)
    }

    /// Looks the peers' QPs up on the board; true while some are not there yet.
    pub fn setup(&mut self, v: &mut dyn Verbs, peers: &[u32], st: &mut CtrlStats) -> bool {
        let mut waiting = false;
        for &h in peers {
            let p = self.peers.entry(h).or_default();
            if p.dest.is_none() {
                match self.board.borrow().lookup(ud_ctrl_key(h), Side::Server) {
                    Some(ep) => {
                        p.dest = Some(ep.remote());
                        st.qps_ready += 1;
                    }
                    None => waiting = true,
                }
            }
        }
        for &h in peers {
            self.pump(v, h, st);
        }
        waiting
    }

    /// Gives up on the peers still unknown (their queued messages are dropped).
    pub fn give_up(&mut self, st: &mut CtrlStats) {
        for p in self.peers.values_mut() {
            if p.dest.is_none() {
                st.errors += 1;
                st.queue_drops += p.queue.len() as u64;
                p.queue.clear();
            }
        }
    }

    /// Queues `bytes` for `peer` and sends what can go.
    pub fn send(&mut self, v: &mut dyn Verbs, peer: u32, bytes: Vec<u8>, st: &mut CtrlStats) {
        let p = self.peers.entry(peer).or_default();
        if p.queue.len() >= MAX_QUEUED {
            p.queue.pop_front();
            st.queue_drops += 1;
        }
        p.queue.push_back(bytes);
        self.pump(v, peer, st);
    }

    /// Posts the queued messages of `peer`, whole, while there are send slots for all their
    /// segments.
    fn pump(&mut self, v: &mut dyn Verbs, peer: u32, st: &mut CtrlStats) {
        let room = self.seg as usize - SEG_HDR;
        loop {
            let Some(p) = self.peers.get_mut(&peer) else {
                return;
            };
            let Some(dest) = p.dest else {
                return;
            };
            let Some(len) = p.queue.front().map(|b| b.len()) else {
                return;
            };
            let count = len.div_ceil(room).max(1);
            if self.free.len() < count {
                return;
            }
            let bytes = p.queue.pop_front().expect("non-empty");
            let seq = p.next_seq;
            p.next_seq = p.next_seq.wrapping_add(1);
            let mut ok = true;
            for idx in 0..count {
                let part = &bytes[(idx * room).min(len)..((idx + 1) * room).min(len)];
                let slot = self.free.pop().expect("counted");
                let at = self.mr.addr + (self.recvs + slot) as u64 * self.seg;
                let h = header(&Seg {
                    from: self.me,
                    seq,
                    idx: idx as u16,
                    count: count as u16,
                });
                let mut b = h.to_vec();
                b.extend_from_slice(part);
                if v.write_local(at, &b).is_err() {
                    self.free.push(slot);
                    st.errors += 1;
                    ok = false;
                    break;
                }
                let mut wr = SendWr::new(
                    TX | slot as u64,
                    SendOp::Send,
                    vec![Sge {
                        addr: at,
                        length: b.len() as u32,
                        lkey: self.mr.lkey,
                    }],
                );
                wr.ud_dest = Some(dest);
                if v.post_send(self.qp, wr).is_err() {
                    self.free.push(slot);
                    st.errors += 1;
                    ok = false;
                    break;
                }
                st.segments += 1;
            }
            if ok {
                st.posted += 1;
                st.posted_bytes += len as u64;
            }
        }
    }

    /// Handles a completion of the UD QP; a message rebuilt whole is returned as (peer, bytes).
    pub fn on_completion(
        &mut self,
        v: &mut dyn Verbs,
        wc: &WorkCompletion,
        st: &mut CtrlStats,
    ) -> Option<(u32, Vec<u8>)> {
        if wc.wr_id >> 48 != RX >> 48 {
            // A send slot is free again (a UD send fails only locally).
            if wc.status != WcStatus::Success {
                st.errors += 1;
            }
            self.free.push((wc.wr_id & 0xFFFF_FFFF) as u32);
            let peers: Vec<u32> = self.peers.keys().copied().collect();
            for h in peers {
                self.pump(v, h, st);
            }
            return None;
        }
        let i = (wc.wr_id & 0xFFFF_FFFF) as u32;
        let addr = self.mr.addr + i as u64 * self.seg;
        let got = if wc.status == WcStatus::Success {
            v.read_local(addr, wc.byte_len).ok()
        } else {
            st.errors += 1;
            None
        };
        if v.post_recv(self.qp, self.recv_wr(i)).is_err() {
            st.errors += 1;
        }
        let b = got?;
        let Some(s) = parse(&b) else {
            st.bad_segments += 1;
            return None;
        };
        let payload = b[SEG_HDR..].to_vec();
        let p = self.peers.entry(s.from).or_default();
        // Sequence numbers wrap: compare by signed distance.
        if (s.seq.wrapping_sub(p.expect) as i32) < 0 {
            st.bad_segments += 1;
            return None;
        }
        if let Some(m) = &p.partial {
            let d = s.seq.wrapping_sub(m.seq) as i32;
            if d < 0 {
                st.bad_segments += 1;
                return None;
            }
            if d > 0 {
                // A newer message began before this one was whole: it is lost.
                st.lost += 1;
                p.expect = m.seq.wrapping_add(1);
                p.partial = None;
            }
        }
        // Numbers skipped entirely: messages none of whose segments arrived.
        st.lost += s.seq.wrapping_sub(p.expect) as u64;
        p.expect = s.seq;
        let m = p.partial.get_or_insert_with(|| Partial {
            seq: s.seq,
            parts: vec![None; s.count as usize],
        });
        if m.parts.len() != s.count as usize {
            st.bad_segments += 1;
            return None;
        }
        m.parts[s.idx as usize] = Some(payload);
        if m.parts.iter().all(|x| x.is_some()) {
            let whole: Vec<u8> = p
                .partial
                .take()
                .expect("some")
                .parts
                .into_iter()
                .flat_map(|x| x.expect("all"))
                .collect();
            p.expect = s.seq.wrapping_add(1);
            st.received += 1;
            return Some((s.from, whole));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_bad_ones_are_refused() {
        let s = Seg {
            from: 7,
            seq: 0xDEAD_BEEF,
            idx: 2,
            count: 3,
        };
        let b = header(&s);
        let p = parse(&b).expect("parses");
        assert_eq!((p.from, p.seq, p.idx, p.count), (7, 0xDEAD_BEEF, 2, 3));
        let mut bad = b;
        bad[0] ^= 1;
        assert!(parse(&bad).is_none());
        let mut idx = b;
        idx[12] = 3; // index == count
        assert!(parse(&idx).is_none());
        assert!(parse(&b[..10]).is_none());
    }
}
