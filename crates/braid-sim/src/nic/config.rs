//! `[nic]`: the simulated RNIC's settings (MTU, ACK policy, QP cache, WQE and message-rate
//! limits, the transmit arbiter), beside the NIC they configure; `crate::config` re-exports them.

use braid_topo::units::{Bytes, Duration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AckPriority {
    /// ACKs, NAKs and CNPs go in the highest-priority queue (0).
    #[default]
    High,
    /// Control packets share the data priority.
    Data,
}

/// How the NIC's transmit arbiter picks the next QP to send a packet (the hardware baselines of
/// PeRF). A QP's class is its service level (`QpInit::priority`, else `nic.priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArbiterPolicy {
    /// Round robin over every active QP, whatever its class (as ConnectX NICs do by default).
    #[default]
    Rr,
    /// Strict priority between classes: the lowest class number first (0 before 1 before ...);
    /// round robin within a class.
    Sp,
    /// Enhanced Transmission Selection: deficit weighted round robin between classes by bytes
    /// (quantum ∝ `ets_weights`), round robin within a class.
    Ets,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NicConfig {
    /// Payload bytes per packet (the RDMA path MTU).
    pub mtu: u32,
    /// 1 = ACK every packet; N = one ACK per N packets and at each message end.
    pub ack_every: u32,
    pub ack_priority: AckPriority,
    /// Priority (traffic class) of data packets.
    pub priority: u8,
    /// QP-context cache entries (0 = unlimited).
    pub qp_cache: u32,
    /// Cost of a QP-context cache miss: a PCIe round trip during which the pipeline stalls.
    pub qp_cache_miss: Duration,
    /// The memory translation and protection (MPT/MTT) cache (`nic/mtt.rs`); off by default.
    pub mtt: super::mtt::MttConfig,
    /// Serial processing time per WQE, NIC-wide, on top of the message rates (every WR is a
    /// WQE: data, zero-byte, WAIT, SEND_ENABLE, RECV_ENABLE, NOP; `nic/limits.rs`). Default 0:
    /// no source separates it from the message rates below, which already bound WQE processing.
    pub wqe_time: Duration,
    /// WQEs (messages) per second per NIC port, 0 = unlimited. Default 107.5e6: half of
    /// ConnectX-6's "215 million messages per second" for the dual-port device (NVIDIA
    /// ConnectX-6 user manual, Introduction); the PeRF artifact's QNum_capa = 9 QPs of 12.4 M
    /// to saturate one port (111.6 M) agrees within 4% (docs/scenario.md, "RNIC message rate").
    pub max_msg_rate: f64,
    /// WQEs (messages) per second per QP, 0 = unlimited. Default 12.4e6: the PeRF artifact's
    /// per-QP message capacity on ConnectX-6 (`PERF_NIC_MSG_RATE` = 12,400 Kpps).
    pub max_qp_msg_rate: f64,
    /// WQE processing overlaps the previous WQE's transmission (a pipelined WQE engine): a QP's
    /// next WQE is spaced from the previous one's start, not from the end of its data (true,
    /// the default: AMD ERNIC PG332's WQE processor hands packets to a separate DMA engine, and
    /// PeRF measured its 0_WAIT chains as work-conserving on ConnectX-6; docs/perf.md). false:
    /// a serial engine, processing a WQE only when the previous one's data has gone.
    pub wqe_pipelined: bool,
    /// Retransmission timeout.
    pub rto: Duration,
    /// Delay before retrying after a receiver-not-ready NAK.
    pub rnr_delay: Duration,
    /// Receive-pipeline backlog above which the NIC pauses its upstream port (PFC).
    pub rx_xoff: Bytes,
    /// Carry real bytes and verify where they land.
    pub data_check: bool,
    /// The initial PSN of every QP (0..=2^24-1). Absent (the default): each QP draws its own
    /// from the run's seed, as real NICs' consumers draw them at random (rdma_cm); a fixed one
    /// reproduces a trace or puts a flow's PSNs across the 24-bit wrap. Only the PSNs on the
    /// wire change (`transport/psn.rs`), never a result.
    pub initial_psn: Option<u32>,
    /// Memory regions the NIC holds at once, all tenants together (ibv_device_attr `max_mr`):
    /// a registration beyond fails as ibv_reg_mr does, ENOMEM. Default 16,777,216 (2^24),
    /// what ConnectX (mlx5) NICs report in `ibv_devinfo -v` (docs/scenario.md, "Registration
    /// limits"). 0 = unlimited.
    pub max_mr: u64,
    /// Memory regions one tenant may hold at once, 0 = unlimited (the default): the Linux RDMA
    /// cgroup's `rdma.max` `hca_object` limit a multi-tenant host sets per container.
    pub tenant_max_mr: u64,
    /// Bytes one tenant may have registered (pinned) at once, 0 = unlimited (the default): the
    /// process's RLIMIT_MEMLOCK, past which ibv_reg_mr fails ENOMEM.
    pub tenant_max_pinned: Bytes,
    /// Cross-channel WAIT / SEND_ENABLE / RECV_ENABLE and managed queues (ConnectX's vendor
    /// verbs); false models a NIC without them (e.g. Soft-RoCE), reported in `caps()`.
    pub cross_channel: bool,
    /// Addresses per host (RoCEv2 GID entries, `QpInit::local_addr` picks one): address k of
    /// the host whose node id is n is `n | k << 24`; k = 0 is the node id. Switches route on the
    /// node part; ECMP hashes the whole source address, so QPs on different addresses of one
    /// host may take different paths.
    pub addresses: u8,
    /// The transmit arbiter between QPs: `"rr"` (round robin), `"sp"` (strict priority between
    /// classes, lowest class number first) or `"ets"` (weighted round robin between classes by
    /// bytes). Classes are the QPs' service levels.
    pub arbiter: ArbiterPolicy,
    /// ETS weights, class 0 first (e.g. `[16, 1]`); classes not listed weigh 1. A class's DWRR
    /// quantum is its weight over the smallest weight, times one full frame (MTU + headers).
    pub ets_weights: Vec<f64>,
    /// Transmit read-ahead per arbitration turn: the NIC fetches (DMA-reads) a served QP's next
    /// packets into `tx_prefetch / mtu` MTU-sized buffers, and that QP keeps the wire while it has
    /// a packet ready, until it has sent that many packets (however small; a higher class preempts
    /// it at a packet boundary under `sp`). 0 (the default) = one packet per turn: round robin at
    /// MTU granularity, as before. A small message of another QP then waits for up to
    /// `tx_prefetch / mtu` packets of a bandwidth tenant instead of one: PeRF's message-level
    /// anomaly (docs/scenario.md, "Transmit arbitration").
    pub tx_prefetch: Bytes,
    /// The same read-ahead as a time of this port's wire: `tx_prefetch_time × line rate` bytes
    /// (the larger of the two counts). A read-ahead sized to cover a DMA latency holds a time's
    /// worth of the wire at any link rate, where a byte count holds less time at a faster link.
    /// 0 (the default) = bytes only; no source gives either figure (docs/perf.md, "The transmit
    /// read-ahead across link rates").
    pub tx_prefetch_time: Duration,
}

impl Default for NicConfig {
    fn default() -> Self {
        Self {
            mtu: 1000,
            ack_every: 1,
            ack_priority: AckPriority::High,
            priority: 3,
            qp_cache: 0,
            qp_cache_miss: Duration(1_000_000),
            mtt: Default::default(),
            wqe_time: Duration(0),
            max_msg_rate: 107.5e6,
            max_qp_msg_rate: 12.4e6,
            wqe_pipelined: true,
            rto: Duration(4_000_000_000),
            rnr_delay: Duration(10_000_000),
            rx_xoff: Bytes(64_000),
            data_check: false,
            initial_psn: None,
            max_mr: 1 << 24,
            tenant_max_mr: 0,
            tenant_max_pinned: Bytes(0),
            cross_channel: true,
            addresses: 1,
            arbiter: ArbiterPolicy::Rr,
            ets_weights: vec![],
            tx_prefetch: Bytes(0),
            tx_prefetch_time: Duration(0),
        }
    }
}
