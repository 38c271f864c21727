//! Request and reply over RDMA messages: the engine under the two-sided KV store
//! ([`crate::kv`]) and the Redis-like application ([`crate::redis`]).
//!
//! A client keeps `tx_depth` requests outstanding on each of its connections; every request is a
//! message (a 16-byte header, then a PUT's value) and gets a reply (a header, then a GET's
//! value). Messages travel one of two ways ([`Wire`]):
//!
//! - **two-sided**: SENDs into RECVs. The client posts the RECVs of a reply before it sends the
//!   request (so a reply never waits for a buffer); the server keeps a ring of RECVs on every
//!   connection, reposted as they complete, and copies a PUT's value from the ring into its store.
//! - **one-sided**: RDMA WRITEs into the peer's memory: the request into the server's inbox slot
//!   for the connection, the reply into the client's reply buffer. A plain WRITE gives the target
//!   no event, and braid's simulated memory has no bytes to poll by default, so the last WRITE of
//!   each message carries an immediate value: its receive completion is the doorbell (the
//!   original Redis RDMA module's `write_with_imm`). RC delivers in order, so every earlier WRITE
//!   of the message has landed when it completes.
//!
//! A message longer than `chunk` bytes goes as several WRs of at most `chunk` bytes (only the
//! last signaled); the receiver of a two-sided message consumes one RECV per piece.
//!
//! **Where the request's description comes from.** With `verify` on, every region keeps its
//! bytes (tracked memory; a real NIC always does): the server reads each request's header and the
//! client checks every reply's header and every GET's value byte for byte against what it PUT
//! (each connection owns [`KEYS`] keys, so it knows what each must hold; a GET of `n` bytes reads
//! the first `n` bytes of the key's value slot, as the one-sided KV's READ does). Without it
//! (the default: simulations of many large values, and the DRUM agent, which does not carry
//! bytes through its global buffer), payloads are sizes only, and the server takes each
//! request's (op, key, size) from the same seeded per-connection request stream the client
//! draws from: RC keeps a connection's requests in order, so the two agree. Timing is the same
//! either way.

use crate::{lookup_all, sges, Rendezvous, SharedMeter, CONNECT};
use braid_verbs::rendezvous::{connect_all, Endpoint, Side};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// Bytes of a request's or a reply's header.
pub const HDR: u64 = 16;
/// Keys per connection.
pub const KEYS: u32 = 2;

/// A request's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read a value (KV GET, Redis GET): the reply carries `size` bytes.
    Get,
    /// Store a value (KV PUT, Redis SET): the request carries `size` bytes.
    Put,
    /// Neither (Redis PING): header-only request and reply.
    Ping,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Get => 1,
            Op::Put => 2,
            Op::Ping => 3,
        }
    }
    fn from_code(c: u8) -> Option<Op> {
        match c {
            1 => Some(Op::Get),
            2 => Some(Op::Put),
            3 => Some(Op::Ping),
            _ => None,
        }
    }
}

/// One request: its operation, key (below [`KEYS`]) and value size in bytes (0 for PING).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Req {
    pub op: Op,
    pub key: u32,
    pub size: u64,
}

impl Req {
    /// Bytes of the request message.
    pub fn request_len(&self) -> u64 {
        HDR + if self.op == Op::Put { self.size } else { 0 }
    }
    /// Bytes of the reply message.
    pub fn reply_len(&self) -> u64 {
        HDR + if self.op == Op::Get { self.size } else { 0 }
    }
    /// Value bytes the request moves (what the flow's progress counts).
    pub fn value_bytes(&self) -> u64 {
        if self.op == Op::Ping {
            0
        } else {
            self.size
        }
    }
}

/// A connection's next request, by connection index (0-based within the application). Client
/// and server of one application get two copies of the same per-connection streams.
pub type ReqDraw = Box<dyn FnMut(usize) -> Req>;

