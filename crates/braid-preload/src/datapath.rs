//! The data path: the functions the preload writes into each context's `ops` (the inline
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq` and `ibv_post_srq_recv`
//! call through them), each running the call through the context's braid stack over
//! [`AppVerbs`], and the per-process state they share.
//!
//! Thread safety as ibverbs promises it (every verb may be called from any thread): one lock
//! over the process's contexts. braid's layers are single-threaded state machines (they may hold
//! `Rc`s shared between a host's tenants), so they are only ever touched under it.

use crate::backend::{AppVerbs, ProviderOps};
use crate::convert;
use crate::ffi::*;
use crate::stats::{add, c};
use braid_verbs::{Middleware, Stack, Verbs};
use std::ffi::c_int;
use std::mem::{offset_of, size_of};
use std::sync::{Mutex, MutexGuard};

const EINVAL: c_int = 22;

/// One adopted device context.
pub struct Ctx {
    pub ctx: *mut ibv_context,
    pub layers: Vec<Box<dyn Middleware>>,
    pub backend: AppVerbs,
    pub create_qp_ex: Option<CreateQpExFn>,
    pub create_cq_ex: Option<CreateCqExFn>,
}

#[derive(Default)]
pub struct Preload {
    pub ctxs: Vec<Ctx>,
    /// The process as a braid host (its HostCtx, agent slot, timers and wakes), once a context
    /// was adopted through [`adopt_with`].
    pub host: Option<crate::host::Host>,
    /// Whether the mechanism sets timers or wakes: then every data-path call delivers what is
    /// due ([`crate::host::run_due`]); under `raw` nothing is looked at.
    pub events: bool,
}

// SAFETY: the raw pointers name the application's ibverbs objects, which ibverbs lets any
// thread use; the layers (which may hold `Rc`s) are only touched while STATE is locked.
unsafe impl Send for Preload {}

static STATE: Mutex<Preload> = Mutex::new(Preload {
    ctxs: Vec::new(),
    host: None,
    events: false,
});

pub fn lock() -> MutexGuard<'static, Preload> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

impl Preload {
    pub fn find(&mut self, ctx: *mut ibv_context) -> Option<&mut Ctx> {
        self.ctxs.iter_mut().find(|c| c.ctx == ctx)
    }

    /// Every layer's counters, as `layer.counter` (tenants' summed over contexts) and
    /// `agent.layer.counter`, plus the host's delivered events.
    pub fn layer_counters(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        let mut put = |k: String, v: f64| match out.iter_mut().find(|(n, _)| *n == k) {
            Some(e) => e.1 += v,
            None => out.push((k, v)),
        };
        for cx in &self.ctxs {
            for l in &cx.layers {
                for (k, v) in l.counters() {
                    put(format!("{}.{k}", l.name()), v);
                }
            }
        }
        if let Some(h) = &self.host {
            for l in &h.agent {
                for (k, v) in l.counters() {
                    put(format!("agent.{}.{k}", l.name()), v);
                }
            }
            put("host.events".into(), h.events as f64);
        }
        out
    }
}

/// The `verbs_context` around `ctx`, when the provider made one and filled it up to `field`
/// (libibverbs' `verbs_get_ctx_op`).
///
/// # Safety
/// `ctx` is a live context.
unsafe fn vctx_with(ctx: *mut ibv_context, field: usize) -> Option<*mut verbs_context> {
    if (*ctx).abi_compat as usize != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    let v = (ctx as *mut u8).sub(offset_of!(verbs_context, context)) as *mut verbs_context;
    ((*v).sz >= size_of::<verbs_context>() - field).then_some(v)
}

/// Takes over a freshly opened context: saves the provider's data-path functions and writes
/// braid's in their place, and wraps `create_qp_ex`/`create_cq_ex`.
///
/// # Safety
/// `ctx` is a context the provider just returned, not yet used by another thread.
pub unsafe fn adopt_context(ctx: *mut ibv_context, layer: Box<dyn Middleware>) -> bool {
    // A tenant id no host hands out (hosts count up from 1).
    install(ctx, |_| Ok((layer, braid_verbs::TenantId::MAX))).unwrap_or(false)
}

/// Takes over a freshly opened context as a tenant of the process's host, with the layer
/// `choice` builds (a host-scoped mechanism's agent joins the host's agent slot). The error is
/// the mechanism's own (the context is then left to its provider).
///
/// # Safety
/// As [`adopt_context`].
pub unsafe fn adopt_with(
    ctx: *mut ibv_context,
    choice: &crate::config::Choice,
    line_rate_bps: u64,
) -> Result<bool, String> {
    let events = choice.needs_events();
    let r = install(ctx, |st| {
        let h = st
            .host
            .get_or_insert_with(|| crate::host::Host::new(line_rate_bps));
        let t = h.tenant();
        let layer = choice.build(&mut h.ctx, t)?;
        h.take_agents();
        st.events |= events;
        Ok((layer, t))
    });
    if events && r == Ok(true) {
        crate::host::spawn_helper();
    }
    r
}

unsafe fn install(
    ctx: *mut ibv_context,
    build: impl FnOnce(&mut Preload) -> Result<(Box<dyn Middleware>, braid_verbs::TenantId), String>,
) -> Result<bool, String> {
    let ops = &mut (*ctx).ops;
    let (Some(ps), Some(pr), Some(pc), Some(rn)) =
        (ops.post_send, ops.post_recv, ops.poll_cq, ops.req_notify_cq)
    else {
        add(&c::contexts_not_swapped, 1);
        eprintln!("braid-preload: a device context without data-path ops: left to its provider");
        return Ok(false);
    };
    let saved = ProviderOps {
        post_send: ps,
        post_recv: pr,
        poll_cq: pc,
        req_notify_cq: rn,
        post_srq_recv: ops.post_srq_recv,
    };
    let mut st = lock();
    let (layer, tenant) = build(&mut st)?;
    let mut entry = Ctx {
        ctx,
        layers: vec![layer],
        backend: AppVerbs::new(saved),
        create_qp_ex: None,
        create_cq_ex: None,
    };
    entry.backend.tenant = tenant;
    {
        let mut s = Stack::new(&mut entry.layers, &mut entry.backend);
        s.start_layers();
    }
    ops.post_send = Some(braid_post_send);
    ops.post_recv = Some(braid_post_recv);
    ops.poll_cq = Some(braid_poll_cq);
    ops.req_notify_cq = Some(braid_req_notify_cq);
    if ops.post_srq_recv.is_some() {
        ops.post_srq_recv = Some(braid_post_srq_recv);
    }
    if let Some(v) = vctx_with(ctx, offset_of!(verbs_context, create_qp_ex)) {
        if let Some(f) = (*v).create_qp_ex {
            entry.create_qp_ex = Some(f);
            (*v).create_qp_ex = Some(crate::interpose::braid_create_qp_ex);
        }
    }
    if let Some(v) = vctx_with(ctx, offset_of!(verbs_context, create_cq_ex)) {
        if let Some(f) = (*v).create_cq_ex {
            entry.create_cq_ex = Some(f);
            (*v).create_cq_ex = Some(crate::interpose::braid_create_cq_ex);
        }
    }
    st.ctxs.retain(|c| c.ctx != ctx);
    st.ctxs.push(entry);
    add(&c::contexts, 1);
    Ok(true)
}

/// Gives the context its provider's functions back and forgets it (before ibv_close_device).
///
/// # Safety
/// `ctx` is a live context.
pub unsafe fn release_context(ctx: *mut ibv_context) {
    let mut st = lock();
    if let Some(i) = st.ctxs.iter().position(|c| c.ctx == ctx) {
        let e = st.ctxs.swap_remove(i);
        let ops = &mut (*ctx).ops;
        ops.post_send = Some(e.backend.ops.post_send);
        ops.post_recv = Some(e.backend.ops.post_recv);
        ops.poll_cq = Some(e.backend.ops.poll_cq);
        ops.req_notify_cq = Some(e.backend.ops.req_notify_cq);
        ops.post_srq_recv = e.backend.ops.post_srq_recv;
    }
}

fn errno_or_einval(e: c_int) -> c_int {
    if e > 0 {
        e
    } else {
        EINVAL
    }
}

/// ibv_post_send through braid.
///
/// # Safety
/// ibv_post_send's contract: `qp` live, `wr` a well-formed list, `bad` writable or null.
pub unsafe extern "C" fn braid_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    let mut st = lock();
    let rc = post_send_locked(&mut st, qp, wr, bad);
    if st.events {
        crate::host::run_due(&mut st);
    }
    rc
}

unsafe fn post_send_locked(
    st: &mut Preload,
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    let Some(cx) = st.find((*qp).context) else {
        return EINVAL;
    };
    add(&c::post_send_calls, 1);
    let qpn = (*qp).qp_num;
    let Some(qp_type) = cx.backend.qps.get(&qpn).map(|q| q.qp_type) else {
        let mut n = 0;
        let mut w = wr;
        while !w.is_null() {
            n += 1;
            w = (*w).next;
        }
        add(&c::send_wrs_passthrough, n);
        return (cx.backend.ops.post_send)(qp, wr, bad);
    };
    let mut batch = Vec::new();
    let mut origin: Vec<*mut ibv_send_wr> = Vec::new();
    let mut cur = wr;
    while !cur.is_null() {
        let w = &*cur;
        let b = &mut cx.backend;
        match convert::send_to_seam(w, qp_type, &mut |a, q| b.ah_index(a, q)) {
            Some(s) => {
                batch.push(s);
                origin.push(cur);
            }
            None => {
                let rc = flush_sends(cx, qpn, &mut batch, &mut origin, bad);
                if rc != 0 {
                    return rc;
                }
                // Handed to the provider alone, unchanged but for its `next`, in its place
                // in the list (so order is kept).
                let mut one = *w;
                one.next = std::ptr::null_mut();
                let mut b: *mut ibv_send_wr = std::ptr::null_mut();
                let rc = (cx.backend.ops.post_send)(qp, &mut one, &mut b);
                if rc != 0 {
                    if !bad.is_null() {
                        *bad = cur;
                    }
                    return rc;
                }
                add(&c::send_wrs_passthrough, 1);
            }
        }
        cur = w.next;
    }
    flush_sends(cx, qpn, &mut batch, &mut origin, bad)
}

unsafe fn flush_sends(
    cx: &mut Ctx,
    qpn: u32,
    batch: &mut Vec<braid_verbs::SendWr>,
    origin: &mut Vec<*mut ibv_send_wr>,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    if batch.is_empty() {
        return 0;
    }
    let n = batch.len() as u64;
    cx.backend.last_errno = 0;
    let r = Stack::new(&mut cx.layers, &mut cx.backend).post_send_list(qpn, std::mem::take(batch));
    let sent = std::mem::take(origin);
    match r {
        Ok(()) => {
            add(&c::send_wrs_braid, n);
            0
        }
        Err(b) => {
            add(&c::send_wrs_braid, b.index as u64);
            if !bad.is_null() {
                *bad = sent.get(b.index).copied().unwrap_or(sent[0]);
            }
            errno_or_einval(cx.backend.last_errno)
        }
    }
}

/// ibv_post_recv through braid.
///
/// # Safety
/// ibv_post_recv's contract.
pub unsafe extern "C" fn braid_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    let mut st = lock();
    let rc = post_recv_locked(&mut st, qp, wr, bad);
    if st.events {
        crate::host::run_due(&mut st);
    }
    rc
}

unsafe fn post_recv_locked(
    st: &mut Preload,
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    let Some(cx) = st.find((*qp).context) else {
        return EINVAL;
    };
    add(&c::post_recv_calls, 1);
    let qpn = (*qp).qp_num;
    if !cx.backend.qps.contains_key(&qpn) {
        let mut n = 0;
        let mut w = wr;
        while !w.is_null() {
            n += 1;
            w = (*w).next;
        }
        add(&c::recv_wrs_passthrough, n);
        return (cx.backend.ops.post_recv)(qp, wr, bad);
    }
    let mut cur = wr;
    while !cur.is_null() {
        let r = convert::recv_to_seam(&*cur);
        cx.backend.last_errno = 0;
        if Stack::new(&mut cx.layers, &mut cx.backend)
            .post_recv(qpn, r)
            .is_err()
        {
            if !bad.is_null() {
                *bad = cur;
            }
            return errno_or_einval(cx.backend.last_errno);
        }
        add(&c::recv_wrs_braid, 1);
        cur = (*cur).next;
    }
    0
}

/// ibv_post_srq_recv: the seam has no shared receive queues, so these go to the provider
/// unchanged (counted).
///
/// # Safety
/// ibv_post_srq_recv's contract.
pub unsafe extern "C" fn braid_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    let f = {
        let mut st = lock();
        match st
            .find((*srq).context)
            .and_then(|cx| cx.backend.ops.post_srq_recv)
        {
            Some(f) => f,
            None => return EINVAL,
        }
    };
    let mut n = 0;
    let mut w = wr;
    while !w.is_null() {
        n += 1;
        w = (*w).next;
    }
    add(&c::srq_recv_wrs_passthrough, n);
    f(srq, wr, bad)
}

/// ibv_poll_cq through braid. Each completion the stack passes up is given to the application
/// as the provider wrote it (every field of `ibv_wc`); one a layer made is built from the
/// seam's fields.
///
/// # Safety
/// ibv_poll_cq's contract: `wc` holds `n` entries.
pub unsafe extern "C" fn braid_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    let mut st = lock();
    if st.events {
        crate::host::run_due(&mut st);
    }
    let rc = poll_cq_locked(&mut st, cq, n, wc);
    if st.events {
        crate::host::run_due(&mut st);
    }
    rc
}

unsafe fn poll_cq_locked(st: &mut Preload, cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    let Some(cx) = st.find((*cq).context) else {
        return -EINVAL;
    };
    add(&c::poll_cq_calls, 1);
    let Some(id) = cx.backend.cq_id(cq) else {
        let k = (cx.backend.ops.poll_cq)(cq, n, wc);
        if k > 0 {
            add(&c::cqes_passthrough, k as u64);
        }
        return k;
    };
    if n <= 0 {
        return 0;
    }
    cx.backend.last_errno = 0;
    let mut out = Vec::with_capacity(n as usize);
    Stack::new(&mut cx.layers, &mut cx.backend).poll_cq(id, n as usize, &mut out);
    if out.is_empty() && cx.backend.last_errno != 0 {
        return -cx.backend.last_errno;
    }
    let k = out.len().min(n as usize);
    for (i, w) in out.iter().take(k).enumerate() {
        let raw = match cx.backend.take_raw(id, w) {
            Some(r) => {
                add(&c::cqes_braid, 1);
                r
            }
            None => {
                add(&c::cqes_synthesized, 1);
                convert::wc_from_seam(w)
            }
        };
        *wc.add(i) = raw;
    }
    k as c_int
}

/// ibv_req_notify_cq through braid (solicited-only arming, which the seam lacks, goes to the
/// provider).
///
/// # Safety
/// ibv_req_notify_cq's contract.
pub unsafe extern "C" fn braid_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    let mut st = lock();
    let rc = req_notify_locked(&mut st, cq, solicited_only);
    if st.events {
        crate::host::run_due(&mut st);
    }
    rc
}

unsafe fn req_notify_locked(st: &mut Preload, cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    let Some(cx) = st.find((*cq).context) else {
        return EINVAL;
    };
    match cx.backend.cq_id(cq) {
        Some(id) if solicited_only == 0 => {
            add(&c::req_notify_braid, 1);
            cx.backend.last_errno = 0;
            match Stack::new(&mut cx.layers, &mut cx.backend).req_notify_cq(id) {
                Ok(()) => 0,
                Err(_) => errno_or_einval(cx.backend.last_errno),
            }
        }
        _ => {
            add(&c::req_notify_passthrough, 1);
            (cx.backend.ops.req_notify_cq)(cq, solicited_only)
        }
    }
}

#[cfg(test)]
#[path = "datapath_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "justitia_tests.rs"]
mod justitia_tests;
