//! Software multipath measured as one flow: the QPs a layer (partition, Virtuoso) adds for an
//! application's QP count for that application's flow in the goodput series and the delivery
//! check, and the schemes of `braid reproduce multipath/compare` keep their shapes on the
//! two-ToR testbed.

mod common;

use common::*;
use serde_json::{json, Value};

fn two_tor(middleware: Value, transport: &str, flows: Value, duration: &str) -> Value {
    json!({
        "duration": duration,
        "topology": {"kind": "two-tor", "hosts_per_tor": 5, "paths": 4,
                     "host_link": link("40Gbps", "1us"), "fabric_link": link("40Gbps", "1us")},
        "transport": {"kind": transport},
        "switch": {"ecn": {"kmin": "20KB", "kmax": "20KB", "pmax": 1.0}},
        "nic": {"data_check": true},
        "middleware": {"default": middleware},
        "traffic": [flows],
    })
}

fn total_bytes(r: &braid_sim::Results, nflows: usize) -> Vec<u64> {
    let f = r.tables["throughput"].u64("flow");
    let b = r.tables["throughput"].u64("bytes");
    let mut out = vec![0u64; nflows];
    for i in 0..f.len() {
        out[f[i] as usize] += b[i];
    }
    out
}

#[test]
fn a_partitioned_flow_is_measured_over_all_its_qps() {
    let flows = json!({"pattern": "flows", "flows": [
        {"src": 0, "dst": 5, "size": "2MB", "start": "0us"},
        {"src": 1, "dst": 6, "size": "3MB", "start": "0us"},
    ]});
    let mw = json!([{"kind": "partition", "qps": 4, "assign": "dynamic"}]);
    // `run` checks that every flow's receiver accepted its bytes over its QPs, in place.
    let (_, r) = run(&two_tor(mw, "dcqcn", flows, "5ms"));
    // The goodput series has every byte (not only the application QP's quarter).
    assert_eq!(total_bytes(&r, 2), vec![2_000_000, 3_000_000]);
    assert_eq!(
        ints(&r.tables["flows"], "finish_ps")
            .iter()
            .filter(|&&t| t > 0)
            .count(),
        2
    );
}

#[test]
fn a_virtuoso_flow_is_measured_over_all_its_paths() {
    let flows = json!({"pattern": "flows", "flows": [
        {"src": 0, "dst": 5, "size": "4MB", "start": "0us"},
    ]});
    let mut s = two_tor(
        json!([{"kind": "virtuoso", "paths": 4}]),
        "dcqcn",
        flows,
        "5ms",
    );
    s["nic"]["addresses"] = json!(4);
    let (_, r) = run(&s);
    // The paths carry the flow and the layer's 512 KiB probes (one per path, once).
    let got = total_bytes(&r, 1)[0];
    assert!(
        (4_000_000..=4_000_000 + 4 * 524_288).contains(&got),
        "{got}"
    );
}

fn permutation_goodput(s: &Value) -> f64 {
    let mut sim = build(s);
    sim.run();
    let r = sim.results();
    let ms = 1_000_000_000u64;
    mean_gbps(&r, 5, 5 * ms, 12 * ms).iter().sum()
}

/// The comparison's one claimed shape, on the testbed the MP-RDMA paper used: every multipath
/// scheme beats single-path DCQCN (whose 5 flows collide on 4 spines) in total goodput. Seed 3
/// hashes three flows onto one spine (DCQCN 70 Gbps of ~150).
#[test]
fn on_the_two_tor_testbed_every_multipath_scheme_beats_single_path_dcqcn() {
    let perm = json!({"pattern": "permutation", "cross": true, "size": "1GB"});
    let base = |mw: Value, t: &str| {
        let mut s = two_tor(mw, t, perm.clone(), "12ms");
        s["seed"] = json!(3);
        s["nic"] = json!({"qp_cache": 256, "addresses": 4});
        s
    };
    let dcqcn = permutation_goodput(&base(json!(["raw"]), "dcqcn"));
    let part = permutation_goodput(&base(json!([{"kind": "partition", "qps": 4}]), "dcqcn"));
    let virt = permutation_goodput(&base(json!([{"kind": "virtuoso", "paths": 4}]), "dcqcn"));
    let mp = permutation_goodput(&base(json!(["raw"]), "mp-rdma"));
    eprintln!("DCQCN {dcqcn:.1}, partition-4 {part:.1}, Virtuoso {virt:.1}, MP-RDMA {mp:.1} Gbps");
    for (name, g) in [("partition", part), ("Virtuoso", virt), ("MP-RDMA", mp)] {
        assert!(g > 1.2 * dcqcn, "{name} {g:.1} vs DCQCN {dcqcn:.1} Gbps");
    }
}
