//! The exported control verbs. With `LD_PRELOAD` the dynamic linker binds an application's (and
//! librdmacm's) calls to these; each calls the next definition, libibverbs' own, found with
//! `dlvsym(RTLD_NEXT, name, "IBVERBS_1.1")` (falling back to `dlsym` for later versions), and
//! records what braid needs: contexts are taken over at open, QPs and CQs adopted at creation.
//!
//! mlx5dv and DEVX calls write work queue entries or device commands directly and bypass
//! libibverbs' data path: they are passed through with one warning line each (first call).

use crate::datapath::{adopt_with, lock, release_context};
use crate::ffi::*;
use crate::stats::{add, c};
use braid_verbs::Verbs as _;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlvsym(handle: *mut c_void, symbol: *const c_char, version: *const c_char) -> *mut c_void;
}

/// glibc's `RTLD_NEXT` (dlfcn.h: `((void *) -1l)`).
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;
const ENOSYS: c_int = 38;

/// The next definition of `name` (NUL-terminated) after this library.
fn next(name: &'static str) -> usize {
    // SAFETY: NUL-terminated literals; dlvsym/dlsym only read them.
    unsafe {
        let p = dlvsym(
            RTLD_NEXT,
            name.as_ptr() as *const c_char,
            c"IBVERBS_1.1".as_ptr(),
        );
        if p.is_null() {
            dlsym(RTLD_NEXT, name.as_ptr() as *const c_char) as usize
        } else {
            p as usize
        }
    }
}

/// The real function `$name` as a `$ty`, resolved once.
macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static P: AtomicUsize = AtomicUsize::new(0);
        let mut p = P.load(Ordering::Relaxed);
        if p == 0 {
            p = next(concat!($name, "\0"));
            P.store(p, Ordering::Relaxed);
        }
        if p == 0 {
            None
        } else {
            // SAFETY: libibverbs' (or libmlx5's) exported function of this signature
            // (verbs.h / mlx5dv.h).
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

fn warn_once(flag: &AtomicUsize, line: &str) {
    if flag.swap(1, Ordering::Relaxed) == 0 {
        eprintln!("braid-preload: {line}");
    }
}

/// # Safety
/// libibverbs' contract for each function below.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    let Some(f) = real!(
        "ibv_open_device",
        unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context
    ) else {
        return std::ptr::null_mut();
    };
    let ctx = f(device);
    if !ctx.is_null() {
        let rate = line_rate(device);
        if let Err(e) = adopt_with(ctx, crate::choice(), rate) {
            eprintln!("braid-preload: BRAID_MIDDLEWARE: {e}; this context runs without braid");
        }
    }
    ctx
}

/// The device's port-1 rate in bit/s from sysfs (`/sys/class/infiniband/<dev>/ports/1/rate`,
/// e.g. "100 Gb/sec (4X EDR)"), 0 when unknown: a mechanism that needs it (Justitia) then
/// asks for `line_rate` in its config.
unsafe fn line_rate(device: *mut ibv_device) -> u64 {
    let Some(name) = real!(
        "ibv_get_device_name",
        unsafe extern "C" fn(*mut ibv_device) -> *const c_char
    ) else {
        return 0;
    };
    let n = name(device);
    if n.is_null() {
        return 0;
    }
    let dev = std::ffi::CStr::from_ptr(n).to_string_lossy();
    std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/ports/1/rate"))
        .map_or(0, |s| parse_sysfs_rate(&s))
}

