//! `share.hold_ns` and `share.lock_ns` are validated (issue 31, §1): −1000 was accepted (and
//! clamped to 0), and ≥ 1e18 overflowed the picosecond clock and disabled the lock.

use serde_json::{json, Value};

fn scenario(share: Value) -> Value {
    json!({
        "duration": "200us",
        "topology": {"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
                     "links": [{"a": "h0", "b": "sw", "rate": "100Gbps", "delay": "400ns"},
                               {"a": "h1", "b": "sw", "rate": "100Gbps", "delay": "400ns"}]},
        "middleware": {"default": [share]},
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "4KB", "qps": 2,
                  "tx_depth": 4, "duration": "100us"}],
    })
}

fn error_of(share: Value) -> Option<String> {
    braid_sim::Simulation::from_json(
        &scenario(share).to_string(),
        std::path::Path::new("."),
        None,
    )
    .err()
    .map(|e| format!("{} {}", e.path, e.message))
}

#[test]
fn share_lock_times_out_of_range_are_refused_by_key() {
    for key in ["hold_ns", "lock_ns"] {
        for bad in [json!(-1000.0), json!(1e18), json!(1e30), json!(1.5e9)] {
            let e = error_of(json!({"kind": "share", key: bad}))
                .unwrap_or_else(|| panic!("{key} = {bad} accepted"));
            assert!(e.contains(key), "{key} = {bad}: {e}");
        }
        for good in [json!(0.0), json!(115.0), json!(1e9)] {
            assert_eq!(
                error_of(json!({"kind": "share", key: good})),
                None,
                "{key} = {good}"
            );
        }
    }
}
