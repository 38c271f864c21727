//! The sender's and receiver's bookkeeping types: messages, chunks, members, connections.

use super::rx::RxState;
use super::MAX_QPS;
use braid_verbs::*;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A WRITE at the application's remote address plus the offset.
    Write,
    /// A SEND of header + payload into the receiver's buffers.
    Send,
    /// Header SEND, then WRITE_WITH_IMM with the application's imm (the last chunk).
    WriteImm,
    /// The application's WR as it is (READ, NOP): one chunk.
    Whole,
}

#[derive(Debug, Clone)]
pub(super) struct Chunk {
    pub(super) id: u32,
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) kind: Kind,
    /// The held-back last chunk of a message completing at the receiver.
    pub(super) fin: bool,
    pub(super) pin: Option<usize>,
}

pub(super) struct Msg {
    pub(super) id: u32,
    pub(super) wr: SendWr,
    pub(super) total: u64,
    pub(super) nchunks: u32,
    pub(super) completed: u32,
    /// Chunks posted to the NIC so far (re-sends included).
    pub(super) posted: u32,
    pub(super) held: Option<Chunk>,
    /// Chunks waiting in the shared (unpinned) queue.
    pub(super) unpinned: u32,
    /// Per member: chunks pinned to it (queued) or outstanding on it.
    pub(super) on: [u32; MAX_QPS as usize],
    pub(super) opcode: WcOpcode,
}

pub(super) struct Member {
    pub(super) qpn: QpNum,
    pub(super) failed: bool,
    pub(super) out_bytes: u64,
    pub(super) out_chunks: u32,
}

pub(super) struct Conn {
    pub(super) send_cq: CqId,
    pub(super) recv_cq: CqId,
    pub(super) sig_all: bool,
    pub(super) max_send_wr: u32,
    pub(super) members: Vec<Member>,
    pub(super) peer: Option<RemoteQp>,
    pub(super) connected: bool,
    /// The peer runs no `partition` layer: WRs and RECVs go as they are on member 0.
    pub(super) plain: bool,
    pub(super) error: bool,
    pub(super) msgs: VecDeque<Msg>,
    pub(super) shared: VecDeque<Chunk>,
    pub(super) pinned: Vec<VecDeque<Chunk>>,
    pub(super) next_id: u32,
    pub(super) rr: usize,
    pub(super) rx: RxState,
}

impl Conn {
    pub(super) fn alive(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&m| !self.members[m].failed)
            .collect()
    }
}

pub(super) struct Inflight {
    pub(super) app_qp: QpNum,
    pub(super) member: usize,
    pub(super) chunk: Chunk,
    pub(super) slot: Option<u32>,
}

#[derive(Debug, Default, Clone)]
pub(super) struct Counters {
    pub chunks: [u64; MAX_QPS as usize],
    pub messages: u64,
    pub resent: u64,
    pub member_failures: u64,
    pub conn_errors: u64,
    pub conns_multi: u64,
    pub conns_single: u64,
    pub rx_chunks: u64,
    pub rx_dups: u64,
    pub rx_reordered: u64,
    pub copied: u64,
    pub slot_waits: u64,
}

pub(super) fn app_wc(
    wr_id: u64,
    status: WcStatus,
    opcode: WcOpcode,
    len: u64,
    qp: QpNum,
) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode,
        byte_len: len,
        imm: None,
        qp_num: qp,
        src_host: 0,
        src_qp: 0,
    }
}

pub(super) fn opcode_of(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
        SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
        SendOp::Read => WcOpcode::Read,
        _ => WcOpcode::Nop,
    }
}
