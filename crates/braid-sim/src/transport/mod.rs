//! Transports: the per-QP reliability and congestion-control state machines, behind one
//! interface.
//!
//! The NIC owns everything a transport does not decide: work queues, memory, data placement,
//! completions, the arbiter between QPs. A transport decides, for its QP,
//! - as a sender: which PSN goes out next, on which UDP source port, and when ([`Transport::plan`],
//!   [`Transport::on_sent`]); how receiver feedback moves the acknowledged point and triggers
//!   retransmission ([`Transport::on_feedback`]); what its own timers do ([`Transport::on_timer`]);
//! - as a receiver: how an arriving data packet is classified and what is sent back
//!   ([`Transport::on_data`]).
//!
//! Transports are sans-IO: they never see the event queue or other QPs. Timers they want come
//! back through [`TxFx`]; packets they want sent are returned as [`Reply`] values.
//!
//! The RoCEv2 reliable connection (go-back-N) with DCQCN is [`rc::RcTransport`]. A multipath
//! transport (MP-RDMA) chooses a source port per packet in `plan`, reads the echoed fields of
//! per-packet ACKs ([`Feedback::Ack`] carries `sack`, `echo_sport` and `ece`) and keeps a receive
//! bitmap in `on_data`; switches and the engine need nothing new, since ECMP already hashes every
//! packet's own source port.

pub mod config;
pub mod irn;
pub mod irn_rack;
pub mod mp_rdma;
pub mod mp_sync;
pub mod psn;
pub mod rc;
pub mod rto;

use braid_engine::Time;

/// What a transport is built from when a QP is created.
#[derive(Debug, Clone)]
pub struct TransportCtx {
    /// The RC settings the scenario implies for this QP (a custom transport may wrap an
    /// [`rc::RcTransport`] built from them).
    pub rc: rc::RcConfig,
    pub host: u32,
    pub qpn: u32,
}

/// Builds the transport of each new QP; installed with `Simulation::set_transport_factory`.
pub type TransportFactory = std::rc::Rc<dyn Fn(&TransportCtx) -> Box<dyn Transport>>;

/// What the sender may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Send the packet with this PSN (new data if it equals the NIC's next new PSN, else a
    /// retransmission) with this UDP source port.
    Send { psn: u32, sport: u16 },
    /// Nothing before this time (rate limiting, backoff).
    Wait(Time),
    /// Nothing until feedback, new work or a timer.
    Blocked,
}

/// Feedback from the receiver (or, for READ, from the responses themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// Every PSN below `cum` arrived. `sack` is the PSN that triggered this ACK (if the ACK is
    /// per packet), `echo_sport` the source port it came on, `ece` whether it was ECN-marked.
    /// `retx` echoes the ReTx bit of the data packet (MP-RDMA, Fig. 3). `endpoint` is the
    /// time the data packet and this ACK waited in the two NICs' receive pipelines
    /// ([`crate::packet::Packet::endpoint_ps`]): the round trip less it is the fabric's delay.
    Ack {
        cum: u32,
        sack: Option<u32>,
        echo_sport: u16,
        ece: bool,
        retx: bool,
        endpoint: Time,
    },
    /// Sequence error: the receiver expects `expected`; resend from there. `echo_sport` is the
    /// source port the NAK came on: for MP-RDMA the VP of the data packet it answers.
    Nak { expected: u32, echo_sport: u16 },
    /// MP-RDMA synchronise (§3.4): packet `psn` of a synchronise message arrived while an earlier
    /// message was incomplete (`expected` is the receiver's first hole) and was dropped unplaced;
    /// `echo_sport` is the source port (virtual path) it came on.
    SyncNak {
        expected: u32,
        psn: u32,
        echo_sport: u16,
    },
    /// Receiver not ready for `psn` (no RECV posted): resend it later.
    RnrNak { psn: u32 },
    /// Selective repeat (`transport.recovery = "irn"`): the receiver accepted `sack` out of
    /// order and still expects `expected` (IRN's NACK: cumulative acknowledgement + SACK).
    SackNak { expected: u32, sack: u32 },
    /// A congestion notification (DCQCN).
    Cnp,
}

