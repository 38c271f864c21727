//! Switch load balancing (`switch.lb`) and fast failover (`switch.failover`) in whole runs:
//! ECMP stays what it was, spraying spreads one flow over every uplink, adaptive routing and
//! WCMP load an asymmetric fabric by capacity, failover restores delivery after the detection
//! delay, and each policy is deterministic per seed.

mod common;
use braid_sim::Simulation;
use common::*;
use serde_json::{json, Value};
use std::path::Path;

/// Two ToRs (hosts h0.. below tor0, the next `n` below tor1) joined by four spines; tor0's
/// uplink to s3 runs at `slow` (the others at 100 Gbit/s).
fn asymmetric(n: u32, slow: &str) -> Value {
    asymmetric_at(n, slow, "tor0")
}

/// [`asymmetric`] with the slow link between s3 and `tor` (tor0: the senders' uplink; tor1: a
/// hop further, invisible in tor0's own link rates).
fn asymmetric_at(n: u32, slow: &str, tor: &str) -> Value {
    let mut nodes: Vec<String> = (0..2 * n).map(|i| format!("h{i}")).collect();
    nodes.extend(["tor0", "tor1", "s0", "s1", "s2", "s3"].map(String::from));
    let mut links = Vec::new();
    for i in 0..2 * n {
        let tor = if i < n { "tor0" } else { "tor1" };
        links.push(json!({"a": format!("h{i}"), "b": tor, "rate": "100Gbps", "delay": "1us"}));
    }
    for s in 0..4 {
        for t in ["tor0", "tor1"] {
            let rate = if s == 3 && t == tor { slow } else { "100Gbps" };
            links.push(json!({"a": t, "b": format!("s{s}"), "rate": rate, "delay": "1us"}));
        }
    }
    json!({"kind": "edges", "nodes": nodes, "switches": ["tor0", "tor1", "s0", "s1", "s2", "s3"],
           "links": links})
}

/// Data bytes tor0 sent up to each spine.
fn uplink_bytes(sim: &Simulation) -> Vec<u64> {
    let w = sim.world();
    let tor0 = w.nodes.iter().position(|x| x.name == "tor0").unwrap() as u32;
    (0..4)
        .map(|s| {
            let spine = w
                .nodes
                .iter()
                .position(|x| x.name == format!("s{s}"))
                .unwrap() as u32;
            w.node_ports(tor0)
                .iter()
                .find(|p| p.peer_node == spine)
                .unwrap()
                .tx_bytes
        })
        .collect()
}

fn scenario(lb: Value, n: u32, size: &str, slow: &str) -> Value {
    let fl: Vec<(u32, u32, &str)> = (0..n).map(|i| (i, n + i, size)).collect();
    json!({"duration": "20ms", "topology": asymmetric(n, slow), "traffic": flows(&fl),
           "switch": {"lb": lb}})
}

fn all_finished(r: &braid_sim::Results) -> bool {
    ints(&r.tables["flows"], "fct_ps").iter().all(|&f| f > 0)
}

#[test]
fn ecmp_by_name_is_the_default_bit_for_bit() {
    let mut s = scenario(json!({"kind": "ecmp"}), 8, "200KB", "100Gbps");
    let (a, ra) = run(&s);
    s["switch"].as_object_mut().unwrap().remove("lb");
    let (b, rb) = run(&s);
    assert_eq!(
        ints(&ra.tables["flows"], "fct_ps"),
        ints(&rb.tables["flows"], "fct_ps")
    );
    assert_eq!(uplink_bytes(&a), uplink_bytes(&b));
}

#[test]
fn spraying_spreads_one_flow_over_every_uplink() {
    // One 4 MB flow (1,000 packets of 4 KB): ECMP keeps it on one uplink; spraying shares it.
    let (e, _) = run(&scenario(json!({"kind": "ecmp"}), 1, "4MB", "100Gbps"));
    assert_eq!(
        uplink_bytes(&e).iter().filter(|&&b| b > 1_000_000).count(),
        1
    );
    for order in ["random", "round-robin"] {
        let (sim, r) = run(&scenario(
            json!({"kind": "spray", "order": order}),
            1,
            "4MB",
            "100Gbps",
        ));
        assert!(all_finished(&r), "{order}");
        let up = uplink_bytes(&sim);
        let total: u64 = up.iter().sum();
        for &b in &up {
            // Random: each uplink's packet count is Binomial(~1000, 1/4), sd 13.7 of 250 (5.5%);
            // 5 sd = 27%. Round robin: within one packet.
            let bound = if order == "random" { 0.27 } else { 0.01 };
            let share = b as f64 / total as f64;
            assert!(
                (share - 0.25).abs() < 0.25 * bound + 0.001,
                "{order}: {up:?}"
            );
        }
    }
}

