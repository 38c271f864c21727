//! One RDMA device opened through rdma-core: its PD, completion channel and the ibverbs
//! objects the host's tenants create, with the seam's ownership rules.

use super::consts::*;
use crate::memory::Memory;
use braid_verbs::*;
use rdma_mummy_sys as sys;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::ptr::{null_mut, NonNull};
use std::time::Instant;

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
    init: QpInit,
    remote: Option<RemoteQp>,
    flow_label: u32,
    /// Send WRs posted and not yet completed: (wr_id, signaled, opcode).
    sends: VecDeque<(u64, bool, WcOpcode)>,
    /// Receives posted and not yet completed: (wr_id, GRH slot for UD).
    recvs: VecDeque<(u64, u64)>,
    grh_next: u64,
    /// UD: where its receives put their 40-byte GRH (hidden from the seam): the registered
    /// area and its number of slots.
    grh: Option<(NonNull<sys::ibv_mr>, Vec<u8>, u64)>,
}

struct Mr {
    mr: NonNull<sys::ibv_mr>,
    owner: TenantId,
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
    pd: NonNull<sys::ibv_pd>,
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
    ahs: HashMap<(u32, u8, u32), NonNull<sys::ibv_ah>>,
    mem: Memory,
    epoch: Instant,
    pub(crate) pending: Pending,
    /// Notifications of armed CQs come from polling them (busy mode), not from the completion
    /// channel: set by [`crate::real::host::Host`] when it busy-polls.
    pub soft_notify: bool,
}

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
            cross_channel: dattr.device_cap_flags & IBV_DEVICE_CROSS_CHANNEL != 0,
            local_addrs: addrs,
            // rxe derives the UDP source port from the QPN, not the flow label; only NICs that
            // hash the flow label (mlx5) would honour it.
            sport_control: false,
            data_tracking: true,
            mtu: mtu_bytes(pattr.active_mtu),
            line_rate_bps: line_rate(pattr.active_width, pattr.active_speed),
            max_qp_wr: dattr.max_qp_wr.max(1) as u32,
        };
        Ok(Nic {
            ctx,
            pd,
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
            mem: Memory::default(),
            epoch: Instant::now(),
            pending: Pending::default(),
            soft_notify: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn caps(&self) -> &Caps {
        &self.caps
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
                let wc = self.convert(&w);
                self.cqs[id].as_mut().expect("present").stash.push_back(wc);
            }
            let c = self.cqs[id].as_mut().expect("present");
            c.armed = false;
            out.push((c.owner, id as CqId));
        }
        out
    }

    fn modify(
        &self,
        qp: NonNull<sys::ibv_qp>,
        attr: &mut sys::ibv_qp_attr,
        mask: i32,
    ) -> Result<(), VerbsError> {
        // SAFETY: a valid QP and attribute block.
        let r = unsafe { sys::ibv_modify_qp(qp.as_ptr(), attr, mask) };
        if r != 0 {
            return Err(VerbsError::InvalidState(
                "ibv_modify_qp refused the transition",
            ));
        }
        Ok(())
    }

    fn to_init(&self, qp: NonNull<sys::ibv_qp>, ty: QpType) -> Result<(), VerbsError> {
        // SAFETY: zeroed is a valid ibv_qp_attr.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.port;
        let mut mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        match ty {
            QpType::Ud => {
                a.qkey = QKEY;
                mask |= IBV_QP_QKEY;
            }
            QpType::Rc => {
                a.qp_access_flags =
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
                mask |= IBV_QP_ACCESS_FLAGS;
            }
            QpType::Uc => {
                a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
                mask |= IBV_QP_ACCESS_FLAGS;
            }
        }
        self.modify(qp, &mut a, mask)
    }

    pub fn create_qp(&mut self, t: TenantId, init: &QpInit) -> Result<QpNum, VerbsError> {
        let scq = self.own_cq(t, init.send_cq)?;
        let rcq = self.own_cq(t, init.recv_cq)?;
        if init.is_cross_channel() && !self.caps.cross_channel {
            return Err(VerbsError::Unsupported(
                "cross-channel QPs (WAIT/SEND_ENABLE/RECV_ENABLE): this device's capabilities lack CROSS_CHANNEL (Soft-RoCE has none)",
            ));
        }
        if init.local_addr as usize >= self.caps.local_addrs.len() {
            return Err(VerbsError::InvalidArgument(
                "local_addr is not an index of caps().local_addrs",
            ));
        }
        let ud = init.qp_type == QpType::Ud;
        // SAFETY: zeroed is a valid ibv_qp_init_attr.
        let mut ia: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        ia.send_cq = scq.as_ptr();
        ia.recv_cq = rcq.as_ptr();
        let max = self.caps.max_qp_wr;
        ia.cap.max_send_wr = init.max_send_wr.clamp(1, max);
        ia.cap.max_recv_wr = init.max_recv_wr.clamp(1, max);
        ia.cap.max_send_sge = 4;
        ia.cap.max_recv_sge = if ud { 5 } else { 4 };
        ia.cap.max_inline_data = 128;
        ia.qp_type = match init.qp_type {
            QpType::Rc => IBV_QPT_RC,
            QpType::Uc => IBV_QPT_UC,
            QpType::Ud => IBV_QPT_UD,
        };
        ia.sq_sig_all = init.sq_sig_all as i32;
        // SAFETY: valid PD and attributes.
        let qp = unsafe { sys::ibv_create_qp(self.pd.as_ptr(), &mut ia) };
        let qp = NonNull::new(qp).ok_or(VerbsError::InvalidArgument("ibv_create_qp failed"))?;
        if let Err(e) = self.to_init(qp, init.qp_type) {
            // SAFETY: just created.
            unsafe { sys::ibv_destroy_qp(qp.as_ptr()) };
            return Err(e);
        }
        let grh = if ud {
            match self.grh_area(ia.cap.max_recv_wr as u64) {
                Ok(g) => Some(g),
                Err(e) => {
                    // SAFETY: just created.
                    unsafe { sys::ibv_destroy_qp(qp.as_ptr()) };
                    return Err(e);
                }
            }
        } else {
            None
        };
        // SAFETY: valid QP.
        let qpn = unsafe { (*qp.as_ptr()).qp_num };
        self.qps.insert(
            qpn,
            Qp {
                qp,
                owner: t,
                init: init.clone(),
                remote: None,
                flow_label: 0,
                sends: VecDeque::new(),
                recvs: VecDeque::new(),
                grh_next: 0,
                grh,
            },
        );
        Ok(qpn)
    }

    /// A registered area for `slots` receive GRHs.
    fn grh_area(&mut self, slots: u64) -> Result<(NonNull<sys::ibv_mr>, Vec<u8>, u64), VerbsError> {
        let mut buf = vec![0u8; (slots.max(1) * GRH_BYTES as u64) as usize];
        // SAFETY: registering our own buffer, which lives with the MR in the QP's record.
        let mr = unsafe {
            sys::ibv_reg_mr(
                self.pd.as_ptr(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                IBV_ACCESS_LOCAL_WRITE as i32,
            )
        };
        let mr =
            NonNull::new(mr).ok_or(VerbsError::InvalidArgument("ibv_reg_mr (GRH area) failed"))?;
        Ok((mr, buf, slots.max(1)))
    }

    fn ah_attr(&self, host: u32, local_addr: u8, flow_label: u32, tc: u8) -> sys::ibv_ah_attr {
        // SAFETY: zeroed is a valid ibv_ah_attr.
        let mut ah: sys::ibv_ah_attr = unsafe { std::mem::zeroed() };
        ah.is_global = 1;
        ah.port_num = self.port;
        ah.grh.dgid = gid_of_ipv4(host);
        ah.grh.sgid_index = self.gid_index[local_addr as usize];
        ah.grh.hop_limit = 64;
        ah.grh.flow_label = flow_label;
        ah.grh.traffic_class = tc;
        ah.sl = tc & 7;
        ah
    }

    pub fn connect_qp(
        &mut self,
        t: TenantId,
        qpn: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let (qp, init) = {
            let q = self.own_qp(t, qpn)?;
            (q.qp, q.init.clone())
        };
        let state = self.state(qp)?;
        if state == QpState::Reset {
            self.to_init(qp, init.qp_type)?;
        } else if state != QpState::Init {
            return Err(VerbsError::InvalidState(
                "connect_qp needs a QP in Init or Reset (modify it to Reset first)",
            ));
        }
        let fl = remote.udp_sport.map(flow_label_for_sport).unwrap_or(0);
        let tc = init.priority.unwrap_or(0);
        // SAFETY: zeroed is a valid ibv_qp_attr.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = IBV_QPS_RTR;
        let mut mask = IBV_QP_STATE;
        if init.qp_type != QpType::Ud {
            a.path_mtu = match self.caps.mtu {
                256 => 1,
                512 => 2,
                1024 => 3,
                2048 => 4,
                _ => 5,
            };
            a.dest_qp_num = remote.qpn;
            a.rq_psn = 0;
            a.ah_attr = self.ah_attr(remote.host, init.local_addr, fl, tc);
            mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
            if init.qp_type == QpType::Rc {
                a.max_dest_rd_atomic = 16;
                a.min_rnr_timer = 1; // 0.01 ms
                mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
            }
        }
        self.modify(qp, &mut a, mask)?;
        // SAFETY: as above.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        let mut mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if init.qp_type == QpType::Rc {
            a.timeout = 14; // 4.096 us * 2^14 = 67 ms
            a.retry_cnt = init.retry_cnt.min(7);
            a.rnr_retry = init.rnr_retry.min(7);
            a.max_rd_atomic = 16;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        self.modify(qp, &mut a, mask)?;
        let q = self.qps.get_mut(&qpn).expect("owned");
        q.remote = (init.qp_type != QpType::Ud).then_some(remote);
        q.flow_label = fl;
        Ok(())
    }

    fn state(&self, qp: NonNull<sys::ibv_qp>) -> Result<QpState, VerbsError> {
        // SAFETY: zeroed attribute blocks; a valid QP.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        let mut ia: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        if unsafe { sys::ibv_query_qp(qp.as_ptr(), &mut a, IBV_QP_STATE, &mut ia) } != 0 {
            return Err(VerbsError::InvalidState("ibv_query_qp failed"));
        }
        Ok(match a.qp_state {
            IBV_QPS_RESET => QpState::Reset,
            IBV_QPS_INIT => QpState::Init,
            IBV_QPS_RTR => QpState::Rtr,
            IBV_QPS_RTS => QpState::Rts,
            _ => QpState::Error,
        })
    }

    pub fn modify_qp(&mut self, t: TenantId, qpn: QpNum, m: QpModify) -> Result<(), VerbsError> {
        let qp = self.own_qp(t, qpn)?.qp;
        // SAFETY: as above.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        match m {
            QpModify::Error => {
                a.qp_state = IBV_QPS_ERR;
                self.modify(qp, &mut a, IBV_QP_STATE)
            }
            QpModify::Reset => {
                a.qp_state = IBV_QPS_RESET;
                self.modify(qp, &mut a, IBV_QP_STATE)?;
                let q = self.qps.get_mut(&qpn).expect("owned");
                q.remote = None;
                q.sends.clear();
                q.recvs.clear();
                Ok(())
            }
            QpModify::UdpSport(_) => Err(VerbsError::Unsupported(
                "changing the UDP source port of a connected QP (this NIC derives it from the QPN: caps().sport_control is false)",
            )),
        }
    }

    pub fn query_qp(&mut self, t: TenantId, qpn: QpNum) -> Result<QpAttr, VerbsError> {
        let (qp, init, remote, outstanding) = {
            let q = self.own_qp(t, qpn)?;
            (q.qp, q.init.clone(), q.remote, q.sends.len() as u32)
        };
        let state = self.state(qp)?;
        Ok(QpAttr {
            qpn,
            qp_type: init.qp_type,
            state,
            local_addr: self.caps.local_addrs[init.local_addr as usize],
            udp_sport: 0,
            remote: if state == QpState::Rts { remote } else { None },
            retry_cnt: init.retry_cnt,
            rnr_retry: init.rnr_retry,
            cross_channel: false,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            send_outstanding: outstanding,
        })
    }

    pub fn destroy_qp(&mut self, t: TenantId, qpn: QpNum) -> Result<(), VerbsError> {
        let qp = self.own_qp(t, qpn)?.qp;
        // SAFETY: a QP we created.
        if unsafe { sys::ibv_destroy_qp(qp.as_ptr()) } != 0 {
            return Err(VerbsError::InvalidState("ibv_destroy_qp failed"));
        }
        if let Some(q) = self.qps.remove(&qpn) {
            if let Some((mr, _, _)) = q.grh {
                // SAFETY: the QP is gone; nothing uses its GRH area.
                unsafe { sys::ibv_dereg_mr(mr.as_ptr()) };
            }
        }
        Ok(())
    }

    pub fn reg_mr(
        &mut self,
        t: TenantId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let real = self
            .mem
            .acquire(addr, len)
            .map_err(VerbsError::InvalidArgument)?;
        let mut flags = 0;
        if access.local_write {
            flags |= IBV_ACCESS_LOCAL_WRITE;
        }
        if access.remote_write {
            flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
        }
        if access.remote_read {
            flags |= IBV_ACCESS_REMOTE_READ;
        }
        // SAFETY: real..real+len is memory we own; the IOVA is the seam address.
        let mr = unsafe {
            sys::ibv_reg_mr_iova(
                self.pd.as_ptr(),
                real as *mut libc::c_void,
                len.max(1) as usize,
                addr,
                flags as i32,
            )
        };
        let Some(mr) = NonNull::new(mr) else {
            self.mem.release(addr, len);
            return Err(VerbsError::InvalidArgument("ibv_reg_mr_iova failed"));
        };
        // SAFETY: a valid MR.
        let (lkey, rkey) = unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
        self.mrs.insert(
            lkey,
            Mr {
                mr,
                owner: t,
                addr,
                len,
            },
        );
        Ok(MemoryRegion {
            addr,
            len,
            lkey,
            rkey,
        })
    }

    pub fn dereg_mr(&mut self, t: TenantId, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.own_lkey(t, mr.lkey)?;
        let m = self.mrs.remove(&mr.lkey).expect("owned");
        // SAFETY: an MR we registered.
        unsafe { sys::ibv_dereg_mr(m.mr.as_ptr()) };
        self.mem.release(m.addr, m.len);
        Ok(())
    }

    fn ah(&mut self, host: u32, local_addr: u8, tc: u8) -> Result<*mut sys::ibv_ah, VerbsError> {
        if let Some(a) = self.ahs.get(&(host, local_addr, tc as u32)) {
            return Ok(a.as_ptr());
        }
        let mut attr = self.ah_attr(host, local_addr, 0, tc);
        // SAFETY: valid PD and attributes.
        let ah = NonNull::new(unsafe { sys::ibv_create_ah(self.pd.as_ptr(), &mut attr) }).ok_or(
            VerbsError::InvalidArgument("ibv_create_ah failed (unreachable address?)"),
        )?;
        self.ahs.insert((host, local_addr, tc as u32), ah);
        Ok(ah.as_ptr())
    }

    /// ibv_post_send of `wrs` as one list (one doorbell).
    pub fn post_send_list(&mut self, t: TenantId, qpn: QpNum, wrs: &[SendWr]) -> Result<(), BadWr> {
        if wrs.is_empty() {
            return Ok(());
        }
        let bad0 = |error| BadWr { index: 0, error };
        let (qp, init) = {
            let q = self.own_qp(t, qpn).map_err(bad0)?;
            (q.qp, q.init.clone())
        };
        let mut sges: Vec<Vec<sys::ibv_sge>> = Vec::with_capacity(wrs.len());
        let mut raw: Vec<sys::ibv_send_wr> = Vec::with_capacity(wrs.len());
        for (index, wr) in wrs.iter().enumerate() {
            let bad = |error| BadWr { index, error };
            let opcode = match (wr.op, init.qp_type) {
                (SendOp::Send, _) => IBV_WR_SEND,
                (SendOp::SendWithImm(_), _) => IBV_WR_SEND_WITH_IMM,
                (_, QpType::Ud) => return Err(bad(VerbsError::InvalidWr("UD QPs only SEND"))),
                (SendOp::Write, _) => IBV_WR_RDMA_WRITE,
                (SendOp::WriteWithImm(_), _) => IBV_WR_RDMA_WRITE_WITH_IMM,
                (SendOp::Read, QpType::Uc) => {
                    return Err(bad(VerbsError::InvalidWr("UC QPs cannot READ")))
                }
                (SendOp::Read, _) => IBV_WR_RDMA_READ,
                (
                    SendOp::Wait { .. } | SendOp::SendEnable { .. } | SendOp::RecvEnable { .. },
                    _,
                ) => {
                    return Err(bad(VerbsError::Unsupported(
                        "cross-channel WAIT/SEND_ENABLE/RECV_ENABLE on this device",
                    )))
                }
                (SendOp::Nop, _) => {
                    return Err(bad(VerbsError::Unsupported(
                        "NOP work requests through ibv_post_send",
                    )))
                }
            };
            if !wr.inline {
                for s in &wr.sg_list {
                    if s.length > 0 {
                        self.own_lkey(t, s.lkey).map_err(bad)?;
                    }
                }
            }
            let mut list = Vec::with_capacity(wr.sg_list.len());
            for s in &wr.sg_list {
                if s.length == 0 {
                    continue;
                }
                // Inline data is read by the CPU at post time: from the real bytes.
                let addr = if wr.inline {
                    self.mem.real(s.addr, s.length as u64).ok_or_else(|| {
                        bad(VerbsError::InvalidArgument(
                            "inline data outside registered memory",
                        ))
                    })? as u64
                } else {
                    s.addr
                };
                list.push(sys::ibv_sge {
                    addr,
                    length: s.length,
                    lkey: s.lkey,
                });
            }
            let mut flags = 0;
            if wr.signaled || init.sq_sig_all {
                flags |= IBV_SEND_SIGNALED;
            }
            if wr.inline {
                flags |= IBV_SEND_INLINE;
            }
            if wr.fence {
                flags |= IBV_SEND_FENCE;
            }
            let imm = match wr.op {
                SendOp::SendWithImm(i) | SendOp::WriteWithImm(i) => i.to_be(),
                _ => 0,
            };
            // SAFETY: zeroed is a valid ibv_send_wr (null pointers, zero counts).
            let mut w: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
            w.wr_id = wr.wr_id;
            w.num_sge = list.len() as i32;
            w.opcode = opcode;
            w.send_flags = flags;
            w.imm_data_invalidated_rkey_union.imm_data = imm;
            if init.qp_type == QpType::Ud {
                let d = wr
                    .ud_dest
                    .ok_or_else(|| bad(VerbsError::InvalidWr("UD send needs ud_dest")))?;
                let ah = self
                    .ah(d.host, init.local_addr, init.priority.unwrap_or(0))
                    .map_err(bad)?;
                w.wr.ud = sys::ud_t {
                    ah,
                    remote_qpn: d.qpn,
                    remote_qkey: QKEY,
                };
            } else {
                w.wr.rdma = sys::rdma_t {
                    remote_addr: wr.remote_addr,
                    rkey: wr.rkey,
                };
            }
            sges.push(list);
            raw.push(w);
        }
        for i in 0..raw.len() {
            raw[i].sg_list = if sges[i].is_empty() {
                null_mut()
            } else {
                sges[i].as_mut_ptr()
            };
            let next = if i + 1 < raw.len() {
                &mut raw[i + 1] as *mut _
            } else {
                null_mut()
            };
            raw[i].next = next;
        }
        let mut bad: *mut sys::ibv_send_wr = null_mut();
        // SAFETY: a valid QP and a well-formed list whose SGEs outlive the call.
        let r = unsafe { sys::ibv_post_send(qp.as_ptr(), raw.as_mut_ptr(), &mut bad) };
        let posted = if r == 0 {
            raw.len()
        } else if bad.is_null() {
            0
        } else {
            // SAFETY: bad points into raw.
            unsafe { bad.offset_from(raw.as_ptr()) as usize }
        };
        let q = self.qps.get_mut(&qpn).expect("owned");
        for (w, wr) in raw[..posted].iter().zip(wrs) {
            let op = match wr.op {
                SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
                SendOp::Read => WcOpcode::Read,
                _ => WcOpcode::Send,
            };
            q.sends
                .push_back((wr.wr_id, w.send_flags & IBV_SEND_SIGNALED != 0, op));
        }
        if r != 0 {
            return Err(BadWr {
                index: posted,
                error: if r == libc::ENOMEM {
                    VerbsError::QueueFull
                } else {
                    VerbsError::InvalidState("ibv_post_send refused the work request")
                },
            });
        }
        Ok(())
    }

    pub fn post_recv(&mut self, t: TenantId, qpn: QpNum, wr: &RecvWr) -> Result<(), VerbsError> {
        for s in &wr.sg_list {
            if s.length > 0 {
                self.own_lkey(t, s.lkey)?;
            }
        }
        let q = self.own_qp(t, qpn)?;
        let grh = q.grh.as_ref().map(|(mr, buf, n)| {
            // SAFETY: a valid MR.
            (unsafe { (*mr.as_ptr()).lkey }, buf.as_ptr() as u64, *n)
        });
        let mut list = Vec::with_capacity(wr.sg_list.len() + 1);
        let ud = q.init.qp_type == QpType::Ud;
        let slot = q.grh_next % grh.map_or(1, |g| g.2);
        if ud {
            let (lkey, base, _) = grh.expect("UD QPs have a GRH area");
            list.push(sys::ibv_sge {
                addr: base + slot * GRH_BYTES as u64,
                length: GRH_BYTES,
                lkey,
            });
        }
        for s in wr.sg_list.iter().filter(|s| s.length > 0) {
            list.push(sys::ibv_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            });
        }
        // SAFETY: zeroed is a valid ibv_recv_wr.
        let mut w: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
        w.wr_id = wr.wr_id;
        w.num_sge = list.len() as i32;
        w.sg_list = if list.is_empty() {
            null_mut()
        } else {
            list.as_mut_ptr()
        };
        let mut bad = null_mut();
        // SAFETY: a valid QP and WR.
        let r = unsafe { sys::ibv_post_recv(q.qp.as_ptr(), &mut w, &mut bad) };
        if r != 0 {
            return Err(if r == libc::ENOMEM {
                VerbsError::QueueFull
            } else {
                VerbsError::InvalidState("ibv_post_recv refused the work request")
            });
        }
        if ud {
            q.grh_next += 1;
        }
        q.recvs.push_back((wr.wr_id, slot));
        Ok(())
    }

    pub fn poll_cq(
        &mut self,
        t: TenantId,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        let Ok(p) = self.own_cq(t, cq) else {
            return 0;
        };
        let mut n = 0;
        let stash = &mut self.cqs[cq as usize].as_mut().expect("owned").stash;
        while n < max {
            let Some(w) = stash.pop_front() else { break };
            out.push(w);
            n += 1;
        }
        let mut wcs: Vec<sys::ibv_wc> = Vec::with_capacity(max.min(256));
        while n < max {
            let k = (max - n).min(256);
            // SAFETY: room for k entries.
            let got = unsafe { sys::ibv_poll_cq(p.as_ptr(), k as i32, wcs.as_mut_ptr()) };
            if got <= 0 {
                break;
            }
            // SAFETY: the provider filled `got` entries.
            unsafe { wcs.set_len(got as usize) };
            for w in wcs.drain(..) {
                out.push(self.convert(&w));
                n += 1;
            }
            if (got as usize) < k {
                break;
            }
        }
        n
    }

    fn convert(&mut self, w: &sys::ibv_wc) -> WorkCompletion {
        let status = match w.status {
            IBV_WC_SUCCESS => WcStatus::Success,
            IBV_WC_LOC_LEN_ERR => WcStatus::LocalLengthError,
            IBV_WC_WR_FLUSH_ERR => WcStatus::Flushed,
            IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccessError,
            IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
            IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExceeded,
            s => WcStatus::Other(s),
        };
        let mut imm = (w.wc_flags & IBV_WC_WITH_IMM != 0)
            // SAFETY: the union's imm member is what WITH_IMM says is valid.
            .then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data }));
        let mut byte_len = w.byte_len as u64;
        let (mut src_host, mut src_qp) = (0, 0);
        let mut opcode = match w.opcode {
            IBV_WC_SEND => WcOpcode::Send,
            IBV_WC_RDMA_WRITE => WcOpcode::Write,
            IBV_WC_RDMA_READ => WcOpcode::Read,
            IBV_WC_RECV if imm.is_some() => WcOpcode::RecvWithImm,
            IBV_WC_RECV => WcOpcode::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvWithImm,
            _ => WcOpcode::Nop,
        };
        if let Some(q) = self.qps.get_mut(&w.qp_num) {
            let grh = q.grh.as_ref().map(|g| g.1.as_ptr());
            let ok = w.status == IBV_WC_SUCCESS;
            // An error completion's opcode is undefined in ibverbs: tell a send from a receive
            // by what was posted (a send's wr_id among the outstanding sends).
            let is_recv = if ok {
                w.opcode & IBV_WC_RECV != 0
            } else {
                !q.sends.iter().any(|s| s.0 == w.wr_id)
            };
            if !is_recv {
                // ibverbs defines imm_data for receive completions only (rxe also flags
                // the requester's completion of a *_WITH_IMM).
                imm = None;
            }
            if is_recv {
                let slot = q.recvs.pop_front().map(|r| r.1).unwrap_or(0);
                if !ok {
                    opcode = WcOpcode::Recv;
                } else if q.init.qp_type == QpType::Ud {
                    byte_len = byte_len.saturating_sub(GRH_BYTES as u64);
                    src_qp = w.src_qp;
                    if let Some(b) = grh {
                        // SAFETY: the slot lies inside the GRH buffer.
                        let g = unsafe {
                            std::slice::from_raw_parts(
                                b.add((slot * GRH_BYTES as u64) as usize),
                                GRH_BYTES as usize,
                            )
                        };
                        // RoCEv2 over IPv4: 20 bytes of zeros, then the IPv4 header (source
                        // address at its bytes 12..16). Otherwise a GRH: source GID at 8..24.
                        src_host = if g[20] >> 4 == 4 {
                            u32::from_be_bytes([g[32], g[33], g[34], g[35]])
                        } else {
                            let mut raw = [0u8; 16];
                            raw.copy_from_slice(&g[8..24]);
                            ipv4_of_gid(&raw).unwrap_or(0)
                        };
                    }
                } else if let Some(r) = q.remote {
                    src_host = r.host;
                    src_qp = r.qpn;
                }
            } else {
                // A send completion retires the unsignaled WRs before it and itself.
                while let Some((id, signaled, op)) = q.sends.pop_front() {
                    if id == w.wr_id && (signaled || !ok) {
                        if !ok {
                            opcode = op;
                        }
                        break;
                    }
                }
            }
        }
        WorkCompletion {
            wr_id: w.wr_id,
            status,
            opcode,
            byte_len,
            imm,
            qp_num: w.qp_num,
            src_host,
            src_qp,
        }
    }

    pub fn write_local(&mut self, t: TenantId, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.owns_range(t, addr, data.len() as u64)?;
        self.mem
            .write(addr, data)
            .map_err(VerbsError::InvalidArgument)
    }

    pub fn read_local(&self, t: TenantId, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        self.owns_range(t, addr, len)?;
        self.mem
            .read(addr, len)
            .map_err(VerbsError::InvalidArgument)
    }

    fn owns_range(&self, t: TenantId, addr: u64, len: u64) -> Result<(), VerbsError> {
        let mine = self
            .mrs
            .values()
            .any(|m| m.owner == t && addr >= m.addr && addr + len <= m.addr + m.len);
        if mine {
            Ok(())
        } else {
            Err(VerbsError::InvalidArgument(
                "address range outside this tenant's registered memory",
            ))
        }
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
            sys::ibv_dealloc_pd(self.pd.as_ptr());
            sys::ibv_close_device(self.ctx.as_ptr());
        }
    }
}
