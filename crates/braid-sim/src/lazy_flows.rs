//! Lazy flow generation (issue 28 §1, steps 1 and 2 of docs/performance.md "Lazy flow
//! generation"): a `[[traffic]]` sender creates each flow's QP, and with it the flow's
//! transport and congestion control, when the flow starts, not when the sender starts.
//!
//! Results stay identical because nothing a flow's QP is or does changes:
//! - **its number**: when the sender starts, its NIC reserves one number per flow (where it used
//!   to create them all, `nic/reserve.rs`), and flow *i* later creates QP `base + i`; its UDP
//!   source port (ECMP path) and initial PSN, hashed from (host, QP number), are the same;
//! - **the order of events**: the sender still sets every flow's start timer when it connects
//!   (a few tens of bytes per flow), and creates and connects the QP inside that timer, before
//!   the WRITE it posted there before; creating and connecting schedule nothing;
//! - **the QP's state when it first acts**: an eager QP sat untouched (Init, then RTS) from the
//!   sender's start to its flow's start; creating it at the flow's start builds the same state.
//!
//! What is not lazy: the sink's QPs (created when the sink starts: the sink learns of a flow
//! only from its packets), each flow's record and its start timer. A QP is never retired (step
//! 3): memory follows the flows *started*, not the flows in flight. A flow that never starts
//! (its arrival after the run's end) has no QP: no row in the `transport` table, where an eager
//! run had an idle one (the only difference, and only for such flows).
//!
//! When it applies: a sender whose verbs stack is plain RDMA (`raw` layers only: a middleware may
//! do anything in `create_qp`) on a host whose CPU time does not delay tenants
//! (`host.cpu.delay`: creating a QP would then hold the sender's thread at the flow's start
//! instead of its own), in a run that does not sample QPs' congestion control (`measure.cc`
//! reads a QP's window from the run's start, before its flow starts). The CPU time of creating and connecting every flow's QP is accounted
//! when the sender starts, as before ([`reserve_at_start`]).

use crate::hostverbs::TenantCpu;
use crate::nic::Nic;
use braid_apps::QpPlan;
use std::cell::Cell;

thread_local! {
    static EAGER: Cell<bool> = const { Cell::new(false) };
}

/// Makes the runs built on this thread create every flow's QP when its sender starts (as before
/// lazy generation): for comparing the two, which must give identical results.
pub fn set_eager(eager: bool) {
    EAGER.with(|e| e.set(eager));
}

/// Whether a flow sender with this stack creates its QPs lazily. Not when `measure.cc` samples
/// QPs: the sampler reads a QP's window from the run's start, before its flow starts.
pub(crate) fn lazy_sender(raw_stack: bool, cpu_delay: bool, cc_sampled: bool) -> bool {
    raw_stack && !cpu_delay && !cc_sampled && !EAGER.with(|e| e.get())
}

/// A tenant with a plan gets its QP numbers reserved when it starts, before its stack and its
/// application run (they are where its eager twin's first QP would have been created). The CPU
/// time of creating and connecting them is accounted now, as the eager sender spent it when it
/// started and connected (at the same instant: both happen at time 0); the reserved QPs'
/// `create_qp` and `connect_qp` cost nothing more (`hostverbs.rs`). The tenants table's CPU
/// figures are then the same, flows never started included.
pub(crate) fn reserve_at_start(
    plan: Option<&QpPlan>,
    nic: &mut Nic,
    cpu: &mut TenantCpu,
    cost: &braid_verbs::CpuCost,
) {
    if let Some(p) = plan {
        p.base.set(nic.reserve_qps(p.n));
        let ps = cost.ps(braid_verbs::Work::Control) * 2 * p.n as u64;
        if ps > 0 {
            cpu.total_ps += ps;
            *cpu.by_layer.entry("verbs").or_default() += ps;
        }
    }
}

/// Whether every sender of `[[traffic]]` table `i` of `sc` creates its QPs lazily (what the
/// capacity estimate prices): its stack, its own or every host's, is plain RDMA and CPU time
/// does not delay tenants.
pub(crate) fn lazy_table(sc: &crate::Scenario, i: usize) -> bool {
    let raw = |m: &Vec<braid_middleware::MiddlewareEntry>| m.iter().all(|e| e.0.name() == "raw");
    let stacks_raw = match &sc.traffic[i].middleware {
        Some(m) => raw(m),
        None => raw(&sc.middleware.default) && sc.middleware.per_host.values().all(raw),
    };
    stacks_raw && !sc.host.cpu.delay && !sc.measure.cc.enabled() && !EAGER.with(|e| e.get())
}
