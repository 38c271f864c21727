//! The request/reply server: a store per connection, a reply per request.

use super::*;
use crate::{sges, Rendezvous, SharedMeter, CONNECT};
use braid_verbs::rendezvous::{connect_all, Endpoint, Side};

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