#[test]
fn a_policy_can_be_set_per_switch() {
    // Round robin at tor0 only: one flow's data spreads over the four uplinks, while tor1 (ECMP)
    // sends all its ACKs up one.
    let mut s = scenario(json!({"kind": "ecmp"}), 1, "4MB", "100Gbps");
    s["switch"]["lb_at"] =
        json!([{"node": "tor0", "lb": {"kind": "spray", "order": "round-robin"}}]);
    let (sim, r) = run(&s);
    assert!(all_finished(&r));
    assert!(
        uplink_bytes(&sim).iter().all(|&b| b > 900_000),
        "{:?}",
        uplink_bytes(&sim)
    );
    let w = sim.world();
    let tor1 = w.nodes.iter().position(|x| x.name == "tor1").unwrap() as u32;
    let acks_up = w
        .node_ports(tor1)
        .iter()
        .filter(|p| w.nodes[p.peer_node as usize].name.starts_with('s') && p.tx_pkts > 0)
        .count();
    assert_eq!(acks_up, 1);
    // An entry naming no switch, and an entry's own refusal, name their keys.
    let mut bad = s.clone();
    bad["switch"]["lb_at"][0]["node"] = json!("h0");
    assert_eq!(error_of(&bad).0, "switch.lb_at[0].node");
    let mut bad = s.clone();
    bad["switch"]["lb_at"][0]["lb"] = json!({"kind": "flowlet", "gap": "0s"});
    assert_eq!(error_of(&bad).0, "switch.lb_at[0].lb.gap");
}

fn error_of(s: &Value) -> (String, String) {
    match Simulation::from_json(&s.to_string(), Path::new("."), None) {
        Ok(_) => panic!("accepted"),
        Err(e) => (e.path, e.message),
    }
}

#[test]
fn adaptive_routing_and_wcmp_load_the_slow_uplink_less() {
    // tor0's uplink to s3 at a quarter rate. ECMP and spraying give it a quarter of the bytes
    // whatever its rate; adaptive routing (queue depths) and WCMP (link-rate weights, 100:25)
    // give it less.
    let n = 16;
    let share = |lb: Value| {
        // (Per-packet policies reorder over the slow path and go-back-N RC then retransmits:
        // flows need not finish in the window; the shares are what is checked.)
        let (sim, r) = run(&scenario(lb.clone(), n, "1MB", "25Gbps"));
        eprintln!("{lb}: finished {}", all_finished(&r));
        let up = uplink_bytes(&sim);
        up[3] as f64 / up.iter().sum::<u64>() as f64
    };
    let rr = share(json!({"kind": "spray", "order": "round-robin"}));
    assert!((rr - 0.25).abs() < 0.01, "{rr}");
    let adaptive = share(json!({"kind": "adaptive", "samples": 0}));
    assert!(adaptive < 0.2, "adaptive {adaptive}");
    // WCMP: 16 flows hashed with weights 25/325: expected 1.2 flows of 16 on s3.
    let wcmp = share(json!({"kind": "wcmp"}));
    assert!(wcmp < 0.2, "wcmp {wcmp}");
}

