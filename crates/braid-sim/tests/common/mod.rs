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
    let t = r.throughput.u64("time_ps");
    let f = r.throughput.u64("flow");
    let b = r.throughput.u64("bytes");
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
