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
            if c.get("acks").copied().unwrap_or(0.0) > 0.0 {
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