#[test]
fn wcmp_weights_next_hops_by_the_capacity_of_the_paths_behind_them() {
    // s3's downlink to tor1 at a quarter rate: tor0's four uplinks are all 100G, but the paths
    // behind them carry 100, 100, 100 and 25 Gbit/s. WCMP (Zhou et al., EuroSys '14) weights
    // each next hop by its path capacity: a flow goes via s3 with probability 25/325 = 0.0769.
    // 400 one-packet flows: the share of bytes via s3 is Binomial(400, p)/400, sd 0.0133;
    // bound 4 sd. ECMP's share is 1/4 (13 sd away), as was WCMP's with local link rates.
    let share = |lb: Value| {
        let n = 8;
        let fl: Vec<(u32, u32, &str)> = (0..400).map(|i| (i % n, n + i % n, "1KB")).collect();
        let s = json!({"duration": "20ms", "topology": asymmetric_at(n, "25Gbps", "tor1"),
                       "traffic": flows(&fl), "switch": {"lb": lb}});
        let (sim, r) = run(&s);
        assert!(all_finished(&r), "{lb}");
        let up = uplink_bytes(&sim);
        up[3] as f64 / up.iter().sum::<u64>() as f64
    };
    let wcmp = share(json!({"kind": "wcmp"}));
    assert!((wcmp - 25.0 / 325.0).abs() < 4.0 * 0.0133, "wcmp {wcmp}");
    let ecmp = share(json!({"kind": "ecmp"}));
    assert!((ecmp - 0.25).abs() < 4.0 * 0.0217, "ecmp {ecmp}");
    // The spine's own choice towards tor1 has one port: nothing to weight there; an explicit
    // weight still overrides the capacity (s3 at 100 again: the even split).
    let even = share(json!({"kind": "wcmp",
        "weights": [{"node": "tor0", "peer": "s3", "weight": 100}]}));
    assert!((even - 0.25).abs() < 4.0 * 0.0217, "explicit {even}");
}

fn strs(t: &braid_sim::Table, name: &str) -> Vec<String> {
    match t.get(name) {
        Some(braid_sim::Column::Str(v)) => v.clone(),
        _ => panic!("no string column {name}"),
    }
}

#[test]
fn flows_path_says_the_truth_under_each_policy() {
    // Under a per-flow policy the table names the one path the flow's packets took (WCMP: its
    // weighted hash, not ECMP's); under a per-packet or per-flowlet policy there is no single
    // path: `multiple`, `paths` null, no single-path ideal.
    let n = 8;
    let fl: Vec<(u32, u32, &str)> = (0..64).map(|i| (i % n, n + i % n, "1KB")).collect();
    let s = |lb: Value| {
        json!({"duration": "20ms", "topology": asymmetric_at(n, "25Gbps", "tor1"),
               "traffic": flows(&fl), "switch": {"lb": lb}})
    };
    let (sim, r) = run(&s(json!({"kind": "wcmp"})));
    assert!(all_finished(&r));
    let t = &r.tables["flows"];
    let paths = strs(t, "path");
    // Every flow's path is a whole path, and the flows the table puts via s3 are exactly those
    // whose bytes crossed tor0's uplink to s3 (one 1 KB packet each: bytes / packet size).
    assert!(paths
        .iter()
        .all(|p| p.starts_with('h') && p.matches('>').count() == 4));
    let via_s3 = paths.iter().filter(|p| p.contains(">s3>")).count() as u64;
    let w = sim.world();
    let tor0 = w.nodes.iter().position(|x| x.name == "tor0").unwrap() as u32;
    let s3 = w.nodes.iter().position(|x| x.name == "s3").unwrap() as u32;
    let up: Vec<_> = w
        .node_ports(tor0)
        .iter()
        .filter(|p| w.nodes[p.peer_node as usize].name.starts_with('s'))
        .collect();
    let all: u64 = up.iter().map(|p| p.tx_pkts).sum();
    let to_s3 = up.iter().find(|p| p.peer_node == s3).unwrap().tx_pkts;
    // Every flow sends the same packets: the port's share of them is the table's share of flows.
    assert_eq!(
        to_s3 * 64,
        via_s3 * all,
        "table: {via_s3} of 64 flows via s3; port: {to_s3} of {all} packets"
    );
    assert!(
        via_s3 < 16,
        "WCMP's weights, not ECMP's quarter: {via_s3} of 64"
    );
    assert!(ints(t, "paths").iter().all(|&x| x == 1));
    assert!(ints(t, "path_ideal_fct_ps").iter().all(|&x| x > 0));
    for lb in [
        json!({"kind": "spray"}),
        json!({"kind": "adaptive"}),
        json!({"kind": "flowlet"}),
    ] {
        let mut sc = s(lb.clone());
        sc["transport"] = json!({"kind": "dcqcn", "recovery": "irn"});
        let (_, r) = run(&sc);
        let t = &r.tables["flows"];
        assert!(strs(t, "path").iter().all(|p| p == "multiple"), "{lb}");
        assert!(strs(t, "path_set").iter().all(|p| p.is_empty()), "{lb}");
        assert!(ints(t, "path_ideal_fct_ps").iter().all(|&x| x == 0), "{lb}");
    }
}

