//! One `[[apps]]` entry: the keys that place the application in this run (`src`, `dst`,
//! `enabled`, its transport and verbs stack) around braid-apps' tagged [`AppSpec`] (its `kind`
//! and that kind's config, declared in the kind's file). The kind's config builds the client and
//! the server; the simulator provides the places and the run's seeded random streams.
//!
//! The entry is read tag first, as `braid_topo`'s tagged tables are: keys before `kind` are
//! held (as given) until the kind is known, the rest is read straight from the caller's map, so
//! an error inside a value keeps its key path. A key that only other kinds take is set aside
//! and refused, in the registry's words (`braid_apps::kinds`), when the entry is checked.

use crate::api::ScenarioError;
use crate::config::TransportOverride;
use braid_apps::{AppKind, AppSpec, KeyError};
use braid_engine::RngStream;
use braid_middleware::MiddlewareEntry;
use schemars::JsonSchema;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::rc::Rc;

/// A perftest-like (or key-value, cache, attacker) application between two hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct AppEntry {
    /// Host index of the client (the side that posts).
    pub src: u32,
    pub dst: u32,
    pub enabled: bool,
    /// This tenant's verbs stack, top to bottom (default: its host's stack from `[middleware]`).
    pub middleware: Option<Vec<MiddlewareEntry>>,
    /// This tenant's transport: a partial `[transport]` table over its `src` host's.
    pub transport: Option<TransportOverride>,
    /// The kind and its config.
    pub spec: AppSpec,
    /// Keys only other kinds take that the entry set (refused by [`AppEntry::check`]).
    set_aside: Vec<KeyError>,
}

impl AppEntry {
    pub fn new(src: u32, dst: u32, spec: AppSpec) -> Self {
        AppEntry {
            src,
            dst,
            enabled: true,
            middleware: None,
            transport: None,
            spec,
            set_aside: vec![],
        }
    }

    pub fn kind(&self) -> AppKind {
        self.spec.kind()
    }

    /// The checks of the entry alone, after the placement's own (`src`/`dst`, priority,
    /// transport, which need the scenario): a key only other kinds take, then the kind's
    /// config. Keys are relative to the entry.
    pub fn check(&self) -> Result<(), KeyError> {
        if let Some(e) = self.set_aside.first() {
            return Err(e.clone());
        }
        self.spec.factory().map(|_| ())
    }
}

/// The keys of an entry that are the runner's, not the kind's.
#[derive(Default)]
struct Placement {
    src: Option<u32>,
    dst: Option<u32>,
    enabled: Option<bool>,
    middleware: Option<Vec<MiddlewareEntry>>,
    transport: Option<TransportOverride>,
}

impl Placement {
    const KEYS: &'static [&'static str] = &["src", "dst", "enabled", "middleware", "transport"];
}

/// Reads one placement key's value from `d`.
fn place<'de, D: Deserializer<'de>>(p: &mut Placement, key: &str, d: D) -> Result<(), D::Error> {
    match key {
        "src" => p.src = Some(u32::deserialize(d)?),
        "dst" => p.dst = Some(u32::deserialize(d)?),
        "enabled" => p.enabled = Some(bool::deserialize(d)?),
        "middleware" => p.middleware = Some(Vec::deserialize(d)?),
        "transport" => p.transport = Some(TransportOverride::deserialize(d)?),
        _ => unreachable!("only Placement::KEYS"),
    }
    Ok(())
}

/// A seed that hands one placement key's value to [`place`].
struct PlaceSeed<'a> {
    p: &'a mut Placement,
    key: &'a str,
}

impl<'de> DeserializeSeed<'de> for PlaceSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        place(self.p, self.key, d)
    }
}

/// The entry's keys after `kind` for the kind's config: those held before it, then the live
/// map, without the placement keys and the keys only other kinds take (both read aside).
struct Rest<'a, A> {
    held: std::vec::IntoIter<(String, serde_json::Value)>,
    pending: Option<(String, serde_json::Value)>,
    map: A,
    kind: AppKind,
    place: &'a mut Placement,
    set_aside: &'a mut Vec<KeyError>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Rest<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        // Held keys are placement-free (the placement ones were read as they came).
        for (k, v) in self.held.by_ref() {
            if self.kind.sets_aside(&k) {
                self.set_aside.extend(self.kind.refusal(&k, &v));
                continue;
            }
            let key = seed.deserialize(k.as_str().into_deserializer())?;
            self.pending = Some((k, v));
            return Ok(Some(key));
        }
        while let Some(k) = self.map.next_key::<String>()? {
            if Placement::KEYS.contains(&k.as_str()) {
                self.map.next_value_seed(PlaceSeed {
                    p: self.place,
                    key: &k,
                })?;
            } else if self.kind.sets_aside(&k) {
                let v: serde_json::Value = self.map.next_value()?;
                self.set_aside.extend(self.kind.refusal(&k, &v));
            } else {
                return seed.deserialize(k.into_deserializer()).map(Some);
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        if let Some((k, v)) = self.pending.take() {
            return seed
                .deserialize(v)
                .map_err(|e| de::Error::custom(format_args!("{k}: {e}")));
        }
        self.map.next_value_seed(seed)
    }
}

