//! Middleware and stacks of middleware.

use crate::{
    Access, BadWr, Caps, CqId, Event, MemoryRegion, PdId, QpAttr, QpInit, QpModify, QpNum, RecvWr,
    RemoteQp, SendWr, TenantId, Verbs, VerbsError, Work, WorkCompletion,
};

/// A layer between an application and the verbs below it. Every method receives the verbs of the
/// layer below as `below`; the defaults pass the call straight through, so a middleware overrides
/// only what it changes.
pub trait Middleware {
    fn name(&self) -> &'static str;

    /// Called once when the tenant (or the host agent) starts, before the application, lowest
    /// layer first: the moment to create the layer's own QPs, CQs and timers.
    fn start(&mut self, _below: &mut dyn Verbs) {}
    /// The layer's counters for results (`<name>_<counter>` per tenant).
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Tables of rows the layer measured (e.g. one row per solver round), handed to the runner
    /// as they are now; the simulator writes each as `<name>.parquet` with the host and tenant
    /// prepended, rows of every host and tenant with the same name in one table.
    fn tables(&self) -> Vec<crate::LayerTable> {
        Vec::new()
    }
    fn req_notify_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        below.req_notify_cq(cq)
    }
    fn modify_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        below.modify_qp(qp, m)
    }
    fn query_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<QpAttr, VerbsError> {
        below.query_qp(qp)
    }

    fn create_cq(&mut self, below: &mut dyn Verbs, depth: u32) -> Result<CqId, VerbsError> {
        below.create_cq(depth)
    }
    fn destroy_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        below.destroy_cq(cq)
    }
    fn create_qp(&mut self, below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        below.create_qp(init)
    }
    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        below.connect_qp(qp, remote)
    }
    fn destroy_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<(), VerbsError> {
        below.destroy_qp(qp)
    }
    fn reg_mr(
        &mut self,
        below: &mut dyn Verbs,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        below.reg_mr(addr, len, access)
    }
    fn dereg_mr(&mut self, below: &mut dyn Verbs, mr: &MemoryRegion) -> Result<(), VerbsError> {
        below.dereg_mr(mr)
    }
    fn alloc_pd(&mut self, below: &mut dyn Verbs) -> Result<PdId, VerbsError> {
        below.alloc_pd()
    }
    fn dealloc_pd(&mut self, below: &mut dyn Verbs, pd: PdId) -> Result<(), VerbsError> {
        below.dealloc_pd(pd)
    }
    fn reg_mr_in(
        &mut self,
        below: &mut dyn Verbs,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        below.reg_mr_in(pd, addr, len, access)
    }
    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        below.post_send(qp, wr)
    }
    /// A list of send WRs posted with one call (one doorbell). The default posts each WR
    /// through this layer's own [`Middleware::post_send`], so a layer that rewrites, queues or
    /// counts WRs sees every one of them (a list cannot bypass it); a layer that leaves WRs as
    /// they are (the passthrough [`Raw`]) overrides this to pass the list down whole, one doorbell.
    fn post_send_list(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wrs: Vec<SendWr>,
    ) -> Result<(), BadWr> {
        for (index, wr) in wrs.into_iter().enumerate() {
            self.post_send(below, qp, wr)
                .map_err(|error| BadWr { index, error })?;
        }
        Ok(())
    }
    fn post_recv(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        below.post_recv(qp, wr)
    }
    fn poll_cq(
        &mut self,
        below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        below.poll_cq(cq, max, out)
    }
    /// Where the caller's bytes `[addr, addr + len)` live in the address space below this layer,
    /// for [`Verbs::read_local`] and [`Verbs::write_local`] (which the stack maps through every
    /// layer, top down, and then hands to the NIC). The default is the same address; a layer
    /// that remaps its tenants' memory (DRUM's agent puts every region in a slice of its global
    /// buffer) returns where the range lives now, or an error if it does not know the range.
    fn map_local(&self, addr: u64, _len: u64) -> Result<u64, VerbsError> {
        Ok(addr)
    }
    /// An event coming up from below. Push what the layer above should see into `up` (the
    /// default forwards it unchanged). Timers this layer set arrive here with its own token;
    /// completions and wakes travel up through every layer.
    fn on_event(&mut self, _below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        up.push(event);
    }
}

/// The passthrough middleware: plain RDMA.
#[derive(Debug, Default, Clone, Copy)]
pub struct Raw;

