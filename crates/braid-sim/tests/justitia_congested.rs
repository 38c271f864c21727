//! An isolation scenario of our own (issue 26, section 4): a congested fabric. Hosts 0 and 1
//! each run a bandwidth tenant (write_bw, 1 MiB, 16 outstanding) into host 2, so the switch's
//! port to host 2 is a 2:1 bottleneck that DCQCN (the default transport, ECN at the DCQCN
//! paper's 5–200 KB) controls. A latency tenant (write_lat, 16 B) on host 0 pings host 2 through
//! the same port, in the bandwidth tenants' class 3; `nic.priority` is 0, the class control
//! traffic uses, so a reference probe in `nic.priority`'s class is served ahead of the standing
//! queue the victim waits in.
//!
//! The same with a late classification: the latency tenant starts after the bandwidth tenants,
//! so the pacer's link exists (made when the first bandwidth tenant was classified, in the NIC's
//! default class) before the latency tenants' class is known; the reference flow must then move
//! to a leg of the link in that class (`peer_link`'s re-class).
//!
//! `cargo test -p braid-sim --test justitia_congested -- --nocapture` prints the numbers.

mod common;
use common::*;
use serde_json::{json, Value};

fn fabric() -> Value {
    json!({"kind": "edges", "nodes": ["h0", "h1", "h2", "sw"], "switches": ["sw"],
           "links": [{"a": "h0", "b": "sw", "rate": "100Gbps", "delay": "400ns"},
                     {"a": "h1", "b": "sw", "rate": "100Gbps", "delay": "400ns"},
                     {"a": "h2", "b": "sw", "rate": "100Gbps", "delay": "400ns"}]})
}

/// D_App's p99 and p50 (µs), the two bandwidth tenants' goodput (Gbit/s), and host 0's pacer's
/// reference tail (µs; NaN without Justitia).
struct Run {
    d_p99: f64,
    d_p50: f64,
    b_gbps: f64,
    probe_tail: f64,
    misses: f64,
    capacity: f64,
    /// The class of the QP host 0's last probe went on (-2: the NIC's default).
    probe_class: f64,
    relinks: f64,
}

fn run_mw(mw: Value) -> Run {
    run_at(mw, "100us")
}

/// The scenario with the latency tenant starting at `lat_start` (the bandwidth tenants at
/// 200 µs).
fn run_at(mw: Value, lat_start: &str) -> Run {
    let s = json!({
        "duration": "4ms",
        "nic": {"priority": 0},
        "topology": fabric(),
        "middleware": {"default": mw},
        "apps": [
            {"kind": "write_lat", "src": 0, "dst": 2, "size": "16B", "duration": "3ms",
             "start": lat_start, "priority": 3},
            {"kind": "write_bw", "src": 0, "dst": 2, "size": "1MiB", "duration": "3ms",
             "start": "200us", "tx_depth": 16, "priority": 3},
            {"kind": "write_bw", "src": 1, "dst": 2, "size": "1MiB", "duration": "3ms",
             "start": "200us", "tx_depth": 16, "priority": 3},
        ],
    });
    let (_, r) = run(&s);
    let t = &r.tables["tenants"];
    let labels = match t.get("label").expect("label column") {
        braid_sim::Column::Str(v) => v.clone(),
        _ => panic!("label is not a string column"),
    };
    let f = |name: &str| match t.get(name) {
        Some(braid_sim::Column::F64(v)) => v.clone(),
        _ => vec![f64::NAN; labels.len()],
    };
    let hosts = ints(t, "host");
    let row = |l: &str| labels.iter().position(|x| x == l).expect(l);
    let d = row("apps[0].client");
    let gp = f("goodput_gbps");
    let agent = labels
        .iter()
        .zip(&hosts)
        .position(|(l, &h)| l == "agent" && h == 0);
    let pacer = |k: &str| agent.map_or(f64::NAN, |i| f(k)[i]);
    Run {
        d_p99: f("lat_p99_us")[d],
        d_p50: f("lat_p50_us")[d],
        b_gbps: gp[row("apps[1].client")] + gp[row("apps[2].client")],
        probe_tail: pacer("justitia_tail_us"),
        misses: pacer("justitia_target_misses"),
        capacity: pacer("justitia_capacity_gbps"),
        probe_class: pacer("justitia_probe_class"),
        relinks: pacer("justitia_relinks"),
    }
}

