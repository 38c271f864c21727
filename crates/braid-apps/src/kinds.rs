//! Application kinds as factories (issue 29 step 2): each kind's file holds its config, read from
//! an `[[apps]]` entry's keys ([`AppKeys`]) and checked there, and that config builds the kind's
//! two ends ([`AppFactory::build`]). [`AppKind`] lists the kinds, one line each; its dispatch is
//! generated, so adding a kind is one file and one line here.
//!
//! Runners provide what the apps cannot make themselves: their ends' places ([`AppEnds`]) and
//! seeded random streams ([`Draws`]): the simulator from its run seed (`braid_engine`'s named
//! streams), `braid-perftest` from [`SplitMixDraws`].
//!
//! The `[[apps]]` table itself (its serde form, schema and messages) stays with the scenario in
//! braid-sim: sizes and durations are parsed there by braid-units, which this crate, on the
//! verbs seam only, does not use; the scenario hands over [`AppKeys`] in plain units.

use crate::attack::Victim;
use crate::{PerfKind, PerfSpec, Rendezvous, SharedMeter};
use braid_verbs::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// One seeded random stream.
pub trait Draw {
    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64;
    /// True with probability `p`.
    fn bernoulli(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform() < p
    }
}

/// Named, independent random streams (`name`, indices), as a runner derives them from its seed:
/// the same name and indices give the same stream within a run.
pub trait Draws {
    fn stream(&self, name: &str, indices: &[u64]) -> Box<dyn Draw>;
}

/// The streams a run's applications share.
pub type SharedDraws = Rc<dyn Draws>;

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

/// An `[[apps]]` entry's keys as the applications take them: bytes and picoseconds. Keys a kind
/// does not take keep their defaults (None, 0, false, 1 for `post_list`).
#[derive(Debug, Clone, PartialEq)]
pub struct AppKeys {
    pub size: u64,
    pub qps: u32,
    pub tx_depth: u32,
    pub iterations: Option<u64>,
    pub duration: Option<u64>,
    pub start: u64,
    pub cq_mod: u32,
    pub post_list: u32,
    pub priority: Option<u8>,
    pub sync_ratio: f64,
    pub get_ratio: f64,
    pub min_size: Option<u64>,
    pub mode: Option<AppMode>,
    pub mix: Option<crate::redis::Mix>,
    pub chunk: Option<u64>,
    pub verify: bool,
    pub victim: Option<u32>,
}

impl AppKeys {
    /// The benchmark engine's parameters, for an app running as `kind`.
    pub fn perf(&self, kind: PerfKind) -> PerfSpec {
        PerfSpec {
            kind,
            size: self.size,
            qps: self.qps,
            tx_depth: self.tx_depth,
            iterations: self.iterations,
            duration: self.duration,
            start: self.start,
            cq_mod: self.cq_mod,
            post_list: self.post_list,
            priority: self.priority,
        }
    }
}

/// Where an application's two ends live and what they share.
pub struct AppEnds {
    /// Index of the `[[apps]]` entry (names its random streams).
    pub index: usize,
    pub flow: u32,
    /// Its first connection id on the board.
    pub conn0: u32,
    pub meter: SharedMeter,
    pub rdv: Rendezvous,
    pub server_base: u64,
    pub client_base: u64,
    /// An attacker's victim: the connections of the app its `victim` names.
    pub victim: Option<Victim>,
    pub draws: SharedDraws,
}

/// A key an application kind refuses: which key, and why (one line, in the user's terms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub key: &'static str,
    pub message: String,
}

impl KeyError {
    pub fn new(key: &'static str, message: impl Into<String>) -> Self {
        KeyError {
            key,
            message: message.into(),
        }
    }
}

/// An application's two ends: the server (on `dst`) and the client (on `src`).
pub type AppPair = (Box<dyn App>, Box<dyn App>);

/// A kind's config, the factory of its two ends.
pub trait AppFactory {
    fn build(&self, ends: AppEnds) -> AppPair;
}

/// What the registry knows of a kind, declared in the kind's file.
pub struct KindInfo {
    /// The optional keys only some kinds take (`ONLY_SOME_KINDS` in this file) that this one
    /// does.
    pub keys: &'static [&'static str],
    /// An attacker (`crate::attack`): its `duration` is its patience, and it is nobody's victim.
    pub attacker: bool,
    /// Reads and checks the kind's config from the entry's keys.
    pub config: fn(&AppKeys) -> Result<Box<dyn AppFactory>, KeyError>,
}

