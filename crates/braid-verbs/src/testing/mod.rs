//! Test doubles for verbs consumers: [`Recorder`], a bottom that records every call and answers
//! with fixed values, and [`FakeNet`], an in-process network of fake RNICs ([`FakeNic`]) with
//! ibverbs semantics, to unit-test middleware without the simulator (see [`fake_nic`]).

pub mod conformance;
pub mod fake_nic;

pub use fake_nic::{
    Delivered, FakeNet, FakeNic, Logged, MrLimits, NetConfig, Stop, TenantCpu, MLX5_MAX_MR,
};

use crate::*;

/// A recorded verbs call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    CreateCq(u32),
    DestroyCq(CqId),
    ReqNotify(CqId),
    CreateQp(QpInit),
    Connect(QpNum, RemoteQp),
    Modify(QpNum, QpModify),
    Query(QpNum),
    DestroyQp(QpNum),
    RegMr(u64, u64),
    DeregMr(u32),
    AllocPd,
    DeallocPd(PdId),
    PostSend(QpNum, SendWr),
    /// One ibv_post_send of a list (one doorbell).
    PostSendList(QpNum, Vec<SendWr>),
    PostRecv(QpNum, RecvWr),
    Poll(CqId),
    Timer(u64, u64),
    Wake(TenantId, u64),
    Charge(&'static str, Work),
}

/// A bottom that records calls and answers with fixed values: QPs and CQs are numbered in
/// creation order, posts always succeed, polls return nothing.
#[derive(Default)]
pub struct Recorder {
    pub calls: Vec<Call>,
    pub caps: Caps,
    pub now: u64,
    pub tenant: TenantId,
    next_qp: QpNum,
    next_cq: CqId,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }
    /// The send WRs posted, in order, singly or in lists: (qp, wr).
    pub fn sends(&self) -> Vec<(QpNum, SendWr)> {
        self.calls
            .iter()
            .flat_map(|c| match c {
                Call::PostSend(q, w) => vec![(*q, w.clone())],
                Call::PostSendList(q, ws) => ws.iter().map(|w| (*q, w.clone())).collect(),
                _ => Vec::new(),
            })
            .collect()
    }
    pub fn timers(&self) -> Vec<(u64, u64)> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Timer(a, t) => Some((*a, *t)),
                _ => None,
            })
            .collect()
    }
}

impl Verbs for Recorder {
    fn now(&self) -> u64 {
        self.now
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
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        self.calls.push(Call::CreateCq(depth));
        self.next_cq += 1;
        Ok(self.next_cq - 1)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.calls.push(Call::DestroyCq(cq));
        Ok(())
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.calls.push(Call::ReqNotify(cq));
        Ok(())
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        self.calls.push(Call::CreateQp(init.clone()));
        self.next_qp += 1;
        Ok(self.next_qp - 1)
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        self.calls.push(Call::Connect(qp, remote));
        Ok(())
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        self.calls.push(Call::Modify(qp, m));
        Ok(())
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        self.calls.push(Call::Query(qp));
        Ok(QpAttr {
            qpn: qp,
            qp_type: QpType::Rc,
            state: QpState::Rts,
            local_addr: 0,
            udp_sport: 0,
            remote: None,
            retry_cnt: 7,
            rnr_retry: 7,
            cross_channel: false,
            send_cq: 0,
            recv_cq: 0,
            send_outstanding: 0,
        })
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.calls.push(Call::DestroyQp(qp));
        Ok(())
    }
    fn reg_mr(&mut self, addr: u64, len: u64, _: Access) -> Result<MemoryRegion, VerbsError> {
        self.calls.push(Call::RegMr(addr, len));
        Ok(MemoryRegion {
            addr,
            len,
            lkey: 1,
            rkey: 2,
        })
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.calls.push(Call::DeregMr(mr.lkey));
        Ok(())
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.calls.push(Call::PostSend(qp, wr));
        Ok(())
    }
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        self.calls.push(Call::PostSendList(qp, wrs));
        Ok(())
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.calls.push(Call::PostRecv(qp, wr));
        Ok(())
    }
    fn poll_cq(&mut self, cq: CqId, _: usize, _: &mut Vec<WorkCompletion>) -> usize {
        self.calls.push(Call::Poll(cq));
        0
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.calls.push(Call::Timer(at, token));
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.calls.push(Call::Wake(tenant, token));
    }
    fn charge_as(&mut self, layer: &'static str, work: Work) {
        self.calls.push(Call::Charge(layer, work));
    }
}
