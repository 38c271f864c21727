//! perftest-like benchmarks: `write_bw`, `write_lat`, `send_bw`, `send_lat`, `read_bw`, `read_lat`
//! and DRUM's per-WQE `wqe_lat`, client and server; perftest's peak bandwidth
//! ([`peak_bandwidth`]).

use crate::spec::{app_config, AppCommon, KindConfig};
use crate::*;
use braid_verbs::rendezvous::{Endpoint, Side};

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
    /// perftest's send_lat: a ping-pong of SENDs. Each side keeps a RECV posted; the client
    /// SENDs, the server answers each arrival with a SEND; every round trip is a latency sample
    /// (perftest reports half of it). RC, UC or UD (UD: messages up to the MTU).
    SendLat,
}

/// perftest's `BW peak`, bytes per second: the best rate over any run of consecutive messages,
/// i.e. the maximum over `i <= j` of `size * (j - i + 1) / (completed[j] - posted[i])`, where
/// `posted[k]` is when the k-th message was posted and `completed[k]` when the k-th completion
/// arrived (picoseconds, both in order). The search is quadratic: past 10 000 messages only
/// every 100th `i` and `j` are tried (our bound; perftest too thins its search on long runs).
/// 0 without messages.
pub fn peak_bandwidth(posted: &[u64], completed: &[u64], size: u64) -> f64 {
    let n = posted.len().min(completed.len());
    let step = if n > 10_000 { 100 } else { 1 };
    let mut best: f64 = 0.0;
    for i in (0..n).step_by(step) {
        for j in (i..n).step_by(step) {
            let dt = completed[j].saturating_sub(posted[i]);
            if dt > 0 {
                best = best.max((j - i + 1) as f64 * size as f64 / (dt as f64 / 1e12));
            }
        }
    }
    best
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
    /// WRs per ibv_post_send call (perftest -l, bandwidth tests): a list goes when its whole
    /// length fits in `tx_depth`, its last WR signaled (perftest then sets `cq_mod` to the list
    /// length). 1 = one WR per call.
    pub post_list: u32,
    /// Service level (traffic class) of its QPs, both ends; None: the NIC's default.
    pub priority: Option<u8>,
}

impl PerfKind {
    /// perftest's test names of the kinds it has (`wqe_lat` is braid's own).
    pub const NAMES: &'static [(&'static str, PerfKind)] = &[
        ("write_bw", PerfKind::WriteBw),
        ("write_lat", PerfKind::WriteLat),
        ("send_bw", PerfKind::SendBw),
        ("send_lat", PerfKind::SendLat),
        ("read_bw", PerfKind::ReadBw),
        ("read_lat", PerfKind::ReadLat),
        ("wqe_lat", PerfKind::WqeLat),
    ];

    pub fn from_name(name: &str) -> Option<PerfKind> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
    }
}

/// The perftest kinds' config and factory (`kind = "write_bw"`, ..., and `braid-perftest`'s
/// tests): the benchmark's parameters, the fraction of messages flagged synchronise (drawn per
/// message from the stream `app-sync`, app index), and the QPs' transport.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfApp {
    pub spec: PerfSpec,
    pub sync_ratio: f64,
    pub qp_type: QpType,
}

impl PerfApp {
    /// An `[[apps]]` entry of kind `kind`, RC: the keys every kind takes, with the bandwidth
    /// kinds' post list and sync ratio (1 and 0 for the others), checked.
    pub fn new(
        kind: PerfKind,
        c: &AppCommon,
        post_list: u32,
        sync_ratio: f64,
    ) -> Result<PerfApp, KeyError> {
        if post_list == 0 {
            return Err(KeyError::new("post_list", "expected at least 1"));
        }
        if post_list > 1 {
            if post_list > c.tx_depth {
                return Err(KeyError::new(
                    "post_list",
                    format!("expected at most tx_depth ({})", c.tx_depth),
                ));
            }
            if c.cq_mod > 1 {
                return Err(KeyError::new(
                    "cq_mod",
                    "with post_list above 1, leave cq_mod at 1 (a list's last WR is signaled)",
                ));
            }
        }
        if !(0.0..=1.0).contains(&sync_ratio) {
            return Err(KeyError::new(
                "sync_ratio",
                "expected a fraction of messages between 0 and 1 (e.g. 0.2)",
            ));
        }
        if c.size > u32::MAX as u64 && matches!(kind, PerfKind::SendBw | PerfKind::SendLat) {
            return Err(KeyError::new("size", "SEND messages are limited to 4 GiB"));
        }
        Ok(PerfApp {
            spec: c.perf(kind, post_list),
            sync_ratio,
            qp_type: QpType::Rc,
        })
    }
}

