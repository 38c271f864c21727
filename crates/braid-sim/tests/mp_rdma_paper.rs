//! MP-RDMA against its paper's §3.5 rules (issue 27 §1, review `multipath.md` D2, D3, D7):
//! early retransmission only of packets suspected lost, "use it or lose it" only for the window
//! an ACK opened, and per-packet ACKs required.

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Counters of the MP-RDMA QP that sent data.
fn sender(sim: &braid_sim::Simulation) -> BTreeMap<&'static str, f64> {
    let mut out = vec![];
    for h in &sim.world().hosts {
        for q in h.nic.qps() {
            let c: BTreeMap<_, _> = q.t.counters().into_iter().collect();
            if c.get("snd_nxt").copied().unwrap_or(0.0) > 0.0 {
                out.push(c);
            }
        }
    }
    assert_eq!(out.len(), 1, "one sending QP");
    out.pop().unwrap()
}

/// Two ToRs joined by four spines (all 40G), one host on each side; `loss` on tor0–spine1.
fn fabric(loss: f64) -> Value {
    let mut links = vec![
        json!({"a": "h0", "b": "tor0", "rate": "40Gbps", "delay": "1us"}),
        json!({"a": "h1", "b": "tor1", "rate": "40Gbps", "delay": "1us"}),
    ];
    for s in 0..4 {
        let l = if s == 1 { loss } else { 0.0 };
        links.push(json!({"a": "tor0", "b": format!("spine{s}"), "rate": "40Gbps", "delay": "1us", "loss": l}));
        links
            .push(json!({"a": format!("spine{s}"), "b": "tor1", "rate": "40Gbps", "delay": "1us"}));
    }
    json!({"kind": "edges", "nodes": ["h0", "h1", "tor0", "tor1", "spine0", "spine1", "spine2", "spine3"],
           "switches": ["tor0", "tor1", "spine0", "spine1", "spine2", "spine3"], "links": links})
}

fn lone_flow(size: &str, loss: f64, mp: Value) -> Value {
    json!({
        "duration": "20ms",
        "topology": fabric(loss),
        "transport": {"kind": "mp-rdma", "mp_rdma": mp},
        "nic": {"data_check": true, "rto": "4ms"},
        // ACKs (tor1 → h0) return over a loss-free spine: only data is lost.
        "routes": [{"node": "tor1", "dst": [0], "next_hops": ["spine0"]}],
        "traffic": flows(&[(0, 1, size)]),
    })
}

/// D2: with no loss, no packet is suspected lost, so none is sent twice: a lone flow sends
/// exactly ceil(size / MTU) data packets (MTU 1000 B). Today's main sends 8 / 40 / 141.
#[test]
fn a_lone_flow_on_an_idle_lossless_fabric_sends_each_packet_once() {
    for (size, pkts) in [("4KB", 4u64), ("20KB", 20), ("100KB", 100)] {
        let (sim, r) = run(&lone_flow(size, 0.0, json!({})));
        assert!(
            ints(&r.tables["flows"], "fct_ps")[0] > 0,
            "{size}: finished"
        );
        let k = &r.counters;
        assert_eq!(k["data_packets"], pkts, "{size}: {k:?}");
        assert_eq!(k["retransmissions"], 0, "{size}");
        assert_eq!(k["mp_rdma_early_retx"], 0, "{size}");
        let c = sender(&sim);
        assert_eq!(c["sent_early"], 0.0, "{size}: {c:?}");
    }
}

