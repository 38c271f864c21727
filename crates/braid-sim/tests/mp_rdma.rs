//! MP-RDMA (NSDI'18): each mechanism in isolation, conservation under loss and reordering, and
//! the cheap experiments of `experiments/mp-rdma/`.

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Counters of every MP-RDMA QP that sent data (host index, qpn) → name → value.
fn senders(sim: &braid_sim::Simulation) -> Vec<BTreeMap<&'static str, f64>> {
    let mut out = vec![];
    for h in &sim.world().hosts {
        for q in h.nic.qps() {
            let c: BTreeMap<_, _> = q.t.counters().into_iter().collect();
            if c.get("acks").copied().unwrap_or(0.0) > 0.0 || c.get("rcv_nxt").copied().unwrap_or(0.0) > 0.0 {
                out.push(c);
            }
        }
    }
    out
}

#[allow(dead_code)]
fn receivers_max_ood(sim: &braid_sim::Simulation) -> f64 {
    let mut m: f64 = 0.0;
    for h in &sim.world().hosts {
        for q in h.nic.qps() {
            let c: BTreeMap<_, _> = q.t.counters().into_iter().collect();
            m = m.max(c.get("max_ood").copied().unwrap_or(0.0));
        }
    }
    m
}

fn two_tor(hosts: u32, paths: u32, rate: &str) -> Value {
    json!({"kind": "two-tor", "hosts_per_tor": hosts, "paths": paths,
           "host_link": link(rate, "1us"), "fabric_link": link(rate, "1us")})
}

#[test]
fn one_flow_is_delivered_exactly_over_many_paths() {
    let s = json!({
        "duration": "5ms",
        "topology": two_tor(1, 4, "40Gbps"),
        "transport": {"kind": "mp-rdma"},
        "nic": {"data_check": true},
        "switch": {"ecn": {"kmin": "20KB", "kmax": "20KB", "pmax": 1.0}},
        "traffic": flows(&[(0, 1, "4MB")]),
    });
    let (sim, r) = run(&s);
    let fct = ints(&r.flows, "fct_ps");
    assert_eq!(fct.len(), 1);
    assert!(fct[0] > 0, "flow finished");
    let c = &senders(&sim)[0];
    eprintln!("{c:?} fct {} us", fct[0] as f64 / 1e6);
    assert!(c["vps_used"] >= 8.0, "IW spread over many VPs: {c:?}");
    assert_eq!(sim.world().hosts.iter().map(|h| h.nic.stats.timeouts).sum::<u64>(), 0);
}

// ------------------------------------------------------------------ experiments

/// §5.1.1 lossy paths: h0 — tor0 — spine0..3 — tor1 — h1, all 40G; the tor0–spine links of
/// spines 1–3 drop `loss` of packets (both directions). One long connection h0 → h1.
fn lossy_paths(kind: &str, loss: f64, seed: u64, dur: &str) -> Value {
    let mut links = vec![json!({"a": "h0", "b": "tor0", "rate": "40Gbps", "delay": "1us"}),
                         json!({"a": "h1", "b": "tor1", "rate": "40Gbps", "delay": "1us"})];
    for s in 0..4 {
        let l = if s == 0 { 0.0 } else { loss };
        links.push(json!({"a": "tor0", "b": format!("spine{s}"), "rate": "40Gbps", "delay": "1us", "loss": l}));
        links.push(json!({"a": format!("spine{s}"), "b": "tor1", "rate": "40Gbps", "delay": "1us"}));
    }
    json!({
        "seed": seed,
        "duration": dur,
        "topology": {"kind": "edges", "nodes": ["h0", "h1", "tor0", "tor1", "spine0", "spine1", "spine2", "spine3"],
                      "switches": ["tor0", "tor1", "spine0", "spine1", "spine2", "spine3"], "links": links},
        "transport": {"kind": kind},
        "switch": {"ecn": {"kmin": "20KB", "kmax": "20KB", "pmax": 1.0}},
        // ACKs (tor1 → h0) return over the loss-free spine, so only the data paths are lossy.
        "routes": [{"node": "tor1", "dst": [0], "next_hops": ["spine0"]}],
        "traffic": flows(&[(0, 1, "1GB")]),
        "measure": {"interval": "100us", "messages": false},
    })
}

fn goodput(s: &Value, from_us: u64, to_us: u64) -> f64 {
    let mut sim = build(s);
    sim.run();
    let r = sim.results();
    mean_gbps(&r, 1, from_us * 1_000_000, to_us * 1_000_000)[0]
}

