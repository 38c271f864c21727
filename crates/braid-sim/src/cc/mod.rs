//! Congestion control, separate from reliability: the RC transport (`transport/rc.rs`) keeps
//! PSNs, ACKs and retransmission; a [`CongestionControl`] it owns decides how fast (a pacing
//! rate) and how much (a window of bytes in flight) the QP may send.
//!
//! A controller sees what a RoCEv2 sender sees: the packets it sent, ACKs with their ECN echo,
//! an RTT sample and (with in-band telemetry) the per-hop INT records the receiver echoed,
//! CNPs, losses (a NAK or a timeout), and the timers it asked for.
//!
//! Each algorithm is one file with its config beside it; the config is its factory
//! ([`CcFactory`]). A scenario picks one per QP with the tagged table
//! `transport.cc = { kind = "hpcc", ... }` (per host, app or flow through the usual
//! `transport` overrides); without it an RC QP runs DCQCN from `[transport.dcqcn]`, as before.
//! [`CongestionConfig`] lists the kinds: adding one is a variant there and a file here.
//!
//! | kind | file | signal | decides |
//! |---|---|---|---|
//! | `dcqcn` | `dcqcn.rs` (models in `crate::dcqcn`) | CNP or ECN-echo ACK | rate |
//! | `dctcp` | `dctcp.rs` | ECN-echo ACKs (fraction α) | window (paced at window / base RTT) |
//! | `timely` | `timely.rs` | RTT gradient | rate |
//! | `hpcc` | `hpcc.rs` | INT (queue, tx bytes, link rate per hop) | window (paced at window / base RTT) |
//! | `swift` | `swift.rs` | RTT against a target delay | window (paced below one packet) |

pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;
pub mod swift;
pub mod timely;

pub use dctcp::DctcpConfig;
pub use hpcc::HpccConfig;
pub use swift::SwiftConfig;
pub use timely::TimelyConfig;

use crate::dcqcn::config::DcqcnConfig;
use crate::transport::CcState;
use braid_engine::Time;

/// The timers a controller runs (the transport maps them to its own timer kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcTimer {
    /// DCQCN: α update.
    Alpha,
    /// DCQCN: rate increase (timer T).
    RateInc,
    /// DCQCN (HPCC ns-3's Mellanox model): periodic rate-decrease check.
    RateDec,
}

/// A timer the controller wants at `at`. `restart`: timers of this kind armed before are void.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    pub at: Time,
    pub timer: CcTimer,
    pub restart: bool,
}

/// What one ACK tells the sender's controller.
#[derive(Debug, Clone, Copy)]
pub struct AckSignal {
    /// Every PSN below this is acknowledged.
    pub cum: u32,
    /// PSNs this ACK newly acknowledged (0 for a duplicate).
    pub newly_acked: u32,
    /// The ACK echoes an ECN mark (the data packet it answers arrived CE).
    pub ece: bool,
    /// Round-trip time: from the acknowledged packet's first transmission to this ACK. None
    /// when the controller does not ask for RTTs ([`CongestionControl::wants_rtt`]) or the
    /// packet was retransmitted (Karn's rule: the sample would be ambiguous).
    pub rtt: Option<Time>,
    /// The part of that round trip spent in the two NICs' receive pipelines (the data packet
    /// at the responder, this ACK here): the endpoint delay Swift keeps apart from the
    /// fabric's (`rtt − endpoint`). 0 when no NIC made them wait.
    pub endpoint: Time,
    /// The next new PSN the sender would send: a controller that acts once per round trip ends
    /// its round when `cum` passes the `snd_nxt` it noted at the round's start.
    pub snd_nxt: u32,
    /// Wire bytes of a full packet (MTU + headers), to turn PSNs into bytes.
    pub mss: u32,
}

/// A congestion controller: one per sending QP.
pub trait CongestionControl: std::fmt::Debug {
    /// Current pacing rate in bit/s.
    fn rate(&self) -> f64;
    /// Bytes the QP may have in flight, if window-limited.
    fn window(&self) -> Option<f64> {
        None
    }
    /// `bytes` were sent (data, or READ responses this QP answered).
    fn on_sent(&mut self, now: Time, bytes: u64);
    /// An ACK arrived. Returns true if the rate or window may have grown (the transport then
    /// re-paces its next packet and looks for work).
    fn on_ack(&mut self, _now: Time, _ack: &AckSignal, _arm: &mut Vec<Arm>) -> bool {
        false
    }
    /// In-band telemetry an ACK echoed (`net/int.rs`): told just before that ACK's
    /// [`CongestionControl::on_ack`], and only in runs where some factory
    /// [`CcFactory::needs_int`].
    fn on_int(&mut self, _now: Time, _int: &crate::net::int::IntStack) {}
    /// A CNP arrived.
    fn on_cnp(&mut self, _now: Time, _arm: &mut Vec<Arm>) {}
    /// The receiver asked for a retransmission (sequence NAK) or the retransmission timer fired.
    fn on_loss(&mut self, _now: Time, _arm: &mut Vec<Arm>) {}
    /// A timer it armed fired (stale ones are filtered by the transport). Returns true if the
    /// rate may have risen.
    fn on_timer(&mut self, _now: Time, _t: CcTimer, _arm: &mut Vec<Arm>) -> bool {
        false
    }
    /// Whether [`CongestionControl::on_ack`] may do anything: when false (DCQCN with CNPs) the
    /// transport skips the call on every ACK.
    fn reads_acks(&self) -> bool {
        true
    }
    /// Whether ACKs should carry RTT samples (the transport then remembers send times).
    fn wants_rtt(&self) -> bool {
        false
    }
    /// The controller's state as it reads at `now` (for `measure.cc`; does not change it).
    fn state(&self, now: Time) -> CcState;
    /// Its name in results (`kind` of the per-QP `transport` table).
    fn name(&self) -> &'static str;
}

