//! DCQCN's defaults follow the link rate (`transport.dcqcn.preset`, `dcqcn/defaults.rs`): after
//! an incast at 100 Gbit/s a flow cut hard recovers within a bound with the 100G preset (HPCC's
//! settings), which the DCQCN paper's 40G values miss.

mod common;
use common::*;
use serde_json::{json, Value};

/// Nine senders and one receiver on one switch at `rate`, 1 µs links. Flow 0: `long` from host
/// 0 to host 9 from time 0; flows 1-8: an incast of `burst` each from hosts 1-8 to host 9 at 0.
fn incast(rate: &str, long: &str, burst: &str, dcqcn: Value) -> Value {
    let mut nodes: Vec<String> = (0..10).map(|i| format!("h{i}")).collect();
    nodes.push("sw".into());
    let links: Vec<Value> = (0..10)
        .map(|i| json!({"a": format!("h{i}"), "b": "sw", "rate": rate, "delay": "1us"}))
        .collect();
    let mut f = vec![json!({"src": 0, "dst": 9, "size": long})];
    for h in 1..9 {
        f.push(json!({"src": h, "dst": 9, "size": burst}));
    }
    json!({
        "duration": "200ms",
        "topology": {"kind": "edges", "nodes": nodes, "switches": ["sw"], "links": links},
        "transport": {"kind": "dcqcn", "dcqcn": dcqcn},
        "measure": {"interval": "0us", "messages": false},
        "traffic": [{"pattern": "flows", "flows": f}],
    })
}

/// (last incast flow's finish, long flow's finish), ps.
fn finishes(s: &Value) -> (u64, u64) {
    let (_, r) = run(s);
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(fin.iter().all(|&t| t > 0), "unfinished: {fin:?}");
    (*fin[1..].iter().max().unwrap() as u64, fin[0] as u64)
}

/// When the receiver's link could have delivered every byte (38 MB, 1062 wire bytes per 1000),
/// ps, at `gbps`.
fn work_conserving(gbps: u64) -> u64 {
    38_000 * 1062 * 8 * 1000 / gbps
}

#[test]
fn after_an_incast_at_100g_the_long_flow_recovers_within_a_millisecond() {
    // Default keys at 100G: HPCC's 100G settings. The long flow ends within 1 ms of the
    // work-conserving finish (measured: 0.57 ms over, 3.80 ms in all).
    let bound = work_conserving(100) + 1_000_000_000;
    let (_, long) = finishes(&incast("100Gbps", "30MB", "1MB", json!({})));
    assert!(long <= bound, "long flow {long} ps, bound {bound} ps");
    // The DCQCN paper's 40G values (braid's defaults at every rate before): the flow cut to a
    // few Mbit/s climbs back for tens of ms (measured 26.6 ms).
    let (_, paper) = finishes(&incast(
        "100Gbps",
        "30MB",
        "1MB",
        json!({"preset": "paper-40g"}),
    ));
    assert!(paper > bound + 10_000_000_000, "paper-40g: {paper} ps");
}

#[test]
fn keys_tuned_for_another_rate_are_warned_about() {
    // The paper's 40G additive increase written out at 100G: one line naming the key.
    let s = incast("100Gbps", "1MB", "10KB", json!({"rate_ai": "40Mbps"}));
    let sim = build(&s);
    assert_eq!(sim.warnings().len(), 1, "{:?}", sim.warnings());
    assert!(sim.warnings()[0].starts_with("transport.dcqcn.rate_ai = 40Mbps"));
    // The same at 40G, HPCC's values at 100G (what import-hpcc writes), or the preset named:
    // nothing to say.
    for (rate, d) in [
        ("40Gbps", json!({"rate_ai": "40Mbps"})),
        (
            "100Gbps",
            json!({"rate_ai": "20Mbps", "rate_timer": "300us", "min_rate": "1000Mbps"}),
        ),
        (
            "100Gbps",
            json!({"rate_ai": "40Mbps", "preset": "paper-40g"}),
        ),
    ] {
        let sim = build(&incast(rate, "1MB", "10KB", d.clone()));
        assert!(
            sim.warnings().is_empty(),
            "{rate} {d}: {:?}",
            sim.warnings()
        );
    }
}

/// Sensitivity (docs/scenario.md): `cargo test -p braid-sim --test dcqcn_rates -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn explore_incast_recovery() {
    for rate in ["100Gbps", "400Gbps"] {
        for (name, d) in [
            ("auto", json!({})),
            ("paper-40g", json!({"preset": "paper-40g"})),
            (
                "auto ai x4",
                json!({"rate_ai": "80Mbps", "rate_hai": "800Mbps"}),
            ),
        ] {
            let (inc, long) = finishes(&incast(rate, "30MB", "1MB", d));
            eprintln!(
                "{rate} {name}: incast done {:.3} ms, long flow {:.3} ms",
                inc as f64 / 1e9,
                long as f64 / 1e9
            );
        }
    }
}

/// Events and goodput of `braid bench`'s fat-tree (k = 8, web-search at 0.3 load, 200 µs of
/// arrivals) with each preset: what the 100G preset's 1 µs α timer costs.
#[test]
#[ignore]
fn explore_bench_fat_tree_events() {
    for preset in ["auto", "paper-40g"] {
        let s = json!({
            "duration": "1200us",
            "topology": {"kind": "fat-tree", "k": 8,
                "host_link": {"rate": "100Gbps", "delay": "1us"},
                "fabric_link": {"rate": "400Gbps", "delay": "1us"}},
            "transport": {"kind": "dcqcn", "dcqcn": {"preset": preset}},
            "traffic": [{"pattern": "poisson", "load": 0.3, "cdf": "web-search", "duration": "200us"}],
            "measure": {"interval": "0us", "messages": false},
        });
        let t = std::time::Instant::now();
        let (_, r) = run(&s);
        let ev = r.stats.get("events").copied().unwrap_or(f64::NAN);
        let fct = ints(&r.tables["flows"], "fct_ps");
        let done = fct.iter().filter(|&&x| x > 0).count();
        eprintln!(
            "{preset}: {ev} events, {done}/{} flows done, wall {:.2} s, {:?}",
            fct.len(),
            t.elapsed().as_secs_f64(),
            r.stats
                .iter()
                .filter(|(k, _)| k.starts_with("events_"))
                .chain(
                    r.headline
                        .iter()
                        .filter(|(k, _)| k.starts_with("slowdown") || k.starts_with("fct"))
                )
                .collect::<Vec<_>>()
        );
    }
}