/// Packets lost on one of four paths are still recovered by early retransmission (on the paths
/// whose ACKs came back), long before the RTO: the loss suspicion delays it by about an RTT
/// estimate, not by a timeout. A protection test: with `early_retx = false` the flow waits for
/// the RTO (checked here too).
#[test]
fn losses_on_one_path_are_recovered_early_well_before_the_rto() {
    let rto_ps = 4_000_000_000u64;
    for size in ["10KB", "20KB", "40KB"] {
        let (sim, r) = run(&lone_flow(size, 1.0, json!({})));
        eprintln!("{size}: {:?}", r.counters);
        let fct = ints(&r.tables["flows"], "fct_ps")[0] as u64;
        let k = &r.counters;
        assert!(fct > 0, "{size}: finished {k:?}");
        assert!(
            k["drops"] > 0,
            "{size}: the lossy path was used (seeded VP choice): {k:?}"
        );
        assert_eq!(k["timeouts"], 0, "{size}: {k:?}");
        assert!(k["mp_rdma_early_retx"] >= 1, "{size}: {k:?}");
        assert!(
            fct < rto_ps / 20,
            "{size}: fct {} us, RTO 4 ms",
            fct as f64 / 1e6
        );
        // Every early retransmission answered a loss or a packet still on its way: no more of
        // them than the packets lost plus one per packet.
        let c = sender(&sim);
        assert!(
            c["sent_early"] <= k["drops"] as f64 * 2.0,
            "{size}: {c:?} {k:?}"
        );
        // Without early retransmission only the RTO recovers the tail.
        let (_, r) = run(&lone_flow(size, 1.0, json!({"early_retx": false})));
        let slow = ints(&r.tables["flows"], "fct_ps")[0] as u64;
        assert!(
            slow > rto_ps,
            "{size}: without early retransmission {} us",
            slow as f64 / 1e6
        );
    }
}

/// D3: "use it or lose it" (§3.5) takes back the window an ACK opened when it finds no data;
/// the unused part of the initial window is not an ACK's. One small message at a time (write_bw,
/// tx_depth 1) never fills the window, so it keeps it; today's main ends at cwnd 1.
#[test]
fn small_messages_one_at_a_time_keep_their_window() {
    let s = json!({
        "duration": "2ms",
        "topology": fabric(0.0),
        "transport": {"kind": "mp-rdma", "mp_rdma": {"iw": 16}},
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "4KB", "tx_depth": 1, "iterations": 200}],
    });
    let (sim, r) = run(&s);
    let c = sender(&sim);
    assert_eq!(r.counters["retransmissions"], 0, "{c:?}");
    assert!(c["acks"] >= 800.0, "{c:?}");
    assert!(c["cwnd"] >= 16.0, "window kept: {c:?}");
    assert_eq!(c["window_reductions"], 0.0, "{c:?}");
}

/// A lone 4 KB flow: at most one reduction per ACK (today's main: 60 reductions, 8 ACKs); a
/// window-limited flow (IW 4 packets, 100 KB) that runs out of data gives back what its last
/// ACKs opened.
#[test]
fn window_reductions_never_exceed_the_acks_that_found_no_data() {
    let (sim, _) = run(&lone_flow("4KB", 0.0, json!({})));
    let c = sender(&sim);
    assert!(c["window_reductions"] <= c["acks"], "{c:?}");
    let (sim, _) = run(&lone_flow("100KB", 0.0, json!({"iw": 4})));
    let c = sender(&sim);
    assert!(
        c["window_reductions"] >= 1.0 && c["window_reductions"] <= c["acks"],
        "{c:?}"
    );
}

/// D7: MP-RDMA needs an ACK per packet; `nic.ack_every` > 1 is refused, naming the key.
#[test]
fn ack_coalescing_is_refused_under_mp_rdma() {
    let e = |s: Value| {
        braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
            .err()
            .expect("rejected")
    };
    let mut s = lone_flow("4KB", 0.0, json!({}));
    s["nic"]["ack_every"] = json!(4);
    let err = e(s.clone());
    assert_eq!(err.path, "nic.ack_every", "{err:?}");
    assert!(err.message.contains("mp-rdma"), "{err:?}");
    // Also when only one host's connections run MP-RDMA.
    s["transport"] = json!({"kind": "dcqcn", "per_host": {"0": {"kind": "mp-rdma"}}});
    let err = e(s.clone());
    assert_eq!(err.path, "nic.ack_every", "{err:?}");
    // RC may coalesce.
    s["transport"] = json!({"kind": "dcqcn"});
    build(&s);
}
