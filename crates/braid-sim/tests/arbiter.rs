//! The NIC's arbitration policies between QPs (`nic.arbiter`): round robin, strict priority and
//! ETS, the hardware baselines of PeRF (slides, "Baseline Benchmark": SP favours D_App, ETS gives
//! B_App : M_App = 16 : 1).

mod common;
use common::*;
use serde_json::{json, Value};

/// Serialization of `bytes` at `gbps`, in picoseconds (rounded up as a link does).
fn ser(bytes: u64, gbps: u64) -> u64 {
    (bytes * 8 * 1000).div_ceil(gbps)
}

/// One 100G host pair (dumbbell, 1 µs links): a 16 B write_lat on class 1 (D_App), and, if
/// `with_b`, a 1 MB write_bw on class 3 (B_App) from the same host.
fn d_beside_b(nic: Value, with_b: bool) -> Vec<u64> {
    let mut apps = vec![
        json!({"kind": "write_lat", "src": 0, "dst": 1, "size": "16B",
                               "duration": "1ms", "priority": 1, "start": "20us"}),
    ];
    if with_b {
        apps.push(
            json!({"kind": "write_bw", "src": 0, "dst": 1, "size": "1MB", "tx_depth": 4,
                         "duration": "1.2ms", "priority": 3}),
        );
    }
    let s = json!({
        "duration": "2ms",
        "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "switch": {"lossless": [1, 3]},
        "nic": nic,
        "measure": {"interval": "0us", "messages": false},
        "apps": apps,
    });
    let (sim, _) = run(&s);
    let f = sim
        .flows()
        .into_iter()
        .find(|f| f.kind == "write_lat")
        .expect("the write_lat flow");
    assert!(f.latencies.len() > 50, "{} samples", f.latencies.len());
    f.latencies
}

fn max(v: &[u64]) -> u64 {
    *v.iter().max().unwrap()
}

#[test]
fn strict_priority_keeps_a_latency_tenant_within_one_mtu_of_alone() {
    // SP with a deep read-ahead (64 KB turns): the high class preempts the bandwidth tenant's
    // turn at the next packet boundary.
    let nic = json!({"arbiter": "sp", "tx_prefetch": "64KB"});
    let alone = d_beside_b(nic.clone(), false);
    let beside = d_beside_b(nic, true);
    // The ping waits for at most the one MTU packet of B_App on the wire when it is posted; that
    // packet stays ahead of it through the two store-and-forward switches (each forwards the
    // ping once the whole packet ahead has left: the same serialization again, less the ping's
    // own), and the responder's NIC may send an ACK of B_App ahead of the pong (control first).
    let mtu_frame = ser(1000 + 62, 100);
    let bound = max(&alone) + 3 * mtu_frame + 2 * ser(66, 100);
    eprintln!(
        "SP: worst {} ps beside B_App, {} ps alone; RR with 64 KB turns below",
        max(&beside),
        max(&alone)
    );
    assert!(
        max(&beside) <= bound,
        "SP: worst {} ps beside B_App vs {} ps alone (bound {bound})",
        max(&beside),
        max(&alone)
    );
    // The same read-ahead under round robin makes the latency tenant wait for B_App's turns.
    let rr = d_beside_b(json!({"arbiter": "rr", "tx_prefetch": "64KB"}), true);
    eprintln!("RR, 64 KB turns: worst {} ps", max(&rr));
    assert!(
        max(&rr) > max(&alone) + ser(32_000, 100),
        "RR with 64 KB turns: worst {} ps vs {} ps alone",
        max(&rr),
        max(&alone)
    );
}

