//! Verbs data types, shaped after ibverbs.

pub type QpNum = u32;
pub type CqId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connection.
    Rc,
    /// Unreliable connection: no ACKs, no retransmission.
    Uc,
    /// Unreliable datagram: one QP talks to many, SEND only, one packet per message.
    Ud,
}

/// Everything ibv_create_qp needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpInit {
    pub qp_type: QpType,
    pub send_cq: CqId,
    pub recv_cq: CqId,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    /// Every send WR generates a completion (IBV_QP_INIT_ATTR sq_sig_all).
    pub sq_sig_all: bool,
    /// Cross-channel managed send queue: WRs wait for SEND_ENABLE before they execute.
    pub managed_send: bool,
    /// Cross-channel managed receive queue: RECVs wait for RECV_ENABLE.
    pub managed_recv: bool,
    /// Traffic class (priority) of this QP's packets; None = the NIC's default.
    pub priority: Option<u8>,
}

impl QpInit {
    pub fn rc(cq: CqId) -> Self {
        Self {
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 1 << 14,
            max_recv_wr: 1 << 14,
            sq_sig_all: false,
            managed_send: false,
            managed_recv: false,
            priority: None,
        }
    }
}

/// The remote end of a connection, as exchanged out of band (rdma_cm or a socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteQp {
    pub host: u32,
    pub qpn: QpNum,
    /// UDP source port this connection's packets carry (RoCEv2 uses it for ECMP entropy).
    /// None lets the NIC choose one.
    pub udp_sport: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    pub local_write: bool,
    pub remote_write: bool,
    pub remote_read: bool,
}

impl Access {
    pub const ALL: Access = Access {
        local_write: true,
        remote_write: true,
        remote_read: true,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRegion {
    pub addr: u64,
    pub len: u64,
    pub lkey: u32,
    pub rkey: u32,
}

/// One scatter-gather element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendWithImm(u32),
    Write,
    WriteWithImm(u32),
    Read,
    /// Cross-channel: block this send queue until `cq` has `count` more completions than when
    /// the WAIT reached the head of the queue.
    Wait {
        cq: CqId,
        count: u32,
    },
    /// Cross-channel: allow `count` more WRs of managed QP `qp`'s send queue to execute.
    SendEnable {
        qp: QpNum,
        count: u32,
    },
    /// Cross-channel: allow `count` more RECVs of managed QP `qp`.
    RecvEnable {
        qp: QpNum,
        count: u32,
    },
    /// Does nothing but complete (a zero-byte marker WR).
    Nop,
}

impl SendOp {
    pub fn carries_data(&self) -> bool {
        matches!(
            self,
            SendOp::Send
                | SendOp::SendWithImm(_)
                | SendOp::Write
                | SendOp::WriteWithImm(_)
                | SendOp::Read
        )
    }
}

/// A send work request (ibv_send_wr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: SendOp,
    pub sg_list: Vec<Sge>,
    /// Generate a completion (IBV_SEND_SIGNALED); ignored when the QP signals all.
    pub signaled: bool,
    /// Data is copied at post time (IBV_SEND_INLINE): no lkey needed, buffer reusable at once.
    pub inline: bool,
    /// For WRITE/READ: the remote address and key.
    pub remote_addr: u64,
    pub rkey: u32,
    /// For UD: the destination.
    pub ud_dest: Option<RemoteQp>,
    /// Ask the transport to deliver this operation only after all earlier ones (the MP-RDMA
    /// synchronise flag; single-path transports are in order anyway).
    pub fence: bool,
}

impl SendWr {
    pub fn new(wr_id: u64, op: SendOp, sg_list: Vec<Sge>) -> Self {
        Self {
            wr_id,
            op,
            sg_list,
            signaled: true,
            inline: false,
            remote_addr: 0,
            rkey: 0,
            ud_dest: None,
            fence: false,
        }
    }
    /// Total bytes of the scatter-gather list.
    pub fn len(&self) -> u64 {
        self.sg_list.iter().map(|s| s.length as u64).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A receive work request (ibv_recv_wr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sg_list: Vec<Sge>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// The transport gave up (retry count exceeded).
    RetryExceeded,
    /// A RECV was too small for the SEND.
    LocalLengthError,
    /// The QP was destroyed with this WR outstanding.
    Flushed,
    RemoteAccessError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    Send,
    Write,
    Read,
    Recv,
    RecvWithImm,
    Wait,
    SendEnable,
    RecvEnable,
    Nop,
}

/// A work completion (ibv_wc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub byte_len: u64,
    pub imm: Option<u32>,
    pub qp_num: QpNum,
    /// For receives: the sender's host and QP.
    pub src_host: u32,
    pub src_qp: QpNum,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerbsError {
    NoSuchQp(QpNum),
    NoSuchCq(CqId),
    BadKey(u32),
    QueueFull,
    InvalidState(&'static str),
    InvalidWr(&'static str),
    Unsupported(&'static str),
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerbsError::NoSuchQp(q) => write!(f, "no such QP {q}"),
            VerbsError::NoSuchCq(c) => write!(f, "no such CQ {c}"),
            VerbsError::BadKey(k) => write!(f, "no memory region with key {k:#x}"),
            VerbsError::QueueFull => write!(f, "work queue full"),
            VerbsError::InvalidState(s) => write!(f, "invalid QP state: {s}"),
            VerbsError::InvalidWr(s) => write!(f, "invalid work request: {s}"),
            VerbsError::Unsupported(s) => write!(f, "unsupported: {s}"),
        }
    }
}

impl std::error::Error for VerbsError {}
