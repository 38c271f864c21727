//! 24-bit PSNs on the wire (`transport/psn.rs`): each QP's initial PSN is drawn from the run's
//! seed (or fixed by `nic.initial_psn`), and every PSN a packet carries is taken modulo 2^24.
//! Only the wire changes: a flow's results are the same wherever its PSNs start, across the
//! wrap from 2^24 - 1 to 0 included, and the same seed gives the same run.

mod common;
use common::*;
use serde_json::{json, Value};

/// Two 200-packet WRITEs, a READ application and an RPC-like ping-pong over one bottleneck.
fn scenario(initial_psn: Option<u32>) -> Value {
    let mut s = json!({
        "duration": "5ms",
        "topology": dumbbell(2, 2, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "traffic": flows(&[(0, 2, "200KB"), (1, 3, "200KB")]),
        "apps": [
            {"kind": "read_bw", "src": 0, "dst": 3, "size": "16KB", "iterations": 40},
            {"kind": "send_lat", "src": 1, "dst": 2, "size": "64B", "iterations": 50},
        ],
    });
    if let Some(p) = initial_psn {
        s["nic"] = json!({"initial_psn": p});
    }
    s
}

/// What a run's results say, PSNs aside: every flow's finish, every counter.
fn outcome(s: &Value) -> (Vec<i64>, Vec<(String, u64)>) {
    let (_, r) = run(s);
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(fin.iter().all(|&f| f > 0), "every flow finished: {fin:?}");
    let mut c: Vec<(String, u64)> = r.counters.iter().map(|(k, v)| (k.clone(), *v)).collect();
    c.sort();
    (fin, c)
}

#[test]
fn a_flow_whose_psns_wrap_past_2_pow_24_completes_as_any_other() {
    // 200 packets from 2^24 - 20: the sender's PSNs wrap after its 20th packet.
    let wrap = outcome(&scenario(Some((1 << 24) - 20)));
    let from_zero = outcome(&scenario(Some(0)));
    let drawn = outcome(&scenario(None));
    let counter = |o: &(Vec<i64>, Vec<(String, u64)>), k: &str| {
        o.1.iter().find(|(n, _)| n == k).map(|x| x.1).unwrap()
    };
    for k in [
        "naks",
        "retransmissions",
        "timeouts",
        "out_of_order_drops",
        "stale_feedback_drops",
    ] {
        assert_eq!(counter(&wrap, k), 0, "{k} across the wrap");
    }
    assert_eq!(wrap, from_zero, "across the wrap as from PSN 0");
    assert_eq!(drawn, from_zero, "seed-drawn PSNs as from PSN 0");
}

#[test]
fn the_same_seed_draws_the_same_psns() {
    let pcap = |seed: u64| {
        let mut s = scenario(None);
        s["seed"] = json!(seed);
        s["measure"] = json!({"pcap": {"flows": [0], "snaplen": 64}});
        run(&s).1.pcap
    };
    let a = pcap(7);
    assert!(!a.is_empty());
    assert_eq!(a, pcap(7), "identical capture, PSNs included");
}

#[test]
fn an_initial_psn_beyond_24_bits_is_refused() {
    let mut s = scenario(None);
    s["nic"] = json!({"initial_psn": 1 << 24});
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("nic.initial_psn"), "{e}");
}