/// Timers a transport runs, with a generation to ignore stale ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    Rto,
    Alpha,
    RateInc,
    /// DCQCN's periodic rate-decrease check (`transport.dcqcn.reaction = "hpcc"`).
    RateDec,
    /// MP-RDMA burst timer (sends the rest of a burst on random virtual paths).
    Burst,
    /// MP-RDMA: the retransmitted hole may be lost with no ACK left to clock another try.
    Hole,
    /// MP-RDMA: an allowed packet waits for loss to be suspected of an unacknowledged one
    /// (early retransmission, §3.5).
    Early,
    /// MP-RDMA: no READ response came for the loss-suspicion age (a lost last response or
    /// re-request, which no later response reveals).
    ReadRetry,
}

/// What a transport wants done after a call.
#[derive(Debug, Default)]
pub struct TxFx {
    pub timers: Vec<(Time, TimerKind, u32)>,
    /// The QP may have something to send (or send sooner).
    pub kick: bool,
    /// The transport gives up on the connection: the NIC completes the send queue's head WR
    /// with this status, moves the QP to Error and flushes the rest (ibverbs semantics). The
    /// transport is not called again for this QP until it is reset.
    pub fatal: Option<Fatal>,
}

/// Why a transport gave up (the head WR's completion status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fatal {
    /// `retry_cnt` retransmission timeouts in a row without progress
    /// ([`braid_verbs::WcStatus::RetryExceeded`]).
    RetryExceeded,
    /// More receiver-not-ready NAKs in a row than `rnr_retry` allows
    /// ([`braid_verbs::WcStatus::RnrRetryExceeded`]).
    RnrRetryExceeded,
}

/// The retry limits of a QP (ibverbs `retry_cnt` and `rnr_retry`), counted the ibverbs way:
/// `retry_cnt` retransmissions after timeouts, so the (`retry_cnt` + 1)-th consecutive timeout
/// without progress is fatal; `rnr_retry` retries after RNR NAKs, 7 meaning forever. Progress (the
/// acknowledged point moving) restores both budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryLimits {
    pub retry_cnt: u8,
    pub rnr_retry: u8,
}

impl Default for RetryLimits {
    /// ibverbs' usual maximum: 7 retries, RNR retries forever.
    fn default() -> Self {
        RetryLimits {
            retry_cnt: 7,
            rnr_retry: 7,
        }
    }
}

/// Counts consecutive timeouts and RNR NAKs against [`RetryLimits`] (shared by the built-in
/// transports).
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryBudget {
    pub limits: RetryLimits,
    timeouts: u8,
    rnrs: u8,
}

impl RetryBudget {
    pub fn new(limits: RetryLimits) -> Self {
        RetryBudget {
            limits,
            timeouts: 0,
            rnrs: 0,
        }
    }
    /// The acknowledged point moved: both budgets are whole again.
    pub fn progress(&mut self) {
        self.timeouts = 0;
        self.rnrs = 0;
    }
    /// A retransmission timeout without progress: Err once `retry_cnt` retries are spent.
    pub fn timeout(&mut self) -> Result<(), Fatal> {
        if self.timeouts >= self.limits.retry_cnt {
            return Err(Fatal::RetryExceeded);
        }
        self.timeouts += 1;
        Ok(())
    }
    /// An RNR NAK without progress: Err once `rnr_retry` retries are spent (never with 7).
    pub fn rnr(&mut self) -> Result<(), Fatal> {
        if self.limits.rnr_retry >= 7 {
            return Ok(());
        }
        if self.rnrs >= self.limits.rnr_retry {
            return Err(Fatal::RnrRetryExceeded);
        }
        self.rnrs += 1;
        Ok(())
    }
}

/// How a receiver answers one data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxClass {
    /// Accept it (place its data); the NIC may still refuse a SEND without a posted RECV.
    Accept,
    /// Already received: drop it.
    Duplicate,
    /// Cannot be accepted now (out of order for go-back-N, beyond the bitmap for MP-RDMA).
    Drop,
}

