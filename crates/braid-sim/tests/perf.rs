//! PeRF (`middleware = ["perf"]`) on a host pair at 100 Gbit/s: the paper's B_App (write_bw
//! 1 MiB), D_App (write_lat 16 B) and M_App (write_bw 16 B, 32 outstanding) share host 0's RNIC.

mod common;
use common::*;
use serde_json::{json, Value};

fn pair() -> Value {
    json!({"kind": "edges", "nodes": 2, "switches": [],
           "links": [{"a": 0, "b": 1, "rate": "100Gbps", "delay": "1us"}]})
}

fn b_app(dur: &str) -> Value {
    json!({"kind": "write_bw", "src": 0, "dst": 1, "size": "1MiB", "duration": dur})
}
fn d_app(dur: &str) -> Value {
    json!({"kind": "write_lat", "src": 0, "dst": 1, "size": "16B", "duration": dur, "start": "50us"})
}
fn m_app(dur: &str) -> Value {
    json!({"kind": "write_bw", "src": 0, "dst": 1, "size": "16B", "tx_depth": 32,
           "duration": dur, "start": "50us"})
}

fn scenario(middleware: &str, apps: Vec<Value>) -> Value {
    scenario_with(json!(middleware), "0B", apps)
}

// These tests check PeRF's mechanisms on the RNIC they were calibrated on, one without WQE
// limits (`max_qp_msg_rate = max_msg_rate = 0`). Under the default ConnectX-6 limits every
// 0_WAIT takes a slot of its QP's 12.4 Mmsg/s and PeRF costs B_App about half its throughput:
// measured in docs/perf.md, "PeRF under the RNIC's message-rate limits".
/// `prefetch`: the RNIC's DMA read-ahead per arbitration turn (`nic.tx_prefetch`; 0 = one
/// packet per turn, braid's default).
fn scenario_with(middleware: Value, prefetch: &str, apps: Vec<Value>) -> Value {
    json!({
        "duration": "20ms",
        "topology": pair(),
        "nic": {"mtu": 4096, "tx_prefetch": prefetch, "max_qp_msg_rate": 0, "max_msg_rate": 0},
        "middleware": {"default": [middleware]},
        "apps": apps,
    })
}

#[test]
fn b_app_alone_keeps_its_throughput_under_perf() {
    let (_, raw) = run(&scenario("raw", vec![b_app("4ms")]));
    let (sim, perf) = run(&scenario("perf", vec![b_app("4ms")]));
    let g_raw = common::tenant_value(&raw, "apps[0].client", "goodput_gbps");
    let g_perf = common::tenant_value(&perf, "apps[0].client", "goodput_gbps");
    println!("B_App alone: raw {g_raw:.2} Gbps, perf {g_perf:.2} Gbps");
    assert!(g_raw > 80.0, "raw B_App {g_raw} Gbps");
    assert!(g_perf >= 0.95 * g_raw, "perf {g_perf} vs raw {g_raw} Gbps");
    // Alone it is never split (work-conserving), but it is classified bandwidth-intensive.
    assert_eq!(
        common::tenant_value(&perf, "apps[0].client", "perf_sub_wrs"),
        0.0
    );
    assert_eq!(
        common::tenant_value(&perf, "apps[0].client", "perf_class"),
        2.0
    );
    assert_eq!(sim.agents()[0], vec!["perf_agent"], "one agent on host 0");
}

#[test]
fn beside_small_tenants_b_is_split_and_everyone_is_classified() {
    let apps = vec![b_app("6ms"), d_app("6ms"), m_app("6ms")];
    let (sim, r) = run(&scenario("perf", apps));
    assert_eq!(sim.stacks()[0], vec![vec!["perf"]; 3]);
    let b = "apps[0].client";
    let (d, m) = ("apps[1].client", "apps[2].client");
    assert_eq!(
        common::tenant_value(&r, b, "perf_class"),
        2.0,
        "B_App is bandwidth-intensive"
    );
    assert_eq!(
        common::tenant_value(&r, d, "perf_class"),
        0.0,
        "D_App is delay-sensitive"
    );
    assert_eq!(
        common::tenant_value(&r, m, "perf_class"),
        1.0,
        "M_App is message-intensive"
    );
    let subs = common::tenant_value(&r, b, "perf_sub_wrs");
    let zws = common::tenant_value(&r, b, "perf_zero_waits");
    println!("B_App: {subs} sub-WRs, {zws} 0_WAITs");
    assert!(subs > 100.0, "{subs}");
    assert!(
        (zws - 16.0 * subs).abs() <= 16.0 * 130.0,
        "16 0_WAITs per sub-WR: {zws} vs {subs}"
    );
    assert_eq!(common::tenant_value(&r, d, "perf_sub_wrs"), 0.0);
    assert_eq!(common::tenant_value(&r, m, "perf_zero_waits"), 0.0);
    // The layer's work is charged to it.
    assert!(common::tenant_value(&r, b, "cpu_ns_perf") > 0.0);
    // Everyone finished and measured.
    assert!(common::tenant_value(&r, b, "goodput_gbps") > 30.0);
    assert!(common::tenant_value(&r, d, "lat_p99_us") > 0.0);
    assert!(common::tenant_value(&r, m, "msg_rate_mps") > 0.5);
}

