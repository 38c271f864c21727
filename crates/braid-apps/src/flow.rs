//! Flow senders and sinks: the traffic patterns' transfers, one message per flow.

use crate::*;
use braid_verbs::rendezvous::{Endpoint, Side};
use std::cell::Cell;
use std::rc::Rc;

/// A reservation of QP numbers made for a tenant below its verbs stack by the runner (the
/// simulator), not a verb: ibverbs has none. When the tenant starts, the runner reserves `n`
/// consecutive numbers on its NIC and sets `base` (the numbers its eager creation would have
/// got); the tenant creates QP `base + i` later by setting `pin` just before `create_qp`, which
/// the runner's bottom verbs take instead of the NIC's next free number. A runner without
/// reservations never gives a plan, and the tenant creates its QPs when it starts.
#[derive(Debug, Default)]
pub struct QpPlan {
    pub n: u32,
    pub base: Cell<QpNum>,
    pub pin: Cell<Option<QpNum>>,
}

impl QpPlan {
    pub fn new(n: u32) -> Rc<Self> {
        Rc::new(QpPlan {
            n,
            ..Default::default()
        })
    }
    /// Whether `qpn` is one of the reserved numbers (once `base` is set).
    pub fn holds(&self, qpn: QpNum) -> bool {
        qpn >= self.base.get() && qpn - self.base.get() < self.n
    }
}

pub struct SendFlow {
    pub flow: u32,
    pub conn: u32,
    pub size: u64,
    pub start: u64,
    pub priority: u8,
    qp: QpNum,
    addr: u64,
}

impl SendFlow {
    pub fn new(flow: u32, conn: u32, size: u64, start: u64, priority: u8) -> Self {
        SendFlow {
            flow,
            conn,
            size,
            start,
            priority,
            qp: 0,
            addr: 0,
        }
    }
}

/// Sends each of its flows as one RDMA WRITE on a QP of its own (as HPCC ns-3 does).
///
/// With a [`QpPlan`] (lazy), a flow's QP (and with it its transport) is created and connected
/// when the flow starts, numbered as it would have been at the sender's start; without one, every
/// flow's QP is created when the sender starts and connected one tick later.
pub struct FlowSender {
    log: SharedMeter,
    plan: Option<Rc<QpPlan>>,
    rdv: Rendezvous,
    flows: Vec<SendFlow>,
    base: u64,
    data_check: bool,
    cq: CqId,
    lkey: u32,
    done: usize,
}

impl FlowSender {
    pub fn new(
        log: SharedMeter,
        rdv: Rendezvous,
        flows: Vec<SendFlow>,
        base: u64,
        data_check: bool,
    ) -> Self {
        FlowSender {
            log,
            plan: None,
            rdv,
            flows,
            base,
            data_check,
            cq: 0,
            lkey: 0,
            done: 0,
        }
    }

    /// Its number of flows.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Creates each flow's QP when the flow starts, at the number `plan` reserves for it
    /// (`plan.n` must be the number of flows).
    pub fn lazy(mut self, plan: Rc<QpPlan>) -> Self {
        assert_eq!(
            plan.n as usize,
            self.flows.len(),
            "one reserved QP per flow"
        );
        self.plan = Some(plan);
        self
    }

    fn init(&self, f: &SendFlow) -> QpInit {
        QpInit {
            priority: Some(f.priority),
            ..QpInit::rc(self.cq)
        }
    }
}

