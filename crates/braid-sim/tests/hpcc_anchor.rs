//! The HPCC ns-3 anchor (scenario 1 of ../shared/anchors): the same input files, compared with
//! HPCC ns-3's own results. Skipped where ../shared is absent (users' machines).

mod common;
use serde_json::json;
use std::path::PathBuf;

fn anchors() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/anchors/hpcc");
    d.join("topology-star-65.txt").exists().then_some(d)
}

#[test]
fn dcqcn_incast_matches_hpcc_ns3() {
    let Some(a) = anchors() else {
        eprintln!("skipped: ../shared/anchors not present");
        return;
    };
    // config-dcqcn-incast.txt, key by key (what `braid import-hpcc` produces).
    let s = json!({
        "duration": "4s",
        "topology": {"kind": "hpcc", "file": a.join("topology-star-65.txt")},
        "switch": {"buffer": "32MiB", "pfc": {"dynamic": true},
                   "ecn": {"by_rate": [{"rate": "100Gbps", "kmin": "400KB", "kmax": "1600KB", "pmax": 0.2},
                                       {"rate": "400Gbps", "kmin": "1600KB", "kmax": "6400KB", "pmax": 0.2}]}},
        "nic": {"mtu": 1000, "ack_every": 1},
        "transport": {"kind": "dcqcn", "dcqcn": {"g": 0.00390625, "alpha_timer": "1us", "rate_decrease_interval": "4us",
            "clamp_target_rate": false, "rate_timer": "300us", "fast_recovery_steps": 1, "rate_ai": "20Mbps",
            "rate_hai": "200Mbps", "min_rate": "1000Mbps", "byte_counter": "0B"}},
        "measure": {"interval": "0us", "messages": false},
        "traffic": [{"pattern": "hpcc", "file": a.join("flows-incast-2to1.txt")}],
    });
    let (_, r) = common::run(&s);
    // fct-dcqcn-incast.txt: flows from nodes 3 and 2 to node 1, FCT 33,674,253 and 34,493,270 ns,
    // standalone 16,772,160 ns.
    let theirs = [(3u64, 33_674_253_000i64), (2, 34_493_270_000)];
    let src = common::ints(&r.flows, "src");
    let fct = common::ints(&r.flows, "fct_ps");
    let ideal = common::ints(&r.flows, "ideal_fct_ps");
    for (node, want) in theirs {
        // Host index = node id - 1 (node 0 is the switch).
        let i = src
            .iter()
            .position(|&s| s as u64 == node - 1)
            .expect("flow present");
        let rel = (fct[i] - want) as f64 / want as f64;
        assert!(
            rel.abs() < 0.03,
            "node {node}: braid {} ns vs HPCC {} ns ({:+.1}%)",
            fct[i] / 1000,
            want / 1000,
            rel * 100.0
        );
        // Standalone FCT: HPCC counts 48 header bytes per 1000-byte packet, braid counts RoCEv2's 62.
        let standalone = 16_772_160_000f64 * (1062.0 / 1048.0);
        assert!(
            (ideal[i] as f64 - standalone).abs() / standalone < 0.005,
            "ideal {}",
            ideal[i]
        );
    }
}
