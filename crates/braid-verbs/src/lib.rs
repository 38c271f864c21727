//! The verbs seam: the one interface between applications, middleware and an RNIC.
//!
//! It follows ibverbs semantics (work requests with `wr_id`, scatter-gather lists, lkey/rkey,
//! signaled and unsignaled completions, immediate data, inline sends, QP states, armed completion
//! queues) and is sans-IO: nothing here knows whether the NIC underneath is simulated or real.
//! Applications and middleware are state machines driven by their own calls into [`Verbs`] and by
//! [`Event`]s: completion notifications of CQs they armed, timers they asked for, and wakes from
//! another tenant's middleware on the same host.
//!
//! A middleware implements [`Middleware`]: it receives every verb call from above together with the
//! verbs below it, so middlewares stack (`app -> m1 -> m2 -> NIC`). [`Stack`] threads a call through
//! such a chain; [`Raw`] is the passthrough. The host, not the application, is the unit at which
//! middleware is built ([`host`]): a factory builds one layer per tenant and may add one agent per
//! host, shared by the host's tenants.

pub mod cost;
pub mod host;
pub mod rendezvous;
mod stack;
pub mod table;
pub mod testing;
mod types;
pub mod vcq;

pub use cost::{CpuCost, Work};
pub use host::{AgentShares, BuildError, HostCtx, MiddlewareFactory, ShareSlot, TenantId, AGENT};
pub use stack::{Middleware, Raw, Stack};
pub use table::{LayerColumn, LayerTable};
pub use types::*;
pub use vcq::VirtualCq;

/// The verbs an application (or a middleware, on the layer below it) can call.
///
/// Times are picoseconds since the start of the run (simulated) or of the process (real NIC).
///
/// Ownership follows ibverbs across processes: every QP, CQ and memory region belongs to the
/// tenant that created it, and another tenant naming it gets [`VerbsError::NoSuchQp`],
/// [`VerbsError::NoSuchCq`] or [`VerbsError::BadKey`], exactly as if it did not exist.
///
/// Protection domains follow ibverbs too. Every QP and every memory region belongs to exactly
/// one PD of its tenant: [`QpInit::pd`] and [`Verbs::reg_mr_in`] name it; [`QpInit::rc`] and
/// [`Verbs::reg_mr`] use the tenant's [`DEFAULT_PD`]; [`Verbs::alloc_pd`] makes more. The NIC
/// enforces them:
/// - a READ, WRITE or WRITE_WITH_IMM is carried out only when its rkey names a memory region in
///   the PD of the QP the request *arrived on*, the whole range lies inside it and it grants the
///   access (remote read or remote write); otherwise the requester's WR completes
///   [`WcStatus::RemoteAccessError`] and its QP goes to Error, the responder's QP goes to Error
///   too (IBA 9.9.3.1.3, a class C error), and no byte changes;
/// - a send WR's scatter-gather elements may use only lkeys of the posting QP's PD: an lkey of
///   another PD of the same tenant is accepted by the post and completes
///   [`WcStatus::LocalProtectionError`] (IBV_WC_LOC_PROT_ERR), the QP going to Error;
/// - each tenant has its own address space: addresses in `reg_mr`, `read_local` and
///   `write_local` are the calling tenant's, so registering another tenant's addresses gives
///   fresh bytes of one's own, never the other tenant's.
pub trait Verbs {
    /// Current time in picoseconds (with a CPU cost model: including the CPU time this tenant
    /// has spent in the current callback).
    fn now(&self) -> u64;
    /// This host's primary address (what a peer puts in [`RemoteQp::host`]); see
    /// [`Caps::local_addrs`] for all of them.
    fn local_host(&self) -> u32;
    /// What this NIC can do. Mechanisms check it when they are built, not at call time.
    fn caps(&self) -> &Caps;
    /// The tenant on whose behalf calls are made (0: the host's agent slot).
    fn tenant(&self) -> TenantId;

    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError>;
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError>;
    /// Arms `cq` (ibv_req_notify_cq): the next completion added to it produces one
    /// [`Event::Completion`], after which it is disarmed. Completions already queued when it is
    /// armed do not notify: poll after arming (the ibverbs idiom: poll, arm, poll again).
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError>;
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError>;
    /// Moves a QP from Init or Reset to ready-to-send towards `remote` (ibv_modify_qp
    /// INIT -> RTR -> RTS).
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError>;
    /// ibv_modify_qp for the transitions a consumer drives itself: to Error (outstanding WRs are
    /// flushed), to Reset (ready to connect again), or a new UDP source port.
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError>;
    /// ibv_query_qp.
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError>;
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError>;
    /// Registers `len` bytes at virtual address `addr`.
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError>;
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError>;
    /// ibv_alloc_pd: a new protection domain of this tenant, for [`QpInit::pd`] and
    /// [`Verbs::reg_mr_in`]. The default is for backends with only the default PD.
    fn alloc_pd(&mut self) -> Result<PdId, VerbsError> {
        Err(VerbsError::Unsupported(
            "protection domains other than the default one",
        ))
    }
    /// ibv_dealloc_pd. Fails with [`VerbsError::InvalidState`] while a QP or a memory region
    /// still belongs to it (ibverbs' EBUSY), and for [`DEFAULT_PD`], which lives as long as the
    /// tenant; another tenant's PD is [`VerbsError::InvalidArgument`], as if it did not exist.
    fn dealloc_pd(&mut self, _pd: PdId) -> Result<(), VerbsError> {
        Err(VerbsError::Unsupported(
            "protection domains other than the default one",
        ))
    }
    /// [`Verbs::reg_mr`] into protection domain `pd` (ibv_reg_mr's `pd`). The default serves
    /// [`DEFAULT_PD`] only.
    fn reg_mr_in(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        if pd == DEFAULT_PD {
            self.reg_mr(addr, len, access)
        } else {
            Err(VerbsError::Unsupported(
                "protection domains other than the default one",
            ))
        }
    }

    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError>;
    /// ibv_post_send with a linked list of WRs: one call and one doorbell for all of them
    /// (backends charge [`Work::PostList`]). It posts them in order and stops at the first one
    /// the NIC refuses, reported as [`BadWr`] (ibverbs' `bad_wr`): the WRs before it are posted,
    /// it and the rest are not. An empty list posts nothing.
    ///
    /// The default posts them one by one (a doorbell each); backends override it.
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        for (index, wr) in wrs.into_iter().enumerate() {
            self.post_send(qp, wr)
                .map_err(|error| BadWr { index, error })?;
        }
        Ok(())
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError>;
    /// Moves up to `max` completions of `cq` into `out`; returns how many.
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize;

