//! The receiving half (the paper's Algorithm 2): chunks arrive on any member in any order; the
//! receiver allocates by the header's total size and places each chunk by (data id, offset),
//! ignoring duplicates (a chunk re-sent after its first QP failed may arrive twice).

use super::conn::app_wc;
use super::layer::{PartitionLayer, RECV_TAG};
use super::wire::*;
use braid_verbs::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many finished data ids a connection remembers to recognise late duplicates.
const DONE_MEMORY: usize = 1 << 16;

/// A message being reassembled.
pub(super) struct Reasm {
    total: u64,
    got: u64,
    data: Vec<u8>,
    seen: BTreeSet<u64>,
    imm: Option<u32>,
    /// The highest chunk end placed so far: a chunk below it arrived out of order.
    max_end: u64,
}

/// A complete message waiting for the application's RECV.
pub(super) struct Ready {
    /// The bytes (None: a WRITE_WITH_IMM, whose bytes the NIC placed).
    pub data: Option<Vec<u8>>,
    pub total: u64,
    pub imm: Option<u32>,
}

#[derive(Default)]
pub(super) struct RxState {
    pub app_recvs: VecDeque<RecvWr>,
    pub bufs_posted: bool,
    reasm: BTreeMap<u32, Reasm>,
    done: BTreeSet<u32>,
    done_order: VecDeque<u32>,
    pub ready: VecDeque<Ready>,
    /// Per member: the WRITE_WITH_IMM its last header announced (data id, total).
    write_imm: BTreeMap<usize, (u32, u64)>,
}

impl RxState {
    fn finish(&mut self, id: u32, r: Ready) {
        self.done.insert(id);
        self.done_order.push_back(id);
        if self.done_order.len() > DONE_MEMORY {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
        self.ready.push_back(r);
    }
}

impl PartitionLayer {
    /// A receive buffer at `addr` of member `m` completed successfully.
    pub(super) fn on_chunk_received(
        &mut self,
        below: &mut dyn Verbs,
        app_qp: QpNum,
        m: usize,
        addr: u64,
        wc: &WorkCompletion,
    ) {
        if wc.opcode == WcOpcode::RecvWithImm {
            // The last chunk of a WRITE_WITH_IMM: its header came just before on this QP.
            let Some(rx) = self.conns.get_mut(&app_qp).map(|c| &mut c.rx) else {
                return;
            };
            let (id, total) = match rx.write_imm.remove(&m) {
                Some(x) => x,
                None => (u32::MAX, wc.byte_len), // no header seen: report what arrived
            };
            if rx.done.contains(&id) {
                self.c.rx_dups += 1;
                return;
            }
            self.c.rx_chunks += 1;
            rx.finish(
                id,
                Ready {
                    data: None,
                    total,
                    imm: wc.imm,
                },
            );
            return;
        }
        let Some(h) = self
            .read_local_charged(below, addr, HDR)
            .and_then(|b| Header::decode(&b))
        else {
            return; // not ours: a peer without the layer sent a plain SEND
        };
        if h.flags & F_WRITE_IMM != 0 {
            if let Some(c) = self.conns.get_mut(&app_qp) {
                c.rx.write_imm.insert(m, (h.id, h.total));
            }
            return;
        }
        let Some(conn) = self.conns.get(&app_qp) else {
            return;
        };
        let rx = &conn.rx;
        if rx.done.contains(&h.id)
            || rx
                .reasm
                .get(&h.id)
                .is_some_and(|r| r.seen.contains(&h.offset))
        {
            self.c.rx_dups += 1;
            return;
        }
        // Out of the layer's buffer into the message: a copy, charged.
        let payload = if h.len > 0 {
            below.charge(Work::Copy(h.len as u64));
            self.c.copied += h.len as u64;
            self.read_local_charged(below, addr + HDR, h.len as u64)
                .unwrap_or_else(|| vec![0; h.len as usize])
        } else {
            Vec::new()
        };
        self.c.rx_chunks += 1;
        let rx = &mut self.conns.get_mut(&app_qp).expect("checked").rx;
        let r = rx.reasm.entry(h.id).or_insert_with(|| Reasm {
            total: h.total,
            got: 0,
            // The paper's receiver allocates by the total size first.
            data: vec![0; h.total as usize],
            seen: BTreeSet::new(),
            imm: None,
            max_end: 0,
        });
        if h.offset < r.max_end {
            self.c.rx_reordered += 1;
        }
        r.max_end = r.max_end.max(h.offset + h.len as u64);
        let end = (h.offset + h.len as u64).min(r.total) as usize;
        let start = (h.offset as usize).min(end);
        r.data[start..end].copy_from_slice(&payload[..end - start]);
        r.seen.insert(h.offset);
        r.got += (end - start) as u64;
        if h.flags & F_IMM != 0 {
            r.imm = Some(h.imm);
        }
        if r.got >= r.total {
            let r = rx.reasm.remove(&h.id).expect("present");
            rx.finish(
                h.id,
                Ready {
                    data: Some(r.data),
                    total: r.total,
                    imm: r.imm,
                },
            );
        }
    }
}

impl PartitionLayer {
    /// Posts the layer's receive buffers on every member of `app_qp` (once the application
    /// shows it uses RECVs and the connection is up).
    pub(super) fn ensure_bufs(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        let per = self.cfg.recv_buffers as u64;
        let size = HDR + self.cfg.chunk.0;
        let Some(conn) = self.conns.get(&app_qp) else {
            return;
        };
        if conn.rx.bufs_posted || !conn.connected || conn.error {
            return;
        }
        let n = conn.members.len() as u64;
        let addr = self.alloc(n * per * size);
        let Ok(mr) = below.reg_mr(addr, n * per * size, Access::LOCAL.tracked()) else {
            return;
        };
        self.conns.get_mut(&app_qp).expect("checked").rx.bufs_posted = true;
        for m in 0..n as usize {
            for j in 0..per {
                let a = addr + (m as u64 * per + j) * size;
                let idx = self.bufs.len();
                self.bufs.push((app_qp, m, a, mr.lkey));
                self.repost(below, idx);
            }
        }
    }

