//! Isolation scenarios beyond the PeRF experiments (issue 26, section 4): other link rates
//! (25 and 200 Gbit/s), three tenants on one RNIC (a 16 B ping D_App on class 1, a 16 B
//! message-intensive M_App on class 2, a bulk tenant on class 3), and READ responses as the
//! bulk traffic. The bounds come from the arbiter's model, not from runs:
//! - SP (and ETS with the bulk class weighted 16) let a ping wait for at most the one frame on
//!   the wire when it is posted, which stays ahead of it through the two store-and-forward
//!   switches (3 frames), plus an ACK of the bulk tenant at the responder ahead of the pong
//!   (the bound of `arbiter.rs`'s SP test); ETS adds one quantum of M_App's class (one 78 B
//!   frame) per round;
//! - round robin with a 64 KB read-ahead (64 MTU buffers) makes a ping that lands in the bulk
//!   tenant's turn wait for the rest of it: its p99 is at least half a turn above alone.
//!
//! So SP and ETS protect the ping's tail by (turn / 2) / (3 frames + 2 ACKs + a frame), ~8x
//! here, at every rate.

mod common;
use common::*;
use serde_json::{json, Value};

/// Serialization of `bytes` at `gbps`, in picoseconds (rounded up as a link does).
fn ser(bytes: u64, gbps: u64) -> f64 {
    (bytes * 8 * 1000).div_ceil(gbps) as f64
}

const FRAME: u64 = 1000 + 62;

/// D_App's sorted round-trip latencies (ps) on a host pair at `gbps`, beside M_App and the bulk
/// tenant `bulk` (a write_bw from host 0, or a read_bw that host 1 issues, so that host 0's NIC
/// sends the READ responses), or alone.
fn ping(gbps: u64, nic: Value, bulk: Option<&str>) -> Vec<u64> {
    let rate = format!("{gbps}Gbps");
    // Slower links: longer runs for as many of the bulk tenant's turns.
    let us = (3000 * 100 / gbps).max(3000);
    let mut apps = vec![
        json!({"kind": "write_lat", "src": 0, "dst": 1, "size": "16B",
                               "start": "30us", "duration": format!("{us}us"), "priority": 1}),
    ];
    if let Some(kind) = bulk {
        apps.push(
            json!({"kind": "write_bw", "src": 0, "dst": 1, "size": "16B", "tx_depth": 128,
                         "post_list": 32, "duration": format!("{}us", us + 50), "priority": 2}),
        );
        let (src, dst) = if kind == "read_bw" { (1, 0) } else { (0, 1) };
        apps.push(
            json!({"kind": kind, "src": src, "dst": dst, "size": "1MB", "tx_depth": 16,
                         "duration": format!("{}us", us + 50), "priority": 3}),
        );
    }
    let s = json!({
        "duration": format!("{}us", us + 200),
        "topology": dumbbell(1, 1, link(&rate, "1us"), link(&rate, "1us")),
        "switch": {"lossless": [1, 2, 3]},
        "nic": nic,
        "measure": {"interval": "0us", "messages": false},
        "apps": apps,
    });
    let (sim, _) = run(&s);
    let mut l = sim
        .flows()
        .into_iter()
        .find(|f| f.kind == "write_lat")
        .expect("the write_lat flow")
        .latencies;
    assert!(l.len() > 100, "{} samples", l.len());
    l.sort();
    l
}

fn p99(l: &[u64]) -> f64 {
    l[((l.len() - 1) as f64 * 0.99).round() as usize] as f64
}

fn worst(l: &[u64]) -> f64 {
    *l.last().unwrap() as f64
}

fn check(gbps: u64, bulk: &str) {
    let nic =
        |arb: &str| json!({"arbiter": arb, "tx_prefetch": "64KB", "ets_weights": [1, 1, 1, 16]});
    let alone = ping(gbps, nic("rr"), None);
    let raw = ping(gbps, nic("rr"), Some(bulk));
    let sp = ping(gbps, nic("sp"), Some(bulk));
    let ets = ping(gbps, nic("ets"), Some(bulk));
    let f = ser(FRAME, gbps);
    let bound_sp = worst(&alone) + 3.0 * f + 2.0 * ser(66, gbps);
    let bound_ets = bound_sp + ser(16 + 62, gbps);
    let turn = 64.0 * f;
    eprintln!(
        "{gbps}G, bulk {bulk}: D_App p99 / worst alone {:.2} / {:.2} us; raw {:.2} / {:.2}; \
         SP {:.2} / {:.2} (bound {:.2}); ETS {:.2} / {:.2} (bound {:.2}); turn {:.2} us",
        p99(&alone) / 1e6,
        worst(&alone) / 1e6,
        p99(&raw) / 1e6,
        worst(&raw) / 1e6,
        p99(&sp) / 1e6,
        worst(&sp) / 1e6,
        bound_sp / 1e6,
        p99(&ets) / 1e6,
        worst(&ets) / 1e6,
        bound_ets / 1e6,
        turn / 1e6
    );
    assert!(
        worst(&sp) <= bound_sp,
        "{gbps}G {bulk}: SP worst {}",
        worst(&sp)
    );
    assert!(
        worst(&ets) <= bound_ets,
        "{gbps}G {bulk}: ETS worst {}",
        worst(&ets)
    );
    assert!(
        p99(&raw) >= p99(&alone) + 0.5 * turn,
        "{gbps}G {bulk}: raw p99 {} vs alone {}",
        p99(&raw),
        p99(&alone)
    );
}

#[test]
fn sp_and_ets_protect_a_ping_beside_two_tenants_at_25g() {
    check(25, "write_bw");
}

#[test]
fn sp_and_ets_protect_a_ping_beside_two_tenants_at_200g() {
    check(200, "write_bw");
}

#[test]
fn sp_and_ets_protect_a_ping_from_read_responses() {
    check(100, "read_bw");
}
