//! The slowdown's denominator (the ideal FCT) describes the fabric, not the scheme: the FCT on an
//! idle fabric at min(sender link, receiver link, max-flow between the hosts) plus one path's
//! latency (crates/braid-sim/src/world/ideal.rs). Checked against hand-computed values and
//! against what single-path and multipath schemes achieve alone on idle fabrics: never beaten
//! by more than rounding, and the slowdown is not clamped.

mod common;
use common::*;
use serde_json::{json, Value};

const HDR: u64 = 62; // RoCEv2 framing per packet
const ACK: u64 = 66;

/// Serialization of `bytes` at `gbps` Gbit/s, in picoseconds (rounded up as a link does).
fn ser(bytes: u64, gbps: f64) -> u64 {
    (bytes as f64 * 8.0 * 1000.0 / gbps).ceil() as u64
}

/// Two leaves (hosts 0, 1 on leaf 0; hosts 2, 3 on leaf 1) joined by one spine per entry of
/// `uplinks` (leaf 0's rate to that spine; leaf 1's are all `uplinks[0]`), 1 µs links.
fn leaf_spine(host: &str, uplinks: &[&str]) -> Value {
    let mut nodes = vec!["h0", "h1", "h2", "h3", "leaf0", "leaf1"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut switches = vec!["leaf0".to_string(), "leaf1".to_string()];
    let mut links = vec![
        json!({"a": "h0", "b": "leaf0", "rate": host, "delay": "1us"}),
        json!({"a": "h1", "b": "leaf0", "rate": host, "delay": "1us"}),
        json!({"a": "h2", "b": "leaf1", "rate": host, "delay": "1us"}),
        json!({"a": "h3", "b": "leaf1", "rate": host, "delay": "1us"}),
    ];
    for (k, r) in uplinks.iter().enumerate() {
        let s = format!("spine{k}");
        nodes.push(s.clone());
        switches.push(s.clone());
        links.push(json!({"a": "leaf0", "b": s, "rate": r, "delay": "1us"}));
        links.push(json!({"a": s, "b": "leaf1", "rate": uplinks[0], "delay": "1us"}));
    }
    json!({"kind": "edges", "nodes": nodes, "switches": switches, "links": links})
}

fn floats(t: &braid_sim::Table, name: &str) -> Vec<f64> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::F64(v) => v.clone(),
        _ => panic!("{name} is not a float column"),
    }
}

/// One flow alone: (fct, ideal, path ideal, slowdown).
fn alone(topology: Value, transport: Value, size: &str) -> (u64, u64, u64, f64) {
    let s = json!({
        "duration": "200ms",
        "topology": topology,
        "transport": transport,
        "measure": {"interval": "0us", "messages": false},
        "traffic": [{"pattern": "flows", "flows": [{"src": 0, "dst": 2, "size": size}]}],
    });
    let (_, r) = run(&s);
    let fct = ints(&r.tables["flows"], "fct_ps")[0];
    assert!(fct > 0, "{size} under {transport}: unfinished");
    (
        fct as u64,
        ints(&r.tables["flows"], "ideal_fct_ps")[0] as u64,
        ints(&r.tables["flows"], "path_ideal_fct_ps")[0] as u64,
        floats(&r.tables["flows"], "slowdown")[0],
    )
}

#[test]
fn multipath_flow_is_measured_against_the_fabric_not_its_ecmp_path() {
    // The review's D4 (experiments/mp-rdma/pfc-some-paths.toml without its tenants): MP-RDMA,
    // 30 MB from a 40G host over four 10G spines. Max-flow 40G = the host links, so the ideal is
    // 30,000 packets of 1062 B at 40G plus one packet's latency; the single ECMP path (10G) would
    // say ~25.5 ms and the clamp made the slowdown 1.000.
    let (fct, ideal, path_ideal, sd) = alone(
        leaf_spine("40Gbps", &["10Gbps"; 4]),
        json!({"kind": "mp-rdma"}),
        "30MB",
    );
    let body = ser(29_999 * (1000 + HDR), 40.0);
    let last = 1000 + HDR;
    // The last packet on the four hops, its 10G hop's serialization counted at R = 40G.
    let latency =
        3 * ser(last, 40.0) + ser(last, 10.0) + 2 * ser(ACK, 40.0) + 2 * ser(ACK, 10.0) + 8_000_000;
    assert_eq!(ideal, body + latency, "ideal {ideal} ps");
    assert!(
        path_ideal > 25_000_000_000,
        "own path at 10G: {path_ideal} ps"
    );
    assert_eq!(
        sd,
        fct as f64 / ideal as f64,
        "slowdown is fct / ideal, unclamped"
    );
    assert!(
        (1.0..1.5).contains(&sd),
        "MP-RDMA alone at {sd} of the fabric's ideal"
    );
}

