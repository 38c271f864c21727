//! PeRF's two anomalies of a raw RNIC (ATC'24 slides, "Message-level Anomaly", "QP-level
//! Anomaly", "RNIC's Scheduling Mechanism"), on the scenario `experiments/perf/anomaly_message.toml`
//! (one 100G ToR host pair, MTU 4096, `nic.tx_prefetch` = 64 KB of transmit read-ahead per turn):
//!
//! - message level: B_App (1 MB write_bw) harms D_App (16 B write_lat) several-fold, the harm grows
//!   with B_App's message size up to the MTU and then stays; and a message-intensive tenant (16 B,
//!   32 outstanding) loses message rate beside 1, 2, 4 KB messages (capped by bandwidth);
//! - QP level: a tenant with 8 QPs takes 8/9 of the NIC from a 1-QP tenant.

mod common;
use common::*;
use serde_json::{json, Value};

const FILE: &str = "perf/anomaly_message.toml";

fn ser(bytes: u64, gbps: u64) -> f64 {
    (bytes * 8 * 1000).div_ceil(gbps) as f64
}

/// The experiment with `edits`, on the RNIC the read-ahead was calibrated on: without WQE
/// limits. (Under the default ConnectX-6 limits a B_App of 64 B or 256 B messages is held at
/// 12.4 Mmsg/s and harms D_App alike, and M_App beside a 1 KB app falls to ~2 Mmsg/s, not the
/// per-packet round robin's 11: docs/perf.md, "RNIC message-rate limits".)
fn unlimited(edits: &[(&str, Value)]) -> Value {
    let s = with_keys(
        experiment(FILE),
        &[
            ("nic.max_qp_msg_rate", json!(0)),
            ("nic.max_msg_rate", json!(0)),
        ],
    );
    with_keys(s, edits)
}

/// D_App's round-trip latencies (ps), sorted, in the experiment with `edits`.
fn d_latencies(edits: &[(&str, Value)]) -> Vec<u64> {
    let s = unlimited(edits);
    let (sim, _) = run(&s);
    let mut l = sim
        .flows()
        .into_iter()
        .find(|f| f.kind == "write_lat")
        .expect("D_App")
        .latencies;
    assert!(l.len() > 200, "{} samples", l.len());
    l.sort();
    l
}

fn q(l: &[u64], p: f64) -> f64 {
    l[((l.len() - 1) as f64 * p).round() as usize] as f64
}

#[test]
fn message_level_anomaly_d_app_beside_b_app() {
    let alone = d_latencies(&[("apps.1.enabled", json!(false))]);
    let beside = d_latencies(&[]);
    // braid's earlier arbiter: one packet per turn.
    let one_pkt = d_latencies(&[("nic.tx_prefetch", json!("0B"))]);
    let (a50, a99) = (q(&alone, 0.5), q(&alone, 0.99));
    let (b50, b99) = (q(&beside, 0.5), q(&beside, 0.99));
    eprintln!(
        "D_App alone p50 {:.2} us p99 {:.2} us; beside B_App p50 {:.2} us p99 {:.2} us (x{:.2} / x{:.2}); \
         one-packet turns p50 {:.2} us p99 {:.2} us",
        a50 / 1e6,
        a99 / 1e6,
        b50 / 1e6,
        b99 / 1e6,
        b50 / a50,
        b99 / a99,
        q(&one_pkt, 0.5) / 1e6,
        q(&one_pkt, 0.99) / 1e6
    );
    // Several-fold (Justitia §2), at the median and the tail.
    assert!(
        b99 > 2.0 * a99 && b50 > 2.0 * a50,
        "{b50} / {b99} vs {a50} / {a99}"
    );
    // And no more than a full read-ahead of B_App (16 packets of 4 KB) at the sender plus the one
    // packet ahead of the ping at the switch.
    let turn = 16.0 * ser(4096 + 62, 100);
    assert!(b99 <= a99 + turn + ser(4096 + 62, 100) + 1e3, "{b99}");
    // With one packet per turn, D_App waits for at most one MTU packet of B_App at the NIC (and
    // behind it at the switch), plus a few of B_App's ACKs the responder sends ahead of the pong.
    assert!(
        q(&one_pkt, 0.99) <= a99 + 2.0 * ser(4096 + 62, 100) + 100e3,
        "p99 {}",
        q(&one_pkt, 0.99)
    );
}