impl<'de> Deserialize<'de> for AppEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AppEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an application table with `kind`, `src`, `dst` and `size`")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AppEntry, A::Error> {
                let mut p = Placement::default();
                let mut held = Vec::new();
                let kind = loop {
                    let Some(k) = map.next_key::<String>()? else {
                        return Err(de::Error::missing_field("kind"));
                    };
                    if k == "kind" {
                        break map.next_value::<AppKind>()?;
                    }
                    if Placement::KEYS.contains(&k.as_str()) {
                        map.next_value_seed(PlaceSeed { p: &mut p, key: &k })?;
                    } else {
                        held.push((k, map.next_value::<serde_json::Value>()?));
                    }
                };
                let mut set_aside = Vec::new();
                let rest = Rest {
                    held: held.into_iter(),
                    pending: None,
                    map,
                    kind,
                    place: &mut p,
                    set_aside: &mut set_aside,
                };
                let spec = AppSpec::read(kind, de::value::MapAccessDeserializer::new(rest))?;
                Ok(AppEntry {
                    src: p.src.ok_or_else(|| de::Error::missing_field("src"))?,
                    dst: p.dst.ok_or_else(|| de::Error::missing_field("dst"))?,
                    enabled: p.enabled.unwrap_or(true),
                    middleware: p.middleware,
                    transport: p.transport,
                    spec,
                    set_aside,
                })
            }
        }
        d.deserialize_map(V)
    }
}

impl Serialize for AppEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = serde_json::to_value(&self.spec).map_err(serde::ser::Error::custom)?;
        let obj = v
            .as_object_mut()
            .ok_or_else(|| serde::ser::Error::custom("an app's config is a table"))?;
        obj.insert("src".into(), self.src.into());
        obj.insert("dst".into(), self.dst.into());
        obj.insert("enabled".into(), self.enabled.into());
        if let Some(m) = &self.middleware {
            let m = serde_json::to_value(m).map_err(serde::ser::Error::custom)?;
            obj.insert("middleware".into(), m);
        }
        if let Some(t) = &self.transport {
            let t = serde_json::to_value(t).map_err(serde::ser::Error::custom)?;
            obj.insert("transport".into(), t);
        }
        v.serialize(s)
    }
}

impl JsonSchema for AppEntry {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AppEntry".into()
    }
    /// braid-apps' kinds, each with the placement keys added.
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut s = AppSpec::json_schema(g);
        let sub = |s: schemars::Schema| serde_json::to_value(s).expect("schema serialises");
        let host = |what: &str| {
            serde_json::json!({"type": "integer", "format": "uint32", "minimum": 0,
                               "description": what})
        };
        let props = [
            (
                "src",
                host("Host index of the client (the side that posts)."),
            ),
            ("dst", host("Host index of the server.")),
            (
                "enabled",
                serde_json::json!({"type": "boolean", "default": true}),
            ),
            (
                "middleware",
                sub(g.subschema_for::<Option<Vec<MiddlewareEntry>>>()),
            ),
            (
                "transport",
                sub(g.subschema_for::<Option<TransportOverride>>()),
            ),
        ];
        for key in ["oneOf", "anyOf"] {
            if let Some(variants) = s.get_mut(key).and_then(|v| v.as_array_mut()) {
                for v in variants {
                    if let Some(o) = v.get_mut("properties").and_then(|p| p.as_object_mut()) {
                        for (k, schema) in &props {
                            o.insert(k.to_string(), schema.clone());
                        }
                    }
                    if let Some(r) = v.get_mut("required").and_then(|r| r.as_array_mut()) {
                        r.extend(["src".into(), "dst".into()]);
                    }
                }
            }
        }
        s
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
    pub meter: crate::apps::SharedMeter,
    pub rdv: crate::apps::Rendezvous,
    pub server_base: u64,
    pub client_base: u64,
    /// An attacker's victim: the connections of the app its `victim` names.
    pub victim: Option<braid_apps::attack::Victim>,
}

/// The run's named streams (`RngStream`: the run's seed, a name, indices), as the apps draw.
struct SimDraws {
    seed: u64,
}

struct SimDraw(RngStream);

impl braid_apps::Draw for SimDraw {
    fn uniform(&mut self) -> f64 {
        self.0.uniform()
    }
    fn bernoulli(&mut self, p: f64) -> bool {
        self.0.bernoulli(p)
    }
}

impl braid_apps::Draws for SimDraws {
    fn stream(&self, name: &str, indices: &[u64]) -> Box<dyn braid_apps::Draw> {
        Box::new(SimDraw(RngStream::new(self.seed, name, indices)))
    }
}

