//! One RDMA device opened through rdma-core: its completion channel and the ibverbs objects
//! the host's tenants create, with the seam's ownership rules. Every braid protection domain is
//! an ibv_pd of its own (each tenant's default PD too), so the device enforces them: an rkey of
//! another PD is refused with IBV_WC_REM_ACCESS_ERR, an lkey of another PD with
//! IBV_WC_LOC_PROT_ERR. Each tenant's seam addresses are backed by memory of its own, except that
//! the host agent's memory is shared with a tenant where the agent granted it and the tenant
//! registers a range inside it.

use super::consts::*;
use crate::memory::Memory;
use crate::wr_ledger::{PostedRecv, PostedSend, Retired, WrLedger};
use braid_verbs::*;
use rdma_mummy_sys as sys;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::ptr::{null_mut, NonNull};
use std::time::Instant;

mod mr;
mod post;
mod qp;

/// Why a device could not be opened (the message names what is missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError(pub String);

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OpenError {}

/// Whether libibverbs can be loaded (rdma-mummy-sys loads it at run time; absent, every verb
/// fails with EOPNOTSUPP, so say so first).
pub fn libibverbs_present() -> bool {
    // SAFETY: dlopen/dlclose with a valid C string.
    unsafe {
        let h = libc::dlopen(
            c"libibverbs.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_LOCAL,
        );
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
        true
    }
}

fn errno() -> String {
    std::io::Error::last_os_error().to_string()
}

struct Cq {
    cq: NonNull<sys::ibv_cq>,
    owner: TenantId,
    /// Software notification (busy polling): armed, and what was polled ahead of the consumer.
    armed: bool,
    stash: VecDeque<WorkCompletion>,
}

struct Qp {
    qp: NonNull<sys::ibv_qp>,
    owner: TenantId,
    /// The ibv_pd it was created in (its address handles and GRH area are in it too).
    pd: NonNull<sys::ibv_pd>,
    init: QpInit,
    remote: Option<RemoteQp>,
    flow_label: u32,
    /// The UDP source port set through mlx5dv (when `caps.sport_control`), else 0.
    udp_sport: u16,
    /// The initial PSN it sends from (ibverbs `sq_psn`), drawn at random when it is created
    /// ([`crate::psn`]).
    sq_psn: u32,
    /// Its send and receive queues: every WR posted under a tag of its own, so a completion
    /// (an error one too, whose opcode ibverbs leaves undefined) finds its request.
    wrs: WrLedger,
    grh_next: u64,
    /// UD: where its receives put their 40-byte GRH (hidden from the seam): the registered
    /// area and its number of slots.
    grh: Option<(NonNull<sys::ibv_mr>, Vec<u8>, u64)>,
}

struct Mr {
    mr: NonNull<sys::ibv_mr>,
    owner: TenantId,
    /// Its braid protection domain (as its owner names it).
    pd: PdId,
    /// Whose memory holds its bytes: its owner's, or the host agent's (shared memory) when it
    /// lies inside the agent's registered memory and a grant of it to its owner.
    space: TenantId,
    addr: u64,
    len: u64,
}

/// Timers and wakes the tenants asked for (served by [`crate::real::host::Host`]).
#[derive(Default)]
pub(crate) struct Pending {
    pub timers: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, TenantId, u64)>>,
    pub seq: u64,
    pub wakes: VecDeque<(TenantId, u64)>,
}

