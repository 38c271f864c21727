//! A one-sided key-value store client (DRUM §V's KV workload): each connection has one request
//! outstanding at a time, a GET (an RDMA READ of the value from the server's memory) or a PUT (an
//! RDMA WRITE of it), the kind and the value size drawn per request. Every request's completion
//! time is a latency sample and its value bytes progress. The server is [`crate::PerfServer`]
//! with `size` = the largest value (passive: its memory and connections).

use crate::spec::{app_config, AppCommon, KindConfig};
use crate::{sges, Client, PerfSpec, Rendezvous, SharedMeter, CONNECT};
use braid_verbs::*;
use std::collections::VecDeque;

/// Draws the next request: (is it a GET, value size in bytes).
pub type KvDraw = Box<dyn FnMut() -> (bool, u64)>;

/// The KV client: `spec.qps` connections, `spec.tx_depth` requests outstanding on each,
/// `spec.iterations` requests per connection (or until `spec.duration`).
pub struct KvClient {
    c: Client,
    draw: KvDraw,
    /// Post time and size of each connection's outstanding requests, oldest first.
    out: Vec<VecDeque<(u64, u64)>>,
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
        KvClient {
            c: Client::new(spec, flow, conn0, log, rdv, base),
            draw,
            out: vec![],
            gets: 0,
            puts: 0,
        }
    }

    fn post_one(&mut self, v: &mut dyn Verbs, i: usize) {
        let (get, size) = (self.draw)();
        let size = size.clamp(1, self.c.spec.size.max(1));
        let addr = self.c.base + i as u64 * self.c.spec.size.max(1);
        let op = if get { SendOp::Read } else { SendOp::Write };
        let mut wr = SendWr::new(i as u64, op, sges(addr, size, self.c.lkey));
        wr.remote_addr = self.c.remote[i].addr;
        wr.rkey = self.c.remote[i].rkey;
        if v.post_send(self.c.qps[i], wr).is_ok() {
            self.c.posted[i] += 1;
            self.out[i].push_back((v.now(), size));
            if get {
                self.gets += 1;
            } else {
                self.puts += 1;
            }
        }
    }

    fn check_done(&mut self, now: u64) {
        let idle =
            (0..self.c.qps.len()).all(|i| self.out[i].is_empty() && !self.c.may_post(i, now));
        self.c.end_if(idle, now);
    }
}

