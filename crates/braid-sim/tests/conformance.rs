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
    run_suite_with(raw, json!({}))
}

/// The suite with `transport` as the scenario's `[transport]` table.
fn run_suite_with(raw: bool, transport: serde_json::Value) -> (String, usize, usize) {
    let mut text = String::new();
    let mut passed = 0;
    let all = cases();
    for case in &all {
        let scenario = json!({"duration": "10s", "nic": {"data_check": true},
            "transport": transport.clone(),
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

/// The receive-too-small case under selective repeat (IRN's out-of-order placement, a different
/// responder path from go-back-N's): the receive fails LOC_LEN_ERR, the responder NAKs "invalid
/// request", the requester's SEND fails REM_INV_REQ_ERR, both QPs end in Error.
#[test]
fn a_receive_too_small_fails_both_ends_under_selective_repeat_too() {
    for transport in [json!({}), json!({"recovery": "irn"})] {
        let (text, _, _) = run_suite_with(false, transport.clone());
        let case: String = text
            .split_inclusive('\n')
            .skip_while(|l| !l.contains("recv_too_small"))
            .take_while(|l| !l.contains("read_bad_rkey"))
            .collect();
        for want in [
            "PASS",
            "wr 2 RemoteInvalidRequest Send",
            "wr 1 LocalLengthError Recv len 64",
            "responder after: Error",
            "requester after: Error",
        ] {
            assert!(case.contains(want), "{transport}: no {want:?} in\n{case}");
        }
    }
}
