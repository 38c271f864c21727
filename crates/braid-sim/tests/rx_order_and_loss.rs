//! Two fabric/NIC model properties: the NIC's receive pipeline keeps one QP's packets in order
//! (a QP-cache miss delays, never reorders), and link loss drops every packet type.

mod common;
use common::*;
use serde_json::{json, Value};

/// One WRITE stream from h0 to h1 over a dumbbell, PFC on, no loss, with the receive pipeline's
/// QP cache `qp_cache` entries (0 = unlimited, no misses).
///
/// The timing is chosen so that a packet arrives exactly when a QP-cache-miss stall ends: a data
/// packet is mtu 1188 + 62 bytes of RoCEv2 framing = 1250 bytes, 100 ns at 100 Gbps, so the
/// 11th packet of a burst arrives exactly `qp_cache_miss` = 1 us after the first, whose miss
/// holds the 2nd to 10th in the pipeline until then.
fn stream(qp_cache: u32, flows_: &[(u32, u32, &str)], left: u32, right: u32) -> Value {
    json!({
        "duration": "5ms",
        "topology": dumbbell(left, right, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "switch": {"pfc": {"enabled": true}},
        "transport": {"kind": "none"},
        "nic": {"mtu": 1188, "qp_cache": qp_cache, "qp_cache_miss": "1us"},
        "traffic": flows(flows_),
    })
}

fn no_reordering_symptoms(r: &braid_sim::Results, what: &str) {
    let c = &r.counters;
    assert!(c["data_packets"] > 0, "{what}: traffic ran");
    for k in [
        "out_of_order_drops",
        "naks",
        "retransmissions",
        "timeouts",
        "drops",
    ] {
        assert_eq!(c[k], 0, "{what}: lossless means no {k}: {c:?}");
    }
}

/// A packet arriving exactly when a miss stall ends waits behind the packets the stall holds
/// (one receive pipeline, FIFO): a lossless run has no out-of-order drop, NAK or retransmission.
#[test]
fn a_receive_stall_delays_but_never_reorders_one_qps_packets() {
    let (_, r) = run(&stream(1, &[(0, 1, "200KB")], 1, 1));
    assert!(
        r.counters["qp_cache_misses"] > 0,
        "the stall happens: {:?}",
        r.counters
    );
    no_reordering_symptoms(&r, "qp_cache = 1, one QP");
    // The same run without the cache: the same packet counts (nothing sent twice).
    let (_, free) = run(&stream(0, &[(0, 1, "200KB")], 1, 1));
    assert_eq!(free.counters["qp_cache_misses"], 0);
    assert_eq!(r.counters["data_packets"], free.counters["data_packets"]);
}

/// The same over several cache sizes, message sizes and senders sharing one receiver (their
/// QPs evict each other's contexts, so stalls recur throughout the run).
#[test]
fn lossless_runs_with_the_qp_cache_on_never_go_back_n() {
    for qp_cache in [1u32, 2, 3] {
        for (senders, size) in [(1u32, "64KB"), (2, "100KB"), (4, "50KB")] {
            let fl: Vec<(u32, u32, &str)> = (0..senders).map(|i| (i, senders, size)).collect();
            let (_, r) = run(&stream(qp_cache, &fl, senders, 1));
            let what = format!("qp_cache {qp_cache}, {senders} senders x {size}");
            assert!(r.counters["qp_cache_misses"] > 0, "{what}");
            no_reordering_symptoms(&r, &what);
        }
    }
}
