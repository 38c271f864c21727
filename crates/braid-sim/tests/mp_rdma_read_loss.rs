//! READs over lossy paths recover, under MP-RDMA and under go-back-N RC: a lost READ request,
//! READ response, ACK or NAK delays the transfer, never ends it with RetryExceeded.

mod common;
use common::*;
use serde_json::{json, Value};

/// Issue 27's repro: a two-ToR fabric (2 hosts per ToR, 4 paths) whose 10G fabric links lose
/// `loss` of the frames of every class, and host 1 READing 40 × 16 KB from host 3 with 4
/// outstanding. Every READ request and response crosses two lossy fabric links.
fn lossy_reads(kind: &str, seed: u64, loss: f64) -> Value {
    json!({
        "seed": seed,
        "duration": "200ms",
        "topology": {"kind": "two-tor", "hosts_per_tor": 2, "paths": 4,
                     "host_link": link("40Gbps", "1us"),
                     "fabric_link": {"rate": "10Gbps", "delay": "1us", "loss": loss}},
        "nic": {"rto": "200us", "data_check": true},
        "transport": {"kind": kind},
        "apps": [{"kind": "read_bw", "src": 1, "dst": 3, "size": "16KB", "tx_depth": 4,
                  "iterations": 40}],
    })
}

fn finished(r: &braid_sim::Results, what: &str) {
    let fin = ints(&r.flows, "finish_ps");
    assert!(
        !fin.is_empty() && fin.iter().all(|&t| t > 0),
        "{what}: the READs complete: finish {fin:?}, counters {:?}",
        r.counters
    );
}

/// The repro under MP-RDMA: before the fix the requester's re-requests named the next
/// READ's PSN, never the missing response's, and the QP gave up after 8 timeouts.
#[test]
fn mp_rdma_reads_complete_over_lossy_paths() {
    for seed in 1..=3 {
        let (_, r) = run(&lossy_reads("mp-rdma", seed, 0.05));
        finished(&r, &format!("MP-RDMA, 5% loss, seed {seed}"));
    }
}

/// The same READs under go-back-N RC (DCQCN).
#[test]
fn rc_reads_complete_over_lossy_paths() {
    for seed in 1..=3 {
        let (_, r) = run(&lossy_reads("dcqcn", seed, 0.05));
        finished(&r, &format!("RC, 5% loss, seed {seed}"));
    }
}
