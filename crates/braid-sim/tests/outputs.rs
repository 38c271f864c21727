//! The outputs researchers expect: the port map (`ports`), ports named by their neighbour in
//! `measure.queues`, and the PFC frame log (`pfc`).

mod common;
use braid_sim::{Column, Simulation, Table};
use common::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

fn strs(t: &Table, name: &str) -> Vec<String> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        Column::Str(v) => v.clone(),
        _ => panic!("{name} is not a string column"),
    }
}

fn two_tor() -> Value {
    json!({"kind": "two-tor", "hosts_per_tor": 2, "paths": 2,
           "host_link": link("40Gbps", "1us"), "fabric_link": link("100Gbps", "2us")})
}

#[test]
fn the_port_map_names_every_ports_peer_and_both_ends_agree() {
    let s = json!({"duration": "1ms", "topology": two_tor()});
    let (sim, r) = run(&s);
    let w = sim.world();
    let p = &r.tables["ports"];
    let total: usize = (0..w.nodes.len() as u32)
        .map(|n| w.node_ports(n).len())
        .sum();
    assert_eq!(p.rows(), total, "one row per (node, port)");
    let (node, port, peer, peer_port) = (
        ints(p, "node"),
        ints(p, "port"),
        ints(p, "peer"),
        ints(p, "peer_port"),
    );
    let (name, peer_name) = (strs(p, "node_name"), strs(p, "peer_name"));
    let (rate, delay) = (ints(p, "rate_bps"), ints(p, "delay_ps"));
    let row: HashMap<(i64, i64), usize> = (0..p.rows()).map(|i| ((node[i], port[i]), i)).collect();
    for i in 0..p.rows() {
        // The other end of the link points back at this port, with the same rate and delay.
        let j = row[&(peer[i], peer_port[i])];
        assert_eq!((peer[j], peer_port[j]), (node[i], port[i]), "row {i}");
        assert_eq!((rate[j], delay[j]), (rate[i], delay[i]));
        assert_eq!(name[i], w.nodes[node[i] as usize].name);
        assert_eq!(peer_name[i], w.nodes[peer[i] as usize].name);
        // Hosts carry their host index (what flows name them by), switches -1.
        let host = ints(p, "host")[i];
        match w.nodes[node[i] as usize].role {
            braid_sim::world::Role::Host(h) => assert_eq!(host, h as i64),
            braid_sim::world::Role::Switch(_) => assert_eq!(host, -1),
        }
        let fabric = name[i].starts_with("spine") || peer_name[i].starts_with("spine");
        let want = if fabric {
            (100_000_000_000, 2_000_000)
        } else {
            (40_000_000_000, 1_000_000)
        };
        assert_eq!((rate[i], delay[i]), want, "{} -> {}", name[i], peer_name[i]);
    }
    // tor0 faces its two hosts and both spines.
    let mut faced: Vec<&str> = (0..p.rows())
        .filter(|&i| name[i] == "tor0")
        .map(|i| peer_name[i].as_str())
        .collect();
    faced.sort();
    assert_eq!(faced.len(), 4, "{faced:?}");
    assert!(
        faced.contains(&"spine0") && faced.contains(&"spine1"),
        "{faced:?}"
    );
}

fn traffic() -> Value {
    flows(&[(0, 2, "200KB"), (1, 3, "200KB")])
}

#[test]
fn a_queue_named_by_its_neighbour_is_the_port_facing_it() {
    let by_peer = json!({"duration": "2ms", "topology": two_tor(), "traffic": traffic(),
        "measure": {"interval": "5us", "queues": [{"node": "tor0", "peer": "spine1"}]}});
    let (_, r) = run(&by_peer);
    let i = (0..r.tables["ports"].rows())
        .find(|&i| {
            strs(&r.tables["ports"], "node_name")[i] == "tor0"
                && strs(&r.tables["ports"], "peer_name")[i] == "spine1"
        })
        .unwrap();
    let name = format!("tor0:{}", ints(&r.tables["ports"], "port")[i]);
    let got = strs(&r.tables["queues"], "port");
    assert!(!got.is_empty());
    assert!(got.iter().all(|n| *n == name), "{got:?} vs {name}");
    // The same series as naming the port by its index.
    let by_index = json!({"duration": "2ms", "topology": two_tor(), "traffic": traffic(),
        "measure": {"interval": "5us", "queues": [name.clone()]}});
    let (_, r2) = run(&by_index);
    assert_eq!(r.tables["queues"], r2.tables["queues"]);
}

fn rejected(s: &Value) -> (String, String) {
    match Simulation::from_json(&s.to_string(), Path::new("."), None) {
        Ok(_) => panic!("accepted: {s}"),
        Err(e) => (e.path, e.message),
    }
}

