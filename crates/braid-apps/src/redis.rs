//! A Redis-like cache (DRUM §V, test case 3, Fig. 16): clients issue SET, GET and PING to a
//! server, over one-sided WRITEs or over SEND/RECV — the two variants DRUM put in place of the
//! Redis RDMA module's `write_with_imm()`. Values range over 10 B–512 MB; a message longer than
//! `chunk` bytes (default 1 MiB, the DRUM agent's receive buffer) goes as several WRs.
//!
//! SET is a request carrying the value and a header-only reply ("+OK"), GET a header-only
//! request and a reply carrying the value, PING header-only both ways ("+PONG"). The protocol,
//! the memory layout and the data checks are the request/reply engine's ([`crate::rpc`]); this
//! file is the command mix.

use crate::rpc::{Op, Req, RpcSpec, Wire, KEYS};
use crate::spec::{app_config, AppCommon, KindConfig};

/// The smallest and largest values of DRUM's Redis workload.
pub const MIN_VALUE: u64 = 10;
pub const MAX_VALUE: u64 = 512_000_000;
/// The default largest WR of a message: the DRUM agent's receive buffer (1 MiB).
pub const DEFAULT_CHUNK: u64 = 1 << 20;

/// The Redis commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Set,
    Get,
    Ping,
}

impl Command {
    /// The engine's operation for the command.
    pub fn op(self) -> Op {
        match self {
            Command::Set => Op::Put,
            Command::Get => Op::Get,
            Command::Ping => Op::Ping,
        }
    }
}

/// The command mix: relative weights (need not sum to 1; at least one positive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    pub set: f64,
    pub get: f64,
    pub ping: f64,
}

impl Default for Mix {
    /// A cache's usual read-mostly mix.
    fn default() -> Self {
        Mix {
            set: 0.3,
            get: 0.6,
            ping: 0.1,
        }
    }
}

impl Mix {
    /// Whether the weights are usable: finite, non-negative, not all zero.
    pub fn is_valid(&self) -> bool {
        let w = [self.set, self.get, self.ping];
        w.iter().all(|x| x.is_finite() && *x >= 0.0) && w.iter().sum::<f64>() > 0.0
    }

    /// The command for a uniform draw `u` in [0, 1).
    pub fn pick(&self, u: f64) -> Command {
        let t = (self.set + self.get + self.ping) * u;
        if t < self.set {
            Command::Set
        } else if t < self.set + self.get || self.ping == 0.0 {
            Command::Get
        } else {
            Command::Ping
        }
    }

    /// A request from three uniform draws (command, key, size) and the value range.
    pub fn request(&self, u_cmd: f64, u_key: f64, u_size: f64, lo: u64, hi: u64) -> Req {
        let cmd = self.pick(u_cmd);
        let size = if cmd == Command::Ping {
            0
        } else {
            (lo + ((hi - lo + 1) as f64 * u_size) as u64).min(hi)
        };
        Req {
            op: cmd.op(),
            key: ((KEYS as f64 * u_key) as u32).min(KEYS - 1),
            size,
        }
    }
}

/// The protocol of a Redis-like app: `one_sided` WRITEs or SEND/RECV, messages cut at `chunk`.
pub fn rpc_spec(one_sided: bool, chunk: u64, verify: bool) -> RpcSpec {
    RpcSpec {
        wire: if one_sided {
            Wire::OneSided
        } else {
            Wire::TwoSided
        },
        chunk,
        verify,
    }
}

/// A Redis-like application's command mix: relative weights (at least one positive).
#[derive(
    Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields, default)]
pub struct RedisMix {
    pub set: f64,
    pub get: f64,
    pub ping: f64,
}

impl Default for RedisMix {
    fn default() -> Self {
        let m = Mix::default();
        RedisMix {
            set: m.set,
            get: m.get,
            ping: m.ping,
        }
    }
}

impl RedisMix {
    pub fn mix(&self) -> Mix {
        Mix {
            set: self.set,
            get: self.get,
            ping: self.ping,
        }
    }
}

/// `kind = "redis"`: the config and factory. Both ends run the request/reply engine with
/// [`rpc_spec`]; commands, keys and value sizes come from the per-connection streams `app-rpc`.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisApp {
    /// The counts and depths (the engine reads only the sizes, depths and counts).
    pub spec: crate::PerfSpec,
    pub mix: Mix,
    /// Value sizes are uniform in [`min_size`, `spec.size`].
    pub min_size: u64,
    pub one_sided: bool,
    pub chunk: u64,
    pub verify: bool,
}

