//! The simulated RNIC seen through the verbs seam: what applications and middleware call.

use crate::nic::{Effects, Nic, NicParams};
use braid_engine::Time;
use braid_verbs::*;
use std::collections::HashMap;

/// What verbs calls asked of the world (carried out after the call returns).
#[derive(Default)]
pub struct HostSink {
    pub timers: Vec<(Time, u64)>,
    pub effects: Effects,
}

pub struct HostVerbs<'a> {
    pub nic: &'a mut Nic,
    pub params: &'a NicParams,
    pub now: Time,
    pub host_index: u32,
    /// The application whose stack this is: CQs it creates deliver their events to it.
    pub app: u32,
    pub sink: &'a mut HostSink,
    pub cq_owner: &'a mut HashMap<u32, u32>,
}

impl Verbs for HostVerbs<'_> {
    fn now(&self) -> u64 {
        self.now
    }
    /// A host's address is its node id (what packets carry).
    fn local_host(&self) -> u32 {
        self.nic.host
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        let cq = self.nic.create_cq(depth);
        self.cq_owner.insert(cq, self.app);
        Ok(cq)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.nic.destroy_cq(cq)?;
        self.cq_owner.remove(&cq);
        Ok(())
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        self.nic.create_qp(init, self.params)
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        self.nic.connect_qp(qp, remote)
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.nic.destroy_qp(qp, &mut self.sink.effects)
    }
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError> {
        self.nic.mem.register(addr, len, access)
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.nic.mem.deregister(mr)
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.nic
            .post_send(qp, wr, self.now, self.params, &mut self.sink.effects)
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.nic.post_recv(qp, wr, &mut self.sink.effects)
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        self.nic.poll_cq(cq, max, out)
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.sink.timers.push((at, token));
    }
    fn write_local(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        if !self.nic.mem.track_data {
            return Err(VerbsError::Unsupported(
                "memory contents are tracked only with nic.data_check = true",
            ));
        }
        self.nic.mem.write(addr, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        if !self.nic.mem.track_data {
            return Err(VerbsError::Unsupported(
                "memory contents are tracked only with nic.data_check = true",
            ));
        }
        self.nic.mem.read(addr, len)
    }
}
