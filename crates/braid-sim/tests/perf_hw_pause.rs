//! PeRF's PAUSE/RESUME in the RNIC (`hw_pause = true`, the artifact's own mechanism) on the
//! QP-level scenario (`experiments/perf/qp-level.toml`) under the default RNIC model (the
//! ConnectX-6 message-rate limits, 64 KB read-ahead): the single-QP tenant gets its share back,
//! as with the layer's software PAUSE. (The review, ../shared/reviews/isolation.md, measured 0.286
//! of the link and 1.08 Mmsg/s for M_App here; on this tip, with either WQE engine, the shares
//! are the software PAUSE's: docs/perf.md, "hw_pause under the default RNIC".)

mod common;
use common::*;
use serde_json::{json, Value};

const FILE: &str = "perf/qp-level.toml";

/// Goodput (Gbit/s) of the 1-QP and the 8-QP tenant over 12-30 ms (after the agent's first
/// limit at 10 ms), and M_App's message rate (Mmsg/s) when `m_app`.
fn shares(mw: Value, m_app: bool) -> (f64, f64, f64, braid_sim::Results) {
    let s = with_keys(
        experiment(FILE),
        &[
            ("middleware", json!({"default": [mw]})),
            ("apps.2.enabled", json!(m_app)),
        ],
    );
    let (_, r) = run(&s);
    let g = mean_gbps(&r, 3, 12_000_000_000, 30_000_000_000);
    let m = if m_app {
        g[2] * 1e9 / 8.0 / 16.0 / 1e6
    } else {
        0.0
    };
    (g[0], g[1], m, r)
}

#[test]
fn hardware_pause_gives_the_single_qp_tenant_its_share() {
    let (a_sw, b_sw, _, _) = shares(json!("perf"), false);
    let (a, b, _, r) = shares(json!({"kind": "perf", "hw_pause": true}), false);
    let (a_raw, b_raw, _, _) = shares(json!("raw"), false);
    eprintln!(
        "1-QP share: raw {:.3} ({a_raw:.1} / {b_raw:.1} Gbps), software PAUSE {:.3} ({a_sw:.1} / \
         {b_sw:.1}), hw_pause {:.3} ({a:.1} / {b:.1})",
        a_raw / (a_raw + b_raw),
        a_sw / (a_sw + b_sw),
        a / (a + b)
    );
    assert!(common::tenant_value(&r, "apps[1].client", "perf_pauses") > 0.0);
    // The limit is one active QP of the 8-QP tenant: two QPs share the NIC, half each.
    // "Restored" as `braid reproduce perf/qp-level` judges it: at least 80% of the even share
    // (the review measured 0.286 here); and the 8-QP tenant keeps at least as much.
    let share = a / (a + b);
    assert!(
        (0.8 * 0.5..=1.0 - 0.8 * 0.5).contains(&share),
        "hw_pause share {share}"
    );
    // Work-conserving: together as much as raw.
    assert!(
        a + b >= 0.95 * (a_raw + b_raw),
        "{a} + {b} vs raw {a_raw} + {b_raw}"
    );
}

#[test]
fn hardware_pause_keeps_the_message_tenant_beside_them() {
    let (_, _, m_sw, _) = shares(json!("perf"), true);
    let (_, _, m, _) = shares(json!({"kind": "perf", "hw_pause": true}), true);
    let (_, _, m_raw, _) = shares(json!("raw"), true);
    eprintln!("M_App: raw {m_raw:.2} Mmsg/s, software PAUSE {m_sw:.2}, hw_pause {m:.2}");
    assert!(m >= 0.8 * m_sw, "hw_pause M_App {m} vs software {m_sw}");
}
