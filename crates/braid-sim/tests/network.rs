//! ECMP, determinism and scenario validation.

mod common;
use braid_sim::Simulation;
use common::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

fn two_tor(hosts_per_tor: u32, paths: u32) -> Value {
    json!({"kind": "two-tor", "hosts_per_tor": hosts_per_tor, "paths": paths,
           "host_link": link("40Gbps", "1us"), "fabric_link": link("40Gbps", "1us")})
}

fn spine_of(path: &str) -> String {
    path.split('>')
        .find(|n| n.starts_with("spine"))
        .expect("path crosses a spine")
        .to_string()
}

#[test]
fn ecmp_spreads_flows_over_equal_paths_and_packets_follow_them() {
    let n = 32;
    let fl: Vec<(u32, u32, &str)> = (0..n).map(|i| (i, n + i, "20KB")).collect();
    let s = json!({"duration": "5ms", "topology": two_tor(n, 4), "traffic": flows(&fl)});
    let (sim, r) = run(&s);
    let paths = match r.tables["flows"].get("path").unwrap() {
        braid_sim::Column::Str(v) => v.clone(),
        _ => unreachable!(),
    };
    let mut per_spine: HashMap<String, u64> = HashMap::new();
    for p in &paths {
        *per_spine.entry(spine_of(p)).or_default() += 1;
    }
    assert_eq!(
        per_spine.len(),
        4,
        "all four spines carry flows: {per_spine:?}"
    );
    assert!(per_spine.values().all(|&c| c >= 3), "{per_spine:?}");
    // The packets really went where the reported paths say: each spine sent towards tor1 exactly
    // the data packets of its flows (20 per flow). (ACKs come back on the receiver QP's own source
    // port, so they may cross another spine, as in RoCEv2.)
    let w = sim.world();
    let tor1 = w.nodes.iter().position(|x| x.name == "tor1").unwrap() as u32;
    for (spine, &count) in &per_spine {
        let node = w.nodes.iter().find(|x| &x.name == spine).unwrap();
        let p = w
            .node_ports(node.id)
            .iter()
            .find(|p| p.peer_node == tor1)
            .unwrap();
        assert_eq!(p.tx_pkts - p.tx_pfc, count * 20, "{spine}");
    }
}

#[test]
fn changing_only_the_source_port_changes_the_path() {
    let s = json!({"duration": "1ms", "topology": two_tor(1, 8)});
    let sim = build(&s);
    let w = sim.world();
    let base = w.path_of(0, 1, 50000);
    assert_eq!(
        base,
        w.path_of(0, 1, 50000),
        "the same 5-tuple always takes the same path"
    );
    let differ = (50001..50033)
        .filter(|&p| w.path_of(0, 1, p) != base)
        .count();
    assert!(
        differ > 16,
        "most other source ports hash elsewhere among 8 paths: {differ}/32"
    );
}

fn comparable(r: &braid_sim::Results) -> braid_sim::Results {
    let mut r = r.clone();
    // Wall-clock figures are the only thing allowed to differ between identical runs.
    r.stats
        .retain(|k, _| !matches!(k.as_str(), "wall_s" | "events_per_s" | "sim_s_per_wall_s"));
    r
}

fn lossy_scenario() -> Value {
    let fl: Vec<(u32, u32, &str)> = (0..8).map(|i| (i, 8 + (i + 1) % 8, "300KB")).collect();
    json!({
        "duration": "20ms",
        "topology": {"kind": "two-tor", "hosts_per_tor": 8, "paths": 2,
                     "host_link": link("40Gbps", "1us"),
                     "fabric_link": {"rate": "40Gbps", "delay": "1us", "loss": 0.002}},
        "measure": {"interval": "50us", "queues": ["tor0:8"]},
        "traffic": flows(&fl),
    })
}