/// A controller's configuration, acting as its factory.
pub trait CcFactory: std::fmt::Debug {
    /// The configuration a QP on a port at `line_rate_bps` runs: keys left out may follow the
    /// link rate (DCQCN's presets); others return themselves.
    fn at_link(&self, line_rate_bps: u64) -> CongestionConfig;
    /// The controller of a QP whose port runs at `line_rate_bps` (after [`CcFactory::at_link`]).
    fn build(&self, line_rate_bps: u64) -> Box<dyn CongestionControl>;
    /// Receiver side: the notification point answers a CE-marked packet with a CNP, at most
    /// one per QP per this interval; None if the controller reads ECN from ACKs (or not at all).
    fn cnp_interval(&self) -> Option<Time> {
        None
    }
    /// Whether its controllers read in-band telemetry: switches then stamp INT records on data
    /// packets and receivers echo them (`net/int.rs`); runs where no factory does pay nothing.
    fn needs_int(&self) -> bool {
        false
    }
    /// Checks the values; Err is (key relative to the table, expected form).
    fn check(&self) -> Result<(), (String, String)> {
        Ok(())
    }
}

/// `transport.cc`: the congestion controller of an RC QP, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CongestionConfig {
    /// DCQCN (keys as `[transport.dcqcn]`).
    Dcqcn(DcqcnConfig),
    /// DCTCP's ECN-fraction window, as HPCC ns-3 runs it over RoCE (CC_MODE 8).
    Dctcp(DctcpConfig),
    /// TIMELY: RTT-gradient rate control (CC_MODE 7).
    Timely(TimelyConfig),
    /// HPCC: inflight utilisation from in-band telemetry (CC_MODE 3).
    Hpcc(HpccConfig),
    /// Swift: fabric and endpoint delay against their targets (AIMD on two windows).
    Swift(SwiftConfig),
}

/// The externally tagged mirror `braid_topo::tagged::TaggedVisitor` hands the table to, so
/// that errors keep their key path.
#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum CongestionMirror {
    Dcqcn(DcqcnConfig),
    /// DCTCP's ECN-fraction window, as HPCC ns-3 runs it over RoCE (CC_MODE 8).
    Dctcp(DctcpConfig),
    /// TIMELY: RTT-gradient rate control (CC_MODE 7).
    Timely(TimelyConfig),
    /// HPCC: inflight utilisation from in-band telemetry (CC_MODE 3).
    Hpcc(HpccConfig),
    /// Swift: fabric and endpoint delay against their targets (AIMD on two windows).
    Swift(SwiftConfig),
}

impl From<CongestionMirror> for CongestionConfig {
    fn from(m: CongestionMirror) -> Self {
        match m {
            CongestionMirror::Dcqcn(x) => CongestionConfig::Dcqcn(x),
            CongestionMirror::Dctcp(x) => CongestionConfig::Dctcp(x),
            CongestionMirror::Timely(x) => CongestionConfig::Timely(x),
            CongestionMirror::Hpcc(x) => CongestionConfig::Hpcc(x),
            CongestionMirror::Swift(x) => CongestionConfig::Swift(x),
        }
    }
}

impl<'de> serde::Deserialize<'de> for CongestionConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(braid_topo::tagged::TaggedVisitor::<CongestionMirror>::new(
            "kind",
            "a congestion controller table with kind = \"dcqcn\", \"dctcp\", \"timely\", \"hpcc\" or \"swift\"",
        ))
        .map(Into::into)
    }
}

impl CongestionConfig {
    /// This table's kind, behind its factory trait (the one place the kinds are listed).
    pub fn kind(&self) -> &dyn CcFactory {
        match self {
            CongestionConfig::Dcqcn(x) => x,
            CongestionConfig::Dctcp(x) => x,
            CongestionConfig::Timely(x) => x,
            CongestionConfig::Hpcc(x) => x,
            CongestionConfig::Swift(x) => x,
        }
    }
}
