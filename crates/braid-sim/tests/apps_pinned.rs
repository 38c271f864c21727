//! Every `[[apps]]` kind pinned before the apps became factories (issue 29 step 2): a hash of
//! what each kind's run measured, of the apps' part of the scenario schema, and of the refusal
//! of every per-kind key on a kind that does not take it. The hashes were printed on the code
//! before the move (`cargo test -p braid-sim --test apps_pinned -- --ignored --nocapture`, at
//! 45d237f, with std's hasher; the FNV-1a values below are of the same texts, checked equal
//! after the move) and must not change with a refactoring that claims to keep results.

mod common;
use common::*;
use serde_json::{json, Value};

/// FNV-1a, 64 bits (stable across toolchains, unlike std's `DefaultHasher`).
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A table as `{:?}` printed it when the hashes were pinned: its columns only. (Its validity
/// masks came later, with the table registry; they mark placeholders the columns still hold.)
struct Pinned<'a>(&'a braid_sim::Table);

impl std::fmt::Debug for Pinned<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("columns", &self.0.columns)
            .finish()
    }
}

/// Everything a run measured except wall-clock statistics. The flows table's `dport` column and
/// the messages table's `tenant` column came after the pins (an app has no dport: 0 in every row
/// here; `tenant` names the owner, measured nothing new), so the pinned text leaves them out. The
/// middleware layers' tables print as the map `Results::layer_tables` was when pinned.
fn fingerprint(s: &Value) -> u64 {
    let (_sim, mut r) = run(s);
    r.tables["flows"]
        .columns
        .retain(|(name, _)| name != "dport");
    r.tables["messages"]
        .columns
        .retain(|(name, _)| name != "tenant");
    let layer_tables: std::collections::BTreeMap<&str, Pinned> =
        r.layer_tables().map(|(n, t)| (n, Pinned(t))).collect();
    hash(&format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        Pinned(&r.tables["messages"]),
        Pinned(&r.tables["flows"]),
        Pinned(&r.tables["throughput"]),
        r.counters,
        r.headline,
        Pinned(&r.tables["tenants"]),
        Pinned(&r.tables["transport"]),
        layer_tables,
        r.stats.get("events")
    ))
}

fn scenario(apps: Value) -> Value {
    json!({"seed": 7, "duration": "2ms",
           "topology": dumbbell(2, 2, link("100Gbps", "1us"), link("100Gbps", "1us")),
           "apps": apps})
}