impl AppFactory for PerfApp {
    fn build(&self, e: AppEnds) -> (Box<dyn App>, Box<dyn App>) {
        let server = PerfServer::new(
            self.spec.clone(),
            e.flow,
            e.conn0,
            e.meter.clone(),
            e.rdv.clone(),
            e.server_base,
        )
        .with_qp_type(self.qp_type);
        let sync = (self.sync_ratio > 0.0).then(|| {
            let mut rng = e.draws.stream("app-sync", &[e.index as u64]);
            let p = self.sync_ratio;
            Box::new(move || rng.bernoulli(p)) as SyncDraw
        });
        let client = PerfClient::new(
            self.spec.clone(),
            e.flow,
            e.conn0,
            e.meter,
            e.rdv,
            e.client_base,
            sync,
        )
        .with_qp_type(self.qp_type);
        (Box::new(server), Box::new(client))
    }
}

/// The perftest kind an `[[apps]]` kind runs (the scenario's names are perftest's).
fn perf_kind(kind: AppKind) -> PerfKind {
    PerfKind::from_name(kind.name()).expect("the perftest kinds' configs serve perftest kinds")
}

app_config! {
    /// `kind = "write_bw"` and `"send_bw"`: a stream of messages, posted in lists, some flagged.
    pub struct BwConfig {
        /// WRs per ibv_post_send call (perftest -l), a list posted when it fits in `tx_depth`,
        /// its last WR signaled (`cq_mod` becomes the list length, as perftest does without
        /// --cq-mod). 1 = single posts.
        #[serde(default = "crate::spec::one")]
        pub post_list: u32,
        /// Fraction of the messages posted with the synchronise flag (`SendWr::fence`, MP-RDMA
        /// §3.4), drawn per message from the run's seed. 0 = none.
        #[serde(default)]
        pub sync_ratio: f64,
    }
}

impl KindConfig for BwConfig {
    fn keys() -> &'static [&'static str] {
        &["post_list", "sync_ratio"]
    }
    fn common(&self) -> AppCommon {
        self.common_keys()
    }
    fn factory(&self, kind: AppKind) -> Result<Box<dyn AppFactory>, KeyError> {
        let c = self.common_keys();
        let app = PerfApp::new(perf_kind(kind), &c, self.post_list, self.sync_ratio)?;
        Ok(Box::new(app))
    }
}

app_config! {
    /// `kind = "read_bw"`: a stream of READs, posted in lists.
    pub struct ReadBwConfig {
        /// WRs per ibv_post_send call (perftest -l), as for write_bw.
        #[serde(default = "crate::spec::one")]
        pub post_list: u32,
    }
}

impl KindConfig for ReadBwConfig {
    fn keys() -> &'static [&'static str] {
        &["post_list"]
    }
    fn common(&self) -> AppCommon {
        self.common_keys()
    }
    fn factory(&self, kind: AppKind) -> Result<Box<dyn AppFactory>, KeyError> {
        let app = PerfApp::new(perf_kind(kind), &self.common_keys(), self.post_list, 0.0)?;
        Ok(Box::new(app))
    }
}

app_config! {
    /// `kind = "write_lat"`, `"send_lat"` and `"wqe_lat"`: only the keys every kind takes.
    pub struct LatConfig {}
}

impl KindConfig for LatConfig {
    fn keys() -> &'static [&'static str] {
        &[]
    }
    fn common(&self) -> AppCommon {
        self.common_keys()
    }
    fn factory(&self, kind: AppKind) -> Result<Box<dyn AppFactory>, KeyError> {
        let app = PerfApp::new(perf_kind(kind), &self.common_keys(), 1, 0.0)?;
        Ok(Box::new(app))
    }
}

impl PerfSpec {
    /// Messages each QP posts: `iterations`, unbounded while a `duration` runs, else perftest's
    /// default of 1000.
    pub fn messages_per_qp(&self) -> u64 {
        match (self.iterations, self.duration) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => 1000,
        }
    }
}

// ---------------------------------------------------------------------------- perftest

