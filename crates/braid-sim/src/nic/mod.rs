//! The RNIC: QPs (RC, UC, UD) with send and receive queues, CQs, registered memory, the transmit
//! arbiter (round-robin between QPs at MTU granularity), the QP-context cache, cross-channel
//! WAIT/ENABLE work requests, and the RoCEv2 RC transport (PSNs, cumulative ACK/NAK, go-back-N on
//! NAK and timeout) with DCQCN rate control.
//!
//! The NIC never touches the event queue: every call returns its wishes (timers, a transmit kick,
//! CQ notifications, records) in [`Effects`], which the world carries out.
//!
//! This file holds the NIC's types (QPs, CQs, WQEs, effects, counters) and the [`Nic`] itself
//! with its small shared helpers; the behaviour is split by responsibility into `verbs`
//! (resources and posting), `tx` (the transmit side), `build` (packet building and WQE
//! retirement) and `rx` (the receive path, feedback and timers).

use crate::arbiter::{Ets, Rotations};
use crate::memory::{Memory, RegLimits};
use crate::nic::config::{AckPriority, ArbiterPolicy, NicConfig};
use crate::packet::*;
use crate::qp_cache::QpCache;
use crate::transport::config::TransportConfig;
use crate::transport::rc::RcTransport;
pub use crate::transport::TimerKind;
use crate::transport::{DataInfo, Feedback, Plan, Reply, RetryLimits, RxClass, Transport, TxFx};
use braid_engine::time::Time;
use braid_verbs::*;
use std::collections::VecDeque;

mod build;
pub mod config;
mod feedback;
mod limits;
pub mod mtt;
mod reserve;
mod rx;
mod rx_data;
mod tx;
mod verbs;

/// Parameters every NIC shares, resolved once from the scenario.
#[derive(Debug, Clone)]
pub struct NicParams {
    pub nic: NicConfig,
    pub transport: TransportConfig,
    pub ack_prio: u8,
    /// The WQE pipeline's limits (`limits.rs`), from `nic`.
    pub limits: limits::WqeLimits,
}

