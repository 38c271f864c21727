//! The tenants table measures a tenant still running at the run's end up to that end (as the
//! flows table does): an unfinished app that moved data has a goodput and a message rate,
//! never NaN (review isolation.md, D8).

mod common;
use common::*;
use serde_json::json;

#[test]
fn an_unfinished_app_that_moved_data_has_a_goodput() {
    // PeRF's M_App alone at depth 128 (the review's repro: b-vs-m.toml with B_App disabled),
    // cut short: its 9.6 ms outlast a 2 ms run.
    let s = with_keys(
        experiment("perf/b-vs-m.toml"),
        &[
            ("apps.1.enabled", json!(false)),
            ("apps.0.tx_depth", json!(128)),
            ("duration", json!("2ms")),
        ],
    );
    let (_, r) = run(&s);
    let labels = match r.tables["tenants"].get("label").unwrap() {
        braid_sim::Column::Str(v) => v.clone(),
        _ => panic!("label"),
    };
    let row = labels
        .iter()
        .position(|l| l.ends_with(".client"))
        .expect("a client tenant");
    let finish = ints(&r.tables["flows"], "finish_ps")[0];
    assert_eq!(finish, -1, "the app is unfinished at the run's end");
    let gbps = common::numbers(&r.tables["tenants"], "goodput_gbps")[row];
    let mps = common::numbers(&r.tables["tenants"], "msg_rate_mps")[row];
    // 16 B messages for 1.8 ms at the per-QP ceiling (12.4 Mmsg/s) = 1.59 Gbit/s of payload.
    assert!(gbps.is_finite() && gbps > 0.0, "goodput {gbps}");
    assert!(mps.is_finite() && mps > 0.0, "message rate {mps}");
    assert!(
        (gbps * 1e3 / 8.0 / 16.0 - mps).abs() / mps < 1e-9,
        "{gbps} Gbps vs {mps} Mmsg/s"
    );
}
