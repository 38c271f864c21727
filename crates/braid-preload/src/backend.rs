//! The second `Verbs` backend: it speaks for the application's own objects. QP numbers are the
//! provider's (`ibv_qp.qp_num`), CQ ids are handed out as the application's CQs are adopted,
//! addresses and keys in SGEs are the application's virtual addresses and lkeys, and every call
//! ends in the provider function the context had before the preload swapped it.

use crate::convert;
use crate::ffi::*;
use braid_verbs::{
    Access, BadWr, Caps, CqId, MemoryRegion, QpAttr, QpInit, QpModify, QpNum, QpState, QpType,
    RecvWr, RemoteQp, SendWr, TenantId, Verbs, VerbsError, WorkCompletion,
};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;
use std::hash::{BuildHasherDefault, Hasher};

/// QP numbers, CQ ids and object addresses are already well spread and never chosen by an
/// adversary inside one process: one multiply (Fibonacci hashing) instead of SipHash, which was
/// a fifth of a post's instructions (callgrind, docs/preload.md).
#[derive(Default)]
pub struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The provider's data-path functions of one context, saved before the swap.
#[derive(Clone, Copy)]
pub struct ProviderOps {
    pub post_send: PostSendFn,
    pub post_recv: PostRecvFn,
    pub poll_cq: PollCqFn,
    pub req_notify_cq: ReqNotifyCqFn,
    pub post_srq_recv: Option<PostSrqRecvFn>,
}

pub struct AdoptedQp {
    pub qp: *mut ibv_qp,
    pub qp_type: u32,
}

/// How many provider completions a CQ keeps for [`AppVerbs::take_raw`]: a layer that hides
/// completions (Justitia's chunks) leaves its own behind, and the oldest go first. Kept short:
/// `take_raw` searches it on every completion handed up.
const RAW_KEEP: usize = 256;

pub struct AppVerbs {
    pub ops: ProviderOps,
    pub qps: IdMap<QpNum, AdoptedQp>,
    cqs: Vec<Option<*mut ibv_cq>>,
    cq_ids: IdMap<usize, CqId>,
    ahs: Vec<(*mut ibv_ah, u32)>,
    /// The provider's completions as polled, per CQ, so that the application gets the provider's
    /// own record (wc_flags, sl, slid, pkey_index, vendor_err) of each completion a layer passes up.
    raw: IdMap<CqId, VecDeque<ibv_wc>>,
    /// The errno of the last provider call that failed (what the application gets back).
    pub last_errno: c_int,
    caps: Caps,
    /// This context's tenant on the process's host (crate::host).
    pub tenant: TenantId,
    /// The QP `create_qp` hands the stack while the preload adopts an application's QP
    /// through it (the application's `ibv_create_qp` already made it).
    pub adopting: Option<QpNum>,
    /// Timers and wakes the layers asked for, for crate::host::run_due.
    pub sched: Vec<crate::host::Sched>,
    wc_buf: Vec<ibv_wc>,
    /// Scratch for building a post's WR list and its SGEs (kept between posts: no allocation
    /// per post once warm).
    wr_buf: Vec<ibv_send_wr>,
    sg_buf: Vec<ibv_sge>,
}

fn errno_to_seam(e: c_int) -> VerbsError {
    match e {
        12 => VerbsError::QueueFull, // ENOMEM: the queue is full
        22 => VerbsError::InvalidWr("the provider refused the work request (EINVAL)"),
        _ => VerbsError::InvalidState("the provider refused the post"),
    }
}

impl AppVerbs {
    pub fn new(ops: ProviderOps) -> Self {
        AppVerbs {
            ops,
            qps: IdMap::default(),
            cqs: Vec::new(),
            cq_ids: IdMap::default(),
            ahs: Vec::new(),
            raw: IdMap::default(),
            last_errno: 0,
            caps: Caps::default(),
            tenant: 1,
            adopting: None,
            sched: Vec::new(),
            wc_buf: Vec::new(),
            wr_buf: Vec::new(),
            sg_buf: Vec::new(),
        }
    }

