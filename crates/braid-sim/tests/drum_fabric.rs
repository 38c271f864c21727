//! DRUM's fabric-link extension in the host agents (`decider = "fabric"`), fed with the simulated
//! fabric's links: a leaf-spine (three leaves, one spine) whose leaf0 -> spine link runs at
//! 10 Gbit/s while every other link runs at 40. Tenants A (h0 -> h2) and B (h1 -> h3) both cross
//! it, C (h4 -> h5) stays under leaf2, and a latency probe (write_lat h1 -> h2) crosses it too.
//! Each host's NIC allows 2 M WR/s (16 Gbit/s of 1 KB WRITEs), so under `local` the two senders
//! offer 33 Gbit/s to the 10 Gbit/s link; under `fabric` the coordinator caps them to its
//! capacity, as does the distributed decider (`decider = "online"` with `online.links =
//! "fabric"`). A second fabric has two spines (ECMP) with one slow spine link: only the
//! distributed decider, which gives each pipe the links its packets take, sees it. Shape
//! asserted, numbers printed:
//! `cargo test --release -p braid-sim --test drum_fabric -- --nocapture`.

mod common;
use common::*;
use serde_json::{json, Value};

fn topology() -> Value {
    let mut links = vec![];
    for (h, leaf) in [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)] {
        links.push(json!({"a": format!("h{h}"), "b": format!("leaf{leaf}"), "rate": "40Gbps", "delay": "1us"}));
    }
    for (leaf, rate) in [(0, "10Gbps"), (1, "40Gbps"), (2, "40Gbps")] {
        links.push(json!({"a": format!("leaf{leaf}"), "b": "spine", "rate": rate, "delay": "1us"}));
    }
    json!({"kind": "edges",
           "nodes": ["h0", "h1", "h2", "h3", "h4", "h5", "leaf0", "leaf1", "leaf2", "spine"],
           "switches": ["leaf0", "leaf1", "leaf2", "spine"], "links": links})
}

/// `decider`: "local", "fabric" (the coordinator) or "online" (distributed, with the fabric's
/// links: `online.links = "fabric"`).
fn scenario(decider: &str) -> Value {
    let mut drum = json!([{"kind": "drum", "wqe_rate": 2e6, "cqe_rate": 2e6, "decider": decider,
                       "solve_interval": "50us", "pipe_depth": 64}]);
    if decider == "online" {
        drum[0]["online"] = json!({"links": "fabric"});
    }
    let bw = |src: u32, dst: u32| {
        json!({"kind": "write_bw", "src": src, "dst": dst, "size": "1KB", "qps": 2,
               "tx_depth": 16, "duration": "1ms", "start": "100us"})
    };
    json!({
        "duration": "2ms",
        "nic": {"mtu": 1024},
        "topology": topology(),
        "middleware": {"default": drum},
        "measure": {"interval": "10us", "queues": [{"node": "leaf0", "peer": "spine"}], "pfc": true},
        "apps": [bw(0, 2), bw(1, 3), bw(4, 5),
                 {"kind": "wqe_lat", "src": 1, "dst": 2, "size": "32B", "qps": 1, "tx_depth": 1,
                  "duration": "1ms", "start": "100us"}],
    })
}

struct Run {
    labels: Vec<String>,
    gbps: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    queue_max: f64,
    queue_mean: f64,
    pauses: usize,
    agent: Vec<(String, f64)>,
}

fn f64s(t: &braid_sim::Table, k: &str) -> Vec<f64> {
    match t.get(k) {
        Some(braid_sim::Column::F64(v)) => v.clone(),
        _ => panic!("no float column {k}"),
    }
}

fn measure(decider: &str) -> Run {
    measure_scenario(&scenario(decider)).1
}

