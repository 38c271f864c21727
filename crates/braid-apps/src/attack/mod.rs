//! Husky-style attackers (Kong et al., "Understanding RDMA Microarchitecture Resources for
//! Performance Isolation", NSDI '23, and its attack catalogue): tenants that try to reach what
//! other tenants own, through every place the verbs (and the middleware below them) accept a
//! key, an address or a QP number, and one that exhausts the NIC's registration resources. Each
//! counts what it tried and what was refused ([`Tally`], reported through
//! [`crate::Meter::attack`]); the victims' side (their bytes, their QPs) is checked by whoever
//! runs them (the simulator's scenario tests, the isolation matrix).
//!
//! The attackers learn their victims' endpoints where every application of a run publishes
//! them, the run's board (as an attacker on the same fabric snoops an rdma_cm exchange), and
//! guess the rest: rkeys are handed out in sequence and applications' buffers sit at fixed
//! strides (`app_no << 40` in the simulator), so neighbours of a known key and address are
//! likely to exist.
//!
//! Each attacker is one file with its parameters as its factory (`build`, and
//! [`crate::AppFactory`] for a scenario's `[[apps]]` entry).

use crate::{Rendezvous, SharedMeter};
use braid_verbs::rendezvous::{Endpoint, Side};
use braid_verbs::{poll_and_rearm, Access, CqId, MemoryRegion, Verbs, WcStatus};

pub mod mr_flood;
pub mod qp_hijacker;
pub mod rkey_thief;

pub use mr_flood::MrFlood;
pub use qp_hijacker::QpHijacker;
pub use rkey_thief::RkeyThief;

/// What an attacker did: attempts, how many were refused (an error completion, or a verb that
/// returned an error), how many succeeded (each one a protection failure, except for
/// registrations, which a NIC may grant up to its limits).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub tries: u64,
    pub refused: u64,
    pub succeeded: u64,
}

impl Tally {
    pub fn resolved(&self) -> u64 {
        self.refused + self.succeeded
    }

    /// Attempts never answered count as refused (the transport would give up on them).
    pub(crate) fn give_up(&mut self) {
        self.refused += self.tries - self.resolved();
    }

    /// Once every attempt is resolved, reports the tally and the attacker's finish to `meter`
    /// (once: `done` remembers it).
    pub(crate) fn report_once(&self, done: &mut bool, meter: &SharedMeter, flow: u32, now: u64) {
        if !*done && self.resolved() >= self.tries {
            *done = true;
            let mut m = meter.borrow_mut();
            m.attack(flow, *self);
            m.finished(flow, now);
        }
    }

    /// Drains `cq` (and re-arms it), counting each completion as a success or a refusal.
    pub(crate) fn count_completions(&mut self, v: &mut dyn Verbs, cq: CqId) {
        let mut wcs = Vec::new();
        let _ = poll_and_rearm(v, cq, &mut wcs);
        for wc in wcs {
            if wc.status == WcStatus::Success {
                self.succeeded += 1;
            } else {
                self.refused += 1;
            }
        }
    }
}

/// The victim application's connections on the board: `conn0 .. conn0 + qps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    pub conn0: u32,
    pub qps: u32,
}

impl Victim {
    /// The victim's published endpoints, server side then client side, for connection `i`.
    pub fn endpoints(&self, rdv: &Rendezvous, i: u32) -> (Option<Endpoint>, Option<Endpoint>) {
        let b = rdv.borrow();
        let c = (self.conn0 + i) as u64;
        (b.lookup(c, Side::Server), b.lookup(c, Side::Client))
    }
}

/// Where an attacker's ends live and what they share (as [`crate::AppEnds`] for the others).
pub struct AttackEnds {
    pub flow: u32,
    /// Its own first connection id on the board (an accomplice pair uses `conn0 ..`).
    pub conn0: u32,
    pub meter: SharedMeter,
    pub rdv: Rendezvous,
    pub server_base: u64,
    pub client_base: u64,
    pub victim: Option<Victim>,
}

impl From<crate::AppEnds> for AttackEnds {
    fn from(e: crate::AppEnds) -> Self {
        AttackEnds {
            flow: e.flow,
            conn0: e.conn0,
            meter: e.meter,
            rdv: e.rdv,
            server_base: e.server_base,
            client_base: e.client_base,
            victim: e.victim,
        }
    }
}

/// How long an attacker waits for completions that may never come (a hijacked connection's
/// requests time out after the transport's retries): unless `duration` says, 10 ms, beyond
/// the default transport's retry time (7 retries of a sub-millisecond timeout).
const PATIENCE_PS: u64 = 10_000_000_000;

/// An attacker's patience from its entry's keys (picoseconds).
pub(crate) fn patience(k: &crate::AppCommon) -> u64 {
    k.duration.unwrap_or(PATIENCE_PS)
}

/// An attacker's own CQ (armed) and a tracked region of `len` bytes at `base` filled with
/// [`rkey_thief::THIEF_BYTE`] (so its bytes are recognised wherever they land); None if the
/// NIC refuses either.
pub(crate) fn own_buffer(v: &mut dyn Verbs, base: u64, len: u64) -> Option<(CqId, MemoryRegion)> {
    let (Ok(cq), Ok(mr)) = (
        v.create_cq(1 << 12),
        v.reg_mr(base, len, Access::ALL.tracked()),
    ) else {
        return None;
    };
    let _ = v.req_notify_cq(cq);
    let _ = v.write_local(mr.addr, &vec![rkey_thief::THIEF_BYTE; len as usize]);
    Some((cq, mr))
}

/// Timer token: give up waiting for completions that never come (the attacker is done).
pub(crate) const GIVE_UP: u64 = (1 << 56) - 3;

#[cfg(test)]
mod tests;
