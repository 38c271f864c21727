//! The client and the server of one `[[apps]]` entry, by kind, with the seeded draws of the
//! request applications (kv, redis): which request, which key, which size. The apps themselves
//! are in `braid-apps` (verbs only).

use crate::apps::{
    PerfClient, PerfServer, Rendezvous, ReqDraw, RpcClient, RpcServer, SharedMeter, SyncDraw,
};
use crate::config::{AppKind, AppSpec};
use braid_engine::RngStream;
use braid_verbs::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a KV or Redis-like application moves its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AppMode {
    /// kv: GET = READ, PUT = WRITE; redis: WRITEs into the peer's memory, the last of each
    /// message with immediate data (the doorbell).
    #[serde(rename = "one-sided")]
    OneSided,
    /// Requests and replies as SEND / RECV.
    #[serde(rename = "two-sided")]
    TwoSided,
}

/// A Redis-like application's command mix: relative weights (at least one positive).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RedisMix {
    pub set: f64,
    pub get: f64,
    pub ping: f64,
}

impl Default for RedisMix {
    fn default() -> Self {
        let m = braid_apps::redis::Mix::default();
        RedisMix {
            set: m.set,
            get: m.get,
            ping: m.ping,
        }
    }
}

impl RedisMix {
    pub fn mix(&self) -> braid_apps::redis::Mix {
        braid_apps::redis::Mix {
            set: self.set,
            get: self.get,
            ping: self.ping,
        }
    }
}

/// Where an application's two ends live and what they share.
pub struct Ends {
    /// Index of the `[[apps]]` entry (names its random streams).
    pub index: usize,
    pub seed: u64,
    pub flow: u32,
    /// Its first connection id on the board.
    pub conn0: u32,
    pub meter: SharedMeter,
    pub rdv: Rendezvous,
    pub server_base: u64,
    pub client_base: u64,
    /// An attacker's victim: the connections of the app its `victim` names.
    pub victim: Option<braid_apps::attack::Victim>,
}

/// How long an attacker waits for completions that may never come (a hijacked connection's
/// requests time out after the transport's retries): unless `duration` says, 10 ms, beyond
/// the default transport's retry time (7 retries of a sub-millisecond timeout).
const ATTACK_PATIENCE_PS: u64 = 10_000_000_000;

/// An attacker's two ends (`braid_apps::attack`), its parameters from the `[[apps]]` entry.
fn build_attacker(a: &AppSpec, e: Ends) -> (Box<dyn App>, Box<dyn App>) {
    use braid_apps::attack::{AttackEnds, MrFlood, QpHijacker, RkeyThief};
    let patience = a.duration.map_or(ATTACK_PATIENCE_PS, |d| d.0);
    let ends = AttackEnds {
        flow: e.flow,
        conn0: e.conn0,
        meter: e.meter,
        rdv: e.rdv,
        server_base: e.server_base,
        client_base: e.client_base,
        victim: e.victim,
    };
    match a.kind {
        AppKind::RkeyThief => RkeyThief {
            attempts: a.qps,
            size: a.size.0,
            start: a.start.0,
            patience,
        }
        .build(ends),
        AppKind::QpHijacker => QpHijacker {
            size: a.size.0,
            start: a.start.0,
            patience,
            retry_cnt: 7,
        }
        .build(ends),
        _ => MrFlood {
            regions: a.iterations.unwrap_or(1000),
            size: a.size.0,
        }
        .build(ends),
    }
}

/// The server (on `dst`) and the client (on `src`) of `a`.
pub fn build(a: &AppSpec, e: Ends) -> (Box<dyn App>, Box<dyn App>) {
    if a.kind.is_attacker() {
        return build_attacker(a, e);
    }
    let spec = a.perf_spec();
    let (hi, i) = (a.size.0.max(1), e.index as u64);
    let lo = a.min_size.map_or(hi, |m| m.0).min(hi);
    let size =
        move |rng: &mut RngStream| (lo + ((hi - lo + 1) as f64 * rng.uniform()) as u64).min(hi);
    let rpc = match (a.kind, a.mode) {
        (AppKind::Kv, Some(AppMode::TwoSided)) => {
            let p = a.get_ratio;
            let draw = move || {
                per_connection(e.seed, i, move |r| {
                    let get = r.bernoulli(p);
                    let key = r.uniform();
                    crate::apps::kv::request(get, key, size(r))
                })
            };
            Some((crate::apps::kv::two_sided(a.verify), draw(), draw()))
        }
        (AppKind::Redis, mode) => {
            let mix = a.mix.unwrap_or_default().mix();
            let draw = move || {
                per_connection(e.seed, i, move |r| {
                    let (c, k) = (r.uniform(), r.uniform());
                    mix.request(c, k, r.uniform(), lo, hi)
                })
            };
            let chunk = a.chunk.map_or(crate::apps::redis::DEFAULT_CHUNK, |c| c.0);
            let one_sided = mode != Some(AppMode::TwoSided);
            Some((
                crate::apps::redis::rpc_spec(one_sided, chunk, a.verify),
                draw(),
                draw(),
            ))
        }
        _ => None,
    };
    if let Some((rpc, server_draw, client_draw)) = rpc {
        let server = RpcServer::new(
            spec.clone(),
            rpc,
            e.flow,
            e.conn0,
            e.meter.clone(),
            e.rdv.clone(),
            e.server_base,
            server_draw,
        );
        let client = RpcClient::new(
            spec,
            rpc,
            e.flow,
            e.conn0,
            e.meter,
            e.rdv,
            e.client_base,
            client_draw,
        );
        return (Box::new(server), Box::new(client));
    }
    let server = PerfServer::new(
        spec.clone(),
        e.flow,
        e.conn0,
        e.meter.clone(),
        e.rdv.clone(),
        e.server_base,
    );
    let client: Box<dyn App> = if a.kind == AppKind::Kv {
        // One-sided: each request's kind and value size from one stream for the client.
        let mut rng = RngStream::new(e.seed, "app-kv", &[i]);
        let p = a.get_ratio;
        let draw = Box::new(move || {
            let get = rng.bernoulli(p);
            (get, size(&mut rng))
        });
        Box::new(crate::apps::KvClient::new(
            spec,
            e.flow,
            e.conn0,
            e.meter,
            e.rdv,
            e.client_base,
            draw,
        ))
    } else {
        // Which messages are flagged synchronise: drawn from the run's seed.
        let sync = (a.sync_ratio > 0.0).then(|| {
            let mut rng = RngStream::new(e.seed, "app-sync", &[i]);
            let p = a.sync_ratio;
            Box::new(move || rng.bernoulli(p)) as SyncDraw
        });
        Box::new(PerfClient::new(
            spec,
            e.flow,
            e.conn0,
            e.meter,
            e.rdv,
            e.client_base,
            sync,
        ))
    };
    (Box::new(server), client)
}

/// A request stream per connection (`app-rpc`, app `i`, connection `c`), drawn by `f`; the
/// client and the server each get one, and draw the same requests in the same order.
fn per_connection(
    seed: u64,
    i: u64,
    f: impl Fn(&mut RngStream) -> crate::apps::Req + 'static,
) -> ReqDraw {
    let mut streams: Vec<RngStream> = Vec::new();
    Box::new(move |c: usize| {
        while streams.len() <= c {
            streams.push(RngStream::new(seed, "app-rpc", &[i, streams.len() as u64]));
        }
        f(&mut streams[c])
    })
}
