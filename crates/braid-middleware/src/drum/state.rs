//! What the host's tenants and its DRUM agent share: the connections (virtual QPs) with their
//! pool of work requests, the virtual CQs' inboxes, and the global buffer's slices.

use super::{DrumConfig, Mode};
use braid_verbs::rendezvous::{Endpoint, SharedBoard, Side};
use braid_verbs::*;
use std::collections::{BTreeMap, VecDeque};

/// Where the global buffer lives in the host's address space.
pub const GLOBAL_ADDR: u64 = 0x0D00_0000_0000_0000;
/// Virtual QP numbers (connection ids) start here; they fit in 24 bits.
pub(crate) const VQPN0: u32 = 0x10_0000;
/// Virtual keys: lkeys and rkeys of slices (index in the low 24 bits).
pub(crate) const LKEY_TAG: u32 = 0x4C00_0000;
pub(crate) const RKEY_TAG: u32 = 0x5200_0000;

/// Board key of a memory slice (`vrkey` on host `host`).
pub(crate) fn slice_key(host: u32, vrkey: u32) -> u64 {
    (1 << 63) | (0x2E << 56) | ((host as u64 & 0xFF_FFFF) << 32) | vrkey as u64
}

/// Board key of a connection's record (`vqpn` on host `host`): which tenant owns it, so that a
/// peer's agent can check a one-sided access against the owner of the connection it arrives on
/// (ibverbs: the MR must be in the responder QP's protection domain).
pub(crate) fn conn_key(host: u32, vqpn: QpNum) -> u64 {
    (1 << 63) | (0x2F << 56) | ((host as u64 & 0xFF_FFFF) << 32) | vqpn as u64
}

/// The owner recorded for a destroyed connection (no tenant has it).
const NO_OWNER: u32 = u32::MAX;

/// A tenant's memory region: a slice of the global buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub tenant: TenantId,
    /// The application's address of the region.
    pub addr: u64,
    pub len: u64,
    /// Where it lives in the global buffer.
    pub global: u64,
    pub access: Access,
    pub lkey: u32,
    pub rkey: u32,
    /// Tracked slices: the tenant's own NIC region over the slice's pages of the global buffer
    /// (what its `read_local`/`write_local` go through; `layer.rs`).
    pub backing: Option<MemoryRegion>,
}

/// Bytes reserved at the top of the global buffer for the agent's scratch area (inline data
/// and control messages are written there just before they are posted).
pub(crate) const SCRATCH: u64 = 64 << 10;

/// A remote slice as the peer's agent published it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RemoteSlice {
    addr: u64,
    len: u64,
    global: u64,
    global_rkey: u32,
    remote_write: bool,
    remote_read: bool,
}

/// A work request waiting in the pool, already translated to the global buffer.
#[derive(Debug, Clone)]
pub(crate) struct Pooled {
    pub app_wr_id: u64,
    pub wr: SendWr,
    pub signaled: bool,
    /// Refused when its turn comes (a bad remote key or range): completes with this status.
    pub fail: Option<WcStatus>,
    /// An inline WR's bytes, taken at post time (the application may reuse its buffer at once).
    pub inline_data: Option<Vec<u8>>,
    /// A one-sided WR's access as the application named it (peer host, peer connection, rkey,
    /// address, length, write), checked again when the WR leaves the pool: the peer may have deregistered the
    /// region meanwhile, and its NIC would then refuse the access.
    pub remote: Option<(u32, QpNum, u32, u64, u64, bool)>,
    /// A SEND longer than the agent's receive buffers: its bytes already on the shared QP, in
    /// segments of `bounce_size` (`imm.rs`).
    pub sent: u64,
    /// It has waited for a WQE token (counted once in its connection's `paced`).
    pub waited: bool,
}

/// A work request on a shared QP.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InFlight {
    pub seq: u32,
    pub app_wr_id: u64,
    pub signaled: bool,
    pub opcode: WcOpcode,
    pub len: u64,
    /// A helper WR of the agent's (not the application's completion): its success is silent,
    /// its error is reported under `app_wr_id` (`fail.rs`).
    pub aux: bool,
    /// The agent's refusal of this WR (a remote key or range the peer's slice refuses): a
    /// control message in its place on the shared QP that tells the peer's agent; once it
    /// completes, the WR completes with this status and the connection goes to Error.
    pub refused: Option<WcStatus>,
}