impl Middleware for Raw {
    fn name(&self) -> &'static str {
        "raw"
    }
    fn post_send_list(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wrs: Vec<SendWr>,
    ) -> Result<(), BadWr> {
        below.post_send_list(qp, wrs)
    }
}

/// Timer tokens carry the index of the layer that set them in their top byte, so each timer comes
/// back to the layer that asked for it. Applications and middleware may use the low 56 bits.
const TAG_SHIFT: u32 = 56;
const TOKEN_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// A chain of middleware over a bottom implementation, itself usable as [`Verbs`]. The
/// application holds the whole chain (`base == 0`); the layer at index `i` sees the chain below it
/// (`base == i + 1`).
pub struct Stack<'a> {
    layers: &'a mut [Box<dyn Middleware>],
    bottom: &'a mut dyn Verbs,
    base: usize,
    /// Who calls into this (sub-)stack: the layer just above it, or "app"; CPU work it charges
    /// is attributed to it.
    caller: &'static str,
}

impl<'a> Stack<'a> {
    pub fn new(layers: &'a mut [Box<dyn Middleware>], bottom: &'a mut dyn Verbs) -> Self {
        assert!(layers.len() < 255, "at most 254 middleware layers");
        Stack {
            layers,
            bottom,
            base: 0,
            caller: "app",
        }
    }

    /// Starts every layer, the lowest first (each sees the layers below it already started).
    pub fn start_layers(&mut self) {
        for k in (0..self.layers.len()).rev() {
            let (head, tail) = self.layers.split_at_mut(k + 1);
            let mut below = Stack {
                layers: tail,
                bottom: &mut *self.bottom,
                base: self.base + k + 1,
                caller: head[k].name(),
            };
            head[k].start(&mut below);
        }
    }

    /// Every layer's counters, top to bottom: (layer name, counter, value).
    pub fn counters(&self) -> Vec<(&'static str, &'static str, f64)> {
        self.layers
            .iter()
            .flat_map(|l| {
                let n = l.name();
                l.counters().into_iter().map(move |(k, v)| (n, k, v))
            })
            .collect()
    }

    /// Routes an event from the bottom up through the layers; what reaches the top is pushed to
    /// `out` for the application.
    pub fn deliver(&mut self, event: Event, out: &mut Vec<Event>) {
        let (start, first) = match event {
            Event::Timer(t) => {
                let tag = (t >> TAG_SHIFT) as usize;
                let ev = Event::Timer(t & TOKEN_MASK);
                if tag == 0 {
                    out.push(ev);
                    return;
                }
                // Only the layer that set the timer sees it.
                let k = tag - 1 - self.base;
                let mut produced = Vec::new();
                let (head, tail) = self.layers.split_at_mut(k + 1);
                let mut below = Stack {
                    layers: tail,
                    bottom: &mut *self.bottom,
                    base: self.base + k + 1,
                    caller: head[k].name(),
                };
                head[k].on_event(&mut below, ev, &mut produced);
                (k, produced)
            }
            Event::Completion(_) | Event::Wake(_) => (self.layers.len(), vec![event]),
        };
        // Pass what came out of layer `start` (or the NIC) up through layers start-1 .. 0.
        let mut evs = first;
        for j in (0..start).rev() {
            let mut next = Vec::with_capacity(evs.len());
            let (head, tail) = self.layers.split_at_mut(j + 1);
            let mut below = Stack {
                layers: tail,
                bottom: &mut *self.bottom,
                base: self.base + j + 1,
                caller: head[j].name(),
            };
            for ev in evs {
                head[j].on_event(&mut below, ev, &mut next);
            }
            evs = next;
        }
        out.extend(evs);
    }

    /// `[addr, addr + len)` mapped through every layer of this (sub-)stack, top down.
    fn map_down(&self, addr: u64, len: u64) -> Result<u64, VerbsError> {
        self.layers
            .iter()
            .try_fold(addr, |a, l| l.map_local(a, len))
    }

    fn split(&mut self) -> Option<(&mut Box<dyn Middleware>, Stack<'_>)> {
        let base = self.base;
        let (first, rest) = self.layers.split_first_mut()?;
        let caller = first.name();
        Some((
            first,
            Stack {
                layers: rest,
                bottom: &mut *self.bottom,
                base: base + 1,
                caller,
            },
        ))
    }
}

