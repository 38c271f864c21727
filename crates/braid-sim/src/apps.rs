//! Applications, written against the verbs seam only (they run unchanged over any stack):
//! flow senders and sinks for traffic patterns, and perftest-like benchmarks
//! (`write_bw`, `write_lat`, `send_bw`, `read_bw`).
//!
//! Connection setup happens out of band, as with rdma_cm: each side creates its QPs when it
//! starts and publishes them on a board (`braid_verbs::rendezvous`); one timer tick later (after
//! every application has started) both sides connect.

use crate::config::{AppKind, AppSpec};
use crate::measure::{FlowRecord, SharedLog};
use braid_verbs::rendezvous::{connect_all, Endpoint, Side, SharedBoard};
use braid_verbs::*;

/// The board a run's applications exchange endpoints on.
pub type Rendezvous = SharedBoard;

/// Timer token for "every application has started: connect now".
const CONNECT: u64 = (1 << 56) - 1;

fn lookup(rdv: &Rendezvous, conn: u32, side: Side) -> Endpoint {
    rdv.borrow()
        .lookup(conn as u64, side)
        .expect("both sides publish before connecting")
}

/// Fills a buffer with a pattern unique to (flow, offset), for data checking.
pub fn pattern(flow: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(31) ^ flow.wrapping_mul(0x9E37) ^ (i as u32 >> 8)) as u8)
        .collect()
}

fn sges(addr: u64, len: u64, lkey: u32) -> Vec<Sge> {
    // SGE lengths are 32-bit: split large buffers.
    let mut v = Vec::new();
    let mut off = 0;
    while off < len || v.is_empty() {
        let l = (len - off).min(1 << 30);
        v.push(Sge {
            addr: addr + off,
            length: l as u32,
            lkey,
        });
        off += l;
        if l == 0 {
            break;
        }
    }
    v
}