#[test]
fn a_bad_neighbour_queue_is_one_error_naming_the_key() {
    let with =
        |q: Value| json!({"duration": "1ms", "topology": two_tor(), "measure": {"queues": q}});
    let (p, m) = rejected(&with(json!([{"node": "tor9", "peer": "spine1"}])));
    assert_eq!(p, "measure.queues[0].node");
    assert!(m.contains("tor9"), "{m}");
    let (p, m) = rejected(&with(json!(["tor0:0", {"node": "tor0", "peer": "spine7"}])));
    assert_eq!(p, "measure.queues[1].peer");
    assert!(m.contains("spine7"), "{m}");
    // A node that is not a neighbour.
    let (p, m) = rejected(&with(json!([{"node": "tor0", "peer": "tor1"}])));
    assert_eq!(p, "measure.queues[0].peer");
    assert!(m.contains("no link"), "{m}");
    // The same port by index and by neighbour.
    let s = json!({"duration": "1ms", "topology": two_tor()});
    let sim = build(&s);
    let w = sim.world();
    let tor0 = w.nodes.iter().position(|n| n.name == "tor0").unwrap();
    let spine0 = w.nodes.iter().position(|n| n.name == "spine0").unwrap() as u32;
    let pi = w
        .node_ports(tor0 as u32)
        .iter()
        .position(|p| p.peer_node == spine0)
        .unwrap();
    let (p, m) = rejected(&with(
        json!([format!("tor0:{pi}"), {"node": "tor0", "peer": "spine0"}]),
    ));
    assert_eq!(p, "measure.queues[1]");
    assert!(m.contains("already sampled"), "{m}");
}

fn incast(pfc_log: bool) -> Value {
    let fl: Vec<(u32, u32, &str)> = (0..4).map(|i| (i, 4, "300KB")).collect();
    json!({
        "duration": "10ms",
        "topology": dumbbell(4, 1, link("40Gbps", "1us"), link("400Gbps", "1us")),
        "switch": {"buffer": "200KB"},
        "measure": {"pfc": pfc_log, "messages": false},
        "traffic": flows(&fl),
    })
}

#[test]
fn every_pfc_frame_is_logged_where_it_is_sent_and_where_it_is_received() {
    let (sim, r) = run(&incast(true));
    let w = sim.world();
    let t = &r.tables["pfc"];
    assert!(t.rows() > 0, "the incast pauses");
    let (time, node, port, prio) = (
        ints(t, "time_ps"),
        ints(t, "node"),
        ints(t, "port"),
        ints(t, "priority"),
    );
    let (ty, dir, names) = (strs(t, "type"), strs(t, "direction"), strs(t, "node_name"));
    let sent: Vec<usize> = (0..t.rows()).filter(|&i| dir[i] == "sent").collect();
    let recv: Vec<usize> = (0..t.rows()).filter(|&i| dir[i] == "received").collect();
    let pauses = sent.iter().filter(|&&i| ty[i] == "pause").count() as u64;
    let resumes = sent.iter().filter(|&&i| ty[i] == "resume").count() as u64;
    assert_eq!(pauses, r.counters["pfc_pauses"]);
    assert_eq!(resumes, r.counters["pfc_resumes"]);
    // Nothing is lost on a lossless link: every frame sent arrives, in order, at the port that
    // faces the sender, one propagation delay (plus serialization) later.
    assert_eq!(sent.len(), recv.len());
    assert!(time.windows(2).all(|x| x[0] <= x[1]), "in time order");
    let mut arrivals: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
    for &i in &recv {
        arrivals.entry((node[i], port[i])).or_default().push(i);
    }
    let mut seen: HashMap<(i64, i64), usize> = HashMap::new();
    for &i in &sent {
        let p = &w.node_ports(node[i] as u32)[port[i] as usize];
        let key = (p.peer_node as i64, p.peer_port as i64);
        let k = seen.entry(key).or_default();
        let j = arrivals[&key][*k];
        *k += 1;
        assert_eq!((ty[j].as_str(), prio[j]), (ty[i].as_str(), prio[i]));
        let lag = time[j] - time[i];
        assert!(
            lag >= p.delay as i64 && lag < p.delay as i64 + 1_000_000,
            "lag {lag}"
        );
        assert_eq!(names[i], w.nodes[node[i] as usize].name);
    }
    // Per port and priority, what a port receives alternates pause, resume, pause, ...
    for (key, js) in &arrivals {
        for (n, &j) in js.iter().enumerate() {
            let want = if n % 2 == 0 { "pause" } else { "resume" };
            assert_eq!(ty[j], want, "{key:?} frame {n}");
        }
    }
    // The receiving ports' pause intervals add up to the paused time the run reports.
    let mut paused = 0i64;
    for js in arrivals.values() {
        for pair in js.chunks(2) {
            if let [a, b] = pair {
                paused += time[*b] - time[*a];
            }
        }
    }
    assert_eq!(paused as u64, r.counters["pfc_paused_ps"]);
}

#[test]
fn the_pfc_log_can_be_switched_off_without_changing_the_run() {
    let (_, on) = run(&incast(true));
    let (_, off) = run(&incast(false));
    assert_eq!(off.tables["pfc"].rows(), 0);
    assert!(on.tables["pfc"].rows() > 0);
    // (Whole tables hold NaN latency columns, which never compare equal.)
    assert_eq!(
        ints(&on.tables["flows"], "fct_ps"),
        ints(&off.tables["flows"], "fct_ps")
    );
    assert_eq!(on.tables["throughput"], off.tables["throughput"]);
    assert_eq!(on.counters, off.counters);
}