/// The client side of a perftest-like benchmark: posts the work and measures.
pub struct PerfClient {
    c: Client,
    completed: Vec<u64>,
    lat_sent: Vec<u64>,
    /// wqe_lat: post times of each QP's outstanding WRs, oldest first.
    sent_at: Vec<std::collections::VecDeque<u64>>,
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
        PerfClient {
            c: Client::new(spec, flow, conn0, log, rdv, base),
            completed: vec![],
            lat_sent: vec![],
            sent_at: vec![],
            sync,
            qp_type: QpType::Rc,
        }
    }

    fn size(&self) -> u64 {
        self.c.spec.size
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        // perftest --cq-mod: only every n-th WR asks for a completion.
        let signaled = (self.c.posted[i] + 1).is_multiple_of(self.c.spec.cq_mod as u64)
            || self.c.posted[i] + 1 == self.c.target
            || self.per_wr();
        let wr = self.make_wr(i, signaled);
        if v.post_send(self.c.qps[i], wr).is_ok() {
            self.c.posted[i] += 1;
            if !self.ping_pong() {
                self.sent_at[i].push_back(v.now());
            }
        }
    }

    /// WRs a signaled completion stands for: `cq_mod`, or a post list's length.
    fn moderation(&self) -> u64 {
        if self.c.spec.post_list > 1 {
            self.c.spec.post_list as u64
        } else {
            self.c.spec.cq_mod as u64
        }
    }

    /// perftest's bandwidth loop with -l: whole lists of `post_list` WRs (the last one shorter
    /// if the iterations end there) while one fits in `tx_depth`, each list's last WR signaled.
    fn post_lists(&mut self, v: &mut dyn Verbs, i: usize, now: u64) {
        let depth = self.c.spec.tx_depth as u64;
        while self.c.may_post(i, now) {
            let n = (self.c.spec.post_list as u64).min(self.c.target - self.c.posted[i]);
            if self.c.posted[i] - self.completed[i] + n > depth {
                return;
            }
            let wrs: Vec<SendWr> = (0..n).map(|k| self.make_wr(i, k + 1 == n)).collect();
            let posted = match v.post_send_list(self.c.qps[i], wrs) {
                Ok(()) => n,
                Err(bad) => bad.index as u64,
            };
            self.c.posted[i] += posted;
            for _ in 0..posted {
                self.sent_at[i].push_back(now);
            }
            if posted < n {
                return;
            }
        }
    }

    fn make_wr(&mut self, i: usize, signaled: bool) -> SendWr {
        let op = match self.c.spec.kind {
            PerfKind::WriteBw | PerfKind::WqeLat => SendOp::Write,
            PerfKind::ReadBw | PerfKind::ReadLat => SendOp::Read,
            PerfKind::SendBw | PerfKind::SendLat => SendOp::Send,
            PerfKind::WriteLat => SendOp::WriteWithImm(self.c.posted[i] as u32),
        };
        let addr = self.c.base + i as u64 * self.size().max(1);
        let mut wr = SendWr::new(i as u64, op, sges(addr, self.size(), self.c.lkey));
        wr.remote_addr = self.c.remote[i].addr;
        wr.rkey = self.c.remote[i].rkey;
        if self.qp_type == QpType::Ud {
            // UD (send_bw, send_lat): every SEND names its destination.
            wr.ud_dest = Some(self.c.remote[i].remote());
        }
        // A fraction of the stream is flagged synchronise (MP-RDMA §5.2.5).
        wr.fence = self.sync.as_mut().is_some_and(|d| d());
        wr.signaled = signaled;
        wr
    }

    /// One message at a time, timed from its post to the peer's answer (write_lat, send_lat).
    fn ping_pong(&self) -> bool {
        matches!(self.c.spec.kind, PerfKind::WriteLat | PerfKind::SendLat)
    }

    /// Every WR is signaled and timed (wqe_lat, read_lat).
    fn per_wr(&self) -> bool {
        matches!(self.c.spec.kind, PerfKind::WqeLat | PerfKind::ReadLat)
    }

    /// The QPs' transport (RC by default; UC for WRITE and SEND tests, as perftest's `-c UC`;
    /// UD for send_bw and send_lat, messages up to the MTU).
    pub fn with_qp_type(mut self, t: QpType) -> Self {
        self.qp_type = t;
        self
    }

    fn check_done(&mut self, now: u64) {
        let all_in = (0..self.c.qps.len())
            .all(|i| self.completed[i] >= self.c.posted[i] && !self.c.may_post(i, now));
        self.c.end_if(all_in, now);
    }
}

