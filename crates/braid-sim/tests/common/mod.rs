//! Helpers shared by the scenario tests.
#![allow(dead_code)]

use braid_sim::{Results, Simulation};
use serde_json::{json, Value};
use std::path::Path;

pub fn build(s: &Value) -> Simulation {
    Simulation::from_json(&s.to_string(), Path::new("."), None)
        .unwrap_or_else(|e| panic!("scenario rejected: {e}"))
}

/// Runs a scenario to the end and checks conservation (every completed flow delivered exactly its
/// bytes, at the right addresses when data is checked).
pub fn run(s: &Value) -> (Simulation, Results) {
    let mut sim = build(s);
    sim.run();
    sim.verify_delivery()
        .unwrap_or_else(|e| panic!("conservation violated: {e}"));
    let r = sim.results();
    (sim, r)
}

pub fn link(rate: &str, delay: &str) -> Value {
    json!({"rate": rate, "delay": delay})
}

pub fn dumbbell(left: u32, right: u32, host: Value, bottleneck: Value) -> Value {
    json!({"kind": "dumbbell", "left": left, "right": right, "host_link": host, "bottleneck": bottleneck})
}

pub fn flows(list: &[(u32, u32, &str)]) -> Value {
    let f: Vec<Value> = list
        .iter()
        .map(|(s, d, size)| json!({"src": s, "dst": d, "size": size}))
        .collect();
    json!([{"pattern": "flows", "flows": f}])
}

/// Column values as i64 whatever their stored type.
pub fn ints(r: &braid_sim::Table, name: &str) -> Vec<i64> {
    match r.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::U64(v) => v.iter().map(|&x| x as i64).collect(),
        braid_sim::Column::I64(v) => v.clone(),
        _ => panic!("{name} is not an integer column"),
    }
}

/// Mean goodput (Gbit/s) of each flow between two times, from the sampled series.
pub fn mean_gbps(r: &Results, nflows: usize, from_ps: u64, to_ps: u64) -> Vec<f64> {
    let t = r.tables["throughput"].u64("time_ps");
    let f = r.tables["throughput"].u64("flow");
    let b = r.tables["throughput"].u64("bytes");
    let mut bytes = vec![0u64; nflows];
    for i in 0..t.len() {
        if t[i] > from_ps && t[i] <= to_ps {
            bytes[f[i] as usize] += b[i];
        }
    }
    bytes
        .iter()
        .map(|&x| x as f64 * 8.0 / ((to_ps - from_ps) as f64 / 1e12) / 1e9)
        .collect()
}

fn toml_value(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as V;
    match v {
        V::String(s) => json!(s.value()),
        V::Integer(i) => json!(i.value()),
        V::Float(f) => json!(f.value()),
        V::Boolean(b) => json!(b.value()),
        V::Datetime(d) => json!(d.value().to_string()),
        V::Array(a) => Value::Array(a.iter().map(toml_value).collect()),
        V::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value(v)))
                .collect(),
        ),
    }
}

fn toml_item(i: &toml_edit::Item) -> Value {
    use toml_edit::Item;
    match i {
        Item::None => Value::Null,
        Item::Value(v) => toml_value(v),
        Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_item(v)))
                .collect(),
        ),
        Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| toml_item(&Item::Table(t.clone())))
                .collect(),
        ),
    }
}

/// An experiment file (`experiments/<path>`, TOML) as the JSON scenario the simulator takes.
pub fn experiment(path: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(path);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let doc: toml_edit::DocumentMut = text
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    toml_item(doc.as_item())
}

/// `s` with values replaced at dotted key paths ("apps.1.size"; numbers index arrays).
pub fn with_keys(mut s: Value, edits: &[(&str, Value)]) -> Value {
    for (path, v) in edits {
        let mut cur = &mut s;
        let keys: Vec<&str> = path.split('.').collect();
        for k in &keys[..keys.len() - 1] {
            cur = match k.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) => {
                    if cur.get(*k).is_none() {
                        cur[*k] = json!({});
                    }
                    &mut cur[*k]
                }
            };
        }
        let last = keys[keys.len() - 1];
        match last.parse::<usize>() {
            Ok(i) => cur[i] = v.clone(),
            Err(_) => cur[last] = v.clone(),
        }
    }
    s
}

/// A numeric column as floats (F64, U64 or I64), panicking with the column's name otherwise.
pub fn numbers(t: &braid_sim::Table, name: &str) -> Vec<f64> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::F64(v) => v.clone(),
        braid_sim::Column::U64(v) => v.iter().map(|&x| x as f64).collect(),
        braid_sim::Column::I64(v) => v.iter().map(|&x| x as f64).collect(),
        _ => panic!("{name} is not numeric"),
    }
}

/// One column's value for the tenant labelled `label` in the tenants table.
pub fn tenant_value(r: &Results, label: &str, col: &str) -> f64 {
    let labels = match r.tables["tenants"].get("label").unwrap() {
        braid_sim::Column::Str(v) => v.clone(),
        _ => unreachable!(),
    };
    let i = labels
        .iter()
        .position(|l| l == label)
        .unwrap_or_else(|| panic!("no tenant {label} in {labels:?}"));
    numbers(&r.tables["tenants"], col)[i]
}
