//! MP-RDMA (Lu et al., NSDI'18): one RDMA connection spread over many virtual paths.
//!
//! - A virtual path (VP) is a UDP source port; ECMP maps it to a physical path.
//! - One congestion window for all paths: +1/cwnd per ACK without ECN, −1/2 per ECN ACK (§3.2).
//! - Multi-path ACK clocking: the packets an ACK allows go out on the VP that ACK echoes, at most
//!   `max_per_ack` (2) per ACK; the rest wait for later ACKs or the burst timer (RTT/2 with no
//!   ACK), which sends them on random VPs (§3.5 burst control).
//! - awnd = cwnd + inflate − (snd_nxt − snd_una); inflate +1 per ACK, −(aack − snd_una) when the
//!   cumulative point moves.
//! - OOO-aware path selection (§3.3.2): snd_ooh is the highest SACKed PSN, snd_ool = snd_ooh − Δ;
//!   an ACK (of a non-retransmitted packet) with SACK < snd_ool shrinks cwnd by one and clocks
//!   nothing.
//! - Receiver: a cyclic bitmap of L two-bit slots from rcv_nxt; a packet at or beyond rcv_nxt + L
//!   is dropped and the receiver NACKs rcv_nxt (once per rcv_nxt value).
//! - Loss recovery (§3.5): a NACK starts recovery (recovery = snd_nxt, snd_retx = NACKed PSN); while
//!   in recovery ACKs clock retransmissions from snd_retx; recovery ends when snd_una reaches
//!   `recovery`. A NACK echoes the dropped packet's VP and clocks on it like an ACK
//!   (`nack_clocks`). With no new data, a packet suspected lost (not SACKed, unacknowledged for
//!   longer than srtt + 4·rttvar) is retransmitted early, once (FUSO); an allowed packet waits for
//!   that (`TimerKind::Early`). RTO is the last resort and retransmits everything unacknowledged.
//! - Probing: once per RTT, with probability p, the next packet goes to a new random VP.
//! - Path window reduction ("use it or lose it"): an ACK that opened a full window and whose packet
//!   finds no data shrinks cwnd by one (unused initial-window room is not taken back).
//! - Restart from IW after `restart_rtts` RTTs idle.
//! - READ (`read.rs`): a READ's PSNs are acknowledged by its responses only; a missing response
//!   is asked for again go-back-N, from its PSN, every later READ with it, in order on one VP.
//!
//! The NIC does data placement and completions (see `nic.rs`, `accept_data_mp`): a packet the
//! bitmap accepts is placed directly; a message completes when rcv_nxt passes its tail.
//! - Synchronise (§3.4, `mp_sync.rs`): a message flagged synchronise (`SendWr::fence`) is held
//!   back at the sender; one of its packets arriving before every earlier message is complete is
//!   dropped and NACKed.
//!
//! Layout: `mod.rs` (types and state), `window.rs` (construction, window arithmetic, VP choice,
//! timer arming), `ack.rs` (ACK/NACK processing, RTT sampling, entering recovery), `timers.rs`
//! (burst, RTO, hole and early-retransmission timers), `receiver.rs` (receive bitmap and ACK
//! generation), `read.rs` (the requester's READ acknowledgement and recovery), `transport.rs`
//! (the `Transport` impl), `tests/` (unit tests).

mod ack;
mod read;
mod receiver;
mod timers;
mod transport;
mod window;

use super::mp_sync::SyncSender;
use super::{RetryBudget, RetryLimits};
use crate::transport::config::MpRdmaConfig;
use braid_engine::{RngStream, Time};
use std::collections::VecDeque;

/// Slot states of the receive bitmap (2 bits each in hardware).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Slot {
    Empty = 0,
    Received = 1,
    Tail = 2,
    TailWithCompletion = 3,
}

