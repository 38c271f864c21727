//! The request/reply client: requests out, replies in, each request's time a sample.

use super::*;
use crate::{sges, Client, Rendezvous, SharedMeter, CONNECT};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

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
    c: Client,
    rpc: RpcSpec,
    draw: ReqDraw,
    out: Vec<VecDeque<Outstanding>>,
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
        RpcClient {
            c: Client::new(spec, flow, conn0, log, rdv, base),
            rpc,
            draw,
            out: vec![],
            shadow: vec![],
            stats: Rc::default(),
        }
    }

    /// What the client checked and sent (shared: read it after the run).
    pub fn stats(&self) -> Rc<RefCell<RpcStats>> {
        self.stats.clone()
    }

    fn msg(&self) -> u64 {
        HDR + self.c.spec.size.max(1)
    }
    fn depth(&self) -> u64 {
        self.c.spec.tx_depth.max(1) as u64
    }
    fn slot_len(&self) -> u64 {
        2 * self.depth() * self.msg()
    }
    fn req_buf(&self, i: usize, slot: u64) -> u64 {
        self.c.base + i as u64 * self.slot_len() + 2 * slot * self.msg()
    }
    fn reply_buf(&self, i: usize, slot: u64) -> u64 {
        self.req_buf(i, slot) + self.msg()
    }

    fn fail(&mut self, i: usize) {
        self.c.run.failed[i] = true;
        self.out[i].clear();
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        let mut req = (self.draw)(i);
        req.key %= KEYS;
        req.size = match req.op {
            Op::Ping => 0,
            _ => req.size.clamp(1, self.c.spec.size.max(1)),
        };
        let slot = self.c.posted[i] % self.depth();
        let (rq, rp) = (self.req_buf(i, slot), self.reply_buf(i, slot));
        let mut expect = None;
        if self.rpc.verify {
            let mut m = header(req.op, req.key, req.size).to_vec();
            let k = req.key as usize;
            match req.op {
                Op::Put => {
                    let val =
                        value_bytes(self.c.conn0 + i as u32, req.key, self.c.posted[i], req.size);
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
        let (rlen, qp) = (req.reply_len(), self.c.qps[i]);
        let recvs: Vec<(u64, u64)> = match self.rpc.wire {
            Wire::TwoSided => pieces(rlen, self.rpc.chunk),
            Wire::OneSided => vec![(0, 0)],
        };
        for &(off, l) in &recvs {
            let sg = if l == 0 {
                vec![]
            } else {
                sges(rp + off, l, self.c.lkey)
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
        let r = &self.c.remote[i];
        let inbox = (r.addr + slot * self.msg(), r.rkey);
        let sg = sges(rq, req.request_len(), self.c.lkey);
        let id = wr_id(i, SEND_PIECE, slot);
        let seq = self.c.posted[i] as u32;
        if post_message(v, qp, &self.rpc, &sg, req.request_len(), inbox, seq, id).is_err() {
            self.fail(i);
            return;
        }
        self.c.posted[i] += 1;
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
            let mut log = self.c.log.borrow_mut();
            log.latency(self.c.flow, now - o.at);
            log.progress(self.c.flow, o.req.value_bytes());
        }
        if self.c.may_post(i, now) {
            self.post_one(v, i);
        }
    }

    fn check_done(&mut self, now: u64) {
        let idle =
            (0..self.c.qps.len()).all(|i| self.out[i].is_empty() && !self.c.may_post(i, now));
        self.c.end_if(idle, now);
    }
}

impl App for RpcClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.c.open(
            v,
            self.slot_len(),
            self.c.spec.priority,
            QpType::Rc,
            access(self.rpc.verify),
        );
        self.out = (0..n).map(|_| VecDeque::new()).collect();
        if self.rpc.verify {
            let s = self.c.spec.size.max(1) as usize;
            self.shadow = vec![vec![vec![0u8; s]; KEYS as usize]; n];
        }
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        let now = v.now();
        match ev {
            Event::Timer(CONNECT) => {
                self.c.connect(v);
                for i in 0..self.c.qps.len() {
                    for _ in 0..self.c.spec.tx_depth.max(1) {
                        if self.c.may_post(i, now) {
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
                    if i >= self.c.qps.len() || self.c.run.failed[i] {
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
        self.c.run.is_done()
    }
}