macro_rules! thread {
    ($self:ident, $method:ident ( $($arg:expr),* )) => {
        match $self.split() {
            Some((layer, mut below)) => layer.$method(&mut below, $($arg),*),
            None => $self.bottom.$method($($arg),*),
        }
    };
}

impl Verbs for Stack<'_> {
    fn now(&self) -> u64 {
        self.bottom.now()
    }
    fn local_host(&self) -> u32 {
        self.bottom.local_host()
    }
    fn caps(&self) -> &Caps {
        self.bottom.caps()
    }
    fn tenant(&self) -> TenantId {
        self.bottom.tenant()
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        thread!(self, req_notify_cq(cq))
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        thread!(self, modify_qp(qp, m))
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        thread!(self, query_qp(qp))
    }
    fn wake(&mut self, tenant: TenantId, token: u64) {
        self.bottom.wake(tenant, token)
    }
    fn charge(&mut self, work: Work) {
        self.bottom.charge_as(self.caller, work)
    }
    fn charge_as(&mut self, layer: &'static str, work: Work) {
        self.bottom.charge_as(layer, work)
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId, VerbsError> {
        thread!(self, create_cq(depth))
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        thread!(self, destroy_cq(cq))
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        thread!(self, create_qp(init))
    }
    fn connect_qp(&mut self, qp: QpNum, remote: RemoteQp) -> Result<(), VerbsError> {
        thread!(self, connect_qp(qp, remote))
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        thread!(self, destroy_qp(qp))
    }
    fn reg_mr(&mut self, addr: u64, len: u64, access: Access) -> Result<MemoryRegion, VerbsError> {
        thread!(self, reg_mr(addr, len, access))
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        thread!(self, dereg_mr(mr))
    }
    fn alloc_pd(&mut self) -> Result<PdId, VerbsError> {
        thread!(self, alloc_pd())
    }
    fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        thread!(self, dealloc_pd(pd))
    }
    fn reg_mr_in(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        thread!(self, reg_mr_in(pd, addr, len, access))
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        thread!(self, post_send(qp, wr))
    }
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        thread!(self, post_send_list(qp, wrs))
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        thread!(self, post_recv(qp, wr))
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        thread!(self, poll_cq(cq, max, out))
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        assert!(token <= TOKEN_MASK, "timer tokens are limited to 56 bits");
        self.bottom
            .set_timer(at, ((self.base as u64) << TAG_SHIFT) | token);
    }
    fn write_local(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        let a = self.map_down(addr, data.len() as u64)?;
        self.bottom.write_local(a, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        let a = self.map_down(addr, len)?;
        self.bottom.read_local(a, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Call, Recorder};
    use crate::{SendOp, Sge};

    /// Splits every send into two and counts its own timer.
    struct Splitter {
        fired: u32,
    }
    impl Middleware for Splitter {
        fn name(&self) -> &'static str {
            "splitter"
        }
        fn post_send(
            &mut self,
            below: &mut dyn Verbs,
            qp: QpNum,
            wr: SendWr,
        ) -> Result<(), VerbsError> {
            below.set_timer(10, 42);
            below.post_send(
                qp,
                SendWr {
                    wr_id: wr.wr_id * 10,
                    ..wr.clone()
                },
            )?;
            below.post_send(
                qp,
                SendWr {
                    wr_id: wr.wr_id * 10 + 1,
                    ..wr
                },
            )
        }
        fn on_event(&mut self, _: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
            match event {
                Event::Timer(42) => self.fired += 1,
                e => up.push(e),
            }
        }
    }

    fn wr(id: u64) -> SendWr {
        SendWr::new(
            id,
            SendOp::Write,
            vec![Sge {
                addr: 0,
                length: 8,
                lkey: 1,
            }],
        )
    }

    #[test]
    fn layers_stack_and_timers_return_to_their_owner() {
        let mut bottom = Recorder::new();
        let mut layers: Vec<Box<dyn Middleware>> = vec![
            Box::new(Raw),
            Box::new(Splitter { fired: 0 }),
            Box::new(Splitter { fired: 0 }),
        ];
        {
            let mut s = Stack::new(&mut layers, &mut bottom);
            s.post_send(3, wr(1)).unwrap();
            s.set_timer(5, 99);
        }
        // Two splitters: 1 -> 10, 11 -> 100, 101, 110, 111.
        assert_eq!(
            bottom.sends().iter().map(|s| s.1.wr_id).collect::<Vec<_>>(),
            vec![100, 101, 110, 111]
        );
        // The app's timer is untagged; each splitter's carries its layer's tag.
        let timers = bottom.timers();
        assert!(timers.contains(&(5, 99)));
        let mut out = Vec::new();
        for (_, tok) in timers {
            let mut s = Stack::new(&mut layers, &mut bottom);
            s.deliver(Event::Timer(tok), &mut out);
        }
        assert_eq!(out, vec![Event::Timer(99)]);
        // The outer splitter (index 1) set one timer, the inner (index 2) set two.
        let mut s = Stack::new(&mut layers, &mut bottom);
        s.deliver(Event::Completion(4), &mut out);
        assert_eq!(out.last(), Some(&Event::Completion(4)));
    }

    #[test]
    fn a_post_list_goes_down_whole_through_layers_that_do_not_take_it() {
        let mut bottom = Recorder::new();
        let mut layers: Vec<Box<dyn Middleware>> = vec![Box::new(Raw), Box::new(Raw)];
        {
            let mut s = Stack::new(&mut layers, &mut bottom);
            s.post_send_list(3, vec![wr(1), wr(2), wr(3)]).unwrap();
        }
        assert_eq!(bottom.calls.len(), 1);
        assert!(matches!(&bottom.calls[0], Call::PostSendList(3, ws) if ws.len() == 3));
        assert_eq!(
            bottom.sends().iter().map(|s| s.1.wr_id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }

    /// Renumbers every WR it is given (a layer that rewrites WRs and does not override
    /// `post_send_list`).
    struct Renumber;
    impl Middleware for Renumber {
        fn name(&self) -> &'static str {
            "renumber"
        }
        fn post_send(
            &mut self,
            below: &mut dyn Verbs,
            qp: QpNum,
            mut wr: SendWr,
        ) -> Result<(), VerbsError> {
            wr.wr_id += 1000;
            below.post_send(qp, wr)
        }
    }

    #[test]
    fn a_post_list_cannot_bypass_a_layer_that_rewrites_wrs() {
        let mut bottom = Recorder::new();
        let mut layers: Vec<Box<dyn Middleware>> = vec![Box::new(Raw), Box::new(Renumber)];
        {
            let mut s = Stack::new(&mut layers, &mut bottom);
            s.post_send_list(3, vec![wr(1), wr(2)]).unwrap();
        }
        assert_eq!(
            bottom.sends().iter().map(|s| s.1.wr_id).collect::<Vec<_>>(),
            vec![1001, 1002]
        );
    }

    /// Charges one WR built per post it passes down, and counts wakes it sees.
    #[derive(Default)]
    struct Counting {
        wakes: u32,
        started: bool,
    }
    impl Middleware for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn start(&mut self, below: &mut dyn Verbs) {
            self.started = true;
            below.charge(Work::Ns(5));
        }
        fn post_send(
            &mut self,
            below: &mut dyn Verbs,
            qp: QpNum,
            wr: SendWr,
        ) -> Result<(), VerbsError> {
            below.charge(Work::WrBuilt(1));
            below.post_send(qp, wr)
        }
        fn on_event(&mut self, _: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
            if let Event::Wake(7) = event {
                self.wakes += 1;
            } else {
                up.push(event);
            }
        }
        fn counters(&self) -> Vec<(&'static str, f64)> {
            vec![("wakes", self.wakes as f64)]
        }
    }

    #[test]
    fn charges_are_attributed_to_the_calling_layer_and_wakes_travel_up() {
        let mut bottom = Recorder::new();
        let mut layers: Vec<Box<dyn Middleware>> = vec![Box::new(Counting::default())];
        let mut out = Vec::new();
        {
            let mut s = Stack::new(&mut layers, &mut bottom);
            s.start_layers();
            s.charge(Work::Copy(100));
            s.post_send(1, wr(1)).unwrap();
            s.deliver(Event::Wake(7), &mut out);
            s.deliver(Event::Wake(8), &mut out);
            assert_eq!(s.counters(), vec![("counting", "wakes", 1.0)]);
        }
        assert_eq!(out, vec![Event::Wake(8)]);
        let charges: Vec<_> = bottom
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Charge(who, w) => Some((*who, *w)),
                _ => None,
            })
            .collect();
        assert_eq!(
            charges,
            vec![
                ("counting", Work::Ns(5)),
                ("app", Work::Copy(100)),
                ("counting", Work::WrBuilt(1))
            ]
        );
    }
}