/// Settings an MP-RDMA transport takes from the scenario.
#[derive(Debug, Clone)]
pub struct MpRdmaParams {
    pub cfg: MpRdmaConfig,
    pub mtu: u32,
    pub rto: Time,
    pub rnr_delay: Time,
    pub sport: u16,
    /// Seed of the transport's own random stream (VP choice, probing).
    pub seed: u64,
    pub host: u32,
    pub qpn: u32,
    /// The QP's `retry_cnt` and `rnr_retry`: past them the connection gives up (as RC does).
    pub retry: RetryLimits,
}

/// Counters of one MP-RDMA QP.
#[derive(Debug, Default, Clone)]
pub struct MpStats {
    pub acks: u64,
    pub ecn_acks: u64,
    /// ACKs whose SACK fell below snd_ool (slow path pruned).
    pub ooo_pruned: u64,
    pub nacks: u64,
    pub recoveries: u64,
    pub retx: u64,
    pub early_retx: u64,
    pub probes: u64,
    pub burst_timer_pkts: u64,
    pub window_reductions: u64,
    pub restarts: u64,
    /// Hole retransmissions granted by the hole timer (no ACK left to clock them).
    pub hole_timer: u64,
    /// Receiver: packets dropped beyond the bitmap, and the out-of-order degree seen.
    pub bitmap_drops: u64,
    /// Go-back-N re-requests of READs (a missing response, the responder's NAK of an early
    /// request, or a timeout), and the READ requests they sent.
    pub read_rewinds: u64,
    pub read_retx: u64,
    /// Rewinds the READ re-request timer started (no response for the suspicion age).
    pub read_timer: u64,
    /// Receiver: duplicates (a retransmission of a packet already received).
    pub dup_rx: u64,
    pub max_ood: u32,
    /// Receiver: synchronise messages that arrived early (a packet came before an earlier
    /// message was complete: Fig. 18's "OOO synchronise"), and their packets dropped and NACKed.
    pub sync_early: u64,
    pub sync_dropped: u64,
    /// Out-of-order degree of every accepted packet (psn − rcv_nxt): entry d counts packets d
    /// ahead. L entries, exact: a packet L or more ahead is dropped, never accepted.
    pub ood_hist: Vec<u64>,
    /// Packets sent, by what allowed them (`Src`) and what they carried (`Pick`): the accounting
    /// of where a connection's packets come from (instrumentation only).
    pub sent: [[u64; PICKS]; SRCS],
    /// Packets sent per VP, by `Src` (index `SRCS` counts probes, whatever their source).
    pub vp_sent: std::collections::BTreeMap<u16, [u64; SRCS + 1]>,
}

/// What allowed a packet out: the credit it used. Instrumentation, and where a credit's VP
/// came from (only `Ack` credits go to a VP an ACK echoed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// Clocked by an ACK, on the VP it echoes.
    Ack = 0,
    /// The burst timer.
    Burst,
    /// First start (nothing in flight, not idle long).
    Start,
    /// Restart after idle (from IW).
    Restart,
    /// A NACK (or RNR NAK / missing READ response) with nothing else allowed.
    Nack,
    /// The hole timer.
    HoleTimer,
    /// A retransmission timeout.
    Rto,
}
pub const SRCS: usize = 7;
pub const SRC_NAMES: [&str; SRCS] = [
    "ack",
    "burst",
    "start",
    "restart",
    "nack",
    "hole_timer",
    "rto",
];
pub const PICKS: usize = 6;
pub const PICK_NAMES: [&str; PICKS] =
    ["new", "recovery", "hole", "early", "sync_retx", "read_retx"];