/// A 4 MB WRITE split beside a delay-sensitive tenant lands every byte, once, where it belongs
/// (the simulator carries the bytes: `nic.data_check`).
#[test]
fn split_writes_land_every_byte_in_place() {
    let s = json!({
        "duration": "5ms",
        "topology": pair(),
        "nic": {"mtu": 4096, "data_check": true, "max_qp_msg_rate": 0, "max_msg_rate": 0},
        "middleware": {"default": ["perf"]},
        "apps": [d_app("2ms")],
        "traffic": [{"pattern": "flows",
                     "flows": [{"src": 0, "dst": 1, "size": "4000017B", "start": "200us"}]}],
    });
    let (sim, r) = run(&s);
    let checked = sim.verify_delivery().unwrap();
    assert_eq!(checked, 4_000_017);
    let subs = common::tenant_value(&r, "traffic[0].sender", "perf_sub_wrs");
    assert_eq!(subs, 245.0, "4,000,017 B in 16 KiB sub-WRs");
}

/// D_App p99 (us), M_App rate (Mops) and B_App goodput beside each (Gbps): alone, and beside
/// B_App under `mw`.
struct Isolation {
    d_alone: f64,
    m_alone: f64,
    b_alone: f64,
    d: f64,
    m: f64,
    b_with_d: f64,
    b_with_m: f64,
}

fn isolation(mw: Value, prefetch: &str) -> Isolation {
    let dur = "8ms";
    let p99 = |r: &braid_sim::Results, l: &str| common::tenant_value(r, l, "lat_p99_us");
    let rate = |r: &braid_sim::Results, l: &str| common::tenant_value(r, l, "msg_rate_mps");
    let gp = |r: &braid_sim::Results, l: &str| common::tenant_value(r, l, "goodput_gbps");
    let sc = |mw: &Value, apps| scenario_with(mw.clone(), prefetch, apps);
    let raw = json!("raw");
    let alone_d = run(&sc(&raw, vec![d_app(dur)])).1;
    let alone_m = run(&sc(&raw, vec![m_app(dur)])).1;
    let alone_b = run(&sc(&raw, vec![b_app(dur)])).1;
    let bd = run(&sc(&mw, vec![b_app(dur), d_app(dur)])).1;
    let bm = run(&sc(&mw, vec![b_app(dur), m_app(dur)])).1;
    let i = Isolation {
        d_alone: p99(&alone_d, "apps[0].client"),
        m_alone: rate(&alone_m, "apps[0].client"),
        b_alone: gp(&alone_b, "apps[0].client"),
        d: p99(&bd, "apps[1].client"),
        m: rate(&bm, "apps[1].client"),
        b_with_d: gp(&bd, "apps[0].client"),
        b_with_m: gp(&bm, "apps[0].client"),
    };
    println!(
        "{mw} (tx_prefetch {prefetch}): D p99 {:.2} us (alone {:.2}), M {:.2} Mops (alone {:.2}), B {:.1} beside D, \
         {:.1} beside M Gbps (alone {:.1})",
        i.d, i.d_alone, i.m, i.m_alone, i.b_with_d, i.b_with_m, i.b_alone
    );
    i
}

