//! The `Verbs` a tenant's stack sees at its bottom for one callback: every call logged, its
//! CPU work charged, and run on the host's fake NIC.

use super::*;

/// The bottom of one tenant's stack for one callback.
pub(super) struct TenantVerbs<'a> {
    pub(super) core: &'a mut Core,
    pub(super) cpu: &'a mut TenantCpu,
    pub(super) host: usize,
    pub(super) tenant: TenantId,
    pub(super) start: u64,
    pub(super) spent: u64,
}

impl TenantVerbs<'_> {
    fn log(&mut self, at: u64, call: Call, ok: bool) {
        let host = self.core.nics[self.host].addr();
        self.core.log.push(Logged {
            at,
            host,
            tenant: self.tenant,
            call,
            ok,
        });
    }

    fn spend(&mut self, layer: &'static str, w: Work) {
        let ps = self.core.cfg.cpu.ps(w);
        self.cpu.total_ps += ps;
        *self.cpu.by_layer.entry(layer).or_default() += ps;
        if self.core.cfg.cpu_delay {
            self.spent += ps;
        }
    }

    /// Logs `call`, charges `work` to "verbs", and runs `f` on the host's NIC.
    fn nic_call<T>(
        &mut self,
        call: Call,
        work: Option<Work>,
        f: impl FnOnce(&mut FakeNic, &mut Sched, &NetConfig, TenantId, u64) -> Result<T, VerbsError>,
    ) -> Result<T, VerbsError> {
        let at = self.now();
        if let Some(w) = work {
            self.spend("verbs", w);
        }
        let ready = self.now();
        let tenant = self.tenant;
        let Core {
            sched, nics, cfg, ..
        } = &mut *self.core;
        let r = f(&mut nics[self.host], sched, cfg, tenant, ready);
        self.log(at, call, r.is_ok());
        r
    }
}

impl Verbs for TenantVerbs<'_> {
    fn now(&self) -> u64 {
        self.start + self.spent
    }
    fn local_host(&self) -> u32 {
        self.core.nics[self.host].addr()
    }
    fn caps(&self) -> &Caps {
        &self.core.nics[self.host].caps
    }
    fn tenant(&self) -> TenantId {
        self.tenant
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        self.nic_call(
            Call::CreateCq(depth),
            Some(Work::Control),
            |n, _, _, t, _| n.create_cq(t, depth),
        )
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.nic_call(Call::DestroyCq(cq), Some(Work::Control), |n, _, _, t, _| {
            n.destroy_cq(t, cq)
        })
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.nic_call(Call::ReqNotify(cq), Some(Work::Control), |n, _, _, t, _| {
            n.req_notify_cq(t, cq)
        })
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        self.nic_call(
            Call::CreateQp(init.clone()),
            Some(Work::Control),
            |n, _, _, t, _| n.create_qp(t, init),
        )
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        self.nic_call(
            Call::Connect(qp, remote),
            Some(Work::Control),
            |n, _, _, t, _| n.connect_qp(t, qp, remote),
        )
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        self.nic_call(Call::Modify(qp, m), Some(Work::Control), |n, s, _, t, _| {
            n.modify_qp(s, t, qp, m)
        })
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        self.nic_call(Call::Query(qp), Some(Work::Control), |n, _, _, t, _| {
            n.query_qp(t, qp)
        })
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.nic_call(Call::DestroyQp(qp), Some(Work::Control), |n, _, _, t, _| {
            n.destroy_qp(t, qp)
        })
    }
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError> {
        self.reg_mr_in(DEFAULT_PD, addr, len, access)
    }
    fn reg_mr_in(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        self.nic_call(
            Call::RegMr(addr, len),
            Some(Work::Control),
            |n, _, _, t, _| n.reg_mr(t, pd, addr, len, access),
        )
    }
    fn alloc_pd(&mut self) -> Result<PdId, VerbsError> {
        self.nic_call(Call::AllocPd, Some(Work::Control), |n, _, _, t, _| {
            Ok(n.alloc_pd(t))
        })
    }
    fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        self.nic_call(Call::DeallocPd(pd), Some(Work::Control), |n, _, _, t, _| {
            n.dealloc_pd(t, pd)
        })
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.nic_call(
            Call::DeregMr(mr.lkey),
            Some(Work::Control),
            |n, _, _, t, _| n.dereg_mr(t, mr),
        )
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.cpu.posts += 1;
        self.nic_call(
            Call::PostSend(qp, wr.clone()),
            Some(Work::Post),
            |n, s, cfg, t, ready| n.post_send(s, cfg, t, qp, wr, ready),
        )
    }
    /// One call, one doorbell: the whole list is charged (and reaches the NIC) at once, then
    /// posted in order up to the first WR the NIC refuses.
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        if wrs.is_empty() {
            return Ok(());
        }
        self.cpu.posts += 1;
        let at = self.now();
        self.spend("verbs", Work::PostList(wrs.len() as u32));
        let ready = self.now();
        let tenant = self.tenant;
        let mut result = Ok(());
        {
            let Core {
                sched, nics, cfg, ..
            } = &mut *self.core;
            for (index, wr) in wrs.iter().enumerate() {
                if let Err(error) =
                    nics[self.host].post_send(sched, cfg, tenant, qp, wr.clone(), ready)
                {
                    result = Err(BadWr { index, error });
                    break;
                }
            }
        }
        self.log(at, Call::PostSendList(qp, wrs), result.is_ok());
        result
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.cpu.posts += 1;
        self.nic_call(
            Call::PostRecv(qp, wr.clone()),
            Some(Work::Post),
            |n, s, _, t, _| n.post_recv(s, t, qp, wr),
        )
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        let at = self.now();
        let nic = &mut self.core.nics[self.host];
        // ibv_poll_cq has no "not yours": a foreign CQ polls empty, logged as refused.
        let owned = nic.cq_owner(cq) == Some(self.tenant);
        let n = nic.poll_cq(self.tenant, cq, max, out);
        self.cpu.polls += 1;
        self.spend("verbs", Work::Poll(n as u32));
        self.log(at, Call::Poll(cq), owned);
        n
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        let now = self.now();
        self.log(now, Call::Timer(at, token), true);
        let (host, tenant) = (self.host, self.tenant);
        self.core.sched.at(
            at.max(now),
            Ev::Deliver {
                host,
                tenant,
                event: Event::Timer(token),
            },
        );
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        let now = self.now();
        let exists = tenant < self.core.tenants[self.host];
        self.log(now, Call::Wake(tenant, token), exists);
        if exists {
            let host = self.host;
            self.core.sched.at(
                now,
                Ev::Deliver {
                    host,
                    tenant,
                    event: Event::Wake(token),
                },
            );
        }
    }
    fn charge(&mut self, work: Work) {
        self.charge_as("app", work)
    }
    fn charge_as(&mut self, layer: &'static str, work: Work) {
        let now = self.now();
        self.log(now, Call::Charge(layer, work), true);
        self.spend(layer, work);
    }
    fn write_local(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        let tenant = self.tenant;
        self.core.nics[self.host].write_local(tenant, addr, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        self.core.nics[self.host].read_local(self.tenant, addr, len)
    }
}