/// What arrived for a connection before it posted a receive.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub opcode: WcOpcode,
    pub len: u64,
    pub src_host: u32,
    /// A SEND (its payload is in the agent's buffers), not a WRITE_WITH_IMM.
    pub send: bool,
    /// A SEND's payload, when the agent's receive buffers keep their bytes (tracked memory).
    pub data: Option<Vec<u8>>,
    /// The application's immediate value (`imm.rs`).
    pub imm: Option<u32>,
}

/// One tenant connection: a virtual RC QP.
#[derive(Debug)]
pub struct Conn {
    pub tenant: TenantId,
    pub vqpn: QpNum,
    pub send_cq: CqId,
    pub recv_cq: CqId,
    pub sq_sig_all: bool,
    pub max_send_wr: u32,
    pub state: QpState,
    pub remote: Option<RemoteQp>,
    pub weight: f64,
    pub(crate) pool: VecDeque<Pooled>,
    pub(crate) inflight: VecDeque<InFlight>,
    pub(crate) recvs: VecDeque<RecvWr>,
    pub(crate) arrived: VecDeque<Arrival>,
    /// Completions waiting for the poller's CQE tokens.
    pub(crate) done: VecDeque<WorkCompletion>,
    /// The shared QP it is bound to: (peer host, index among the pipes to it).
    pub pipe: Option<(u32, u32)>,
    pub(crate) seq: u32,
    /// WQE and CQE rates (per second) and their token buckets.
    pub x: f64,
    pub z: f64,
    pub(crate) x_tokens: f64,
    pub(crate) z_tokens: f64,
    pub(crate) refilled: u64,
    /// WRs posted into the pool since the last decision (the IO monitor's demand estimate).
    pub(crate) arrivals: u64,
    /// WRs that waited in the pool for a WQE token since the last decision: the decided rate,
    /// not the tenant's demand, limited them.
    pub(crate) paced: u64,
    pub posted: u64,
    /// Payload bytes of the `posted` WRs (the message size the fabric decider charges links).
    pub posted_bytes: u64,
    /// Of `posted`, the WRs whose completion lands at the peer (SEND, *_WITH_IMM): two-sided.
    pub two_sided: u64,
    /// Of `posted`, the signaled WRs: those that give the tenant a completion (the CQEs per
    /// WQE `a` of the paper's eq. 13).
    pub signaled: u64,
    /// Two-sided messages that arrived from the peer (receive completions).
    pub received: u64,
    pub completed: u64,
    pub active: bool,
    /// `pipe = "ud"`: its SENDs on the host's UD QP (`ud.rs`).
    pub(crate) ud: Option<super::ud::UdConn>,
    pub(crate) ud_mode: bool,
    /// A refusal is on the shared QP: nothing more of this connection leaves the pool (the
    /// WRs behind a refused one are flushed, as on its own RC QP).
    pub(crate) halted: bool,
}

impl Conn {
    /// The head of the pool waits for a WQE token: counted in `paced` once per WR.
    pub(crate) fn note_token_wait(&mut self) {
        if let Some(p) = self.pool.front_mut() {
            if !p.waited {
                p.waited = true;
                self.paced += 1;
            }
        }
    }

    /// `pipe = "ud"` ordering: whether the head of the pool waits for the other carrier. For
    /// the RC pipes (`rc = true`): the head is a SEND (it goes on the UD QP) or SENDs are still
    /// unacknowledged there. For the UD QP: the head is a SEND and nothing is on the RC pipe
    /// (returns true when the SEND may go).
    pub(crate) fn ud_turn(&self, rc: bool) -> bool {
        let Some(head) = self.pool.front() else {
            return false;
        };
        let two_sided = matches!(head.wr.op, SendOp::Send | SendOp::SendWithImm(_));
        if rc {
            self.ud_mode && (two_sided || self.ud.as_ref().is_some_and(|u| u.msgs > 0))
        } else {
            self.ud_mode && two_sided && self.inflight.is_empty()
        }
    }

    /// Send WRs posted by the application and not yet completed (pool and shared QP).
    pub fn outstanding(&self) -> usize {
        self.pool.len() + self.inflight.len() + self.ud.as_ref().map_or(0, |u| u.msgs)
    }
}

/// A completion for a tenant's virtual CQ.
pub(crate) type Cqe = (CqId, WorkCompletion);