/// In braid's RNIC (round-robin between QPs, one MTU packet per turn; an executed WAIT ends its
/// QP's turn) B_App's full-size packets cut M_App's message rate to a fifth; PeRF's 0_WAITs give
/// M_App 16 more turns per 16 KiB sub-WR and most of its rate back, at a small cost to B_App.
#[test]
fn zero_waits_give_m_app_its_turns_back_in_the_simulated_rnic() {
    let raw = isolation(json!("raw"), "0B");
    let perf = isolation(json!("perf"), "0B");
    assert!(
        raw.m < 0.3 * raw.m_alone,
        "raw shows the message-rate anomaly: {}",
        raw.m
    );
    assert!(
        perf.m > 3.0 * raw.m,
        "perf {} vs raw {} Mops",
        perf.m,
        raw.m
    );
    assert!(
        perf.m >= 0.65 * perf.m_alone,
        "perf {} vs alone {} Mops",
        perf.m,
        perf.m_alone
    );
    assert!(
        perf.d <= 2.0 * perf.d_alone,
        "D_App p99 {} vs alone {}",
        perf.d,
        perf.d_alone
    );
    assert!(perf.b_with_d >= 0.8 * perf.b_alone && perf.b_with_m >= 0.8 * perf.b_alone);
}

/// The isolation the paper reports, with the thresholds of braid's issue, in the arbiter's
/// anomaly model: the RNIC reads ahead 64 KiB of a QP's data per arbitration turn
/// (`nic.tx_prefetch`, an assumption: the real read-ahead is not published), so B_App's 1 MiB
/// WRITEs hold the wire for 64 KiB at a time and raw RDMA shows both anomalies. PeRF's sub-WRs end
/// B_App's turns early and its 0_WAITs hand the turns over. With the artifact's code default
/// sub-WR of 8 KiB every threshold holds; with the README's 16 KiB (braid's default) D_App and
/// B_App do, and M_App gets ~70% of its rate alone (it waits behind a 16 KiB sub-WR per round
/// trip with 32 outstanding).
#[test]
fn perf_protects_d_and_m_beside_b() {
    let raw = isolation(json!("raw"), "64KiB");
    assert!(
        raw.d > 2.0 * raw.d_alone,
        "raw shows the latency anomaly: {}",
        raw.d
    );
    assert!(
        raw.m < 0.5 * raw.m_alone,
        "raw shows the message-rate anomaly: {}",
        raw.m
    );
    let p = isolation(json!({"kind": "perf", "sub_wr": "8KiB"}), "64KiB");
    assert!(
        p.d <= 2.0 * p.d_alone,
        "D_App p99 {} vs alone {}",
        p.d,
        p.d_alone
    );
    assert!(
        p.m >= 0.8 * p.m_alone,
        "M_App {} vs alone {} Mops",
        p.m,
        p.m_alone
    );
    assert!(p.b_with_d >= 0.8 * p.b_alone && p.b_with_m >= 0.8 * p.b_alone);
    let q = isolation(json!("perf"), "64KiB");
    assert!(
        q.d <= 2.0 * q.d_alone,
        "D_App p99 {} vs alone {}",
        q.d,
        q.d_alone
    );
    assert!(
        q.m >= 0.65 * q.m_alone && q.m > 1.5 * raw.m,
        "M_App {} Mops",
        q.m
    );
    assert!(q.b_with_d >= 0.8 * q.b_alone && q.b_with_m >= 0.8 * q.b_alone);
}

/// The QP-level anomaly: B_App on 5 QPs beside single-QP M_App. PeRF's agent limits the host's
/// active QPs (S = 1 MiB gives a limit of 1: each tenant keeps one QP), so B_App posts through one
/// QP at a time, rotating, and M_App keeps its rate.
#[test]
fn multi_qp_b_app_is_paused_down_to_one_active_qp() {
    let b5 = || {
        let mut b = b_app("30ms");
        b["qps"] = json!(5);
        b
    };
    // The agent sets the limit every 10 ms: the first 10 ms are unlimited.
    let sc = |mw| {
        let mut s = scenario(mw, vec![b5(), m_app("30ms")]);
        s["duration"] = json!("40ms");
        s
    };
    let (_, raw) = run(&sc("raw"));
    let (_, perf) = run(&sc("perf"));
    let (b, m) = ("apps[0].client", "apps[1].client");
    let rate = |r: &braid_sim::Results| common::tenant_value(r, m, "msg_rate_mps");
    let gp = |r: &braid_sim::Results| common::tenant_value(r, b, "goodput_gbps");
    println!(
        "B_App x5 QPs + M_App: raw M {:.2} Mops B {:.1} Gbps; perf M {:.2} Mops B {:.1} Gbps, \
         {} pauses, {} resumes, qp_limit {}",
        rate(&raw),
        gp(&raw),
        rate(&perf),
        gp(&perf),
        common::tenant_value(&perf, b, "perf_pauses"),
        common::tenant_value(&perf, b, "perf_resumes"),
        common::tenant_value(&perf, b, "perf_qp_limit"),
    );
    assert_eq!(common::tenant_value(&perf, b, "perf_qp_limit"), 1.0);
    assert!(
        common::tenant_value(&perf, b, "perf_pauses") > 0.0
            && common::tenant_value(&perf, b, "perf_resumes") > 0.0
    );
    assert_eq!(
        common::tenant_value(&perf, m, "perf_pauses"),
        0.0,
        "the single-QP tenant is not paused"
    );
    assert!(
        rate(&perf) > 3.0 * rate(&raw),
        "M_App {} vs raw {}",
        rate(&perf),
        rate(&raw)
    );
    assert!(
        gp(&perf) >= 0.8 * gp(&raw),
        "B_App {} vs raw {}",
        gp(&perf),
        gp(&raw)
    );
}

