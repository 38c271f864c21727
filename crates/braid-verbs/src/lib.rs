//! The verbs seam: the one interface between applications, middleware and an RNIC.
//!
//! It follows ibverbs semantics (work requests with `wr_id`, scatter-gather lists, lkey/rkey,
//! signaled and unsignaled completions, immediate data, inline sends) and is sans-IO: nothing here
//! knows whether the NIC underneath is simulated or real. Applications and middleware are state
//! machines driven by three things only: their own calls into [`Verbs`], completion-queue events
//! and timers they asked for ([`Event`]).
//!
//! A middleware implements [`Middleware`]: it receives every verb call from above together with the
//! verbs below it, so middlewares stack (`app -> m1 -> m2 -> NIC`). [`Stack`] threads a call through
//! such a chain; [`Raw`] is the passthrough.

mod stack;
mod types;

pub use stack::{Middleware, Raw, Stack};
pub use types::*;

/// The verbs an application (or a middleware, on the layer below it) can call.
///
/// Times are picoseconds since the start of the run (simulated) or of the process (real NIC).
pub trait Verbs {
    /// Current time in picoseconds.
    fn now(&self) -> u64;
    /// This host's address (what a peer puts in [`RemoteQp::host`]).
    fn local_host(&self) -> u32;

    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError>;
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError>;
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError>;
    /// Moves a QP to ready-to-send towards `remote` (ibv_modify_qp INIT -> RTR -> RTS).
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError>;
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError>;
    /// Registers `len` bytes at virtual address `addr`.
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError>;
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError>;

    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError>;
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError>;
    /// Moves up to `max` completions of `cq` into `out`; returns how many.
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize;

    /// Asks for [`Event::Timer`] with `token` at absolute time `at`.
    fn set_timer(&mut self, at: u64, token: u64);

    /// Writes bytes into local registered memory (only meaningful when the NIC tracks data).
    fn write_local(&mut self, _addr: u64, _data: &[u8]) -> Result<(), VerbsError> {
        Err(VerbsError::Unsupported("memory contents are not tracked"))
    }
    /// Reads bytes from local registered memory (only meaningful when the NIC tracks data).
    fn read_local(&self, _addr: u64, _len: u64) -> Result<Vec<u8>, VerbsError> {
        Err(VerbsError::Unsupported("memory contents are not tracked"))
    }
}

/// What drives a verbs consumer besides its own calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Completions were added to this CQ (a completion-channel notification).
    Completion(CqId),
    /// A timer requested with [`Verbs::set_timer`] fired.
    Timer(u64),
}

/// An application: a state machine over the verbs below it.
pub trait App {
    /// Called once when the application starts.
    fn start(&mut self, verbs: &mut dyn Verbs);
    /// Called for every event addressed to this application.
    fn on_event(&mut self, verbs: &mut dyn Verbs, event: Event);
    /// True once the application has nothing more to do (used to end runs early).
    fn is_done(&self) -> bool {
        false
    }
}
