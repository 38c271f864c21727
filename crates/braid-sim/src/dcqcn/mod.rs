//! DCQCN reaction points (the sender's rate controller) behind one small trait, so that a
//! scenario picks the model with `transport.dcqcn.reaction`:
//!
//! - `"paper"` ([`paper::Dcqcn`], the default): Zhu et al., SIGCOMM'15 — a CNP cuts the rate at
//!   once (at most once per `rate_decrease_interval`), α rises with each cut.
//! - `"hpcc"` ([`mellanox::DcqcnMellanox`]): HPCC ns-3's "Mellanox version" (`rdma-hw.cc`,
//!   CC_MODE 1) — notifications only set flags; a periodic check every `rate_decrease_interval` cuts the rate
//!   if one came, α is updated every `alpha_timer` from the flag, the first notification cuts
//!   nothing, the rate-increase stages count from 0 and hyper increase adds a constant `rate_hai`.
//!
//! (`"hpcc"` names HPCC ns-3's DCQCN, not the HPCC algorithm, which is `cc/hpcc.rs`.)
//!
//! The reaction point is sans-IO: it asks for timers through [`Arm`] and the transport
//! (`transport/rc.rs`) runs them, cancelling older ones of a kind when an arm says `restart`.
//! `cc/dcqcn.rs` makes it a [`crate::cc::CongestionControl`]; the keys are `config.rs` here.

pub mod config;
pub mod defaults;
pub mod mellanox;
pub mod paper;

pub use mellanox::DcqcnMellanox;
pub use paper::Dcqcn;

pub use crate::cc::{Arm, CcTimer};
use braid_engine::Time;
use config::DcqcnConfig;

/// A DCQCN reaction point.
pub trait ReactionPoint: std::fmt::Debug {
    /// Current sending rate in bit/s.
    fn rate(&self) -> f64;
    /// `bytes` were sent (byte counter).
    fn on_sent(&mut self, bytes: u64, cfg: &DcqcnConfig);
    /// A congestion notification arrived: a CNP, or an ACK echoing ECN (`dcqcn.notify = "ack"`).
    fn on_cnp(&mut self, now: Time, cfg: &DcqcnConfig, arm: &mut Vec<Arm>);
    /// A timer it armed fired (stale ones are filtered by the transport). Returns true if the
    /// rate may have risen (the transport re-paces its next packet and looks for work).
    fn on_timer(&mut self, now: Time, t: CcTimer, cfg: &DcqcnConfig, arm: &mut Vec<Arm>) -> bool;
    /// Notifications received.
    fn cnps(&self) -> u64;
    /// The controller's state as it reads at `now` (for `measure.cc`; does not change it).
    fn state(&self, now: Time, cfg: &DcqcnConfig) -> ReactionState;
}

/// A reaction point's state at one instant, as `measure.cc` samples it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReactionState {
    /// Current rate Rc, bit/s.
    pub rate: f64,
    /// Target rate Rt, bit/s.
    pub target: f64,
    pub alpha: f64,
    /// Notifications received (CNPs, or ECN-echoing ACKs).
    pub notifications: u64,
    /// Notifications that cut the rate.
    pub cuts: u64,
}
