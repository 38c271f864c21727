//! The tenant's half of DRUM's IO monitor: the application's QPs, CQs and memory regions, all
//! virtual. A QP is a connection in the host's pool, a CQ a queue the agent's poller fills, a
//! memory region a slice of the agent's global buffer. Nothing here touches the NIC.

use super::state::{flush, send_opcode, HostState, Pooled};
use super::{WAKE_AGENT, WAKE_CQE};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Virtual CQ numbers start here.
const VCQ0: CqId = 0x4400_0000;

struct VCq {
    q: VirtualCq,
    /// The application's CQ depth: completions beyond it are lost (counted), as on an
    /// overrun CQ.
    depth: u32,
    overruns: u64,
}

/// Why a PD other than the default one is refused.
const PD_ONLY_DEFAULT: &str =
    "drum: one protection domain per tenant (its slices and connections); alloc_pd is not offered";

/// A tenant's DRUM (or SHARE) layer.
pub struct DrumLayer {
    st: Rc<RefCell<HostState>>,
    tenant: TenantId,
    weight: f64,
    name: &'static str,
    cqs: BTreeMap<CqId, VCq>,
    next_cq: CqId,
    posted: u64,
}

impl DrumLayer {
    pub fn new(
        st: Rc<RefCell<HostState>>,
        tenant: TenantId,
        weight: f64,
        name: &'static str,
    ) -> Self {
        DrumLayer {
            st,
            tenant,
            weight,
            name,
            cqs: BTreeMap::new(),
            next_cq: VCQ0,
            posted: 0,
        }
    }

    /// Moves what the poller released to this tenant into its virtual CQs; returns the armed
    /// CQs that received something (now disarmed: one notification each).
    fn drain_inbox(&mut self, below: &mut dyn Verbs) -> Vec<CqId> {
        // Bytes the agent received for this tenant land in its slices first (the copy out of
        // the agent's receive buffers), then the completions that announce them.
        let writes = self.st.borrow_mut().take_writes(self.tenant);
        for (addr, data) in writes {
            let _ = below.write_local(addr, &data);
        }
        let got = self.st.borrow_mut().take_inbox(self.tenant);
        let mut notify = Vec::new();
        for (cq, wc) in got {
            let Some(c) = self.cqs.get_mut(&cq) else {
                continue; // destroyed meanwhile
            };
            if c.q.len() >= c.depth as usize {
                c.overruns += 1;
                continue;
            }
            c.q.push(wc);
            if c.q.take_event(false) {
                notify.push(cq);
            }
        }
        notify
    }

    fn poke_agent(&self, below: &mut dyn Verbs) {
        below.wake(AGENT, WAKE_AGENT);
    }
}