impl App for FlowSender {
    fn start(&mut self, v: &mut dyn Verbs) {
        let total: u64 = self.flows.iter().map(|f| f.size).sum();
        self.cq = v.create_cq(1 << 16).expect("create CQ");
        v.req_notify_cq(self.cq).expect("arm CQ");
        let mr = v
            .reg_mr(self.base, total.max(1), Access::ALL)
            .expect("register memory");
        self.lkey = mr.lkey;
        let mut off = 0;
        let base = self.plan.as_ref().map(|p| p.base.get());
        for i in 0..self.flows.len() {
            let qp = match base {
                Some(b) => b + i as QpNum,
                None => v.create_qp(&self.init(&self.flows[i])).expect("create QP"),
            };
            let f = &mut self.flows[i];
            f.qp = qp;
            f.addr = self.base + off;
            if self.data_check {
                v.write_local(f.addr, &pattern(f.flow, f.size as usize))
                    .expect("fill buffer");
            }
            off += f.size;
            self.rdv.borrow_mut().publish(
                f.conn as u64,
                Side::Client,
                Endpoint {
                    host: v.local_host(),
                    qpn: f.qp,
                    addr: f.addr,
                    rkey: mr.rkey,
                },
            );
            self.log
                .borrow_mut()
                .sending_qp(f.flow, v.local_host(), f.qp);
        }
        v.set_timer(v.now(), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                let lazy = self.plan.is_some();
                for (i, f) in self.flows.iter().enumerate() {
                    if !lazy {
                        let r = lookup(&self.rdv, f.conn, Side::Server);
                        v.connect_qp(f.qp, r.remote()).expect("connect");
                    }
                    v.set_timer(f.start.max(v.now()), i as u64);
                }
            }
            Event::Timer(i) => {
                let f = &self.flows[i as usize];
                let r = lookup(&self.rdv, f.conn, Side::Server);
                if let Some(plan) = &self.plan {
                    // The flow's QP, as the eager sender would have made it at its start.
                    plan.pin.set(Some(f.qp));
                    let qp = v
                        .create_qp(&self.init(f))
                        .expect("create the flow's reserved QP");
                    plan.pin.set(None);
                    assert_eq!(qp, f.qp, "the reserved QP number");
                    v.connect_qp(f.qp, r.remote()).expect("connect");
                }
                let mut wr = SendWr::new(i, SendOp::Write, sges(f.addr, f.size, self.lkey));
                wr.remote_addr = r.addr;
                wr.rkey = r.rkey;
                v.post_send(f.qp, wr).expect("post WRITE");
            }
            Event::Completion(cq) => {
                let mut wcs = Vec::new();
                poll_and_rearm(v, cq, &mut wcs).expect("poll own CQ");
                let mut log = self.log.borrow_mut();
                for wc in wcs {
                    let f = &self.flows[wc.wr_id as usize];
                    self.done += 1;
                    if wc.status != WcStatus::Success {
                        // The connection failed (retries spent, access refused): the flow
                        // never finishes.
                        continue;
                    }
                    log.progress(f.flow, f.size);
                    log.finished(f.flow, v.now());
                }
            }
            Event::Wake(_) => {}
        }
    }

    fn is_done(&self) -> bool {
        self.done == self.flows.len()
    }
}

/// The receiving side of flows: QPs and memory, nothing to post (WRITEs need no RECV).
pub struct FlowSink {
    log: SharedMeter,
    rdv: Rendezvous,
    /// (flow id, connection id, size)
    flows: Vec<(u32, u32, u64)>,
    base: u64,
}

impl FlowSink {
    pub fn new(log: SharedMeter, rdv: Rendezvous, flows: Vec<(u32, u32, u64)>, base: u64) -> Self {
        FlowSink {
            log,
            rdv,
            flows,
            base,
        }
    }
}

impl App for FlowSink {
    fn start(&mut self, v: &mut dyn Verbs) {
        let total: u64 = self.flows.iter().map(|f| f.2).sum();
        let cq = v.create_cq(1 << 16).expect("create CQ");
        let mr = v
            .reg_mr(self.base, total.max(1), Access::ALL)
            .expect("register memory");
        let mut off = 0;
        for &(flow, conn, size) in &self.flows {
            let qp = v.create_qp(&QpInit::rc(cq)).expect("create QP");
            self.rdv.borrow_mut().publish(
                conn as u64,
                Side::Server,
                Endpoint {
                    host: v.local_host(),
                    qpn: qp,
                    addr: self.base + off,
                    rkey: mr.rkey,
                },
            );
            let mut log = self.log.borrow_mut();
            log.receiving_qp(flow, v.local_host(), qp);
            log.landing_at(flow, v.local_host(), self.base + off);
            off += size;
        }
        v.set_timer(v.now(), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(CONNECT) {
            for &(_, conn, _) in &self.flows {
                let me = lookup(&self.rdv, conn, Side::Server);
                let r = lookup(&self.rdv, conn, Side::Client);
                v.connect_qp(me.qpn, r.remote()).expect("connect");
            }
        }
    }

    fn is_done(&self) -> bool {
        true
    }
}
