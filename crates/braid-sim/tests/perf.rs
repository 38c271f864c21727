//! PeRF (`middleware = ["perf"]`) on a host pair at 100 Gbit/s: the paper's B_App (write_bw
//! 1 MiB), D_App (write_lat 16 B) and M_App (write_bw 16 B, 32 outstanding) share host 0's RNIC.

mod common;
use common::*;
use serde_json::{json, Value};

fn pair() -> Value {
    json!({"kind": "edges", "nodes": 2, "switches": [],
           "links": [{"a": 0, "b": 1, "rate": "100Gbps", "delay": "1us"}]})
}

fn b_app(dur: &str) -> Value {
    json!({"kind": "write_bw", "src": 0, "dst": 1, "size": "1MiB", "duration": dur})
}
fn d_app(dur: &str) -> Value {
    json!({"kind": "write_lat", "src": 0, "dst": 1, "size": "16B", "duration": dur, "start": "50us"})
}
fn m_app(dur: &str) -> Value {
    json!({"kind": "write_bw", "src": 0, "dst": 1, "size": "16B", "tx_depth": 32,
           "duration": dur, "start": "50us"})
}

fn scenario(middleware: &str, apps: Vec<Value>) -> Value {
    json!({
        "duration": "20ms",
        "topology": pair(),
        "nic": {"mtu": 4096},
        "middleware": {"default": [middleware]},
        "apps": apps,
    })
}

fn f64s(t: &braid_sim::Table, name: &str) -> Vec<f64> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::F64(v) => v.clone(),
        braid_sim::Column::U64(v) => v.iter().map(|&x| x as f64).collect(),
        braid_sim::Column::I64(v) => v.iter().map(|&x| x as f64).collect(),
        _ => panic!("{name} is not numeric"),
    }
}

/// One column's value for the tenant labelled `label`.
fn cell(r: &braid_sim::Results, label: &str, col: &str) -> f64 {
    let labels = match r.tenants.get("label").unwrap() {
        braid_sim::Column::Str(v) => v.clone(),
        _ => unreachable!(),
    };
    let i = labels
        .iter()
        .position(|l| l == label)
        .unwrap_or_else(|| panic!("no tenant {label} in {labels:?}"));
    f64s(&r.tenants, col)[i]
}

#[test]
fn b_app_alone_keeps_its_throughput_under_perf() {
    let (_, raw) = run(&scenario("raw", vec![b_app("4ms")]));
    let (sim, perf) = run(&scenario("perf", vec![b_app("4ms")]));
    let g_raw = cell(&raw, "apps[0].client", "goodput_gbps");
    let g_perf = cell(&perf, "apps[0].client", "goodput_gbps");
    println!("B_App alone: raw {g_raw:.2} Gbps, perf {g_perf:.2} Gbps");
    assert!(g_raw > 80.0, "raw B_App {g_raw} Gbps");
    assert!(g_perf >= 0.95 * g_raw, "perf {g_perf} vs raw {g_raw} Gbps");
    // Alone it is never split (work-conserving), but it is classified bandwidth-intensive.
    assert_eq!(cell(&perf, "apps[0].client", "perf_sub_wrs"), 0.0);
    assert_eq!(cell(&perf, "apps[0].client", "perf_class"), 2.0);
    assert_eq!(sim.agents()[0], vec!["perf_agent"], "one agent on host 0");
}

