//! Applications, written against the verbs seam only (they run unchanged over any stack and over
//! any NIC, simulated or real): flow senders and sinks for traffic patterns, and perftest-like
//! benchmarks (`write_bw`, `write_lat`, `send_bw`, `read_bw`). What they measure goes to a
//! [`Meter`], which the simulator implements with its flow log and a real-NIC runner with its own.
//!
//! Connection setup happens out of band, as with rdma_cm: each side creates its QPs when it
//! starts and publishes them on a board (`braid_verbs::rendezvous`); one timer tick later (after
//! every application has started) both sides connect.

use braid_verbs::rendezvous::{connect_all, Endpoint, SharedBoard, Side};
use braid_verbs::*;

pub mod kv;
pub mod redis;
pub mod rpc;
pub use kv::{KvClient, KvDraw};
pub use rpc::{Op, Req, ReqDraw, RpcClient, RpcServer, RpcSpec, RpcStats, Wire};

/// Connects `qps` (connections `conn0 + i`, client side) to their servers; returns the servers'
/// endpoints.
pub(crate) fn lookup_all(
    v: &mut dyn Verbs,
    rdv: &Rendezvous,
    conn0: u32,
    qps: &[QpNum],
) -> Vec<Endpoint> {
    connect_all(v, rdv, conn0 as u64, Side::Client, qps).expect("connect")
}

/// Where applications report what they measure, by flow (a traffic transfer, or one perftest
/// application's run).
pub trait Meter {
    /// The QP that sends a flow's data.
    fn sending_qp(&mut self, flow: u32, host: u32, qp: QpNum);
    /// A QP that receives a flow's data (for goodput series and conservation checks).
    fn receiving_qp(&mut self, flow: u32, host: u32, qp: QpNum);
    /// Where a flow's bytes land (for data checks).
    fn landing_at(&mut self, flow: u32, host: u32, addr: u64);
    /// The measurement starts (connections up).
    fn started(&mut self, flow: u32, at: u64);
    /// More bytes of the flow completed.
    fn progress(&mut self, flow: u32, bytes: u64);
    /// A round-trip sample, picoseconds.
    fn latency(&mut self, flow: u32, ps: u64);
    fn finished(&mut self, flow: u32, at: u64);
}

/// A meter shared by a run's applications.
pub type SharedMeter = std::rc::Rc<std::cell::RefCell<dyn Meter>>;

/// perftest's benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfKind {
    WriteBw,
    WriteLat,
    SendBw,
    ReadBw,
    /// WRITEs whose every completion time (post to completion) is a latency sample: the
    /// per-WQE completion time of DRUM's test case 1 (signals every WR).
    WqeLat,
    /// READs, one outstanding per QP, each one's post-to-completion time a latency sample
    /// (perftest's read_lat: a READ's completion is its round trip).
    ReadLat,
}

/// A perftest-like benchmark's parameters (perftest's flags: -s, -q, -t, -n, -D, --cq-mod).
#[derive(Debug, Clone, PartialEq)]
pub struct PerfSpec {
    pub kind: PerfKind,
    /// Bytes per message.
    pub size: u64,
    pub qps: u32,
    /// Outstanding work requests per QP.
    pub tx_depth: u32,
    /// Messages per QP (None: until `duration`; neither: 1000).
    pub iterations: Option<u64>,
    /// Picoseconds.
    pub duration: Option<u64>,
    /// Picoseconds: when to connect and start.
    pub start: u64,
    /// A signaled completion every `cq_mod` messages.
    pub cq_mod: u32,
    /// Service level (traffic class) of its QPs, both ends; None: the NIC's default.
    pub priority: Option<u8>,
}

/// Decides which messages carry the synchronise flag (`SendWr::fence`); None: none.
pub type SyncDraw = Box<dyn FnMut() -> bool>;

/// The board a run's applications exchange endpoints on.
pub type Rendezvous = SharedBoard;

