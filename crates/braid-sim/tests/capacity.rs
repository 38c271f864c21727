//! The capacity estimate (`braid_sim::capacity`) against what a run actually builds: the flows
//! of whole scenarios (fixed patterns exactly, Poisson within 4σ of a Poisson count), and the
//! memory guard refusing a scenario of tens of millions of generated flows at once, from its
//! parameters, without drawing one (the review's `midpoisson`, which took `braid validate` to
//! 21 GB).

use braid_sim::capacity::{check_json, estimate};
use braid_sim::{Scenario, Simulation};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

fn fat_tree(k: u32) -> Value {
    json!({"kind": "fat-tree", "k": k,
        "host_link": {"rate": "100Gbps", "delay": "1us"},
        "fabric_link": {"rate": "100Gbps", "delay": "1us"}})
}

/// (estimated flows, flows the built run holds: the rows of its flows table).
fn told_and_built(s: &Value) -> (f64, usize) {
    let text = s.to_string();
    let sc = Scenario::from_json(&text).unwrap();
    let e = estimate(&sc, Path::new("."));
    let sim = Simulation::from_json(&text, Path::new("."), Some(7)).unwrap();
    (e.flows, sim.results().tables["flows"].rows())
}

#[test]
fn estimated_flows_match_the_built_runs() {
    // Fixed patterns and an application: exact.
    let fixed = json!({
        "duration": "1ms", "topology": fat_tree(4), "measure": {"interval": "0us"},
        "traffic": [
            {"pattern": "permutation", "size": "10KB"},
            {"pattern": "incast", "senders": 5, "receiver": 0, "size": "10KB"},
            {"pattern": "all-to-all", "size": "1KB", "hosts": [0, 1, 2, 3, 4, 5]},
        ],
        "apps": [{"kind": "write_bw", "src": 0, "dst": 9, "size": "4KB", "qps": 4, "iterations": 10}],
    });
    let (told, built) = told_and_built(&fixed);
    assert_eq!(told, (16 + 5 + 30 + 1) as f64);
    assert_eq!(built, 52);
    // Poisson: the count is a Poisson variable with mean N; within 4σ = 4√N (a correct
    // estimate misses 1 time in 15,000; a wrong load, rate, duration or mean size by far more).
    for (cdf, load, window, k) in [
        ("google-rpc", 0.8, "300us", 4),
        ("web-search", 0.5, "20ms", 4),
        ("google-rpc", 0.3, "100us", 6),
    ] {
        let s = json!({
            "duration": "1ms", "topology": fat_tree(k), "measure": {"interval": "0us"},
            "traffic": [{"pattern": "poisson", "load": load, "cdf": cdf, "duration": window}],
        });
        let (told, built) = told_and_built(&s);
        assert!(built > 1000, "{cdf}: {built} flows is too few to judge");
        assert!(
            (built as f64 - told).abs() <= 4.0 * told.sqrt(),
            "{cdf} load {load} over {window}: told {told:.0}, built {built}"
        );
    }
}

#[test]
fn a_poisson_run_too_large_for_memory_is_refused_before_a_flow_is_drawn() {
    // The review's midpoisson: k = 16 (1,024 hosts at 100 Gbit/s), google-rpc (mean 2,892 B),
    // load 0.8, 10 ms of arrivals: 1024 × 0.01 s × 0.8 × 100e9 / (2,892 × 8) ≈ 35.4 M flows.
    let s = json!({
        "duration": "20ms", "topology": fat_tree(16), "measure": {"interval": "0us"},
        "traffic": [{"pattern": "poisson", "load": 0.8, "cdf": "google-rpc", "duration": "10ms"}],
    });
    let sc = Scenario::from_json(&s.to_string()).unwrap();
    let t0 = Instant::now();
    let e = estimate(&sc, Path::new("."));
    assert!((e.flows / 35.4e6 - 1.0).abs() < 0.01, "{}", e.flows);
    // Two QPs and a record per flow: ~163 GB, far beyond an 8 GB budget.
    let err = e.check(8e9, "BRAID_MEMORY_LIMIT").unwrap_err();
    assert_eq!(err.path, "traffic[0]");
    assert!(
        err.message.contains("35,4") && err.message.contains("flows"),
        "{}",
        err.message
    );
    assert!(err
        .message
        .contains("more than the 8 GB BRAID_MEMORY_LIMIT"));
    // Told in well under a second: nothing was drawn (drawing 35 M flows takes minutes and GBs).
    assert!(t0.elapsed().as_secs_f64() < 1.0);
    // The same scenario at a tenth of the window fits a 32 GB budget: the guard is a bound, not a ban.
    let mut small = s.clone();
    small["traffic"][0]["duration"] = json!("1ms");
    let sc = Scenario::from_json(&small.to_string()).unwrap();
    assert!(estimate(&sc, Path::new(".")).check(32e9, "test").is_ok());
}

#[test]
fn the_budget_comes_from_braid_memory_limit() {
    // One test sets the variable: tests run in threads of one process.
    let s = json!({
        "duration": "1ms", "topology": fat_tree(4),
        "traffic": [{"pattern": "permutation", "size": "1KB"}],
    })
    .to_string();
    std::env::set_var("BRAID_MEMORY_LIMIT", "1MB");
    let err = check_json(&s, Path::new(".")).unwrap_err();
    assert!(
        err.message
            .contains("more than the 1 MB BRAID_MEMORY_LIMIT"),
        "{}",
        err.message
    );
    std::env::set_var("BRAID_MEMORY_LIMIT", "lots");
    let err = check_json(&s, Path::new(".")).unwrap_err();
    assert_eq!(err.path, "BRAID_MEMORY_LIMIT");
    assert!(err.message.contains("expected a size like \"8GB\""));
    std::env::set_var("BRAID_MEMORY_LIMIT", "64GB");
    assert!(check_json(&s, Path::new(".")).is_ok());
    std::env::remove_var("BRAID_MEMORY_LIMIT");
}

#[test]
fn arrivals_past_the_runs_end_are_named() {
    // D19: a 2 ms arrival window in a 1 ms run; the flows starting after 1 ms never run.
    let s = json!({
        "duration": "1ms", "topology": fat_tree(4),
        "traffic": [{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "duration": "2ms"},
                    {"pattern": "permutation", "size": "1KB", "start": "500us"}],
    });
    let e = estimate(
        &Scenario::from_json(&s.to_string()).unwrap(),
        Path::new("."),
    );
    assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
    assert!(
        e.warnings[0]
            .starts_with("traffic[0]: flows start until 2ms, past the run's duration (1ms)"),
        "{}",
        e.warnings[0]
    );
}