/// With `host.cpu.delay = true` the tenant's thread is busy for what its verbs calls cost, so
/// PeRF's per-sub-WR work bounds B_App. The artifact posts a sub-WR's 16 0_WAITs as one linked
/// list (one doorbell; `Verbs::post_send_list`) from a list built once per QP: 40 + 16 x 75 ns
/// instead of 16 x (75 + 115) ns per 16 KiB (1.34 us of wire), and B_App beside D_App is no
/// longer CPU-bound (41.5 Gbit/s when each 0_WAIT was built and posted alone).
#[test]
fn zero_wait_lists_keep_b_app_fed_when_cpu_time_delays_it() {
    let mut s = scenario("perf", vec![b_app("4ms"), d_app("4ms")]);
    s["host"] = json!({"cpu": {"delay": true}});
    let (_, r) = run(&s);
    let b = "apps[0].client";
    let gp = common::tenant_value(&r, b, "goodput_gbps");
    let subs = common::tenant_value(&r, b, "perf_sub_wrs");
    let cpu_per_sub = common::tenant_value(&r, b, "cpu_ns") / subs.max(1.0);
    println!("cpu.delay: B_App beside D_App {gp:.1} Gbps, {subs} sub-WRs, {cpu_per_sub:.0} ns of CPU per sub-WR");
    assert!(subs > 100.0, "B_App is cut beside D_App: {subs}");
    assert!(gp > 75.0, "B_App {gp} Gbps");
    // One sub-WR costs its post and its build plus one list of 16 0_WAITs (and its share of
    // polls): well under the 1.34 us its 16 KiB take on the wire.
    assert!(cpu_per_sub < 1_600.0, "{cpu_per_sub} ns per sub-WR");
}

/// The same QP-level anomaly with PeRF's PAUSE/RESUME in the RNIC (`hw_pause = true`): B_App's
/// paused QPs wait in the NIC behind WAITs released by the managed loopback QP's SEND_ENABLE
/// chain. M_App keeps its rate as with the software PAUSE, B_App its throughput.
#[test]
fn hardware_pause_limits_a_multi_qp_b_app_in_the_rnic() {
    let apps = |mw: Value| {
        let mut b = b_app("30ms");
        b["qps"] = json!(5);
        let mut s = scenario_with(mw, "0B", vec![b, m_app("30ms")]);
        s["duration"] = json!("40ms");
        s
    };
    let (_, raw) = run(&apps(json!("raw")));
    let (_, sw) = run(&apps(json!("perf")));
    let (_, hw) = run(&apps(json!({"kind": "perf", "hw_pause": true})));
    let (b, m) = ("apps[0].client", "apps[1].client");
    let rate = |r: &braid_sim::Results| common::tenant_value(r, m, "msg_rate_mps");
    let gp = |r: &braid_sim::Results| common::tenant_value(r, b, "goodput_gbps");
    println!(
        "B_App x5 + M_App: raw M {:.2} Mops B {:.1} Gbps; software PAUSE M {:.2} B {:.1}; \
         hardware PAUSE M {:.2} B {:.1} ({} pauses, {} resumes)",
        rate(&raw),
        gp(&raw),
        rate(&sw),
        gp(&sw),
        rate(&hw),
        gp(&hw),
        common::tenant_value(&hw, b, "perf_pauses"),
        common::tenant_value(&hw, b, "perf_resumes"),
    );
    assert!(
        common::tenant_value(&hw, b, "perf_pauses") > 0.0
            && common::tenant_value(&hw, b, "perf_resumes") > 0.0
    );
    assert!(
        rate(&hw) > 3.0 * rate(&raw),
        "M_App {} vs raw {}",
        rate(&hw),
        rate(&raw)
    );
    assert!(
        rate(&hw) >= 0.8 * rate(&sw),
        "hardware {} vs software {}",
        rate(&hw),
        rate(&sw)
    );
    assert!(
        gp(&hw) >= 0.8 * gp(&raw),
        "B_App {} vs raw {}",
        gp(&hw),
        gp(&raw)
    );
}

