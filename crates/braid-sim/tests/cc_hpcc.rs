//! HPCC (`transport.cc = { kind = "hpcc" }`, `crates/braid-sim/src/cc/hpcc.rs`) with in-band
//! telemetry stamped at switch egress (`net/int.rs`): its signature behaviour on an incast, its
//! state in `measure.cc`, and its refusals.

mod common;
use braid_sim::Simulation;
use common::*;
use serde_json::{json, Value};
use std::path::Path;

/// `n` senders to one receiver through two switches (sender-side and receiver-side, so each
/// data packet crosses two stamping hops) at 100 Gbit/s, 1 µs links, `size` each; the
/// receiver's port queue sampled every µs, the controllers every 5 µs.
fn incast(n: u32, size: &str, transport: Value) -> Value {
    let mut nodes: Vec<String> = (0..=n).map(|i| format!("h{i}")).collect();
    nodes.push("s0".into());
    nodes.push("s1".into());
    let mut links: Vec<Value> = (0..n)
        .map(|i| json!({"a": format!("h{i}"), "b": "s0", "rate": "100Gbps", "delay": "1us"}))
        .collect();
    // The fabric link is faster than the senders' total, so the receiver's port is the bottleneck.
    links.push(json!({"a": "s0", "b": "s1", "rate": "400Gbps", "delay": "1us"}));
    links.push(json!({"a": format!("h{n}"), "b": "s1", "rate": "100Gbps", "delay": "1us"}));
    let list: Vec<(u32, u32, &str)> = (0..n).map(|i| (i, n, size)).collect();
    json!({
        "duration": "50ms",
        "topology": {"kind": "edges", "nodes": nodes, "switches": ["s0", "s1"], "links": links},
        "transport": transport,
        "measure": {"interval": "1us", "queues": [{"node": "s1", "peer": format!("h{n}")}],
                    "messages": false, "cc": {"qps": (0..n).collect::<Vec<_>>(), "interval": "5us"}},
        "traffic": flows(&list),
    })
}

/// (mean, p99) of the receiver's port queue while the incast runs (bytes), the last finish (ps).
fn queue(s: &Value) -> (f64, f64, i64, braid_sim::Results) {
    let (_, r) = run(s);
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(fin.iter().all(|&t| t > 0), "unfinished: {fin:?}");
    let last = *fin.iter().max().unwrap();
    let q = r.tables["queues"].u64("bytes");
    let t = ints(&r.tables["queues"], "time_ps");
    let mut during: Vec<u64> = q
        .iter()
        .zip(&t)
        .filter(|(_, &t)| t <= last)
        .map(|(&q, _)| q)
        .collect();
    let mean = during.iter().sum::<u64>() as f64 / during.len().max(1) as f64;
    during.sort_unstable();
    let p99 = during[(during.len() * 99 / 100).min(during.len() - 1)] as f64;
    (mean, p99, last, r)
}

