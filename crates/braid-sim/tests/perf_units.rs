//! The units the PeRF experiments report, against their definitions: the tenants table's
//! `msg_rate_mps` is millions of messages per second and `goodput_gbps` gigabits (not bytes) per
//! second, so for 16 B messages goodput = rate × 16 B × 8 bit; and a single-QP tenant cannot
//! run above its QP's message-rate ceiling (`nic.max_qp_msg_rate`, 12.4 M/s by default), which
//! bounds what docs/perf.md may state for M_App alone in `b-vs-m.toml`.

mod common;
use common::*;
use serde_json::json;

#[test]
fn m_app_alone_in_b_vs_m_runs_at_its_qps_ceiling_in_consistent_units() {
    let s = with_keys(
        experiment("perf/b-vs-m.toml"),
        &[("apps.1.enabled", json!(false))],
    );
    let (_, r) = run(&s);
    let mps = tenant_value(&r, "apps[0].client", "msg_rate_mps");
    let gbps = tenant_value(&r, "apps[0].client", "goodput_gbps");
    eprintln!("M_App alone: {mps:.3} M msg/s, {gbps:.4} Gbit/s");
    // 16 B messages: M/s × 16 B × 8 bit/B = Mbit/s.
    assert!(
        (gbps * 1e3 - mps * 16.0 * 8.0).abs() / (gbps * 1e3) < 1e-3,
        "{gbps} vs {mps}"
    );
    assert!(mps <= 12.4 * 1.001 && mps > 12.4 * 0.98, "{mps}");
}
