//! Lazy flow generation (`lazy_flows.rs`, issue 28 §1 steps 1–2): a traffic sender creates each
//! flow's QP when the flow starts, at the number it would have had, and every result is the same
//! as when every QP was created at the sender's start (`lazy_flows::set_eager`, the old
//! behaviour kept for this comparison): the whole results (every table, counters, headline,
//! statistics but the wall time) and the event count, over patterns that start many flows at
//! one instant (incast, all-to-all: the order of events at equal times), Poisson arrivals,
//! every transport (DCQCN go-back-N, IRN, MP-RDMA, HPCC), applications sharing the hosts, and
//! loss (retransmissions). And that it is lazy: mid-run, fewer QPs exist.

use braid_sim::{lazy_flows, Results, Simulation};
use serde_json::{json, Value};
use std::path::Path;

fn fat_tree(k: u32) -> Value {
    json!({"kind": "fat-tree", "k": k,
        "host_link": {"rate": "100Gbps", "delay": "1us"},
        "fabric_link": {"rate": "100Gbps", "delay": "1us"}})
}

/// Runs `s` lazily or eagerly: its results (wall-clock figures removed), events, and the QPs that
/// existed at `mid_ps`.
fn run(s: &Value, eager: bool, mid_ps: u64) -> (Results, u64, usize) {
    lazy_flows::set_eager(eager);
    let mut sim = Simulation::from_json(&s.to_string(), Path::new("."), Some(3)).unwrap();
    lazy_flows::set_eager(false);
    sim.advance(mid_ps);
    let mid = sim.world().hosts.iter().map(|h| h.nic.qps().count()).sum();
    sim.run();
    let mut r = sim.results();
    // Wall-clock figures (`wall_s`, `events_per_s`) differ from run to run.
    r.stats.retain(|k, _| !k.ends_with("_s"));
    (r, sim.events(), mid)
}

/// Identical results lazily and eagerly; returns the QPs alive mid-run (lazy, eager).
fn same(name: &str, s: Value, mid_ps: u64) -> (usize, usize) {
    let (lazy, ev_l, mid_l) = run(&s, false, mid_ps);
    let (eager, ev_e, mid_e) = run(&s, true, mid_ps);
    assert!(lazy.tables["flows"].rows() > 0, "{name}: no flows");
    for (t, table) in eager.tables.iter() {
        same_table(
            table,
            lazy.tables.get(t).unwrap(),
            &format!("{name}: table {t}"),
        );
    }
    // Debug text: NaN (a missing latency) equals itself there.
    assert!(
        format!("{lazy:?}") == format!("{eager:?}"),
        "{name}: results"
    );
    assert_eq!(ev_l, ev_e, "{name}: events");
    (mid_l, mid_e)
}

/// Equal column by column (as text: NaN equals NaN), naming the first that differs.
fn same_table(a: &braid_sim::Table, b: &braid_sim::Table, what: &str) {
    assert_eq!(a.rows(), b.rows(), "{what}: rows");
    for (c, col) in &a.columns {
        let other = b.get(c).unwrap_or_else(|| panic!("{what}: no column {c}"));
        assert!(
            format!("{col:?}") == format!("{other:?}"),
            "{what}: column {c} differs"
        );
    }
    assert!(format!("{a:?}") == format!("{b:?}"), "{what}: differs");
}

fn scenario(topology: Value, transport: Value, traffic: Value) -> Value {
    json!({"duration": "2ms", "seed": 1, "topology": topology, "transport": transport,
           "measure": {"interval": "20us"}, "traffic": traffic})
}

#[test]
fn poisson_arrivals_give_the_same_results_and_fewer_qps_mid_run() {
    let s = scenario(
        fat_tree(4),
        json!({}),
        json!([{"pattern": "poisson", "load": 0.5, "cdf": "google-rpc", "duration": "300us"}]),
    );
    let (lazy, eager) = same("poisson", s, 100_000_000);
    // A third of the way through the arrivals, about a third of the senders' QPs exist (the
    // sinks' all do): lazily made, not all at t = 0.
    assert!(
        lazy < eager * 3 / 4,
        "QPs mid-run: lazy {lazy}, eager {eager}"
    );
}