/// Spraying over selective repeat on the asymmetric fabric (PFC on: nothing is lost). IRN's
/// NACK rule takes every packet overtaken on a faster uplink as lost. RACK
/// (`transport.irn.loss_detection = "rack"`, RFC 8985) waits a reordering window; with a window
/// that covers the fabric's path-delay spread it retransmits almost nothing. The RFC's adaptive
/// window (min_RTT / 4, one step per round trip with a DSACK) is printed beside it.
#[test]
fn rack_lets_spraying_over_irn_retransmit_almost_nothing_where_nothing_was_lost() {
    let retx = |irn: Value| {
        let mut s = scenario(json!({"kind": "spray"}), 8, "1MB", "25Gbps");
        s["transport"] = json!({"kind": "dcqcn", "recovery": "irn", "irn": irn});
        let (sim, r) = run(&s);
        assert!(all_finished(&r), "{irn}: {:?}", r.counters);
        assert_eq!(sim.verify_delivery().unwrap(), 8 * 1_000_000);
        assert_eq!(r.counters["drops"], 0, "{irn}: nothing is lost");
        let sent = r.counters["data_packets"];
        let t = &r.tables["transport"];
        let col = |c: &str| match t.get(c) {
            Some(_) => numbers(t, c).iter().filter(|x| x.is_finite()).sum::<f64>(),
            None => 0.0,
        };
        eprintln!(
            "{irn}: {} retransmissions of {sent} data packets, {} timeouts, {} NAKs; DSACKs {}, final reo_wnd over QPs {:.0} ns",
            r.counters["retransmissions"],
            r.counters["timeouts"],
            r.counters["naks"],
            col("irn_dsacks"),
            col("irn_reo_wnd_ps") / 1e3 / 8.0,
        );
        (r.counters["retransmissions"], sent)
    };
    let (nack, _) = retx(json!({}));
    let (adaptive, _) = retx(json!({"loss_detection": "rack"}));
    // The sprayed packets that cross the 25G uplink wait behind its queue (PFC holds it, no
    // drop): 50-200 us later than their successors here (a 50 us window still resends 19%).
    let (rack, sent) = retx(json!({"loss_detection": "rack", "reo_wnd": "200us"}));
    assert!(
        nack * 1000 > 20 * sent,
        "IRN's rule resends reordered packets: {nack} of {sent}"
    );
    assert!(
        rack * 100 < sent,
        "RACK: {rack} of {sent} data packets resent"
    );
    // The RFC's own window is capped at SRTT, which the fast paths' samples keep near 10 us:
    // it cannot cover this spread (measured, docs/irn.md).
    eprintln!("nack {nack}, rack adaptive {adaptive}, rack 200us {rack}");
}

#[test]
fn flowlets_keep_a_busy_flow_on_one_path_and_split_it_when_the_gap_is_shorter_than_its_spacing() {
    // One 4 MB flow sends back to back: with LetFlow's 500 us gap it never idles that long, so
    // it is one flowlet on one uplink. With a 1 ns gap (shorter than a packet's 330 ns
    // serialisation) every packet starts a flowlet: a random port each, as spraying.
    let used = |lb: Value| {
        let (sim, r) = run(&scenario(lb, 1, "4MB", "100Gbps"));
        assert!(all_finished(&r));
        uplink_bytes(&sim).iter().filter(|&&b| b > 100_000).count()
    };
    assert_eq!(used(json!({"kind": "flowlet"})), 1);
    assert_eq!(used(json!({"kind": "flowlet", "gap": "1ns"})), 4);
}

fn failover_scenario(failover: Option<&str>) -> Value {
    // Eight flows over four spines; tor0's link to s0 fails at 1 ms for good.
    let n = 8;
    let fl: Vec<(u32, u32, &str)> = (0..n).map(|i| (i, n + i, "4MB")).collect();
    let mut s = json!({"duration": "30ms", "topology": asymmetric(n, "100Gbps"),
                       "traffic": flows(&fl), "nic": {"rto": "1ms"},
                       "link_events": [{"a": "tor0", "b": "s0", "down": "1ms"}]});
    if let Some(d) = failover {
        s["switch"] = json!({"failover": {"detect": d}});
    }
    s
}

