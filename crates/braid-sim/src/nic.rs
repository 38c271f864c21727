//! The RNIC: QPs (RC, UC, UD) with send and receive queues, CQs, registered memory, the transmit
//! arbiter (round-robin between QPs at MTU granularity), the QP-context cache, cross-channel
//! WAIT/ENABLE work requests, and the RoCEv2 RC transport (PSNs, cumulative ACK/NAK, go-back-N on
//! NAK and timeout) with DCQCN rate control.
//!
//! The NIC never touches the event queue: every call returns its wishes (timers, a transmit kick,
//! CQ notifications, records) in [`Effects`], which the world carries out.

use crate::arbiter::{Ets, Rotations};
use crate::config::{AckPriority, ArbiterPolicy, NicConfig, TransportConfig, TransportKind};
use crate::memory::Memory;
use crate::packet::*;
use crate::qp_cache::QpCache;
use crate::transport::mp_rdma::{MpRdmaParams, MpRdmaTransport};
use crate::transport::rc::{RcConfig, RcTransport};
pub use crate::transport::TimerKind;
use crate::transport::{
    DataInfo, Fatal, Feedback, Plan, Reply, RetryLimits, RxClass, Transport, TxFx,
};
use braid_engine::time::{Time, S};
use braid_verbs::*;
use std::collections::VecDeque;

/// Parameters every NIC shares, resolved once from the scenario.
#[derive(Debug, Clone)]
pub struct NicParams {
    pub nic: NicConfig,
    pub transport: TransportConfig,
    pub ack_prio: u8,
}

impl NicParams {
    pub fn new(nic: NicConfig, transport: TransportConfig) -> Self {
        let ack_prio = match nic.ack_priority {
            AckPriority::High => 0,
            AckPriority::Data => nic.priority,
        };
        NicParams {
            nic,
            transport,
            ack_prio,
        }
    }
}

/// A completed message, for the messages table.
#[derive(Debug, Clone)]
pub struct MsgRecord {
    pub qpn: u32,
    pub dst: u32,
    pub op: &'static str,
    pub bytes: u64,
    pub post_ps: Time,
    pub complete_ps: Time,
    pub wr_id: u64,
}

/// What a NIC call wants done.
#[derive(Default)]
pub struct Effects {
    pub timers: Vec<(Time, TimerKind, QpNum, u32)>,
    /// The transmit side may have something new to send.
    pub kick: bool,
    pub notify: Vec<CqId>,
    pub messages: Vec<MsgRecord>,
    /// The receive backlog crossed the threshold: pause (true) / resume (false) the upstream port.
    pub rx_pfc: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QpState {
    /// Emptied and disconnected (after `modify_qp(Reset)`): posts are refused, arriving packets
    /// dropped, until `connect_qp`.
    Reset,
    /// Created, not connected. (It still accepts arriving packets, as if in RTR.)
    Init,
    Rts,
    /// The transport gave up, the peer refused an access, or the consumer asked: nothing is
    /// sent or received, every WR posted completes Flushed at once.
    Error,
}
// (The verbs-level QpState is braid_verbs::QpState; this one is the NIC's own.)

impl QpState {
    fn verbs(self) -> braid_verbs::QpState {
        match self {
            QpState::Reset => braid_verbs::QpState::Reset,
            QpState::Init => braid_verbs::QpState::Init,
            QpState::Rts => braid_verbs::QpState::Rts,
            QpState::Error => braid_verbs::QpState::Error,
        }
    }
}

/// InfiniBand QP numbers are 24 bits: the NIC tags its transport timers with the QP's epoch in
/// the 8 bits above, so that timers of an incarnation that went to Error or Reset are ignored.
const QPN_BITS: u32 = 24;
const QPN_MASK: u32 = (1 << QPN_BITS) - 1;

/// Address `k` of a host whose node id is `node` ([`Caps::local_addrs`], a RoCEv2 GID index):
/// `node | k << 24`. Address 0 is the node id itself; switches route on the node part.
pub fn host_alias(node: u32, k: u8) -> u32 {
    node | (k as u32) << 24
}

/// The node id an address belongs to (masks the alias index).
#[inline]
pub fn addr_node(addr: u32) -> u32 {
    addr & 0x00FF_FFFF
}

/// AETH NAK code of a remote access error (IBA 9.7.5.2.4), in a NAK packet's `aux`.
pub const NAK_REMOTE_ACCESS: u32 = 2;

#[derive(Debug)]
struct SendWqe {
    wr: SendWr,
    bytes: u64,
    /// PSN of the first packet; assigned when the WQE first reaches the transmit cursor.
    first_psn: Option<u32>,
    npkts: u32,
    post_ps: Time,
    /// Earliest start (WQE processing time and message-rate limits).
    ready_ps: Option<Time>,
    /// Control WRs: executed. Data WRs: acknowledged (READ: all response data in).
    done: bool,
    /// WAIT: the CQ completion count it waits for, fixed when it is posted (the CQ's
    /// cumulative wait index plus its count; None for a zero-count WAIT, which never blocks).
    wait_target: Option<u64>,
    /// READ: response packets received in order.
    read_got: u32,
    signaled: bool,
    /// MP-RDMA: message sequence number (among messages that consume a RECV).
    msn: u32,
}

#[derive(Debug)]
struct RecvWqe {
    wr: RecvWr,
}

/// A message awaiting its in-order completion at an MP-RDMA receiver.
#[derive(Debug)]
struct PendingRecv {
    byte_len: u64,
    send: bool,
    imm: Option<u32>,
    src_host: u32,
    src_qp: u32,
}

/// A READ the responder is answering.
#[derive(Debug)]
struct ReadJob {
    first_psn: u32,
    npkts: u32,
    next: u32,
    remote_addr: u64,
    len: u64,
}

#[derive(Debug)]
pub struct Qp {
    pub qpn: QpNum,
    pub qp_type: QpType,
    send_cq: CqId,
    recv_cq: CqId,
    sq_sig_all: bool,
    managed_send: bool,
    managed_recv: bool,
    cross_channel: bool,
    retry: RetryLimits,
    /// The source address its packets carry (one of the host's addresses).
    pub local_addr: u32,
    /// The source port it was created with (restored by Reset).
    default_sport: u16,
    /// Bumped on Error and Reset: timers of the previous incarnation are stale.
    epoch: u8,
    max_send_wr: u32,
    max_recv_wr: u32,
    pub prio: u8,
    state: QpState,
    pub remote_host: u32,
    pub remote_qpn: QpNum,
    pub sport: u16,
    // --- requester / sender ---
    sq: VecDeque<SendWqe>,
    /// Absolute number of WRs retired before sq[0] (for ENABLE counting).
    sq_base: u64,
    send_enabled: u64,
    /// New-data cursor: the first WQE not yet fully sent once, and the packet within it.
    /// (Retransmissions are located by PSN; the transport decides which PSN goes next.)
    cur: usize,
    cur_pkt: u32,
    /// The PSN the next new packet takes.
    next_psn: u32,
    next_msg_ps: Time,
    read_rewound: bool,
    /// Reliability and congestion control.
    pub t: Box<dyn Transport>,
    // --- responder / receiver ---
    rq: VecDeque<RecvWqe>,
    recv_enabled: u64,
    recv_base: u64,
    /// UC sequencing: the next PSN expected, and whether the current message is being discarded.
    uc_epsn: u32,
    uc_discard: bool,
    /// SEND in progress: bytes placed so far.
    recv_off: u64,
    reads: VecDeque<ReadJob>,
    in_active: bool,
    /// MP-RDMA sender: MSN of the next message that consumes a RECV.
    send_msn: u32,
    /// MP-RDMA receiver: messages whose tail arrived and that complete (in order) once the
    /// transport's rcv_nxt passes their tail PSN.
    rx_pending: std::collections::BTreeMap<u32, PendingRecv>,
    /// With `nic.data_check`: the PSNs this receiver has placed (or, READ requests, served),
    /// kept by the NIC itself to audit synchronise independently of the transport.
    rx_audit: Option<PsnSet>,
    // --- statistics ---
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub retx_pkts: u64,
}

impl Qp {
    /// The PSN of the next packet never sent: the cursor's position.
    fn cursor_psn(&self) -> u32 {
        match self.sq.get(self.cur).and_then(|w| w.first_psn) {
            Some(f) => f + self.cur_pkt,
            None => self.next_psn,
        }
    }
    fn data_prio(&self) -> u8 {
        self.prio
    }
    pub fn timeouts(&self) -> u64 {
        self.t.timeouts()
    }
}

#[derive(Debug, Default)]
struct Cq {
    entries: VecDeque<WorkCompletion>,
    depth: u32,
    /// Completions ever added (WAIT counts against this).
    total: u64,
    /// QPs whose send queue waits on this CQ.
    waiters: Vec<QpNum>,
    overruns: u64,
    /// Armed by req_notify_cq: the next completion notifies (once).
    armed: bool,
    /// The cumulative wait index (mlx5 `wait_index`): where the last WAIT posted on this CQ
    /// left it. A WAIT{n} waits for `total >= wait_index + n` and moves the index there.
    wait_index: u64,
}

/// Counters of one NIC.
#[derive(Debug, Default, Clone)]
pub struct NicStats {
    pub data_pkts: u64,
    pub retx_pkts: u64,
    pub timeouts: u64,
    pub acks: u64,
    pub naks: u64,
    pub cnps_sent: u64,
    pub cnps_recv: u64,
    pub ooo_drops: u64,
    pub rnr_naks: u64,
    pub cache_misses: u64,
    pub cache_hits: u64,
    pub access_errors: u64,
    pub cq_overruns: u64,
    /// With `nic.data_check`: packets of synchronise messages placed in memory, and those placed
    /// while an earlier PSN of their QP had not been placed yet (must stay 0: §3.4).
    pub sync_placed: u64,
    pub sync_placed_early: u64,
}

pub enum NextTx {
    Packet(PktId),
    WaitUntil(Time),
    Idle,
}

/// What the arbiter's look at one class found.
enum Served {
    Packet(PktId),
    /// The transmit pipeline stalls (a QP-context cache miss) until then.
    Stall(Time),
    Nothing,
}

/// How a QP stands at the transmit arbiter.
enum Status {
    /// Ready to send this PSN on this source port (None: a READ response).
    Ready(Option<(u32, u16)>),
    WaitUntil(Time),
    Blocked,
    /// It executed a WAIT: its turn at the arbiter is over (the WQE scheduler moves on to the
    /// next QP, which is what PeRF's 0_WAITs rely on).
    Yield,
}

pub struct Nic {
    /// Node id: the host's primary address.
    pub host: u32,
    /// How many addresses the host has (`nic.addresses`): `host_alias(host, k)` for k below it.
    pub addresses: u8,
    pub line_rate: u64,
    qps: Vec<Option<Qp>>,
    cqs: Vec<Option<Cq>>,
    pub mem: Memory,
    /// Control packets (ACK, NAK, CNP, PFC) as queued.
    ctrl: VecDeque<PktId>,
    /// Control packets set aside while their priority was paused, by priority, with their
    /// queueing order (index 8 unused: PFC frames are never paused).
    ctrl_q: [VecDeque<(u64, PktId)>; 9],
    ctrl_held: u16,
    ctrl_seq: u64,
    /// Active QPs in round-robin order, per class (one class under `rr`).
    arb: Rotations,
    policy: ArbiterPolicy,
    ets: Ets,
    /// Read-ahead the QP at the front of each class has used in its current turn: one MTU buffer
    /// per packet sent (`nic.tx_prefetch`).
    turn: [u64; 8],
    cache: QpCache,
    tx_stall_until: Time,
    wqe_free_ps: Time,
    next_msg_ps: Time,
    /// Receive pipeline (used when the QP cache can miss).
    rx_busy_until: Time,
    pub rx_backlog: u64,
    rx_paused_upstream: bool,
    pub stats: NicStats,
    sport_seed: u64,
    /// Payload bytes of packets in flight when data is checked.
    pub payloads: std::collections::HashMap<PktId, Vec<u8>>,
    /// Builds transports for new QPs instead of the scenario's kind (library users, tests).
    pub transport_factory: Option<crate::transport::TransportFactory>,
}

impl Nic {
    pub fn new(host: u32, line_rate: u64, p: &NicParams, sport_seed: u64) -> Self {
        Nic {
            host,
            addresses: p.nic.addresses.max(1),
            line_rate,
            qps: Vec::new(),
            cqs: Vec::new(),
            mem: Memory::new(p.nic.data_check),
            ctrl: VecDeque::new(),
            ctrl_q: Default::default(),
            ctrl_held: 0,
            ctrl_seq: 0,
            arb: Rotations::default(),
            policy: p.nic.arbiter,
            ets: Ets::new(
                &p.nic.ets_weights,
                p.nic.mtu as u64 + crate::packet::ROCE_HEADER as u64,
            ),
            turn: [0; 8],
            cache: QpCache::new(p.nic.qp_cache),
            tx_stall_until: 0,
            wqe_free_ps: 0,
            next_msg_ps: 0,
            rx_busy_until: 0,
            rx_backlog: 0,
            rx_paused_upstream: false,
            stats: NicStats::default(),
            sport_seed,
            payloads: Default::default(),
            transport_factory: None,
        }
    }