/// A control packet the receiver side wants sent back to the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Ack {
        cum: u32,
        sack: Option<u32>,
        echo_sport: u16,
        ece: bool,
        retx: bool,
    },
    Nak {
        expected: u32,
    },
    /// See [`Feedback::SyncNak`]. On the wire: a NAK whose `sack` names the dropped PSN.
    SyncNak {
        expected: u32,
        psn: u32,
    },
    /// See [`Feedback::SackNak`]. On the wire: a NAK whose `sack` names the PSN accepted out of
    /// order, marked apart from a synchronise NAK.
    SackNak {
        expected: u32,
        sack: u32,
    },
    /// Receiver not ready (no RECV posted for a SEND): retry `psn` later. Sent by the NIC.
    RnrNak {
        psn: u32,
    },
    /// Remote access error (bad rkey, out of bounds, no permission) at `psn`: the requester's
    /// WR fails and both QPs go to Error. Sent by the NIC.
    AccessNak {
        psn: u32,
    },
    /// Invalid request at `psn` (a SEND longer than the receive it takes, IBA 9.7.5.2.4): the
    /// requester's WR fails `RemoteInvalidRequest` and both QPs go to Error. Sent by the NIC.
    InvalidNak {
        psn: u32,
    },
    Cnp,
}

/// Facts about an arriving data packet a transport needs.
#[derive(Debug, Clone, Copy)]
pub struct DataInfo {
    pub psn: u32,
    pub first: bool,
    pub last: bool,
    pub ce: bool,
    pub sport: u16,
    /// A READ response (the requester's side of a READ).
    pub read_response: bool,
    /// A retransmitted copy (the ReTx bit).
    pub retx: bool,
    /// The tail of a message that needs a completion at the receiver (SEND, WRITE with
    /// immediate): MP-RDMA's "Tail with completion" slot state.
    pub completion: bool,
    /// The packet belongs to a synchronise message (`SendWr::fence`) whose first PSN is this: it
    /// may update memory only once every earlier PSN has arrived.
    pub sync_first: Option<u32>,
}

/// The per-QP transport state machine.
pub trait Transport: std::fmt::Debug {
    // ---- sender ----

    /// The connection's UDP source port, fixed when it is connected (a multipath transport may
    /// take it as its first virtual path).
    fn set_sport(&mut self, sport: u16);