    /// # Safety
    /// `qp` is a live QP of this context (the provider just returned it).
    pub unsafe fn adopt_qp(&mut self, qp: *mut ibv_qp) {
        let (qpn, t) = ((*qp).qp_num, (*qp).qp_type);
        self.qps.insert(qpn, AdoptedQp { qp, qp_type: t });
    }
    pub fn forget_qp(&mut self, qpn: QpNum) {
        self.qps.remove(&qpn);
    }
    pub fn adopt_cq(&mut self, cq: *mut ibv_cq) -> CqId {
        let id = self.cqs.len() as CqId;
        self.cqs.push(Some(cq));
        self.cq_ids.insert(cq as usize, id);
        id
    }
    pub fn cq_id(&self, cq: *mut ibv_cq) -> Option<CqId> {
        self.cq_ids.get(&(cq as usize)).copied()
    }
    pub fn forget_cq(&mut self, cq: *mut ibv_cq) {
        if let Some(id) = self.cq_ids.remove(&(cq as usize)) {
            self.cqs[id as usize] = None;
            self.raw.remove(&id);
        }
    }
    fn cq(&self, id: CqId) -> Result<*mut ibv_cq, VerbsError> {
        self.cqs
            .get(id as usize)
            .copied()
            .flatten()
            .ok_or(VerbsError::NoSuchCq(id))
    }
    fn qp(&self, qpn: QpNum) -> Result<&AdoptedQp, VerbsError> {
        self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))
    }

    /// The number standing for a UD destination (address handle, Q_Key) in [`RemoteQp::host`].
    pub fn ah_index(&mut self, ah: *mut ibv_ah, qkey: u32) -> u32 {
        match self.ahs.iter().position(|&e| e == (ah, qkey)) {
            Some(i) => i as u32,
            None => {
                self.ahs.push((ah, qkey));
                self.ahs.len() as u32 - 1
            }
        }
    }

    /// The provider's record of the completion `wc` stands for (same QP and wr_id), removed.
    pub fn take_raw(&mut self, cq: CqId, wc: &WorkCompletion) -> Option<ibv_wc> {
        let q = self.raw.get_mut(&cq)?;
        let i = q
            .iter()
            .position(|r| r.qp_num == wc.qp_num && r.wr_id == wc.wr_id)?;
        q.remove(i)
    }
}

