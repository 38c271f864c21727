//! The retransmission timer of the go-back-N RC sender and of MP-RDMA's sender, written once.
//!
//! One timer event is in flight at a time: it is set when a packet that wants an
//! acknowledgement leaves with no timer running, and when it fires it checks the deadline
//! `last_progress + rto` (progress, an ACK moving the acknowledged point, pushes the deadline
//! back without touching the event queue), re-arms itself at the deadline if it is early, and
//! otherwise counts a timeout against the QP's [`RetryBudget`] (ibverbs `retry_cnt`: the
//! (`retry_cnt` + 1)-th timeout in a row without progress is fatal, IBA 9.7.5.2.8).
//!
//! The transports keep `last_progress` themselves (their ACK paths move it), so the timer
//! borrows it.

use super::{RetryBudget, TimerKind, TxFx};
use braid_engine::Time;

/// Whether the RTO timer event is in flight.
#[derive(Debug, Clone, Copy, Default)]
pub struct RtoTimer {
    pending: bool,
}

/// What a firing of the RTO timer came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoFired {
    /// Nothing is unacknowledged: the timer stops.
    Stopped,
    /// Progress since it was set: re-armed at the new deadline.
    Deferred,
    /// A timeout with the retry budget spent: `fx.fatal` is set, the timer stops.
    GaveUp,
    /// A timeout: the timer is re-armed a whole `rto` from now, the caller retransmits.
    Retransmit,
}

impl RtoFired {
    /// Whether this firing was a timeout (the transports count these).
    pub fn timed_out(self) -> bool {
        matches!(self, RtoFired::GaveUp | RtoFired::Retransmit)
    }
}

impl RtoTimer {
    /// A packet that wants an acknowledgement went out at `now`: starts the timer unless it
    /// runs (then `last_progress` is left alone: the deadline counts from the last progress).
    pub fn start(&mut self, now: Time, rto: Time, last_progress: &mut Time, fx: &mut TxFx) {
        if !self.pending {
            self.pending = true;
            *last_progress = now;
            fx.timers.push((now + rto, TimerKind::Rto, 0));
        }
    }

    /// The timer event fired at `now`; `outstanding` says whether anything is unacknowledged.
    pub fn fire(
        &mut self,
        now: Time,
        rto: Time,
        outstanding: bool,
        last_progress: &mut Time,
        budget: &mut RetryBudget,
        fx: &mut TxFx,
    ) -> RtoFired {
        if !outstanding {
            self.pending = false;
            return RtoFired::Stopped;
        }
        let deadline = *last_progress + rto;
        if now < deadline {
            fx.timers.push((deadline, TimerKind::Rto, 0));
            return RtoFired::Deferred;
        }
        if let Err(f) = budget.timeout() {
            self.pending = false;
            fx.fatal = Some(f);
            return RtoFired::GaveUp;
        }
        *last_progress = now;
        fx.timers.push((now + rto, TimerKind::Rto, 0));
        RtoFired::Retransmit
    }
}