/// "25 Gb/sec (1X EDR)" -> 25e9; "2.5 Gb/sec" -> 2.5e9; anything else 0.
pub fn parse_sysfs_rate(s: &str) -> u64 {
    let mut it = s.split_whitespace();
    let (Some(num), Some(unit)) = (it.next(), it.next()) else {
        return 0;
    };
    let Ok(x) = num.parse::<f64>() else { return 0 };
    let scale = match unit {
        "Gb/sec" => 1e9,
        "Mb/sec" => 1e6,
        _ => return 0,
    };
    (x * scale) as u64
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    let Some(f) = real!(
        "ibv_close_device",
        unsafe extern "C" fn(*mut ibv_context) -> c_int
    ) else {
        return ENOSYS;
    };
    release_context(ctx);
    f(ctx)
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    let Some(f) = real!(
        "ibv_alloc_pd",
        unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd
    ) else {
        return std::ptr::null_mut();
    };
    add(&c::pds, 1);
    f(ctx)
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut ibv_mr {
    let Some(f) = real!(
        "ibv_reg_mr",
        unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr
    ) else {
        return std::ptr::null_mut();
    };
    add(&c::mrs, 1);
    f(pd, addr, len, access)
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    let Some(f) = real!(
        "ibv_reg_mr_iova",
        unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr
    ) else {
        return std::ptr::null_mut();
    };
    add(&c::mrs, 1);
    f(pd, addr, len, iova, access)
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    let Some(f) = real!(
        "ibv_reg_mr_iova2",
        unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_uint) -> *mut ibv_mr
    ) else {
        return std::ptr::null_mut();
    };
    add(&c::mrs, 1);
    f(pd, addr, len, iova, access)
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let Some(f) = real!(
        "ibv_create_cq",
        unsafe extern "C" fn(
            *mut ibv_context,
            c_int,
            *mut c_void,
            *mut ibv_comp_channel,
            c_int,
        ) -> *mut ibv_cq
    ) else {
        return std::ptr::null_mut();
    };
    let cq = f(ctx, cqe, cq_context, channel, comp_vector);
    if !cq.is_null() {
        if let Some(cx) = lock().find(ctx) {
            cx.backend.adopt_cq(cq);
            add(&c::cqs_adopted, 1);
        }
    }
    cq
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    let Some(f) = real!("ibv_destroy_cq", unsafe extern "C" fn(*mut ibv_cq) -> c_int) else {
        return ENOSYS;
    };
    let rc = f(cq);
    if rc == 0 {
        // `cq` is freed: only its address is used, as a key.
        for cx in lock().ctxs.iter_mut() {
            cx.backend.forget_cq(cq);
        }
    }
    rc
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut c_void) -> *mut ibv_qp {
    let Some(f) = real!(
        "ibv_create_qp",
        unsafe extern "C" fn(*mut ibv_pd, *mut c_void) -> *mut ibv_qp
    ) else {
        return std::ptr::null_mut();
    };
    let qp = f(pd, attr);
    if !qp.is_null() {
        // ibv_qp_init_attr is the head of ibv_qp_init_attr_ex: sq_sig_all sits at one offset.
        let sig_all = !attr.is_null() && (*(attr as *const ibv_qp_init_attr_ex)).sq_sig_all != 0;
        adopt_qp(qp, sig_all);
    }
    qp
}

/// Adopts the application's new QP and creates it through the context's stack (the backend
/// hands the stack the QP the provider already made), so that every layer knows it as it
/// knows a QP in the simulator: its CQs, its type, whether every WR is signaled.
///
/// # Safety
/// `qp` is a live QP the provider just returned.
pub unsafe fn adopt_qp(qp: *mut ibv_qp, sq_sig_all: bool) {
    let mut st = lock();
    let Some(cx) = st.find((*qp).context) else {
        return;
    };
    let qpn = (*qp).qp_num;
    if cx.backend.qps.contains_key(&qpn) {
        return;
    }
    cx.backend.adopt_qp(qp);
    add(&c::qps_adopted, 1);
    let send_cq = cx.backend.cq_id((*qp).send_cq).unwrap_or(u32::MAX);
    let recv_cq = cx.backend.cq_id((*qp).recv_cq).unwrap_or(send_cq);
    let qp_type = match (*qp).qp_type {
        IBV_QPT_UC => braid_verbs::QpType::Uc,
        IBV_QPT_UD => braid_verbs::QpType::Ud,
        _ => braid_verbs::QpType::Rc,
    };
    let init = braid_verbs::QpInit {
        qp_type,
        recv_cq,
        sq_sig_all,
        ..braid_verbs::QpInit::rc(send_cq)
    };
    cx.backend.adopting = Some(qpn);
    let r = braid_verbs::Stack::new(&mut cx.layers, &mut cx.backend).create_qp(&init);
    cx.backend.adopting = None;
    match r {
        Ok(n) if n == qpn => {}
        Ok(n) => eprintln!(
            "braid-preload: QP {qpn:#x}: a layer answered create_qp with QP {n:#x}; its posts go \
             through braid as the application's QP"
        ),
        Err(e) => eprintln!(
            "braid-preload: QP {qpn:#x}: the layers refused it ({e}); its posts still go \
             through braid"
        ),
    }
    if st.events {
        crate::host::run_due(&mut st);
    }
}