#[test]
fn failover_restores_delivery_after_the_detection_delay() {
    // Without failover the flows hashed onto s0 black-hole until their QPs give up.
    let (_, r) = run(&failover_scenario(None));
    let stuck = ints(&r.tables["flows"], "fct_ps")
        .iter()
        .filter(|&&f| f < 0)
        .count();
    assert!(
        stuck > 0,
        "some flow crossed s0: {:?}",
        ints(&r.tables["flows"], "fct_ps")
    );
    // With a 2 ms detection delay every flow finishes, the rerouted ones after 1 + 2 ms.
    let (_, r) = run(&failover_scenario(Some("2ms")));
    let fct = ints(&r.tables["flows"], "fct_ps");
    assert!(fct.iter().all(|&f| f > 0), "{fct:?}");
    let late = fct.iter().filter(|&&f| f > 3_000_000_000).count();
    assert_eq!(
        late, stuck,
        "the flows that crossed s0 finish after the detection: {fct:?}"
    );
    assert_eq!(r.counters["reroutes"], 1);
    assert!(r.counters["drops_link_down"] > 0);
}

#[test]
fn a_link_back_before_detection_is_never_rerouted() {
    let mut s = failover_scenario(Some("2ms"));
    s["link_events"][0]["up"] = json!("1.5ms");
    let (_, r) = run(&s);
    assert_eq!(r.counters["reroutes"], 0);
}

#[test]
fn each_policy_is_deterministic_per_seed() {
    for lb in [
        json!({"kind": "spray"}),
        json!({"kind": "adaptive"}),
        json!({"kind": "flowlet", "gap": "5us"}),
        json!({"kind": "wcmp"}),
    ] {
        let mut s = scenario(lb.clone(), 8, "300KB", "25Gbps");
        s["seed"] = json!(3);
        let (a, ra) = run(&s);
        let (b, rb) = run(&s);
        assert_eq!(
            ints(&ra.tables["flows"], "fct_ps"),
            ints(&rb.tables["flows"], "fct_ps"),
            "{lb}"
        );
        assert_eq!(uplink_bytes(&a), uplink_bytes(&b), "{lb}");
    }
}

#[test]
fn bad_policies_are_refused_with_their_key() {
    let err = |lb: Value| {
        let s = scenario(lb, 1, "1KB", "100Gbps");
        match Simulation::from_json(&s.to_string(), Path::new("."), None) {
            Ok(_) => panic!("accepted"),
            Err(e) => (e.path, e.message),
        }
    };
    let (p, m) = err(json!({"kind": "sprey"}));
    assert_eq!(p, "switch.lb");
    assert!(m.contains("spray"), "{m}");
    let (p, _) = err(json!({"kind": "flowlet", "gap": "0s"}));
    assert_eq!(p, "switch.lb.gap");
    let (p, m) =
        err(json!({"kind": "wcmp", "weights": [{"node": "tor9", "peer": "s0", "weight": 1}]}));
    assert_eq!(p, "switch.lb.weights[0].node");
    assert!(m.contains("tor9"), "{m}");
}

/// The docs' table (docs/load-balancing.md, "Measured"): `experiments/load-balancing/
/// asymmetric.toml` under each policy, and with tor0's link to s0 failing at 1 ms, without and
/// with failover. `cargo test -p braid-sim --test load_balancing asymmetric_fabric_per_policy
/// -- --ignored --nocapture` (the checks are the shape claims the docs make).
#[test]
#[ignore]
fn asymmetric_fabric_per_policy() {
    let base = experiment("load-balancing/asymmetric.toml");
    let policies = policies();
    println!("| policy | seed | finished | last FCT (ms) | mean FCT (ms) | goodput (Gbit/s) | retransmitted pkts | bytes on the 25G uplink |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for (name, lb) in &policies {
        for seed in [1, 2] {
            let s = with_keys(
                base.clone(),
                &[("switch.lb", lb.clone()), ("seed", json!(seed))],
            );
            let row = measure(&s);
            println!("| {name} | {seed} | {} |", row.0);
            out.push((*name, seed, row.1));
        }
    }
    let fail = |f: Option<Value>| {
        let mut s = with_keys(
            base.clone(),
            &[(
                "link_events",
                json!([{"a": "tor0", "b": "s0", "down": "1ms"}]),
            )],
        );
        if let Some(f) = f {
            s = with_keys(s, &[("switch.failover", f)]);
        }
        measure(&s).0
    };
    println!(
        "| ecmp, tor0-s0 down at 1 ms, no failover | 1 | {} |",
        fail(None)
    );
    println!(
        "| ecmp, tor0-s0 down at 1 ms, failover detect 1 ms | 1 | {} |",
        fail(Some(json!({"detect": "1ms"})))
    );
    // Shape: adaptive routing loads the slow uplink less than the quarter an even split gives
    // (WCMP hashes only 8 flows: whole flows land on the slow uplink or not, by seed).
    for (name, _, share) in &out {
        if name.starts_with("adaptive") {
            assert!(*share < 0.25, "{name}: {share}");
        }
    }
}

