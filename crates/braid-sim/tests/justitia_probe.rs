//! Justitia's reference flow runs in the latency tenants' traffic class (issue 26, section 2):
//! it measures the latency a latency-sensitive tenant would see (Justitia, NSDI '22), and under a
//! class-aware arbiter that latency is set by the queue of that tenant's class, not by
//! `nic.priority`'s.
//!
//! A 100 Gbit/s host pair under strict priority with a 64 KB transmit read-ahead (16 MTU buffers
//! per turn, as `justitia.rs`). B_App (1 MiB writes) runs in class 3. Justitia's target is 1 ms,
//! which no sample reaches, and its small chunk is its big one (1 MB), so the pacer only
//! measures: it neither paces nor splits (5,000 B chunks would shorten B_App's turns), and what
//! the probe sees is raw RDMA's queue, not Justitia's effect on it.
//! - D_App in class 3 beside B_App, `nic.priority = 0`: the probe must wait in class 3's queue,
//!   where round robin between B_App and the probe makes a probe that lands in B_App's turn wait
//!   for the rest of it;
//! - D_App in class 0, `nic.priority = 3`: the probe must run in class 0, which strict priority
//!   serves first: it waits for at most the frame on the wire.
//!
//! So the probe's tail in the first case is at least half a read-ahead turn (16 frames of
//! 4096 + 62 B at 100 Gbit/s = 5.32 µs) above the second (the bound of `isolation_own.rs`). With
//! the probe in `nic.priority`'s class the two cases swap and the difference is negative.

mod common;
use common::*;
use serde_json::{json, Value};

fn pair() -> Value {
    json!({"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
           "links": [{"a": "h0", "b": "sw", "rate": "100Gbps", "delay": "400ns"},
                     {"a": "h1", "b": "sw", "rate": "100Gbps", "delay": "400ns"}]})
}

/// Host 0's pacer's windowed p99 reference latency (µs) and D_App's p99 (µs).
fn probe_tail(d_class: u8, nic_priority: u8) -> (f64, f64) {
    let s = json!({
        "duration": "3ms",
        "nic": {"mtu": 4096, "tx_prefetch": "64KB", "max_qp_msg_rate": 0, "max_msg_rate": 0,
                "arbiter": "sp", "priority": nic_priority},
        "topology": pair(),
        "middleware": {"default": [{"kind": "justitia", "target": "1ms",
                                      "small_chunk": "1000000B"}]},
        "apps": [
            {"kind": "write_lat", "src": 0, "dst": 1, "size": "16B", "duration": "2ms",
             "start": "100us", "priority": d_class},
            {"kind": "write_bw", "src": 0, "dst": 1, "size": "1MiB", "duration": "2ms",
             "start": "200us", "tx_depth": 16, "priority": 3},
        ],
    });
    let (_, r) = run(&s);
    let t = &r.tables["tenants"];
    let labels = match t.get("label").expect("label column") {
        braid_sim::Column::Str(v) => v.clone(),
        _ => panic!("label is not a string column"),
    };
    let f = |name: &str| match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::F64(v) => v.clone(),
        _ => panic!("{name} is not a float column"),
    };
    let hosts = ints(t, "host");
    let agent = labels
        .iter()
        .zip(&hosts)
        .position(|(l, &h)| l == "agent" && h == 0)
        .expect("host 0's pacer");
    let d = labels
        .iter()
        .position(|l| l == "apps[0].client")
        .expect("D_App");
    assert!(
        f("justitia_samples")[agent] > 100.0,
        "the probe ran: {} samples",
        f("justitia_samples")[agent]
    );
    (f("justitia_tail_us")[agent], f("lat_p99_us")[d])
}

#[test]
fn the_reference_probe_waits_in_the_latency_tenants_queue() {
    let (shared, d_shared) = probe_tail(3, 0);
    let (apart, d_apart) = probe_tail(0, 3);
    let turn_us = 16.0 * ((4096 + 62) * 8) as f64 / 100e3;
    eprintln!(
        "probe p99 with D_App in B_App's class {shared:.2} µs (D_App p99 {d_shared:.2}); \
         in class 0 {apart:.2} µs (D_App p99 {d_apart:.2}); half a turn {:.2} µs",
        turn_us / 2.0
    );
    assert!(
        shared - apart >= turn_us / 2.0,
        "the probe follows the latency tenant's queue: {shared:.2} µs in class 3 vs {apart:.2} µs in class 0"
    );
}