/// Timer token for "every application has started: connect now".
pub(crate) const CONNECT: u64 = (1 << 56) - 1;

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

pub(crate) fn sges(addr: u64, len: u64, lkey: u32) -> Vec<Sge> {
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
    log: SharedMeter,
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
            self.log
                .borrow_mut()
                .sending_qp(f.flow, v.local_host(), f.qp);
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

// ---------------------------------------------------------------------------- perftest

/// The client side of a perftest-like benchmark: posts the work and measures.
pub struct PerfClient {
    spec: PerfSpec,
    flow: u32,
    conn0: u32,
    log: SharedMeter,
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
    /// wqe_lat: post times of each QP's outstanding WRs, oldest first.
    sent_at: Vec<std::collections::VecDeque<u64>>,
    done: bool,
    /// QPs whose WRs failed (the QP is in Error): nothing more is posted on them, and the
    /// flow never finishes.
    failed: Vec<bool>,
    /// Which messages carry the synchronise flag (MP-RDMA §5.2.5).
    sync: Option<SyncDraw>,
    qp_type: QpType,
}

impl PerfClient {
    /// `sync` draws, per message, whether it carries the synchronise flag.
    pub fn new(
        spec: PerfSpec,
        flow: u32,
        conn0: u32,
        log: SharedMeter,
        rdv: Rendezvous,
        base: u64,
        sync: Option<SyncDraw>,
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
            sent_at: vec![],
            done: false,
            failed: vec![],
            sync,
            qp_type: QpType::Rc,
        }
    }

    fn size(&self) -> u64 {
        self.spec.size
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        let op = match self.spec.kind {
            PerfKind::WriteBw | PerfKind::WqeLat => SendOp::Write,
            PerfKind::ReadBw | PerfKind::ReadLat => SendOp::Read,
            PerfKind::SendBw => SendOp::Send,
            PerfKind::WriteLat => SendOp::WriteWithImm(self.posted[i] as u32),
        };
        let addr = self.base + i as u64 * self.size().max(1);
        let mut wr = SendWr::new(i as u64, op, sges(addr, self.size(), self.lkey));
        wr.remote_addr = self.remote[i].addr;
        wr.rkey = self.remote[i].rkey;
        if self.qp_type == QpType::Ud {
            // UD (send_bw only): every SEND names its destination.
            wr.ud_dest = Some(self.remote[i].remote());
        }
        // A fraction of the stream is flagged synchronise (MP-RDMA §5.2.5).
        wr.fence = self.sync.as_mut().is_some_and(|d| d());
        // perftest --cq-mod: only every n-th WR asks for a completion.
        wr.signaled = (self.posted[i] + 1) % self.spec.cq_mod as u64 == 0
            || self.posted[i] + 1 == self.target
            || self.per_wr();
        if v.post_send(self.qps[i], wr).is_ok() {
            self.posted[i] += 1;
            if self.per_wr() {
                self.sent_at[i].push_back(v.now());
            }
        }
    }

    /// Every WR is signaled and timed (wqe_lat, read_lat).
    fn per_wr(&self) -> bool {
        matches!(self.spec.kind, PerfKind::WqeLat | PerfKind::ReadLat)
    }

    /// The QPs' transport (RC by default; UC for WRITE and SEND tests, as perftest's `-c UC`;
    /// UD for send_bw, messages up to the MTU).
    pub fn with_qp_type(mut self, t: QpType) -> Self {
        self.qp_type = t;
        self
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
                self.log.borrow_mut().finished(self.flow, now);
            }
        }
    }
}

