//! A multi-path connection's state: its paths, MP_ operations, pieces and control messages.

use super::balance::{Estimator, Trunk};
use braid_verbs::{CqId, MemoryRegion, QpNum, RecvWr, SendOp, SendWr, Sge, WcStatus};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// Board keys of the paths: top bit (middleware's), then "virtuoso" (0x56), then the host's
/// address, the application's QP number and the path (255: the control QP).
pub fn board_key(host: u32, app_qp: QpNum, path: u8) -> u64 {
    (1 << 63)
        | (0x56 << 55)
        | ((host as u64 & 0x7f_ffff) << 32)
        | ((app_qp as u64 & 0xff_ffff) << 8)
        | path as u64
}
pub const CTRL_PATH: u8 = 255;

/// Control messages between the two layers of a connection (32 bytes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctrl {
    /// The receiver's k-th RECV on path 0: where a split MP_SEND may write (len 0: do not
    /// split into it).
    Advert {
        k: u64,
        addr: u64,
        len: u32,
        rkey: u32,
    },
    /// My path QP `path` failed and is in Reset: reset yours and connect it to mine.
    ResetReq { path: u8 },
    /// Done: connect yours.
    ResetAck { path: u8 },
}

pub const CTRL_LEN: u64 = 32;

impl Ctrl {
    pub fn encode(&self) -> [u8; CTRL_LEN as usize] {
        let mut b = [0u8; CTRL_LEN as usize];
        match *self {
            Ctrl::Advert { k, addr, len, rkey } => {
                b[0] = 1;
                b[8..16].copy_from_slice(&k.to_le_bytes());
                b[16..24].copy_from_slice(&addr.to_le_bytes());
                b[24..28].copy_from_slice(&len.to_le_bytes());
                b[28..32].copy_from_slice(&rkey.to_le_bytes());
            }
            Ctrl::ResetReq { path } => {
                b[0] = 2;
                b[1] = path;
            }
            Ctrl::ResetAck { path } => {
                b[0] = 3;
                b[1] = path;
            }
        }
        b
    }
    pub fn decode(b: &[u8]) -> Option<Ctrl> {
        if b.len() < CTRL_LEN as usize {
            return None;
        }
        let u64at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let u32at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        match b[0] {
            1 => Some(Ctrl::Advert {
                k: u64at(8),
                addr: u64at(16),
                len: u32at(24),
                rkey: u32at(28),
            }),
            2 => Some(Ctrl::ResetReq { path: b[1] }),
            3 => Some(Ctrl::ResetAck { path: b[1] }),
            _ => None,
        }
    }
}

/// What one WR the layer posted is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    /// Bytes `[off, off + len)` of operation `op`, WRITE or READ.
    Data,
    /// The whole operation as one WR (small message, or not splittable).
    Single,
    /// The zero-byte SEND that ends a split MP_SEND.
    Notify,
    /// A probe WRITE.
    Probe,
    /// A control SEND (ring slot `off`).
    Ctrl,
}

#[derive(Debug, Clone, Copy)]
pub struct Piece {
    pub kind: PieceKind,
    pub conn: usize,
    pub op: u64,
    pub path: usize,
    pub off: u64,
    pub len: u64,
    pub posted_at: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Write,
    Read,
    Send,
}

/// One MP_ operation (an application send WR on a multi-path QP).
#[derive(Debug, Clone)]
pub struct Op {
    pub seq: u64,
    pub wr: SendWr,
    pub kind: OpKind,
    pub len: u64,
    /// Bytes of data pieces not yet completed (split operations).
    pub data_left: u64,
    /// The single WR (small message) or the notify has not completed yet.
    pub single_left: bool,
    /// Data pieces created (the op is split) — none yet while a SEND waits for its advert.
    pub started: bool,
    /// MP_SEND: message index on the connection (which RECV it consumes).
    pub msg: Option<u64>,
    /// MP_SEND split: the advertised buffer (addr, rkey).
    pub target: Option<(u64, u32)>,
    /// MP_SEND: the final SEND (single or notify) has been posted.
    pub send_posted: bool,
    pub status: WcStatus,
}

