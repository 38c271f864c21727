//! Congestion controllers chosen with `transport.cc = { kind = ... }` (`crates/braid-sim/src/cc/`):
//! the tagged table's parsing and refusals, DCQCN unchanged through it, and each controller's
//! signature behaviour on a 4-to-1 incast at 100 Gbit/s.

mod common;
use braid_sim::Simulation;
use common::*;
use serde_json::{json, Value};
use std::path::Path;

/// Four senders to one receiver through one switch at 100 Gbit/s, 1 µs links, 2 MB each; the
/// receiver's port queue sampled every µs, the controllers' state every 5 µs.
fn incast(transport: Value) -> Value {
    let mut nodes: Vec<String> = (0..5).map(|i| format!("h{i}")).collect();
    nodes.push("sw".into());
    let links: Vec<Value> = (0..5)
        .map(|i| json!({"a": format!("h{i}"), "b": "sw", "rate": "100Gbps", "delay": "1us"}))
        .collect();
    json!({
        "duration": "50ms",
        "topology": {"kind": "edges", "nodes": nodes, "switches": ["sw"], "links": links},
        "transport": transport,
        "measure": {"interval": "1us", "queues": [{"node": "sw", "peer": "h4"}], "messages": false,
                    "cc": {"qps": [0, 1, 2, 3], "interval": "5us"}},
        "traffic": flows(&[(0, 4, "2MB"), (1, 4, "2MB"), (2, 4, "2MB"), (3, 4, "2MB")]),
    })
}

fn rejected(s: &Value) -> (String, String) {
    match Simulation::from_json(&s.to_string(), Path::new("."), None) {
        Ok(_) => panic!("accepted: {}", s["transport"]),
        Err(e) => (e.path, e.message),
    }
}

/// Mean sampled queue at the receiver's port while the incast runs (bytes) and the last finish.
fn queue_and_finish(s: &Value) -> (f64, u64, i64) {
    let (_, r) = run(s);
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(fin.iter().all(|&t| t > 0), "unfinished: {fin:?}");
    let last = *fin.iter().max().unwrap();
    let q = r.tables["queues"].u64("bytes");
    let t = ints(&r.tables["queues"], "time_ps");
    let during: Vec<u64> = q
        .iter()
        .zip(&t)
        .filter(|(_, &t)| t <= last)
        .map(|(&q, _)| q)
        .collect();
    let mean = during.iter().sum::<u64>() as f64 / during.len().max(1) as f64;
    (mean, *during.iter().max().unwrap_or(&0), last)
}

/// When the receiver's link could have delivered all 8 MB (1062 wire bytes per 1000), ps.
const WORK_CONSERVING: i64 = 8_000 * 1062 * 8 * 1000 / 100;

#[test]
fn dcqcn_through_transport_cc_is_the_dcqcn_of_transport_dcqcn() {
    let keys = json!({"rate_ai": "20Mbps", "g": 0.0078125});
    let old = incast(json!({"kind": "dcqcn", "dcqcn": keys.clone()}));
    let mut cc = keys.clone();
    cc["kind"] = json!("dcqcn");
    let new = incast(json!({"kind": "rc", "cc": cc}));
    let (_, a) = run(&old);
    let (_, b) = run(&new);
    assert_eq!(
        ints(&a.tables["flows"], "finish_ps"),
        ints(&b.tables["flows"], "finish_ps")
    );
    assert_eq!(
        a.tables["queues"].u64("bytes"),
        b.tables["queues"].u64("bytes")
    );
}

#[test]
fn bad_cc_tables_name_the_key() {
    let (p, m) = rejected(&incast(json!({"cc": {"kind": "cubic"}})));
    assert!(p.starts_with("transport.cc"), "{p}: {m}");
    assert!(m.contains("cubic"), "{m}");
    let (p, m) = rejected(&incast(json!({"cc": {"kind": "timely", "beta": 1.5}})));
    assert_eq!(p, "transport.cc.beta", "{m}");
    let (p, _) = rejected(&incast(json!({"cc": {"kind": "dctcp", "gain": 0.5}})));
    assert!(p.starts_with("transport.cc"), "{p}");
    // MP-RDMA runs its own window: a controller there is refused, not ignored.
    let (p, m) = rejected(&incast(json!({"kind": "mp-rdma", "cc": {"kind": "dctcp"}})));
    assert_eq!(p, "transport.cc", "{m}");
    assert!(m.contains("kind = \"dcqcn\""), "{m}");
}