/// The slides' large-READ conversion (`read_convert`): host 0 READs 1 MiB messages from host 1
/// (read_bw, 16 outstanding) while host 1's D_App pings host 0 (write_lat 16 B). The READ
/// responses leave host 1's NIC, where raw RDMA and requester-side sub-READs cannot preempt
/// them; converted, they are host 1's tenant's WRITEs, cut into sub-WRs with 0_WAITs by its
/// layer beside the active D_App. RNIC with the arbiter's read-ahead (`tx_prefetch` 64 KiB).
#[test]
fn converted_reads_are_preempted_at_the_data_holder() {
    let dur = "8ms";
    let r_app = json!({"kind": "read_bw", "src": 0, "dst": 1, "size": "1MiB", "duration": dur});
    let d_app = json!({"kind": "write_lat", "src": 1, "dst": 0, "size": "16B", "duration": dur,
                       "start": "50us"});
    let sc = |mw: Value, apps| scenario_with(mw, "64KiB", apps);
    let alone_d = run(&sc(json!("raw"), vec![d_app.clone()])).1;
    let alone_r = run(&sc(json!("raw"), vec![r_app.clone()])).1;
    let raw = run(&sc(json!("raw"), vec![r_app.clone(), d_app.clone()])).1;
    let sub = run(&sc(
        json!({"kind": "perf", "read_convert": false}),
        vec![r_app.clone(), d_app.clone()],
    ))
    .1;
    let conv = run(&sc(json!("perf"), vec![r_app.clone(), d_app.clone()])).1;
    let conv_alone = run(&sc(json!("perf"), vec![r_app.clone()])).1;
    let p99 = |r: &braid_sim::Results| common::tenant_value(r, "apps[1].client", "lat_p99_us");
    let gp = |r: &braid_sim::Results| common::tenant_value(r, "apps[0].client", "goodput_gbps");
    println!(
        "READ flood vs holder-side D_App: D p99 alone {:.2} us, raw {:.2}, perf sub-READs {:.2}, \
         perf converted {:.2}; READ goodput alone {:.1} Gbps, raw {:.1}, sub-READs {:.1}, \
         converted {:.1}, converted alone {:.1}; converted {} served {}",
        common::tenant_value(&alone_d, "apps[0].client", "lat_p99_us"),
        p99(&raw),
        p99(&sub),
        p99(&conv),
        gp(&alone_r),
        gp(&raw),
        gp(&sub),
        gp(&conv),
        gp(&conv_alone),
        common::tenant_value(&conv, "apps[0].client", "perf_reads_converted"),
        common::tenant_value(&conv, "apps[0].server", "perf_reads_served"),
    );
    // The reference: the holder's own 1 MiB WRITEs beside D_App, under PeRF.
    let wb = json!({"kind": "write_bw", "src": 1, "dst": 0, "size": "1MiB", "duration": dur});
    let own = run(&sc(json!("perf"), vec![wb, d_app.clone()])).1;
    println!(
        "holder's own write_bw under perf: D p99 {:.2} us; holder sub-WRs {} 0_WAITs {}",
        p99(&own),
        common::tenant_value(&conv, "apps[0].server", "perf_sub_wrs"),
        common::tenant_value(&conv, "apps[0].server", "perf_zero_waits")
    );
    // Without conversion the holder's NIC streams the responses: PeRF changes nothing.
    assert!(p99(&sub) > 0.8 * p99(&raw));
    // Converted, the holder preempts its READ data for D_App.
    assert!(
        p99(&conv) < 0.6 * p99(&sub),
        "{} vs {}",
        p99(&conv),
        p99(&sub)
    );
    // ... as it preempts its own WRITEs.
    assert!(
        p99(&conv) < 1.1 * p99(&own),
        "{} vs {}",
        p99(&conv),
        p99(&own)
    );
    assert!(common::tenant_value(&conv, "apps[0].server", "perf_sub_wrs") > 0.0);
    assert!(common::tenant_value(&conv, "apps[0].client", "perf_reads_converted") > 0.0);
    // Work-conserving: alone the converted READs keep the link.
    assert!(gp(&conv_alone) > 0.9 * gp(&alone_r));
    assert!(gp(&conv) > 0.8 * gp(&alone_r));
}