app_config! {
    /// `kind = "redis"`'s keys.
    pub struct RedisConfig {
        /// The smallest value; sizes are uniform in [min_size, size] (default: all `size`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_size: Option<braid_units::Bytes>,
        /// One-sided (default: WRITEs, the last with immediate data) or two-sided (SEND/RECV).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<crate::AppMode>,
        /// The command mix (default set 0.3, get 0.6, ping 0.1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mix: Option<RedisMix>,
        /// The largest WR a message is cut into (default 1 MiB, the DRUM agent's receive
        /// buffer).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub chunk: Option<braid_units::Bytes>,
        /// Carry real bytes (tracked memory) and check every reply, byte for byte, against what
        /// the connection stored; a mismatch stops the connection (the flow never finishes).
        /// Costs memory: for small scenarios.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub verify: bool,
    }
}

impl KindConfig for RedisConfig {
    fn keys() -> &'static [&'static str] {
        &["min_size", "mode", "mix", "chunk", "verify"]
    }
    fn common(&self) -> AppCommon {
        self.common_keys()
    }
    fn factory(
        &self,
        _kind: crate::AppKind,
    ) -> Result<Box<dyn crate::AppFactory>, crate::KeyError> {
        Ok(Box::new(RedisApp::new(self)?))
    }
}

impl RedisApp {
    pub fn new(k: &RedisConfig) -> Result<RedisApp, crate::KeyError> {
        let c = k.common_keys();
        let min_size = crate::rpc::check_min_size(&c, k.min_size.map(|m| m.0))?;
        let mix = k.mix.map(|m| m.mix()).unwrap_or_default();
        if !mix.is_valid() {
            return Err(crate::KeyError::new(
                "mix",
                "expected non-negative weights, at least one positive (e.g. { set = 0.3, get = 0.6, ping = 0.1 })",
            ));
        }
        if let Some(c) = k.chunk.map(|c| c.0) {
            let least = crate::rpc::HDR + 1;
            if c < least || c > u32::MAX as u64 {
                return Err(crate::KeyError::new(
                    "chunk",
                    format!("expected a size from {least} B (a header and a byte) to 4 GiB"),
                ));
            }
        }
        crate::rpc::check_verify(&c, k.verify)?;
        Ok(RedisApp {
            spec: c.perf(crate::PerfKind::SendBw, 1),
            mix,
            min_size,
            one_sided: k.mode != Some(crate::AppMode::TwoSided),
            chunk: k.chunk.map_or(DEFAULT_CHUNK, |c| c.0),
            verify: k.verify,
        })
    }
}