/// The host's DRUM state (one per host, through `HostCtx::shared`).
pub struct HostState {
    pub(crate) cfg: DrumConfig,
    pub(crate) mode: Mode,
    /// SHARE's lock: (contended hand-over, critical section) in ns.
    pub(crate) lock: (f64, f64),
    pub(crate) me: u32,
    pub(crate) board: SharedBoard,
    pub conns: BTreeMap<QpNum, Conn>,
    next_vqpn: QpNum,
    /// (peer host, peer's vqpn) -> our vqpn.
    pub(crate) by_remote: BTreeMap<(u32, QpNum), QpNum>,
    /// Connections per peer host, in the order they connected (pipe = index / mux_ratio).
    pub(crate) to_peer: BTreeMap<u32, Vec<QpNum>>,
    pub(crate) inbox: BTreeMap<TenantId, Vec<Cqe>>,
    pub(crate) slices: BTreeMap<u32, Slice>,
    next_slice: u32,
    next_global: u64,
    /// The global buffer's NIC region, once the agent registered it.
    pub(crate) global: Option<MemoryRegion>,
    /// Something changed that the agent must act on (connections, pool).
    pub(crate) dirty: bool,
    /// Connections arrived or left since the last decision.
    pub(crate) resolve: bool,
    /// A connection's traffic turned two-sided (its first two-sided WR or arrival): taken at
    /// the next periodic decision (`solve_interval`), so that the first replies of many
    /// connections, arriving one by one, are one change of the instance and not one each.
    pub(crate) resolve_soon: bool,
    pub(crate) lock_ps: u64,
    /// Connections with completions waiting for the poller.
    pub(crate) has_done: std::collections::BTreeSet<QpNum>,
    /// Some tenant registered a tracked slice: the agent's receive buffers keep their bytes.
    pub(crate) tracking: bool,
    /// Bytes the agent received for a tenant (SEND payloads), to be written into the tenant's
    /// slices by its layer before it hands over the completions: (global address, bytes).
    pub(crate) pending_writes: BTreeMap<TenantId, Vec<(u64, Vec<u8>)>>,
    /// Control messages the agent owes the peers' agents: (connection, kind) (`imm.rs`).
    pub(crate) ctrl_out: Vec<(QpNum, u32)>,
    /// Where the agent shares each tenant's slice of the global buffer with that tenant only
    /// (`HostCtx::agent_shares`; None on a backend that models no agent memory apart).
    pub(crate) shares: Option<braid_verbs::ShareSlot>,
}

