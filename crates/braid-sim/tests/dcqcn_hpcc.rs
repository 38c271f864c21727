//! HPCC ns-3's DCQCN model as settings (`transport.dcqcn.reaction = "hpcc"`, `notify = "ack"`):
//! what each changes in a run, measured, and determinism.

mod common;
use common::*;
use serde_json::{json, Value};

/// 4:1 incast of 2 MB flows onto a 100G host link; ECN at 20–200 KB, DCQCN with HPCC's anchor
/// timers (α every 1 µs, decrease check every 4 µs, increase every 300 µs, F = 1).
fn incast(reaction: &str, notify: &str, kind: &str) -> Value {
    json!({
        "duration": "5ms",
        "topology": dumbbell(4, 1, link("100Gbps", "1us"), link("400Gbps", "1us")),
        "switch": {"ecn": {"kmin": "20KB", "kmax": "200KB", "pmax": 0.2}},
        "transport": {"kind": kind, "dcqcn": {
            "alpha_timer": "1us", "rate_decrease_interval": "4us", "cnp_interval": "4us",
            "rate_timer": "300us", "fast_recovery_steps": 1, "rate_ai": "20Mbps", "rate_hai": "200Mbps",
            "min_rate": "1Gbps", "clamp_target_rate": false, "byte_counter": 0, "g": 0.00390625,
            "reaction": reaction, "notify": notify}},
        "measure": {"interval": "1us", "queues": [{"node": "swR", "peer": "h4"}], "messages": false},
        "traffic": flows(&[(0, 4, "2MB"), (1, 4, "2MB"), (2, 4, "2MB"), (3, 4, "2MB")]),
    })
}

fn peak_queue(r: &braid_sim::Results) -> u64 {
    r.tables["queues"]
        .u64("bytes")
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
}

fn fcts(r: &braid_sim::Results) -> Vec<i64> {
    ints(&r.tables["flows"], "fct_ps")
}

#[test]
fn ack_echo_replaces_cnps() {
    // notify = "ack": no CNP packet is sent, yet the marks reach the senders through their ACKs
    // and the senders slow down: the queue stays under a third of what it reaches without
    // congestion control (which also pauses the senders with PFC).
    let (_, r) = run(&incast("paper", "ack", "dcqcn"));
    let (_, cnp) = run(&incast("paper", "cnp", "dcqcn"));
    let (_, none) = run(&incast("paper", "cnp", "none"));
    assert_eq!(r.counters["cnps"], 0);
    assert!(cnp.counters["cnps"] > 0);
    assert!(r.counters["ecn_marks"] > 0);
    assert_eq!(r.counters["pfc_pauses"], 0);
    assert!(none.counters["pfc_pauses"] > 0);
    assert!(
        peak_queue(&r) * 3 < peak_queue(&none),
        "{} vs {}",
        peak_queue(&r),
        peak_queue(&none)
    );
    // The first mark's feedback arrives at the same time either way, so the peak is the same.
    assert_eq!(peak_queue(&r), peak_queue(&cnp));
}

#[test]
fn hpcc_reaction_cuts_at_the_check() {
    // reaction = "hpcc": the first notification cuts nothing; the first cut comes at the check one
    // rate_decrease_interval (4 µs) later. Meanwhile the three senders beyond the link's share keep
    // sending at 100 Gb/s: 3 × 100 Gb/s × 4 µs = 150 KB more queue at the peak than "paper", which
    // cuts on arrival.
    let (_, paper) = run(&incast("paper", "ack", "dcqcn"));
    let (_, hpcc) = run(&incast("hpcc", "ack", "dcqcn"));
    let extra = peak_queue(&hpcc) as f64 - peak_queue(&paper) as f64;
    assert!(
        (100_000.0..=250_000.0).contains(&extra),
        "peak {} vs {}",
        peak_queue(&hpcc),
        peak_queue(&paper)
    );
    assert_eq!(hpcc.counters["cnps"], 0);
    assert!(fcts(&hpcc).iter().all(|&f| f > 0));
}

#[test]
fn hpcc_model_is_deterministic() {
    let (_, a) = run(&incast("hpcc", "ack", "dcqcn"));
    let (_, b) = run(&incast("hpcc", "ack", "dcqcn"));
    assert_eq!(fcts(&a), fcts(&b));
    assert_eq!(
        a.tables["queues"].u64("bytes"),
        b.tables["queues"].u64("bytes")
    );
    assert_eq!(a.counters, b.counters);
    let (_, c) = run(&incast("hpcc", "cnp", "dcqcn"));
    assert_ne!(fcts(&a), fcts(&c));
}