    /// Asks for [`Event::Timer`] with `token` at absolute time `at`.
    fn set_timer(&mut self, at: u64, token: u64);
    /// Delivers [`Event::Wake`] with `token` to tenant `tenant` of this host as soon as possible
    /// (after the current callback). How a host agent tells a tenant's layer to act.
    fn wake(&mut self, tenant: TenantId, token: u64);
    /// Accounts CPU work done by the caller (middleware bookkeeping, copies) under the backend's
    /// cost model. Verbs calls themselves are charged by the backend.
    fn charge(&mut self, work: Work) {
        self.charge_as("app", work)
    }
    /// [`Verbs::charge`] attributed to a named layer (the stack calls this for its layers).
    fn charge_as(&mut self, _layer: &'static str, _work: Work) {}

    /// Writes bytes into local registered memory (regions registered with [`Access::track`], or
    /// every region when the NIC tracks all data).
    fn write_local(&mut self, _addr: u64, _data: &[u8]) -> Result<(), VerbsError> {
        Err(VerbsError::Unsupported("memory contents are not tracked"))
    }
    /// Reads bytes from local registered memory (tracked regions only).
    fn read_local(&self, _addr: u64, _len: u64) -> Result<Vec<u8>, VerbsError> {
        Err(VerbsError::Unsupported("memory contents are not tracked"))
    }
}

/// What drives a verbs consumer besides its own calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An armed CQ received a completion (a completion-channel notification); the CQ is now
    /// disarmed.
    Completion(CqId),
    /// A timer requested with [`Verbs::set_timer`] fired.
    Timer(u64),
    /// Another tenant's middleware (usually the host agent) called [`Verbs::wake`] for us. Wakes
    /// travel up through every layer; a layer consumes the tokens it owns and forwards the rest.
    Wake(u64),
}

/// An application: a state machine over the verbs below it.
pub trait App {
    /// Called once when the application starts.
    fn start(&mut self, verbs: &mut dyn Verbs);
    /// Called for every event addressed to this application.
    fn on_event(&mut self, verbs: &mut dyn Verbs, event: Event);
    /// True once the application has nothing more to do.
    fn is_done(&self) -> bool {
        false
    }
}

/// An application that does nothing: the host agent slot's, and a placeholder in tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct Idle;

impl App for Idle {
    fn start(&mut self, _: &mut dyn Verbs) {}
    fn on_event(&mut self, _: &mut dyn Verbs, _: Event) {}
    fn is_done(&self) -> bool {
        true
    }
}

/// The ibverbs idiom after a completion notification: poll `cq` empty, re-arm it, poll again (a
/// completion that arrives between the last poll and the arming does not notify, so without
/// the second poll it would wait for the next one). Appends to `out`; returns how many.
pub fn poll_and_rearm(
    v: &mut dyn Verbs,
    cq: CqId,
    out: &mut Vec<WorkCompletion>,
) -> Result<usize, VerbsError> {
    let mut n = 0;
    loop {
        let k = v.poll_cq(cq, 256, out);
        n += k;
        if k == 0 {
            break;
        }
    }
    v.req_notify_cq(cq)?;
    loop {
        let k = v.poll_cq(cq, 256, out);
        n += k;
        if k == 0 {
            return Ok(n);
        }
    }
}