#[test]
fn software_multipath_flow_is_measured_against_the_fabric() {
    // Virtuoso over ten 1G core paths from 10G hosts (experiments/multipath/virtuoso-paths.toml):
    // the fabric's ideal is the 10G host link's, ~3.4 ms for 4 MB, not the 1G path's 34 ms.
    let s = experiment("multipath/virtuoso-paths.toml");
    let (_, r) = run(&s);
    let fct = ints(&r.tables["flows"], "fct_ps")[0] as u64;
    let ideal = ints(&r.tables["flows"], "ideal_fct_ps")[0] as u64;
    let sd = floats(&r.tables["flows"], "slowdown")[0];
    let body = ser(3_999 * (1000 + HDR), 10.0);
    assert!(
        ideal > body && ideal < body + 50_000_000,
        "ideal {ideal} ps, body {body} ps"
    );
    assert!(fct >= ideal, "fct {fct} < ideal {ideal}");
    assert_eq!(sd, fct as f64 / ideal as f64);
    assert!(sd > 1.5, "probing costs Virtuoso: slowdown {sd}");
}

#[test]
fn the_ideal_is_never_beaten_on_idle_fabrics() {
    // Every scheme, alone on an idle fabric, takes at least the ideal (rounding: the ideal
    // rounds each serialization up, at most 1 ps per packet per hop). Single path on one path:
    // exactly the ideal.
    let fabrics = [
        (
            "dumbbell 100-25-100",
            dumbbell(1, 1, link("100Gbps", "1us"), link("25Gbps", "3us")),
        ),
        (
            "leaf-spine 4 x 10G, 40G hosts",
            leaf_spine("40Gbps", &["10Gbps"; 4]),
        ),
        (
            "leaf-spine 4 x 40G, 40G hosts",
            leaf_spine("40Gbps", &["40Gbps"; 4]),
        ),
        (
            "asymmetric: one uplink at a quarter rate",
            leaf_spine("40Gbps", &["10Gbps", "10Gbps", "10Gbps", "2.5Gbps"]),
        ),
    ];
    for (name, topo) in fabrics {
        // The dumbbell's hosts are 0 (left) and 1 (right): point flow 0 -> 2 at an existing host.
        let topo = if name.starts_with("dumbbell") {
            dumbbell(1, 2, link("100Gbps", "1us"), link("25Gbps", "3us"))
        } else {
            topo
        };
        for kind in ["dcqcn", "none", "mp-rdma"] {
            for size in ["1000B", "4500B", "64KB", "2MB"] {
                let (fct, ideal, path_ideal, sd) = alone(topo.clone(), json!({"kind": kind}), size);
                let slack = 8 * (2_000_000 / 1000 + 2); // 1 ps per packet per hop
                assert!(
                    fct + slack >= ideal,
                    "{name}, {kind}, {size}: fct {fct} ps beats the ideal {ideal} ps"
                );
                assert!(ideal <= path_ideal, "{name}, {kind}, {size}");
                assert_eq!(sd, fct as f64 / ideal as f64);
                // One path, no congestion control and no queue beyond a few packets: exact.
                if name.starts_with("dumbbell") && kind == "none" && size.len() <= 5 {
                    assert_eq!(fct, ideal, "{name}, {kind}, {size}: one path, exact");
                }
            }
        }
    }
}

#[test]
fn single_path_ideal_on_a_multipath_fabric_is_below_its_own_path() {
    // Leaf-spine at 40G everywhere: a single-path flow alone meets its own path's pipeline
    // exactly, while the fabric's ideal (spread over four spines, no store-and-forward wait
    // behind its own packets) is lower: an idle single-path flow's slowdown is slightly above 1.
    // (A short last packet: with every packet full the two bounds coincide.)
    let (fct, ideal, path_ideal, sd) = alone(
        leaf_spine("40Gbps", &["40Gbps"; 4]),
        json!({"kind": "none"}),
        "64500B",
    );
    assert_eq!(fct, path_ideal);
    assert!(ideal < path_ideal);
    assert!(sd > 1.0 && sd < 1.1, "slowdown {sd}");
}
