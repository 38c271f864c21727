//! What an application's calls go through: its verbs stack, plus one piece of bookkeeping the
//! measurements need. A multipath layer (data partition, Virtuoso) serves one application QP
//! with several NIC QPs that it creates inside the application's `create_qp` or `connect_qp`
//! call. The flow log knows only the application's QP, so the bytes the other QPs receive would
//! be missing from its goodput series and delivery checks. `Facing` notes which NIC QPs were
//! created during each such call and files them under the application's QP
//! (`Owners::family`). Nothing here is visible to the application or the middleware.

use braid_verbs::*;
use std::cell::RefCell;

pub struct Facing<'s, 'a> {
    pub stack: &'s mut Stack<'a>,
    /// Every QP the tenant's bottom verbs created during this callback, in order.
    pub created: &'s RefCell<Vec<QpNum>>,
    /// (NIC QP, the application QP it serves), collected for `Owners::family`.
    pub family: Vec<(QpNum, QpNum)>,
}

impl Facing<'_, '_> {
    fn adopt(&mut self, mark: usize, head: QpNum) {
        let created = self.created.borrow();
        for &q in &created[mark.min(created.len())..] {
            if q != head {
                self.family.push((q, head));
            }
        }
    }
}

impl Verbs for Facing<'_, '_> {
    fn now(&self) -> u64 {
        self.stack.now()
    }
    fn local_host(&self) -> u32 {
        self.stack.local_host()
    }
    fn caps(&self) -> &Caps {
        self.stack.caps()
    }
    fn tenant(&self) -> TenantId {
        self.stack.tenant()
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        self.stack.create_cq(depth)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.stack.destroy_cq(cq)
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.stack.req_notify_cq(cq)
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        let mark = self.created.borrow().len();
        let qp = self.stack.create_qp(init)?;
        self.adopt(mark, qp);
        Ok(qp)
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        let mark = self.created.borrow().len();
        let r = self.stack.connect_qp(qp, remote);
        self.adopt(mark, qp);
        r
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        self.stack.modify_qp(qp, m)
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        self.stack.query_qp(qp)
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.stack.destroy_qp(qp)
    }
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError> {
        self.stack.reg_mr(addr, len, access)
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.stack.dereg_mr(mr)
    }
    fn alloc_pd(&mut self) -> Result<PdId, VerbsError> {
        self.stack.alloc_pd()
    }
    fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        self.stack.dealloc_pd(pd)
    }
    fn reg_mr_in(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        self.stack.reg_mr_in(pd, addr, len, access)
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.stack.post_send(qp, wr)
    }
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        // Forwarded, not left to the default: a list is one doorbell.
        self.stack.post_send_list(qp, wrs)
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.stack.post_recv(qp, wr)
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        self.stack.poll_cq(cq, max, out)
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.stack.set_timer(at, token)
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.stack.wake(tenant, token)
    }
    fn charge(&mut self, work: Work) {
        self.stack.charge(work)
    }
    fn charge_as(&mut self, layer: &'static str, work: Work) {
        self.stack.charge_as(layer, work)
    }
    fn write_local(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.stack.write_local(addr, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        self.stack.read_local(addr, len)
    }
}