impl crate::AppFactory for RedisApp {
    fn build(&self, e: crate::AppEnds) -> (Box<dyn braid_verbs::App>, Box<dyn braid_verbs::App>) {
        let (mix, i) = (self.mix, e.index as u64);
        let (lo, hi) = (self.min_size, self.spec.size.max(1));
        let draws = e.draws.clone();
        let draw = || {
            crate::rpc::per_connection(draws.clone(), i, move |r| {
                let (c, k) = (r.uniform(), r.uniform());
                mix.request(c, k, r.uniform(), lo, hi)
            })
        };
        let rpc = rpc_spec(self.one_sided, self.chunk, self.verify);
        crate::rpc::build_pair(&self.spec, rpc, e, draw)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rpc::{RpcClient, RpcServer, RpcStats};
    use crate::tests::Log;
    use crate::{PerfKind, PerfSpec, SharedMeter};
    use braid_verbs::testing::FakeNet;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A fixed per-connection request sequence (both ends get a copy).
    fn script(reqs: Vec<Req>) -> impl Fn() -> crate::rpc::ReqDraw {
        move || {
            let reqs = reqs.clone();
            let mut next: Vec<usize> = vec![];
            Box::new(move |i: usize| {
                if next.len() <= i {
                    next.resize(i + 1, 0);
                }
                let r = reqs[next[i] % reqs.len()];
                next[i] += 1;
                r
            })
        }
    }

    pub(crate) fn run_rpc(
        rpc: RpcSpec,
        size: u64,
        qps: u32,
        depth: u32,
        iterations: u64,
        reqs: Vec<Req>,
    ) -> (Log, RpcStats) {
        run_rpc_with(rpc, size, qps, depth, iterations, reqs, None)
    }

    /// `junk`: bytes written over the start of the server's memory once it is registered (a
    /// server that returns something else than what was stored).
    pub(crate) fn run_rpc_with(
        rpc: RpcSpec,
        size: u64,
        qps: u32,
        depth: u32,
        iterations: u64,
        reqs: Vec<Req>,
        junk: Option<Vec<u8>>,
    ) -> (Log, RpcStats) {
        let log = Rc::new(RefCell::new(Log::default()));
        let meter: SharedMeter = log.clone();
        let rdv = braid_verbs::rendezvous::board();
        let spec = PerfSpec {
            kind: PerfKind::SendBw,
            size,
            qps,
            tx_depth: depth,
            iterations: Some(iterations),
            duration: None,
            start: 0,
            cq_mod: 1,
            post_list: 1,
            priority: None,
        };
        let draw = script(reqs);
        let mut net = FakeNet::new(2);
        let h = net.hosts();
        let server = net.add_tenant(
            h[1],
            Box::new(RpcServer::new(
                spec.clone(),
                rpc,
                0,
                0,
                meter.clone(),
                rdv.clone(),
                1 << 40,
                draw(),
            )),
            vec![],
        );
        let client = RpcClient::new(spec, rpc, 0, 0, meter, rdv, 1 << 41, draw());
        let stats = client.stats();
        net.add_tenant(h[0], Box::new(client), vec![]);
        if let Some(j) = junk {
            net.step();
            net.step();
            net.write_mem(h[1], server, 1 << 40, &j);
        }
        net.run();
        let out = std::mem::take(&mut *log.borrow_mut());
        let s = stats.borrow().clone();
        (out, s)
    }

    fn req(op: Op, key: u32, size: u64) -> Req {
        Req { op, key, size }
    }

    #[test]
    fn set_get_ping_return_what_was_set_over_both_wires() {
        // SET then GET of the same key, a PING, a GET of part of the value, a SET of the other
        // key and its GET: every GET must return the bytes its connection SET, byte for byte.
        let reqs = vec![
            req(Op::Put, 0, 3000),
            req(Op::Get, 0, 3000),
            req(Op::Ping, 0, 0),
            req(Op::Get, 0, 10),
            req(Op::Put, 1, 777),
            req(Op::Get, 1, 777),
        ];
        for one_sided in [true, false] {
            for chunk in [u64::MAX, 1024] {
                let rpc = rpc_spec(one_sided, chunk, true);
                let (l, s) = run_rpc(rpc, 4096, 3, 2, 12, reqs.clone());
                let tag = format!("one_sided {one_sided} chunk {chunk}");
                assert_eq!(s.mismatched, 0, "{tag}");
                assert_eq!(s.verified, 3 * 12, "{tag}");
                assert_eq!((s.puts, s.gets, s.pings), (3 * 4, 3 * 6, 3 * 2), "{tag}");
                assert_eq!(l.lat.len(), 36, "{tag}");
                let per_conn: u64 = 2 * (3000 + 3000 + 10 + 777 + 777);
                assert_eq!(l.bytes, 3 * per_conn, "{tag}");
                assert!(l.finished.is_some(), "{tag}");
                // A request and its reply: two one-way trips of the fake (2 µs each) at least.
                assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{tag}");
            }
        }
    }

    #[test]
    fn a_large_value_goes_in_chunks_and_comes_back_whole() {
        // 3 MB in 1 MiB pieces, both ways, with the protocol checking every byte.
        let reqs = vec![req(Op::Put, 0, 3_000_000), req(Op::Get, 0, 3_000_000)];
        for one_sided in [true, false] {
            let rpc = rpc_spec(one_sided, DEFAULT_CHUNK, true);
            let (l, s) = run_rpc(rpc, 3_000_000, 1, 1, 4, reqs.clone());
            assert_eq!((s.verified, s.mismatched), (4, 0), "one_sided {one_sided}");
            assert_eq!(l.bytes, 4 * 3_000_000);
        }
    }

    #[test]
    fn a_server_without_bytes_follows_the_request_stream() {
        // Untracked memory: the server learns each request from the shared stream and the
        // client measures the same request count and bytes.
        let reqs = vec![
            req(Op::Put, 1, 5000),
            req(Op::Ping, 0, 0),
            req(Op::Get, 1, 64),
        ];
        for one_sided in [true, false] {
            let rpc = rpc_spec(one_sided, 2048, false);
            let (l, s) = run_rpc(rpc, 8192, 2, 3, 9, reqs.clone());
            assert_eq!(s.verified, 0);
            assert_eq!(l.lat.len(), 18);
            assert_eq!(l.bytes, 2 * 3 * (5000 + 64));
            assert!(l.finished.is_some());
        }
    }

    #[test]
    fn the_mix_picks_by_weight() {
        let m = Mix {
            set: 1.0,
            get: 2.0,
            ping: 1.0,
        };
        assert_eq!(m.pick(0.0), Command::Set);
        assert_eq!(m.pick(0.3), Command::Get);
        assert_eq!(m.pick(0.74), Command::Get);
        assert_eq!(m.pick(0.76), Command::Ping);
        let only_get = Mix {
            set: 0.0,
            get: 1.0,
            ping: 0.0,
        };
        assert_eq!(only_get.pick(0.999), Command::Get);
        assert!(!Mix {
            set: 0.0,
            get: 0.0,
            ping: 0.0
        }
        .is_valid());
        let r = m.request(0.0, 0.99, 0.999_999_9, MIN_VALUE, MAX_VALUE);
        assert_eq!(r.op, Op::Put);
        assert_eq!(r.key, KEYS - 1);
        assert!(r.size <= MAX_VALUE && r.size > MAX_VALUE - 100);
        assert_eq!(m.request(0.9, 0.0, 0.5, 10, 20).size, 0);
    }
}