impl App for KvClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self
            .c
            .open(v, self.c.spec.size, None, QpType::Rc, Access::ALL);
        self.out = vec![VecDeque::new(); n];
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        let now = v.now();
        match ev {
            Event::Timer(CONNECT) => {
                self.c.connect(v);
                for i in 0..self.c.qps.len() {
                    for _ in 0..self.c.spec.tx_depth {
                        if self.c.may_post(i, now) {
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
                    let Some((t, size)) = self.out[i].pop_front() else {
                        continue;
                    };
                    if wc.status != WcStatus::Success {
                        self.c.run.failed[i] = true;
                        self.out[i].clear();
                        continue;
                    }
                    {
                        let mut log = self.c.log.borrow_mut();
                        log.latency(self.c.flow, now - t);
                        log.progress(self.c.flow, size);
                    }
                    if self.c.may_post(i, now) {
                        self.post_one(v, i);
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

/// The two-sided variant of the KV store (DRUM §V, Fig. 15(c, d)): a GET is a SEND of the
/// request header answered by a SEND of the value, a PUT a SEND of header and value answered by a
/// header; one SEND per message (values up to 1 MB fit the DRUM agent's 1 MiB receive buffers).
/// Client and server are [`crate::rpc::RpcClient`] and [`crate::rpc::RpcServer`] with this
/// protocol.
pub fn two_sided(verify: bool) -> crate::rpc::RpcSpec {
    crate::rpc::RpcSpec {
        wire: crate::rpc::Wire::TwoSided,
        chunk: u64::MAX,
        verify,
    }
}

/// A KV request from draws: a GET with `get`, else a PUT, of `size` bytes, key from a uniform
/// `u_key` in [0, 1).
pub fn request(get: bool, u_key: f64, size: u64) -> crate::rpc::Req {
    use crate::rpc::{Op, Req, KEYS};
    Req {
        op: if get { Op::Get } else { Op::Put },
        key: ((KEYS as f64 * u_key) as u32).min(KEYS - 1),
        size,
    }
}

/// `kind = "kv"`: the config and factory. One-sided: a [`KvClient`] against a passive
/// [`crate::PerfServer`], each request's kind and value size from the stream `app-kv` (app
/// index); two-sided: the request/reply engine with [`two_sided`], requests from the
/// per-connection streams `app-rpc`.
#[derive(Debug, Clone, PartialEq)]
pub struct KvApp {
    /// The benchmark's counts and depths (the server side of a one-sided store is passive, as
    /// read_bw's).
    pub spec: PerfSpec,
    /// The fraction of requests that are GETs.
    pub get_ratio: f64,
    /// Value sizes are uniform in [`min_size`, `size`].
    pub min_size: u64,
    pub two_sided: bool,
    pub verify: bool,
}

app_config! {
    /// `kind = "kv"`'s keys.
    pub struct KvConfig {
        /// The fraction of requests that are GETs (0.95: read-intensive, 0.5: write-intensive).
        #[serde(default = "default_get_ratio")]
        pub get_ratio: f64,
        /// The smallest value; sizes are uniform in [min_size, size] (default: all `size`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_size: Option<braid_units::Bytes>,
        /// One-sided (default: GET = READ, PUT = WRITE) or two-sided (SEND/RECV).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<crate::AppMode>,
        /// Two-sided: carry real bytes (tracked memory) and check every reply, byte for byte,
        /// against what the connection stored; a mismatch stops the connection (the flow never
        /// finishes). Costs memory: for small scenarios.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub verify: bool,
    }
}

/// DRUM §V's read-intensive KV workload: 95% GETs.
fn default_get_ratio() -> f64 {
    0.95
}

impl KindConfig for KvConfig {
    fn keys() -> &'static [&'static str] {
        &["get_ratio", "min_size", "mode", "verify"]
    }
    fn common(&self) -> AppCommon {
        self.common_keys()
    }
    fn factory(
        &self,
        _kind: crate::AppKind,
    ) -> Result<Box<dyn crate::AppFactory>, crate::KeyError> {
        Ok(Box::new(KvApp::new(self)?))
    }
}

impl KvApp {
    pub fn new(k: &KvConfig) -> Result<KvApp, crate::KeyError> {
        let c = k.common_keys();
        if !(0.0..=1.0).contains(&k.get_ratio) {
            return Err(crate::KeyError::new(
                "get_ratio",
                "expected a fraction of requests between 0 and 1 (e.g. 0.95)",
            ));
        }
        let min_size = crate::rpc::check_min_size(&c, k.min_size.map(|m| m.0))?;
        let two_sided = k.mode == Some(crate::AppMode::TwoSided);
        if k.verify && !two_sided {
            return Err(crate::kinds::verify_refused());
        }
        crate::rpc::check_verify(&c, k.verify)?;
        Ok(KvApp {
            spec: c.perf(crate::PerfKind::ReadBw, 1),
            get_ratio: k.get_ratio,
            min_size,
            two_sided,
            verify: k.verify,
        })
    }
}

impl crate::AppFactory for KvApp {
    fn build(&self, e: crate::AppEnds) -> (Box<dyn App>, Box<dyn App>) {
        let (p, i) = (self.get_ratio, e.index as u64);
        let (lo, hi) = (self.min_size, self.spec.size.max(1));
        let size = move |r: &mut dyn crate::Draw| crate::rpc::size_in(lo, hi, r.uniform());
        if self.two_sided {
            let draws = e.draws.clone();
            let draw = || {
                crate::rpc::per_connection(draws.clone(), i, move |r| {
                    let get = r.bernoulli(p);
                    let key = r.uniform();
                    request(get, key, size(r))
                })
            };
            return crate::rpc::build_pair(&self.spec, two_sided(self.verify), e, draw);
        }
        let server = crate::PerfServer::new(
            self.spec.clone(),
            e.flow,
            e.conn0,
            e.meter.clone(),
            e.rdv.clone(),
            e.server_base,
        );
        let mut rng = e.draws.stream("app-kv", &[i]);
        let draw = Box::new(move || {
            let get = rng.bernoulli(p);
            (get, size(rng.as_mut()))
        });
        let client = KvClient::new(
            self.spec.clone(),
            e.flow,
            e.conn0,
            e.meter,
            e.rdv,
            e.client_base,
            draw,
        );
        (Box::new(server), Box::new(client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::tests::run_rpc;
    use crate::rpc::{Op, Req};

    /// Two-sided KV over the fake NIC, 95/5 and 50/50 GET/PUT, values 32 B..64 KB: every GET's
    /// value is the bytes its connection last PUT there (zeros before any PUT), checked byte for
    /// byte by the client against its own copy.
    #[test]
    fn two_sided_kv_returns_exactly_what_was_put() {
        for puts_in_20 in [1u64, 10] {
            let reqs: Vec<Req> = (0..20u64)
                .map(|j| Req {
                    op: if j % 20 < puts_in_20 {
                        Op::Put
                    } else {
                        Op::Get
                    },
                    key: (j % 3 % 2) as u32,
                    size: 32 + (j * 3331) % (64 * 1024 - 32),
                })
                .collect();
            let want: u64 = 4 * 2 * reqs.iter().map(|r| r.size).sum::<u64>();
            let (l, s) = run_rpc(two_sided(true), 64 * 1024, 4, 2, 40, reqs);
            assert_eq!(s.mismatched, 0);
            assert_eq!(s.verified, 4 * 40);
            assert_eq!(s.puts, 4 * 2 * puts_in_20);
            assert_eq!(l.bytes, want);
            assert!(l.finished.is_some());
        }
    }

    /// The check can fail: a server whose store holds other bytes than were PUT is caught, and
    /// the client's flow then never finishes.
    #[test]
    fn a_wrong_value_is_caught() {
        use crate::redis::tests::run_rpc_with;
        let reqs = vec![Req {
            op: Op::Get,
            key: 0,
            size: 100,
        }];
        // Nothing was PUT, so key 0 must read as zeros; the server's memory is overwritten.
        let (l, s) = run_rpc_with(two_sided(true), 128, 1, 1, 2, reqs.clone(), None);
        assert_eq!((s.verified, s.mismatched), (2, 0));
        assert!(l.finished.is_some());
        let (l, s) = run_rpc_with(two_sided(true), 128, 1, 1, 2, reqs, Some(vec![0xAB; 4096]));
        assert_eq!(s.mismatched, 1);
        assert!(l.finished.is_none());
    }
}