#[test]
fn ets_keeps_a_latency_class_within_one_bulk_quantum() {
    // ETS with B_App's class weighted 16 (PeRF's "B_App : M_App = 16 : 1") and a 64 KB
    // read-ahead: the bulk class's turn is its quantum, one frame (the heaviest class's grain),
    // not the read-ahead's 16 packets, so the ping waits as under SP: at most one frame on the
    // wire ahead of it, again at each of the two store-and-forward switches, and an ACK of
    // B_App at the responder (the bound of the SP test above).
    let nic = json!({"arbiter": "ets", "ets_weights": [1, 1, 1, 16], "tx_prefetch": "64KB"});
    let alone = d_beside_b(nic.clone(), false);
    let beside = d_beside_b(nic, true);
    let mtu_frame = ser(1000 + 62, 100);
    let bound = max(&alone) + 3 * mtu_frame + 2 * ser(66, 100);
    eprintln!(
        "ETS 16:1, 64 KB read-ahead: worst {} ps beside B_App, {} ps alone (bound {bound})",
        max(&beside),
        max(&alone)
    );
    assert!(
        max(&beside) <= bound,
        "ETS: worst {} ps beside B_App vs {} ps alone (bound {bound})",
        max(&beside),
        max(&alone)
    );
}

/// Two saturating write_bw tenants of classes 1 and 2 from one host: their goodput (Gbit/s) while
/// both run (0.2–1.8 ms).
fn two_bw(nic: Value) -> (f64, f64) {
    let s = json!({
        "duration": "3ms",
        "topology": dumbbell(1, 2, link("100Gbps", "1us"), link("400Gbps", "1us")),
        "switch": {"lossless": [1, 2]},
        "nic": nic,
        "measure": {"interval": "100us", "messages": false},
        "apps": [
            {"kind": "write_bw", "src": 0, "dst": 1, "size": "64KB", "tx_depth": 16, "duration": "2ms", "priority": 1},
            {"kind": "write_bw", "src": 0, "dst": 2, "size": "64KB", "tx_depth": 16, "duration": "2ms", "priority": 2},
        ],
    });
    let (_, r) = run(&s);
    let g = mean_gbps(&r, 2, 200_000_000, 1_800_000_000);
    (g[0], g[1])
}

#[test]
fn ets_shares_the_nic_by_weight_under_saturation() {
    // PeRF's ETS baseline: B_App : M_App = 16 : 1 (class 1 : class 2).
    let (a, b) = two_bw(json!({"arbiter": "ets", "ets_weights": [1, 16, 1]}));
    let ratio = a / b;
    eprintln!("ETS [1, 16, 1]: class 1 {a:.2} Gbps, class 2 {b:.2} Gbps, ratio {ratio:.2}");
    // DRR's shares: 16/17 and 1/17 of what they send together, each within 2%.
    for (got, want) in [(a, 16.0 / 17.0), (b, 1.0 / 17.0)] {
        let share = got / (a + b);
        assert!(
            (share - want).abs() / want < 0.02,
            "share {share}, want {want}"
        );
    }
    assert!(
        (ratio - 16.0).abs() / 16.0 < 0.05,
        "ETS 16:1: {a:.2} vs {b:.2} Gbps (ratio {ratio:.2})"
    );
    // Work-conserving: together they fill the link (100G × 1000/1062).
    let line = 100.0 * 1000.0 / 1062.0;
    assert!((a + b) > 0.99 * line, "{a} + {b} Gbps");
    // Equal weights: equal shares; round robin (one class): equal shares too.
    for nic in [json!({"arbiter": "ets"}), json!({"arbiter": "rr"})] {
        let (a, b) = two_bw(nic.clone());
        assert!((a / b - 1.0).abs() < 0.05, "{nic}: {a} vs {b}");
    }
    // Strict priority: class 1 takes (nearly) everything.
    let (a, b) = two_bw(json!({"arbiter": "sp"}));
    assert!(b < 0.02 * a, "SP: {a} vs {b}");
}

#[test]
fn arbiter_keys_are_checked() {
    let base = |nic: Value| {
        json!({"duration": "1ms", "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
               "nic": nic})
    };
    let e = braid_sim::Simulation::from_json(
        &base(json!({"arbiter": "wfq"})).to_string(),
        std::path::Path::new("."),
        None,
    )
    .err()
    .expect("unknown policy rejected");
    assert!(e.to_string().contains("nic.arbiter"), "{e}");
    let e = braid_sim::Simulation::from_json(
        &base(json!({"ets_weights": [16, 0]})).to_string(),
        std::path::Path::new("."),
        None,
    )
    .err()
    .expect("zero weight rejected");
    assert!(e.to_string().contains("nic.ets_weights[1]"), "{e}");
}