    /// Whether the transmit side might have something to send (control packets or active QPs).
    #[inline]
    pub fn has_pending(&self) -> bool {
        !self.ctrl.is_empty() || self.ctrl_held != 0 || !self.arb.is_empty()
    }

    pub fn qp(&self, qpn: QpNum) -> Option<&Qp> {
        self.qps.get(qpn as usize).and_then(|q| q.as_ref())
    }
    pub fn qps(&self) -> impl Iterator<Item = &Qp> {
        self.qps.iter().flatten()
    }
    pub fn cache_uses_rx_pipeline(&self) -> bool {
        self.cache.enabled()
    }

    fn qp_mut(&mut self, qpn: QpNum) -> Result<&mut Qp, VerbsError> {
        self.qps
            .get_mut(qpn as usize)
            .and_then(|q| q.as_mut())
            .ok_or(VerbsError::NoSuchQp(qpn))
    }

    fn activate(&mut self, qpn: QpNum, eff: &mut Effects) {
        let policy = self.policy;
        if let Some(Some(q)) = self.qps.get_mut(qpn as usize) {
            if !q.in_active && q.state == QpState::Rts {
                q.in_active = true;
                let c = match policy {
                    ArbiterPolicy::Rr => 0,
                    ArbiterPolicy::Sp | ArbiterPolicy::Ets => (q.prio & 7) as usize,
                };
                // The arbitration class is the QP's service level (one class under `rr`).
                self.arb.push_back(c, qpn);
            } else if q.in_active {
                // Something changed for it: it gets a look where it stands in the rotation.
                self.arb.wake(qpn);
            }
            eff.kick = true;
        }
    }

    // ------------------------------------------------------------------ verbs

    pub fn create_cq(&mut self, depth: u32) -> CqId {
        self.cqs.push(Some(Cq {
            depth,
            ..Default::default()
        }));
        (self.cqs.len() - 1) as CqId
    }

    pub fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        if self
            .qps
            .iter()
            .flatten()
            .any(|q| q.send_cq == cq || q.recv_cq == cq)
        {
            return Err(VerbsError::InvalidState("CQ still attached to a QP"));
        }
        let slot = self
            .cqs
            .get_mut(cq as usize)
            .ok_or(VerbsError::NoSuchCq(cq))?;
        slot.take().ok_or(VerbsError::NoSuchCq(cq))?;
        Ok(())
    }