#[test]
fn flows_starting_together_keep_their_order() {
    for (name, tr) in [
        ("dcqcn", json!({})),
        ("irn", json!({"recovery": "irn"})),
        ("mp-rdma", json!({"kind": "mp-rdma"})),
        ("hpcc", json!({"cc": {"kind": "hpcc"}})),
    ] {
        let s = scenario(
            fat_tree(4),
            tr,
            json!([
                {"pattern": "incast", "senders": 8, "receiver": 0, "size": "200KB"},
                {"pattern": "all-to-all", "size": "20KB", "hosts": [2, 3, 4, 5, 6, 7],
                 "start": "5us"},
                {"pattern": "permutation", "size": "50KB", "start": "5us"},
            ]),
        );
        same(name, s, 1);
    }
}

#[test]
fn with_applications_loss_and_a_transport_per_table() {
    let mut s = scenario(
        fat_tree(4),
        json!({}),
        json!([
            {"pattern": "poisson", "load": 0.4, "cdf": "web-search", "duration": "200us"},
            {"pattern": "incast", "senders": 4, "receiver": 1, "size": "100KB",
             "transport": {"recovery": "irn"}},
        ]),
    );
    s["apps"] = json!([
        {"kind": "write_bw", "src": 0, "dst": 9, "size": "64KB", "qps": 2, "iterations": 20},
        {"kind": "write_bw", "src": 3, "dst": 1, "size": "16KB", "iterations": 50},
    ]);
    s["topology"]["fabric_link"]["loss"] = json!(0.001);
    let (lazy, eager) = same("apps and loss", s, 50_000_000);
    assert!(lazy < eager, "QPs mid-run: lazy {lazy}, eager {eager}");
}

/// Arrivals that go on past the run's end: a flow that never starts has no sender QP, and no
/// result changes but the `transport` table, which loses the idle rows of those QPs. The
/// capacity estimate counts the QPs the run creates: a Poisson table's arrivals are uniform
/// over its window, so a run half as long as the window creates its sinks' QPs and half its
/// senders' (within 4σ of the count of flows started).
#[test]
fn flows_starting_after_the_end_get_no_qp_and_the_estimate_counts_them() {
    let s = json!({"duration": "150us", "seed": 1, "topology": fat_tree(4),
        "measure": {"interval": "0us", "messages": false},
        "traffic": [{"pattern": "poisson", "load": 0.5, "cdf": "google-rpc",
                     "duration": "300us"}]});
    let (lazy, ev_l, _) = run(&s, false, 0);
    let (eager, ev_e, _) = run(&s, true, 0);
    assert_eq!(ev_l, ev_e);
    assert_eq!(lazy.counters, eager.counters);
    assert!(format!("{:?}", lazy.headline) == format!("{:?}", eager.headline));
    assert_eq!(lazy.stats, eager.stats);
    for (t, table) in eager.tables.iter().filter(|(t, _)| *t != "transport") {
        same_table(table, lazy.tables.get(t).unwrap(), &format!("table {t}"));
    }
    // The transport table: the eager rows minus idle ones (nothing sent or received).
    let (tl, te) = (&lazy.tables["transport"], &eager.tables["transport"]);
    let key = |t: &braid_sim::Table| -> Vec<(u64, u64)> {
        let (h, q) = (t.get("host").unwrap(), t.get("qpn").unwrap());
        match (h, q) {
            (braid_sim::Column::U64(h), braid_sim::Column::U64(q)) => {
                h.iter().copied().zip(q.iter().copied()).collect()
            }
            _ => panic!("host and qpn are u64 columns"),
        }
    };
    let u = |t: &braid_sim::Table, c: &str| match t.get(c) {
        Some(braid_sim::Column::U64(v)) => v.clone(),
        _ => panic!("{c} is a u64 column"),
    };
    let (kl, ke) = (key(tl), key(te));
    let (tx, rx) = (u(te, "tx_bytes"), u(te, "rx_bytes"));
    let mut missing = 0;
    for (i, k) in ke.iter().enumerate() {
        if !kl.contains(k) {
            assert_eq!((tx[i], rx[i]), (0, 0), "QP {k:?} was not idle");
            missing += 1;
        }
    }
    assert_eq!(kl.len() + missing, ke.len());
    let flows = lazy.tables["flows"].rows() as f64;
    assert!(missing > 100, "only {missing} of {flows} flows unstarted");
    // The estimate against the QPs the lazy run created.
    let sc = braid_sim::Scenario::from_json(&s.to_string()).unwrap();
    let e = braid_sim::capacity::estimate(&sc, Path::new("."));
    let created = kl.len() as f64;
    assert!(
        (e.qps - created).abs() <= 4.0 * e.flows.sqrt() + (e.flows - flows).abs() * 2.0,
        "estimated {:.0} QPs, created {created} ({flows} flows, estimated {:.0})",
        e.qps,
        e.flows
    );
}