/// The application moved `qp` to RTR: the stack learns the connection (the remote host, keyed
/// by the low 32 bits of the remote GID, an IPv4 address for RoCEv2, and the remote QP number),
/// as a layer in the simulator learns it from connect_qp.
unsafe fn connected(qp: *mut ibv_qp, attr: *const ibv_qp_attr_head) {
    let mut st = lock();
    let Some(cx) = st.find((*qp).context) else {
        return;
    };
    let qpn = (*qp).qp_num;
    if !cx.backend.qps.contains_key(&qpn) {
        return;
    }
    let g = (*attr).dgid;
    let remote = braid_verbs::RemoteQp {
        host: u32::from_be_bytes([g[12], g[13], g[14], g[15]]),
        qpn: (*attr).dest_qp_num,
        udp_sport: None,
    };
    if braid_verbs::Stack::new(&mut cx.layers, &mut cx.backend)
        .connect_qp(qpn, remote)
        .is_ok()
    {
        add(&c::qps_connected, 1);
    }
    if st.events {
        crate::host::run_due(&mut st);
    }
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    let Some(f) = real!("ibv_destroy_qp", unsafe extern "C" fn(*mut ibv_qp) -> c_int) else {
        return ENOSYS;
    };
    let (ctx, qpn) = ((*qp).context, (*qp).qp_num);
    let rc = f(qp);
    if rc == 0 {
        if let Some(cx) = lock().find(ctx) {
            cx.backend.forget_qp(qpn);
        }
    }
    rc
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut c_void, mask: c_int) -> c_int {
    let Some(f) = real!(
        "ibv_modify_qp",
        unsafe extern "C" fn(*mut ibv_qp, *mut c_void, c_int) -> c_int
    ) else {
        return ENOSYS;
    };
    add(&c::modify_qp, 1);
    let rc = f(qp, attr, mask);
    if rc == 0
        && !attr.is_null()
        && mask & IBV_QP_STATE != 0
        && (*(attr as *const ibv_qp_attr_head)).qp_state == IBV_QPS_RTR
    {
        connected(qp, attr as *const ibv_qp_attr_head);
    }
    rc
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut c_void) -> *mut ibv_srq {
    let Some(f) = real!(
        "ibv_create_srq",
        unsafe extern "C" fn(*mut ibv_pd, *mut c_void) -> *mut ibv_srq
    ) else {
        return std::ptr::null_mut();
    };
    add(&c::srqs, 1);
    f(pd, attr)
}

/// # Safety
/// As above.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    let Some(f) = real!(
        "ibv_create_comp_channel",
        unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel
    ) else {
        return std::ptr::null_mut();
    };
    add(&c::comp_channels, 1);
    f(ctx)
}

/// # Safety
/// As above. Under `raw` no completion is hidden, so the application's channel is the
/// provider's own and its events are passed on as they come (counted).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    let Some(f) = real!(
        "ibv_get_cq_event",
        unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int
    ) else {
        return -1;
    };
    let rc = f(ch, cq, cq_context);
    if rc == 0 {
        add(&c::cq_events, 1);
    }
    rc
}