/// Whether an entry sets a key.
type IsSet = fn(&AppKeys) -> bool;

/// The keys only some kinds take: whether an entry sets it, and what a kind that does not take
/// it says (the words the scenario checks have always used).
const ONLY_SOME_KINDS: &[(&str, IsSet, &str)] = &[
    (
        "post_list",
        |k| k.post_list > 1,
        "a post list above 1 is for write_bw, send_bw and read_bw only (perftest -l)",
    ),
    (
        "sync_ratio",
        |k| k.sync_ratio > 0.0,
        "only write_bw and send_bw post streams of messages to flag",
    ),
    (
        "mode",
        |k| k.mode.is_some(),
        "only kv and redis apps have a mode (\"one-sided\" or \"two-sided\")",
    ),
    (
        "mix",
        |k| k.mix.is_some(),
        "only redis apps have a command mix",
    ),
    (
        "chunk",
        |k| k.chunk.is_some(),
        "only redis apps cut messages into chunks",
    ),
    (
        "verify",
        |k| k.verify,
        "only redis and two-sided kv apps check their values",
    ),
    (
        "victim",
        |k| k.victim.is_some(),
        "only rkey_thief and qp_hijacker apps have a victim",
    ),
];

/// The message a kind that takes `verify` gives when the entry's mode cannot check values.
pub(crate) fn verify_refused() -> KeyError {
    let (key, _, why) = ONLY_SOME_KINDS
        .iter()
        .find(|(k, _, _)| *k == "verify")
        .expect("verify is listed");
    KeyError::new(key, *why)
}

/// The kinds: one line each, `Variant = "name" => the kind's KindInfo`, its doc comment the
/// kind's description in `braid schema`. Generates [`AppKind`] (serde, schema) and its dispatch.
macro_rules! app_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $info:path,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        pub enum AppKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl AppKind {
            /// Every kind, in the registry's order.
            pub const ALL: &'static [AppKind] = &[$(AppKind::$variant),*];

            /// The kind's name in scenario files (and in the flows table's `kind`).
            pub fn name(self) -> &'static str {
                match self {
                    $(AppKind::$variant => $name,)*
                }
            }

            pub fn info(self) -> &'static KindInfo {
                match self {
                    $(AppKind::$variant => &$info,)*
                }
            }
        }
    };
}

app_kinds! {
    WriteBw = "write_bw" => crate::perf::WRITE_BW,
    WriteLat = "write_lat" => crate::perf::WRITE_LAT,
    SendBw = "send_bw" => crate::perf::SEND_BW,
    /// perftest's send_lat: a ping-pong of SENDs, every round trip a latency sample.
    SendLat = "send_lat" => crate::perf::SEND_LAT,
    ReadBw = "read_bw" => crate::perf::READ_BW,
    /// One WRITE at a time per QP (`tx_depth` outstanding), each one's completion time a
    /// latency sample: DRUM's per-WQE completion time.
    WqeLat = "wqe_lat" => crate::perf::WQE_LAT,
    /// A one-sided key-value client (DRUM §V): per request a GET (READ) with probability
    /// `get_ratio`, else a PUT (WRITE), of a value size uniform in [`min_size`, `size`]; every
    /// request's completion time a latency sample. `mode = "two-sided"`: GET and PUT as
    /// SEND/RECV requests answered by SENDs.
    Kv = "kv" => crate::kv::KIND,
    /// A Redis-like cache (DRUM §V): SET / GET / PING in the proportions of `mix`, values uniform
    /// in [`min_size`, `size`] (10 B–512 MB in the paper), over one-sided WRITEs or SEND/RECV
    /// (`mode`), messages cut at `chunk`; every command's completion time a latency sample.
    Redis = "redis" => crate::redis::KIND,
    /// Husky-style attacker (`braid_apps::attack`): `qps` one-sided READs and WRITEs, one per
    /// QP, over its own connections to an accomplice on `dst`, naming the `victim` app's learned
    /// rkey and address, guessed rkeys and addresses, and its own key out of bounds.
    RkeyThief = "rkey_thief" => crate::attack::rkey_thief::KIND,
    /// Attacker: connects QPs to the `victim` app's QP numbers and posts a SEND, a WRITE and a
    /// READ of `size` over each (a READ of PeRF's `large_msg` or more is converted by PeRF);
    /// on its own host, local verbs on the victim's QP numbers.
    QpHijacker = "qp_hijacker" => crate::attack::qp_hijacker::KIND,
    /// Attacker: `iterations` (default 1000) memory registrations of `size` bytes, kept.
    MrFlood = "mr_flood" => crate::attack::mr_flood::KIND,
}