    /// What to send next. `next_new` is the PSN the next new packet would take and `have_new`
    /// whether the send queue has one ready.
    fn plan(&mut self, now: Time, next_new: u32, have_new: bool) -> Plan;
    /// The new data at the send cursor, from PSN `psn`, is the first packet of a message flagged
    /// synchronise (`SendWr::fence`). The NIC says so before each `plan` while it is; a
    /// transport that may deliver out of order (MP-RDMA, §3.4) holds it back, in-order
    /// transports ignore it.
    fn sync_at(&mut self, _psn: u32) {}
    /// Earliest time a READ response (this QP acting as responder) may leave.
    fn response_gate(&self) -> Time;
    /// A packet covering `npsn` PSNs from `psn` went out (`npsn` > 1 for a READ request),
    /// `wire` bytes long; `reliable` if an answer is expected.
    fn on_sent(&mut self, now: Time, psn: u32, npsn: u32, wire: u32, reliable: bool, fx: &mut TxFx);
    /// A READ response left (rate accounting only).
    fn on_response_sent(&mut self, now: Time, wire: u32);
    fn on_feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx);
    /// The in-band telemetry an ACK echoed (`net/int.rs`), told just before that ACK's
    /// [`Transport::on_feedback`]; only in runs where some controller reads INT.
    fn on_int(&mut self, _now: Time, _int: &crate::net::int::IntStack) {}
    /// A timer fired. `first_missing` is the first PSN the NIC still waits for (what a timeout
    /// goes back to).
    fn on_timer(&mut self, now: Time, kind: TimerKind, gen: u32, first_missing: u32, fx: &mut TxFx);
    /// Every PSN below this is acknowledged.
    fn acked(&self) -> u32;
    /// A READ response is missing: ask again from `psn` (go-back-N for READ).
    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx);
    /// A new READ request covering `npsn` PSNs from `first` is going out (told before its
    /// `on_sent`): those PSNs are acknowledged by their responses. Go-back-N RC needs nothing.
    fn on_read_sent(&mut self, _first: u32, _npsn: u32) {}

    // ---- receiver ----

    /// Classifies an arriving data packet; replies (ACK, NAK, CNP) are appended to `out`.
    /// `Accept` is provisional: the NIC calls [`Transport::on_accepted`] once it took the data.
    fn on_data(&mut self, now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass;
    /// The NIC placed an accepted packet; the transport acknowledges per its policy.
    fn on_accepted(&mut self, now: Time, d: DataInfo, out: &mut Vec<Reply>);
    /// A READ request covering `npsn` PSNs from `psn` reached this (responder) side: `Accept`
    /// to answer it (new, or a repeat after a lost response), `Drop` if it came early.
    fn on_read_request(&mut self, now: Time, psn: u32, npsn: u32, out: &mut Vec<Reply>) -> RxClass;
    /// The PSN the receiver expects next (for RNR NAKs and duplicate ACKs).
    fn expected(&self) -> u32;

    // ---- introspection ----

    /// Current sending rate in bit/s (for reporting), if rate-controlled.
    fn rate_bps(&self) -> Option<f64> {
        None
    }
    /// Retransmission timeouts so far.
    fn timeouts(&self) -> u64 {
        0
    }
    /// Whether the receiver accepts packets out of order (MP-RDMA's bitmap): the NIC then places
    /// data directly and completes messages once `expected()` passes their tail.
    fn out_of_order(&self) -> bool {
        false
    }
    /// Transport-specific counters for reporting (name, value): state (cwnd, PSNs) and events.
    /// They become the columns of the per-QP `transport` results table.
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// The transport's name in results (`transport.kind` for the built-in ones).
    fn kind(&self) -> &'static str {
        "custom"
    }
    /// Cumulative event counts (a subset of [`Transport::counters`]) that add up across QPs into
    /// the run's counters as `<kind>_<name>` (e.g. `mp_rdma_nacks`). State is not summed.
    fn totals(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// The receiver's out-of-order degree histogram: entry d counts accepted data packets whose
    /// PSN was d ahead of the next expected one (MP-RDMA; exact, no capping).
    fn ood_histogram(&self) -> Option<&[u64]> {
        None
    }
    /// Per-virtual-path counters of a multipath transport: (UDP source port, name, value).
    fn vp_counters(&self) -> Vec<(u16, &'static str, u64)> {
        Vec::new()
    }
    /// The congestion controller's state at `now`, for the sampled series (`measure.cc`); None
    /// when the transport has no congestion control. Must only read state.
    fn cc_state(&self, _now: braid_engine::Time) -> Option<CcState> {
        None
    }
}

/// A congestion controller's state at one instant (`measure.cc`); a field a controller does not
/// have is None.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CcState {
    /// DCQCN: the current rate Rc, bit/s.
    pub rate_bps: Option<f64>,
    /// DCQCN: the target rate Rt, bit/s.
    pub target_bps: Option<f64>,
    /// DCQCN: α, the estimate of the congested fraction.
    pub alpha: Option<f64>,
    /// Window-based control (MP-RDMA): the congestion window, packets.
    pub cwnd: Option<f64>,
    /// Packets sent and not yet acknowledged (PSNs).
    pub inflight: Option<f64>,
    /// Smoothed round-trip time, microseconds (when the controller keeps one).
    pub srtt_us: Option<f64>,
    /// Congestion signals received so far: CNPs (DCQCN) or ECN-echo ACKs (MP-RDMA).
    pub signals: Option<u64>,
    /// Rate cuts so far (DCQCN: CNPs that cut the rate; at most one per decrease interval).
    pub cuts: Option<u64>,
    /// HPCC: the inflight utilisation U of the path's busiest link (its EWMA, §3.3).
    pub utilization: Option<f64>,
}