/// The server (on `dst`) and the client (on `src`) of `a`, or the key its kind refuses
/// (`Scenario::validate` has refused it already for a scenario read from a file).
pub fn build(a: &AppEntry, e: Ends) -> Result<braid_apps::AppPair, ScenarioError> {
    let config = a
        .set_aside
        .first()
        .map_or_else(|| a.spec.factory(), |k| Err(k.clone()))
        .map_err(|k| crate::build::err(format!("apps[{}].{}", e.index, k.key), k.message))?;
    Ok(config.build(braid_apps::AppEnds {
        index: e.index,
        flow: e.flow,
        conn0: e.conn0,
        meter: e.meter,
        rdv: e.rdv,
        server_base: e.server_base,
        client_base: e.client_base,
        victim: e.victim,
        draws: Rc::new(SimDraws { seed: e.seed }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reads `[[apps]]` as a scenario does (key paths tracked).
    fn read(v: serde_json::Value) -> Result<Vec<AppEntry>, (String, String)> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            (path, e.into_inner().to_string())
        })
    }

    /// Where `kind` and the placement keys sit in the table does not matter: the same entry.
    #[test]
    fn the_entry_is_the_same_whatever_the_key_order() {
        let keys = [
            ("src", json!(0)),
            ("dst", json!(2)),
            ("size", json!("4KB")),
            ("qps", json!(3)),
            ("transport", json!({"kind": "mp-rdma"})),
            ("middleware", json!(["raw"])),
            ("enabled", json!(false)),
            ("mode", json!("two-sided")),
        ];
        let table = |kind_at: usize| {
            let mut s = String::from("[{");
            for (i, (k, v)) in keys.iter().enumerate() {
                if i == kind_at {
                    s += "\"kind\": \"kv\", ";
                }
                s += &format!("\"{k}\": {v}, ");
            }
            if kind_at >= keys.len() {
                s += "\"kind\": \"kv\", ";
            }
            s.truncate(s.len() - 2);
            s + "}]"
        };
        let first = read(serde_json::from_str(&table(0)).unwrap()).unwrap();
        for at in 1..=keys.len() {
            assert_eq!(
                read(serde_json::from_str(&table(at)).unwrap()).unwrap(),
                first
            );
        }
        let a = &first[0];
        assert_eq!((a.src, a.dst, a.enabled), (0, 2, false));
        assert!(a.transport.is_some() && a.middleware.is_some());
        assert_eq!(a.spec.common().qps, 3);
        // And it writes back to what it read.
        assert_eq!(read(serde_json::to_value(&first).unwrap()).unwrap(), first);
    }

    /// Straight from text, in the file's order (a JSON value would sort the keys).
    #[test]
    fn kind_first_in_the_text() {
        let text = r#"[{"kind": "write_bw", "src": 0, "dst": 2, "size": "16KB", "start": "0ms"}]"#;
        let de = &mut serde_json::Deserializer::from_str(text);
        let a: Vec<AppEntry> = serde_path_to_error::deserialize(de).unwrap();
        assert_eq!((a[0].src, a[0].dst), (0, 2));
        let sc = r#"{"duration": "1ms", "topology": {"kind": "dumbbell", "left": 2, "right": 2,
            "host_link": {"rate": "10Gbps", "delay": "1us"},
            "bottleneck": {"rate": "10Gbps", "delay": "1us"}}, "apps": "#;
        crate::Scenario::from_json(&format!("{sc}{text}}}")).unwrap();
    }

    /// A bad value after `kind` keeps its key path; one before it (held until the kind was
    /// known) is named in the message.
    #[test]
    fn a_bad_value_is_named_before_and_after_the_kind() {
        let after = read(json!([{"kind": "write_bw", "src": 0, "dst": 1, "size": "4 parsecs"}]));
        // serde_json's map is ordered by key: "dst", "kind", "size", "src".
        let (path, _) = after.unwrap_err();
        assert_eq!(path, "[0].size");
        let (path, msg) =
            read(json!([{"kind": "write_bw", "cq_mod": "x", "src": 0, "dst": 1, "size": 1}]))
                .unwrap_err();
        assert_eq!(path, "[0]");
        assert!(msg.starts_with("cq_mod: "), "{msg}");
        let (path, _) =
            read(json!([{"kind": "write_bw", "src": -1, "dst": 1, "size": 1}])).unwrap_err();
        assert_eq!(path, "[0].src");
    }

    /// A key only other kinds take is read aside and refused when the entry is checked, in
    /// the registry's words; a value that does not count as set (a post list of 1) is not.
    #[test]
    fn another_kinds_key_is_refused_when_checked() {
        let a = read(json!([{"kind": "write_lat", "src": 0, "dst": 1, "size": 8,
                             "post_list": 4, "verify": false}]))
        .unwrap();
        let e = a[0].check().unwrap_err();
        assert_eq!(e.key, "post_list");
        assert!(e.message.contains("perftest -l"), "{e:?}");
        let a = read(json!([{"kind": "write_lat", "src": 0, "dst": 1, "size": 8,
                             "post_list": 1, "verify": false}]))
        .unwrap();
        assert_eq!(a[0].check(), Ok(()));
        // A key no kind takes is the kind's config's to refuse.
        let (_, msg) =
            read(json!([{"kind": "write_lat", "src": 0, "dst": 1, "size": 8, "zzz": 1}]))
                .unwrap_err();
        assert!(msg.contains("unknown field `zzz`"), "{msg}");
    }
}
