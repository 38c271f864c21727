//! A one-sided key-value store client (DRUM §V's KV workload): each connection has one request
//! outstanding at a time, a GET (an RDMA READ of the value from the server's memory) or a PUT (an
//! RDMA WRITE of it), the kind and the value size drawn per request. Every request's completion
//! time is a latency sample and its value bytes progress. The server is [`crate::PerfServer`]
//! with `size` = the largest value (passive: its memory and connections).

use crate::{
    lookup_all, open_client, sges, ClientSlots, PerfSpec, Rendezvous, SharedMeter, CONNECT,
};
use braid_verbs::rendezvous::Endpoint;
use braid_verbs::*;
use std::collections::VecDeque;

/// Draws the next request: (is it a GET, value size in bytes).
pub type KvDraw = Box<dyn FnMut() -> (bool, u64)>;

/// The KV client: `spec.qps` connections, `spec.tx_depth` requests outstanding on each,
/// `spec.iterations` requests per connection (or until `spec.duration`).
pub struct KvClient {
    spec: PerfSpec,
    flow: u32,
    conn0: u32,
    log: SharedMeter,
    rdv: Rendezvous,
    base: u64,
    draw: KvDraw,
    cq: CqId,
    lkey: u32,
    qps: Vec<QpNum>,
    remote: Vec<Endpoint>,
    posted: Vec<u64>,
    /// Post time and size of each connection's outstanding requests, oldest first.
    out: Vec<VecDeque<(u64, u64)>>,
    target: u64,
    deadline: Option<u64>,
    failed: Vec<bool>,
    done: bool,
    pub gets: u64,
    pub puts: u64,
}

impl KvClient {
    pub fn new(
        spec: PerfSpec,
        flow: u32,
        conn0: u32,
        log: SharedMeter,
        rdv: Rendezvous,
        base: u64,
        draw: KvDraw,
    ) -> Self {
        let target = match (spec.iterations, spec.duration) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => 1000,
        };
        KvClient {
            spec,
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
            gets: 0,
            puts: 0,
        }
    }

    fn may_post(&self, i: usize, now: u64) -> bool {
        !self.failed[i] && self.posted[i] < self.target && self.deadline.is_none_or(|d| now < d)
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        let (get, size) = (self.draw)();
        let size = size.clamp(1, self.spec.size.max(1));
        let addr = self.base + i as u64 * self.spec.size.max(1);
        let op = if get { SendOp::Read } else { SendOp::Write };
        let mut wr = SendWr::new(i as u64, op, sges(addr, size, self.lkey));
        wr.remote_addr = self.remote[i].addr;
        wr.rkey = self.remote[i].rkey;
        if v.post_send(self.qps[i], wr).is_ok() {
            self.posted[i] += 1;
            self.out[i].push_back((v.now(), size));
            if get {
                self.gets += 1;
            } else {
                self.puts += 1;
            }
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

impl App for KvClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.spec.qps as usize;
        let ends = open_client(
            v,
            ClientSlots {
                n,
                size: self.spec.size,
                base: self.base,
                priority: None,
                conn0: self.conn0,
                flow: self.flow,
                qp_type: QpType::Rc,
            },
            &self.log,
            &self.rdv,
        );
        (self.cq, self.lkey, self.qps) = (ends.cq, ends.lkey, ends.qps);
        self.posted = vec![0; n];
        self.out = vec![VecDeque::new(); n];
        self.failed = vec![false; n];
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
                    for _ in 0..self.spec.tx_depth {
                        if self.may_post(i, now) {
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
                    let Some((t, size)) = self.out[i].pop_front() else {
                        continue;
                    };
                    if wc.status != WcStatus::Success {
                        self.failed[i] = true;
                        self.out[i].clear();
                        continue;
                    }
                    {
                        let mut log = self.log.borrow_mut();
                        log.latency(self.flow, now - t);
                        log.progress(self.flow, size);
                    }
                    if self.may_post(i, now) {
                        self.post_one(v, i);
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