#[test]
fn dctcp_holds_the_queue_near_the_marking_threshold_at_full_throughput() {
    // DCTCP's claim (SIGCOMM'10 §3): with ECN marks cutting the window by α/2 the queue stays
    // near the marking threshold (here the switch's default RED curve from 5 KB), far below
    // what line-rate senders build and below the standing queue of the windows alone (the
    // same run with marking off: four one-BDP windows), without losing throughput.
    let (q_none, peak_none, fin_none) = queue_and_finish(&incast(json!({"kind": "none"})));
    let mut unmarked = incast(json!({"cc": {"kind": "dctcp"}}));
    unmarked["switch"] = json!({"ecn": {"enabled": false}});
    let (q_win, peak_win, _) = queue_and_finish(&unmarked);
    let (q, peak, fin) = queue_and_finish(&incast(json!({"cc": {"kind": "dctcp"}})));
    eprintln!(
        "mean/peak queue: none {q_none:.0}/{peak_none} B, windows without marks {q_win:.0}/{peak_win} B, dctcp {q:.0}/{peak} B; finish none {fin_none}, dctcp {fin} ps (work-conserving {WORK_CONSERVING})"
    );
    assert!(q < q_none / 3.0, "dctcp {q:.0} B vs none {q_none:.0} B");
    assert!(
        q < q_win / 2.0,
        "dctcp {q:.0} B vs its windows without marks {q_win:.0} B"
    );
    assert!(
        fin < WORK_CONSERVING * 12 / 10,
        "dctcp finished at {fin} ps, work-conserving {WORK_CONSERVING}"
    );
}

#[test]
fn timely_cuts_the_rate_as_the_rtt_gradient_rises() {
    // TIMELY's claim (SIGCOMM'15 §4): above T_low (50 µs) a rising RTT (a growing queue) cuts
    // the rate in proportion to the gradient; below it the rate only grows. Four line-rate
    // senders into one port: the queue passes 50 µs of delay, and from then on, between two
    // samples of one QP whose newest RTT rose by more than 0.5 µs, the rate fell (or sat at
    // min_rate).
    let mut s = incast(json!({"cc": {"kind": "timely"}}));
    s["duration"] = json!("500ms");
    let (_, r) = run(&s);
    let rate = numbers(&r.tables["cc"], "rate_bps");
    let rtt = numbers(&r.tables["cc"], "srtt_us");
    let qpn = ints(&r.tables["cc"], "qpn");
    let host = ints(&r.tables["cc"], "host");
    let mut by_qp: std::collections::BTreeMap<(i64, i64), Vec<(f64, f64)>> = Default::default();
    for i in 0..rate.len() {
        by_qp
            .entry((host[i], qpn[i]))
            .or_default()
            .push((rtt[i], rate[i]));
    }
    let (mut rising, mut fell) = (0, 0);
    for series in by_qp.values() {
        for w in series.windows(2) {
            let ((r0, x0), (r1, x1)) = (w[0], w[1]);
            if r0 > 50.0 && r1 > r0 + 0.5 {
                rising += 1;
                // At the floor (min_rate, 100 Mbit/s) it cannot fall further.
                if x1 < x0 || x1 <= 100e6 {
                    fell += 1;
                }
            }
        }
    }
    let min = rate.iter().copied().fold(f64::INFINITY, f64::min);
    let peak_rtt = rtt.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "samples {}, rising RTT above T_low {rising}, rate fell in {fell}; lowest rate {min:.3e}, peak RTT {peak_rtt:.1} us",
        rate.len()
    );
    assert!(
        rising >= 3,
        "the RTT rose above T_low between only {rising} samples"
    );
    assert!(
        fell * 10 >= rising * 8,
        "rate fell in {fell} of {rising} rising-RTT steps"
    );
    assert!(min < 50e9, "lowest sampled rate {min:.3e} bit/s");
}
