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

#[test]
#[ignore]
fn explore_debug() {
    let loss: f64 = std::env::var("LOSS").map(|x| x.parse().unwrap()).unwrap_or(0.05);
    let s = lossy_paths("mp-rdma", loss, 2, "6ms");
    let mut sim = build(&s);
    sim.run();
    let r = sim.results();
    let w = sim.world();
    let tor1 = w.nodes.iter().position(|n| n.name == "tor1").unwrap() as u32;
    for n in w.nodes.iter().filter(|n| n.name.starts_with("spine")) {
        let p = n.ports.iter().find(|p| p.peer_node == tor1).unwrap();
        eprintln!("{} -> tor1: {} pkts", n.name, p.tx_pkts);
    }
    eprintln!("{:?}", senders(&sim));
    eprintln!("max ood {}", receivers_max_ood(&sim));
    eprintln!("timeouts {}", sim.world().hosts.iter().map(|h| h.nic.stats.timeouts).sum::<u64>());
    let t = r.throughput.u64("time_ps");
    let b = r.throughput.u64("bytes");
    eprintln!("{:?}", t.iter().zip(b.iter()).map(|(t, b)| (t / 1_000_000, b * 8 / 100_000)).collect::<Vec<_>>());
    let _ = w;
}
