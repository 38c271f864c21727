//! MP-RDMA's PSNs on the wire are 24 bits, from a per-QP initial PSN drawn from the seed (or
//! fixed by `nic.initial_psn`), as RC's are (`transport/psn.rs`). The transport numbers its
//! packets internally from 0, so a run's results are the same wherever its wire PSNs start,
//! across the wrap from 2^24 - 1 to 0 included, with loss (NAKs, selective ACKs, READ
//! re-requests) as without.

mod common;
use common::*;
use serde_json::{json, Value};

const NEAR_WRAP: u32 = (1 << 24) - 10;

fn two_tor(loss: f64) -> Value {
    json!({"kind": "two-tor", "hosts_per_tor": 2, "paths": 4,
           "host_link": link("40Gbps", "1us"),
           "fabric_link": {"rate": "10Gbps", "delay": "1us", "loss": loss}})
}

/// WRITEs both ways and READs over four paths, optionally lossy.
fn scenario(initial_psn: Option<u32>, loss: f64, seed: u64) -> Value {
    let mut s = json!({
        "seed": seed,
        "duration": "200ms",
        "topology": two_tor(loss),
        "nic": {"rto": "200us", "data_check": true},
        "transport": {"kind": "mp-rdma"},
        "traffic": flows(&[(0, 2, "400KB"), (3, 1, "200KB")]),
        "apps": [{"kind": "read_bw", "src": 1, "dst": 3, "size": "16KB", "tx_depth": 4,
                  "iterations": 20}],
    });
    if let Some(p) = initial_psn {
        s["nic"]["initial_psn"] = json!(p);
    }
    s
}

/// What a run's results say, PSNs aside: every flow's finish, every counter.
fn outcome(s: &Value) -> (Vec<i64>, Vec<(String, u64)>) {
    let (_, r) = run(s);
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(
        !fin.is_empty() && fin.iter().all(|&f| f > 0),
        "every flow finished: {fin:?}, counters {:?}",
        r.counters
    );
    let mut c: Vec<(String, u64)> = r.counters.iter().map(|(k, v)| (k.clone(), *v)).collect();
    c.sort();
    (fin, c)
}

fn counter(o: &(Vec<i64>, Vec<(String, u64)>), k: &str) -> u64 {
    o.1.iter().find(|(n, _)| n == k).map_or(0, |x| x.1)
}

#[test]
fn lossless_mp_rdma_across_the_wrap_runs_as_from_psn_0() {
    let wrap = outcome(&scenario(Some(NEAR_WRAP), 0.0, 1));
    let from_zero = outcome(&scenario(Some(0), 0.0, 1));
    let drawn = outcome(&scenario(None, 0.0, 1));
    // (MP-RDMA drops packets beyond its bitmap as `out_of_order_drops` from any PSN: the
    // comparison with PSN 0 below covers those.)
    for k in ["timeouts", "stale_feedback_drops"] {
        assert_eq!(counter(&wrap, k), 0, "{k} across the wrap");
    }
    assert_eq!(wrap, from_zero, "across the wrap as from PSN 0");
    assert_eq!(drawn, from_zero, "seed-drawn PSNs as from PSN 0");
}

#[test]
fn lossy_mp_rdma_across_the_wrap_recovers_as_from_psn_0() {
    for seed in 1..=2 {
        let wrap = outcome(&scenario(Some(NEAR_WRAP), 0.05, seed));
        let from_zero = outcome(&scenario(Some(0), 0.05, seed));
        assert!(
            counter(&from_zero, "retransmissions") > 0,
            "seed {seed}: the loss made the transport recover: {:?}",
            from_zero.1
        );
        assert_eq!(
            wrap, from_zero,
            "seed {seed}: across the wrap as from PSN 0"
        );
        let drawn = outcome(&scenario(None, 0.05, seed));
        assert_eq!(
            drawn, from_zero,
            "seed {seed}: seed-drawn PSNs as from PSN 0"
        );
    }
}

/// The wire PSNs of flow 0's data packets in a capture (BTH PSN of WRITE First/Middle/Last/Only).
fn wire_psns(s: &Value) -> Vec<u32> {
    let (_, r) = run(s);
    let b = &r.pcap;
    let u32le = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    assert_eq!(u32le(0), 0xa1b23c4d, "nanosecond pcap");
    let mut psns = vec![];
    let mut i = 24;
    while i < b.len() {
        let cap = u32le(i + 8) as usize;
        let d = &b[i + 16..i + 16 + cap];
        // Ethernet 14, IPv4 20, UDP 8, then the BTH: opcode at 42, PSN in bytes 51..54.
        if (0x06..=0x0a).contains(&d[42]) {
            psns.push(u32::from_be_bytes([0, d[51], d[52], d[53]]));
        }
        i += 16 + cap;
    }
    psns
}

#[test]
fn mp_rdma_packets_carry_24_bit_psns_from_the_initial_psn() {
    // 100 KB in 1 KB packets: 98 PSNs from 2^24 - 10, so the wire wraps after the 10th.
    let mut s = json!({
        "duration": "2ms",
        "topology": two_tor(0.0),
        "nic": {"mtu": 1024, "initial_psn": NEAR_WRAP},
        "transport": {"kind": "mp-rdma"},
        "traffic": flows(&[(0, 2, "100KB")]),
        "measure": {"pcap": {"flows": [0], "snaplen": 128}},
    });
    let mut got = wire_psns(&s);
    got.sort_unstable();
    got.dedup();
    let mut want: Vec<u32> = (0..98u32).map(|i| (NEAR_WRAP + i) & 0xFF_FFFF).collect();
    want.sort_unstable();
    assert_eq!(
        got, want,
        "every data PSN, modulo 2^24, from the initial PSN"
    );
    // Drawn from the seed: the same seed draws the same, another seed another.
    s["nic"] = json!({"mtu": 1024});
    let first = |seed: u64, s: &mut Value| {
        s["seed"] = json!(seed);
        wire_psns(s)[0]
    };
    let a = first(3, &mut s);
    assert_eq!(a, first(3, &mut s));
    assert_ne!(a, first(4, &mut s), "another seed, another initial PSN");
}