/// An opened RDMA device.
pub struct Nic {
    ctx: NonNull<sys::ibv_context>,
    /// The ibv_pd of each (tenant, braid PD); a tenant's [`DEFAULT_PD`] is allocated when it
    /// first needs it (the host agent's when the device opens).
    pds: HashMap<(TenantId, PdId), NonNull<sys::ibv_pd>>,
    /// The next number `alloc_pd` hands out (unique on the host, never reused).
    next_pd: PdId,
    channel: NonNull<sys::ibv_comp_channel>,
    port: u8,
    name: String,
    caps: Caps,
    /// caps.local_addrs[i] is GID table entry gid_index[i].
    gid_index: Vec<u8>,
    max_cqe: i32,
    cqs: Vec<Option<Cq>>,
    qps: HashMap<QpNum, Qp>,
    mrs: HashMap<u32, Mr>,
    /// By (PD, host, local address, traffic class): an AH serves QPs of its own PD only.
    ahs: HashMap<(usize, u32, u8, u32), NonNull<sys::ibv_ah>>,
    /// Each tenant's address space; the host agent's is shared memory, which a tenant maps by
    /// registering a range inside it that the agent granted it (DRUM's slice of its global
    /// buffer).
    mem: HashMap<TenantId, Memory>,
    /// What the host agent shares with which tenant ([`braid_verbs::HostCtx::agent_shares`]).
    shares: ShareSlot,
    epoch: Instant,
    pub(crate) pending: Pending,
    /// Notifications of armed CQs come from polling them (busy mode), not from the completion
    /// channel: set by [`crate::real::host::Host`] when it busy-polls.
    pub soft_notify: bool,
    /// The first error completions the device gave (the layers' hidden ones too), for a run's
    /// diagnostics: when a test fails, which request failed how says why.
    errors: Vec<String>,
}

/// How many error completions [`Nic::error_completions`] keeps.
const ERRORS_KEPT: usize = 16;

fn ipv4_of_gid(raw: &[u8; 16]) -> Option<u32> {
    (raw[..10].iter().all(|&b| b == 0) && raw[10] == 0xff && raw[11] == 0xff)
        .then(|| u32::from_be_bytes([raw[12], raw[13], raw[14], raw[15]]))
}

fn gid_of_ipv4(a: u32) -> sys::ibv_gid {
    let mut raw = [0u8; 16];
    raw[10] = 0xff;
    raw[11] = 0xff;
    raw[12..].copy_from_slice(&a.to_be_bytes());
    sys::ibv_gid { raw }
}

/// An IPv4 address as a.b.c.d.
pub fn ipv4(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// A port's rate from ibv_port_attr's width and speed codes.
fn line_rate(width: u8, speed: u8) -> u64 {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 1,
    };
    let per_lane: u64 = match speed {
        1 => 2_500_000_000,
        2 => 5_000_000_000,
        4 | 8 => 10_000_000_000,
        16 => 14_000_000_000,
        32 => 25_000_000_000,
        64 => 50_000_000_000,
        128 => 100_000_000_000,
        _ => 10_000_000_000,
    };
    lanes * per_lane
}

/// Whether the context is an mlx5 device (`mlx5dv_query_device` answers only for those; without
/// libmlx5, or on rxe, it fails with EOPNOTSUPP).
///
/// # Safety
/// `c` is an open device context.
unsafe fn is_mlx5(c: *mut sys::ibv_context) -> bool {
    let mut dv: sys::mlx5dv_context = std::mem::zeroed();
    sys::mlx5dv_query_device(c, &mut dv) == 0
}

/// The flow label whose RoCEv2 UDP source port (rdma_flow_label_to_udp_sport, as mlx5 derives
/// it) is `sport` (ports 0xC000-0xFFFF).
pub fn flow_label_for_sport(sport: u16) -> u32 {
    (sport & 0x3fff) as u32
}

impl Nic {
    /// Opens device `name` (None: the first one), port 1.
    pub fn open(name: Option<&str>) -> Result<Nic, OpenError> {
        Self::open_with(name, None)
    }

    /// Opens device `name` with GID table entry `gid` as the host's primary address (the
    /// first of `caps().local_addrs`; perftest's `-x`).
    pub fn open_with(name: Option<&str>, gid: Option<u8>) -> Result<Nic, OpenError> {
        let mut nic = Self::open_device(name)?;
        if let Some(g) = gid {
            let Some(i) = nic.gid_index.iter().position(|&x| x == g) else {
                return Err(OpenError(format!(
                    "GID index {g} of {} is not a RoCEv2 IPv4 entry (usable: {:?})",
                    nic.name, nic.gid_index
                )));
            };
            nic.gid_index.swap(0, i);
            nic.caps.local_addrs.swap(0, i);
        }
        Ok(nic)
    }