#[test]
fn hpcc_holds_a_near_zero_queue_at_high_utilisation_where_dcqcn_builds_one() {
    // HPCC's claim (SIGCOMM'19 §1, §5.2): with INT the senders react to the queue and the link's
    // load before the queue builds, keeping "near-zero" queues at η = 95% utilisation, where
    // DCQCN (ECN after the queue passes Kmin, then timers) holds a standing queue.
    // 8 senders × 1 MB into one 100G port: 8 MB at line rate (1062 wire bytes per 1000).
    let work_conserving = 8_000 * 1062 * 8 * 1000 / 100;
    let (q_d, p99_d, fin_d, _) = queue(&incast(8, "1MB", json!({"kind": "dcqcn"})));
    let (q_h, p99_h, fin_h, r) = queue(&incast(8, "1MB", json!({"cc": {"kind": "hpcc"}})));
    eprintln!(
        "receiver port queue mean/p99: dcqcn {q_d:.0}/{p99_d:.0} B, hpcc {q_h:.0}/{p99_h:.0} B; \
         finish dcqcn {fin_d} ps, hpcc {fin_h} ps (work-conserving {work_conserving} ps)"
    );
    assert!(
        q_h * 5.0 < q_d,
        "mean queue: hpcc {q_h:.0} B vs dcqcn {q_d:.0} B"
    );
    // HPCC's p99 is its first round trip: eight senders start at line rate with one BDP each.
    assert!(
        p99_h * 2.0 < p99_d,
        "p99 queue: hpcc {p99_h:.0} B vs dcqcn {p99_d:.0} B"
    );
    // High utilisation while all eight run (from 50 µs, past the first round trips' burst, to
    // the first finish): the senders' summed pacing rate, W/T each, against the line rate, and
    // U near η. (The whole incast ends later than work-conserving: flows converge to fairness
    // only through W_AI, so they finish between 0.45 and 1.0 ms and the last ones ramp up alone.)
    let fins = ints(&r.tables["flows"], "finish_ps");
    let first = *fins.iter().min().unwrap();
    let cc = &r.tables["cc"];
    let kind = match cc.get("kind") {
        Some(braid_sim::Column::Str(v)) => v.clone(),
        _ => panic!("no kind column"),
    };
    assert!(kind.iter().all(|k| k == "hpcc"), "{kind:?}");
    let (t, rate, u, w) = (
        ints(cc, "time_ps"),
        numbers(cc, "rate_bps"),
        numbers(cc, "utilization"),
        numbers(cc, "cwnd"),
    );
    let mut sum: std::collections::BTreeMap<i64, f64> = Default::default();
    let mut us = vec![];
    for i in 0..t.len() {
        if t[i] >= 50_000_000 && t[i] < first {
            *sum.entry(t[i]).or_default() += rate[i];
            us.push(u[i]);
            assert!(w[i].is_finite() && w[i] > 0.0, "W {}", w[i]);
        }
    }
    let util = sum.values().sum::<f64>() / sum.len() as f64 / 100e9;
    let mean_u = us.iter().sum::<f64>() / us.len() as f64;
    eprintln!(
        "finish per flow {fins:?} ps; while all ran (50 us to {first} ps): summed rate {util:.3} of the line, mean U {mean_u:.3} ({} samples)",
        us.len()
    );
    assert!(util > 0.85, "summed rate {util:.3} of the line");
    assert!(
        fin_h < work_conserving * 16 / 10,
        "hpcc finished at {fin_h} ps"
    );
    assert!((0.8..1.2).contains(&mean_u), "mean U {mean_u}");
}

#[test]
fn dcqcn_is_the_same_with_an_hpcc_tenant_elsewhere_turning_int_on() {
    // INT is stamped only in runs with an HPCC QP; its records never change another
    // controller's decisions: DCQCN's flows finish at the same times with INT on.
    let base = incast(4, "500KB", json!({"kind": "dcqcn"}));
    let mut with_int = base.clone();
    // A fifth host's idle HPCC override turns INT on for the run.
    with_int["transport"]["per_host"] = json!({"4": {"cc": {"kind": "hpcc"}}});
    let (_, a) = run(&base);
    let (_, b) = run(&with_int);
    assert_eq!(
        ints(&a.tables["flows"], "finish_ps"),
        ints(&b.tables["flows"], "finish_ps")
    );
}

#[test]
fn bad_hpcc_tables_name_the_key() {
    let rejected = |s: &Value| match Simulation::from_json(&s.to_string(), Path::new("."), None) {
        Ok(_) => panic!("accepted: {}", s["transport"]),
        Err(e) => (e.path, e.message),
    };
    let (p, m) = rejected(&incast(
        2,
        "1KB",
        json!({"cc": {"kind": "hpcc", "eta": 1.5}}),
    ));
    assert_eq!(p, "transport.cc.eta", "{m}");
    let (p, _) = rejected(&incast(
        2,
        "1KB",
        json!({"cc": {"kind": "hpcc", "u_target": 0.9}}),
    ));
    assert!(p.starts_with("transport.cc"), "{p}");
    // MP-RDMA runs its own window: HPCC is refused there by name.
    let (p, m) = rejected(&incast(
        2,
        "1KB",
        json!({"kind": "mp-rdma", "cc": {"kind": "hpcc"}}),
    ));
    assert_eq!(p, "transport.cc", "{m}");
    // Per-packet load balancing mixes paths in consecutive INT records: refused by name.
    let mut s = incast(2, "1KB", json!({"cc": {"kind": "hpcc"}}));
    s["switch"] = json!({"lb": {"kind": "spray"}});
    let (p, m) = rejected(&s);
    assert_eq!(p, "switch.lb.kind", "{m}");
    assert!(m.contains("\"spray\"") && m.contains("hpcc"), "{m}");
    s["switch"] = json!({"lb_at": [{"node": "s0", "lb": {"kind": "adaptive"}}]});
    let (p, _) = rejected(&s);
    assert_eq!(p, "switch.lb_at[0].lb.kind");
    // Per-flow policies are accepted; so is spraying without HPCC.
    s["switch"] = json!({"lb": {"kind": "flowlet"}});
    build(&s);
    let mut d = incast(2, "1KB", json!({"kind": "dcqcn"}));
    d["switch"] = json!({"lb": {"kind": "spray"}});
    build(&d);
}