impl NicParams {
    pub fn new(nic: NicConfig, transport: TransportConfig) -> Self {
        let ack_prio = match nic.ack_priority {
            AckPriority::High => 0,
            AckPriority::Data => nic.priority,
        };
        NicParams {
            limits: limits::WqeLimits::new(&nic),
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
///
/// Every packet a NIC sends or takes in builds one, has the world test it and drops it, and
/// nearly all are empty. So the rare wishes (timers, CQ notifications, message records) share
/// one list: three lists cost ~10 instructions more per call to build, test and drop.
#[derive(Default)]
pub struct Effects {
    /// Timers, CQ notifications and completed messages, in the order asked.
    pub list: Vec<Effect>,
    /// The transmit side may have something new to send.
    pub kick: bool,
    /// The receive backlog crossed the threshold: pause (true) / resume (false) the upstream port.
    pub rx_pfc: Option<bool>,
}

/// One of the rarer wishes in [`Effects::list`].
pub enum Effect {
    /// A transport timer: when, which, the QP (tagged with its epoch) and the generation.
    Timer(Time, TimerKind, QpNum, u32),
    /// An armed CQ got a completion.
    Notify(CqId),
    /// A message completed (the messages table).
    Message(MsgRecord),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QpState {
    /// Emptied and disconnected (after `modify_qp(Reset)`): posts are refused, arriving packets
    /// dropped, until `connect_qp`.
    Reset,
    /// Created, not connected: posts are refused and arriving packets dropped (a real RNIC
    /// receives only from RTR on, so the requester sees no ACK and retries).
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
/// AETH NAK code of an invalid request (IBA 9.7.5.2.4: a SEND longer than its receive), in a
/// NAK packet's `aux`.
pub const NAK_INVALID_REQUEST: u32 = 1;
/// A NAK's `aux` marking selective repeat's NACK (IRN): its `sack` names the PSN the receiver
/// accepted out of order (a synchronise NAK's names the PSN it dropped).
pub const NAK_SACK: u32 = 3;

#[derive(Debug)]
struct SendWqe {
    wr: SendWr,
    bytes: u64,
    /// IBV_SEND_INLINE: the bytes as they were when the WR was posted (the CPU copies inline
    /// data into the WQE; the buffer may be reused at once). Only when the memory is tracked.
    inline_data: Option<Vec<u8>>,
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
    /// READ under selective repeat: responses placed out of order beyond `read_got`, by their
    /// index in the READ (always empty for an in-order requester).
    read_ahead: std::collections::BTreeSet<u32>,
    signaled: bool,
    /// MP-RDMA: message sequence number (among messages that consume a RECV).
    msn: u32,
    /// An lkey of its scatter-gather list is in another protection domain than the QP's: when
    /// the NIC reaches it, it completes IBV_WC_LOC_PROT_ERR and the QP goes to Error.
    loc_prot: bool,
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
    /// Its protection domain (host-wide number): remote accesses arriving on it may use only
    /// rkeys of this PD, its own WRs only lkeys of it.
    pub pd: u32,
    /// The tenant whose address space its local addresses (RECV buffers, sources of its sends,
    /// targets of the WRITEs and READs it serves) are in.
    pub space: TenantId,
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
    /// READs it keeps outstanding as a requester (ibverbs `max_rd_atomic`).
    max_rd_atomic: u8,
    /// READs it remembers as a responder (ibverbs `max_dest_rd_atomic`).
    max_dest_rd_atomic: u8,
    /// Whether its PSNs go on the wire as 24-bit numbers offset by the initial PSNs below
    /// (`transport/psn.rs`): RC and UC QPs, MP-RDMA's included. UD keeps its internal
    /// numbers.
    wire_psn: bool,
    /// The initial PSN of what it sends (ibverbs `sq_psn`), and of what its connected remote
    /// sends (`rq_psn`, the remote's `sq_psn`).
    sq_psn: u32,
    rq_psn: u32,
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
    /// Its standing in the WQE pipeline (`limits.rs`).
    wqe_q: limits::QpWqe,
    read_rewound: bool,
    /// Reliability and congestion control.
    pub t: QpTransport,
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
    /// Whether the WR at `i` is a READ not started yet while `max_rd_atomic` READs are
    /// outstanding: it waits in the send queue until one completes (the IBTA's requester never
    /// has more READs in flight than its responder has resources for; rxe's requester waits for
    /// a free `rd_atomic` credit the same way). Counted only when a READ is at the cursor.
    #[inline]
    fn read_waits(&self, i: usize) -> bool {
        let Some(w) = self.sq.get(i) else {
            return false;
        };
        w.wr.op == SendOp::Read
            && w.first_psn.is_none()
            && self
                .sq
                .iter()
                .take(i)
                .filter(|w| w.wr.op == SendOp::Read && !w.done)
                .count()
                >= self.max_rd_atomic as usize
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
    /// Packets for a connected QP from an address other than its remote's, dropped.
    pub foreign_drops: u64,
    /// ACKs and NAKs naming a PSN their requester does not have outstanding, dropped.
    pub stale_feedback_drops: u64,
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
    /// QP numbers handed out so far, reservations included (`nic/reserve.rs`): the next QP
    /// created gets this number, never one below it.
    qp_next: QpNum,
    /// Reserved ranges [first, end) (one per lazy flow sender).
    reserved: Vec<(QpNum, QpNum)>,
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
    /// The read-ahead per turn in bytes: `nic.tx_prefetch`, or `nic.tx_prefetch_time` of this
    /// port's line rate if that is more.
    read_ahead: u64,
    cache: QpCache,
    /// The MPT/MTT cache the receive pipeline resolves remote keys through (`nic.mtt`).
    pub mtt: mtt::MttCache,
    tx_stall_until: Time,
    /// The NIC-wide WQE pipeline (processing time, message-rate ceiling).
    wqe: limits::WqePipeline,
    /// Receive pipeline (used when the QP cache can miss).
    rx_busy_until: Time,
    pub rx_backlog: u64,
    rx_paused_upstream: bool,
    pub stats: NicStats,
    sport_seed: u64,
    /// `nic.initial_psn`: every QP's initial PSN, or None to draw each from the seed.
    fixed_psn: Option<u32>,
    /// Payload bytes of packets in flight when data is checked.
    pub payloads: std::collections::HashMap<PktId, Vec<u8>>,
    /// Builds transports for new QPs instead of the scenario's kind (library users, tests).
    pub transport_factory: Option<crate::transport::TransportFactory>,
    /// Scratch list for a receiving transport's replies, kept between packets so that the ACK
    /// every data packet gets does not cost an allocation and a free.
    replies: Vec<crate::transport::Reply>,
}

impl Nic {
    pub fn new(host: u32, line_rate: u64, p: &NicParams, sport_seed: u64) -> Self {
        Nic {
            host,
            addresses: p.nic.addresses.max(1),
            line_rate,
            qps: Vec::new(),
            qp_next: 0,
            reserved: Vec::new(),
            cqs: Vec::new(),
            mem: Memory::new(p.nic.data_check).with_limits(RegLimits {
                max_mr: p.nic.max_mr,
                tenant_max_mr: p.nic.tenant_max_mr,
                tenant_max_pinned: p.nic.tenant_max_pinned.0,
            }),
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
            read_ahead: p.nic.tx_prefetch.0.max(
                (p.nic.tx_prefetch_time.0 as u128 * line_rate as u128
                    / 8
                    / braid_engine::time::S as u128) as u64,
            ),
            cache: QpCache::new(p.nic.qp_cache),
            mtt: p.nic.mtt.build(p.nic.qp_cache_miss),
            tx_stall_until: 0,
            wqe: limits::WqePipeline::default(),
            rx_busy_until: 0,
            rx_backlog: 0,
            rx_paused_upstream: false,
            stats: NicStats::default(),
            sport_seed,
            fixed_psn: p.nic.initial_psn,
            payloads: Default::default(),
            transport_factory: None,
            replies: Vec::new(),
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
    /// QP numbers ever handed out on this NIC (QP numbers are not reused): created QPs and
    /// reserved numbers (a reserved number counts as the QP its tenant would have created).
    pub fn qps_created(&self) -> u64 {
        self.qp_next as u64
    }
    pub fn cache_uses_rx_pipeline(&self) -> bool {
        self.cache.enabled()
    }

    /// The initial PSN of QP `qpn` of the host whose node id is `node`: `nic.initial_psn`, or a
    /// draw from the run's seed (every NIC of a run shares it, so a responder knows its
    /// remote's, as ibverbs' consumers exchange them when they connect).
    fn initial_psn(&self, node: u32, qpn: QpNum) -> u32 {
        let v = match self.fixed_psn {
            Some(v) => v,
            None => {
                braid_engine::derive_seed(self.sport_seed, "psn", &[node as u64, qpn as u64]) as u32
            }
        };
        v & crate::transport::psn::PSN_MASK
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
}

/// A QP's transport: the built-in RoCEv2 RC one called directly, any other (MP-RDMA, a
/// factory's) through the trait object.
///
/// The NIC calls its QP's transport about eight times per data packet (plan, on_sent, on_data,
/// on_accepted, out_of_order twice, on_feedback, acked). Through `Box<dyn Transport>` each was an
/// indirect call with its register saves and arguments in memory; matched here, the RC calls
/// are inlined into the NIC's paths.
#[derive(Debug)]
pub enum QpTransport {
    Rc(Box<RcTransport>),
    Other(Box<dyn Transport>),
}

impl From<Box<dyn Transport>> for QpTransport {
    fn from(t: Box<dyn Transport>) -> Self {
        QpTransport::Other(t)
    }
}

/// The [`Transport`] methods, forwarded (inherent, so callers need not import the trait).
macro_rules! forward {
    (shared { $($name:ident($($a:ident: $t:ty),*) $(-> $r:ty)?;)* }
     exclusive { $($mname:ident($($ma:ident: $mt:ty),*) $(-> $mr:ty)?;)* }) => {
        impl QpTransport {
            $(
                #[inline(always)]
                pub fn $name(&self $(, $a: $t)*) $(-> $r)? {
                    match self {
                        QpTransport::Rc(t) => t.$name($($a),*),
                        QpTransport::Other(t) => t.$name($($a),*),
                    }
                }
            )*
            $(
                #[inline(always)]
                pub fn $mname(&mut self $(, $ma: $mt)*) $(-> $mr)? {
                    match self {
                        QpTransport::Rc(t) => t.$mname($($ma),*),
                        QpTransport::Other(t) => t.$mname($($ma),*),
                    }
                }
            )*
        }
    };
}

forward! {
    shared {
    response_gate() -> Time;
    acked() -> u32;
    expected() -> u32;
    rate_bps() -> Option<f64>;
    timeouts() -> u64;
    out_of_order() -> bool;
    counters() -> Vec<(&'static str, f64)>;
    kind() -> &'static str;
    totals() -> Vec<(&'static str, u64)>;
    ood_histogram() -> Option<&[u64]>;
    vp_counters() -> Vec<(u16, &'static str, u64)>;
    cc_state(now: Time) -> Option<crate::transport::CcState>;
    }
    exclusive {
    set_sport(sport: u16);
    plan(now: Time, next_new: u32, have_new: bool) -> Plan;
    sync_at(psn: u32);
    on_sent(now: Time, psn: u32, npsn: u32, wire: u32, reliable: bool, fx: &mut TxFx);
    on_response_sent(now: Time, wire: u32);
    on_feedback(now: Time, fb: Feedback, fx: &mut TxFx);
    on_int(now: Time, int: &crate::net::int::IntStack);
    on_timer(now: Time, kind: TimerKind, gen: u32, first_missing: u32, fx: &mut TxFx);
    resend_from(now: Time, psn: u32, fx: &mut TxFx);
    on_read_sent(first: u32, npsn: u32);
    on_data(now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass;
    on_accepted(now: Time, d: DataInfo, out: &mut Vec<Reply>);
    on_read_request(now: Time, psn: u32, npsn: u32, out: &mut Vec<Reply>) -> RxClass;
    }
}

/// The transport as a trait object.
impl AsRef<dyn Transport> for QpTransport {
    fn as_ref(&self) -> &(dyn Transport + 'static) {
        match self {
            QpTransport::Rc(t) => t.as_ref(),
            QpTransport::Other(t) => t.as_ref(),
        }
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
mod tests;