    /// The GID table index of the primary address.
    pub fn gid_index(&self) -> u8 {
        self.gid_index[0]
    }

    fn open_device(name: Option<&str>) -> Result<Nic, OpenError> {
        if !libibverbs_present() {
            return Err(OpenError(
                "libibverbs.so.1 cannot be loaded: install rdma-core's libibverbs1 and ibverbs-providers (apt-get install ibverbs-providers)".into(),
            ));
        }
        // SAFETY: plain ibverbs calls; every pointer is checked before use.
        unsafe {
            let mut n = 0;
            let list = sys::ibv_get_device_list(&mut n);
            if list.is_null() {
                return Err(OpenError(format!(
                    "no RDMA device: ibv_get_device_list failed ({}); the kernel has no RDMA support loaded (for Soft-RoCE: modprobe rdma_rxe, then `rdma link add rxe0 type rxe netdev eth0`)",
                    errno()
                )));
            }
            let mut names = Vec::new();
            let mut chosen = None;
            for i in 0..n as usize {
                let d = *list.add(i);
                let dn = CStr::from_ptr(sys::ibv_get_device_name(d))
                    .to_string_lossy()
                    .into_owned();
                if chosen.is_none() && name.is_none_or(|w| w == dn) {
                    chosen = Some((d, dn.clone()));
                }
                names.push(dn);
            }
            let Some((dev, dn)) = chosen else {
                sys::ibv_free_device_list(list);
                return Err(OpenError(match name {
                    Some(w) => format!(
                        "no RDMA device named {w:?} (devices: {})",
                        if names.is_empty() { "none".into() } else { names.join(", ") }
                    ),
                    None => "no RDMA device: for Soft-RoCE load rdma_rxe and run `rdma link add rxe0 type rxe netdev eth0`".into(),
                }));
            };
            let ctx = sys::ibv_open_device(dev);
            sys::ibv_free_device_list(list);
            let ctx = NonNull::new(ctx)
                .ok_or_else(|| OpenError(format!("ibv_open_device({dn}): {}", errno())))?;
            Self::setup(ctx, dn).inspect_err(|_| {
                sys::ibv_close_device(ctx.as_ptr());
            })
        }
    }