/// How messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// RDMA WRITEs into the peer's memory, the last with immediate data.
    OneSided,
    /// SEND / RECV.
    TwoSided,
}

/// The request/reply protocol's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcSpec {
    pub wire: Wire,
    /// The largest WR a message is split into (bytes, at least `HDR + 1`); `u64::MAX`: none.
    pub chunk: u64,
    /// Carry real bytes and check them (tracked memory).
    pub verify: bool,
}

/// What a client checked (with `verify`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RpcStats {
    /// Replies whose header and value matched.
    pub verified: u64,
    /// Replies that did not (the connection then stops, and the flow never finishes).
    pub mismatched: u64,
    pub gets: u64,
    pub puts: u64,
    pub pings: u64,
}

/// Encodes a header: op (or status), key, length.
fn header(op: Op, key: u32, len: u64) -> [u8; HDR as usize] {
    let mut h = [0u8; HDR as usize];
    h[0] = op.code();
    h[4..8].copy_from_slice(&key.to_le_bytes());
    h[8..16].copy_from_slice(&len.to_le_bytes());
    h
}

fn parse(h: &[u8]) -> Option<Req> {
    if h.len() < HDR as usize {
        return None;
    }
    Some(Req {
        op: Op::from_code(h[0])?,
        key: u32::from_le_bytes(h[4..8].try_into().ok()?),
        size: u64::from_le_bytes(h[8..16].try_into().ok()?),
    })
}

/// The value a client PUTs: unique to (connection, key, request number).
fn value_bytes(conn: u32, key: u32, seq: u64, len: u64) -> Vec<u8> {
    let salt = conn.wrapping_mul(0x9E37_79B9) ^ key.wrapping_mul(0x85EB_CA6B) ^ (seq as u32);
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31) ^ salt ^ (i >> 8).wrapping_mul(7) ^ (salt >> 13)) as u8)
        .collect()
}

/// The pieces `[off, off + len)` of a message of `total` bytes cut at `chunk`.
fn pieces(total: u64, chunk: u64) -> Vec<(u64, u64)> {
    let c = chunk.max(1);
    let mut v = Vec::new();
    let mut off = 0;
    while off < total {
        let l = (total - off).min(c);
        v.push((off, l));
        off += l;
    }
    if v.is_empty() {
        v.push((0, 0));
    }
    v
}

// wr_id: connection index in bits 0..24, what the WR is in 24..32, a slot in 32..64.
const SEND_PIECE: u64 = 1;
const REPLY_RECV: u64 = 2;
const REQ_RECV: u64 = 3;
fn wr_id(i: usize, tag: u64, slot: u64) -> u64 {
    i as u64 | tag << 24 | slot << 32
}
fn wr_conn(id: u64) -> usize {
    (id & 0xFF_FFFF) as usize
}
fn wr_tag(id: u64) -> u64 {
    (id >> 24) & 0xFF
}
fn wr_slot(id: u64) -> u64 {
    id >> 32
}

/// Posts a message: the pieces of `[addr, addr + len)` as SENDs (two-sided) or as WRITEs to
/// `remote` (one-sided, the last with immediate data `imm`). Only the last is signaled.
#[allow(clippy::too_many_arguments)]
fn post_message(
    v: &mut dyn Verbs,
    qp: QpNum,
    spec: &RpcSpec,
    sg: &[Sge],
    len: u64,
    remote: (u64, u32),
    imm: u32,
    id: u64,
) -> Result<(), VerbsError> {
    let ps = pieces(len, spec.chunk);
    let n = ps.len();
    let mut wrs = Vec::with_capacity(n);
    for (k, &(off, l)) in ps.iter().enumerate() {
        let last = k + 1 == n;
        let op = match (spec.wire, last) {
            (Wire::TwoSided, _) => SendOp::Send,
            (Wire::OneSided, false) => SendOp::Write,
            (Wire::OneSided, true) => SendOp::WriteWithImm(imm),
        };
        let mut wr = SendWr::new(id, op, slice_sges(sg, off, l));
        wr.signaled = last;
        if spec.wire == Wire::OneSided {
            wr.remote_addr = remote.0 + off;
            wr.rkey = remote.1;
        }
        wrs.push(wr);
    }
    if wrs.len() == 1 {
        v.post_send(qp, wrs.pop().expect("one"))
    } else {
        v.post_send_list(qp, wrs).map_err(|b| b.error)
    }
}