/// Bytes of an operation still to post: `[off, off + len)`.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub op: u64,
    pub off: u64,
    pub len: u64,
}

/// The paths to one peer host, as every connection to it sees them: path k of every
/// connection leaves from the same address and takes the same route, so capacity estimates and
/// the trunk size are the path's, not the connection's.
pub struct PeerPaths {
    pub est: Vec<Estimator>,
    pub trunk: Vec<Trunk>,
    /// When the paths were last probed (None: never).
    pub probed_at: Option<u64>,
}

impl PeerPaths {
    pub fn new(n: usize, trunk: Trunk) -> Self {
        PeerPaths {
            est: vec![Estimator::default(); n],
            trunk: vec![trunk; n],
            probed_at: None,
        }
    }
}

pub struct Path {
    pub qp: QpNum,
    pub peer_qp: QpNum,
    /// Connected and not failed.
    pub up: bool,
    /// Reset, waiting for the peer's ResetAck.
    pub resetting: bool,
    pub inflight: u32,
    pub inflight_bytes: u64,
    /// Bytes this path carried (WRITE/READ pieces and SENDs that completed).
    pub bytes: u64,
    /// When the path's current busy stretch began or its last piece completed.
    pub mark: u64,
    /// Ranges assigned to this path, not yet posted (static policies).
    pub queue: VecDeque<Range>,
}

/// An application RECV posted on path 0.
#[derive(Debug, Clone)]
pub struct AppRecv {
    pub wr: RecvWr,
    /// Advertised as a split target (a notify for it carries the length in its immediate).
    pub advertised: bool,
}

pub struct Conn {
    pub app_qp: QpNum,
    pub send_cq: CqId,
    pub recv_cq: CqId,
    pub sig_all: bool,
    /// Plain RDMA on path 0 (the peer has no virtuoso).
    pub plain: bool,
    pub connected: bool,
    pub peer_host: u32,
    pub ctrl_qp: QpNum,
    pub peer_ctrl: QpNum,
    pub paths: Vec<Path>,
    /// The peer's probe sink.
    pub sink: Option<(u64, u32)>,
    pub ops: VecDeque<Op>,
    pub next_op: u64,
    /// Ranges any path may take (dynamic policy; pieces of failed paths).
    pub pool: VecDeque<Range>,
    pub rr: usize,
    /// Single (unsplit) WRITE/READ operations to post, or to post again after a failure.
    pub retry: VecDeque<u64>,
    /// The application moved the QP to Error or Reset: failures are its, nothing is re-sent.
    pub closed: bool,
    /// MP_SENDs numbered in posting order (the k-th consumes the peer's k-th RECV).
    pub next_msg: u64,
    /// MP_SENDs retired (adverts below it are stale).
    pub msgs_retired: u64,
    pub adverts: BTreeMap<u64, (u64, u32, u32)>,
    /// Application RECVs on path 0 not completed yet, in order.
    pub recvs: VecDeque<AppRecv>,
    pub recvs_posted: u64,
    /// Control messages waiting for a free ring slot or for the connection.
    pub ctrl_out: VecDeque<Ctrl>,
    pub ctrl_free: Vec<u64>,
    pub ctrl_base: u64,
    pub ctrl_lkey: u32,
    /// Probes in flight.
    pub probing: u32,
    /// What the layer knows of the paths to this peer (shared by its connections).
    pub peer: Rc<RefCell<PeerPaths>>,
    pub sink_mr: Option<MemoryRegion>,
}

impl Conn {
    pub fn op_mut(&mut self, seq: u64) -> Option<&mut Op> {
        let front = self.ops.front()?.seq;
        self.ops.get_mut(seq.checked_sub(front)? as usize)
    }
    pub fn live(&self) -> Vec<bool> {
        self.paths.iter().map(|p| p.up && !p.resetting).collect()
    }
}

/// Helper: a signaled WR of `op` over `sg`.
pub fn wr(wr_id: u64, op: SendOp, sg: Vec<Sge>) -> SendWr {
    SendWr::new(wr_id, op, sg)
}