    unsafe fn setup(ctx: NonNull<sys::ibv_context>, name: String) -> Result<Nic, OpenError> {
        let c = ctx.as_ptr();
        let mut dattr: sys::ibv_device_attr = std::mem::zeroed();
        if sys::ibv_query_device(c, &mut dattr) != 0 {
            return Err(OpenError(format!("ibv_query_device({name}): {}", errno())));
        }
        let port = 1u8;
        let mut pattr: sys::ibv_port_attr = std::mem::zeroed();
        if sys::ibv_query_port(c, port, &mut pattr) != 0 {
            return Err(OpenError(format!("ibv_query_port({name}, 1): {}", errno())));
        }
        if pattr.state != IBV_PORT_ACTIVE {
            return Err(OpenError(format!(
                "{name} port 1 is not active (state {}): is its netdev up?",
                pattr.state
            )));
        }
        let (mut addrs, mut idx) = (Vec::new(), Vec::new());
        for i in 0..pattr.gid_tbl_len.clamp(0, 255) {
            let mut gid: sys::ibv_gid = std::mem::zeroed();
            if sys::ibv_query_gid(c, port, i, &mut gid) != 0 {
                continue;
            }
            let mut ty: sys::ibv_gid_type_sysfs = 0;
            if sys::ibv_query_gid_type(c, port, i as u32, &mut ty) != 0
                || ty != IBV_GID_TYPE_SYSFS_ROCE_V2
            {
                continue;
            }
            if let Some(a) = ipv4_of_gid(&gid.raw) {
                if !addrs.contains(&a) {
                    addrs.push(a);
                    idx.push(i as u8);
                }
            }
        }
        if addrs.is_empty() {
            return Err(OpenError(format!(
                "{name} port 1 has no RoCEv2 GID with an IPv4 address: give its netdev an IPv4 address"
            )));
        }
        let pd = NonNull::new(sys::ibv_alloc_pd(c))
            .ok_or_else(|| OpenError(format!("ibv_alloc_pd: {}", errno())))?;
        let channel = match NonNull::new(sys::ibv_create_comp_channel(c)) {
            Some(ch) => ch,
            None => {
                sys::ibv_dealloc_pd(pd.as_ptr());
                return Err(OpenError(format!("ibv_create_comp_channel: {}", errno())));
            }
        };
        let fd = (*channel.as_ptr()).fd;
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        let caps = Caps {
            // Upstream rdma-core has no WAIT/SEND_ENABLE/RECV_ENABLE verbs (they were MLNX_OFED's
            // experimental verbs, ibv_exp_*), and this backend posts through ibv_post_send only:
            // whatever the deprecated IB_DEVICE_CROSS_CHANNEL bit says (mlx5 no longer reports
            // it), the stack cannot run them. See docs/rdma.md.
            cross_channel: false,
            local_addrs: addrs,
            // A connected QP's RoCEv2 UDP source port can be set only through mlx5's direct
            // verb (`mlx5dv_modify_qp_udp_sport(3)`: RC/UC QPs in RTS); rxe and the other
            // providers derive it from the QPN (and the flow label) themselves.
            sport_control: is_mlx5(c),
            data_tracking: true,
            mtu: mtu_bytes(pattr.active_mtu),
            line_rate_bps: line_rate(pattr.active_width, pattr.active_speed),
            max_qp_wr: dattr.max_qp_wr.max(1) as u32,
        };
        Ok(Nic {
            ctx,
            pds: HashMap::from([((AGENT, DEFAULT_PD), pd)]),
            next_pd: DEFAULT_PD + 1,
            channel,
            port,
            name,
            caps,
            gid_index: idx,
            max_cqe: dattr.max_cqe.max(1),
            cqs: Vec::new(),
            qps: HashMap::new(),
            mrs: HashMap::new(),
            ahs: HashMap::new(),
            mem: HashMap::new(),
            shares: ShareSlot::default(),
            epoch: Instant::now(),
            pending: Pending::default(),
            soft_notify: false,
            errors: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    /// The host agent's grants of its memory to tenants (for [`braid_verbs::HostCtx`]).
    pub fn agent_shares(&self) -> ShareSlot {
        self.shares.clone()
    }
    pub fn caps(&self) -> &Caps {
        &self.caps
    }
    /// The first error completions seen (at most 16), one line each: QP, wr_id, status and the
    /// opcode of the request it retired.
    pub fn error_completions(&self) -> &[String] {
        &self.errors
    }
    /// The completion channel's file descriptor (non-blocking).
    pub fn event_fd(&self) -> i32 {
        // SAFETY: the channel lives as long as self.
        unsafe { (*self.channel.as_ptr()).fd }
    }
    /// Picoseconds since the device was opened (a monotonic clock).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 * 1000
    }

    /// The CQs with a pending completion event (the channel drained; events acknowledged).
    pub fn take_cq_events(&mut self) -> Vec<(TenantId, CqId)> {
        let mut out = Vec::new();
        loop {
            let mut cq: *mut sys::ibv_cq = null_mut();
            let mut cctx: *mut libc::c_void = null_mut();
            // SAFETY: the channel is valid; non-blocking, so this returns -1 when empty.
            let r = unsafe { sys::ibv_get_cq_event(self.channel.as_ptr(), &mut cq, &mut cctx) };
            if r != 0 {
                return out;
            }
            // SAFETY: cq came from the channel.
            unsafe { sys::ibv_ack_cq_events(cq, 1) };
            let id = cctx as usize as CqId;
            if let Some(Some(c)) = self.cqs.get(id as usize) {
                if c.cq.as_ptr() == cq {
                    out.push((c.owner, id));
                }
            }
        }
    }

    fn own_cq(&self, t: TenantId, cq: CqId) -> Result<NonNull<sys::ibv_cq>, VerbsError> {
        match self.cqs.get(cq as usize) {
            Some(Some(c)) if c.owner == t => Ok(c.cq),
            _ => Err(VerbsError::NoSuchCq(cq)),
        }
    }
    fn own_qp(&mut self, t: TenantId, qp: QpNum) -> Result<&mut Qp, VerbsError> {
        match self.qps.get_mut(&qp) {
            Some(q) if q.owner == t => Ok(q),
            _ => Err(VerbsError::NoSuchQp(qp)),
        }
    }
    /// The ibv_pd of tenant `t`'s protection domain `pd` (its default one allocated now if it
    /// has none yet).
    fn ibv_pd(&mut self, t: TenantId, pd: PdId) -> Result<NonNull<sys::ibv_pd>, VerbsError> {
        if let Some(&p) = self.pds.get(&(t, pd)) {
            return Ok(p);
        }
        if pd != DEFAULT_PD {
            return Err(VerbsError::InvalidArgument(
                "pd: no such protection domain of this tenant (alloc_pd)",
            ));
        }
        // SAFETY: a valid context.
        let p = NonNull::new(unsafe { sys::ibv_alloc_pd(self.ctx.as_ptr()) })
            .ok_or(VerbsError::InvalidArgument("ibv_alloc_pd failed"))?;
        self.pds.insert((t, pd), p);
        Ok(p)
    }

    pub fn alloc_pd(&mut self, t: TenantId) -> Result<PdId, VerbsError> {
        // SAFETY: a valid context.
        let p = NonNull::new(unsafe { sys::ibv_alloc_pd(self.ctx.as_ptr()) })
            .ok_or(VerbsError::InvalidArgument("ibv_alloc_pd failed"))?;
        let pd = self.next_pd;
        self.next_pd += 1;
        self.pds.insert((t, pd), p);
        Ok(pd)
    }

    /// ibv_dealloc_pd; EBUSY (InvalidState) while a QP or region of the tenant is in it.
    pub fn dealloc_pd(&mut self, t: TenantId, pd: PdId) -> Result<(), VerbsError> {
        if pd == DEFAULT_PD {
            return Err(VerbsError::InvalidState(
                "the default protection domain lives as long as the tenant",
            ));
        }
        let p = *self.pds.get(&(t, pd)).ok_or(VerbsError::InvalidArgument(
            "pd: no such protection domain of this tenant (alloc_pd)",
        ))?;
        let busy = self.qps.values().any(|q| q.owner == t && q.init.pd == pd)
            || self.mrs.values().any(|m| m.owner == t && m.pd == pd);
        if busy {
            return Err(VerbsError::InvalidState(
                "protection domain still used by a QP or memory region (EBUSY)",
            ));
        }
        // Address handles live in their PD: release this one's first.
        let key = p.as_ptr() as usize;
        let ahs: Vec<_> = self.ahs.keys().filter(|k| k.0 == key).copied().collect();
        for k in ahs {
            if let Some(a) = self.ahs.remove(&k) {
                // SAFETY: an AH we created, used by no QP of a PD that has none.
                unsafe { sys::ibv_destroy_ah(a.as_ptr()) };
            }
        }
        // SAFETY: a PD we allocated, with nothing left in it.
        if unsafe { sys::ibv_dealloc_pd(p.as_ptr()) } != 0 {
            return Err(VerbsError::InvalidState(
                "ibv_dealloc_pd failed (still in use)",
            ));
        }
        self.pds.remove(&(t, pd));
        Ok(())
    }

    fn own_lkey(&self, t: TenantId, lkey: u32) -> Result<(), VerbsError> {
        match self.mrs.get(&lkey) {
            Some(m) if m.owner == t => Ok(()),
            _ => Err(VerbsError::BadKey(lkey)),
        }
    }

    pub fn create_cq(&mut self, t: TenantId, depth: u32) -> Result<CqId, VerbsError> {
        let id = self
            .cqs
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.cqs.len());
        let depth = (depth.max(1) as i64).min(self.max_cqe as i64) as i32;
        // SAFETY: valid context and channel; the CQ context carries our id.
        let cq = unsafe {
            sys::ibv_create_cq(
                self.ctx.as_ptr(),
                depth,
                id as *mut libc::c_void,
                self.channel.as_ptr(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or(VerbsError::InvalidArgument("ibv_create_cq failed"))?;
        if id == self.cqs.len() {
            self.cqs.push(None);
        }
        self.cqs[id] = Some(Cq {
            cq,
            owner: t,
            armed: false,
            stash: VecDeque::new(),
        });
        Ok(id as CqId)
    }

    pub fn destroy_cq(&mut self, t: TenantId, cq: CqId) -> Result<(), VerbsError> {
        let p = self.own_cq(t, cq)?;
        if self
            .qps
            .values()
            .any(|q| q.init.send_cq == cq || q.init.recv_cq == cq)
        {
            return Err(VerbsError::InvalidState("CQ still used by a QP"));
        }
        // SAFETY: a CQ we created and no QP uses.
        if unsafe { sys::ibv_destroy_cq(p.as_ptr()) } != 0 {
            return Err(VerbsError::InvalidState("ibv_destroy_cq failed"));
        }
        self.cqs[cq as usize] = None;
        Ok(())
    }

    pub fn req_notify_cq(&mut self, t: TenantId, cq: CqId) -> Result<(), VerbsError> {
        let p = self.own_cq(t, cq)?;
        if self.soft_notify {
            self.cqs[cq as usize].as_mut().expect("owned").armed = true;
            return Ok(());
        }
        // SAFETY: a valid CQ.
        match unsafe { sys::ibv_req_notify_cq(p.as_ptr(), 0) } {
            0 => Ok(()),
            _ => Err(VerbsError::InvalidState("ibv_req_notify_cq failed")),
        }
    }

    /// Busy polling: the armed CQs that have a completion now (each polled one entry ahead
    /// into its stash and disarmed), as a completion channel would report them. Used instead of
    /// [`Nic::take_cq_events`] when [`Nic::soft_notify`] is on.
    pub fn take_soft_events(&mut self) -> Vec<(TenantId, CqId)> {
        let mut out = Vec::new();
        for id in 0..self.cqs.len() {
            let Some(c) = self.cqs[id].as_ref() else {
                continue;
            };
            if !c.armed {
                continue;
            }
            if c.stash.is_empty() {
                // SAFETY: a zeroed ibv_wc is valid; room for one entry.
                let mut w: sys::ibv_wc = unsafe { std::mem::zeroed() };
                if unsafe { sys::ibv_poll_cq(c.cq.as_ptr(), 1, &mut w) } != 1 {
                    continue;
                }
                // A completion of a request no QP has any more (reset) is not reported.
                let Some(wc) = self.convert(&w) else { continue };
                self.cqs[id].as_mut().expect("present").stash.push_back(wc);
            }
            let c = self.cqs[id].as_mut().expect("present");
            c.armed = false;
            out.push((c.owner, id as CqId));
        }
        out
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        // SAFETY: destroying what we created, children first.
        unsafe {
            for (_, q) in self.qps.drain() {
                sys::ibv_destroy_qp(q.qp.as_ptr());
                if let Some((mr, _, _)) = q.grh {
                    sys::ibv_dereg_mr(mr.as_ptr());
                }
            }
            for (_, a) in self.ahs.drain() {
                sys::ibv_destroy_ah(a.as_ptr());
            }
            for c in self.cqs.drain(..).flatten() {
                sys::ibv_destroy_cq(c.cq.as_ptr());
            }
            for (_, m) in self.mrs.drain() {
                sys::ibv_dereg_mr(m.mr.as_ptr());
            }
            sys::ibv_destroy_comp_channel(self.channel.as_ptr());
            for (_, pd) in self.pds.drain() {
                sys::ibv_dealloc_pd(pd.as_ptr());
            }
            sys::ibv_close_device(self.ctx.as_ptr());
        }
    }
}