fn access(verify: bool) -> Access {
    if verify {
        Access::ALL.tracked()
    } else {
        Access::ALL
    }
}

// ---------------------------------------------------------------------------- client

struct Outstanding {
    at: u64,
    req: Req,
    /// The request's buffer pair on the connection.
    slot: u64,
    /// Reply pieces (two-sided) or doorbells (one-sided) still to arrive.
    left: u64,
    /// With `verify`: the value a GET must return.
    expect: Option<Vec<u8>>,
}

/// The client: `spec.qps` connections, `spec.tx_depth` requests outstanding on each,
/// `spec.iterations` requests per connection (or until `spec.duration`), values up to
/// `spec.size` bytes. Every request's time from post to its reply's arrival is a latency
/// sample; its value bytes are progress.
pub struct RpcClient {
    spec: crate::PerfSpec,
    rpc: RpcSpec,
    flow: u32,
    conn0: u32,
    log: SharedMeter,
    rdv: Rendezvous,
    base: u64,
    draw: ReqDraw,
    cq: CqId,
    lkey: u32,
    qps: Vec<QpNum>,
    remote: Vec<Endpoint>,
    posted: Vec<u64>,
    out: Vec<VecDeque<Outstanding>>,
    target: u64,
    deadline: Option<u64>,
    failed: Vec<bool>,
    done: bool,
    /// With `verify`: each connection's keys' values as the server must hold them.
    shadow: Vec<Vec<Vec<u8>>>,
    stats: Rc<RefCell<RpcStats>>,
}