    pub(super) fn repost(&mut self, below: &mut dyn Verbs, idx: usize) {
        let (app_qp, m, addr, lkey) = self.bufs[idx];
        let Some(conn) = self.conns.get(&app_qp) else {
            return;
        };
        let mb = &conn.members[m];
        if mb.failed {
            return;
        }
        let wr = RecvWr {
            wr_id: RECV_TAG | idx as u64,
            sg_list: vec![Sge {
                addr,
                length: (HDR + self.cfg.chunk.0) as u32,
                lkey,
            }],
        };
        let _ = below.post_recv(mb.qpn, wr);
    }

    /// Hands complete messages to the application's posted RECVs, in order.
    pub(super) fn deliver_ready(&mut self, below: &mut dyn Verbs, app_qp: QpNum) {
        loop {
            let Some(conn) = self.conns.get_mut(&app_qp) else {
                return;
            };
            if conn.rx.ready.is_empty() || conn.rx.app_recvs.is_empty() {
                return;
            }
            let r: Ready = conn.rx.ready.pop_front().expect("checked");
            let recv = conn.rx.app_recvs.pop_front().expect("checked");
            let (cq, peer) = (conn.recv_cq, conn.peer);
            let cap: u64 = recv.sg_list.iter().map(|s| s.length as u64).sum();
            let mut status = WcStatus::Success;
            if let Some(data) = &r.data {
                if r.total > cap {
                    status = WcStatus::LocalLengthError;
                } else {
                    // The reassembled message goes into the application's buffer: a copy.
                    let mut off = 0usize;
                    for s in &recv.sg_list {
                        if off >= data.len() {
                            break;
                        }
                        let k = (s.length as usize).min(data.len() - off);
                        let _ = below.write_local(s.addr, &data[off..off + k]);
                        off += k;
                    }
                    below.charge(Work::Copy(r.total));
                    self.c.copied += r.total;
                }
            }
            let op = if r.imm.is_some() {
                WcOpcode::RecvWithImm
            } else {
                WcOpcode::Recv
            };
            let mut wc = app_wc(recv.wr_id, status, op, r.total, app_qp);
            wc.imm = r.imm;
            if let Some(p) = peer {
                (wc.src_host, wc.src_qp) = (p.host, p.qpn);
            }
            self.push_app(cq, wc);
        }
    }

    pub(super) fn read_local_charged(
        &mut self,
        below: &mut dyn Verbs,
        addr: u64,
        len: u64,
    ) -> Option<Vec<u8>> {
        below.read_local(addr, len).ok()
    }
}

impl PartitionLayer {
    /// A receive completion on a member (see `rx.rs`).
    pub(super) fn on_recv_wc(
        &mut self,
        below: &mut dyn Verbs,
        wc: &WorkCompletion,
    ) -> Option<QpNum> {
        let idx = (wc.wr_id & !RECV_TAG) as usize;
        let &(app_qp, m, addr, _) = self.bufs.get(idx)?;
        if wc.status != WcStatus::Success {
            return Some(app_qp); // flushed: the member failed; nothing to repost
        }
        self.on_chunk_received(below, app_qp, m, addr, wc);
        self.repost(below, idx);
        Some(app_qp)
    }
}