/// `hw_pause = true` when some of B_App's QPs fail: B_App (write_bw 1 MiB on 8 QPs) beside
/// M_App on a two-spine fabric, held to 2 active QPs (`qp_capacity` 3: one slot per tenant plus
/// one extra for the multi-QP tenant); at 3 ms spine0-tor1 goes down for good and the QPs
/// hashed onto spine0 fail RetryExceeded (`rto` 20 us) while they hold slots or wait paused.
/// The hardware rotation must hand their places on: B_App's surviving QPs keep the link busy
/// after the failure as with the software PAUSE (before the fix the rotation stalled behind
/// hand-overs the failed QPs would never run).
#[test]
fn hardware_pause_goes_on_when_b_apps_qps_fail() {
    let sc = |mw: Value| {
        let mut links = vec![
            json!({"a": "h0", "b": "tor0", "rate": "100Gbps", "delay": "1us"}),
            json!({"a": "h1", "b": "tor1", "rate": "100Gbps", "delay": "1us"}),
        ];
        for s in 0..2 {
            for t in 0..2 {
                links.push(json!({"a": format!("tor{t}"), "b": format!("spine{s}"),
                                  "rate": "100Gbps", "delay": "1us"}));
            }
        }
        let mut b = b_app("8ms");
        b["qps"] = json!(8);
        let mut m = m_app("8ms");
        m["start"] = json!("10us");
        json!({
            "duration": "8ms",
            "topology": {"kind": "edges", "nodes": ["h0", "h1", "tor0", "tor1", "spine0", "spine1"],
                         "switches": ["tor0", "tor1", "spine0", "spine1"], "links": links},
            "nic": {"mtu": 4096, "tx_prefetch": "0B", "rto": "20us", "max_qp_msg_rate": 0, "max_msg_rate": 0},
            "middleware": {"default": [mw]},
            "apps": [b, m],
            "link_events": [{"a": "spine0", "b": "tor1", "down": "3ms"}],
            "measure": {"interval": "100us", "messages": false},
        })
    };
    let perf = |hw: bool| json!({"kind": "perf", "hw_pause": hw, "qp_capacity": 3, "qp_limit_interval": "1ms"});
    let (_, sw) = run(&sc(perf(false)));
    let (_, hw) = run(&sc(perf(true)));
    let b = "apps[0].client";
    let after = |r: &braid_sim::Results| mean_gbps(r, 2, 4_000_000_000, 8_000_000_000)[0];
    let before = |r: &braid_sim::Results| mean_gbps(r, 2, 1_000_000_000, 3_000_000_000)[0];
    println!(
        "B_App x8 held to 2, spine0 down at 3 ms: software PAUSE B {:.1} Gbps before, {:.1} after; \
         hardware PAUSE {:.1} before, {:.1} after ({} pauses, {} resumes)",
        before(&sw),
        after(&sw),
        before(&hw),
        after(&hw),
        common::tenant_value(&hw, b, "perf_pauses"),
        common::tenant_value(&hw, b, "perf_resumes"),
    );
    // Host 0's QPs whose transport gave up (on spine0): the failure did hit the rotation.
    let failed = |r: &braid_sim::Results| {
        let (h, t) = (
            common::numbers(&r.tables["transport"], "host"),
            common::numbers(&r.tables["transport"], "timeouts"),
        );
        h.iter()
            .zip(&t)
            .filter(|(h, t)| **h == 0.0 && **t >= 8.0)
            .count()
    };
    println!(
        "QPs failed on host 0: software run {}, hardware run {}",
        failed(&sw),
        failed(&hw)
    );
    assert!(failed(&hw) >= 1 && failed(&sw) >= 1);
    assert!(
        common::tenant_value(&hw, b, "perf_pauses") > 0.0
            && common::tenant_value(&hw, b, "perf_resumes") > 0.0
    );
    assert!(
        after(&sw) > 10.0,
        "software PAUSE after the failure: {}",
        after(&sw)
    );
    assert!(
        after(&hw) >= 0.8 * after(&sw),
        "hardware {} vs software {} after the failure",
        after(&hw),
        after(&sw)
    );
}