impl RpcClient {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        spec: crate::PerfSpec,
        rpc: RpcSpec,
        flow: u32,
        conn0: u32,
        log: SharedMeter,
        rdv: Rendezvous,
        base: u64,
        draw: ReqDraw,
    ) -> Self {
        let target = match (spec.iterations, spec.duration) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => 1000,
        };
        RpcClient {
            spec,
            rpc,
            flow,
            conn0,
            log,
            rdv,
            base,
            draw,
            cq: 0,
            lkey: 0,
            qps: vec![],
            remote: vec![],
            posted: vec![],
            out: vec![],
            target,
            deadline: None,
            failed: vec![],
            done: false,
            shadow: vec![],
            stats: Rc::default(),
        }
    }

    /// What the client checked and sent (shared: read it after the run).
    pub fn stats(&self) -> Rc<RefCell<RpcStats>> {
        self.stats.clone()
    }

    fn msg(&self) -> u64 {
        HDR + self.spec.size.max(1)
    }
    fn depth(&self) -> u64 {
        self.spec.tx_depth.max(1) as u64
    }
    fn slot_len(&self) -> u64 {
        2 * self.depth() * self.msg()
    }
    fn req_buf(&self, i: usize, slot: u64) -> u64 {
        self.base + i as u64 * self.slot_len() + 2 * slot * self.msg()
    }
    fn reply_buf(&self, i: usize, slot: u64) -> u64 {
        self.req_buf(i, slot) + self.msg()
    }

    fn may_post(&self, i: usize, now: u64) -> bool {
        !self.failed[i] && self.posted[i] < self.target && self.deadline.is_none_or(|d| now < d)
    }

    fn fail(&mut self, i: usize) {
        self.failed[i] = true;
        self.out[i].clear();
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        let mut req = (self.draw)(i);
        req.key %= KEYS;
        req.size = match req.op {
            Op::Ping => 0,
            _ => req.size.clamp(1, self.spec.size.max(1)),
        };
        let slot = self.posted[i] % self.depth();
        let (rq, rp) = (self.req_buf(i, slot), self.reply_buf(i, slot));
        let mut expect = None;
        if self.rpc.verify {
            let mut m = header(req.op, req.key, req.size).to_vec();
            let k = req.key as usize;
            match req.op {
                Op::Put => {
                    let val = value_bytes(self.conn0 + i as u32, req.key, self.posted[i], req.size);
                    self.shadow[i][k][..req.size as usize].copy_from_slice(&val);
                    m.extend_from_slice(&val);
                }
                Op::Get => expect = Some(self.shadow[i][k][..req.size as usize].to_vec()),
                Op::Ping => {}
            }
            if v.write_local(rq, &m).is_err() {
                self.fail(i);
                return;
            }
        }
        // The reply's buffers first, so that it never waits for one.
        let (rlen, qp) = (req.reply_len(), self.qps[i]);
        let recvs: Vec<(u64, u64)> = match self.rpc.wire {
            Wire::TwoSided => pieces(rlen, self.rpc.chunk),
            Wire::OneSided => vec![(0, 0)],
        };
        for &(off, l) in &recvs {
            let sg = if l == 0 {
                vec![]
            } else {
                sges(rp + off, l, self.lkey)
            };
            let r = v.post_recv(
                qp,
                RecvWr {
                    wr_id: wr_id(i, REPLY_RECV, slot),
                    sg_list: sg,
                },
            );
            if r.is_err() {
                self.fail(i);
                return;
            }
        }
        let r = &self.remote[i];
        let inbox = (r.addr + slot * self.msg(), r.rkey);
        let sg = sges(rq, req.request_len(), self.lkey);
        let id = wr_id(i, SEND_PIECE, slot);
        let seq = self.posted[i] as u32;
        if post_message(v, qp, &self.rpc, &sg, req.request_len(), inbox, seq, id).is_err() {
            self.fail(i);
            return;
        }
        self.posted[i] += 1;
        {
            let mut s = self.stats.borrow_mut();
            match req.op {
                Op::Get => s.gets += 1,
                Op::Put => s.puts += 1,
                Op::Ping => s.pings += 1,
            }
        }
        self.out[i].push_back(Outstanding {
            at: v.now(),
            req,
            slot,
            left: recvs.len() as u64,
            expect,
        });
    }

    /// The head request of connection `i` has its whole reply: check it, measure it.
    fn complete(&mut self, v: &mut dyn Verbs, i: usize, now: u64) {
        let Some(o) = self.out[i].pop_front() else {
            return;
        };
        if self.rpc.verify {
            let rp = self.reply_buf(i, o.slot);
            let got = v.read_local(rp, o.req.reply_len()).unwrap_or_default();
            let hdr_ok = parse(&got)
                .is_some_and(|h| h.op == o.req.op && h.key == o.req.key && h.size == o.req.size);
            let val_ok = match &o.expect {
                Some(e) => got.get(HDR as usize..) == Some(&e[..]),
                None => true,
            };
            if !(hdr_ok && val_ok) {
                self.stats.borrow_mut().mismatched += 1;
                self.fail(i);
                return;
            }
            self.stats.borrow_mut().verified += 1;
        }
        {
            let mut log = self.log.borrow_mut();
            log.latency(self.flow, now - o.at);
            log.progress(self.flow, o.req.value_bytes());
        }
        if self.may_post(i, now) {
            self.post_one(v, i);
        }
    }

    fn check_done(&mut self, now: u64) {
        let idle = (0..self.qps.len()).all(|i| self.out[i].is_empty() && !self.may_post(i, now));
        if idle && !self.done {
            self.done = true;
            if !self.failed.iter().any(|&f| f) {
                self.log.borrow_mut().finished(self.flow, now);
            }
        }
    }
}

