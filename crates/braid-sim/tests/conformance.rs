//! The verbs conformance suite (`braid_verbs::testing::conformance`) on the simulated RNIC: the
//! same cases `braid-conformance` runs on Soft-RoCE in a QEMU guest (scripts/softroce-test.sh).

mod common;
use braid_verbs::testing::conformance::{cases, report, Outcome};
use common::*;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

/// Runs every case on host 0 of a two-host dumbbell (its QPs connected to each other through
/// the switch and back); returns the report and how many passed.
fn run_suite(raw: bool) -> (String, usize, usize) {
    let mut text = String::new();
    let mut passed = 0;
    let all = cases();
    for case in &all {
        let scenario = json!({"duration": "10s", "nic": {"data_check": true},
            "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
        let mut sim = build(&scenario);
        let out = Rc::new(RefCell::new(Outcome::default()));
        let stack: Vec<Box<dyn braid_verbs::Middleware>> = if raw {
            vec![Box::new(braid_verbs::Raw)]
        } else {
            Vec::new()
        };
        sim.add_app(0, (case.app)(out.clone()), stack).unwrap();
        sim.advance(case.limit_ps + 1);
        let o = out.borrow();
        if matches!(o.result, Some(Ok(()))) {
            passed += 1;
        }
        text.push_str(&report(case.name, &o));
    }
    (text, passed, all.len())
}

#[test]
fn every_case_passes_on_the_simulated_nic_and_runs_are_deterministic() {
    let (text, passed, total) = run_suite(false);
    println!("{text}conformance (simulated NIC): {passed}/{total} passed");
    assert_eq!(passed, total, "{text}");
    // Same cases, same observations; through the raw stack too.
    assert_eq!(run_suite(false).0, text);
    assert_eq!(run_suite(true).0, text);
}