/// D_App's p99 alone and beside B_App (ps) with both host links at `gbps` and `edits`.
fn p99_at(gbps: u64, edits: &[(&str, Value)]) -> (f64, f64) {
    let rate = json!(format!("{gbps}Gbps"));
    // Slower links: longer runs, for as many of B_App's turns (and D_App's samples) as at 100G.
    let ms = 2.0 * (100.0 / gbps as f64).max(1.0);
    let mut e: Vec<(&str, Value)> = vec![
        ("topology.links.0.rate", rate.clone()),
        ("topology.links.1.rate", rate),
        ("duration", json!(format!("{}ms", ms + 1.0))),
        ("apps.0.duration", json!(format!("{ms}ms"))),
        ("apps.1.duration", json!(format!("{}ms", ms + 0.5))),
    ];
    e.extend(edits.iter().cloned());
    let alone = {
        let mut a = e.clone();
        a.push(("apps.1.enabled", json!(false)));
        q(&d_latencies(&a), 0.99)
    };
    (alone, q(&d_latencies(&e), 0.99))
}

#[test]
fn the_read_ahead_in_bytes_or_in_time_across_link_rates() {
    // The anomaly is D_App waiting behind B_App's read-ahead turn. A byte count (64 KB: 16
    // MTU buffers) is 16 frames of wire time, which shrinks as the link gets faster; a time
    // (5.3 µs, the 64 KB's time at 100G) is the same wait at any rate, and more bytes.
    let frame = 4096 + 62;
    let mut byte_harm = Vec::new();
    for gbps in [25u64, 100, 200] {
        let f = ser(frame, gbps);
        let (alone, bytes) = p99_at(gbps, &[]);
        let (_, time) = p99_at(
            gbps,
            &[
                ("nic.tx_prefetch", json!("0B")),
                ("nic.tx_prefetch_time", json!("5.33us")),
            ],
        );
        eprintln!(
            "{gbps} Gbit/s: D_App p99 alone {:.2} us; beside B_App with 64 KB read-ahead {:.2} us \
             (+{:.2}), with 5.33 us of read-ahead {:.2} us (+{:.2})",
            alone / 1e6,
            bytes / 1e6,
            (bytes - alone) / 1e6,
            time / 1e6,
            (time - alone) / 1e6
        );
        // Bytes: at most a 16-frame turn and the frame ahead at the switch, at this rate.
        let extra = bytes - alone;
        assert!(extra <= 17.0 * f + 1e5, "{gbps}G bytes: +{extra} ps");
        byte_harm.push(extra);
        // Time: the turn is ceil(5.33 µs of wire / frame) frames, whatever the rate.
        let turn = (5.33e6 * gbps as f64 / 8.0 / 1e3 / frame as f64).ceil() * f;
        let extra = time - alone;
        assert!(
            extra <= turn + f + 1e5,
            "{gbps}G time: +{extra} ps (turn {turn})"
        );
        assert!(
            extra >= 0.5 * turn,
            "{gbps}G time: +{extra} ps (turn {turn})"
        );
    }
    // A byte count's harm shrinks with the link rate (its turn is less time at a faster link),
    // at least by half for each doubling or more of the rate here.
    assert!(
        byte_harm[0] > 2.0 * byte_harm[1] && byte_harm[1] > 2.0 * byte_harm[2],
        "{byte_harm:?}"
    );
}

