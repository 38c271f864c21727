//! The requester's READ bound (ibverbs `max_rd_atomic`, 16 by default as ConnectX reports
//! `max_qp_rd_atom`): a READ beyond 16 outstanding waits in the send queue until one
//! completes. Over a long round trip, READ goodput is then bounded analytically by
//! 16 x size / RTT whatever the depth the application posts at (perftest's `ib_read_bw`
//! documents the same cap as its `--outs`, default the device's maximum).

mod common;
use common::*;
use serde_json::json;

/// Propagation one way: two host links of 10 ns and a 50 us bottleneck.
const ONE_WAY_PS: f64 = 2.0 * 10e3 + 50e6;
const SIZE: f64 = 4000.0;

fn read_goodput(depth: u32) -> f64 {
    let s = json!({
        "duration": "60ms",
        "topology": dumbbell(1, 1, link("100Gbps", "10ns"), link("100Gbps", "50us")),
        "apps": [{"kind": "read_bw", "src": 0, "dst": 1, "size": "4KB", "qps": 1,
            "tx_depth": depth, "iterations": 1600}],
    });
    let (_, r) = run(&s);
    assert!(
        ints(&r.tables["flows"], "finish_ps")[0] > 0,
        "depth {depth}: finished"
    );
    assert_eq!(ints(&r.tables["flows"], "size")[0], 1600 * SIZE as i64);
    r.tables["flows"].f64("goodput_gbps")[0]
}

#[test]
fn read_goodput_at_depth_64_is_bounded_by_16_outstanding_reads_per_rtt() {
    let rtt_ps = 2.0 * ONE_WAY_PS;
    // Gbit/s: 16 READs of SIZE bytes per round trip (ps).
    let bound = 16.0 * SIZE * 8.0 / rtt_ps * 1e3;
    let g64 = read_goodput(64);
    // No READ's round trip is shorter than the propagation: an upper bound.
    assert!(g64 <= bound * 1.001, "{g64} Gbps above the bound {bound}");
    // Serialization (a few 100 ns per round trip) and the first round's start cost the rest.
    assert!(
        g64 >= bound * 0.95,
        "{g64} Gbps well below the bound {bound}"
    );
    // Unbounded, 64 READs per round trip would give four times the bound.
    let g16 = read_goodput(16);
    assert!(
        (g64 - g16).abs() <= 0.01 * g16,
        "depth 64 ({g64}) as depth 16 ({g16}): the bound decides"
    );
    let g4 = read_goodput(4);
    eprintln!("bound {bound:.3} Gbps; depth 64: {g64:.3}, 16: {g16:.3}, 4: {g4:.3}");
    assert!(
        (g4 - bound / 4.0).abs() <= 0.05 * bound / 4.0,
        "below the bound the depth decides: {g4} vs {}",
        bound / 4.0
    );
}