impl App for PerfClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.spec.qps as usize;
        let ends = open_client(
            v,
            ClientSlots {
                n,
                size: self.size(),
                base: self.base,
                priority: self.spec.priority,
                conn0: self.conn0,
                flow: self.flow,
                qp_type: self.qp_type,
            },
            &self.log,
            &self.rdv,
        );
        (self.cq, self.lkey, self.qps) = (ends.cq, ends.lkey, ends.qps);
        if matches!(self.spec.kind, PerfKind::ReadBw | PerfKind::ReadLat) {
            for &qp in &self.qps {
                self.log
                    .borrow_mut()
                    .receiving_qp(self.flow, v.local_host(), qp);
            }
        }
        self.posted = vec![0; n];
        self.completed = vec![0; n];
        self.failed = vec![false; n];
        self.lat_sent = vec![0; n];
        self.sent_at = vec![Default::default(); n];
        v.set_timer(v.now().max(self.spec.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        let now = v.now();
        match ev {
            Event::Timer(CONNECT) => {
                self.remote = connect_all(v, &self.rdv, self.conn0 as u64, Side::Client, &self.qps)
                    .expect("connect");
                self.log.borrow_mut().started(self.flow, now);
                self.deadline = self.spec.duration.map(|d| now + d);
                if let Some(d) = self.deadline {
                    v.set_timer(d, CONNECT - 1);
                }
                for i in 0..self.qps.len() {
                    if self.spec.kind == PerfKind::WriteLat {
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
                        (PerfKind::WriteLat, WcOpcode::RecvWithImm) => {
                            // Pong arrived: one round trip.
                            self.completed[i] += 1;
                            {
                                let mut log = self.log.borrow_mut();
                                log.latency(self.flow, now - self.lat_sent[i]);
                                log.progress(self.flow, self.size());
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
                        (PerfKind::WriteLat, _) => {}
                        (PerfKind::WqeLat | PerfKind::ReadLat, _) => {
                            self.completed[i] += 1;
                            if let Some(t) = self.sent_at[i].pop_front() {
                                let mut log = self.log.borrow_mut();
                                log.latency(self.flow, now - t);
                                log.progress(self.flow, self.size());
                            }
                            if self.may_post(i, now) {
                                self.post_one(v, i);
                            }
                        }
                        _ => {
                            // A signaled completion stands for cq_mod WRs (or the remainder).
                            let n = (self.posted[i] - self.completed[i])
                                .min(self.spec.cq_mod as u64)
                                .max(1);
                            self.completed[i] += n;
                            self.log.borrow_mut().progress(self.flow, n * self.size());
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

/// Where a client's connections live: `n` slots of `size` bytes from `base`, connection ids
/// from `conn0`, the QPs' priority, the flow they measure.
pub(crate) struct ClientSlots {
    pub n: usize,
    pub size: u64,
    pub base: u64,
    pub priority: Option<u8>,
    pub conn0: u32,
    pub flow: u32,
    pub qp_type: QpType,
}

/// A client's ends: its armed CQ, the lkey of the one MR over its slots, its RC QPs.
pub(crate) struct ClientEnds {
    pub cq: CqId,
    pub lkey: u32,
    pub qps: Vec<QpNum>,
}

/// Opens a client's connections: one CQ (armed), one MR over the slots, one RC QP per slot, each
/// published on the board as connection `conn0 + i` with its slot's address; the first QP is
/// logged as the flow's sending QP.
pub(crate) fn open_client(
    v: &mut dyn Verbs,
    c: ClientSlots,
    log: &SharedMeter,
    rdv: &Rendezvous,
) -> ClientEnds {
    let cq = v.create_cq(1 << 16).expect("create CQ");
    v.req_notify_cq(cq).expect("arm CQ");
    let mr = v
        .reg_mr(c.base, c.size.max(1) * c.n as u64, Access::ALL)
        .expect("register memory");
    let mut qps = Vec::with_capacity(c.n);
    for i in 0..c.n {
        let qp = v
            .create_qp(&QpInit {
                priority: c.priority,
                qp_type: c.qp_type,
                ..QpInit::rc(cq)
            })
            .expect("create QP");
        qps.push(qp);
        if i == 0 {
            log.borrow_mut().sending_qp(c.flow, v.local_host(), qp);
        }
        rdv.borrow_mut().publish(
            (c.conn0 + i as u32) as u64,
            Side::Client,
            Endpoint {
                host: v.local_host(),
                qpn: qp,
                addr: c.base + i as u64 * c.size,
                rkey: mr.rkey,
            },
        );
    }
    ClientEnds {
        cq,
        lkey: mr.lkey,
        qps,
    }
}

/// The server side: memory to WRITE into / READ from, RECVs for SEND, the pong of write_lat.
pub struct PerfServer {
    spec: PerfSpec,
    flow: u32,
    conn0: u32,
    log: SharedMeter,
    rdv: Rendezvous,
    base: u64,
    lkey: u32,
    qps: Vec<QpNum>,
    remote: Vec<Endpoint>,
    seq: u64,
    qp_type: QpType,
}

impl PerfServer {
    pub fn new(
        spec: PerfSpec,
        flow: u32,
        conn0: u32,
        log: SharedMeter,
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
            qp_type: QpType::Rc,
        }
    }

    /// The QPs' transport (RC by default; UC for WRITE and SEND tests).
    pub fn with_qp_type(mut self, t: QpType) -> Self {
        self.qp_type = t;
        self
    }

    fn post_recvs(&mut self, v: &mut dyn Verbs, i: usize, n: u32) {
        let len = self.spec.size;
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
        let size = self.spec.size.max(1);
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
                    qp_type: self.qp_type,
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
            if !matches!(self.spec.kind, PerfKind::ReadBw | PerfKind::ReadLat) {
                self.log
                    .borrow_mut()
                    .receiving_qp(self.flow, v.local_host(), qp);
            }
        }
        v.set_timer(v.now().max(self.spec.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                self.remote = connect_all(v, &self.rdv, self.conn0 as u64, Side::Server, &self.qps)
                    .expect("connect");
                for i in 0..self.qps.len() {
                    let depth = match self.spec.kind {
                        PerfKind::SendBw => (self.spec.tx_depth * 2).max(64),
                        PerfKind::WriteLat => 1,
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
                            if self.spec.kind == PerfKind::WriteLat {
                                // Pong.
                                self.seq += 1;
                                let len = self.spec.size;
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
    }

    fn is_done(&self) -> bool {
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! The applications run unchanged over another verbs backend: the in-process fake NIC.
    use super::*;
    use braid_verbs::testing::FakeNet;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Default)]
    pub(crate) struct Log {
        pub bytes: u64,
        pub lat: Vec<u64>,
        pub finished: Option<u64>,
        pub started: Option<u64>,
    }
    impl Meter for Log {
        fn sending_qp(&mut self, _: u32, _: u32, _: QpNum) {}
        fn receiving_qp(&mut self, _: u32, _: u32, _: QpNum) {}
        fn landing_at(&mut self, _: u32, _: u32, _: u64) {}
        fn started(&mut self, _: u32, at: u64) {
            self.started = Some(at);
        }
        fn progress(&mut self, _: u32, b: u64) {
            self.bytes += b;
        }
        fn latency(&mut self, _: u32, ps: u64) {
            self.lat.push(ps);
        }
        fn finished(&mut self, _: u32, at: u64) {
            self.finished = Some(at);
        }
    }

    fn run(kind: PerfKind, size: u64, iterations: u64) -> Log {
        run_on(kind, size, iterations, QpType::Rc)
    }

    fn run_on(kind: PerfKind, size: u64, iterations: u64, t: QpType) -> Log {
        let log = Rc::new(RefCell::new(Log::default()));
        let meter: SharedMeter = log.clone();
        let rdv = braid_verbs::rendezvous::board();
        let spec = PerfSpec {
            kind,
            size,
            qps: 2,
            tx_depth: 4,
            iterations: Some(iterations),
            duration: None,
            start: 0,
            cq_mod: 1,
            priority: None,
        };
        let mut net = FakeNet::new(2);
        let h = net.hosts();
        net.add_tenant(
            h[1],
            Box::new(
                PerfServer::new(spec.clone(), 0, 0, meter.clone(), rdv.clone(), 1 << 40)
                    .with_qp_type(t),
            ),
            vec![],
        );
        net.add_tenant(
            h[0],
            Box::new(PerfClient::new(spec, 0, 0, meter, rdv, 1 << 40, None).with_qp_type(t)),
            vec![],
        );
        net.run();
        let out = std::mem::take(&mut *log.borrow_mut());
        out
    }

    #[test]
    fn perftest_apps_run_on_the_fake_nic() {
        for kind in [PerfKind::WriteBw, PerfKind::SendBw, PerfKind::ReadBw] {
            let l = run(kind, 4096, 50);
            assert_eq!(l.bytes, 2 * 50 * 4096, "{kind:?}");
            assert!(l.finished.is_some() && l.started.is_some(), "{kind:?}");
        }
        // kv: GETs (READs) and PUTs (WRITEs) of drawn sizes, every request a latency sample.
        {
            let log = Rc::new(RefCell::new(Log::default()));
            let meter: SharedMeter = log.clone();
            let rdv = braid_verbs::rendezvous::board();
            let spec = PerfSpec {
                kind: PerfKind::ReadBw,
                size: 4096,
                qps: 3,
                tx_depth: 2,
                iterations: Some(10),
                duration: None,
                start: 0,
                cq_mod: 1,
                priority: None,
            };
            let mut net = FakeNet::new(2);
            let h = net.hosts();
            net.add_tenant(
                h[1],
                Box::new(PerfServer::new(
                    spec.clone(),
                    0,
                    0,
                    meter.clone(),
                    rdv.clone(),
                    1 << 40,
                )),
                vec![],
            );
            let mut k = 0u64;
            let mut want = 0u64;
            let sizes: Vec<(bool, u64)> =
                (0..30).map(|j| (j % 3 != 0, 32 + 100 * j as u64)).collect();
            for s in &sizes {
                want += s.1;
            }
            let draw: KvDraw = Box::new(move || {
                let s = sizes[k as usize % sizes.len()];
                k += 1;
                s
            });
            net.add_tenant(
                h[0],
                Box::new(KvClient::new(spec, 0, 0, meter, rdv, 1 << 40, draw)),
                vec![],
            );
            net.run();
            let l = log.borrow();
            assert_eq!(l.lat.len(), 30);
            assert_eq!(l.bytes, want);
            assert!(l.finished.is_some());
            assert!(l.lat.iter().all(|&x| x >= 4_000_000));
        }
        // wqe_lat: every WRITE's post-to-completion time, at least the fake's round trip.
        let l = run(PerfKind::WqeLat, 32, 25);
        assert_eq!(l.lat.len(), 2 * 25);
        assert_eq!(l.bytes, 2 * 25 * 32);
        assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{:?}", &l.lat[..4]);
        // read_lat: every READ's round trip, bytes read back.
        let l = run(PerfKind::ReadLat, 64, 10);
        assert_eq!(l.lat.len(), 2 * 10);
        assert_eq!(l.bytes, 2 * 10 * 64);
        assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{:?}", &l.lat[..4]);
        let l = run(PerfKind::WriteLat, 16, 20);
        assert_eq!(l.lat.len(), 2 * 20);
        // Two one-way latencies of the fake (2 µs each) per round trip, at least.
        assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{:?}", &l.lat[..4]);
    }

    #[test]
    fn uc_qps_carry_write_and_send_tests_and_ud_qps_send_bw() {
        for kind in [PerfKind::WriteBw, PerfKind::SendBw, PerfKind::WriteLat] {
            let l = run_on(kind, 4096, 20, QpType::Uc);
            assert_eq!(l.bytes, 2 * 20 * 4096, "{kind:?}");
            assert!(l.finished.is_some(), "{kind:?}");
        }
        let l = run_on(PerfKind::SendBw, 512, 20, QpType::Ud);
        assert_eq!(l.bytes, 2 * 20 * 512);
        assert!(l.finished.is_some());
    }
}