impl Middleware for DrumLayer {
    fn name(&self) -> &'static str {
        self.name
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let overruns: u64 = self.cqs.values().map(|c| c.overruns).sum();
        vec![
            ("wr_posted", self.posted as f64),
            ("cq_overruns", overruns as f64),
        ]
    }

    fn create_cq(&mut self, _below: &mut dyn Verbs, depth: u32) -> Result<CqId, VerbsError> {
        let id = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(
            id,
            VCq {
                q: VirtualCq::new(),
                depth: depth.max(1),
                overruns: 0,
            },
        );
        Ok(id)
    }

    fn destroy_cq(&mut self, _below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        if !self.cqs.contains_key(&cq) {
            return Err(VerbsError::NoSuchCq(cq));
        }
        let used = self
            .st
            .borrow()
            .conns
            .values()
            .any(|c| c.tenant == self.tenant && (c.send_cq == cq || c.recv_cq == cq));
        if used {
            return Err(VerbsError::InvalidState("a QP still uses the CQ"));
        }
        self.cqs.remove(&cq);
        Ok(())
    }

    fn req_notify_cq(&mut self, _below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        let c = self.cqs.get_mut(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        c.q.arm();
        Ok(())
    }

    fn poll_cq(
        &mut self,
        below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        // Completions already released count as arrived (no notification for them, as ibverbs).
        let _ = self.drain_inbox(below);
        let Some(c) = self.cqs.get_mut(&cq) else {
            return 0;
        };
        let n = c.q.poll(max, out);
        below.charge(Work::Poll(n as u32));
        n
    }

    fn create_qp(&mut self, _below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        if init.qp_type != QpType::Rc {
            return Err(VerbsError::Unsupported(
                "drum multiplexes RC connections; UC and UD QPs are not offered through it",
            ));
        }
        if init.pd != DEFAULT_PD {
            return Err(VerbsError::Unsupported(PD_ONLY_DEFAULT));
        }
        if init.is_cross_channel() {
            return Err(VerbsError::Unsupported(
                "drum: cross-channel QPs cannot be shared",
            ));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.cqs.contains_key(&cq) {
                return Err(VerbsError::NoSuchCq(cq));
            }
        }
        self.st
            .borrow_mut()
            .create_conn(self.tenant, init, self.weight)
    }

    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        self.st.borrow_mut().connect(self.tenant, qp, remote)?;
        self.poke_agent(below);
        Ok(())
    }

    fn modify_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        let mut st = self.st.borrow_mut();
        let c = st.conn_of(self.tenant, qp)?;
        match m {
            QpModify::Error => {
                st.fail_conn(qp);
                drop(st);
                self.poke_agent(below);
            }
            QpModify::Reset => {
                if !c.inflight.is_empty() {
                    return Err(VerbsError::InvalidState(
                        "drum: reset while work is on the shared QP",
                    ));
                }
                c.pool.clear();
                c.recvs.clear();
                c.arrived.clear();
                c.done.clear();
                c.halted = false;
                c.state = QpState::Reset;
            }
            // The shared QP's port is the agent's.
            QpModify::UdpSport(_) => {}
        }
        Ok(())
    }

    fn query_qp(&mut self, _below: &mut dyn Verbs, qp: QpNum) -> Result<QpAttr, VerbsError> {
        let mut st = self.st.borrow_mut();
        let me = st.me;
        let c = st.conn_of(self.tenant, qp)?;
        Ok(QpAttr {
            qpn: qp,
            qp_type: QpType::Rc,
            state: c.state,
            local_addr: me,
            udp_sport: 0,
            remote: c.remote,
            retry_cnt: 7,
            rnr_retry: 7,
            cross_channel: false,
            send_cq: c.send_cq,
            recv_cq: c.recv_cq,
            send_outstanding: c.outstanding() as u32,
        })
    }

    fn destroy_qp(&mut self, _below: &mut dyn Verbs, qp: QpNum) -> Result<(), VerbsError> {
        let mut st = self.st.borrow_mut();
        let remote = st.conn_of(self.tenant, qp)?.remote;
        st.conns.remove(&qp);
        st.forget_conn(qp, remote);
        st.resolve = true;
        Ok(())
    }

    /// DRUM's tenant is its protection domain: its slices and connections are checked against
    /// the tenant (`state.rs`), and the NIC below sees only the agent's global key, so a PD of
    /// the NIC's would separate nothing. Only the default PD is offered.
    fn alloc_pd(&mut self, _below: &mut dyn Verbs) -> Result<PdId, VerbsError> {
        Err(VerbsError::Unsupported(PD_ONLY_DEFAULT))
    }

    fn dealloc_pd(&mut self, _below: &mut dyn Verbs, pd: PdId) -> Result<(), VerbsError> {
        if pd == DEFAULT_PD {
            Err(VerbsError::InvalidState(
                "the default protection domain lives as long as the tenant",
            ))
        } else {
            Err(VerbsError::InvalidArgument("no such protection domain"))
        }
    }

    /// The default PD's registration is a slice, as `reg_mr`'s (passing it below would give a
    /// NIC region outside the global buffer, which no DRUM WR can use).
    fn reg_mr_in(
        &mut self,
        below: &mut dyn Verbs,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        if pd != DEFAULT_PD {
            return Err(VerbsError::Unsupported(PD_ONLY_DEFAULT));
        }
        self.reg_mr(below, addr, len, access)
    }

    fn reg_mr(
        &mut self,
        below: &mut dyn Verbs,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        if access.track && !below.caps().data_tracking {
            return Err(VerbsError::Unsupported(
                "memory contents are not tracked by this NIC (caps.data_tracking = false)",
            ));
        }
        let mr = self
            .st
            .borrow_mut()
            .reg_slice(self.tenant, addr, len, access)?;
        if access.track {
            // DRUM remaps the application's pages onto the slice's pages of the global buffer:
            // the tenant gets a region of its own over those pages (local access only; peers
            // reach them through the agent's global key), so its reads and writes
            // (`map_local`) and the NIC's accesses through the shared QPs see the same bytes.
            let global = self.st.borrow().map_slice(self.tenant, addr, len);
            let backing = global.map(|g| {
                below.reg_mr(
                    g,
                    len,
                    Access {
                        local_write: true,
                        remote_write: false,
                        remote_read: false,
                        track: true,
                    },
                )
            });
            match backing {
                Some(Ok(b)) => self.st.borrow_mut().set_backing(mr.lkey, b),
                Some(Err(e)) => {
                    let _ = self.st.borrow_mut().dereg_slice(self.tenant, &mr);
                    return Err(e);
                }
                None => unreachable!("the slice was just registered"),
            }
        }
        Ok(mr)
    }

    fn dereg_mr(&mut self, below: &mut dyn Verbs, mr: &MemoryRegion) -> Result<(), VerbsError> {
        let s = self.st.borrow_mut().dereg_slice(self.tenant, mr)?;
        if let Some(b) = s.backing {
            below.dereg_mr(&b)?;
        }
        Ok(())
    }

    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        let mut st = self.st.borrow_mut();
        let bounce = st.cfg.bounce_size.0;
        let (state, remote, max, outstanding, sig_all) = {
            let c = st.conn_of(self.tenant, qp)?;
            (
                c.state,
                c.remote,
                c.max_send_wr,
                c.outstanding(),
                c.sq_sig_all,
            )
        };
        let write = match wr.op {
            SendOp::Write | SendOp::WriteWithImm(_) => Some(true),
            SendOp::Read => Some(false),
            SendOp::Send | SendOp::SendWithImm(_) => None,
            _ => {
                return Err(VerbsError::Unsupported(
                    "drum: cross-channel and NOP work requests cannot go through a shared QP",
                ))
            }
        };
        match state {
            QpState::Rts => {}
            QpState::Error => {
                // Posting to a QP in Error: the WR completes flushed.
                let wc = flush(qp, wr.wr_id, send_opcode(&wr.op));
                st.complete(qp, wc);
                drop(st);
                self.poke_agent(below);
                return Ok(());
            }
            _ => return Err(VerbsError::InvalidState("post_send needs a connected QP")),
        }
        if outstanding >= max as usize {
            return Err(VerbsError::QueueFull);
        }
        // A SEND longer than the agent's receive buffers goes in segments (`imm.rs`), except
        // an inline one (the NIC takes at most a few hundred bytes inline anyway).
        if write.is_none() && wr.inline && wr.len() > bounce {
            return Err(VerbsError::InvalidWr(
                "drum: an inline SEND larger than the agent's receive buffers (bounce_size)",
            ));
        }
        if write.is_none() && wr.len() > u32::MAX as u64 {
            return Err(VerbsError::InvalidWr(
                "drum: a SEND of 4 GiB or more (the message length travels in 32 bits)",
            ));
        }
        let mut inline_data = None;
        let sg_list = if wr.inline {
            let g = st
                .global
                .ok_or(VerbsError::InvalidState("drum agent not started"))?;
            if st.tracking {
                // Inline: the bytes are taken now (the buffer may be reused at once); the
                // agent posts them inline from its scratch area.
                let mut d = Vec::new();
                for e in wr.sg_list.iter().filter(|e| e.length > 0) {
                    let bytes = st
                        .map_slice(self.tenant, e.addr, e.length as u64)
                        .and_then(|a| below.read_local(a, e.length as u64).ok());
                    d.extend(bytes.unwrap_or_else(|| vec![0; e.length as usize]));
                }
                inline_data = Some(d);
            }
            wr.sg_list
                .iter()
                .map(|s| Sge { lkey: g.lkey, ..*s })
                .collect()
        } else {
            st.translate_local(self.tenant, &wr.sg_list)?
        };
        let mut fail = None;
        let (mut remote_addr, mut rkey) = (0, 0);
        if let (Some(w), Some(r)) = (write, remote) {
            match st.translate_remote(r.host, r.qpn, wr.rkey, wr.remote_addr, wr.len(), w) {
                Ok((a, k)) => (remote_addr, rkey) = (a, k),
                Err(s) => fail = Some(s),
            }
        }
        below.charge(Work::WrBuilt(1));
        let wr_bytes = wr.len();
        let c = st.conn_of(self.tenant, qp)?;
        c.posted_bytes += wr_bytes;
        let first_two_sided = matches!(
            wr.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
        ) && {
            c.two_sided += 1;
            c.two_sided == 1
        };
        c.pool.push_back(Pooled {
            app_wr_id: wr.wr_id,
            signaled: wr.signaled || sig_all,
            fail,
            inline_data,
            remote: match (write, remote) {
                (Some(w), Some(r)) => Some((r.host, r.qpn, wr.rkey, wr.remote_addr, wr.len(), w)),
                _ => None,
            },
            sent: 0,
            waited: false,
            wr: SendWr {
                sg_list,
                remote_addr,
                rkey,
                ud_dest: None,
                ..wr
            },
        });
        c.arrivals += 1;
        c.posted += 1;
        c.signaled += (wr.signaled || sig_all) as u64;
        st.dirty = true;
        // Its first two-sided WR changes the host's instance: the rates are decided again.
        st.resolve_soon |= first_two_sided;
        drop(st);
        self.posted += 1;
        self.poke_agent(below);
        Ok(())
    }

    fn post_recv(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        let mut st = self.st.borrow_mut();
        let state = st.conn_of(self.tenant, qp)?.state;
        if state == QpState::Reset {
            return Err(VerbsError::InvalidState("post_recv on a QP in Reset"));
        }
        if state == QpState::Error {
            st.complete(qp, flush(qp, wr.wr_id, WcOpcode::Recv));
            drop(st);
            self.poke_agent(below);
            return Ok(());
        }
        let sg_list = st.translate_local(self.tenant, &wr.sg_list)?;
        let c = st.conn_of(self.tenant, qp)?;
        let had = c.done.len();
        c.recvs.push_back(RecvWr { sg_list, ..wr });
        st.match_recvs(qp);
        let more = st.conns.get(&qp).map_or(0, |c| c.done.len()) > had;
        drop(st);
        if more {
            self.poke_agent(below);
        }
        Ok(())
    }

    fn map_local(&self, addr: u64, len: u64) -> Result<u64, VerbsError> {
        self.st
            .borrow()
            .map_slice(self.tenant, addr, len)
            .ok_or(VerbsError::InvalidArgument(
                "drum: address range outside this tenant's registered memory",
            ))
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Wake(WAKE_CQE) => {
                for cq in self.drain_inbox(below) {
                    up.push(Event::Completion(cq));
                }
            }
            e => up.push(e),
        }
    }
}
