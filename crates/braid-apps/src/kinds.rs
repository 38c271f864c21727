//! Application kinds as factories (issue 29 step 2): each kind's file declares its config (the
//! keys every kind takes, `crate::spec`, and its own; serde and schema derived there) and that
//! config checks itself and builds the kind's two ends ([`AppFactory::build`]). [`app_kinds!`]
//! lists the kinds, one line each, and generates [`AppKind`], the tagged [`AppSpec`]
//! (`kind = "..."`) and their dispatch, so adding a kind is one file and one line here.
//!
//! Runners provide what the apps cannot make themselves: their ends' places ([`AppEnds`]) and
//! seeded random streams ([`Draws`]): the simulator from its run seed (`braid_engine`'s named
//! streams), `braid-perftest` from [`SplitMixDraws`]. The keys that place an app (`src`, `dst`,
//! its transport and verbs stack) are the runner's: the scenario's `[[apps]]` entry wraps an
//! [`AppSpec`] with them.

use crate::attack::Victim;
use crate::spec::KindConfig;
use crate::{Rendezvous, SharedMeter};
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

/// Whether an entry sets a key, from its value as the table gave it.
type IsSet = fn(&serde_json::Value) -> bool;

/// The keys only some kinds take: whether an entry sets it, and what a kind that does not take
/// it says (the words the scenario checks have always used).
///
/// `get_ratio` and `min_size` stay as they always were: accepted, and ignored, by the kinds
/// that do not draw values (a sweep switches `kind` between kv and redis and leaves the kv keys
/// set, `experiments/drum/test-case-3.toml`), so a value there never counts as set.
const ONLY_SOME_KINDS: &[(&str, IsSet, &str)] = &[
    (
        "post_list",
        |v| v.as_u64() != Some(1),
        "a post list above 1 is for write_bw, send_bw and read_bw only (perftest -l)",
    ),
    (
        "sync_ratio",
        |v| v.as_f64() != Some(0.0),
        "only write_bw and send_bw post streams of messages to flag",
    ),
    (
        "mode",
        |_| true,
        "only kv and redis apps have a mode (\"one-sided\" or \"two-sided\")",
    ),
    ("mix", |_| true, "only redis apps have a command mix"),
    (
        "chunk",
        |_| true,
        "only redis apps cut messages into chunks",
    ),
    (
        "verify",
        |v| v.as_bool() != Some(false),
        "only redis and two-sided kv apps check their values",
    ),
    (
        "victim",
        |_| true,
        "only rkey_thief and qp_hijacker apps have a victim",
    ),
    ("get_ratio", |_| false, "only kv apps draw GETs and PUTs"),
    (
        "min_size",
        |_| false,
        "only kv and redis apps draw value sizes",
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

/// The kinds: one line each, `Variant = "name" => the kind's config`, its doc comment the kind's
/// description in `braid schema`. Generates [`AppKind`], the tagged [`AppSpec`] (serde,
/// schema) and their dispatch.
macro_rules! app_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $config:ty,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        pub enum AppKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        /// An `[[apps]]` table: its `kind` and that kind's config (the keys every kind takes and
        /// the kind's own).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "kind")]
        pub enum AppSpec {
            $($(#[$doc])* #[serde(rename = $name)] $variant($config),)*
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

            /// The optional keys only some kinds take that this kind does.
            pub fn keys(self) -> &'static [&'static str] {
                match self {
                    $(AppKind::$variant => <$config as KindConfig>::keys(),)*
                }
            }

            /// The attackers (`crate::attack`).
            pub fn is_attacker(self) -> bool {
                match self {
                    $(AppKind::$variant => <$config as KindConfig>::attacker(),)*
                }
            }
        }

        impl AppSpec {
            pub fn kind(&self) -> AppKind {
                match self {
                    $(AppSpec::$variant(_) => AppKind::$variant,)*
                }
            }

            /// The kind's config.
            pub fn config(&self) -> &dyn KindConfig {
                match self {
                    $(AppSpec::$variant(c) => c,)*
                }
            }

            /// Reads the config of `kind` from the rest of its table: for a runner that read
            /// the tag itself and hands over the caller's map unbuffered, so key paths survive.
            pub fn read<'de, D: serde::Deserializer<'de>>(
                kind: AppKind,
                d: D,
            ) -> Result<AppSpec, D::Error> {
                Ok(match kind {
                    $(AppKind::$variant => AppSpec::$variant(<$config>::deserialize(d)?),)*
                })
            }
        }
    };
}

app_kinds! {
    WriteBw = "write_bw" => crate::perf::BwConfig,
    WriteLat = "write_lat" => crate::perf::LatConfig,
    SendBw = "send_bw" => crate::perf::BwConfig,
    /// perftest's send_lat: a ping-pong of SENDs, every round trip a latency sample.
    SendLat = "send_lat" => crate::perf::LatConfig,
    ReadBw = "read_bw" => crate::perf::ReadBwConfig,
    /// One WRITE at a time per QP (`tx_depth` outstanding), each one's completion time a
    /// latency sample: DRUM's per-WQE completion time.
    WqeLat = "wqe_lat" => crate::perf::LatConfig,
    /// A one-sided key-value client (DRUM §V): per request a GET (READ) with probability
    /// `get_ratio`, else a PUT (WRITE), of a value size uniform in [`min_size`, `size`]; every
    /// request's completion time a latency sample. `mode = "two-sided"`: GET and PUT as
    /// SEND/RECV requests answered by SENDs.
    Kv = "kv" => crate::kv::KvConfig,
    /// A Redis-like cache (DRUM §V): SET / GET / PING in the proportions of `mix`, values uniform
    /// in [`min_size`, `size`] (10 B–512 MB in the paper), over one-sided WRITEs or SEND/RECV
    /// (`mode`), messages cut at `chunk`; every command's completion time a latency sample.
    Redis = "redis" => crate::redis::RedisConfig,
    /// Husky-style attacker (`braid_apps::attack`): `qps` one-sided READs and WRITEs, one per
    /// QP, over its own connections to an accomplice on `dst`, naming the `victim` app's learned
    /// rkey and address, guessed rkeys and addresses, and its own key out of bounds.
    RkeyThief = "rkey_thief" => crate::attack::rkey_thief::RkeyThiefConfig,
    /// Attacker: connects QPs to the `victim` app's QP numbers and posts a SEND, a WRITE and a
    /// READ of `size` over each (a READ of PeRF's `large_msg` or more is converted by PeRF);
    /// on its own host, local verbs on the victim's QP numbers.
    QpHijacker = "qp_hijacker" => crate::attack::qp_hijacker::QpHijackerConfig,
    /// Attacker: `iterations` (default 1000) memory registrations of `size` bytes, kept.
    MrFlood = "mr_flood" => crate::attack::mr_flood::MrFloodConfig,
}

impl AppKind {
    /// Whether this kind takes the optional per-kind `key`.
    pub fn takes(self, key: &str) -> bool {
        self.keys().contains(&key)
    }

    /// Whether `key` is one only some kinds take and this one does not: a runner reads such a
    /// key aside (its value as given) instead of handing it to the kind's config, which does
    /// not know it, and refuses the entry with [`AppKind::refusal`] when it checks it.
    pub fn sets_aside(self, key: &str) -> bool {
        !self.takes(key) && ONLY_SOME_KINDS.iter().any(|(k, _, _)| *k == key)
    }

    /// For a key set aside: the words the entry is refused with, if its value counts as set
    /// (a post list of 1, a sync ratio of 0 and `verify = false` do not, as before).
    pub fn refusal(self, key: &str, value: &serde_json::Value) -> Option<KeyError> {
        let (key, set, why) = ONLY_SOME_KINDS.iter().find(|(k, _, _)| *k == key)?;
        (!self.takes(key) && set(value)).then(|| KeyError::new(key, *why))
    }
}

impl AppSpec {
    /// Checks the entry (the keys every kind takes, then the kind's own) and makes its
    /// factory.
    pub fn factory(&self) -> Result<Box<dyn AppFactory>, KeyError> {
        let c = self.config();
        c.common().validate(self.kind().is_attacker())?;
        c.factory(self.kind())
    }

    /// The keys every kind takes.
    pub fn common(&self) -> crate::spec::AppCommon {
        self.config().common()
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
            for key in k.keys() {
                assert!(
                    ONLY_SOME_KINDS.iter().any(|(o, _, _)| o == key),
                    "{}: {key}",
                    k.name()
                );
            }
        }
    }

    /// Each kind's `keys()` are exactly the keys of `ONLY_SOME_KINDS` its config declares (the
    /// properties of its variant in the schema): a key the config has but does not list would
    /// be set aside unread, one it lists but does not have would reach the config as unknown.
    #[test]
    fn each_kinds_listed_keys_are_its_configs_own() {
        let schema = serde_json::to_value(schemars::schema_for!(AppSpec)).unwrap();
        let variants = schema["oneOf"].as_array().expect("one schema per kind");
        assert_eq!(variants.len(), AppKind::ALL.len());
        for (v, k) in variants.iter().zip(AppKind::ALL) {
            let props = v["properties"].as_object().expect("a table per kind");
            assert_eq!(props["kind"]["const"], k.name(), "{v}");
            let own: Vec<&str> = ONLY_SOME_KINDS
                .iter()
                .map(|(key, _, _)| *key)
                .filter(|key| props.contains_key(*key))
                .collect();
            let mut listed = k.keys().to_vec();
            listed.sort_by_key(|key| ONLY_SOME_KINDS.iter().position(|(o, _, _)| o == key));
            assert_eq!(own, listed, "{}", k.name());
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