#[test]
#[ignore]
fn explore_lossy() {
    for loss in [0.005, 0.01, 0.05, 0.1] {
        let mp: Vec<f64> = (1..=3).map(|seed| goodput(&lossy_paths("mp-rdma", loss, seed, "6ms"), 2000, 6000)).collect();
        let dc: Vec<f64> = (1..=8).map(|seed| goodput(&lossy_paths("dcqcn", loss, seed, "6ms"), 2000, 6000)).collect();
        eprintln!("loss {loss}: mp {mp:.1?} dcqcn {dc:.1?}");
    }
}

/// §5.1.2 testbed permutation: two ToRs × 5 hosts, 4 spines, all 40G; host i → host 5 + i.
fn permutation(kind: &str, seed: u64, dur: &str) -> Value {
    json!({
        "seed": seed,
        "duration": dur,
        "topology": two_tor(5, 4, "40Gbps"),
        "transport": {"kind": kind},
        "switch": {"ecn": {"kmin": "20KB", "kmax": "20KB", "pmax": 1.0}},
        "traffic": [{"pattern": "permutation", "cross": true, "size": "1GB", "start": "0us"}],
        "measure": {"interval": "100us", "messages": false},
    })
}

fn total_goodput(s: &Value, n: usize, from_us: u64, to_us: u64) -> (f64, Vec<f64>) {
    let mut sim = build(s);
    sim.run();
    let r = sim.results();
    let g = mean_gbps(&r, n, from_us * 1_000_000, to_us * 1_000_000);
    (g.iter().sum(), g)
}

#[test]
#[ignore]
fn explore_permutation() {
    let (mut sm, mut sd, mut sdd) = (0.0, 0.0, 0.0);
    for seed in 1..=10 {
        let (m, mv) = total_goodput(&permutation("mp-rdma", seed, "4ms"), 5, 1000, 4000);
        let (d, dv) = total_goodput(&permutation("dcqcn", seed, "4ms"), 5, 1000, 4000);
        let mut s = permutation("dcqcn", seed, "4ms");
        s.as_object_mut().unwrap().remove("switch");
        let (dd, ddv) = total_goodput(&s, 5, 1000, 4000);
        eprintln!("seed {seed}: mp {m:.1} {mv:.1?} | dcqcn {d:.1} {dv:.1?} | dcqcn default ECN {dd:.1} {ddv:.1?}");
        sm += m / 10.0;
        sd += d / 10.0;
        sdd += dd / 10.0;
    }
    eprintln!("mean: mp {sm:.2} dcqcn {sd:.2} dcqcn-default-ecn {sdd:.2}");
}

