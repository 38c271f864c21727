//! The receiving half (the paper's Algorithm 2): chunks arrive on any member in any order; the
//! receiver allocates by the header's total size and places each chunk by (data id, offset),
//! ignoring duplicates (a chunk re-sent after its first QP failed may arrive twice).

use super::layer::PartitionLayer;
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
        });
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