#[test]
fn beside_small_tenants_b_is_split_and_everyone_is_classified() {
    let apps = vec![b_app("6ms"), d_app("6ms"), m_app("6ms")];
    let (sim, r) = run(&scenario("perf", apps));
    assert_eq!(sim.stacks()[0], vec![vec!["perf"]; 3]);
    let b = "apps[0].client";
    let (d, m) = ("apps[1].client", "apps[2].client");
    assert_eq!(cell(&r, b, "perf_class"), 2.0, "B_App is bandwidth-intensive");
    assert_eq!(cell(&r, d, "perf_class"), 0.0, "D_App is delay-sensitive");
    assert_eq!(cell(&r, m, "perf_class"), 1.0, "M_App is message-intensive");
    let subs = cell(&r, b, "perf_sub_wrs");
    let zws = cell(&r, b, "perf_zero_waits");
    println!("B_App: {subs} sub-WRs, {zws} 0_WAITs");
    assert!(subs > 100.0, "{subs}");
    assert!((zws - 16.0 * subs).abs() <= 16.0 * 130.0, "16 0_WAITs per sub-WR: {zws} vs {subs}");
    assert_eq!(cell(&r, d, "perf_sub_wrs"), 0.0);
    assert_eq!(cell(&r, m, "perf_zero_waits"), 0.0);
    // The layer's work is charged to it.
    assert!(cell(&r, b, "cpu_ns_perf") > 0.0);
    // Everyone finished and measured.
    assert!(cell(&r, b, "goodput_gbps") > 30.0);
    assert!(cell(&r, d, "lat_p99_us") > 0.0);
    assert!(cell(&r, m, "msg_rate_mps") > 0.5);
}

/// A 4 MB WRITE split beside a delay-sensitive tenant lands every byte, once, where it belongs
/// (the simulator carries the bytes: `nic.data_check`).
#[test]
fn split_writes_land_every_byte_in_place() {
    let s = json!({
        "duration": "5ms",
        "topology": pair(),
        "nic": {"mtu": 4096, "data_check": true},
        "middleware": {"default": ["perf"]},
        "apps": [d_app("2ms")],
        "traffic": [{"pattern": "flows",
                     "flows": [{"src": 0, "dst": 1, "size": "4000017B", "start": "200us"}]}],
    });
    let (sim, r) = run(&s);
    let checked = sim.verify_delivery().unwrap();
    assert_eq!(checked, 4_000_017);
    let subs = cell(&r, "traffic[0].sender", "perf_sub_wrs");
    assert_eq!(subs, 245.0, "4,000,017 B in 16 KiB sub-WRs");
}

/// The isolation the paper reports. Needs an RNIC model in which B_App harms a small tenant
/// (the `arbiter` branch); without it raw shows almost no anomaly (6.04 us alone vs 6.29 us
/// beside write_bw 1 MB).
#[test]
#[ignore = "needs the arbiter branch's RNIC model (B_App harming small tenants)"]
fn perf_protects_d_and_m_beside_b() {
    let dur = "8ms";
    let alone_d = run(&scenario("raw", vec![d_app(dur)])).1;
    let alone_m = run(&scenario("raw", vec![m_app(dur)])).1;
    let alone_b = run(&scenario("raw", vec![b_app(dur)])).1;
    let p99 = |r: &braid_sim::Results, l: &str| cell(r, l, "lat_p99_us");
    let rate = |r: &braid_sim::Results, l: &str| cell(r, l, "msg_rate_mps");
    let gp = |r: &braid_sim::Results, l: &str| cell(r, l, "goodput_gbps");
    let d0 = p99(&alone_d, "apps[0].client");
    let m0 = rate(&alone_m, "apps[0].client");
    let b0 = gp(&alone_b, "apps[0].client");
    for mw in ["raw", "perf"] {
        let bd = run(&scenario(mw, vec![b_app(dur), d_app(dur)])).1;
        let bm = run(&scenario(mw, vec![b_app(dur), m_app(dur)])).1;
        let (d1, m1) = (p99(&bd, "apps[1].client"), rate(&bm, "apps[1].client"));
        let (bd_b, bm_b) = (gp(&bd, "apps[0].client"), gp(&bm, "apps[0].client"));
        println!(
            "{mw}: D p99 {d1:.2} us (alone {d0:.2}), M {m1:.2} Mops (alone {m0:.2}), \
             B {bd_b:.1}/{bm_b:.1} Gbps (alone {b0:.1})"
        );
        if mw == "raw" {
            assert!(d1 > 2.0 * d0 || m1 < 0.8 * m0, "raw shows the anomaly");
        } else {
            assert!(d1 <= 2.0 * d0, "D_App p99 {d1} vs alone {d0}");
            assert!(m1 >= 0.8 * m0, "M_App {m1} vs alone {m0} Mops");
            assert!(bd_b >= 0.8 * b0 && bm_b >= 0.8 * b0, "B_App {bd_b}, {bm_b} vs {b0}");
        }
    }
}