/// h0 — tor0 — spine0..3 — tor1 — h1 with per-spine (rate, delay) on both hops of each path.
fn four_paths(paths: &[(&str, &str, f64)], kind: &str, extra: Value) -> Value {
    let mut links = vec![json!({"a": "h0", "b": "tor0", "rate": "40Gbps", "delay": "1us"}),
                         json!({"a": "h1", "b": "tor1", "rate": "40Gbps", "delay": "1us"})];
    for (s, (rate, delay, loss)) in paths.iter().enumerate() {
        links.push(json!({"a": "tor0", "b": format!("spine{s}"), "rate": rate, "delay": delay, "loss": loss}));
        links.push(json!({"a": format!("spine{s}"), "b": "tor1", "rate": rate, "delay": delay}));
    }
    let mut s = json!({
        "duration": "20ms",
        "topology": {"kind": "edges", "nodes": ["h0", "h1", "tor0", "tor1", "spine0", "spine1", "spine2", "spine3"],
                      "switches": ["tor0", "tor1", "spine0", "spine1", "spine2", "spine3"], "links": links},
        "transport": {"kind": kind},
        "switch": {"ecn": {"kmin": "20KB", "kmax": "20KB", "pmax": 1.0}},
        "routes": [{"node": "tor1", "dst": [0], "next_hops": ["spine0"]}],
        "nic": {"data_check": true},
    });
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

#[test]
fn ooo_pruning_fires_on_a_slow_path_and_keeps_the_bitmap_small() {
    // Path 3 is 20× slower (link degraded to 2G): its packets arrive far behind the others'.
    let paths = [("40Gbps", "1us", 0.0), ("40Gbps", "1us", 0.0), ("40Gbps", "1us", 0.0), ("2Gbps", "1us", 0.0)];
    let s = four_paths(&paths, "mp-rdma", json!({"traffic": flows(&[(0, 1, "8MB")])}));
    let (sim, r) = run(&s);
    let c = &senders(&sim)[0];
    let fct = ints(&r.flows, "fct_ps")[0] as f64 / 1e6;
    eprintln!("{c:?} fct {fct} us");
    assert!(c["ooo_pruned"] > 0.0, "ACKs from the slow path were pruned: {c:?}");
    // 8 MB at ~37.8 Gbps of goodput is ~1.7 ms; the slow path must not drag the flow down.
    assert!(fct < 2_500.0, "fct {fct} us");
    let w = sim.world();
    let tor1 = w.nodes.iter().position(|n| n.name == "tor1").unwrap() as u32;
    let spine3 = w.nodes.iter().find(|n| n.name == "spine3").unwrap();
    let slow = spine3.ports.iter().find(|p| p.peer_node == tor1).unwrap().tx_pkts;
    assert!(slow < 400, "the slow path was abandoned: {slow} of 8000 packets");
}

#[test]
fn without_ooo_control_the_slow_path_overflows_the_bitmap() {
    let paths = [("40Gbps", "1us", 0.0), ("40Gbps", "1us", 0.0), ("40Gbps", "1us", 0.0), ("2Gbps", "1us", 0.0)];
    let mut s = four_paths(&paths, "mp-rdma", json!({"traffic": flows(&[(0, 1, "8MB")])}));
    s["transport"]["mp_rdma"] = json!({"delta": 0});
    let (sim, _) = run(&s);
    let c = &senders(&sim)[0];
    eprintln!("{c:?}");
    assert_eq!(c["ooo_pruned"], 0.0);
    assert!(c["nacks"] > 0.0 && c["recoveries"] > 0.0, "bitmap overflow → NACK → recovery: {c:?}");
}

#[test]
fn bytes_are_conserved_under_loss_and_reordering() {
    // Unequal delays reorder; 2% loss on three paths (both directions) loses data and ACKs.
    let paths = [("40Gbps", "1us", 0.0), ("40Gbps", "3us", 0.02), ("40Gbps", "6us", 0.02), ("10Gbps", "2us", 0.02)];
    let mut s = four_paths(&paths, "mp-rdma", json!({
        "traffic": flows(&[(0, 1, "2MB"), (0, 1, "300KB"), (0, 1, "1MB")]),
        "apps": [{"kind": "send_bw", "src": 0, "dst": 1, "size": "20KB", "iterations": 40}],
    }));
    s.as_object_mut().unwrap().remove("routes");
    s["nic"]["rto"] = json!("200us");
    let (sim, r) = run(&s);
    let fct = ints(&r.flows, "fct_ps");
    assert!(fct.iter().all(|&f| f > 0), "every flow finished: {fct:?}");
    let recov: f64 = senders(&sim).iter().map(|c| c["recoveries"]).sum();
    let retx: u64 = sim.world().hosts.iter().map(|h| h.nic.stats.retx_pkts).sum();
    eprintln!("recoveries {recov} retx {retx} max ood {}", receivers_max_ood(&sim));
    assert!(retx > 0, "losses were repaired");
    // The SEND app's 40 messages all completed at the receiver, in order, with the right bytes.
    let rx: u64 = sim.world().hosts[1].nic.qps().map(|q| q.rx_bytes).sum();
    assert_eq!(rx, 2_000_000 + 300_000 + 1_000_000 + 40 * 20_000);
}

#[test]
fn permutation_uses_all_four_paths() {
    // §5.1.2 (experiments/mp-rdma/testbed-permutation.toml), 3 ms instead of the paper's run.
    let (m, mv) = total_goodput(&permutation("mp-rdma", 1, "3ms"), 5, 1000, 3000);
    eprintln!("mp-rdma {m:.1} {mv:.1?}");
    assert!(m > 145.0, "paper: 150.68 Gbps; braid {m:.1}");
    assert!(mv.iter().all(|&g| g > 25.0), "each connection ~30 Gbps: {mv:.1?}");
    let (d, dv) = total_goodput(&permutation("dcqcn", 1, "3ms"), 5, 1000, 3000);
    eprintln!("dcqcn {d:.1} {dv:.1?}");
    assert!(m > 1.3 * d, "ECMP collisions cost DCQCN: {d:.1} vs {m:.1}");
}

#[test]
fn lossy_paths_mp_rdma_keeps_goodput_where_dcqcn_collapses() {
    // §5.1.1 at 5% loss (experiments/mp-rdma/lossy-paths.toml), 3 ms.
    let m = goodput(&lossy_paths("mp-rdma", 0.05, 1, "3ms"), 1000, 3000);
    let d = goodput(&lossy_paths("dcqcn", 0.05, 1, "3ms"), 1000, 3000);
    eprintln!("mp-rdma {m:.1} dcqcn {d:.1}");
    assert!(m > 10.0 && m > 5.0 * d, "mp-rdma {m:.1} vs dcqcn {d:.1}");
}

/// Validates a scenario given as JSON in $SCENARIO_JSON (the experiment TOML files, converted).
#[test]
#[ignore]
fn validate_scenario_json() {
    let p = std::env::var("SCENARIO_JSON").expect("SCENARIO_JSON");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let mut s = v.clone();
    s["duration"] = json!("200us");
    let (_sim, r) = run(&s);
    eprintln!("ok: {} flows", ints(&r.flows, "flow").len());
}
