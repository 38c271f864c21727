//! Middleware and stacks of middleware.

use crate::{
    Access, CqId, Event, MemoryRegion, QpInit, QpNum, RecvWr, RemoteQp, SendWr, Verbs, VerbsError,
    WorkCompletion,
};

/// A layer between an application and the verbs below it. Every method receives the verbs of the
/// layer below as `below`; the defaults pass the call straight through, so a middleware overrides
/// only what it changes.
pub trait Middleware {
    fn name(&self) -> &'static str;

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
    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        below.post_send(qp, wr)
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
    /// An event coming up from below. Push what the layer above should see into `up` (the
    /// default forwards it unchanged). Timers this layer set arrive here with its own token.
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
}

impl<'a> Stack<'a> {
    pub fn new(layers: &'a mut [Box<dyn Middleware>], bottom: &'a mut dyn Verbs) -> Self {
        assert!(layers.len() < 255, "at most 254 middleware layers");
        Stack {
            layers,
            bottom,
            base: 0,
        }
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
                };
                head[k].on_event(&mut below, ev, &mut produced);
                (k, produced)
            }
            Event::Completion(_) => (self.layers.len(), vec![event]),
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
            };
            for ev in evs {
                head[j].on_event(&mut below, ev, &mut next);
            }
            evs = next;
        }
        out.extend(evs);
    }

    fn split(&mut self) -> Option<(&mut Box<dyn Middleware>, Stack<'_>)> {
        let base = self.base;
        let (first, rest) = self.layers.split_first_mut()?;
        Some((
            first,
            Stack {
                layers: rest,
                bottom: &mut *self.bottom,
                base: base + 1,
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
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        thread!(self, post_send(qp, wr))
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
        self.bottom.write_local(addr, data)
    }
    fn read_local(&self, addr: u64, len: u64) -> Result<Vec<u8>, VerbsError> {
        self.bottom.read_local(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SendOp, Sge};

    /// A bottom that records calls.
    #[derive(Default)]
    struct Recorder {
        sends: Vec<(QpNum, u64)>,
        timers: Vec<(u64, u64)>,
    }
    impl Verbs for Recorder {
        fn now(&self) -> u64 {
            0
        }
        fn local_host(&self) -> u32 {
            0
        }
        fn create_cq(&mut self, _: u32) -> Result<CqId, VerbsError> {
            Ok(1)
        }
        fn destroy_cq(&mut self, _: CqId) -> Result<(), VerbsError> {
            Ok(())
        }
        fn create_qp(&mut self, _: &QpInit) -> Result<QpNum, VerbsError> {
            Ok(7)
        }
        fn connect_qp(&mut self, _: QpNum, _: RemoteQp) -> Result<(), VerbsError> {
            Ok(())
        }
        fn destroy_qp(&mut self, _: QpNum) -> Result<(), VerbsError> {
            Ok(())
        }
        fn reg_mr(&mut self, addr: u64, len: u64, _: Access) -> Result<MemoryRegion, VerbsError> {
            Ok(MemoryRegion {
                addr,
                len,
                lkey: 1,
                rkey: 2,
            })
        }
        fn dereg_mr(&mut self, _: &MemoryRegion) -> Result<(), VerbsError> {
            Ok(())
        }
        fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
            self.sends.push((qp, wr.wr_id));
            Ok(())
        }
        fn post_recv(&mut self, _: QpNum, _: RecvWr) -> Result<(), VerbsError> {
            Ok(())
        }
        fn poll_cq(&mut self, _: CqId, _: usize, _: &mut Vec<WorkCompletion>) -> usize {
            0
        }
        fn set_timer(&mut self, at: u64, token: u64) {
            self.timers.push((at, token));
        }
    }

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
        let mut bottom = Recorder::default();
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
            bottom.sends.iter().map(|s| s.1).collect::<Vec<_>>(),
            vec![100, 101, 110, 111]
        );
        // The app's timer is untagged; each splitter's carries its layer's tag.
        let timers = bottom.timers.clone();
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
}