fn measure_scenario(s: &Value) -> (braid_sim::Simulation, Run) {
    let (sim, r) = run(s);
    let t = &r.tables["tenants"];
    let labels = match t.get("label") {
        Some(braid_sim::Column::Str(l)) => l.clone(),
        _ => panic!("no labels"),
    };
    // The spine port's queue in the second half of the tenants' run (after the start-up lag:
    // the coordinator's first rates reach the agents one or two solve intervals in).
    let qt = ints(&r.tables["queues"], "time_ps");
    let q: Vec<i64> = ints(&r.tables["queues"], "bytes")
        .into_iter()
        .zip(qt)
        .filter(|&(_, t)| (600_000_000..=1_100_000_000).contains(&t))
        .map(|(b, _)| b)
        .collect();
    let pauses = match r.tables["pfc"].get("type") {
        Some(braid_sim::Column::Str(v)) => v.iter().filter(|x| *x == "pause").count(),
        _ => 0,
    };
    let a = labels.iter().position(|l| l == "agent").unwrap();
    let agent = t
        .columns
        .iter()
        .filter_map(|(n, c)| match c {
            braid_sim::Column::F64(v) if n.starts_with("drum_") => Some((n.clone(), v[a])),
            _ => None,
        })
        .collect();
    let run = Run {
        agent,
        gbps: f64s(t, "goodput_gbps"),
        p50: f64s(t, "lat_p50_us"),
        p99: f64s(t, "lat_p99_us"),
        labels,
        queue_max: q.iter().copied().max().unwrap_or(0) as f64,
        queue_mean: q.iter().sum::<i64>() as f64 / q.len().max(1) as f64,
        pauses,
    };
    (sim, run)
}

impl Run {
    fn at(&self, label: &str) -> usize {
        self.labels.iter().position(|l| l == label).unwrap()
    }
    fn show(&self, name: &str) {
        let (a, b, c, p) = (
            self.at("apps[0].client"),
            self.at("apps[1].client"),
            self.at("apps[2].client"),
            self.at("apps[3].client"),
        );
        println!(
            "{name:6} A {:5.2} B {:5.2} C {:5.2} Gbit/s | probe p50 {:6.2} p99 {:6.2} us | leaf0->spine queue mean {:8.0} max {:6.0} B | PFC pauses {}",
            self.gbps[a], self.gbps[b], self.gbps[c], self.p50[p], self.p99[p], self.queue_mean,
            self.queue_max, self.pauses
        );
    }
}

#[test]
fn the_fabric_decider_keeps_the_congested_spine_link_below_capacity() {
    let (l, f) = (measure("local"), measure("fabric"));
    l.show("local");
    f.show("fabric");
    for (k, v) in &f.agent {
        if k.starts_with("drum_fabric") {
            println!("  h0 agent {k} {v}");
        }
    }
    // The coordinator (h0, lowest address) solved, and the agents applied its rates.
    assert!(f
        .agent
        .iter()
        .any(|(k, v)| k == "drum_fabric_solves" && *v > 5.0));
    assert!(f
        .agent
        .iter()
        .any(|(k, v)| k == "drum_fabric_solve_failures" && *v == 0.0));
    let (a, b, c, p) = (
        l.at("apps[0].client"),
        l.at("apps[1].client"),
        l.at("apps[2].client"),
        l.at("apps[3].client"),
    );
    // The link carries 10 Gbit/s less headers (9.43 of payload); under `fabric` A + B stay
    // under 0.9 of it; under `local` they fill it and a standing queue holds.
    assert!(
        f.gbps[a] + f.gbps[b] <= 0.9 * 9.43 * 1.02,
        "{}",
        f.gbps[a] + f.gbps[b]
    );
    assert!(l.gbps[a] + l.gbps[b] > f.gbps[a] + f.gbps[b]);
    assert!(
        l.queue_mean > 20_000.0,
        "local: a standing queue, {}",
        l.queue_mean
    );
    assert!(
        f.queue_mean < l.queue_mean / 10.0,
        "{} vs {}",
        f.queue_mean,
        l.queue_mean
    );
    // The probe crossing the link waits less; C, off the spine, keeps its NIC's rate (2 M WR/s
    // of 1 KB: 16.4 Gbit/s) under both.
    assert!(f.p50[p] < l.p50[p] / 2.0, "{} vs {}", f.p50[p], l.p50[p]);
    for r in [&l, &f] {
        assert!((r.gbps[c] - 16.4).abs() < 0.8, "C {}", r.gbps[c]);
    }
    assert!((f.gbps[c] - l.gbps[c]).abs() < 0.1);
}

#[test]
fn the_same_scenario_and_seed_give_the_same_run() {
    for d in ["fabric", "online"] {
        let (x, y) = (measure(d), measure(d));
        assert_eq!(
            format!("{:?}", (x.gbps, x.p50, x.queue_mean, x.agent)),
            format!("{:?}", (y.gbps, y.p50, y.queue_mean, y.agent))
        );
    }
}