impl App for RpcClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.spec.qps as usize;
        let cq = v.create_cq(1 << 16).expect("create CQ");
        v.req_notify_cq(cq).expect("arm CQ");
        let mr = v
            .reg_mr(
                self.base,
                self.slot_len() * n as u64,
                access(self.rpc.verify),
            )
            .expect("register memory");
        self.cq = cq;
        self.lkey = mr.lkey;
        for i in 0..n {
            let qp = v
                .create_qp(&QpInit {
                    priority: self.spec.priority,
                    ..QpInit::rc(cq)
                })
                .expect("create QP");
            self.qps.push(qp);
            if i == 0 {
                self.log
                    .borrow_mut()
                    .sending_qp(self.flow, v.local_host(), qp);
            }
            self.rdv.borrow_mut().publish(
                (self.conn0 + i as u32) as u64,
                Side::Client,
                Endpoint {
                    host: v.local_host(),
                    qpn: qp,
                    addr: self.base + i as u64 * self.slot_len(),
                    rkey: mr.rkey,
                },
            );
        }
        self.posted = vec![0; n];
        self.out = (0..n).map(|_| VecDeque::new()).collect();
        self.failed = vec![false; n];
        if self.rpc.verify {
            let s = self.spec.size.max(1) as usize;
            self.shadow = vec![vec![vec![0u8; s]; KEYS as usize]; n];
        }
        v.set_timer(v.now().max(self.spec.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        let now = v.now();
        match ev {
            Event::Timer(CONNECT) => {
                self.remote = lookup_all(v, &self.rdv, self.conn0, &self.qps);
                self.log.borrow_mut().started(self.flow, now);
                self.deadline = self.spec.duration.map(|d| now + d);
                if let Some(d) = self.deadline {
                    v.set_timer(d, CONNECT - 1);
                }
                for i in 0..self.qps.len() {
                    for _ in 0..self.spec.tx_depth.max(1) {
                        if self.may_post(i, now) {
                            self.post_one(v, i);
                        }
                    }
                }
                self.check_done(now);
            }
            Event::Timer(_) => self.check_done(now),
            Event::Wake(_) => {}
            Event::Completion(cq) => {
                let mut wcs = Vec::new();
                poll_and_rearm(v, cq, &mut wcs).expect("poll own CQ");
                for wc in wcs {
                    let i = wr_conn(wc.wr_id);
                    if i >= self.qps.len() || self.failed[i] {
                        continue;
                    }
                    if wc.status != WcStatus::Success {
                        self.fail(i);
                        continue;
                    }
                    if wr_tag(wc.wr_id) != REPLY_RECV {
                        continue; // a request's last piece was sent
                    }
                    let Some(head) = self.out[i].front_mut() else {
                        continue;
                    };
                    head.left = head.left.saturating_sub(1);
                    if head.left == 0 {
                        self.complete(v, i, now);
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

// ---------------------------------------------------------------------------- server

/// A request being received in pieces (two-sided).
struct Incoming {
    req: Req,
    /// Message bytes received so far.
    got: u64,
}

/// The server: a store of [`KEYS`] values of up to `spec.size` bytes per connection; it answers
/// each request as soon as its last byte has arrived.
pub struct RpcServer {
    spec: crate::PerfSpec,
    rpc: RpcSpec,
    flow: u32,
    conn0: u32,
    log: SharedMeter,
    rdv: Rendezvous,
    base: u64,
    /// Without `verify`: the requests' descriptions (the client's streams).
    draw: ReqDraw,
    lkey: u32,
    qps: Vec<QpNum>,
    remote: Vec<Endpoint>,
    /// Requests received per connection.
    seq: Vec<u64>,
    incoming: Vec<Option<Incoming>>,
    /// Requests whose header did not parse (verify).
    pub bad_requests: u64,
}

impl RpcServer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        spec: crate::PerfSpec,
        rpc: RpcSpec,
        flow: u32,
        conn0: u32,
        log: SharedMeter,
        rdv: Rendezvous,
        base: u64,
        draw: ReqDraw,
    ) -> Self {
        RpcServer {
            spec,
            rpc,
            flow,
            conn0,
            log,
            rdv,
            base,
            draw,
            lkey: 0,
            qps: vec![],
            remote: vec![],
            seq: vec![],
            incoming: vec![],
            bad_requests: 0,
        }
    }

    fn msg(&self) -> u64 {
        HDR + self.spec.size.max(1)
    }
    fn depth(&self) -> u64 {
        self.spec.tx_depth.max(1) as u64
    }
    /// RECV buffers per connection (two-sided) and their size.
    fn ring(&self) -> u64 {
        (2 * self.depth()).max(8)
    }
    fn piece(&self) -> u64 {
        self.msg().min(self.rpc.chunk)
    }
    /// Per connection: the inbox (one-sided: `depth` request slots; two-sided: the RECV ring),
    /// the replies (`depth` buffers of a header and a value), the store (`KEYS` values).
    fn inbox_len(&self) -> u64 {
        match self.rpc.wire {
            Wire::OneSided => self.depth() * self.msg(),
            Wire::TwoSided => self.ring() * self.piece(),
        }
    }
    fn conn_len(&self) -> u64 {
        self.inbox_len() + self.depth() * self.msg() + KEYS as u64 * self.spec.size.max(1)
    }
    fn inbox(&self, i: usize) -> u64 {
        self.base + i as u64 * self.conn_len()
    }
    fn reply_buf(&self, i: usize, slot: u64) -> u64 {
        self.inbox(i) + self.inbox_len() + slot * self.msg()
    }
    fn store(&self, i: usize, key: u32) -> u64 {
        self.inbox(i)
            + self.inbox_len()
            + self.depth() * self.msg()
            + (key % KEYS) as u64 * self.spec.size.max(1)
    }

    fn post_req_recv(&self, v: &mut dyn Verbs, i: usize, r: u64) {
        let sg = match self.rpc.wire {
            Wire::OneSided => vec![],
            Wire::TwoSided => sges(self.inbox(i) + r * self.piece(), self.piece(), self.lkey),
        };
        let _ = v.post_recv(
            self.qps[i],
            RecvWr {
                wr_id: wr_id(i, REQ_RECV, r),
                sg_list: sg,
            },
        );
    }

    /// The description of connection `i`'s next request, whose header is at `hdr`.
    fn describe(&mut self, v: &mut dyn Verbs, i: usize, hdr: u64) -> Option<Req> {
        if self.rpc.verify {
            let h = v.read_local(hdr, HDR).ok()?;
            let r = parse(&h);
            if r.is_none() {
                self.bad_requests += 1;
            }
            r
        } else {
            let mut r = (self.draw)(i);
            r.key %= KEYS;
            r.size = match r.op {
                Op::Ping => 0,
                _ => r.size.clamp(1, self.spec.size.max(1)),
            };
            Some(r)
        }
    }

    /// Copies `len` bytes from `from` to `to` (a PUT's value into the store, a GET's into its
    /// reply), charged as a copy; the bytes themselves only with `verify`.
    fn copy(&self, v: &mut dyn Verbs, to: u64, from: u64, len: u64) {
        if len == 0 {
            return;
        }
        v.charge(Work::Copy(len));
        if self.rpc.verify {
            if let Ok(b) = v.read_local(from, len) {
                let _ = v.write_local(to, &b);
            }
        }
    }

    /// Answers connection `i`'s request `req` (its `seq`-th).
    fn reply(&mut self, v: &mut dyn Verbs, i: usize, req: Req) {
        let slot = self.seq[i] % self.depth();
        self.seq[i] += 1;
        // The reply is built in its own buffer (Redis's output buffer): the NIC reads it when
        // it sends, and a later PUT of the key must not change a GET's reply meanwhile.
        let buf = self.reply_buf(i, slot);
        if self.rpc.verify {
            let _ = v.write_local(buf, &header(req.op, req.key, req.size));
        }
        if req.op == Op::Get {
            self.copy(v, buf + HDR, self.store(i, req.key), req.size);
        }
        let sg = sges(buf, req.reply_len(), self.lkey);
        let r = self.remote[i];
        let dst = (r.addr + (2 * slot + 1) * self.msg(), r.rkey);
        let id = wr_id(i, SEND_PIECE, slot);
        let _ = post_message(
            v,
            self.qps[i],
            &self.rpc,
            &sg,
            req.reply_len(),
            dst,
            slot as u32,
            id,
        );
    }

    fn on_recv(&mut self, v: &mut dyn Verbs, wc: &WorkCompletion) {
        let i = wr_conn(wc.wr_id);
        let r = wr_slot(wc.wr_id);
        match self.rpc.wire {
            Wire::OneSided => {
                // The doorbell of a whole request in inbox slot seq % depth.
                let slot = self.seq[i] % self.depth();
                let at = self.inbox(i) + slot * self.msg();
                self.post_req_recv(v, i, r);
                if let Some(req) = self.describe(v, i, at) {
                    if req.op == Op::Put {
                        self.copy(v, self.store(i, req.key), at + HDR, req.size);
                    }
                    self.reply(v, i, req);
                }
            }
            Wire::TwoSided => {
                let buf = self.inbox(i) + r * self.piece();
                let n = wc.byte_len;
                let cur = match self.incoming[i].take() {
                    Some(c) => Some(c),
                    None => self.describe(v, i, buf).map(|req| Incoming { req, got: 0 }),
                };
                if let Some(mut c) = cur {
                    // The value bytes of this piece: message bytes [got, got + n) past the header.
                    let (lo, hi) = (c.got.max(HDR), c.got + n);
                    if c.req.op == Op::Put && hi > lo {
                        let from = buf + (lo - c.got);
                        let to = self.store(i, c.req.key) + (lo - HDR);
                        self.copy(v, to, from, hi - lo);
                    }
                    c.got += n;
                    if c.got >= c.req.request_len() {
                        self.reply(v, i, c.req);
                    } else {
                        self.incoming[i] = Some(c);
                    }
                }
                self.post_req_recv(v, i, r);
            }
        }
    }
}

impl App for RpcServer {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.spec.qps as usize;
        let cq = v.create_cq(1 << 16).expect("create CQ");
        v.req_notify_cq(cq).expect("arm CQ");
        let mr = v
            .reg_mr(
                self.base,
                self.conn_len() * n as u64,
                access(self.rpc.verify),
            )
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
                    addr: self.inbox(i),
                    rkey: mr.rkey,
                },
            );
            self.log
                .borrow_mut()
                .receiving_qp(self.flow, v.local_host(), qp);
        }
        self.seq = vec![0; n];
        self.incoming = (0..n).map(|_| None).collect();
        v.set_timer(v.now().max(self.spec.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                self.remote = connect_all(v, &self.rdv, self.conn0 as u64, Side::Server, &self.qps)
                    .expect("connect");
                let per = match self.rpc.wire {
                    Wire::OneSided => self.depth(),
                    Wire::TwoSided => self.ring(),
                };
                for i in 0..self.qps.len() {
                    for r in 0..per {
                        self.post_req_recv(v, i, r);
                    }
                }
            }
            Event::Timer(_) | Event::Wake(_) => {}
            Event::Completion(cq) => {
                let mut wcs = Vec::new();
                poll_and_rearm(v, cq, &mut wcs).expect("poll own CQ");
                for wc in wcs {
                    if wc.status != WcStatus::Success || wr_tag(wc.wr_id) != REQ_RECV {
                        continue; // a reply sent, or flushed with its QP
                    }
                    if wr_conn(wc.wr_id) < self.qps.len() {
                        self.on_recv(v, &wc);
                    }
                }
            }
        }
    }

    fn is_done(&self) -> bool {
        true
    }
}