/// `verbs_context.create_qp_ex`'s replacement (the inline `ibv_create_qp_ex` and librdmacm's
/// `rdma_create_qp` call through it). A QP built for the extended work-request API (`ibv_wr_*`
/// through per-QP pointers in `ibv_qp_ex`) is refused with one line and left to the provider.
///
/// # Safety
/// The provider's `create_qp_ex` contract.
pub unsafe extern "C" fn braid_create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    let Some(f) = lock().find(ctx).and_then(|cx| cx.create_qp_ex) else {
        return std::ptr::null_mut();
    };
    let qp = f(ctx, attr);
    if qp.is_null() {
        return qp;
    }
    if (*attr).comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 && (*attr).send_ops_flags != 0 {
        add(&c::qps_refused_ext_api, 1);
        eprintln!(
            "braid-preload: QP {:#x} uses the extended work-request API (ibv_wr_*): refused, \
             its sends run unchanged outside braid (its receives and completions still pass \
             through braid)",
            (*qp).qp_num
        );
    } else {
        adopt_qp(qp, (*attr).sq_sig_all != 0);
    }
    qp
}

/// `verbs_context.create_cq_ex`'s replacement: the CQ is adopted (ibv_poll_cq on it goes
/// through braid); its `ibv_start_poll` family runs through the provider's per-CQ pointers,
/// outside braid, which one line says.
///
/// # Safety
/// The provider's `create_cq_ex` contract.
pub unsafe extern "C" fn braid_create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq {
    let mut st = lock();
    let Some(f) = st.find(ctx).and_then(|cx| cx.create_cq_ex) else {
        return std::ptr::null_mut();
    };
    drop(st);
    let cq = f(ctx, attr);
    if cq.is_null() {
        return cq;
    }
    add(&c::cqs_ex, 1);
    st = lock();
    if let Some(cx) = st.find(ctx) {
        cx.backend.adopt_cq(cq);
        add(&c::cqs_adopted, 1);
    }
    static ONCE: AtomicUsize = AtomicUsize::new(0);
    warn_once(
        &ONCE,
        "an extended CQ (ibv_create_cq_ex): ibv_start_poll/ibv_next_poll on it are refused by \
         braid and run unchanged through the provider; ibv_poll_cq on it goes through braid",
    );
    cq
}

macro_rules! mlx5dv_passthrough {
    ($name:ident, $lit:literal, ($($a:ident: $t:ty),*) -> $r:ty, $fail:expr) => {
        /// # Safety
        /// mlx5dv.h's contract. Direct verbs bypass libibverbs: passed through, warned once.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            static WARNED: AtomicUsize = AtomicUsize::new(0);
            warn_once(&WARNED, concat!($lit, ": mlx5 direct verbs bypass libibverbs; \
                objects used through them run outside braid"));
            add(&c::mlx5dv_calls, 1);
            match real!($lit, unsafe extern "C" fn($($t),*) -> $r) {
                Some(f) => f($($a),*),
                None => $fail,
            }
        }
    };
}

mlx5dv_passthrough!(mlx5dv_init_obj, "mlx5dv_init_obj", (obj: *mut c_void, obj_type: u64) -> c_int, ENOSYS);
mlx5dv_passthrough!(mlx5dv_create_qp, "mlx5dv_create_qp", (ctx: *mut ibv_context, a: *mut c_void, b: *mut c_void) -> *mut ibv_qp, std::ptr::null_mut());
mlx5dv_passthrough!(mlx5dv_qp_ex_from_ibv_qp_ex, "mlx5dv_qp_ex_from_ibv_qp_ex", (q: *mut c_void) -> *mut c_void, std::ptr::null_mut());
mlx5dv_passthrough!(mlx5dv_devx_obj_create, "mlx5dv_devx_obj_create", (ctx: *mut ibv_context, i: *const c_void, il: usize, o: *mut c_void, ol: usize) -> *mut c_void, std::ptr::null_mut());
mlx5dv_passthrough!(mlx5dv_devx_general_cmd, "mlx5dv_devx_general_cmd", (ctx: *mut ibv_context, i: *const c_void, il: usize, o: *mut c_void, ol: usize) -> c_int, ENOSYS);