#[test]
fn same_scenario_and_seed_give_identical_results() {
    let s = lossy_scenario();
    let (_, a) = run(&s);
    let (_, b) = run(&s);
    assert!(
        a.counters["drops_loss"] > 0 && a.counters["ecn_marks"] > 0,
        "the scenario exercises randomness"
    );
    // Debug text, so that NaN (no latency samples) compares equal to itself.
    assert_eq!(
        format!("{:?}", comparable(&a)),
        format!("{:?}", comparable(&b))
    );
}

#[test]
fn different_seeds_differ() {
    let s = lossy_scenario().to_string();
    let mut a = Simulation::from_json(&s, Path::new("."), Some(1)).unwrap();
    let mut b = Simulation::from_json(&s, Path::new("."), Some(2)).unwrap();
    a.run();
    b.run();
    assert_ne!(a.results().tables["flows"], b.results().tables["flows"]);
}

fn error_of(s: Value) -> (String, String) {
    match Simulation::from_json(&s.to_string(), Path::new("."), None) {
        Ok(_) => panic!("accepted: {s}"),
        Err(e) => (e.path, e.message),
    }
}

#[test]
fn bad_scenarios_name_the_key_and_the_expected_form() {
    let ok = json!({"duration": "1ms", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let with = |f: &dyn Fn(&mut Value)| {
        let mut s = ok.clone();
        f(&mut s);
        error_of(s)
    };
    let (p, m) = with(&|s| s["switch"] = json!({"bufer": "1MB"}));
    assert_eq!(p, "switch.bufer");
    assert!(
        m.contains("unknown field") && m.contains("buffer"),
        "names the expected keys: {m}"
    );
    let (p, m) = with(&|s| s["switch"] = json!({"ecn": {"pmax": 1.5}}));
    assert_eq!(p, "switch.ecn.pmax");
    assert!(m.contains("probability"), "{m}");
    let (p, _) = with(&|s| s["nic"] = json!({"mtu": 10}));
    assert_eq!(p, "nic.mtu");
    let (p, _) = with(&|s| s["transport"] = json!({"kind": "tcp"}));
    assert_eq!(p, "transport.kind");
    let (p, _) = with(&|s| s["duration"] = json!(5));
    assert_eq!(p, "duration");
    let (p, _) =
        with(&|s| s["apps"] = json!([{"kind": "write_bw", "src": 0, "dst": 7, "size": "1KB"}]));
    assert_eq!(p, "apps[0].dst");
    let (p, m) = with(&|s| s["middleware"] = json!({"default": ["magic"]}));
    assert_eq!(p, "middleware.default[0]");
    assert!(m.contains("raw"), "{m}");
    let (p, _) = with(&|s| s["measure"] = json!({"queues": ["nowhere:1"]}));
    assert_eq!(p, "measure.queues[0]");
    let (p, _) = with(&|s| s["link_events"] = json!([{"a": "swL", "b": "h9", "down": "1us"}]));
    assert_eq!(p, "link_events[0].b");
    let (p, _) = with(&|s| {
        s.as_object_mut().unwrap().remove("duration");
    });
    assert_eq!(p, "");
}

#[test]
fn link_failure_stops_traffic_and_recovery_restores_it() {
    // One flow across a bottleneck that goes down for 1 ms: nothing is delivered meanwhile, and
    // go-back-N (RTO) recovers after the link comes back. (The QP gives up after retry_cnt = 7
    // retries without progress, as ibverbs: 8 x rto must outlast the outage.)
    let s = json!({
        "duration": "50ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "nic": {"rto": "200us", "data_check": true},
        "measure": {"interval": "100us"},
        "link_events": [{"a": "swL", "b": "swR", "down": "1ms", "up": "2ms"}],
        "traffic": flows(&[(0, 1, "20MB")]),
    });
    let (_, r) = run(&s);
    assert!(r.counters["drops_link_down"] > 0);
    assert!(r.counters["timeouts"] > 0);
    let during = mean_gbps(&r, 1, 1_100_000_000, 2_000_000_000)[0];
    let after = mean_gbps(&r, 1, 2_500_000_000, 3_500_000_000)[0];
    assert!(during < 0.01, "{during}");
    assert!(after > 30.0, "{after}");
}

#[test]
fn static_routes_override_ecmp() {
    // Pin every flow from tor0 through spine2: ECMP would have spread them.
    let n = 8;
    let fl: Vec<(u32, u32, &str)> = (0..n).map(|i| (i, n + i, "10KB")).collect();
    let s = json!({"duration": "5ms", "topology": two_tor(n, 4), "traffic": flows(&fl),
                   "routes": [{"node": "tor0", "next_hops": ["spine2"], "dst": (n..2 * n).collect::<Vec<u32>>()}]});
    let (_, r) = run(&s);
    match r.tables["flows"].get("path").unwrap() {
        braid_sim::Column::Str(v) => assert!(v.iter().all(|p| spine_of(p) == "spine2"), "{v:?}"),
        _ => unreachable!(),
    }
    let mut bad = s.clone();
    bad["routes"][0]["next_hops"] = json!(["tor1"]);
    let (p, m) = error_of(bad);
    assert_eq!(p, "routes[0].next_hops[0]");
    assert!(m.contains("not a neighbour"), "{m}");
}

#[test]
fn verbs_stacks_are_chosen_per_host_and_per_tenant() {
    let s = json!({
        "duration": "1ms",
        "topology": dumbbell(2, 1, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "middleware": {"default": ["raw"], "per_host": {"1": ["raw", "raw"]}},
        "apps": [
            {"kind": "write_bw", "src": 0, "dst": 2, "size": "1KB", "iterations": 10},
            {"kind": "write_bw", "src": 1, "dst": 2, "size": "1KB", "iterations": 10, "middleware": []},
            {"kind": "write_bw", "src": 1, "dst": 2, "size": "1KB", "iterations": 10},
        ],
    });
    let sim = build(&s);
    let st = sim.stacks();
    assert_eq!(st[0], vec![vec!["raw"]], "host 0: the default stack");
    // Host 1 runs two tenants: one with its own (empty) stack, one with the host's.
    assert_eq!(st[1], vec![Vec::<&str>::new(), vec!["raw", "raw"]]);
    let mut bad = s.clone();
    bad["apps"][1]["middleware"] = json!(["nope"]);
    assert_eq!(error_of(bad).0, "apps[1].middleware[0]");
}

#[test]
fn silent_accepts_are_errors() {
    let ok = json!({"duration": "1ms", "topology": two_tor(2, 2)});
    let with = |f: &dyn Fn(&mut Value)| {
        let mut s = ok.clone();
        f(&mut s);
        error_of(s)
    };
    // A host forwards nothing: as a next hop only for its own traffic.
    let (p, m) = with(&|s| s["routes"] = json!([{"node": "tor0", "next_hops": ["h0"]}]));
    assert_eq!(p, "routes[0].next_hops[0]");
    assert!(m.contains("is a host"), "{m}");
    let mut own = ok.clone();
    own["routes"] = json!([{"node": "tor0", "dst": [0], "next_hops": ["h0"]}]);
    assert!(Simulation::from_json(&own.to_string(), Path::new("."), None).is_ok());
    let (p, m) = with(&|s| s["middleware"] = json!({"per_host": {"9": ["raw"]}}));
    assert_eq!(p, "middleware.per_host.9");
    assert!(m.contains("does not exist"), "{m}");
    let (p, _) = with(&|s| s["switch"] = json!({"scheduler": "dwrr", "dwrr_quantum": [1500]}));
    assert_eq!(p, "switch.dwrr_quantum");
    let (p, _) = with(&|s| {
        s["apps"] = json!([{"kind": "write_bw", "src": 0, "dst": 2, "size": "1KB",
                            "iterations": 3, "duration": "1ms"}])
    });
    assert_eq!(p, "apps[0].duration");
    // The same port by name and by node id.
    let tor0 = build(&ok)
        .world()
        .nodes
        .iter()
        .position(|n| n.name == "tor0")
        .unwrap();
    let (p, m) = with(&|s| s["measure"] = json!({"queues": ["tor0:0", format!("{tor0}:0")]}));
    assert_eq!(p, "measure.queues[1]");
    assert!(m.contains("already sampled"), "{m}");
}

#[test]
fn packets_nobody_can_forward_are_counted_as_drops() {
    // Two switches with no link between them: the flow's packets die at the first switch.
    let l = |a: &str, b: &str| json!({"a": a, "b": b, "rate": "10Gbps", "delay": "1us"});
    let s = json!({"duration": "200us",
        "topology": {"kind": "edges", "nodes": ["a", "b", "s1", "s2"], "switches": ["s1", "s2"],
                     "links": [l("a", "s1"), l("b", "s2")]},
        "traffic": flows(&[(0, 1, "10KB")])});
    let (_, r) = run(&s);
    let c = &r.counters;
    assert!(c["drops_no_route"] > 0, "{c:?}");
    assert_eq!(c["drops_buffer"], 0);
    assert_eq!(
        c["drops"],
        c["drops_buffer"] + c["drops_loss"] + c["drops_link_down"] + c["drops_no_route"]
    );
}

/// Build progress: a fat-tree's build reports each stage from 0 to its total, in order, the
/// routes stage once per edge switch (k²/2), the same reports every time; and a build with
/// progress gives the same run as one without.
#[test]
fn the_build_reports_progress_per_stage() {
    let k = 8u64;
    let s = json!({"duration": "50us",
        "topology": {"kind": "fat-tree", "k": k, "host_link": link("100Gbps", "1us"), "fabric_link": link("100Gbps", "1us")},
        "traffic": [{"pattern": "poisson", "load": 0.3, "cdf": "web-search", "duration": "20us"}]});
    let text = s.to_string();
    let reports = || {
        let mut got: Vec<(String, u64, u64)> = Vec::new();
        let mut f = |st: &str, d: u64, t: u64| got.push((st.to_string(), d, t));
        let mut sim = Simulation::from_json_with_progress(&text, Path::new("."), None, &mut f)
            .expect("builds");
        sim.run();
        (got, sim.events())
    };
    let (got, events) = reports();
    let stages: Vec<&str> = got
        .iter()
        .map(|r| r.0.as_str())
        .fold(Vec::new(), |mut v, s| {
            if v.last() != Some(&s) {
                v.push(s);
            }
            v
        });
    assert_eq!(
        stages,
        ["topology", "links", "nodes", "routes", "traffic", "tenants"]
    );
    for st in &stages {
        let mine: Vec<_> = got.iter().filter(|r| r.0 == *st).collect();
        assert_eq!(mine[0].1, 0, "{st} starts at 0");
        let last = mine.last().unwrap();
        assert_eq!(last.1, last.2, "{st} ends at its total");
        assert!(mine.windows(2).all(|w| w[0].1 <= w[1].1), "{st} only grows");
        assert!(
            mine.len() <= 34,
            "{st}: at most 33 reports, got {}",
            mine.len()
        );
    }
    let routes = got.iter().find(|r| r.0 == "routes").unwrap();
    assert_eq!(routes.2, k * k / 2, "one route search per edge switch");
    let nodes = got.iter().find(|r| r.0 == "nodes").unwrap();
    assert_eq!(nodes.2, k * k * k / 4 + 5 * k * k / 4);
    let (again, events_again) = reports();
    assert_eq!(got, again);
    let mut plain = Simulation::from_json(&text, Path::new("."), None).unwrap();
    plain.run();
    assert_eq!(plain.events(), events);
    assert_eq!(events_again, events);
}