impl HostState {
    pub fn new(cfg: DrumConfig, mode: Mode, lock: (f64, f64), me: u32, board: SharedBoard) -> Self {
        HostState {
            cfg,
            mode,
            lock,
            me,
            board,
            conns: BTreeMap::new(),
            next_vqpn: VQPN0,
            by_remote: BTreeMap::new(),
            to_peer: BTreeMap::new(),
            inbox: BTreeMap::new(),
            slices: BTreeMap::new(),
            next_slice: 0,
            next_global: 0,
            global: None,
            dirty: false,
            resolve: true,
            resolve_soon: false,
            lock_ps: 0,
            has_done: Default::default(),
            tracking: false,
            pending_writes: BTreeMap::new(),
            ctrl_out: Vec::new(),
            shares: None,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Creates a connection (virtual QP) for `tenant`.
    pub(crate) fn create_conn(
        &mut self,
        tenant: TenantId,
        init: &QpInit,
        weight: f64,
    ) -> Result<QpNum, VerbsError> {
        if self.next_vqpn >= 0xFF_FFFF {
            return Err(VerbsError::QueueFull);
        }
        let vqpn = self.next_vqpn;
        self.next_vqpn += 1;
        self.publish_conn(vqpn, tenant);
        self.conns.insert(
            vqpn,
            Conn {
                tenant,
                vqpn,
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                sq_sig_all: init.sq_sig_all,
                max_send_wr: init.max_send_wr,
                state: QpState::Init,
                remote: None,
                weight,
                pool: VecDeque::new(),
                inflight: VecDeque::new(),
                recvs: VecDeque::new(),
                arrived: VecDeque::new(),
                done: VecDeque::new(),
                pipe: None,
                seq: 0,
                x: self.cfg.wqe_rate,
                z: self.cfg.cqe_rate,
                x_tokens: self.cfg.burst as f64,
                z_tokens: self.cfg.burst as f64,
                refilled: 0,
                arrivals: 0,
                paced: 0,
                posted: 0,
                posted_bytes: 0,
                two_sided: 0,
                signaled: 0,
                received: 0,
                completed: 0,
                active: true,
                ud: None,
                halted: false,
                ud_mode: self.cfg.pipe == super::PipeKind::Ud && self.mode == Mode::Drum,
            },
        );
        Ok(vqpn)
    }

    /// Records on the board which tenant owns connection `vqpn` (`NO_OWNER` once destroyed).
    pub(crate) fn publish_conn(&self, vqpn: QpNum, tenant: TenantId) {
        self.board.borrow_mut().publish(
            conn_key(self.me, vqpn),
            Side::Client,
            Endpoint {
                host: tenant,
                qpn: vqpn,
                addr: 0,
                rkey: 0,
            },
        );
    }

    /// Connection `vqpn` is gone: its record says so, and its peer's arrivals stop naming it.
    pub(crate) fn forget_conn(&mut self, vqpn: QpNum, remote: Option<RemoteQp>) {
        self.publish_conn(vqpn, NO_OWNER);
        if let Some(r) = remote {
            // Only if the mapping is this connection's (another may hold that peer).
            if self.by_remote.get(&(r.host, r.qpn)) == Some(&vqpn) {
                self.by_remote.remove(&(r.host, r.qpn));
            }
        }
    }

    /// The tenant's own connection `qp` (another tenant's is "no such QP", as in ibverbs).
    pub(crate) fn conn_of(&mut self, tenant: TenantId, qp: QpNum) -> Result<&mut Conn, VerbsError> {
        match self.conns.get_mut(&qp) {
            Some(c) if c.tenant == tenant => Ok(c),
            _ => Err(VerbsError::NoSuchQp(qp)),
        }
    }

    /// Connects `qp` to its peer: binds it to a shared QP towards the peer's host.
    pub(crate) fn connect(
        &mut self,
        tenant: TenantId,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let mux = self.cfg.mux_ratio as usize;
        let c = self.conn_of(tenant, qp)?;
        if !matches!(c.state, QpState::Init | QpState::Reset) {
            return Err(VerbsError::InvalidState(
                "connect needs a QP in Init or Reset",
            ));
        }
        c.state = QpState::Rts;
        c.remote = Some(remote);
        let list = self.to_peer.entry(remote.host).or_default();
        let idx = list.len();
        list.push(qp);
        let pipe = (remote.host, (idx / mux) as u32);
        self.conns.get_mut(&qp).expect("just found").pipe = Some(pipe);
        // Arrivals are told apart by their sender (the peer's connection id): the first
        // connection of this host to that peer keeps them. A second one (another tenant
        // naming the same remote QP) must not take over the first one's traffic; like a QP
        // the remote one is not connected to, it receives nothing.
        self.by_remote
            .entry((remote.host, remote.qpn))
            .or_insert(qp);
        self.dirty = true;
        self.resolve = true;
        Ok(())
    }

    /// The connections bound to pipe `gi` towards `peer`.
    pub(crate) fn pipe_members(&self, peer: u32, gi: u32) -> Vec<QpNum> {
        let mux = self.cfg.mux_ratio as usize;
        self.to_peer.get(&peer).map_or_else(Vec::new, |l| {
            l.iter()
                .skip(gi as usize * mux)
                .take(mux)
                .copied()
                .collect()
        })
    }

    /// Pipes wanted towards each peer host (both ends count the same connections).
    pub(crate) fn pipes_wanted(&self) -> Vec<(u32, u32)> {
        let mux = self.cfg.mux_ratio as usize;
        self.to_peer
            .iter()
            .map(|(&h, l)| (h, l.len().div_ceil(mux) as u32))
            .collect()
    }

    /// Registers a slice of the global buffer for `tenant`.
    pub(crate) fn reg_slice(
        &mut self,
        tenant: TenantId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let Some(g) = self.global else {
            return Err(VerbsError::InvalidState(
                "the drum agent has not registered its global buffer yet",
            ));
        };
        if len == 0 || addr.checked_add(len).is_none() {
            return Err(VerbsError::InvalidArgument(
                "a memory region needs 1..2^64-addr bytes",
            ));
        }
        if access.remote_write && !access.local_write {
            return Err(VerbsError::InvalidArgument(
                "remote_write needs local_write",
            ));
        }
        // Slices are 4 KiB aligned in the lower half of the global buffer (below the UD QP's
        // buffers, `pipe = "ud"`); the agent's receive buffers and scratch area are in the upper
        // half.
        let room = if self.cfg.pipe == super::PipeKind::Ud {
            g.len / 2 - super::ud::UD_AREA
        } else {
            g.len / 2
        };
        let at = self.next_global;
        let end = at.checked_add(len.div_ceil(4096) * 4096);
        match end {
            Some(e) if e <= room && self.next_slice < 0xFF_FFFF => self.next_global = e,
            _ => {
                return Err(VerbsError::InvalidArgument(
                    "drum: the global buffer is full",
                ))
            }
        }
        let idx = self.next_slice;
        self.next_slice += 1;
        let s = Slice {
            tenant,
            addr,
            len,
            global: g.addr + at,
            access,
            lkey: LKEY_TAG | idx,
            rkey: RKEY_TAG | idx,
            backing: None,
        };
        self.slices.insert(idx, s);
        if let Some(sh) = &self.shares {
            // The slice's pages of the global buffer are mapped into this tenant only.
            sh.borrow_mut().grant(tenant, s.global, len);
        }
        self.publish_slice(&s, g.rkey);
        Ok(MemoryRegion {
            addr,
            len,
            lkey: s.lkey,
            rkey: s.rkey,
        })
    }

    /// What a peer's agent needs to check and translate a one-sided access to the slice (the
    /// agents' control channel; here the run's board).
    fn publish_slice(&self, s: &Slice, global_rkey: u32) {
        let flags = (s.access.remote_write as u32) | (s.access.remote_read as u32) << 1;
        let mut b = self.board.borrow_mut();
        let key = slice_key(self.me, s.rkey);
        b.publish(
            key,
            Side::Client,
            Endpoint {
                host: flags,
                qpn: (s.len >> 32) as u32,
                addr: s.addr,
                rkey: s.len as u32,
            },
        );
        b.publish(
            key,
            Side::Server,
            Endpoint {
                // The owner: an access must arrive on one of its connections.
                host: s.tenant,
                qpn: 0,
                addr: s.global,
                rkey: global_rkey,
            },
        );
    }

    /// Removes the tenant's slice `mr`; returns it (its backing region is the layer's to free).
    pub(crate) fn dereg_slice(
        &mut self,
        tenant: TenantId,
        mr: &MemoryRegion,
    ) -> Result<Slice, VerbsError> {
        let idx = mr.lkey & 0xFF_FFFF;
        match self.slices.get(&idx) {
            Some(s) if s.tenant == tenant && s.lkey == mr.lkey => {
                let s = *self.slices.get(&idx).expect("found");
                self.slices.remove(&idx);
                if let Some(sh) = &self.shares {
                    sh.borrow_mut().revoke(tenant, s.global, s.len);
                }
                // Withdraw it: a zero-length record refuses every access.
                let dead = Slice { len: 0, ..s };
                let rk = self.global.map_or(0, |g| g.rkey);
                self.publish_slice(&dead, rk);
                Ok(s)
            }
            _ => Err(VerbsError::BadKey(mr.lkey)),
        }
    }

    /// Sets the backing region of slice `lkey` (a tracked slice).
    pub(crate) fn set_backing(&mut self, lkey: u32, mr: MemoryRegion) {
        if let Some(s) = self.slices.get_mut(&(lkey & 0xFF_FFFF)) {
            s.backing = Some(mr);
            self.tracking = true;
        }
    }

    /// Where the tenant's `[addr, addr + len)` lives in the global buffer, if inside one of its
    /// slices (the tenant's page remap, `Middleware::map_local`).
    pub(crate) fn map_slice(&self, tenant: TenantId, addr: u64, len: u64) -> Option<u64> {
        self.slices
            .values()
            .find(|s| {
                s.tenant == tenant
                    && addr >= s.addr
                    && addr.checked_add(len).is_some_and(|e| e <= s.addr + s.len)
            })
            .map(|s| s.global + (addr - s.addr))
    }

    /// Translates a tenant's scatter-gather list to the global buffer; a key that is not one
    /// of the tenant's or a range outside its region is refused as on its own QP.
    pub(crate) fn translate_local(
        &self,
        tenant: TenantId,
        sg: &[Sge],
    ) -> Result<Vec<Sge>, VerbsError> {
        let g = self
            .global
            .ok_or(VerbsError::InvalidState("drum agent not started"))?;
        sg.iter()
            .map(|e| {
                if e.length == 0 {
                    return Ok(Sge { lkey: g.lkey, ..*e });
                }
                let s = (e.lkey & 0xFF00_0000 == LKEY_TAG)
                    .then(|| self.slices.get(&(e.lkey & 0xFF_FFFF)))
                    .flatten()
                    .filter(|s| s.tenant == tenant && s.lkey == e.lkey)
                    .ok_or(VerbsError::BadKey(e.lkey))?;
                if e.addr < s.addr || e.addr + e.length as u64 > s.addr + s.len {
                    return Err(VerbsError::BadKey(e.lkey));
                }
                Ok(Sge {
                    addr: s.global + (e.addr - s.addr),
                    length: e.length,
                    lkey: g.lkey,
                })
            })
            .collect()
    }

    /// Translates a one-sided access over the connection to `host`'s connection `rqpn`, to
    /// that host's slice `rkey` at `[addr, addr + len)`: the peer's global address and key, or
    /// the status the peer's NIC would answer with. The slice must belong to the tenant owning
    /// connection `rqpn` (the responder QP's protection domain), not merely exist on that host:
    /// the NIC sees only the agents' global key, so this check is the only one there is.
    pub(crate) fn translate_remote(
        &self,
        host: u32,
        rqpn: QpNum,
        rkey: u32,
        addr: u64,
        len: u64,
        write: bool,
    ) -> Result<(u64, u32), WcStatus> {
        let key = slice_key(host, rkey);
        let (a, b, conn) = {
            let b = self.board.borrow();
            (
                b.lookup(key, Side::Client),
                b.lookup(key, Side::Server),
                b.lookup(conn_key(host, rqpn), Side::Client),
            )
        };
        let (Some(a), Some(b)) = (a, b) else {
            return Err(WcStatus::RemoteAccessError);
        };
        if conn.is_none_or(|c| c.host == NO_OWNER || c.host != b.host) {
            return Err(WcStatus::RemoteAccessError);
        }
        let r = RemoteSlice {
            addr: a.addr,
            len: ((a.qpn as u64) << 32) | a.rkey as u64,
            global: b.addr,
            global_rkey: b.rkey,
            remote_write: a.host & 1 != 0,
            remote_read: a.host & 2 != 0,
        };
        let allowed = if write { r.remote_write } else { r.remote_read };
        if len == 0 {
            return Ok((r.global, r.global_rkey));
        }
        if !allowed || addr < r.addr || addr.saturating_add(len) > r.addr + r.len {
            return Err(WcStatus::RemoteAccessError);
        }
        Ok((r.global + (addr - r.addr), r.global_rkey))
    }

    /// The status the peer's NIC would answer the head of `vq`'s pool with now, if it would
    /// refuse it (its one-sided access checked again, `Pooled::remote`).
    pub(crate) fn refused_now(&self, vq: QpNum) -> Option<WcStatus> {
        let p = self.conns.get(&vq)?.pool.front()?;
        let (host, rqpn, rkey, addr, len, write) = p.remote?;
        self.translate_remote(host, rqpn, rkey, addr, len, write)
            .err()
    }

    /// A completion for the connection's tenant, in order behind the ones waiting.
    pub(crate) fn complete(&mut self, vqpn: QpNum, wc: WorkCompletion) {
        if let Some(c) = self.conns.get_mut(&vqpn) {
            c.done.push_back(wc);
            self.has_done.insert(vqpn);
            self.dirty = true;
        }
    }

    /// Moves a connection to Error: everything in its pool and on its receive queue is flushed
    /// (what it has on a shared QP completes as it comes back).
    pub(crate) fn fail_conn(&mut self, vqpn: QpNum) {
        let Some(c) = self.conns.get_mut(&vqpn) else {
            return;
        };
        c.state = QpState::Error;
        let mut out = c.ud.as_mut().map_or_else(Vec::new, |u| u.flush(vqpn));
        for p in c.pool.drain(..) {
            out.push(flush(vqpn, p.app_wr_id, send_opcode(&p.wr.op)));
        }
        for r in c.recvs.drain(..) {
            out.push(flush(vqpn, r.wr_id, WcOpcode::Recv));
        }
        c.done.extend(out);
        self.has_done.insert(vqpn);
        self.dirty = true;
    }

    /// A receive arrived for connection `vqpn`: completes the oldest posted receive, or waits
    /// for one (the peer's SEND is held, as an RNR would hold it on the connection's own QP).
    pub(crate) fn arrive(&mut self, vqpn: QpNum, a: Arrival) {
        let Some(c) = self.conns.get_mut(&vqpn) else {
            return;
        };
        c.received += 1;
        if c.received == 1 {
            // The connection now receives two-sided traffic: its rates are decided again at
            // the next periodic decision (one change for every connection that turned so).
            self.resolve_soon = true;
        }
        c.arrived.push_back(a);
        self.match_recvs(vqpn);
    }

    pub(crate) fn match_recvs(&mut self, vqpn: QpNum) {
        let Some(c) = self.conns.get_mut(&vqpn) else {
            return;
        };
        let tenant = c.tenant;
        let mut writes = Vec::new();
        let mut too_long = false;
        while !too_long && !c.arrived.is_empty() && !c.recvs.is_empty() {
            let a = c.arrived.pop_front().expect("non-empty");
            let r = c.recvs.pop_front().expect("non-empty");
            let room: u64 = r.sg_list.iter().map(|s| s.length as u64).sum();
            let is_send = a.send;
            let status = if is_send && a.len > room {
                too_long = true;
                WcStatus::LocalLengthError
            } else {
                WcStatus::Success
            };
            if let (Some(d), WcStatus::Success) = (&a.data, status) {
                // The payload goes into the receive's buffers (global addresses), written by the
                // tenant's layer before it sees this completion.
                let mut off = 0usize;
                for sge in &r.sg_list {
                    if off >= d.len() {
                        break;
                    }
                    let n = (sge.length as usize).min(d.len() - off);
                    writes.push((sge.addr, d[off..off + n].to_vec()));
                    off += n;
                }
            }
            c.done.push_back(WorkCompletion {
                wr_id: r.wr_id,
                status,
                opcode: a.opcode,
                // The message's length, as the NIC reports it even when it did not fit.
                byte_len: a.len,
                // DRUM carries the connection id in the immediate data; the application's own
                // value travels beside it (`imm.rs`), 0 where it cannot.
                imm: (a.opcode == WcOpcode::RecvWithImm).then_some(a.imm.unwrap_or(0)),
                qp_num: vqpn,
                src_host: a.src_host,
                src_qp: c.remote.map_or(0, |r| r.qpn),
            });
            self.has_done.insert(vqpn);
            self.dirty = true;
        }
        if !writes.is_empty() {
            self.pending_writes
                .entry(tenant)
                .or_default()
                .extend(writes);
        }
        if too_long {
            self.too_long(vqpn);
        }
    }

    /// A SEND did not fit connection `vqpn`'s receive (just completed `LocalLengthError`): as an
    /// RC responder QP (IBA 9.9.3.1.3, class C: the receiver's LOC_LEN_ERR, the sender's
    /// REM_INV_REQ_ERR), the connection goes to Error, what it has outstanding flushed, and its
    /// agent tells the peer's agent, whose end goes to Error too (`imm.rs`, `CTRL_LENGTH`).
    pub(crate) fn too_long(&mut self, vqpn: QpNum) {
        super::fail::fail_pipe(self, &[vqpn], None);
        self.ctrl_out.push((vqpn, super::imm::CTRL_LENGTH));
    }

    /// The tenant's completions the poller released, drained.
    pub(crate) fn take_writes(&mut self, tenant: TenantId) -> Vec<(u64, Vec<u8>)> {
        self.pending_writes.remove(&tenant).unwrap_or_default()
    }

    pub(crate) fn take_inbox(&mut self, tenant: TenantId) -> Vec<Cqe> {
        self.inbox.remove(&tenant).unwrap_or_default()
    }
}

pub(crate) fn flush(vqpn: QpNum, wr_id: u64, opcode: WcOpcode) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status: WcStatus::Flushed,
        opcode,
        byte_len: 0,
        imm: None,
        qp_num: vqpn,
        src_host: 0,
        src_qp: 0,
    }
}

pub(crate) fn send_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
        SendOp::Write | SendOp::WriteWithImm(_) => WcOpcode::Write,
        SendOp::Read => WcOpcode::Read,
        _ => WcOpcode::Nop,
    }
}