#[test]
fn online_links_without_a_fabric_or_with_report_gap_are_refused_by_name() {
    let mut s = scenario("online");
    s["middleware"]["default"][0]["online"]["links"] = json!("everywhere");
    let e = match braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
    {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(
        e.contains("everywhere") && e.contains("`none`") && e.contains("`fabric`"),
        "{e}"
    );
    let mut s = scenario("online");
    s["middleware"]["default"][0]["online"]["report_gap"] = json!(true);
    let e = match braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
    {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(e.contains("online.report_gap"), "{e}");
}

#[test]
fn a_bad_link_utilization_is_refused_by_name() {
    let mut s = scenario("fabric");
    s["middleware"]["default"][0]["link_utilization"] = json!(1.5);
    let e = match braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
    {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(
        e.contains("link_utilization") && e.contains("(0, 1]"),
        "{e}"
    );
}

/// The links the agents are given, against the topology: leaf0 -> spine carries every pair from
/// h0 and h1 to the four hosts under the other leaves, at 10 Gbit/s less RoCE headers (62 B per
/// 1024 B packet); no pair crosses it in the other direction from under leaf0.
#[test]
fn the_fabric_links_follow_the_routes() {
    let sim = build(&scenario("fabric"));
    let f = braid_sim::world::fabric_links(sim.world());
    let addr = |h: usize| sim.world().hosts[h].node;
    assert_eq!(f.hosts, (0..6).map(addr).collect::<Vec<_>>());
    let l = f.links.iter().find(|l| l.name == "leaf0->spine").unwrap();
    let mut want: Vec<(u32, u32)> = vec![];
    for s in [0, 1] {
        for d in 2..6 {
            want.push((addr(s), addr(d)));
        }
    }
    let mut got = l.pairs.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(
        (l.cap - 10e9 / 8.0 * 1024.0 / 1086.0).abs() < 1.0,
        "{}",
        l.cap
    );
    let back = f.links.iter().find(|l| l.name == "spine->leaf0").unwrap();
    assert_eq!(back.pairs.len(), 8);
    assert!(back
        .pairs
        .iter()
        .all(|&(_, d)| d == addr(0) || d == addr(1)));
    // Host links are not fabric links here.
    assert!(f
        .links
        .iter()
        .all(|l| !l.name.starts_with('h') && !l.name.contains("->h")));
}

/// With two spines (ECMP), each pair between leaves may take either: no leaf-spine link is
/// crossed on every route (`pairs` stays empty: the coordinator is blind there), but every
/// one may be (`may`), and the per-QP routes replay the switches' ECMP exactly.
#[test]
fn ecmp_links_a_pair_may_avoid_are_left_out_and_routes_replay_ecmp() {
    let mut links = vec![];
    for (h, leaf) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
        links.push(json!({"a": format!("h{h}"), "b": format!("leaf{leaf}"), "rate": "40Gbps", "delay": "1us"}));
    }
    for leaf in 0..2 {
        for sp in 0..2 {
            links.push(json!({"a": format!("leaf{leaf}"), "b": format!("spine{sp}"), "rate": "40Gbps", "delay": "1us"}));
        }
    }
    let mut s = scenario("fabric");
    s["topology"] = json!({"kind": "edges",
        "nodes": ["h0", "h1", "h2", "h3", "leaf0", "leaf1", "spine0", "spine1"],
        "switches": ["leaf0", "leaf1", "spine0", "spine1"], "links": links});
    s["measure"] = json!({});
    s["apps"] = json!([{"kind": "write_bw", "src": 0, "dst": 2, "size": "1KB", "qps": 1,
                        "duration": "10us"}]);
    let sim = build(&s);
    let f = braid_sim::world::fabric_links(sim.world());
    // The pair does cross the spines, by two routes.
    let w = sim.world();
    let spines: std::collections::BTreeSet<u32> =
        (49152..49152 + 64).map(|p| w.path_of(0, 2, p)[2]).collect();
    assert_eq!(spines.len(), 2, "ECMP over both spines");
    assert_eq!(f.links.len(), 8, "every directed leaf-spine link");
    assert!(f.links.iter().all(|l| l.pairs.is_empty()), "{:?}", f.links);
    assert!(f.links.iter().all(|l| !l.may.is_empty()));
    // Owners: the lowest host that may send across (h0 for leaf0's uplinks, h2 for leaf1's).
    let addr = |h: usize| w.hosts[h].node;
    let up = f.links.iter().find(|l| l.name == "leaf0->spine0").unwrap();
    assert_eq!(up.owner, Some(addr(0)));
    let up1 = f.links.iter().find(|l| l.name == "leaf1->spine1").unwrap();
    assert_eq!(up1.owner, Some(addr(2)));
    // Per source port, the routes give exactly the switch-to-switch hops of the world's path.
    let r = f.routes.as_ref().expect("the simulator replays its routes");
    let is_sw = |n: u32| w.host_index[n as usize] == u32::MAX;
    for (sh, dh) in [(0, 2), (1, 3), (3, 0), (2, 1), (0, 1)] {
        for sport in (49152..65535).step_by(97) {
            let path = w.path_of(sh, dh, sport);
            let want: Vec<String> = path
                .windows(2)
                .filter(|h| is_sw(h[0]) && is_sw(h[1]))
                .map(|h| {
                    format!(
                        "{}->{}",
                        w.nodes[h[0] as usize].name, w.nodes[h[1] as usize].name
                    )
                })
                .collect();
            let got: Vec<String> = r
                .links_of(addr(sh as usize), sport, addr(dh as usize))
                .into_iter()
                .map(|i| f.links[i].name.clone())
                .collect();
            assert_eq!(got, want, "h{sh} -> h{dh} sport {sport}");
        }
    }
}

/// The distributed decider (`decider = "online"`, `online.links = "fabric"`) on the congested
/// spine: the link's row is kept by h0 (the lowest host that may cross it), A's and B's agents
/// send it their loads, and the rates keep the link below `link_utilization` of its capacity
/// as the coordinator's do, C untouched.
#[test]
fn the_distributed_decider_keeps_the_congested_spine_link_below_capacity() {
    let (l, o) = (measure("local"), measure("online"));
    l.show("local");
    o.show("online");
    for (k, v) in &o.agent {
        if k.starts_with("drum_online") || k.starts_with("drum_ctrl") {
            println!("  h0 agent {k} {v}");
        }
    }
    let (a, b, c, p) = (
        l.at("apps[0].client"),
        l.at("apps[1].client"),
        l.at("apps[2].client"),
        l.at("apps[3].client"),
    );
    assert!(
        o.gbps[a] + o.gbps[b] <= 0.9 * 9.43 * 1.05,
        "{}",
        o.gbps[a] + o.gbps[b]
    );
    assert!(
        o.queue_mean < l.queue_mean / 10.0,
        "{} vs {}",
        o.queue_mean,
        l.queue_mean
    );
    assert!(o.p50[p] < l.p50[p] / 2.0, "{} vs {}", o.p50[p], l.p50[p]);
    assert!((o.gbps[c] - 16.4).abs() < 0.8, "C {}", o.gbps[c]);
}

/// Two spines (ECMP) under two leaves; leaf0 -> spine0 runs at 10 Gbit/s, every other link at
/// 40. Tenants A h0 -> h2, B h0 -> h3, C h1 -> h2, D h1 -> h3 (1 KB WRITEs, 2 connections, 16
/// outstanding each) and a probe h1 -> h2 (32 B, one at a time, on C's pipe); NICs at 4 M WR/s.
/// Which tenants cross the slow link is decided by the ECMP hash of their pipe's UDP source
/// port.
fn ecmp_scenario(decider: &str) -> Value {
    let mut links = vec![];
    for (h, leaf) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
        links.push(json!({"a": format!("h{h}"), "b": format!("leaf{leaf}"), "rate": "40Gbps", "delay": "1us"}));
    }
    for leaf in 0..2 {
        for sp in 0..2 {
            let rate = if (leaf, sp) == (0, 0) {
                "10Gbps"
            } else {
                "40Gbps"
            };
            links.push(json!({"a": format!("leaf{leaf}"), "b": format!("spine{sp}"), "rate": rate, "delay": "1us"}));
        }
    }
    let mut s = scenario(decider);
    s["middleware"]["default"][0]["wqe_rate"] = json!(4e6);
    s["middleware"]["default"][0]["cqe_rate"] = json!(4e6);
    s["topology"] = json!({"kind": "edges",
        "nodes": ["h0", "h1", "h2", "h3", "leaf0", "leaf1", "spine0", "spine1"],
        "switches": ["leaf0", "leaf1", "spine0", "spine1"], "links": links});
    s["measure"]["queues"] = json!([{"node": "leaf0", "peer": "spine0"}]);
    let bw = |src: u32, dst: u32| {
        json!({"kind": "write_bw", "src": src, "dst": dst, "size": "1KB", "qps": 2,
               "tx_depth": 16, "duration": "1ms", "start": "100us"})
    };
    s["apps"] = json!([bw(0, 2), bw(0, 3), bw(1, 2), bw(1, 3),
        {"kind": "wqe_lat", "src": 1, "dst": 2, "size": "32B", "qps": 1, "tx_depth": 1,
         "duration": "1ms", "start": "100us"}]);
    s
}

/// Per (source, destination) host pair of the tenants: whether its pipes' packets cross
/// spine0 (None: some do and some do not), from the agents' QPs' UDP source ports and the
/// world's own routes.
fn crosses_spine0(sim: &braid_sim::Simulation, pairs: &[(u32, u32)]) -> Vec<Option<bool>> {
    let w = sim.world();
    let spine0 = w.nodes.iter().position(|n| n.name == "spine0").unwrap() as u32;
    pairs
        .iter()
        .map(|&(s, d)| {
            let daddr = w.hosts[d as usize].node;
            let via: Vec<bool> = w.hosts[s as usize]
                .nic
                .qps()
                .filter_map(|q| w.hosts[s as usize].nic.query_qp(q.qpn).ok())
                .filter(|a| a.remote.is_some_and(|r| r.host == daddr))
                .map(|a| w.path_of(s, d, a.udp_sport).contains(&spine0))
                .collect();
            assert!(!via.is_empty(), "no pipe h{s} -> h{d}");
            if via.iter().all(|&v| v) {
                Some(true)
            } else if via.iter().all(|&v| !v) {
                Some(false)
            } else {
                None
            }
        })
        .collect()
}

/// The ECMP case the coordinator is blind to: the distributed decider gives each pipe the
/// links its packets take, so the tenants whose pipes hash onto the slow spine link share it
/// (below `link_utilization` of its capacity) and the others keep their rates.
#[test]
fn on_ecmp_only_the_pipes_crossing_the_slow_spine_link_are_constrained() {
    let pairs = [(0, 2), (0, 3), (1, 2), (1, 3)];
    let names = ["A", "B", "C", "D"];
    let mut runs = vec![];
    for d in ["local", "fabric", "online"] {
        let (sim, r) = measure_scenario(&ecmp_scenario(d));
        let x = crosses_spine0(&sim, &pairs);
        let p = r.at("apps[4].client");
        let per: Vec<String> = (0..4)
            .map(|i| {
                let g = r.gbps[r.at(&format!("apps[{i}].client"))];
                let via = match x[i] {
                    Some(true) => "spine0",
                    Some(false) => "spine1",
                    None => "both",
                };
                format!("{} {:5.2} ({via})", names[i], g)
            })
            .collect();
        println!(
            "{d:6} {} Gbit/s | probe p50 {:6.2} p99 {:6.2} us | leaf0->spine0 queue mean {:8.0} max {:6.0} B",
            per.join(", "),
            r.p50[p],
            r.p99[p],
            r.queue_mean,
            r.queue_max
        );
        runs.push((d, x, r));
    }
    let (_, xl, l) = &runs[0];
    let (_, xo, o) = &runs[2];
    let g = |r: &Run, i: usize| r.gbps[r.at(&format!("apps[{i}].client"))];
    // The scenario means something only if the hash splits the pipes between the spines.
    let on: Vec<usize> = (0..4).filter(|&i| xo[i] == Some(true)).collect();
    let off: Vec<usize> = (0..4).filter(|&i| xo[i] == Some(false)).collect();
    assert!(!on.is_empty() && !off.is_empty(), "{xo:?}");
    assert!(xl.contains(&Some(true)), "{xl:?}");
    // The slow link: full under `local`, below 0.9 of its 9.43 Gbit/s of payload under `online`.
    let load: f64 = on.iter().map(|&i| g(o, i)).sum();
    assert!(load <= 0.9 * 9.43 * 1.05, "{load}");
    assert!(l.queue_mean > 20_000.0, "local: {}", l.queue_mean);
    assert!(
        o.queue_mean < l.queue_mean / 10.0,
        "{} vs {}",
        o.queue_mean,
        l.queue_mean
    );
    // The pipes on spine1 are not held to the slow link's share.
    let slow = on.iter().map(|&i| g(o, i)).fold(0.0, f64::max);
    for &i in &off {
        assert!(
            g(o, i) > slow,
            "{} on spine1 {} vs {slow}",
            names[i],
            g(o, i)
        );
    }
}
