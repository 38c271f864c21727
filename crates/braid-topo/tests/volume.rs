//! The capacity estimate's two inputs from this crate, against what is actually built and drawn:
//! each topology kind's size told without building (`TopologyKind::size`) equals the size of the
//! graph it builds, and each traffic pattern's volume told without drawing
//! (`TrafficPattern::volume`) matches the flows it generates: exactly where the pattern is
//! fixed, and for Poisson within the spread of a Poisson count.

use braid_topo::{TopologySpec, TrafficSpec};
use std::path::Path;

fn topo(json: &str) -> TopologySpec {
    serde_json::from_str(json).unwrap()
}

fn traffic(json: &str) -> TrafficSpec {
    serde_json::from_str(json).unwrap()
}

const LINK: &str = r#"{"rate": "100Gbps", "delay": "1us"}"#;

#[test]
fn every_kind_tells_the_size_of_the_graph_it_builds() {
    let dir = Path::new(".");
    let kinds = [
        format!(r#"{{"kind": "fat-tree", "k": 4, "host_link": {LINK}, "fabric_link": {LINK}}}"#),
        format!(r#"{{"kind": "fat-tree", "k": 8, "host_link": {LINK}, "fabric_link": {LINK}}}"#),
        format!(
            r#"{{"kind": "leaf-spine", "spines": 3, "leaves": 5, "hosts_per_leaf": 7,
                "host_link": {LINK}, "fabric_link": {LINK}}}"#
        ),
        format!(
            r#"{{"kind": "two-tor", "hosts_per_tor": 4, "paths": 6, "host_link": {LINK},
                "fabric_link": {LINK}}}"#
        ),
        format!(
            r#"{{"kind": "dumbbell", "left": 3, "right": 2, "host_link": {LINK},
                "bottleneck": {LINK}}}"#
        ),
        r#"{"kind": "edges", "nodes": 4, "switches": [3], "links": [
                {"a": 0, "b": 3, "rate": "25Gbps", "delay": "1us"},
                {"a": 1, "b": 3, "rate": "25Gbps", "delay": "1us"},
                {"a": 2, "b": 3, "rate": "25Gbps", "delay": "1us"}]}"#
            .to_string(),
    ];
    for k in &kinds {
        let t = topo(k);
        let told = t.size(dir).unwrap();
        let built = t.build(dir).unwrap().size();
        assert_eq!(told, built, "{k}");
        assert!(told.hosts > 0 && told.host_rate_bps > 0, "{k}");
    }
    // Al-Fares et al.: a k-ary fat-tree has k³/4 hosts and 5k²/4 switches.
    let ft = topo(&format!(
        r#"{{"kind": "fat-tree", "k": 48, "host_link": {LINK}, "fabric_link": {LINK}}}"#
    ))
    .size(dir)
    .unwrap();
    assert_eq!((ft.hosts, ft.switches), (27_648, 2_880));
}

/// The standard deviation of a built-in CDF's sizes (uniform between consecutive points).
fn size_sd(name: &str) -> f64 {
    let c = braid_topo::Cdf::load(name, Path::new(".")).unwrap();
    let (mut m1, mut m2) = (0.0, 0.0);
    for w in c.points.windows(2) {
        let ((a, ya), (b, yb)) = (w[0], w[1]);
        let p = (yb - ya) / 100.0;
        m1 += p * (a + b) / 2.0;
        m2 += p * (a * a + a * b + b * b) / 3.0;
    }
    (m2 - m1 * m1).sqrt()
}

/// Flows a table generates on `hosts` hosts of 100 Gbit/s, and the volume it told beforehand.
fn told_and_drawn(json: &str, hosts: u32, seed: u64) -> (f64, f64, usize, u64) {
    let t = traffic(json);
    let dir = Path::new(".");
    let v = t.volume(hosts, 100_000_000_000, dir).unwrap();
    let flows = t.generate(hosts, 100_000_000_000, seed, 0, dir).unwrap();
    let bytes = flows.iter().map(|f| f.size).sum();
    (v.flows, v.bytes, flows.len(), bytes)
}

#[test]
fn fixed_patterns_tell_their_flow_count_exactly() {
    let cases = [
        (r#"{"pattern": "permutation", "size": "1MB"}"#, 16),
        (
            r#"{"pattern": "permutation", "size": 1000, "cross": true, "both_ways": true}"#,
            16,
        ),
        (
            r#"{"pattern": "incast", "senders": 7, "receiver": 0, "size": "64KB"}"#,
            16,
        ),
        (
            r#"{"pattern": "all-to-all", "size": 4096, "hosts": [1, 2, 3, 5, 8]}"#,
            16,
        ),
        (
            r#"{"pattern": "flows", "flows": [{"src": 0, "dst": 1, "size": 10},
                {"src": 2, "dst": 1, "size": 30, "start": "1us"}]}"#,
            4,
        ),
    ];
    for (json, hosts) in cases {
        let (flows, bytes, n, b) = told_and_drawn(json, hosts, 1);
        assert_eq!((flows, bytes), (n as f64, b as f64), "{json}");
    }
}

#[test]
fn poisson_tells_its_flow_count_within_the_spread_of_the_draw() {
    // The count over a window is a sum of independent Poisson counts: its standard deviation is
    // √N. Each case must land within 4σ of the estimate (a 1-in-15,000 miss per case for a
    // correct estimate; an estimate off by the load, the rate or the mean size misses by far
    // more). The mean size of N draws: within 4σ/√N of the CDF's mean, σ the distribution's own
    // (second moment of the piecewise-uniform sizes between the CDF's points: (a²+ab+b²)/3).
    let cases = [
        (
            r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "duration": "20ms"}"#,
            16,
        ),
        (
            r#"{"pattern": "poisson", "load": 0.8, "cdf": "google-rpc", "duration": "2ms"}"#,
            16,
        ),
        (
            r#"{"pattern": "poisson", "load": 0.3, "cdf": "data-mining", "duration": "1s",
                "start": "1ms", "hosts": [0, 1, 2, 3, 4, 5]}"#,
            8,
        ),
        (
            r#"{"pattern": "poisson", "load": 0.3, "cdf": "fb-hadoop", "duration": "10ms"}"#,
            32,
        ),
    ];
    for (json, hosts) in cases {
        let cdf = json
            .split("\"cdf\": \"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let sd_size = size_sd(cdf);
        for seed in [1, 2] {
            let (flows, bytes, n, b) = told_and_drawn(json, hosts, seed);
            let sd = flows.sqrt();
            assert!(
                (n as f64 - flows).abs() <= 4.0 * sd,
                "{json}: told {flows:.0} flows, drew {n}"
            );
            assert!(n > 1000, "{json}: {n} flows is too few to judge");
            let mean_told = bytes / flows;
            let mean_drawn = b as f64 / n as f64;
            assert!(
                (mean_drawn - mean_told).abs() < 4.0 * sd_size / (n as f64).sqrt() + 1.0,
                "{json}: mean size told {mean_told:.0}, drew {mean_drawn:.0}"
            );
        }
    }
    // A count bound ends the arrivals first: the estimate is that count.
    let (flows, _, n, _) = told_and_drawn(
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "duration": "1s", "flows": 500}"#,
        8,
        1,
    );
    assert_eq!((flows, n), (500.0, 500));
}