    /// ibv_req_notify_cq: the next completion added to `cq` notifies.
    pub fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        match self.cqs.get_mut(cq as usize) {
            Some(Some(c)) => {
                c.armed = true;
                Ok(())
            }
            _ => Err(VerbsError::NoSuchCq(cq)),
        }
    }

    /// ibv_modify_qp to Error, Reset, or a new UDP source port.
    ///
    /// - Error: every outstanding send WR, then every RECV, completes `Flushed` on its CQ (in
    ///   order, signaled or not); nothing more is sent or received; later posts complete
    ///   `Flushed` at once.
    /// - Reset: the queues are emptied without completions, the QP's completions still in its
    ///   CQs are removed (libmlx5's `cq_clean`), the connection and its transport state are
    ///   forgotten; `connect_qp` may follow.
    /// - UdpSport: the source port of the packets sent from now on.
    pub fn modify_qp(
        &mut self,
        qpn: QpNum,
        m: QpModify,
        p: &NicParams,
        eff: &mut Effects,
    ) -> Result<(), VerbsError> {
        let q = self.qp_mut(qpn)?;
        match m {
            QpModify::UdpSport(s) => {
                q.sport = s;
                q.t.set_sport(s);
            }
            QpModify::Error => self.enter_error(qpn, None, eff),
            QpModify::Reset => self.reset_qp(qpn, p),
        }
        Ok(())
    }

    /// Moves a QP to Error: the send queue completes in order (WR `fail.0`, if given, with status
    /// `fail.1`, every other one `Flushed`), then the receive queue `Flushed`. Stale transport
    /// timers are ignored from now on; READ responses being sent are dropped.
    fn enter_error(&mut self, qpn: QpNum, fail: Option<(usize, WcStatus)>, eff: &mut Effects) {
        let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
            return;
        };
        if q.state == QpState::Error {
            return;
        }
        q.state = QpState::Error;
        q.epoch = q.epoch.wrapping_add(1);
        let sq = std::mem::take(&mut q.sq);
        let rq = std::mem::take(&mut q.rq);
        q.sq_base += sq.len() as u64;
        q.recv_base += rq.len() as u64;
        q.cur = 0;
        q.cur_pkt = 0;
        q.reads.clear();
        q.rx_pending.clear();
        let (scq, rcq) = (q.send_cq, q.recv_cq);
        for (i, w) in sq.iter().enumerate() {
            let status = match fail {
                Some((j, st)) if j == i => st,
                _ => WcStatus::Flushed,
            };
            self.push_cqe(scq, wc(w.wr.wr_id, status, op_of(&w.wr.op), 0, qpn), eff);
        }
        for r in &rq {
            self.push_cqe(rcq, wc(r.wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn), eff);
        }
    }

    /// Moves a QP to Reset (see [`Nic::modify_qp`]).
    fn reset_qp(&mut self, qpn: QpNum, p: &NicParams) {
        let (qp_type, sport, retry) = match self.qp(qpn) {
            Some(q) => (q.qp_type, q.default_sport, q.retry),
            None => return,
        };
        let t = self.make_transport(qp_type, qpn, sport, retry, p);
        let q = self.qps[qpn as usize].as_mut().expect("checked");
        q.state = QpState::Reset;
        q.epoch = q.epoch.wrapping_add(1);
        q.t = t;
        q.remote_host = u32::MAX;
        q.remote_qpn = 0;
        q.sport = sport;
        q.sq.clear();
        q.sq_base = 0;
        q.send_enabled = 0;
        q.cur = 0;
        q.cur_pkt = 0;
        q.next_psn = 0;
        q.next_msg_ps = 0;
        q.read_rewound = false;
        q.rq.clear();
        q.recv_enabled = 0;
        q.recv_base = 0;
        q.uc_epsn = 0;
        q.uc_discard = false;
        q.recv_off = 0;
        q.reads.clear();
        q.send_msn = 0;
        q.rx_pending.clear();
        if let Some(a) = q.rx_audit.as_mut() {
            *a = PsnSet::default();
        }
        let (scq, rcq) = (q.send_cq, q.recv_cq);
        for cq in [scq, rcq] {
            if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
                c.entries.retain(|e| e.qp_num != qpn);
                c.waiters.retain(|&w| w != qpn);
            }
        }
        self.cache.forget(qpn);
    }

    /// ibv_query_qp.
    pub fn query_qp(&self, qpn: QpNum) -> Result<QpAttr, VerbsError> {
        let q = self.qp(qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let connected = q.state == QpState::Rts && q.qp_type != QpType::Ud;
        Ok(QpAttr {
            qpn,
            qp_type: q.qp_type,
            state: q.state.verbs(),
            local_addr: q.local_addr,
            udp_sport: q.sport,
            remote: connected.then_some(RemoteQp {
                host: q.remote_host,
                qpn: q.remote_qpn,
                udp_sport: Some(q.sport),
            }),
            retry_cnt: q.retry.retry_cnt,
            rnr_retry: q.retry.rnr_retry,
            cross_channel: q.cross_channel,
            send_cq: q.send_cq,
            recv_cq: q.recv_cq,
            send_outstanding: q.sq.len() as u32,
        })
    }

    pub fn create_qp(&mut self, init: &QpInit, p: &NicParams) -> Result<QpNum, VerbsError> {
        for cq in [init.send_cq, init.recv_cq] {
            if !matches!(self.cqs.get(cq as usize), Some(Some(_))) {
                return Err(VerbsError::NoSuchCq(cq));
            }
        }
        let qpn = self.qps.len() as QpNum;
        if qpn > QPN_MASK {
            return Err(VerbsError::Unsupported("QP numbers are 24 bits"));
        }
        if init.local_addr >= self.addresses {
            return Err(VerbsError::InvalidArgument(
                "local_addr: no such address (caps.local_addrs; nic.addresses)",
            ));
        }
        if init.retry_cnt > 7 || init.rnr_retry > 7 {
            return Err(VerbsError::InvalidArgument(
                "retry_cnt and rnr_retry are 0..=7",
            ));
        }
        let retry = RetryLimits {
            retry_cnt: init.retry_cnt,
            rnr_retry: init.rnr_retry,
        };
        // RoCEv2 NICs derive the UDP source port from the QP; here a seeded hash, in 49152..65535.
        let sport = 0xC000
            | (braid_engine::derive_seed(self.sport_seed, "sport", &[self.host as u64, qpn as u64])
                & 0x3FFF) as u16;
        let t = self.make_transport(init.qp_type, qpn, sport, retry, p);
        self.qps.push(Some(Qp {
            qpn,
            qp_type: init.qp_type,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            sq_sig_all: init.sq_sig_all,
            managed_send: init.managed_send,
            managed_recv: init.managed_recv,
            cross_channel: init.is_cross_channel(),
            retry,
            local_addr: host_alias(self.host, init.local_addr),
            default_sport: sport,
            epoch: 0,
            max_send_wr: init.max_send_wr,
            max_recv_wr: init.max_recv_wr,
            prio: init.priority.unwrap_or(p.nic.priority),
            state: QpState::Init,
            remote_host: u32::MAX,
            remote_qpn: 0,
            sport,
            sq: VecDeque::new(),
            sq_base: 0,
            send_enabled: 0,
            cur: 0,
            cur_pkt: 0,
            next_psn: 0,
            next_msg_ps: 0,
            read_rewound: false,
            t,
            rq: VecDeque::new(),
            recv_enabled: 0,
            recv_base: 0,
            uc_epsn: 0,
            uc_discard: false,
            recv_off: 0,
            reads: VecDeque::new(),
            in_active: false,
            send_msn: 0,
            rx_pending: Default::default(),
            rx_audit: p.nic.data_check.then(PsnSet::default),
            rx_bytes: 0,
            tx_bytes: 0,
            retx_pkts: 0,
        }));
        Ok(qpn)
    }

    /// The transport a new QP runs (per the scenario's `transport.kind`).
    fn make_transport(
        &self,
        qp_type: QpType,
        qpn: QpNum,
        sport: u16,
        retry: RetryLimits,
        p: &NicParams,
    ) -> Box<dyn Transport> {
        let dcqcn = match p.transport.kind {
            TransportKind::Dcqcn if qp_type != QpType::Ud => Some(p.transport.dcqcn.clone()),
            _ => None,
        };
        let rc = RcConfig {
            reliable: qp_type == QpType::Rc,
            sport,
            line_rate: self.line_rate,
            mtu: p.nic.mtu,
            rto: p.nic.rto.0,
            rnr_delay: p.nic.rnr_delay.0,
            ack_every: p.nic.ack_every,
            dcqcn,
            retry,
        };
        match &self.transport_factory {
            Some(f) => f(&crate::transport::TransportCtx {
                rc,
                host: self.host,
                qpn,
            }),
            None if p.transport.kind == TransportKind::MpRdma && qp_type == QpType::Rc => {
                Box::new(MpRdmaTransport::new(MpRdmaParams {
                    cfg: p.transport.mp_rdma.clone(),
                    mtu: p.nic.mtu,
                    rto: p.nic.rto.0,
                    rnr_delay: p.nic.rnr_delay.0,
                    sport,
                    seed: self.sport_seed,
                    host: self.host,
                    qpn,
                    retry,
                }))
            }
            None => Box::new(RcTransport::new(rc)),
        }
    }

    /// Carries out what a transport asked for. Timers carry the QP's epoch above its 24-bit
    /// number; a transport that gives up fails the head WR and moves its QP to Error.
    fn transport_fx(&mut self, qpn: QpNum, fx: TxFx, eff: &mut Effects) {
        let epoch = self.qp(qpn).map_or(0, |q| q.epoch);
        for (t, kind, gen) in fx.timers {
            eff.timers
                .push((t, kind, qpn | (epoch as u32) << QPN_BITS, gen));
        }
        if let Some(f) = fx.fatal {
            let status = match f {
                Fatal::RetryExceeded => WcStatus::RetryExceeded,
                Fatal::RnrRetryExceeded => WcStatus::RnrRetryExceeded,
            };
            self.enter_error(qpn, Some((0, status)), eff);
            return;
        }
        if fx.kick {
            self.activate(qpn, eff);
        }
    }

    /// ibv_modify_qp INIT (or RESET) -> RTR -> RTS.
    pub fn connect_qp(&mut self, qpn: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        let q = self.qp_mut(qpn)?;
        if !matches!(q.state, QpState::Init | QpState::Reset) {
            return Err(VerbsError::InvalidState(
                "connect_qp needs a QP in Init or Reset (modify it to Reset first)",
            ));
        }
        if q.qp_type != QpType::Ud {
            q.remote_host = remote.host;
            q.remote_qpn = remote.qpn;
        }
        if let Some(s) = remote.udp_sport {
            q.sport = s;
            q.t.set_sport(s);
        }
        q.state = QpState::Rts;
        Ok(())
    }

    pub fn destroy_qp(&mut self, qpn: QpNum, eff: &mut Effects) -> Result<(), VerbsError> {
        let q = self
            .qps
            .get_mut(qpn as usize)
            .and_then(|q| q.take())
            .ok_or(VerbsError::NoSuchQp(qpn))?;
        // Outstanding work completes with a flush error, as ibv_destroy_qp after error state would.
        for w in q.sq.iter().filter(|w| !w.done) {
            self.push_cqe(
                q.send_cq,
                wc(w.wr.wr_id, WcStatus::Flushed, op_of(&w.wr.op), 0, qpn),
                eff,
            );
        }
        for r in &q.rq {
            self.push_cqe(
                q.recv_cq,
                wc(r.wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn),
                eff,
            );
        }
        self.arb.remove(qpn);
        self.cache.forget(qpn);
        Ok(())
    }

    pub fn post_send(
        &mut self,
        qpn: QpNum,
        wr: SendWr,
        now: Time,
        p: &NicParams,
        eff: &mut Effects,
    ) -> Result<(), VerbsError> {
        let data_check = p.nic.data_check;
        let mtu = p.nic.mtu as u64;
        // Validate before touching the queue, as the driver would.
        let bytes = wr.len();
        if !wr.inline {
            for s in &wr.sg_list {
                self.mem.check_sge(s)?;
            }
        }
        let q = self.qp_mut(qpn)?;
        if !matches!(q.state, QpState::Rts | QpState::Error) {
            return Err(VerbsError::InvalidState("QP is not connected"));
        }
        let cross = matches!(
            wr.op,
            SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. }
        );
        if cross && !q.cross_channel {
            return Err(VerbsError::InvalidWr(
                "WAIT/SEND_ENABLE/RECV_ENABLE need a QP created with cross_channel",
            ));
        }
        let in_error = q.state == QpState::Error;
        if !in_error && q.sq.len() as u32 >= q.max_send_wr {
            return Err(VerbsError::QueueFull);
        }
        match (q.qp_type, &wr.op) {
            (QpType::Ud, SendOp::Send | SendOp::SendWithImm(_)) => {
                if wr.ud_dest.is_none() {
                    return Err(VerbsError::InvalidWr("UD send needs ud_dest"));
                }
                if bytes > mtu {
                    return Err(VerbsError::InvalidWr("UD message larger than the MTU"));
                }
            }
            (QpType::Ud, op) if op.carries_data() => {
                return Err(VerbsError::InvalidWr("UD QPs only SEND"))
            }
            (QpType::Uc, SendOp::Read) => return Err(VerbsError::InvalidWr("UC QPs cannot READ")),
            _ => {}
        }
        let npkts = if wr.op.carries_data() {
            bytes.div_ceil(mtu).max(1) as u32
        } else {
            0
        };
        let signaled = wr.signaled || q.sq_sig_all;
        let _ = data_check;
        let send_cq = q.send_cq;
        // A WAIT's target is fixed at post time, as libmlx5 computes it: the CQ's cumulative
        // wait index plus the count, which becomes the new index. A zero-count WAIT (PeRF's
        // 0_WAIT) therefore waits only for what earlier WAITs on that CQ wait for: on a CQ no
        // counted WAIT uses, it completes as soon as it executes.
        let wait_target = match wr.op {
            SendOp::Wait { cq, count } => match self.cqs.get_mut(cq as usize) {
                Some(Some(c)) => {
                    c.wait_index += count as u64;
                    Some(c.wait_index)
                }
                _ => return Err(VerbsError::NoSuchCq(cq)),
            },
            _ => None,
        };
        if in_error {
            // ibverbs on mlx5: a WR posted to a QP in Error completes at once, flushed.
            let c = wc(wr.wr_id, WcStatus::Flushed, op_of(&wr.op), 0, qpn);
            self.push_cqe(send_cq, c, eff);
            return Ok(());
        }
        let q = self.qps[qpn as usize].as_mut().expect("checked");
        q.sq.push_back(SendWqe {
            wr,
            bytes,
            first_psn: None,
            npkts,
            post_ps: now,
            ready_ps: None,
            done: false,
            wait_target,
            read_got: 0,
            signaled,
            msn: 0,
        });
        self.activate(qpn, eff);
        Ok(())
    }

    pub fn post_recv(
        &mut self,
        qpn: QpNum,
        wr: RecvWr,
        eff: &mut Effects,
    ) -> Result<(), VerbsError> {
        for s in &wr.sg_list {
            self.mem.check_sge(s)?;
        }
        let q = self.qp_mut(qpn)?;
        match q.state {
            QpState::Reset => return Err(VerbsError::InvalidState("post_recv on a QP in Reset")),
            QpState::Error => {
                // As a send: flushed at once.
                let (cq, c) = (
                    q.recv_cq,
                    wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Recv, 0, qpn),
                );
                self.push_cqe(cq, c, eff);
                return Ok(());
            }
            QpState::Init | QpState::Rts => {}
        }
        if q.rq.len() as u32 >= q.max_recv_wr {
            return Err(VerbsError::QueueFull);
        }
        q.rq.push_back(RecvWqe { wr });
        // A sender held back by receiver-not-ready retries on its own timer; nothing to kick here.
        Ok(())
    }

    pub fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        let Some(Some(c)) = self.cqs.get_mut(cq as usize) else {
            return 0;
        };
        let n = max.min(c.entries.len());
        out.extend(c.entries.drain(..n));
        n
    }

    fn push_cqe(&mut self, cq: CqId, w: WorkCompletion, eff: &mut Effects) {
        let Some(Some(c)) = self.cqs.get_mut(cq as usize) else {
            return;
        };
        if c.entries.len() as u32 >= c.depth && c.depth > 0 {
            c.overruns += 1;
            self.stats.cq_overruns += 1;
        }
        c.entries.push_back(w);
        c.total += 1;
        // ibverbs: only an armed CQ notifies, once, and is disarmed by it.
        if c.armed {
            c.armed = false;
            eff.notify.push(cq);
        }
        // QPs whose WAIT watches this CQ may proceed.
        if !c.waiters.is_empty() {
            let waiters = std::mem::take(&mut c.waiters);
            for q in waiters {
                self.activate(q, eff);
            }
        }
    }

    // ------------------------------------------------------------------ transmit

    /// The arbiter: the next packet this NIC puts on the wire, if any. `paused[p]` is the PFC
    /// state of the NIC port for priority p.
    ///
    /// Control packets (ACK, NAK, CNP, PFC) go first, unless their priority is paused. Then the
    /// policy between classes (`nic.arbiter`) picks a class, and within it the QPs take turns
    /// round robin: a turn is one packet, or up to `nic.tx_prefetch` bytes while the QP has a
    /// packet ready. A QP waiting for a time, or ready but PFC-paused, keeps its place in the
    /// rotation without being looked at until that changes (see `arbiter.rs`).
    pub fn next_packet(
        &mut self,
        now: Time,
        paused: &[bool; 8],
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> NextTx {
        if let Some(id) = self.next_ctrl(paused, pool) {
            return NextTx::Packet(id);
        }
        if self.tx_stall_until > now {
            return NextTx::WaitUntil(self.tx_stall_until);
        }
        self.arb.release_timers(now);
        let pmask = paused
            .iter()
            .enumerate()
            .fold(0u8, |m, (i, &x)| m | ((x as u8) << i));
        let served = match self.policy {
            ArbiterPolicy::Rr => self.serve_class(0, now, pmask, p, pool, eff),
            ArbiterPolicy::Sp => {
                // The lowest class number first; within a class, round robin.
                let mut r = Served::Nothing;
                for c in 0..8 {
                    if self.arb.len(c) == 0 {
                        continue;
                    }
                    r = self.serve_class(c, now, pmask, p, pool, eff);
                    if !matches!(r, Served::Nothing) {
                        break;
                    }
                }
                r
            }
            ArbiterPolicy::Ets => self.serve_ets(now, pmask, p, pool, eff),
        };
        match served {
            Served::Packet(id) => NextTx::Packet(id),
            Served::Stall(t) => NextTx::WaitUntil(t),
            Served::Nothing => match self.arb.next_timer() {
                Some(t) => NextTx::WaitUntil(t),
                None => NextTx::Idle,
            },
        }
    }

    /// The first queued control packet whose priority is not paused (PFC frames always go).
    fn next_ctrl(&mut self, paused: &[bool; 8], pool: &PacketPool) -> Option<PktId> {
        // Packets set aside because their priority was paused (`ctrl_q`, bit q of
        // `ctrl_held` = queue q non-empty) are older than those still in `ctrl`: the oldest
        // eligible of them goes first.
        if self.ctrl_held != 0 {
            let mut best: Option<(u64, usize)> = None;
            let mut m = self.ctrl_held;
            while m != 0 {
                let q = m.trailing_zeros() as usize;
                m &= m - 1;
                if q < 8 && paused[q] {
                    continue;
                }
                let seq = self.ctrl_q[q].front().expect("held queue").0;
                if best.is_none_or(|(b, _)| seq < b) {
                    best = Some((seq, q));
                }
            }
            if let Some((_, q)) = best {
                let (_, id) = self.ctrl_q[q].pop_front().expect("held queue");
                if self.ctrl_q[q].is_empty() {
                    self.ctrl_held &= !(1 << q);
                }
                return Some(id);
            }
        }
        // Then in queueing order; one whose priority is paused is set aside (each packet once),
        // so that a paused priority's backlog costs nothing per look.
        while let Some(id) = self.ctrl.pop_front() {
            let c = pool.get(id);
            let q = if c.kind == PktKind::Pfc {
                8
            } else {
                c.prio as usize & 7
            };
            if q == 8 || !paused[q] {
                return Some(id);
            }
            self.ctrl_q[q].push_back((self.ctrl_seq, id));
            self.ctrl_held |= 1 << q;
            self.ctrl_seq += 1;
        }
        None
    }

    /// ETS: deficit round robin between classes by bytes; a class's turn adds its quantum and
    /// lasts while its deficit is positive (the last packet may overdraw it); a class with
    /// nothing to send forfeits its deficit.
    fn serve_ets(
        &mut self,
        now: Time,
        pmask: u8,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> Served {
        // Every class gets at most a few visits: one with nothing to send ends its turn, and a
        // quantum is at least one full frame.
        for _ in 0..32 {
            let c = self.ets.cur;
            if !self.arb.has_candidate(c, pmask) {
                self.ets.deficit[c] = 0;
                self.ets.advance();
                continue;
            }
            if !self.ets.credited {
                self.ets.deficit[c] += self.ets.quantum[c];
                self.ets.credited = true;
            }
            if self.ets.deficit[c] <= 0 {
                self.ets.advance();
                continue;
            }
            match self.serve_class(c, now, pmask, p, pool, eff) {
                Served::Packet(id) => {
                    self.ets.deficit[c] -= pool.get(id).size as i64;
                    if self.ets.deficit[c] <= 0 {
                        self.ets.advance();
                    }
                    return Served::Packet(id);
                }
                Served::Stall(t) => return Served::Stall(t),
                Served::Nothing => {
                    self.ets.deficit[c] = 0;
                    self.ets.advance();
                }
            }
        }
        Served::Nothing
    }

    /// One look at class `c`'s rotation, as the arbiter always did it: from the front, each QP
    /// that needs a look is asked for its status; one that cannot send now goes to the back
    /// (dropped if it has nothing at all), the first that can sends. Only the QPs present when the
    /// look starts are looked at (ones activated meanwhile wait for the next look, at the back).
    fn serve_class(
        &mut self,
        c: usize,
        now: Time,
        pmask: u8,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> Served {
        let mut remaining = self.arb.len(c);
        let mut yields = 0u32;
        loop {
            let Some((j, qpn)) = self.arb.first_candidate(c, remaining, pmask) else {
                // The rest were looked at (or needed no look) and passed: to the back.
                if remaining > 0 {
                    self.arb.rotate(c, remaining);
                    self.turn[c] = 0;
                }
                // A QP that yielded its turn to others that could not use it goes on.
                if yields > 0 && yields < 1 << 16 && self.arb.has_candidate(c, pmask) {
                    remaining = self.arb.len(c);
                    continue;
                }
                return Served::Nothing;
            };
            if j > 0 {
                // Those before it need no look: passed, to the back.
                self.arb.rotate_to(c, qpn);
                remaining -= j;
                self.turn[c] = 0;
            }
            match self.status(qpn, now, p, eff) {
                Status::Yield => {
                    // Its turn is over: to the back, looked at again after the others (every
                    // yield executed a WAIT, so this ends; the cap guards a model error).
                    self.arb.rotate(c, 1);
                    self.turn[c] = 0;
                    remaining -= 1;
                    yields += 1;
                }
                Status::Blocked => {
                    self.arb.pop_front(c);
                    if let Some(Some(q)) = self.qps.get_mut(qpn as usize) {
                        q.in_active = false;
                    }
                    remaining -= 1;
                    self.turn[c] = 0;
                }
                Status::WaitUntil(t) => {
                    self.arb.park_until(qpn, t);
                    self.arb.rotate(c, 1);
                    remaining -= 1;
                    self.turn[c] = 0;
                }
                Status::Ready(psn) => {
                    let prio = self.qps[qpn as usize].as_ref().unwrap().data_prio();
                    if pmask & (1 << (prio & 7)) != 0 {
                        // Looked at again once the PFC resume's kick comes.
                        self.arb.park_paused(qpn, prio);
                        self.arb.rotate(c, 1);
                        remaining -= 1;
                        self.turn[c] = 0;
                        continue;
                    }
                    if !self.cache.access(qpn) {
                        // Fetch the QP context over PCIe; the pipeline stalls meanwhile. The QP
                        // stays at the front.
                        self.stats.cache_misses += 1;
                        self.tx_stall_until = now + p.nic.qp_cache_miss.0;
                        return Served::Stall(self.tx_stall_until);
                    }
                    self.stats.cache_hits += 1;
                    let id = self.build_packet(qpn, psn, now, p, pool, eff);
                    // It stays in the rotation (the next look drops it if it has nothing more):
                    // at the front while its turn lasts, else at the back. A turn is one packet,
                    // or as many as the read-ahead holds: `tx_prefetch` bytes of MTU buffers.
                    self.turn[c] += p.nic.mtu as u64;
                    if self.turn[c] >= p.nic.tx_prefetch.0 {
                        self.arb.rotate(c, 1);
                        self.turn[c] = 0;
                    }
                    return Served::Packet(id);
                }
            }
        }
    }

    /// Advances a QP's new-data cursor over control WRs (WAIT, ENABLE, NOP), then asks its
    /// transport what may go out now.
    fn status(&mut self, qpn: QpNum, now: Time, p: &NicParams, eff: &mut Effects) -> Status {
        loop {
            let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
                return Status::Blocked;
            };
            if q.state != QpState::Rts {
                return Status::Blocked;
            }
            if !q.reads.is_empty() {
                // Answering READs comes first; only the rate limits it.
                let gate = q.t.response_gate();
                return if gate > now {
                    Status::WaitUntil(gate)
                } else {
                    Status::Ready(None)
                };
            }
            // Is there new data at the cursor, and from when may it start? Does it begin a
            // synchronise message?
            let mut new_at: Option<Time> = None;
            let mut sync = false;
            let enabled = !(q.managed_send && q.sq_base + q.cur as u64 >= q.send_enabled);
            if q.cur < q.sq.len() && enabled {
                let w = &mut q.sq[q.cur];
                if w.first_psn.is_none() && !w.wr.op.carries_data() {
                    let is_wait = matches!(w.wr.op, SendOp::Wait { .. }) && !w.done;
                    if self.execute_control(qpn, now, eff) {
                        // An executed WAIT ends the QP's turn when another QP waits for one.
                        if is_wait && (0..8).map(|c| self.arb.len(c)).sum::<u32>() > 1 {
                            return Status::Yield;
                        }
                        continue;
                    }
                    // Blocked on a WAIT: only retransmissions may go.
                    let q = self.qps[qpn as usize].as_mut().unwrap();
                    let next_new = q.cursor_psn();
                    return match q.t.plan(now, next_new, false) {
                        Plan::Send { psn, sport } => Status::Ready(Some((psn, sport))),
                        Plan::Wait(t) => Status::WaitUntil(t),
                        Plan::Blocked => Status::Blocked,
                    };
                } else {
                    // First time at the cursor: WQE processing time and message-rate limits.
                    if w.ready_ps.is_none() && w.first_psn.is_none() && w.post_ps > now {
                        // A busy tenant CPU posts it later than the event that made it post: it
                        // is not at the NIC yet, and reserves nothing of the WQE pipeline (other
                        // QPs' WQEs go meanwhile).
                        new_at = Some(w.post_ps);
                    } else if w.ready_ps.is_none() && w.first_psn.is_none() {
                        // Not before it was posted (a busy tenant CPU posts later than the
                        // event that made it post).
                        let mut t = now.max(self.wqe_free_ps).max(w.post_ps) + p.nic.wqe_time.0;
                        self.wqe_free_ps = t;
                        t = t.max(self.next_msg_ps).max(q.next_msg_ps);
                        if p.nic.max_msg_rate > 0.0 {
                            self.next_msg_ps = t + (S as f64 / p.nic.max_msg_rate) as Time;
                        }
                        if p.nic.max_qp_msg_rate > 0.0 {
                            q.next_msg_ps = t + (S as f64 / p.nic.max_qp_msg_rate) as Time;
                        }
                        w.ready_ps = Some(t);
                        new_at = Some(t);
                    } else {
                        new_at = Some(w.ready_ps.unwrap_or(now));
                    }
                    sync = w.wr.fence && w.first_psn.is_none();
                }
            }
            let have_new = new_at.is_some_and(|t| t <= now);
            let next_new = q.cursor_psn();
            if sync {
                q.t.sync_at(next_new);
            }
            return match q.t.plan(now, next_new, have_new) {
                Plan::Send { psn, sport } => Status::Ready(Some((psn, sport))),
                Plan::Wait(t) => Status::WaitUntil(t),
                Plan::Blocked => match new_at {
                    Some(t) if t > now => Status::WaitUntil(t),
                    _ => Status::Blocked,
                },
            };
        }
    }

    /// Executes the control WR at a QP's cursor (once). Returns false if it blocks (WAIT).
    fn execute_control(&mut self, qpn: QpNum, now: Time, eff: &mut Effects) -> bool {
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let w = &mut q.sq[q.cur];
        if w.done {
            q.cur += 1;
            return true;
        }
        match w.wr.op {
            SendOp::Wait { cq, .. } => {
                let total = match self.cqs.get(cq as usize) {
                    Some(Some(c)) => c.total,
                    _ => {
                        // Waiting on a CQ that does not exist never finishes; treat it as done.
                        w.done = true;
                        q.cur += 1;
                        return true;
                    }
                };
                // The target was fixed at post time.
                if w.wait_target.is_some_and(|target| total < target) {
                    let c = self.cqs[cq as usize].as_mut().unwrap();
                    if !c.waiters.contains(&qpn) {
                        c.waiters.push(qpn);
                    }
                    return false;
                }
                w.done = true;
                q.cur += 1;
            }
            SendOp::SendEnable { qp, count } => {
                w.done = true;
                q.cur += 1;
                if let Ok(t) = self.qp_mut(qp) {
                    t.send_enabled += count as u64;
                    self.activate(qp, eff);
                }
            }
            SendOp::RecvEnable { qp, count } => {
                w.done = true;
                q.cur += 1;
                if let Ok(t) = self.qp_mut(qp) {
                    t.recv_enabled += count as u64;
                }
            }
            _ => {
                w.done = true;
                q.cur += 1;
            }
        }
        self.retire(qpn, now, eff);
        true
    }

    /// Builds the packet a ready QP sends: a READ response (`plan` None), or the packet of PSN
    /// `psn` on source port `sport` — new data at the cursor, or a retransmission located by PSN.
    fn build_packet(
        &mut self,
        qpn: QpNum,
        plan: Option<(u32, u16)>,
        now: Time,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> PktId {
        let mtu = p.nic.mtu as u64;
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let mut pk = Packet::control(PktKind::Data, 0);
        pk.src = q.local_addr;
        pk.dst = q.remote_host;
        pk.sport = q.sport;
        pk.prio = q.prio;
        pk.src_qp = qpn;
        pk.dst_qp = q.remote_qpn;
        pk.sent_ps = now;
        let mut payload_bytes: Option<Vec<u8>> = None;
        let mut fx = TxFx::default();
        let Some((psn, sport)) = plan else {
            // READ response data.
            let job = q.reads.front_mut().expect("a response is pending");
            let off = job.next as u64 * mtu;
            let len = (job.len - off.min(job.len)).min(mtu);
            pk.op = DataOp::ReadResp;
            pk.psn = job.first_psn + job.next;
            pk.payload = len as u32;
            pk.first = job.next == 0;
            pk.last = job.next + 1 == job.npkts;
            pk.addr = job.remote_addr + off;
            pk.size = ROCE_HEADER + pk.payload;
            if self.mem.is_tracked(job.remote_addr + off, len) {
                payload_bytes = Some(
                    self.mem
                        .read(job.remote_addr + off, len)
                        .unwrap_or_else(|_| vec![0; len as usize]),
                );
            }
            job.next += 1;
            if job.next == job.npkts {
                q.reads.pop_front();
            }
            q.t.on_response_sent(now, pk.size);
            self.stats.data_pkts += 1;
            q.tx_bytes += pk.payload as u64;
            let id = pool.alloc(pk);
            if let Some(b) = payload_bytes {
                self.payloads.insert(id, b);
            }
            return id;
        };
        pk.sport = sport;
        // Which WQE and which of its packets.
        let new = psn >= q.cursor_psn();
        let (i, k) = if new {
            let w = &mut q.sq[q.cur];
            if w.first_psn.is_none() {
                w.first_psn = Some(q.next_psn);
                q.next_psn += w.npkts;
                w.msn = q.send_msn;
                if matches!(
                    w.wr.op,
                    SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
                ) {
                    q.send_msn += 1;
                }
            }
            (q.cur, q.cur_pkt)
        } else {
            let i =
                q.sq.iter()
                    .position(|w| w.first_psn.is_some_and(|f| psn >= f && psn < f + w.npkts))
                    .expect("a retransmitted PSN belongs to an outstanding WQE");
            let w = &q.sq[i];
            let f = w.first_psn.unwrap();
            // A READ is asked for again from its first missing response.
            let k = if w.wr.op == SendOp::Read {
                (psn - f).max(w.read_got)
            } else {
                psn - f
            };
            (i, k)
        };
        let w = &mut q.sq[i];
        let first_psn = w.first_psn.unwrap();
        pk.psn = first_psn + k;
        pk.msn = w.msn;
        pk.ipsn = k;
        pk.first = k == 0;
        let off = k as u64 * mtu;
        let npsn;
        match w.wr.op {
            SendOp::Read => {
                pk.kind = PktKind::ReadReq;
                pk.size = READ_REQ_SIZE;
                pk.addr = w.wr.remote_addr + off;
                pk.msg_len = w.bytes - off.min(w.bytes);
                pk.aux = w.npkts - k;
                pk.imm = w.wr.rkey;
                pk.last = true;
                // The request covers the rest of the READ; responses come back on their PSNs.
                npsn = first_psn + w.npkts - psn;
                if new {
                    q.cur += 1;
                    q.cur_pkt = 0;
                }
            }
            _ => {
                let len = (w.bytes - off.min(w.bytes)).min(mtu);
                pk.op = match w.wr.op {
                    SendOp::Send | SendOp::SendWithImm(_) => DataOp::Send,
                    _ => DataOp::Write,
                };
                pk.payload = len as u32;
                pk.size = ROCE_HEADER + pk.payload;
                pk.last = k + 1 == w.npkts;
                pk.msg_len = w.bytes;
                pk.addr = match pk.op {
                    DataOp::Send => off,
                    _ => w.wr.remote_addr + off,
                };
                if let SendOp::SendWithImm(v) | SendOp::WriteWithImm(v) = w.wr.op {
                    pk.has_imm = true;
                    pk.imm = v;
                }
                pk.aux = w.wr.rkey;
                pk.sync = w.wr.fence;
                if let Some(d) = w.wr.ud_dest {
                    pk.dst = d.host;
                    pk.dst_qp = d.qpn;
                }
                // The bytes travel when the source memory keeps them (a tracked region).
                if self.mem.sges_tracked(&w.wr.sg_list) {
                    payload_bytes = Some(self.mem.gather(&w.wr.sg_list, off, len));
                }
                npsn = 1;
                if new {
                    if pk.last {
                        q.cur += 1;
                        q.cur_pkt = 0;
                        // Unreliable transports complete a send once it is on the wire.
                        if q.qp_type != QpType::Rc {
                            w.done = true;
                        }
                    } else {
                        q.cur_pkt += 1;
                    }
                }
            }
        }
        if !new {
            pk.retx = true;
            q.retx_pkts += 1;
            self.stats.retx_pkts += 1;
        }
        self.stats.data_pkts += 1;
        q.tx_bytes += pk.payload as u64;
        let reliable = q.qp_type == QpType::Rc;
        q.t.on_sent(now, psn, npsn, pk.size, reliable, &mut fx);
        let id = pool.alloc(pk);
        if let Some(b) = payload_bytes {
            self.payloads.insert(id, b);
        }
        self.transport_fx(qpn, fx, eff);
        if !reliable {
            self.retire(qpn, now, eff);
        }
        id
    }

    /// Completes WQEs at the head of the send queue that are done, in order.
    fn retire(&mut self, qpn: QpNum, now: Time, eff: &mut Effects) {
        let host = self.host;
        let mut cqes = Vec::new();
        {
            let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
                return;
            };
            while let Some(w) = q.sq.front() {
                if !w.done {
                    break;
                }
                let w = q.sq.pop_front().unwrap();
                q.sq_base += 1;
                q.cur = q.cur.saturating_sub(1);
                if w.wr.op.carries_data() {
                    eff.messages.push(MsgRecord {
                        qpn,
                        dst: w.wr.ud_dest.map(|d| d.host).unwrap_or(q.remote_host),
                        op: op_name(&w.wr.op),
                        bytes: w.bytes,
                        post_ps: w.post_ps,
                        complete_ps: now,
                        wr_id: w.wr.wr_id,
                    });
                }
                if w.signaled {
                    cqes.push((
                        q.send_cq,
                        wc(w.wr.wr_id, WcStatus::Success, op_of(&w.wr.op), w.bytes, qpn),
                    ));
                }
            }
        }
        let _ = host;
        for (cq, c) in cqes {
            self.push_cqe(cq, c, eff);
        }
    }

    // ------------------------------------------------------------------ receive

    /// Whether a packet arriving now must wait for the receive pipeline (QP-cache misses);
    /// returns the time its processing completes.
    pub fn rx_admit(&mut self, now: Time, pkt: &Packet, p: &NicParams) -> Time {
        if !self.cache.enabled() || pkt.kind == PktKind::Pfc {
            return now;
        }
        let start = now.max(self.rx_busy_until);
        let mut done = start;
        if !self.cache.access(pkt.dst_qp) {
            self.stats.cache_misses += 1;
            done += p.nic.qp_cache_miss.0;
        } else {
            self.stats.cache_hits += 1;
        }
        self.rx_busy_until = done;
        done
    }

    /// Receive-pipeline backlog bookkeeping (bytes waiting for processing) and PFC towards the
    /// switch when it grows past the threshold.
    pub fn rx_backlog_change(&mut self, delta: i64, p: &NicParams, eff: &mut Effects) {
        self.rx_backlog = (self.rx_backlog as i64 + delta).max(0) as u64;
        let xoff = p.nic.rx_xoff.0;
        if !self.rx_paused_upstream && self.rx_backlog > xoff {
            self.rx_paused_upstream = true;
            eff.rx_pfc = Some(true);
        } else if self.rx_paused_upstream && self.rx_backlog <= xoff / 2 {
            self.rx_paused_upstream = false;
            eff.rx_pfc = Some(false);
        }
    }

    /// Queues a control packet (ACK, NAK, CNP, PFC) ahead of data.
    pub fn push_ctrl(&mut self, id: PktId, eff: &mut Effects) {
        self.ctrl.push_back(id);
        eff.kick = true;
    }

    #[allow(clippy::too_many_arguments)]
    fn send_ctrl(
        &mut self,
        kind: PktKind,
        to_host: u32,
        to_qp: QpNum,
        from_qp: QpNum,
        psn: u32,
        sport: u16,
        now: Time,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) -> PktId {
        let size = match kind {
            PktKind::Cnp => CNP_SIZE,
            _ => ACK_SIZE,
        };
        let mut pk = Packet::control(kind, size);
        // From the replying QP's own address (a host may have several).
        pk.src = self.qp(from_qp).map_or(self.host, |q| q.local_addr);
        pk.dst = to_host;
        pk.dst_qp = to_qp;
        pk.src_qp = from_qp;
        pk.psn = psn;
        pk.sport = sport;
        pk.prio = p.ack_prio;
        pk.sent_ps = now;
        match kind {
            PktKind::Ack => self.stats.acks += 1,
            PktKind::Nak => self.stats.naks += 1,
            PktKind::RnrNak => self.stats.rnr_naks += 1,
            PktKind::Cnp => self.stats.cnps_sent += 1,
            _ => {}
        }
        let id = pool.alloc(pk);
        self.push_ctrl(id, eff);
        id
    }

    /// A packet for this NIC has been through the receive pipeline. Consumes the packet.
    pub fn receive(
        &mut self,
        now: Time,
        id: PktId,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let pk = pool.get(id).clone();
        pool.free(id);
        let payload = if self.payloads.is_empty() {
            None
        } else {
            self.payloads.remove(&id)
        };
        let qpn = pk.dst_qp;
        // A QP in Reset or Error drops whatever reaches it, silently (no ACK, no NAK).
        if let Some(q) = self.qp(qpn) {
            if matches!(q.state, QpState::Reset | QpState::Error) {
                return;
            }
        }
        let fb = match pk.kind {
            PktKind::Data => return self.on_data(now, &pk, payload, p, pool, eff),
            PktKind::ReadReq => return self.on_read_req(now, &pk, p, pool, eff),
            PktKind::Ack => Feedback::Ack {
                cum: pk.psn,
                sack: (pk.sack != u32::MAX).then_some(pk.sack),
                echo_sport: pk.echo_sport,
                ece: pk.ece,
                retx: pk.retx,
            },
            PktKind::Nak if pk.aux == NAK_REMOTE_ACCESS => {
                return self.on_access_nak(now, qpn, pk.psn, pk.sport, eff)
            }
            PktKind::Nak if pk.sack != u32::MAX => Feedback::SyncNak {
                expected: pk.psn,
                psn: pk.sack,
                echo_sport: pk.sport,
            },
            PktKind::Nak => Feedback::Nak {
                expected: pk.psn,
                echo_sport: pk.sport,
            },
            PktKind::RnrNak => Feedback::RnrNak { psn: pk.psn },
            PktKind::Cnp => {
                self.stats.cnps_recv += 1;
                Feedback::Cnp
            }
            PktKind::Pfc => unreachable!("PFC frames are handled by the port"),
        };
        self.feedback(now, qpn, fb, eff);
    }

    /// Hands feedback to a QP's transport, then completes what it acknowledged.
    fn feedback(&mut self, now: Time, qpn: QpNum, fb: Feedback, eff: &mut Effects) {
        let Ok(q) = self.qp_mut(qpn) else { return };
        let mut fx = TxFx::default();
        q.t.on_feedback(now, fb, &mut fx);
        let acked = q.t.acked();
        for w in q.sq.iter_mut() {
            match w.first_psn {
                Some(f)
                    if w.wr.op != SendOp::Read
                        && w.wr.op.carries_data()
                        && f + w.npkts <= acked =>
                {
                    w.done = true
                }
                Some(_) => {}
                None if !w.wr.op.carries_data() => {}
                None => break,
            }
        }
        self.transport_fx(qpn, fx, eff);
        self.retire(qpn, now, eff);
    }

    /// A transport timer fired. `tagged` is the QP number with the epoch it was set in above
    /// bit 24: timers of an earlier incarnation (before Error or Reset) are ignored.
    pub fn on_timer(
        &mut self,
        now: Time,
        kind: TimerKind,
        tagged: u32,
        gen: u32,
        _p: &NicParams,
        eff: &mut Effects,
    ) {
        let qpn = tagged & QPN_MASK;
        let epoch = (tagged >> QPN_BITS) as u8;
        let Ok(q) = self.qp_mut(qpn) else { return };
        if q.epoch != epoch || matches!(q.state, QpState::Reset | QpState::Error) {
            return;
        }
        let from = first_missing(q);
        let before = q.t.timeouts();
        let mut fx = TxFx::default();
        q.t.on_timer(now, kind, gen, from, &mut fx);
        self.stats.timeouts += q.t.timeouts() - before;
        self.transport_fx(qpn, fx, eff);
    }

    /// Sends what a receiving transport replied (ACK, NAK, CNP) back to the sender of `pk`.
    fn send_replies(
        &mut self,
        now: Time,
        pk: &Packet,
        replies: &mut Vec<Reply>,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let sport = self.qp(qpn).map_or(pk.sport, |q| q.sport);
        for r in replies.drain(..) {
            let (kind, psn) = match r {
                Reply::Ack { cum, .. } => (PktKind::Ack, cum),
                Reply::Nak { expected } | Reply::SyncNak { expected, .. } => {
                    (PktKind::Nak, expected)
                }
                Reply::RnrNak { psn } => (PktKind::RnrNak, psn),
                Reply::AccessNak { psn } => (PktKind::Nak, psn),
                Reply::Cnp => (PktKind::Cnp, 0),
            };
            // MP-RDMA replies travel on the VP of the data packet they answer (the ACK echoes
            // it), so ACKs and NACKs are spread over the paths like the data: on the QP's own
            // port, the failure of that one path would cut every ACK of the connection.
            // RoCEv2 RC replies keep the responder QP's own source port, as real NICs do.
            // Per QP, not per scenario: tenants may run different transports.
            let mp = self.qp(qpn).is_some_and(|q| q.t.out_of_order());
            let sport = match r {
                Reply::Ack {
                    sack: Some(_),
                    echo_sport,
                    ..
                } if mp => echo_sport,
                Reply::Nak { .. } | Reply::SyncNak { .. } if mp => pk.sport,
                _ => sport,
            };
            let id = self.send_ctrl(kind, pk.src, pk.src_qp, qpn, psn, sport, now, p, pool, eff);
            if let Reply::Ack {
                sack,
                echo_sport,
                ece,
                retx,
                ..
            } = r
            {
                let a = pool.get_mut(id);
                a.sack = sack.unwrap_or(u32::MAX);
                a.echo_sport = echo_sport;
                a.ece = ece;
                a.retx = retx;
            }
            if let Reply::SyncNak { psn, .. } = r {
                pool.get_mut(id).sack = psn;
            }
            if let Reply::AccessNak { .. } = r {
                pool.get_mut(id).aux = NAK_REMOTE_ACCESS;
            }
        }
    }

    fn on_read_req(
        &mut self,
        now: Time,
        pk: &Packet,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        // rkey, bounds and remote-read permission (a zero-length READ checks nothing, IBA C9-88).
        let ok_access =
            pk.msg_len == 0 || self.mem.check_remote(pk.imm, pk.addr, pk.msg_len, false);
        let Ok(q) = self.qp_mut(pk.dst_qp) else {
            return;
        };
        let mut replies = Vec::new();
        let class = q.t.on_read_request(now, pk.psn, pk.aux, &mut replies);
        if class == RxClass::Accept && !ok_access {
            // Class C error: NAK the request, answer nothing, and the responder goes to Error.
            self.stats.access_errors += 1;
            replies.push(Reply::AccessNak { psn: pk.psn });
            self.send_replies(now, pk, &mut replies, p, pool, eff);
            self.enter_error(pk.dst_qp, None, eff);
            return;
        }
        if class == RxClass::Accept {
            // A re-request replaces whatever answer was in progress from that PSN on.
            q.reads.retain(|j| j.first_psn + j.npkts <= pk.psn);
            q.reads.push_back(ReadJob {
                first_psn: pk.psn,
                npkts: pk.aux,
                next: 0,
                remote_addr: pk.addr,
                len: pk.msg_len,
            });
            if let Some(a) = q.rx_audit.as_mut() {
                for k in 0..pk.aux {
                    a.insert(pk.psn + k);
                }
            }
            self.activate(pk.dst_qp, eff);
        } else {
            self.stats.ooo_drops += 1;
        }
        self.send_replies(now, pk, &mut replies, p, pool, eff);
    }

    fn on_data(
        &mut self,
        now: Time,
        pk: &Packet,
        payload: Option<Vec<u8>>,
        p: &NicParams,
        pool: &mut PacketPool,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let completion = pk.last && (pk.op == DataOp::Send || pk.has_imm);
        let sync_first = pk.sync.then(|| pk.psn - pk.ipsn);
        let info = DataInfo {
            psn: pk.psn,
            first: pk.first,
            last: pk.last,
            ce: pk.ce,
            sport: pk.sport,
            read_response: pk.op == DataOp::ReadResp,
            retx: pk.retx,
            completion,
            sync_first,
        };
        let Ok(q) = self.qp_mut(qpn) else { return };
        let qp_type = q.qp_type;
        let mut replies = Vec::new();
        let class = if qp_type == QpType::Ud {
            RxClass::Accept
        } else {
            q.t.on_data(now, info, &mut replies)
        };
        if pk.op == DataOp::ReadResp {
            self.send_replies(now, pk, &mut replies, p, pool, eff);
            return self.on_read_resp(now, pk, payload, p, eff);
        }
        match class {
            RxClass::Duplicate => {}
            RxClass::Drop => self.stats.ooo_drops += 1,
            RxClass::Accept => self.accept_data(now, pk, info, payload, p, &mut replies, eff),
        }
        let refused = replies
            .iter()
            .any(|r| matches!(r, Reply::AccessNak { .. }));
        self.send_replies(now, pk, &mut replies, p, pool, eff);
        if refused {
            // Class C error (IBA 9.9.3.1.3): the responder goes to Error too.
            self.enter_error(qpn, None, eff);
        }
    }

    /// Whether the WRITE a data packet belongs to may touch this host's memory: rkey, bounds of
    /// the whole message and remote-write permission (a zero-length WRITE checks nothing, IBA
    /// C9-88). Other packets always may.
    fn write_allowed(&self, pk: &Packet, mtu: u64) -> bool {
        if pk.op != DataOp::Write || pk.msg_len == 0 {
            return true;
        }
        let start = pk.addr.saturating_sub(pk.ipsn as u64 * mtu);
        self.mem.check_remote(pk.aux, start, pk.msg_len, true)
    }

    /// Places an in-sequence data packet, completes its message at the responder, and lets the
    /// transport acknowledge it.
    #[allow(clippy::too_many_arguments)]
    fn accept_data(
        &mut self,
        now: Time,
        pk: &Packet,
        info: DataInfo,
        payload: Option<Vec<u8>>,
        p: &NicParams,
        replies: &mut Vec<Reply>,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let mtu = p.nic.mtu as u64;
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let qp_type = q.qp_type;
        if qp_type == QpType::Rc && q.t.out_of_order() {
            return self.accept_data_ooo(now, pk, info, payload, mtu, replies, eff);
        }
        if qp_type == QpType::Uc {
            // UC: a gap loses the rest of its message; the next first packet starts afresh.
            if pk.first {
                q.uc_discard = false;
                q.recv_off = 0;
            } else if pk.psn != q.uc_epsn {
                q.uc_discard = true;
            }
            q.uc_epsn = pk.psn + 1;
            if q.uc_discard {
                return;
            }
        }
        // A WRITE is checked at its first packet (in order, the rest follow it or nothing does):
        // refused, it changes no byte; RC NAKs it, UC drops the message silently.
        if pk.first && !self.write_allowed(pk, mtu) {
            self.stats.access_errors += 1;
            let q = self.qps[qpn as usize].as_mut().unwrap();
            match qp_type {
                QpType::Rc => replies.push(Reply::AccessNak { psn: pk.psn }),
                _ => q.uc_discard = true,
            }
            return;
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        // The first packet of a SEND needs a posted (and, if managed, enabled) RECV.
        let needs_recv = pk.op == DataOp::Send || (pk.has_imm && pk.last);
        if pk.op == DataOp::Send && pk.first {
            let enabled = !q.managed_recv || q.recv_base < q.recv_enabled;
            if q.rq.is_empty() || !enabled {
                if qp_type == QpType::Rc {
                    // Receiver not ready: the sender retries this PSN after a delay.
                    replies.push(Reply::RnrNak {
                        psn: q.t.expected(),
                    });
                }
                return;
            }
            q.recv_off = 0;
        }
        q.rx_bytes += pk.payload as u64;
        if let Some(bytes) = &payload {
            match pk.op {
                DataOp::Send => {
                    if let Some(r) = q.rq.front() {
                        let sg = r.wr.sg_list.clone();
                        let off = q.recv_off;
                        self.mem.scatter(&sg, off, bytes);
                    }
                }
                _ => {
                    if self
                        .mem
                        .check_remote(pk.aux, pk.addr, bytes.len() as u64, true)
                    {
                        let _ = self.mem.write(pk.addr, bytes);
                    } else {
                        self.stats.access_errors += 1;
                    }
                }
            }
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        if pk.op == DataOp::Send {
            q.recv_off += pk.payload as u64;
        }
        if pk.last && needs_recv {
            let byte_len = if pk.op == DataOp::Send {
                q.recv_off
            } else {
                pk.msg_len
            };
            let capacity: u64 =
                q.rq.front()
                    .map(|r| r.wr.sg_list.iter().map(|s| s.length as u64).sum())
                    .unwrap_or(0);
            if let Some(r) = q.rq.pop_front() {
                q.recv_base += 1;
                let status = if pk.op == DataOp::Send && byte_len > capacity {
                    WcStatus::LocalLengthError
                } else {
                    WcStatus::Success
                };
                let opcode = if pk.has_imm {
                    WcOpcode::RecvWithImm
                } else {
                    WcOpcode::Recv
                };
                let mut c = wc(r.wr.wr_id, status, opcode, byte_len, qpn);
                c.imm = pk.has_imm.then_some(pk.imm);
                c.src_host = pk.src;
                c.src_qp = pk.src_qp;
                let cq = q.recv_cq;
                self.push_cqe(cq, c, eff);
            }
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        q.t.on_accepted(now, info, replies);
    }

    /// Places a packet a multipath receiver accepted, possibly out of order (MP-RDMA §3.1): WRITE
    /// data goes to its address, SEND data to the RECV its MSN names at the offset it carries
    /// (iPSN × MTU). Messages complete in order, once the transport's rcv_nxt passes their tail.
    #[allow(clippy::too_many_arguments)]
    fn accept_data_ooo(
        &mut self,
        now: Time,
        pk: &Packet,
        info: DataInfo,
        payload: Option<Vec<u8>>,
        mtu: u64,
        replies: &mut Vec<Reply>,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        // Out of order, any packet may come first: each checks its whole message.
        if !self.write_allowed(pk, mtu) {
            self.stats.access_errors += 1;
            replies.push(Reply::AccessNak { psn: pk.psn });
            return;
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        let needs_recv = pk.op == DataOp::Send || (pk.has_imm && pk.last);
        let mut sg = None;
        if needs_recv {
            // The RECV of message `msn`: the receive queue's head belongs to MSN recv_base.
            let idx = (pk.msn as u64).checked_sub(q.recv_base);
            let r = idx.and_then(|i| {
                let enabled = !q.managed_recv || q.recv_base + i < q.recv_enabled;
                q.rq.get(i as usize).filter(|_| enabled)
            });
            match r {
                Some(r) => sg = Some(r.wr.sg_list.clone()),
                None => {
                    replies.push(Reply::RnrNak { psn: pk.psn });
                    return;
                }
            }
        }
        q.rx_bytes += pk.payload as u64;
        if let Some(a) = q.rx_audit.as_mut() {
            // The NIC's own check of §3.4: a synchronise packet is placed only once every PSN
            // before its message has been.
            if let Some(first) = info.sync_first {
                self.stats.sync_placed += 1;
                if !a.all_below(first) {
                    self.stats.sync_placed_early += 1;
                }
            }
            a.insert(pk.psn);
        }
        if let Some(bytes) = &payload {
            match pk.op {
                DataOp::Send => {
                    if let Some(sg) = &sg {
                        self.mem.scatter(sg, pk.addr, bytes);
                    }
                }
                _ => {
                    if self
                        .mem
                        .check_remote(pk.aux, pk.addr, bytes.len() as u64, true)
                    {
                        let _ = self.mem.write(pk.addr, bytes);
                    } else {
                        self.stats.access_errors += 1;
                    }
                }
            }
        }
        let q = self.qps[qpn as usize].as_mut().unwrap();
        if pk.last && needs_recv {
            q.rx_pending.insert(
                pk.psn,
                PendingRecv {
                    byte_len: pk.msg_len,
                    send: pk.op == DataOp::Send,
                    imm: pk.has_imm.then_some(pk.imm),
                    src_host: pk.src,
                    src_qp: pk.src_qp,
                },
            );
        }
        q.t.on_accepted(now, info, replies);
        let upto = q.t.expected();
        let mut cqes = Vec::new();
        while let Some(e) = q.rx_pending.first_entry() {
            if *e.key() >= upto {
                break;
            }
            let m = e.remove();
            let Some(r) = q.rq.pop_front() else { break };
            q.recv_base += 1;
            let capacity: u64 = r.wr.sg_list.iter().map(|s| s.length as u64).sum();
            let status = if m.send && m.byte_len > capacity {
                WcStatus::LocalLengthError
            } else {
                WcStatus::Success
            };
            let opcode = if m.imm.is_some() {
                WcOpcode::RecvWithImm
            } else {
                WcOpcode::Recv
            };
            let mut c = wc(r.wr.wr_id, status, opcode, m.byte_len, qpn);
            c.imm = m.imm;
            c.src_host = m.src_host;
            c.src_qp = m.src_qp;
            cqes.push((q.recv_cq, c));
        }
        for (cq, c) in cqes {
            self.push_cqe(cq, c, eff);
        }
    }

    /// A remote access error NAK at the requester: what lies below its PSN is acknowledged (an
    /// in-order transport's NAK implies it), the WR holding the PSN completes
    /// `RemoteAccessError`, and the QP goes to Error (the rest flushed).
    fn on_access_nak(&mut self, now: Time, qpn: QpNum, psn: u32, sport: u16, eff: &mut Effects) {
        let Some(q) = self.qp(qpn) else { return };
        if q.state != QpState::Rts {
            return;
        }
        if !q.t.out_of_order() {
            let fb = Feedback::Ack {
                cum: psn,
                sack: None,
                echo_sport: sport,
                ece: false,
                retx: false,
            };
            self.feedback(now, qpn, fb, eff);
        }
        let Some(q) = self.qp(qpn) else { return };
        let at = q
            .sq
            .iter()
            .position(|w| {
                w.first_psn
                    .is_some_and(|f| psn >= f && psn < f + w.npkts.max(1))
            })
            .unwrap_or(0);
        self.enter_error(qpn, Some((at, WcStatus::RemoteAccessError)), eff);
    }

    /// A READ response at the requester: in order, it is placed and acknowledges its PSN; a gap
    /// makes the requester ask again from the missing PSN (once per gap).
    fn on_read_resp(
        &mut self,
        now: Time,
        pk: &Packet,
        payload: Option<Vec<u8>>,
        p: &NicParams,
        eff: &mut Effects,
    ) {
        let qpn = pk.dst_qp;
        let mtu = p.nic.mtu as u64;
        let Some(Some(q)) = self.qps.get_mut(qpn as usize) else {
            return;
        };
        let mut expected = None;
        for (i, w) in q.sq.iter().enumerate() {
            if w.wr.op == SendOp::Read && !w.done {
                if let Some(f) = w.first_psn {
                    expected = Some((i, f + w.read_got));
                }
                break;
            }
        }
        let Some((i, want)) = expected else { return };
        let mut fx = TxFx::default();
        if pk.psn != want {
            if pk.psn > want && !q.read_rewound {
                q.read_rewound = true;
                self.stats.ooo_drops += 1;
                q.t.resend_from(now, want, &mut fx);
                self.transport_fx(qpn, fx, eff);
            }
            return;
        }
        q.read_rewound = false;
        q.rx_bytes += pk.payload as u64;
        let w = &mut q.sq[i];
        let off = w.read_got as u64 * mtu;
        w.read_got += 1;
        let sg = w.wr.sg_list.clone();
        if w.read_got == w.npkts {
            w.done = true;
        }
        if let Some(b) = payload {
            self.mem.scatter(&sg, off, &b);
        }
        // The response acknowledges its own PSN (and everything before it).
        self.feedback(
            now,
            qpn,
            Feedback::Ack {
                cum: pk.psn + 1,
                sack: Some(pk.psn),
                echo_sport: pk.sport,
                ece: pk.ce,
                retx: pk.retx,
            },
            eff,
        );
    }
}

/// A set of PSNs as a contiguous prefix plus what lies beyond it (audit only).
#[derive(Debug, Default)]
struct PsnSet {
    /// Every PSN below this is in the set.
    prefix: u32,
    beyond: std::collections::BTreeSet<u32>,
}

impl PsnSet {
    fn insert(&mut self, psn: u32) {
        if psn < self.prefix {
            return;
        }
        self.beyond.insert(psn);
        while self.beyond.remove(&self.prefix) {
            self.prefix += 1;
        }
    }
    fn all_below(&self, psn: u32) -> bool {
        self.prefix >= psn
    }
}

/// The first PSN not yet known to have arrived (what a timeout goes back to).
fn first_missing(q: &Qp) -> u32 {
    let acked = q.t.acked();
    for w in &q.sq {
        if w.done || !w.wr.op.carries_data() {
            continue;
        }
        return match w.first_psn {
            Some(f) if w.wr.op == SendOp::Read => f + w.read_got,
            Some(f) => f.max(acked),
            None => acked,
        };
    }
    acked
}

fn wc(wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u64, qpn: QpNum) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode,
        byte_len,
        imm: None,
        qp_num: qpn,
        src_host: 0,
        src_qp: 0,
    }
}

fn op_of(op: &SendOp) -> WcOpcode {
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

fn op_name(op: &SendOp) -> &'static str {
    match op {
        SendOp::Send => "send",
        SendOp::SendWithImm(_) => "send_imm",
        SendOp::Write => "write",
        SendOp::WriteWithImm(_) => "write_imm",
        SendOp::Read => "read",
        _ => "control",
    }
}

#[cfg(test)]
mod tests {
    use super::PsnSet;

    #[test]
    fn the_sync_audit_set_knows_when_every_earlier_psn_is_in() {
        let mut a = PsnSet::default();
        for p in [0, 1, 3, 4] {
            a.insert(p);
        }
        assert!(
            a.all_below(2) && !a.all_below(3) && !a.all_below(5),
            "PSN 2 is missing"
        );
        a.insert(2);
        assert!(a.all_below(5) && !a.all_below(6));
        a.insert(1);
        assert!(a.all_below(5), "a duplicate changes nothing");
    }
}