/// One run's table cells, and its share of bytes on the slow uplink.
/// The same fabric with IRN's selective repeat (`transport.recovery = "irn"`, PFC on as in the
/// file): what spraying and adaptive routing need from the NIC (docs/load-balancing.md).
#[test]
#[ignore = "a measurement: cargo test -p braid-sim --test load_balancing asymmetric_fabric_with_irn -- --ignored --nocapture"]
fn asymmetric_fabric_with_irn() {
    // The per-packet and per-flow policies of the go-back-N table; flowlets are left out (DCQCN
    // sends each flow without gaps, so they never form: see that table). Each under IRN's NACK
    // rule, RACK with the RFC's window, and RACK with a window covering the 25G uplink's queue.
    let policies: Vec<_> = policies()
        .into_iter()
        .filter(|(name, _)| !name.starts_with("flowlet"))
        .collect();
    let detections = [
        ("nack", json!({})),
        ("rack", json!({"loss_detection": "rack"})),
        (
            "rack 200us",
            json!({"loss_detection": "rack", "reo_wnd": "200us"}),
        ),
        (
            "rack 1ms",
            json!({"loss_detection": "rack", "reo_wnd": "1ms"}),
        ),
    ];
    println!("| policy (IRN) | loss detection | seed | finished | last FCT (ms) | mean FCT (ms) | goodput (Gbit/s) | retransmitted pkts | bytes on the 25G uplink |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for (name, lb) in &policies {
        for (det, irn) in &detections {
            let base = with_keys(
                experiment("load-balancing/asymmetric.toml"),
                &[
                    ("transport.recovery", json!("irn")),
                    ("transport.irn", irn.clone()),
                ],
            );
            for seed in [1, 2] {
                let s = with_keys(
                    base.clone(),
                    &[("switch.lb", lb.clone()), ("seed", json!(seed))],
                );
                let row = measure(&s);
                println!("| {name} | {det} | {seed} | {} |", row.0);
                out.push((*name, row.0));
            }
        }
    }
    // Selective repeat takes reordering in its stride: every sprayed flow finishes.
    for (name, row) in &out {
        if name.starts_with("spray") {
            assert!(row.starts_with("8/8"), "{name}: {row}");
        }
    }
}

/// The policies the asymmetric-fabric measurements compare, by the name their tables print.
fn policies() -> Vec<(&'static str, Value)> {
    vec![
        ("ecmp", json!({"kind": "ecmp"})),
        ("spray random", json!({"kind": "spray"})),
        (
            "spray round-robin",
            json!({"kind": "spray", "order": "round-robin"}),
        ),
        ("adaptive DRILL(2,1)", json!({"kind": "adaptive"})),
        (
            "adaptive, all ports",
            json!({"kind": "adaptive", "samples": 0}),
        ),
        ("flowlet 500us", json!({"kind": "flowlet"})),
        ("flowlet 50us", json!({"kind": "flowlet", "gap": "50us"})),
        ("wcmp (rates)", json!({"kind": "wcmp"})),
    ]
}

fn measure(s: &Value) -> (String, f64) {
    let (sim, r) = run(s);
    let fct = ints(&r.tables["flows"], "fct_ps");
    let done: Vec<f64> = fct
        .iter()
        .filter(|&&f| f > 0)
        .map(|&f| f as f64 / 1e9)
        .collect();
    let last = done.iter().cloned().fold(0.0, f64::max);
    let mean = done.iter().sum::<f64>() / done.len().max(1) as f64;
    let bytes: f64 = 8e6 * done.len() as f64;
    let goodput = if last > 0.0 {
        bytes * 8.0 / (last * 1e-3) / 1e9
    } else {
        0.0
    };
    let up = uplink_bytes(&sim);
    let share = up[3] as f64 / up.iter().sum::<u64>().max(1) as f64;
    (
        format!(
            "{}/{} | {last:.2} | {mean:.2} | {goodput:.1} | {} | {:.1}%",
            done.len(),
            fct.len(),
            r.counters["retransmissions"],
            100.0 * share
        ),
        share,
    )
}