impl App for PerfClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.c.open(
            v,
            self.size(),
            self.c.spec.priority,
            self.qp_type,
            Access::ALL,
        );
        if matches!(self.c.spec.kind, PerfKind::ReadBw | PerfKind::ReadLat) {
            for &qp in &self.c.qps {
                self.c
                    .log
                    .borrow_mut()
                    .receiving_qp(self.c.flow, v.local_host(), qp);
            }
        }
        self.completed = vec![0; n];
        self.lat_sent = vec![0; n];
        self.sent_at = vec![Default::default(); n];
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        let now = v.now();
        match ev {
            Event::Timer(CONNECT) => {
                self.c.connect(v);
                for i in 0..self.c.qps.len() {
                    if self.ping_pong() {
                        let len = self.size();
                        let _ = v.post_recv(
                            self.c.qps[i],
                            RecvWr {
                                wr_id: i as u64,
                                sg_list: sges(self.c.base, len, self.c.lkey),
                            },
                        );
                        self.lat_sent[i] = now;
                        self.post_one(v, i);
                    } else if self.c.spec.post_list > 1 {
                        self.post_lists(v, i, now);
                    } else {
                        let depth = self.c.spec.tx_depth as u64;
                        for _ in 0..depth {
                            if !self.c.may_post(i, now) {
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
                    let i = wc.wr_id as usize % self.c.qps.len().max(1);
                    if wc.status != WcStatus::Success {
                        // The QP is in Error: the rest of its WRs are flushed; post no more.
                        self.c.run.failed[i] = true;
                        self.completed[i] = self.c.posted[i];
                        continue;
                    }
                    match (self.c.spec.kind, wc.opcode) {
                        (PerfKind::WriteLat, WcOpcode::RecvWithImm)
                        | (PerfKind::SendLat, WcOpcode::Recv) => {
                            // Pong arrived: one round trip.
                            self.completed[i] += 1;
                            {
                                let mut log = self.c.log.borrow_mut();
                                log.latency(self.c.flow, now - self.lat_sent[i]);
                                log.progress(self.c.flow, self.size());
                            }
                            if self.c.may_post(i, now) {
                                let len = self.size();
                                let _ = v.post_recv(
                                    self.c.qps[i],
                                    RecvWr {
                                        wr_id: i as u64,
                                        sg_list: sges(self.c.base, len, self.c.lkey),
                                    },
                                );
                                self.lat_sent[i] = now;
                                self.post_one(v, i);
                            }
                        }
                        (PerfKind::WriteLat | PerfKind::SendLat, _) => {}
                        (PerfKind::WqeLat | PerfKind::ReadLat, _) => {
                            self.completed[i] += 1;
                            if let Some(t) = self.sent_at[i].pop_front() {
                                let mut log = self.c.log.borrow_mut();
                                log.latency(self.c.flow, now - t);
                                log.progress(self.c.flow, self.size());
                            }
                            if self.c.may_post(i, now) {
                                self.post_one(v, i);
                            }
                        }
                        _ => {
                            // A signaled completion stands for cq_mod WRs (or the remainder).
                            let n = (self.c.posted[i] - self.completed[i])
                                .min(self.moderation())
                                .max(1);
                            self.completed[i] += n;
                            {
                                let mut log = self.c.log.borrow_mut();
                                log.progress(self.c.flow, n * self.size());
                                // Each message's post and completion times (perftest's peak).
                                for _ in 0..n {
                                    if let Some(t) = self.sent_at[i].pop_front() {
                                        log.message(self.c.flow, t, now);
                                    }
                                }
                            }
                            if self.c.spec.post_list > 1 {
                                self.post_lists(v, i, now);
                            } else {
                                for _ in 0..n {
                                    if self.c.may_post(i, now) {
                                        self.post_one(v, i);
                                    }
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
        self.c.run.is_done()
    }
}

/// The server side: memory to WRITE into / READ from, RECVs for SEND, the pong of write_lat
/// and send_lat.
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
                        PerfKind::WriteLat | PerfKind::SendLat => 1,
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
                            let op = match self.spec.kind {
                                PerfKind::WriteLat => {
                                    Some(SendOp::WriteWithImm(self.seq as u32 + 1))
                                }
                                PerfKind::SendLat => Some(SendOp::Send),
                                _ => None,
                            };
                            if let Some(op) = op {
                                // Pong.
                                self.seq += 1;
                                let len = self.spec.size;
                                let addr = self.base + i as u64 * len.max(1);
                                let mut wr = SendWr::new(i as u64, op, sges(addr, len, self.lkey));
                                wr.remote_addr = self.remote[i].addr;
                                wr.rkey = self.remote[i].rkey;
                                if self.qp_type == QpType::Ud {
                                    wr.ud_dest = Some(self.remote[i].remote());
                                }
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