/// One scenario per kind (and per mode), with the keys that make it draw (sizes, mixes, sync
/// flags) so that the seeded streams are covered.
fn kinds() -> Vec<(&'static str, Value)> {
    let app = |extra: Value| {
        let mut a = json!({"src": 0, "dst": 2, "size": "4KB", "iterations": 40, "qps": 2});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    let victim = app(json!({"kind": "redis", "verify": true, "src": 1, "dst": 3}));
    vec![
        (
            "write_bw",
            scenario(json!([app(
                json!({"kind": "write_bw", "sync_ratio": 0.3, "post_list": 4})
            )])),
        ),
        (
            "write_lat",
            scenario(json!([app(json!({"kind": "write_lat"}))])),
        ),
        (
            "send_bw",
            scenario(json!([app(
                json!({"kind": "send_bw", "sync_ratio": 0.5, "cq_mod": 4})
            )])),
        ),
        (
            "send_lat",
            scenario(json!([app(json!({"kind": "send_lat"}))])),
        ),
        (
            "read_bw",
            scenario(json!([app(json!({"kind": "read_bw", "post_list": 2}))])),
        ),
        (
            "wqe_lat",
            scenario(json!([app(json!({"kind": "wqe_lat"}))])),
        ),
        (
            "kv",
            scenario(json!([app(
                json!({"kind": "kv", "get_ratio": 0.7, "min_size": "100B"})
            )])),
        ),
        (
            "kv-two-sided",
            scenario(json!([app(
                json!({"kind": "kv", "mode": "two-sided", "min_size": "64B", "verify": true})
            )])),
        ),
        (
            "redis",
            scenario(json!([app(
                json!({"kind": "redis", "min_size": "10B", "mix": {"set": 0.5, "get": 0.4, "ping": 0.1}, "chunk": "1KB"})
            )])),
        ),
        (
            "redis-two-sided",
            scenario(json!([app(
                json!({"kind": "redis", "mode": "two-sided", "min_size": "10B", "verify": true})
            )])),
        ),
        (
            "rkey_thief",
            scenario(json!([
                victim,
                app(json!({"kind": "rkey_thief", "victim": 0, "iterations": null, "size": "16B"}))
            ])),
        ),
        (
            "qp_hijacker",
            scenario(json!([
                victim,
                app(json!({"kind": "qp_hijacker", "victim": 0, "iterations": null, "qps": 1}))
            ])),
        ),
        (
            "mr_flood",
            scenario(json!([
                victim,
                app(json!({"kind": "mr_flood", "iterations": 50}))
            ])),
        ),
    ]
}

// Pinned at 45d237f before the apps became factories (and unchanged by that move); re-pinned
// once when merged with the same wave's NIC model (pipelined WQE engine, ETS quanta) and
// protection counters (stale_feedback_drops, mr_refused), which change every run's record.
const RUNS: &[(&str, u64)] = &[
    ("write_bw", 0x61698e91f96da666),
    ("write_lat", 0xbf858119f964fc4e),
    ("send_bw", 0xc4d247e9758d4161),
    ("send_lat", 0x79bc3dcb625d01b1),
    ("read_bw", 0xb1e60466f67b3b5b),
    ("wqe_lat", 0xed5d2cf3362f9484),
    ("kv", 0x149bdd08ddcb79b6),
    ("kv-two-sided", 0x9fd23e60f72a286e),
    ("redis", 0x2edb42970ea63de0),
    ("redis-two-sided", 0x992af611daa1497a),
    ("rkey_thief", 0x949a92f341c2ab55),
    ("qp_hijacker", 0x7de85119dd542a6e),
    ("mr_flood", 0xf113a9c369dbe6af),
];

/// The apps' definitions in `braid schema`.
fn schema_part() -> String {
    let v: Value = serde_json::from_str(&braid_sim::scenario_json_schema()).unwrap();
    let defs = v
        .get("$defs")
        .or_else(|| v.get("definitions"))
        .expect("definitions");
    ["AppEntry", "AppKind", "AppMode", "RedisMix"]
        .iter()
        .map(|n| format!("{n}: {}", defs[*n]))
        .collect::<Vec<_>>()
        .join("\n")
}

// Re-pinned when `[[apps]]` became braid-apps' tagged `AppSpec` (one schema per kind, each with
// only its own keys, wrapped by braid-sim's `AppEntry`); the experiments' files still validate.
const SCHEMA: u64 = 0xb2a4564d9354e7ac;

/// All of `braid schema` (the apps' types moved crates; nothing else may move with them).
// Re-pinned with the wave's new NIC keys (initial_psn, max_mr, wqe_pipelined, tx_prefetch_time, ...);
// then with the tagged `AppSpec` (above), `transport.cc` (issue 30: the congestion controller's
// tagged table, in [transport] and every override), `transport.recovery`/`transport.irn`
// (docs/irn.md), `switch.lb`, `switch.lb_at`, `switch.failover` (docs/load-balancing.md) and the
// DRUM agent's `path_delay`, `post_ns`, `poll_cqe_ns` (docs/drum-agent.md); then `nic.mtt`
// (the translation cache, docs/scenario.md), HPCC (`transport.cc.kind = "hpcc"`), IRN's
// `loss_detection`/`reo_wnd`, the flowlet `table_size` and Swift; then DRUM's `online.timed_rounds`
// (docs/drum-agent.md; re-pinned after the last merge); then DRUM's `online.thread` and
// `online.timed_rounds` on by default (issue 31 §2, "Rounds that fit").
const WHOLE_SCHEMA: u64 = 0xd43aa19b9c5e82ee;

/// A key set on kinds that do not take it, and the other per-kind refusals: (path, message).
fn refusals() -> Vec<(String, String)> {
    let base = |extra: Value| {
        let mut a = json!({"src": 0, "dst": 2, "size": "4KB"});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    let cases = [
        json!([base(json!({"kind": "send_lat", "post_list": 2}))]),
        json!([base(json!({"kind": "write_bw", "post_list": 32}))]),
        json!([base(
            json!({"kind": "write_bw", "post_list": 2, "cq_mod": 2})
        )]),
        json!([base(json!({"kind": "read_bw", "sync_ratio": 0.1}))]),
        json!([base(json!({"kind": "write_bw", "mode": "two-sided"}))]),
        json!([base(json!({"kind": "kv", "mix": {"set": 1.0}}))]),
        json!([base(
            json!({"kind": "redis", "mix": {"set": 0.0, "get": 0.0, "ping": 0.0}})
        )]),
        json!([base(json!({"kind": "kv", "chunk": "1KB"}))]),
        json!([base(json!({"kind": "redis", "chunk": "2B"}))]),
        json!([base(json!({"kind": "kv", "verify": true}))]),
        json!([base(
            json!({"kind": "redis", "verify": true, "size": "100MB"})
        )]),
        json!([base(json!({"kind": "write_bw", "victim": 0}))]),
        json!([base(json!({"kind": "qp_hijacker"}))]),
        json!([
            base(json!({"kind": "write_bw"})),
            base(json!({"kind": "rkey_thief", "victim": 1}))
        ]),
        json!([base(json!({"kind": "send_bw", "size": "5GB"}))]),
        json!([base(
            json!({"kind": "write_bw", "iterations": 3, "duration": "1ms"})
        )]),
        json!([base(json!({"kind": "write_bw", "colour": "red"}))]),
        json!([base(json!({"kind": "write_fast"}))]),
    ];
    cases
        .into_iter()
        .map(|apps| {
            let s = scenario(apps);
            match braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
            {
                Ok(_) => panic!("accepted: {s}"),
                Err(e) => (e.path, e.message),
            }
        })
        .collect()
}

// Re-pinned with the tagged `AppSpec`: every refusal kept its path and words but one, the unknown
// key (`colour`): its kind's config refuses it, listing that kind's keys, and since the key came
// before `kind` (held until the kind was known) its kind's keys are listed; since the error
// wording moved into Rust (scenario/wording.rs) the path names the key again, `apps[0].colour`.
const REFUSALS: u64 = 0xebe7e8a2295d8e88;

#[test]
#[ignore]
fn print_pins() {
    for (name, s) in kinds() {
        println!("    (\"{name}\", 0x{:016x}),", fingerprint(&s));
    }
    println!("SCHEMA 0x{:016x}", hash(&schema_part()));
    println!(
        "WHOLE_SCHEMA 0x{:016x}",
        hash(&braid_sim::scenario_json_schema())
    );
    for r in refusals() {
        println!("{r:?}");
    }
    println!("REFUSALS 0x{:016x}", hash(&format!("{:?}", refusals())));
    // For checking that `braid schema` still validates the experiments' files.
    if let Ok(path) = std::env::var("BRAID_SCHEMA_OUT") {
        std::fs::write(path, braid_sim::scenario_json_schema()).unwrap();
    }
}

#[test]
fn every_app_kind_measures_what_it_did_before_the_factories() {
    let got: Vec<(&str, u64)> = kinds()
        .into_iter()
        .map(|(n, s)| (n, fingerprint(&s)))
        .collect();
    let want: Vec<(&str, u64)> = RUNS.to_vec();
    assert_eq!(got, want);
}

#[test]
fn the_apps_schema_is_what_it_was() {
    assert_eq!(hash(&schema_part()), SCHEMA, "{}", schema_part());
}

#[test]
fn the_whole_schema_is_what_it_was() {
    assert_eq!(hash(&braid_sim::scenario_json_schema()), WHOLE_SCHEMA);
}

#[test]
fn per_kind_keys_are_refused_in_the_same_words() {
    let r = refusals();
    assert_eq!(hash(&format!("{r:?}")), REFUSALS, "{r:#?}");
}