/// What must hold (bounds from the mechanism, not from runs):
/// - the probe and D_App are 16 B WRITEs in one class on one path, so the probe's windowed p99
///   is D_App's p99 within 10% (the two differ only by the pong's turn at host 2 and the
///   samples' timing). A probe in `nic.priority`'s class is served ahead of the standing queue
///   and sees the unloaded round trip instead;
/// - Justitia_R then sees the victim's tail: it misses its 15 µs target and lowers the capacity;
/// - it does not make the victim several times worse than raw: p99 at most 2x raw's. (Justitia's
///   per-host floor, half the line here, is above each sender's fair share of the bottleneck,
///   so pacing cannot drain DCQCN's queue either: the victim stays near raw, not below it.)
#[test]
fn justitia_r_does_not_make_the_victim_worse_than_raw_under_a_congested_bottleneck() {
    let raw = run_mw(json!(["raw"]));
    let jr = run_mw(json!([{"kind": "justitia", "target": "15us"}]));
    eprintln!(
        "raw: D p50 {:.2} p99 {:.2} µs, B {:.2} Gbit/s",
        raw.d_p50, raw.d_p99, raw.b_gbps
    );
    eprintln!(
        "Justitia_R: D p50 {:.2} p99 {:.2} µs, B {:.2} Gbit/s, probe tail {:.2} µs, {} misses, \
         capacity {:.2} Gbit/s; p99 ratio to raw {:.2}",
        jr.d_p50,
        jr.d_p99,
        jr.b_gbps,
        jr.probe_tail,
        jr.misses,
        jr.capacity,
        jr.d_p99 / raw.d_p99
    );
    assert!(
        (jr.probe_tail - jr.d_p99).abs() <= 0.1 * jr.d_p99,
        "the probe sees the victim's queue: probe p99 {:.2} µs, D_App p99 {:.2} µs",
        jr.probe_tail,
        jr.d_p99
    );
    assert!(
        jr.misses > 0.0,
        "Justitia_R saw the victim's tail miss 15 µs"
    );
    assert!(
        jr.d_p99 <= 2.0 * raw.d_p99,
        "Justitia_R's victim p99 {:.2} µs vs raw {:.2} µs",
        jr.d_p99,
        raw.d_p99
    );
}

/// Late classification (the victim starts at 500 µs, after the bandwidth tenants' 200 µs): the
/// same bounds as above must hold, because the reference flow moves to the latency tenants'
/// class 3 once the victim is classified. Without the re-class the probe stays in the class the
/// link was made in (the NIC's default, `nic.priority` 0), is served ahead of the standing queue
/// and sees the unloaded round trip: it is then far below the victim's p99 and Justitia_R never
/// misses.
#[test]
fn a_latency_tenant_classified_late_moves_the_probe_into_its_class() {
    let raw = run_at(json!(["raw"]), "500us");
    let jr = run_at(json!([{"kind": "justitia", "target": "15us"}]), "500us");
    eprintln!(
        "late, raw: D p50 {:.2} p99 {:.2} µs, B {:.2} Gbit/s",
        raw.d_p50, raw.d_p99, raw.b_gbps
    );
    eprintln!(
        "late, Justitia_R: D p50 {:.2} p99 {:.2} µs, B {:.2} Gbit/s, probe tail {:.2} µs in class \
         {}, {} relinks, {} misses, capacity {:.2} Gbit/s; p99 ratio to raw {:.2}",
        jr.d_p50,
        jr.d_p99,
        jr.b_gbps,
        jr.probe_tail,
        jr.probe_class,
        jr.relinks,
        jr.misses,
        jr.capacity,
        jr.d_p99 / raw.d_p99
    );
    assert!(
        (jr.probe_tail - jr.d_p99).abs() <= 0.1 * jr.d_p99,
        "the probe sees the victim's queue: probe p99 {:.2} µs, D_App p99 {:.2} µs",
        jr.probe_tail,
        jr.d_p99
    );
    assert!(
        jr.misses > 0.0,
        "Justitia_R saw the victim's tail miss 15 µs"
    );
    assert!(
        jr.d_p99 <= 2.0 * raw.d_p99,
        "Justitia_R's victim p99 {:.2} µs vs raw {:.2} µs",
        jr.d_p99,
        raw.d_p99
    );
}