#[test]
fn message_level_anomaly_grows_with_message_size_up_to_the_mtu_then_stays() {
    // The slides' sweep: B_App's message size from 64 B up; perftest's default tx depth (128).
    let alone = q(&d_latencies(&[("apps.1.enabled", json!(false))]), 0.5);
    let mut harm = Vec::new();
    for size in ["64B", "256B", "1KB", "4KB", "64KB", "1MB"] {
        let l = d_latencies(&[
            ("apps.1.size", json!(size)),
            ("apps.1.tx_depth", json!(128)),
        ]);
        let h = q(&l, 0.5) - alone;
        eprintln!(
            "B_App {size}: D_App p50 {:.2} us (+{:.2} us)",
            q(&l, 0.5) / 1e6,
            h / 1e6
        );
        harm.push(h);
    }
    // Grows up to the MTU (4 KB) ...
    for w in harm[..4].windows(2) {
        assert!(w[1] > w[0], "{harm:?}");
    }
    assert!(harm[3] > 2.0 * harm[2], "{harm:?}");
    // ... then stays.
    let plateau = &harm[3..];
    let mean = plateau.iter().sum::<f64>() / plateau.len() as f64;
    for h in plateau {
        assert!((h - mean).abs() < 0.1 * mean, "{harm:?}");
    }
}

/// M_App (16 B write_bw, 32 outstanding) message rate (messages/s), beside a B_App of `size`
/// (None: alone).
fn m_rate(size: Option<&str>) -> f64 {
    let s = unlimited(&[
        ("apps.0.kind", json!("write_bw")),
        ("apps.0.tx_depth", json!(32)),
        ("apps.1.enabled", json!(size.is_some())),
        ("apps.1.size", json!(size.unwrap_or("1KB"))),
        ("apps.1.tx_depth", json!(128)),
    ]);
    let (sim, _) = run(&s);
    let f = &sim.flows()[0];
    let t = (f.finish_ps.expect("M_App finished") - f.start_ps) as f64 / 1e12;
    f.bytes_done as f64 / 16.0 / t
}

#[test]
fn message_rate_of_a_small_message_tenant_falls_beside_larger_messages() {
    let alone = m_rate(None);
    let beside: Vec<f64> = ["1KB", "2KB", "4KB"]
        .iter()
        .map(|s| m_rate(Some(s)))
        .collect();
    eprintln!(
        "M_App alone {:.2} Mmsg/s; beside 1/2/4 KB: {:.2} / {:.2} / {:.2} Mmsg/s",
        alone / 1e6,
        beside[0] / 1e6,
        beside[1] / 1e6,
        beside[2] / 1e6
    );
    assert!(alone > beside[0] && beside[0] > beside[1] && beside[1] > beside[2]);
    assert!(beside[2] < 0.25 * alone, "{beside:?} vs {alone}");
    // Capped by bandwidth: one 16 B message per packet of the other tenant (round robin).
    for (s, r) in [1000u64, 2000, 4000].iter().zip(&beside) {
        let cap = 1e12 / (ser(s + 62, 100) + ser(16 + 62, 100));
        assert!((r - cap).abs() / cap < 0.1, "{s} B: {r} vs {cap}");
    }
}

#[test]
fn qp_level_anomaly_eight_qps_take_eight_ninths() {
    let s = with_keys(
        experiment(FILE),
        &[
            ("measure.interval", json!("100us")),
            (
                "apps",
                json!([
                    {"kind": "write_bw", "src": 0, "dst": 1, "size": "4KB", "qps": 1, "duration": "2.5ms"},
                    {"kind": "write_bw", "src": 0, "dst": 1, "size": "4KB", "qps": 8, "duration": "2.5ms"},
                ]),
            ),
        ],
    );
    let (_, r) = run(&s);
    let g = mean_gbps(&r, 2, 200_000_000, 2_200_000_000);
    let share = g[0] / (g[0] + g[1]);
    eprintln!(
        "1-QP tenant {:.2} Gbps, 8-QP tenant {:.2} Gbps: share {share:.3}",
        g[0], g[1]
    );
    assert!((share - 1.0 / 9.0).abs() < 0.01, "{g:?}");
    assert!(g[0] + g[1] > 0.98 * 100.0 * 4000.0 / 4062.0, "{g:?}");
}
