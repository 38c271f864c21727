//! braid-middleware: host mechanisms between applications and the RNIC.
//!
//! Each mechanism is one module (or folder) holding its config type beside its code; the config
//! is the mechanism's factory ([`braid_verbs::MiddlewareFactory`], the pattern of quinn-proto's
//! congestion controllers). [`MiddlewareSpec`] lists them for scenario files: an entry is a name
//! (`"raw"`, defaults) or a table with `kind` and the mechanism's parameters. The crate depends on
//! the verbs seam only, never on the simulator, so the same mechanisms run on real NICs.
//!
//! Adding a mechanism: a module with `XConfig: MiddlewareFactory + Deserialize + JsonSchema` and
//! its layer (and, if host-scoped, its agent through `HostCtx::shared`/`add_agent`), plus one arm
//! in [`MiddlewareSpec`]. See `docs/middleware.md`.

pub mod drum;
pub mod justitia;
pub mod partition;
pub mod peer_link;
pub mod perf;
pub mod raw;
pub mod virtuoso;

pub use drum::{DrumConfig, ShareConfig};
pub use justitia::JustitiaConfig;
pub use partition::PartitionConfig;
pub use perf::PerfConfig;
pub use raw::RawConfig;
pub use virtuoso::VirtuosoConfig;

use braid_verbs::MiddlewareFactory;
use schemars::JsonSchema;
use serde::de::{self, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// One mechanism with its parameters, as a scenario names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MiddlewareSpec {
    /// Plain RDMA.
    Raw(RawConfig),
    /// PeRF: preemption with sub-WRs and 0_WAITs, multi-QP PAUSE/RESUME (docs/perf.md).
    Perf(PerfConfig),
    /// Justitia (NSDI '22): split and pace bandwidth tenants against a latency target
    /// (Justitia_R: `target = "15us"`).
    Justitia(JustitiaConfig),
    /// Data-partition load balancing: chunks over several QPs of distinct UDP source ports,
    /// static or completion-driven assignment (docs/partition.md).
    Partition(PartitionConfig),
    /// Virtuoso: software multipath over several RC QPs, one per virtual path
    /// (docs/virtuoso.md).
    Virtuoso(VirtuosoConfig),
    /// DRUM's host agent: shared QPs and CQ, a virtual request pool scheduled at NUM rates
    /// (docs/drum-agent.md).
    Drum(DrumConfig),
    /// QP sharing (DRUM's SHARE baseline): connections to a host share one QP, 5 per QP, with
    /// lock contention per post (docs/drum-agent.md).
    Share(ShareConfig),
}

impl MiddlewareSpec {
    /// Every mechanism's name, as a scenario's `kind` says it.
    pub const NAMES: &'static [&'static str] = &[
        "raw",
        "perf",
        "justitia",
        "partition",
        "virtuoso",
        "drum",
        "share",
    ];

    /// The mechanism's factory: its config.
    pub fn factory(&self) -> &dyn MiddlewareFactory {
        match self {
            MiddlewareSpec::Raw(c) => c,
            MiddlewareSpec::Perf(c) => c,
            MiddlewareSpec::Justitia(c) => c,
            MiddlewareSpec::Partition(c) => c,
            MiddlewareSpec::Virtuoso(c) => c,
            MiddlewareSpec::Drum(c) => c,
            MiddlewareSpec::Share(c) => c,
        }
    }
    /// The mechanism's name.
    pub fn name(&self) -> &'static str {
        self.factory().name()
    }
}

/// A stack entry in a scenario: a mechanism's name (its defaults) or a table with `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct MiddlewareEntry(pub MiddlewareSpec);

impl<'de> Deserialize<'de> for MiddlewareEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MiddlewareEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a middleware name (\"raw\") or a table with `kind` and parameters")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<MiddlewareEntry, E> {
                if !MiddlewareSpec::NAMES.contains(&name) {
                    return Err(E::custom(unknown(name)));
                }
                let map = std::iter::once(("kind", name)).collect::<Vec<_>>();
                let d = de::value::MapDeserializer::<_, E>::new(
                    map.into_iter()
                        .map(|(k, v)| (k.into_deserializer(), v.into_deserializer())),
                );
                MiddlewareSpec::deserialize(d).map(MiddlewareEntry)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MiddlewareEntry, A::Error> {
                MiddlewareSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(MiddlewareEntry)
                    .map_err(|e| {
                        // Say "middleware", not serde's "variant".
                        let m = e.to_string();
                        // (only the kind's own variants: a parameter's enum keeps serde's
                        // "unknown variant `x`, expected `a` or `b`")
                        match m
                            .strip_prefix("unknown variant `")
                            .filter(|_| m.contains("`raw`"))
                        {
                            Some(rest) => {
                                de::Error::custom(unknown(rest.split('`').next().unwrap_or("")))
                            }
                            None => e,
                        }
                    })
            }
        }
        d.deserialize_any(V)
    }
}

fn unknown(name: &str) -> String {
    format!(
        "unknown middleware {name:?}; available: {}",
        MiddlewareSpec::NAMES.join(", ")
    )
}

impl JsonSchema for MiddlewareEntry {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MiddlewareEntry".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let spec = g.subschema_for::<MiddlewareSpec>();
        schemars::json_schema!({
            "description": "A mechanism's name (with its defaults) or a table with `kind` and its parameters",
            "anyOf": [ { "type": "string" }, spec ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(j: &str) -> Result<Vec<MiddlewareEntry>, String> {
        serde_json::from_str(j).map_err(|e| e.to_string())
    }

    #[test]
    fn entries_are_names_or_tables() {
        let v = parse(r#"["raw", {"kind": "raw"}]"#).unwrap();
        assert_eq!(v[0], v[1]);
        assert_eq!(v[0].0.name(), "raw");
    }

    #[test]
    fn every_listed_name_is_a_mechanism_and_every_mechanism_is_listed() {
        for n in MiddlewareSpec::NAMES {
            let v = parse(&format!("[{n:?}]")).unwrap();
            assert_eq!(v[0].0.name(), *n);
        }
        let schema = serde_json::to_value(schemars::schema_for!(MiddlewareSpec)).unwrap();
        let variants = schema["oneOf"].as_array().map_or(0, |v| v.len());
        assert_eq!(variants, MiddlewareSpec::NAMES.len(), "{schema}");
    }

    #[test]
    fn unknown_names_and_keys_are_refused_by_name() {
        let e = parse(r#"["nope"]"#).unwrap_err();
        assert!(
            e.contains("unknown middleware \"nope\"; available: raw"),
            "{e}"
        );
        let e = parse(r#"[{"kind": "nope"}]"#).unwrap_err();
        assert!(e.contains("unknown middleware \"nope\""), "{e}");
        let e = parse(r#"[{"kind": "raw", "speed": 3}]"#).unwrap_err();
        assert!(e.contains("speed"), "{e}");
    }
}
