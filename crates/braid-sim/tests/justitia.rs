//! Justitia and Justitia_R on a 100 Gbit/s host pair: B_App (write_bw, 1 MiB) and D_App
//! (write_lat, 16 B) from host 0 to host 1, as in PeRF's comparison.

mod common;
use common::*;
use serde_json::{json, Value};

/// Two hosts on one switch, 100 Gbit/s links.
fn pair() -> Value {
    let d = std::env::var("JUSTITIA_DELAY").unwrap_or("1us".into());
    json!({"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
           "links": [{"a": "h0", "b": "sw", "rate": "100Gbps", "delay": d},
                     {"a": "h1", "b": "sw", "rate": "100Gbps", "delay": d}]})
}

const RUN: &str = "4ms";

/// B_App and/or D_App with `mw` as every tenant's stack; both run for `RUN` after 100 µs.
fn scenario(mw: Value, b_app: bool, d_app: bool) -> Value {
    let mut apps = Vec::new();
    if b_app {
        apps.push(json!({"kind": "write_bw", "src": 0, "dst": 1, "size": std::env::var("JUSTITIA_BSIZE").unwrap_or("1MiB".into()), "duration": RUN,
                         "start": "100us", "tx_depth": std::env::var("JUSTITIA_DEPTH").map_or(16, |s| s.parse::<u32>().unwrap())}));
    }
    if d_app {
        apps.push(json!({"kind": "write_lat", "src": 0, "dst": 1, "size": "16B", "duration": RUN,
                         "start": "100us"}));
    }
    let nic: Value = std::env::var("JUSTITIA_NIC").ok().map_or(json!({}), |s| serde_json::from_str(&s).unwrap());
    json!({
        "duration": "20ms",
        "nic": nic,
        "topology": pair(),
        "measure": {"interval": "200us"},
        "host": {"cpu": {"delay": std::env::var("JUSTITIA_NOCPU").is_err()}},
        "middleware": {"default": mw},
        "apps": apps,
    })
}

fn f64s(t: &braid_sim::Table, name: &str) -> Vec<f64> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::F64(v) => v.clone(),
        _ => panic!("{name} is not a float column"),
    }
}

fn strs(t: &braid_sim::Table, name: &str) -> Vec<String> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::Str(v) => v.clone(),
        _ => panic!("{name} is not a string column"),
    }
}

/// What a run measured: B_App's goodput (Gbit/s), D_App's p50 and p99 (µs), and the host-0
/// agent's counters if any.
#[derive(Debug)]
struct Measured {
    b_gbps: f64,
    d_p50: f64,
    d_p99: f64,
    agent: Vec<(String, f64)>,
}

fn measure(mw: Value, b_app: bool, d_app: bool) -> Measured {
    let (_, r) = run(&scenario(mw, b_app, d_app));
    let t = &r.tenants;
    let labels = strs(t, "label");
    let row = |l: &str| labels.iter().position(|x| x == l);
    let (b, d) = if b_app { (row("apps[0].client"), row("apps[1].client")) } else { (None, row("apps[0].client")) };
    let agent = labels
        .iter()
        .zip(ints(t, "host"))
        .position(|(l, h)| l == "agent" && h == 0)
        .map(|i| {
            t.columns
                .iter()
                .filter(|(n, _)| n.starts_with("justitia_"))
                .filter_map(|(n, c)| match c {
                    braid_sim::Column::F64(v) => Some((n.to_string(), v[i])),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if std::env::var("JUSTITIA_DEBUG").is_ok() {
        let tp = &r.throughput;
        let ts = tp.u64("time_ps");
        let fl = tp.u64("flow");
        let by = tp.u64("bytes");
        for i in 0..ts.len() {
            if fl[i] == 0 {
                eprint!("{:.1}ms:{:.1} ", ts[i] as f64 / 1e9, by[i] as f64 * 8.0 / 200e-6 / 1e9);
            }
        }
        eprintln!();
    }
    if let (Ok(_), Some(bi)) = (std::env::var("JUSTITIA_DEBUG"), b) {
        for (n, c) in &t.columns {
            if let braid_sim::Column::F64(v) = c {
                eprint!("{n}={} ", v[bi]);
            }
        }
        eprintln!();
    }
    Measured {
        b_gbps: b.map_or(f64::NAN, |i| f64s(t, "goodput_gbps")[i]),
        d_p50: d.map_or(f64::NAN, |i| f64s(t, "lat_p50_us")[i]),
        d_p99: d.map_or(f64::NAN, |i| f64s(t, "lat_p99_us")[i]),
        agent,
    }
}

#[test]
fn explore() {
    let raw = json!(["raw"]);
    let j: Value = std::env::var("JUSTITIA_MW").ok().map_or(json!(["justitia"]), |s| serde_json::from_str(&s).unwrap());
    let jr = json!([{"kind": "justitia", "target": "15us"}]);
    for (name, mw) in [("raw", &raw), ("justitia", &j), ("justitia_r", &jr)] {
        for (b, d) in [(true, false), (false, true), (true, true)] {
            if std::env::var("JUSTITIA_ONLY").is_ok() && !(name == "justitia" && b && d == std::env::var("JUSTITIA_NOD").is_err()) { continue; }
            let m = measure(mw.clone(), b, d);
            let keep = ["justitia_unused_mb", "justitia_tokens_granted", "justitia_capacity_gbps", "justitia_target_misses", "justitia_samples", "justitia_tail_us", "justitia_chunk_bytes"];
            let a: Vec<_> = m.agent.iter().filter(|(k, _)| keep.contains(&k.as_str())).map(|(k, v)| format!("{}={v}", &k[9..])).collect();
            eprintln!("{name:10} B={b:5} D={d:5}: B {:6.2} Gbps  D p50 {:6.2} p99 {:6.2} us  {}", m.b_gbps, m.d_p50, m.d_p99, a.join(" "));
        }
    }
}