impl Verbs for AppVerbs {
    fn now(&self) -> u64 {
        crate::host::now_ps()
    }
    fn local_host(&self) -> u32 {
        0
    }
    fn caps(&self) -> &Caps {
        &self.caps
    }
    fn tenant(&self) -> TenantId {
        self.tenant
    }
    fn create_cq(&mut self, _depth: u32) -> Result<CqId, VerbsError> {
        Err(VerbsError::Unsupported(
            "objects of a layer's own (the preload adopts the application's; issue 32 §2)",
        ))
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchCq(cq))
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        let c = self.cq(cq)?;
        // SAFETY: an adopted CQ of this context; the provider's own function.
        let rc = unsafe { (self.ops.req_notify_cq)(c, 0) };
        if rc != 0 {
            self.last_errno = rc;
            return Err(VerbsError::InvalidArgument("ibv_req_notify_cq failed"));
        }
        Ok(())
    }
    fn create_qp(&mut self, _init: &QpInit) -> Result<QpNum, VerbsError> {
        if let Some(q) = self.adopting.take() {
            return Ok(q);
        }
        Err(VerbsError::Unsupported(
            "objects of a layer's own (the preload adopts the application's; issue 32 §2)",
        ))
    }
    fn connect_qp(&mut self, qp: QpNum, _remote: RemoteQp) -> Result<(), VerbsError> {
        // The application's own ibv_modify_qp to RTR connected it; the preload passes the
        // connection down the stack afterwards so that the layers learn the peer.
        self.qp(qp).map(|_| ())
    }
    fn modify_qp(&mut self, _qp: QpNum, _m: QpModify) -> Result<(), VerbsError> {
        Err(VerbsError::Unsupported(
            "modify_qp from a layer: the application's own ibv_modify_qp does it",
        ))
    }
    fn query_qp(&mut self, qpn: QpNum) -> Result<QpAttr, VerbsError> {
        let q = self.qp(qpn)?;
        // SAFETY: an adopted QP; libibverbs keeps `state` as the last ibv_modify_qp set it.
        let (state, scq, rcq) = unsafe { ((*q.qp).state, (*q.qp).send_cq, (*q.qp).recv_cq) };
        let state = match state {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            _ => QpState::Error,
        };
        let qp_type = match q.qp_type {
            IBV_QPT_UC => QpType::Uc,
            IBV_QPT_UD => QpType::Ud,
            _ => QpType::Rc,
        };
        Ok(QpAttr {
            qpn,
            qp_type,
            state,
            local_addr: 0,
            udp_sport: 0,
            remote: None,
            retry_cnt: 0,
            rnr_retry: 0,
            cross_channel: false,
            send_cq: self.cq_id(scq).unwrap_or(u32::MAX),
            recv_cq: self.cq_id(rcq).unwrap_or(u32::MAX),
            send_outstanding: 0,
        })
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        Err(VerbsError::NoSuchQp(qp))
    }
    fn reg_mr(&mut self, _a: u64, _l: u64, _x: Access) -> Result<MemoryRegion, VerbsError> {
        Err(VerbsError::Unsupported(
            "memory of a layer's own (the preload adopts the application's; issue 32 §2)",
        ))
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        Err(VerbsError::BadKey(mr.lkey))
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.post_send_list(qp, vec![wr]).map_err(|b| b.error)
    }
    fn post_send_list(&mut self, qpn: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        let qp = self.qp(qpn).map_err(|error| BadWr { index: 0, error })?.qp;
        let mut list = std::mem::take(&mut self.wr_buf);
        let mut sg = std::mem::take(&mut self.sg_buf);
        list.clear();
        sg.clear();
        let mut one = Vec::new();
        for (index, w) in wrs.iter().enumerate() {
            let ahs = &self.ahs;
            let Some(mut c) =
                convert::send_from_seam(w, &mut one, &|i| ahs.get(i as usize).copied())
            else {
                self.wr_buf = list;
                self.sg_buf = sg;
                return Err(BadWr {
                    index,
                    error: VerbsError::Unsupported("cross-channel and NOP WRs on a real NIC"),
                });
            };
            // The SGEs go into one buffer; `sg_list` holds the start index until it stops growing.
            c.sg_list = sg.len() as *mut ibv_sge;
            sg.extend_from_slice(&one);
            list.push(c);
        }
        let rc = if list.is_empty() {
            0
        } else {
            for c in list.iter_mut() {
                let start = c.sg_list as usize;
                c.sg_list = if c.num_sge == 0 {
                    std::ptr::null_mut()
                } else {
                    // SAFETY: start + num_sge <= sg.len(), by construction above.
                    unsafe { sg.as_mut_ptr().add(start) }
                };
            }
            link(&mut list);
            let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
            // SAFETY: `list` and the SGEs it points to live until the provider returns (it
            // copies WRs into its queue during the call, as ibv_post_send promises).
            let rc = unsafe { (self.ops.post_send)(qp, list.as_mut_ptr(), &mut bad) };
            if rc != 0 {
                self.last_errno = rc;
                let index = index_of(&list, bad);
                self.wr_buf = list;
                self.sg_buf = sg;
                return Err(BadWr {
                    index,
                    error: errno_to_seam(rc),
                });
            }
            rc
        };
        self.wr_buf = list;
        self.sg_buf = sg;
        debug_assert_eq!(rc, 0);
        Ok(())
    }
    fn post_recv(&mut self, qpn: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        let qp = self.qp(qpn)?.qp;
        let mut sg = Vec::new();
        let mut w = convert::recv_from_seam(&wr, &mut sg);
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: as post_send_list.
        let rc = unsafe { (self.ops.post_recv)(qp, &mut w, &mut bad) };
        if rc != 0 {
            self.last_errno = rc;
            return Err(errno_to_seam(rc));
        }
        Ok(())
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        let Ok(c) = self.cq(cq) else { return 0 };
        self.wc_buf.resize(max, ibv_wc::default());
        // SAFETY: an adopted CQ; `wc_buf` holds `max` entries.
        let n = unsafe { (self.ops.poll_cq)(c, max as c_int, self.wc_buf.as_mut_ptr()) };
        if n < 0 {
            self.last_errno = -n;
            return 0;
        }
        let q = self.raw.entry(cq).or_default();
        for wc in &self.wc_buf[..n as usize] {
            out.push(convert::wc_to_seam(wc));
            if q.len() == RAW_KEEP {
                q.pop_front();
            }
            q.push_back(*wc);
        }
        n as usize
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.sched.push(crate::host::Sched::Timer { at, token });
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.sched.push(crate::host::Sched::Wake { tenant, token });
    }
}

/// Links WRs built in a vector into ibverbs' list.
pub fn link<T: Linked>(list: &mut [T]) {
    for i in 1..list.len() {
        let next: *mut T = &mut list[i];
        list[i - 1].set_next(next);
    }
}

fn index_of<T>(list: &[T], bad: *const T) -> usize {
    list.iter().position(|w| std::ptr::eq(w, bad)).unwrap_or(0)
}

pub trait Linked {
    fn set_next(&mut self, next: *mut Self);
}
impl Linked for ibv_send_wr {
    fn set_next(&mut self, next: *mut Self) {
        self.next = next;
    }
}
impl Linked for ibv_recv_wr {
    fn set_next(&mut self, next: *mut Self) {
        self.next = next;
    }
}