impl AppKind {
    /// The attackers (`crate::attack`).
    pub fn is_attacker(self) -> bool {
        self.info().attacker
    }

    /// Whether this kind takes the optional per-kind `key`.
    pub fn takes(self, key: &str) -> bool {
        self.info().keys.contains(&key)
    }

    /// The kind's config from an entry's keys: a key only other kinds take is refused first,
    /// then the kind checks its own.
    pub fn config(self, keys: &AppKeys) -> Result<Box<dyn AppFactory>, KeyError> {
        for (key, set, why) in ONLY_SOME_KINDS {
            if set(keys) && !self.takes(key) {
                return Err(KeyError::new(key, *why));
            }
        }
        (self.info().config)(keys)
    }
}

/// SplitMix64 streams (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014; Vigna's `splitmix64.c`) for runners without the simulator's streams
/// (`braid-perftest`): each stream seeded from the run's seed, its name and its indices.
#[derive(Debug, Clone, Copy)]
pub struct SplitMixDraws {
    pub seed: u64,
}

/// One SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Draw for SplitMix64 {
    fn uniform(&mut self) -> f64 {
        // 53 random mantissa bits.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl Draws for SplitMixDraws {
    fn stream(&self, name: &str, indices: &[u64]) -> Box<dyn Draw> {
        // FNV-1a over the name and indices, mixed into the seed by one SplitMix64 step.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let bytes = name
            .bytes()
            .chain(indices.iter().flat_map(|i| i.to_le_bytes()));
        for b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3);
        }
        let mut g = SplitMix64(self.seed ^ h);
        Box::new(SplitMix64(g.next_u64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 against the published sequence for seed 1234567 (Rosetta Code,
    /// "Pseudo-random numbers/Splitmix64", from Vigna's reference implementation).
    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        let mut g = SplitMix64(1234567);
        let got: Vec<u64> = (0..5).map(|_| g.next_u64()).collect();
        assert_eq!(
            got,
            [
                6457827717110365317,
                3203168211198807973,
                9817491932198370423,
                4593380528125082431,
                16408922859458223821
            ]
        );
    }

    /// Streams of different names or indices differ; the same name and indices repeat.
    #[test]
    fn named_streams_are_independent_and_repeatable() {
        let d = SplitMixDraws { seed: 9 };
        let first = |n: &str, i: &[u64]| d.stream(n, i).uniform();
        assert_eq!(first("app-kv", &[0]), first("app-kv", &[0]));
        assert_ne!(first("app-kv", &[0]), first("app-kv", &[1]));
        assert_ne!(first("app-kv", &[0]), first("app-sync", &[0]));
    }

    /// Each refusal names exactly the kinds that take the key (so a new kind taking a key
    /// updates its words), and every key a kind lists is one of them.
    #[test]
    fn refusals_name_the_kinds_that_take_the_key() {
        for (key, _, why) in ONLY_SOME_KINDS {
            let words: std::collections::BTreeSet<&str> = why
                .split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .collect();
            for k in AppKind::ALL {
                assert_eq!(
                    words.contains(k.name()),
                    k.takes(key),
                    "{key}: {why:?} and {}",
                    k.name()
                );
            }
        }
        for k in AppKind::ALL {
            for key in k.info().keys {
                assert!(
                    ONLY_SOME_KINDS.iter().any(|(o, _, _)| o == key),
                    "{}: {key}",
                    k.name()
                );
            }
        }
    }

    /// Every kind's name is its serde name (the scenario's `kind`), and names are unique.
    #[test]
    fn kind_names_are_the_serde_names() {
        let mut seen = std::collections::BTreeSet::new();
        for k in AppKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            assert!(seen.insert(k.name()), "{} listed twice", k.name());
        }
    }
}