// ---------------------------------------------------------------------------- flows

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
pub struct FlowSender {
    log: SharedLog,
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
        log: SharedLog,
        rdv: Rendezvous,
        flows: Vec<SendFlow>,
        base: u64,
        data_check: bool,
    ) -> Self {
        FlowSender {
            log,
            rdv,
            flows,
            base,
            data_check,
            cq: 0,
            lkey: 0,
            done: 0,
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
        for f in &mut self.flows {
            f.qp = v
                .create_qp(&QpInit {
                    priority: Some(f.priority),
                    ..QpInit::rc(self.cq)
                })
                .expect("create QP");
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
            self.log.borrow_mut().flows[f.flow as usize].src_qp = Some((v.local_host(), f.qp));
        }
        v.set_timer(v.now(), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                for (i, f) in self.flows.iter().enumerate() {
                    let r = lookup(&self.rdv, f.conn, Side::Server);
                    v.connect_qp(f.qp, r.remote()).expect("connect");
                    v.set_timer(f.start.max(v.now()), i as u64);
                }
            }
            Event::Timer(i) => {
                let f = &self.flows[i as usize];
                let r = lookup(&self.rdv, f.conn, Side::Server);
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
                    log.flows[f.flow as usize].bytes_done = f.size;
                    log.finish(f.flow, v.now());
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
    log: SharedLog,
    rdv: Rendezvous,
    /// (flow id, connection id, size)
    flows: Vec<(u32, u32, u64)>,
    base: u64,
}

impl FlowSink {
    pub fn new(log: SharedLog, rdv: Rendezvous, flows: Vec<(u32, u32, u64)>, base: u64) -> Self {
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
            log.rx_qp_flow.insert((v.local_host(), qp), flow);
            log.flows[flow as usize].dst_addr = Some((v.local_host(), self.base + off));
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

// ---------------------------------------------------------------------------- perftest

/// The client side of a perftest-like benchmark: posts the work and measures.
pub struct PerfClient {
    spec: AppSpec,
    flow: u32,
    conn0: u32,
    log: SharedLog,
    rdv: Rendezvous,
    base: u64,
    cq: CqId,
    lkey: u32,
    qps: Vec<QpNum>,
    remote: Vec<Endpoint>,
    posted: Vec<u64>,
    completed: Vec<u64>,
    target: u64,
    deadline: Option<u64>,
    lat_sent: Vec<u64>,
    done: bool,
    /// QPs whose WRs failed (the QP is in Error): nothing more is posted on them, and the
    /// flow never finishes.
    failed: Vec<bool>,
    /// Which messages carry the synchronise flag (`sync_ratio`), drawn from the run's seed.
    sync_rng: braid_engine::RngStream,
}

impl PerfClient {
    /// `seed` and `app` (the application's index in the scenario) seed the choice of
    /// synchronise messages.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        spec: AppSpec,
        flow: u32,
        conn0: u32,
        log: SharedLog,
        rdv: Rendezvous,
        base: u64,
        seed: u64,
        app: u64,
    ) -> Self {
        let target = match (spec.iterations, spec.duration) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => 1000,
        };
        PerfClient {
            spec,
            flow,
            conn0,
            log,
            rdv,
            base,
            cq: 0,
            lkey: 0,
            qps: vec![],
            remote: vec![],
            posted: vec![],
            completed: vec![],
            target,
            deadline: None,
            lat_sent: vec![],
            done: false,
            failed: vec![],
            sync_rng: braid_engine::RngStream::new(seed, "app-sync", &[app]),
        }
    }

    fn size(&self) -> u64 {
        self.spec.size.0
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        let op = match self.spec.kind {
            AppKind::WriteBw => SendOp::Write,
            AppKind::ReadBw => SendOp::Read,
            AppKind::SendBw => SendOp::Send,
            AppKind::WriteLat => SendOp::WriteWithImm(self.posted[i] as u32),
        };
        let addr = self.base + i as u64 * self.size().max(1);
        let mut wr = SendWr::new(i as u64, op, sges(addr, self.size(), self.lkey));
        wr.remote_addr = self.remote[i].addr;
        wr.rkey = self.remote[i].rkey;
        // A fraction of the stream is flagged synchronise (MP-RDMA §5.2.5).
        wr.fence = self.spec.sync_ratio > 0.0 && self.sync_rng.bernoulli(self.spec.sync_ratio);
        // perftest --cq-mod: only every n-th WR asks for a completion.
        wr.signaled = (self.posted[i] + 1) % self.spec.cq_mod as u64 == 0
            || self.posted[i] + 1 == self.target;
        if v.post_send(self.qps[i], wr).is_ok() {
            self.posted[i] += 1;
        }
    }

    fn may_post(&self, i: usize, now: u64) -> bool {
        !self.failed[i] && self.posted[i] < self.target && self.deadline.is_none_or(|d| now < d)
    }

    fn check_done(&mut self, now: u64) {
        let all_in = (0..self.qps.len())
            .all(|i| self.completed[i] >= self.posted[i] && !self.may_post(i, now));
        if all_in && !self.done {
            self.done = true;
            if !self.failed.iter().any(|&f| f) {
                self.log.borrow_mut().finish(self.flow, now);
            }
        }
    }
}

impl App for PerfClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.spec.qps as usize;
        self.cq = v.create_cq(1 << 16).expect("create CQ");
        v.req_notify_cq(self.cq).expect("arm CQ");
        let mr = v
            .reg_mr(self.base, (self.size().max(1)) * n as u64, Access::ALL)
            .expect("register memory");
        self.lkey = mr.lkey;
        for i in 0..n {
            let qp = v
                .create_qp(&QpInit {
                    priority: self.spec.priority,
                    ..QpInit::rc(self.cq)
                })
                .expect("create QP");
            self.qps.push(qp);
            if i == 0 {
                self.log.borrow_mut().flows[self.flow as usize].src_qp = Some((v.local_host(), qp));
            }
            self.rdv.borrow_mut().publish(
                (self.conn0 + i as u32) as u64,
                Side::Client,
                Endpoint {
                    host: v.local_host(),
                    qpn: qp,
                    addr: self.base + i as u64 * self.size(),
                    rkey: mr.rkey,
                },
            );
            if self.spec.kind == AppKind::ReadBw {
                self.log
                    .borrow_mut()
                    .rx_qp_flow
                    .insert((v.local_host(), qp), self.flow);
            }
        }
        self.posted = vec![0; n];
        self.completed = vec![0; n];
        self.failed = vec![false; n];
        self.lat_sent = vec![0; n];
        v.set_timer(v.now().max(self.spec.start.0), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        let now = v.now();
        match ev {
            Event::Timer(CONNECT) => {
                self.remote = connect_all(v, &self.rdv, self.conn0 as u64, Side::Client, &self.qps)
                    .expect("connect");
                self.log.borrow_mut().flows[self.flow as usize].start_ps = now;
                self.deadline = self.spec.duration.map(|d| now + d.0);
                if let Some(d) = self.deadline {
                    v.set_timer(d, CONNECT - 1);
                }
                for i in 0..self.qps.len() {
                    if self.spec.kind == AppKind::WriteLat {
                        let len = self.size();
                        let _ = v.post_recv(
                            self.qps[i],
                            RecvWr {
                                wr_id: i as u64,
                                sg_list: sges(self.base, len, self.lkey),
                            },
                        );
                        self.lat_sent[i] = now;
                        self.post_one(v, i);
                    } else {
                        let depth = self.spec.tx_depth as u64;
                        for _ in 0..depth {
                            if !self.may_post(i, now) {
                                break;
                            }
                            self.post_one(v, i);
                        }
                    }
                }
            }
            Event::Timer(_) => self.check_done(now),
            Event::Wake(_) => {}
            Event::Completion(cq) => {
                let mut wcs = Vec::new();
                poll_and_rearm(v, cq, &mut wcs).expect("poll own CQ");
                for wc in wcs {
                    let i = wc.wr_id as usize % self.qps.len().max(1);
                    if wc.status != WcStatus::Success {
                        // The QP is in Error: the rest of its WRs are flushed; post no more.
                        self.failed[i] = true;
                        self.completed[i] = self.posted[i];
                        continue;
                    }
                    match (self.spec.kind, wc.opcode) {
                        (AppKind::WriteLat, WcOpcode::RecvWithImm) => {
                            // Pong arrived: one round trip.
                            self.completed[i] += 1;
                            {
                                let mut log = self.log.borrow_mut();
                                let f = &mut log.flows[self.flow as usize];
                                f.latencies.push(now - self.lat_sent[i]);
                                f.bytes_done += self.size();
                            }
                            if self.may_post(i, now) {
                                let len = self.size();
                                let _ = v.post_recv(
                                    self.qps[i],
                                    RecvWr {
                                        wr_id: i as u64,
                                        sg_list: sges(self.base, len, self.lkey),
                                    },
                                );
                                self.lat_sent[i] = now;
                                self.post_one(v, i);
                            }
                        }
                        (AppKind::WriteLat, _) => {}
                        _ => {
                            // A signaled completion stands for cq_mod WRs (or the remainder).
                            let n = (self.posted[i] - self.completed[i])
                                .min(self.spec.cq_mod as u64)
                                .max(1);
                            self.completed[i] += n;
                            self.log.borrow_mut().flows[self.flow as usize].bytes_done +=
                                n * self.size();
                            for _ in 0..n {
                                if self.may_post(i, now) {
                                    self.post_one(v, i);
                                }
                            }
                        }
                    }
                }
                self.check_done(now);
            }
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

/// The server side: memory to WRITE into / READ from, RECVs for SEND, the pong of write_lat.
pub struct PerfServer {
    spec: AppSpec,
    flow: u32,
    conn0: u32,
    log: SharedLog,
    rdv: Rendezvous,
    base: u64,
    lkey: u32,
    qps: Vec<QpNum>,
    remote: Vec<Endpoint>,
    seq: u64,
}

impl PerfServer {
    pub fn new(
        spec: AppSpec,
        flow: u32,
        conn0: u32,
        log: SharedLog,
        rdv: Rendezvous,
        base: u64,
    ) -> Self {
        PerfServer {
            spec,
            flow,
            conn0,
            log,
            rdv,
            base,
            lkey: 0,
            qps: vec![],
            remote: vec![],
            seq: 0,
        }
    }

    fn post_recvs(&mut self, v: &mut dyn Verbs, i: usize, n: u32) {
        let len = self.spec.size.0;
        for _ in 0..n {
            let addr = self.base + i as u64 * len.max(1);
            let _ = v.post_recv(
                self.qps[i],
                RecvWr {
                    wr_id: i as u64,
                    sg_list: sges(addr, len, self.lkey),
                },
            );
        }
    }
}

impl App for PerfServer {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.spec.qps as usize;
        let size = self.spec.size.0.max(1);
        let cq = v.create_cq(1 << 16).expect("create CQ");
        v.req_notify_cq(cq).expect("arm CQ");
        let mr = v
            .reg_mr(self.base, size * n as u64, Access::ALL)
            .expect("register memory");
        self.lkey = mr.lkey;
        for i in 0..n {
            let qp = v
                .create_qp(&QpInit {
                    priority: self.spec.priority,
                    ..QpInit::rc(cq)
                })
                .expect("create QP");
            self.qps.push(qp);
            self.rdv.borrow_mut().publish(
                (self.conn0 + i as u32) as u64,
                Side::Server,
                Endpoint {
                    host: v.local_host(),
                    qpn: qp,
                    addr: self.base + i as u64 * size,
                    rkey: mr.rkey,
                },
            );
            if self.spec.kind != AppKind::ReadBw {
                self.log
                    .borrow_mut()
                    .rx_qp_flow
                    .insert((v.local_host(), qp), self.flow);
            }
        }
        v.set_timer(v.now().max(self.spec.start.0), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                self.remote = connect_all(v, &self.rdv, self.conn0 as u64, Side::Server, &self.qps)
                    .expect("connect");
                for i in 0..self.qps.len() {
                    let depth = match self.spec.kind {
                        AppKind::SendBw => (self.spec.tx_depth * 2).max(64),
                        AppKind::WriteLat => 1,
                        _ => 0,
                    };
                    self.post_recvs(v, i, depth);
                }
            }
            Event::Timer(_) | Event::Wake(_) => {}
            Event::Completion(cq) => {
                let mut wcs = Vec::new();
                poll_and_rearm(v, cq, &mut wcs).expect("poll own CQ");
                for wc in wcs {
                    let i = wc.wr_id as usize % self.qps.len().max(1);
                    if wc.status != WcStatus::Success {
                        // Flushed (the QP is in Error): reposting would only flush again.
                        continue;
                    }
                    match wc.opcode {
                        WcOpcode::Recv | WcOpcode::RecvWithImm => {
                            self.post_recvs(v, i, 1);
                            if self.spec.kind == AppKind::WriteLat {
                                // Pong.
                                self.seq += 1;
                                let len = self.spec.size.0;
                                let addr = self.base + i as u64 * len.max(1);
                                let mut wr = SendWr::new(
                                    i as u64,
                                    SendOp::WriteWithImm(self.seq as u32),
                                    sges(addr, len, self.lkey),
                                );
                                wr.remote_addr = self.remote[i].addr;
                                wr.rkey = self.remote[i].rkey;
                                wr.signaled = false;
                                let _ = v.post_send(self.qps[i], wr);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let _ = &self.log;
    }

    fn is_done(&self) -> bool {
        true
    }
}

/// The flow record a perftest application starts with.
pub fn perf_record(spec: &AppSpec, src: u32, dst: u32) -> FlowRecord {
    let kind = match spec.kind {
        AppKind::WriteBw => "write_bw",
        AppKind::WriteLat => "write_lat",
        AppKind::SendBw => "send_bw",
        AppKind::ReadBw => "read_bw",
    };
    FlowRecord {
        id: 0,
        kind,
        src,
        dst,
        size: spec
            .iterations
            .map(|n| n * spec.size.0 * spec.qps as u64)
            .unwrap_or(0),
        start_ps: spec.start.0,
        finish_ps: None,
        src_qp: None,
        dst_addr: None,
        bytes_done: 0,
        latencies: vec![],
        msg_bytes: spec.size.0,
    }
}