#[derive(Debug)]
pub struct MpRdmaTransport {
    p: MpRdmaParams,
    iw: f64,
    rng: RngStream,
    // ---- sender ----
    pub cwnd: f64,
    pub inflate: f64,
    pub snd_una: u32,
    pub snd_nxt: u32,
    /// Highest SACKed PSN (+1, so 0 = none yet).
    snd_ooh1: u32,
    pub in_recovery: bool,
    pub recovery: u32,
    pub snd_retx: u32,
    /// A single retransmission asked for outside the recovery walk (a repeated NACK).
    retx_one: Option<u32>,
    /// The last retransmission of the receiver's first hole (snd_una) and when it left: a NACK
    /// for that PSN within an RTT of it is not acted on again.
    hole_retx: Option<(u32, Time)>,
    /// The first PSN the recovery walk resends (hole + L): a PSN in [walk_from, snd_retx) that
    /// becomes the hole already has the walk's copy on its way.
    walk_from: u32,
    /// The cumulative point moved onto such a PSN: arm the hole timer for it.
    hole_rearm: bool,
    early_ptr: u32,
    /// Sender scoreboard of [snd_una, snd_nxt): when each PSN last left, and whether an ACK
    /// SACKed it (each ACK carries the one PSN that triggered it). Early retransmission needs
    /// both: only a PSN not SACKed and older than the loss-suspicion age is resent.
    sent_at: VecDeque<(Time, bool)>,
    /// The VP the latest ACK echoed: a path that just delivered. An early retransmission whose
    /// credit has no ACK's VP (initial window, burst timer) goes there rather than to a random,
    /// possibly lossy, VP (FUSO sends recovery packets on a sub-flow that is not lossy).
    last_ack_vp: Option<u16>,
    /// An early-retransmission check is pending (one timer at a time).
    early_armed: bool,
    /// `plan` left an allowed packet waiting for loss to be suspected (no new data): the
    /// `Early` timer wakes the QP only then.
    early_wait: bool,
    /// The latest `plan` found no new data ready.
    no_data: bool,
    /// Packets allowed but not sent yet, each with the VP it goes to, what allowed it, and
    /// whether it is the window an ACK opened (the one credit of such an ACK that "use it or
    /// lose it" takes back if it finds nothing to send, §3.5).
    credits: VecDeque<Credit>,
    /// What `plan` chose, confirmed by `on_sent`: (psn, vp, kind, source).
    planned: Option<(u32, u16, Pick, Src)>,
    burst_armed: bool,
    burst_gen: u32,
    probe_next: bool,
    probe_vp: Option<u16>,
    probe_epoch_end: u32,
    srtt: f64,
    rttvar: f64,
    rtt_seq: Option<(u32, Time)>,
    started: bool,
    /// The cumulative point moved (a held clock in recovery may go now).
    window_moved: bool,
    last_activity: Time,
    /// When the last ACK arrived: the burst timer waits for ACKs to stop.
    last_ack: Time,
    rnr_until: Time,
    rto: crate::transport::rto::RtoTimer,
    last_progress: Time,
    timeouts: u64,
    budget: RetryBudget,
    /// VPs that carried at least one packet (for tests and reports; a NIC would not keep this).
    pub vps_used: std::collections::BTreeSet<u16>,
    /// Synchronise: the hold of a flagged message and the resending of dropped ones.
    pub sync: SyncSender,
    /// READs outstanding at this requester, in PSN order (`read.rs`).
    reads: VecDeque<read::ReadOut>,
    /// READs being asked for again (go-back-N), if any.
    read_rewind: Option<read::Rewind>,
    /// When a READ last made progress (a request left or a response arrived), and whether the
    /// re-request timer is pending (one at a time).
    read_progress: Time,
    read_timer_armed: bool,
    // ---- receiver ----
    pub rcv_nxt: u32,
    bitmap: Vec<Slot>,
    nak_sent_for: Option<u32>,
    /// First PSN of the latest synchronise message counted as early (each counts once).
    sync_early_hi: Option<u32>,
    pub stats: MpStats,
}

/// A packet allowed but not sent yet.
#[derive(Debug, Clone, Copy)]
struct Credit {
    vp: u16,
    src: Src,
    /// Given by an ACK that opened the window (see `MpRdmaTransport::credits`).
    lose: bool,
}

impl Credit {
    fn new(vp: u16, src: Src) -> Self {
        Credit {
            vp,
            src,
            lose: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    New = 0,
    Recovery,
    One,
    Early,
    /// A synchronise packet the receiver dropped.
    SyncRetx,
    /// A READ asked for again (`read.rs`): needs no credit, its PSNs are already outstanding.
    ReadRetx,
}

#[cfg(test)]
mod tests;
