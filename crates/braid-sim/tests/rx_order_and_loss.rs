//! Two fabric/NIC model properties: the NIC's receive pipeline keeps one QP's packets in order
//! (a QP-cache miss delays, never reorders), and link loss drops every packet type.

mod common;
use common::*;
use serde_json::{json, Value};

/// WRITE flows `flows_` over a dumbbell of `left` + `right` hosts (100G everywhere), PFC on, no
/// loss, DCQCN off, with a QP cache of `qp_cache` entries (0 = unlimited, no misses).
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

// ------------------------------------------------------------------ link loss

/// Every flow and application of the run completed.
fn all_finished(r: &braid_sim::Results, what: &str) {
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(
        fin.iter().all(|&t| t > 0),
        "{what}: every flow finishes: {fin:?} {:?}",
        r.counters
    );
}

const P: f64 = 0.05;

/// Three hosts left, two right of a dumbbell whose bottleneck loses `P` of the frames in each
/// direction (host links are clean, so every packet crosses exactly one lossy hop): h0 and h1
/// WRITE to h3 (DCQCN; two 40G senders into one 40G link mark ECN, so h3 sends CNPs), and h4
/// READs from h2 (READ requests one way, responses the other). Go-back-N RC over it all.
fn lossy_mix(seed: u64) -> Value {
    json!({
        "seed": seed,
        "duration": "200ms",
        "topology": dumbbell(3, 2, link("40Gbps", "1us"),
                             json!({"rate": "40Gbps", "delay": "1us", "loss": P})),
        "nic": {"rto": "100us", "data_check": true},
        // A CNP for (nearly) every marked packet, so that there are hundreds to lose.
        "transport": {"kind": "dcqcn", "dcqcn": {"cnp_interval": "1us"}},
        "traffic": flows(&[(0, 3, "1MB"), (1, 3, "1MB")]),
        "apps": [{"kind": "read_bw", "src": 4, "dst": 2, "size": "2KB", "tx_depth": 4,
                  "iterations": 600}],
    })
}

/// Every class is lost at the link's rate: the count lost is Binomial(n, p) for the n frames of
/// that class the NICs put on the wire (each crossed the bottleneck once), so it lies within
/// 4.5 standard deviations of n·p (deterministic seeds; 4.5σ is a 1-in-150,000 two-sided event
/// per check for an honest model). A model that spares a class loses none of it.
#[test]
fn link_loss_drops_every_packet_class_at_the_link_rate() {
    for seed in [1u64, 2] {
        let (sim, r) = run(&lossy_mix(seed));
        let c = &r.counters;
        let st = |h: usize| &sim.world().hosts[h].nic.stats;
        let sum = |f: &dyn Fn(&braid_sim::nic::NicStats) -> u64| -> u64 {
            (0..5).map(|h| f(st(h))).sum()
        };
        assert_eq!(c["drops_buffer"], 0, "PFC: the only drops are link loss");
        all_finished(&r, &format!("seed {seed}"));
        // Frames put on the wire per class (a requester's `data_pkts` are its READ requests, a
        // responder's its READ responses).
        let sent = [
            ("data", st(0).data_pkts + st(1).data_pkts),
            ("read_req", st(4).data_pkts),
            ("read_resp", st(2).data_pkts),
            ("ack", sum(&|s| s.acks)),
            ("nak", sum(&|s| s.naks)),
            ("cnp", sum(&|s| s.cnps_sent)),
        ];
        let mut total = 0;
        for (class, n) in sent {
            let lost = c[&format!("drops_loss_{class}")];
            total += lost;
            let mean = n as f64 * P;
            let sd = (n as f64 * P * (1.0 - P)).sqrt();
            eprintln!("seed {seed}: {class}: {lost} of {n} lost (expected {mean:.1} ± {sd:.1})");
            assert!(
                (lost as f64 - mean).abs() <= 4.5 * sd + 1.0,
                "seed {seed}: {class}: {lost} of {n} lost, expected {mean:.1} ± {:.1}",
                4.5 * sd
            );
            assert!(
                mean < 10.0 || lost > 0,
                "seed {seed}: {class} never lost ({n} sent)"
            );
        }
        assert_eq!(c["drops_loss_rnr_nak"], 0, "no RNR: WRITEs and READs only");
        assert_eq!(
            total, c["drops_loss"],
            "the classes sum to the total: {c:?}"
        );
        assert!(
            c["naks"] >= 20 && c["cnps"] >= 20,
            "the mix exercises NAKs and CNPs: {c:?}"
        );
    }
}

/// Lost ACKs and NAKs only delay go-back-N: the retransmission timer resends, every flow
/// completes with every byte in place (`run` checks placement with `data_check`).
#[test]
fn go_back_n_completes_when_acks_and_naks_are_lost() {
    let s = json!({
        "duration": "200ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"),
                             json!({"rate": "40Gbps", "delay": "1us", "loss": 0.1})),
        "nic": {"rto": "100us", "data_check": true},
        "traffic": flows(&[(0, 1, "500KB"), (1, 0, "300KB")]),
        "apps": [{"kind": "send_bw", "src": 0, "dst": 1, "size": "8KB", "tx_depth": 2, "iterations": 50},
                 {"kind": "read_bw", "src": 1, "dst": 0, "size": "8KB", "tx_depth": 2, "iterations": 50}],
    });
    let (sim, r) = run(&s);
    let c = &r.counters;
    all_finished(&r, "10% loss");
    assert_eq!(ints(&r.tables["flows"], "finish_ps").len(), 4);
    assert_eq!(
        sim.verify_delivery().unwrap(),
        500_000 + 300_000,
        "the flows' bytes, in place"
    );
    for k in [
        "drops_loss_ack",
        "drops_loss_nak",
        "drops_loss_read_req",
        "timeouts",
    ] {
        assert!(c[k] > 0, "{k}: {c:?}");
    }
}

/// The same scenario and seed lose the same frames; another seed others.
#[test]
fn link_loss_of_every_class_is_deterministic_per_seed() {
    let counters = |seed: u64| {
        let mut sim = build(&lossy_mix(seed));
        sim.run();
        sim.results().counters
    };
    let a = counters(3);
    assert_eq!(a, counters(3));
    assert!(a["drops_loss_ack"] > 0 && a["drops_loss_data"] > 0);
    assert_ne!(a, counters(4));
}

/// MP-RDMA over lossy paths: its ACKs and NACKs are lost too, and every transfer still
/// completes with its bytes in place. (WRITEs; READs over lossy paths: `mp_rdma_read_loss.rs`.)
#[test]
fn mp_rdma_completes_when_its_acks_and_nacks_are_lost() {
    for seed in 1..=3 {
        let s = json!({
            "seed": seed,
            "duration": "200ms",
            "topology": {"kind": "two-tor", "hosts_per_tor": 2, "paths": 4,
                         "host_link": link("40Gbps", "1us"),
                         "fabric_link": {"rate": "10Gbps", "delay": "1us", "loss": 0.05}},
            "nic": {"rto": "200us", "data_check": true},
            "transport": {"kind": "mp-rdma"},
            "traffic": flows(&[(0, 2, "2MB"), (3, 1, "1MB"), (1, 3, "1MB")]),
        });
        let (_, r) = run(&s);
        let c = &r.counters;
        all_finished(&r, &format!("MP-RDMA, 5% loss, seed {seed}"));
        for k in ["drops_loss_data", "drops_loss_ack", "drops_loss_nak"] {
            assert!(c[k] > 0, "seed {seed}: {k}: {c:?}");
        }
    }
}
