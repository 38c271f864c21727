//! DRUM's agent against RAW and SHARE (DRUM §V): a 32 B foreground tenant measuring every
//! WRITE's completion time beside a background tenant posting WQE batches on many connections,
//! from host 0 to host 1 over a 40 Gbit/s pair.
//!
//! `cargo test -p braid-sim --test drum_agent -- --ignored --nocapture` prints the matrices.

mod common;
use common::*;
use serde_json::{json, Value};

fn pair() -> Value {
    json!({"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
           "links": [{"a": "h0", "b": "sw", "rate": "40Gbps", "delay": "500ns"},
                     {"a": "h1", "b": "sw", "rate": "40Gbps", "delay": "500ns"}]})
}

/// The RNIC: 64 KB of transmit read-ahead per arbitration turn (a QP with WQEs ready keeps the
/// wire for up to 64 KB), a QP-context cache of `cache` entries with a 1 µs miss (test cases 2-4
/// and Fig. 11's RNIC).
///
/// Without WQE message-rate ceilings, the RNIC DRUM was calibrated on (with the ConnectX-6
/// defaults RAW's foreground at cc = 20 waits 2.7 µs, not 7.1: docs/scenario.md, "RNIC message
/// rate"; to be recalibrated).
fn nic(cache: u32) -> Value {
    json!({"mtu": 1024, "tx_prefetch": "64KB", "qp_cache": cache, "qp_cache_miss": "1us",
           "max_qp_msg_rate": 0, "max_msg_rate": 0})
}

/// Test case 1's RNIC (experiments/drum/test-case-1.toml): `nic` with a 0.5 µs miss, a PCIe read
/// round trip. With 1 µs RAW's foreground at cc = 50 waited 69.8 µs (paper 26.5): every
/// arbitration turn of a thrashing cache pays one miss for 20 WQEs of 32 B (0.38 µs of wire).
fn tc1_nic(cache: u32) -> Value {
    let mut n = nic(cache);
    n["qp_cache_miss"] = json!("500ns");
    n
}

/// Test case 1's DRUM: Q = C = 52 M WQEs/s, what this NIC carries of 32 B WRITEs (RAW measures
/// 52.8 M/s; the wire's limit is 40 Gbit/s over 94-byte packets, 53.2 M/s), and shared QPs as deep
/// as their decided rates' bandwidth-delay product (with a fixed depth of 4 and the default Q of
/// 20 M/s the background got 2.0 Gbit/s of RAW's 13.5).
fn drum_tc1() -> Value {
    json!([{"kind": "drum", "pipe_bdp": 1.0, "wqe_rate": 52e6, "cqe_rate": 52e6}])
}

/// Foreground: one connection, one 32 B WRITE at a time. Background: `cc` connections, each
/// posting batches of `batch` WRITEs of `bg_size` (the next batch when the last completes).
fn scenario(mw: &Value, cache: u32, cc: u32, batch: u32, bg_size: &str) -> Value {
    json!({
        "duration": "6ms",
        "nic": tc1_nic(cache),
        "topology": pair(),
        "middleware": {"default": mw},
        "apps": [
            {"kind": "wqe_lat", "src": 0, "dst": 1, "size": "32B", "qps": 1, "tx_depth": 1,
             "duration": "2ms", "start": "300us"},
            {"kind": "write_bw", "src": 0, "dst": 1, "size": bg_size, "qps": cc,
             "tx_depth": batch, "cq_mod": batch, "duration": "2.4ms", "start": "100us"},
        ],
    })
}

/// What one run measured: the foreground's completion times (µs, sorted) and the background's
/// goodput (Gbit/s, from its start to its last completion: it posts for 2.4 ms, then its queued
/// WRs drain, so bytes over the 2.4 ms alone would read above line rate).
struct Measured {
    lat: Vec<f64>,
    /// Events the run took (wall time: the scheduler's work per event).
    events: u64,
    bg_gbps: f64,
    /// Host 0's agent row of the tenants table: (column, value) of its float columns.
    agent: Vec<(String, f64)>,
}

impl Measured {
    fn agent(&self, k: &str) -> f64 {
        self.agent
            .iter()
            .find(|(n, _)| n == k)
            .map_or(f64::NAN, |x| x.1)
    }
    fn p(&self, q: f64) -> f64 {
        let n = self.lat.len();
        self.lat[((n as f64 * q) as usize).min(n - 1)]
    }
}

fn measure_s(s: &Value) -> Measured {
    let (sim, r) = run(s);
    let t = &r.tables["tenants"];
    let row = match t.get("label") {
        Some(braid_sim::Column::Str(l)) => l.iter().position(|x| x == "agent"),
        _ => None,
    };
    let agent = row
        .map(|i| {
            t.columns
                .iter()
                .filter_map(|(n, c)| match c {
                    braid_sim::Column::F64(v) => Some((n.clone(), v[i])),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let f = sim.flows();
    let mut lat: Vec<f64> = f[0].latencies.iter().map(|&x| x as f64 / 1e6).collect();
    lat.sort_by(f64::total_cmp);
    assert!(lat.len() >= 3, "{s}: {} samples", lat.len());
    Measured {
        lat,
        events: sim.events(),
        bg_gbps: {
            let end = f[1].finish_ps.expect("the background finishes");
            f[1].bytes_done as f64 * 8.0 / ((end - f[1].start_ps) as f64 * 1e-12) / 1e9
        },
        agent,
    }
}

fn measure(mw: &Value, cc: u32, batch: u32) -> Measured {
    measure_s(&scenario(mw, 32, cc, batch, "32B"))
}

/// Fig. 2a: under raw RDMA, a 32 B foreground's 80th-percentile completion time grows ~3.9x
/// (20 -> 78 µs) as one co-located connection's WQE batch goes from 20 to 100. Here the batch's
/// bytes ahead of the foreground at the NIC's arbiter (up to 128 KB of read-ahead per turn) are
/// what grows.
#[test]
fn fig2a_raw_foreground_completion_grows_with_the_background_batch() {
    let at = |batch: u32| {
        let mut s = scenario(&raw(), 32, 1, batch, "1KB");
        s["nic"]["tx_prefetch"] = json!("128KB");
        measure_s(&s)
    };
    let (small, big) = (at(20), at(100));
    let r = big.p(0.8) / small.p(0.8);
    println!(
        "fig2a raw: p80 {:.2} -> {:.2} us ({r:.2}x)",
        small.p(0.8),
        big.p(0.8)
    );
    assert!((2.5..6.0).contains(&r), "paper 3.9x, braid {r:.2}x");
}

/// Test case 1 (Fig. 10): the 32 B foreground beside `cc` background connections (batches of
/// 20 WRITEs of 32 B), RAW vs SHARE vs DRUM, against the paper's 80th percentiles: RAW 7.1 /
/// 26.5 / 90.4 µs at cc = 20 / 50 / 100 (QP-cache thrashing above ~20 connections), SHARE 7.2 /
/// ~41 µs at cc = 20 / 100, DRUM 8.8 / 14.5 / 24.0 µs (3.1x faster than RAW and 1.7x than SHARE at
/// cc = 100). braid: RAW within 2x of the paper at every cc; SHARE within ~2x at cc = 100 but at
/// the unloaded latency at cc = 20 (its lock caps its background at a third of RAW's, so nothing
/// queues); DRUM at the unloaded latency throughout (it paces the background just under the
/// NIC's rate and its agent costs no time: docs/drum-agent.md, "Measured"), so its gaps at
/// cc = 100 are wider than the paper's.
/// One line of RAW / SHARE / DRUM: the foreground's p80 and the background's goodput.
fn print_row(label: &str, [r, s, d]: [&Measured; 3]) {
    println!(
        "{label}: p80 raw {:.2} share {:.2} drum {:.2} us; bg raw {:.2} share {:.2} drum {:.2} Gbit/s",
        r.p(0.8),
        s.p(0.8),
        d.p(0.8),
        r.bg_gbps,
        s.bg_gbps,
        d.bg_gbps
    );
}

#[test]
fn test_case_1_drum_beats_share_beats_raw_as_connections_grow() {
    let ccs = [20, 50, 100];
    let mut rows = Vec::new();
    for cc in ccs {
        let (r, s, d) = (
            measure(&raw(), cc, 20),
            measure(&share(), cc, 20),
            measure(&drum_tc1(), cc, 20),
        );
        print_row(&format!("cc {cc}"), [&r, &s, &d]);
        rows.push((r, s, d));
    }
    let p80 = |i: usize| (rows[i].0.p(0.8), rows[i].1.p(0.8), rows[i].2.p(0.8));
    let within2 = |got: f64, paper: f64| (paper / 2.0..=paper * 2.0).contains(&got);
    // RAW: the paper's magnitudes, and its growth by thrashing (20 QPs fit the 32-entry cache;
    // 50 and 100 miss on every turn).
    for (i, paper) in [7.1, 26.5, 90.4].into_iter().enumerate() {
        let raw = p80(i).0;
        assert!(
            within2(raw, paper),
            "RAW at cc={}: {raw} vs {paper}",
            ccs[i]
        );
    }
    assert!(
        p80(1).0 > 3.0 * p80(0).0 && p80(2).0 > 1.5 * p80(1).0,
        "RAW's growth"
    );
    // SHARE at cc = 100: ~41 µs in the paper (21 shared QPs fit the cache; the foreground waits
    // behind its own QP's FIFO and the other QPs' turns). Within 2x: 20.5..82.
    let (r, s, d) = p80(2);
    assert!(within2(s, 41.0), "SHARE at cc=100: {s}");
    // DRUM: the unloaded latency (the 32 B WRITE's 2.06 µs round trip) at every cc, not the
    // paper's 8.8-24 µs; at cc = 100 at least the paper's gaps.
    for (i, cc) in ccs.iter().enumerate() {
        assert!(p80(i).2 < 3.0, "DRUM at cc={cc}: {}", p80(i).2);
    }
    assert!(r / d >= 3.1, "DRUM vs RAW at cc=100");
    assert!(s / d >= 1.7, "DRUM vs SHARE at cc=100");
    assert!(r > s, "SHARE beats RAW at cc=100");
    // No background reads above what the wire can carry: 32 B of payload per 94 B packet (62 B
    // of RoCEv2 headers) at 40 Gbit/s.
    let wire = 40.0 * 32.0 / 94.0;
    for m in rows.iter().flat_map(|(r, s, d)| [r, s, d]) {
        assert!(
            m.bg_gbps <= wire * 1.001,
            "background {} > {wire}",
            m.bg_gbps
        );
    }
    // DRUM costs the background little: within 15 % of RAW's goodput where RAW's cache holds
    // (cc = 20), above it where RAW thrashes.
    assert!(rows[0].2.bg_gbps >= 0.85 * rows[0].0.bg_gbps);
    for (r, _, d) in &rows[1..] {
        assert!(d.bg_gbps >= r.bg_gbps, "{} vs {}", d.bg_gbps, r.bg_gbps);
    }
    // Why SHARE's foreground is unloaded at cc = 20: the lock (115 + 100 ns per contended post)
    // holds its 5 shared QPs to ~23 M posts/s, under half of what RAW's 21 QPs put on the wire.
    assert!(rows[0].1.bg_gbps < 0.5 * rows[0].0.bg_gbps);
    // The agent's CPU as the paper's Fig. 17 splits it: a busy-polling core, the IO monitor's
    // per-WR verb_convertor and qp_map, the scheduler's qp_sche (grows with the connections).
    for (_, _, d) in &rows {
        println!(
            "drum agent: poller cores {} verb_convertor {:.0} ns qp_map {:.0} ns qp_sche {:.0} ns, {} WRs",
            d.agent("drum_poller_cores"),
            d.agent("drum_cpu_ns_verb_convertor"),
            d.agent("drum_cpu_ns_qp_map"),
            d.agent("drum_cpu_ns_qp_sche"),
            d.agent("drum_wr_posted"),
        );
        assert_eq!(d.agent("drum_poller_cores"), 1.0);
        assert!(d.agent("drum_cpu_ns_verb_convertor") > 0.0);
    }
    assert!(rows[2].2.agent("drum_cpu_ns_qp_sche") > rows[0].2.agent("drum_cpu_ns_qp_sche"));
}

/// What test case 1 looked like with 1 KB background WRITEs and the default agent (Q = 20 M/s,
/// 4 WRs per shared QP): the background fills the link, and what is queued ahead of the
/// foreground at the NIC decides: RAW and SHARE 10x the paper's, DRUM protected.
#[test]
fn test_case_1_with_a_link_filling_background() {
    let m = |mw: &Value, cc: u32| {
        let mut s = scenario(mw, 32, cc, 20, "1KB");
        s["nic"] = nic(32);
        measure_s(&s)
    };
    let (r, s, d) = (m(&raw(), 100), m(&share(), 100), m(&drum(), 100));
    print_row("1 KB background, cc 100", [&r, &s, &d]);
    assert!(d.p(0.8) * 10.0 < s.p(0.8) && s.p(0.8) < r.p(0.8));
    assert!(d.bg_gbps >= 0.9 * r.bg_gbps);
}

#[test]
fn the_same_scenario_and_seed_give_the_same_completion_times() {
    for mw in [drum_tc1(), drum(), share()] {
        let a = measure(&mw, 10, 20);
        let b = measure(&mw, 10, 20);
        assert_eq!(a.lat, b.lat);
        assert_eq!(a.bg_gbps, b.bg_gbps);
    }
}

fn raw() -> Value {
    json!(["raw"])
}
fn share() -> Value {
    json!(["share"])
}
fn drum() -> Value {
    json!(["drum"])
}

/// Prints the test-case-1 matrix under the environment's settings: `BG` (background WRITE size),
/// `BATCH`, `CCS`, `MECH` (e.g. `raw,share,drum`), `CACHE`, `MISS` (QP-cache entries and miss),
/// `PREFETCH`, `CPU_DELAY=1` (`host.cpu.delay`), and `DRUM` / `SHARE` (JSON objects of agent
/// parameters; `DRUM` defaults to test case 1's, `DRUM='{}'` is the agent's defaults).
#[test]
#[ignore]
fn print_matrix() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or(d.into());
    let bg = env("BG", "32B");
    let prefetch = env("PREFETCH", "64KB");
    let miss = env("MISS", "500ns");
    let cache: u32 = env("CACHE", "32").parse().unwrap();
    let obj = |kind: &str, k: &str| {
        let d = if k == "DRUM" {
            drum_tc1()[0].to_string()
        } else {
            "{}".into()
        };
        let mut o: Value = serde_json::from_str(&env(k, &d)).expect("a JSON object");
        o["kind"] = json!(kind);
        json!([o])
    };
    let mechs = env("MECH", "raw,share,drum");
    for batch in env("BATCH", "20")
        .split(',')
        .map(|s| s.parse::<u32>().unwrap())
    {
        for cc in env("CCS", "20,50,100")
            .split(',')
            .map(|s| s.parse::<u32>().unwrap())
        {
            for n in mechs.split(',') {
                let mw = match n {
                    "raw" => raw(),
                    "share" => obj("share", "SHARE"),
                    _ => obj("drum", "DRUM"),
                };
                let mut s = scenario(&mw, cache, cc, batch, &bg);
                s["nic"]["tx_prefetch"] = json!(prefetch);
                s["nic"]["qp_cache_miss"] = json!(miss);
                if env("CPU_DELAY", "") == "1" {
                    s["host"] = json!({"cpu": {"delay": true}});
                }
                let t0 = std::time::Instant::now();
                let m = measure_s(&s);
                println!(
                    "bg {bg} batch {batch} cc {cc} {n}: n {} p50 {:.2} p80 {:.2} p99 {:.2} us  bg {:.2} Gbit/s  ({:.1} s, {} events, {} decisions, {} WRs)",
                    m.lat.len(),
                    m.p(0.5),
                    m.p(0.8),
                    m.p(0.99),
                    m.bg_gbps,
                    t0.elapsed().as_secs_f64(),
                    m.events,
                    m.agent("drum_decisions"),
                    m.agent("drum_wr_posted"),
                );
            }
        }
    }
}

/// Scale: 64 hosts (leaf-spine 8 x 8, 4 spines), every host a client of 100 connections to the
/// next host (a permutation) and a server of 100 from the previous one, all under the agent: 6,400
/// connections, 64 agents, 1,280 shared QPs. Every connection's WRITEs complete; the wall time is
/// printed, not asserted (docs/drum-agent.md reports it; `braid reproduce drum/scale` too).
#[test]
fn sixty_four_hosts_with_a_hundred_connections_each_under_the_agent() {
    let hosts = 64;
    let apps: Vec<Value> = (0..hosts)
        .map(|h| {
            json!({"kind": "write_bw", "src": h, "dst": (h + 1) % hosts, "size": "1KB",
                   "qps": 100, "tx_depth": 4, "iterations": 20, "start": "10us"})
        })
        .collect();
    let s = json!({
        "duration": "2ms",
        "topology": {"kind": "leaf-spine", "spines": 4, "leaves": 8, "hosts_per_leaf": 8,
                     "host_link": {"rate": "40Gbps", "delay": "1us"},
                     "fabric_link": {"rate": "100Gbps", "delay": "1us"}},
        "middleware": {"default": drum()},
        "apps": apps,
    });
    let t0 = std::time::Instant::now();
    let (sim, r) = run(&s);
    let wall = t0.elapsed();
    let f = sim.flows();
    println!(
        "64 hosts x 100 connections: {} events, wall {wall:?}",
        sim.events()
    );
    for (i, fl) in f.iter().enumerate() {
        assert_eq!(fl.bytes_done, 100 * 20 * 1000, "host {i}'s client");
        assert!(fl.finish_ps.is_some(), "host {i}'s client finished");
    }
    // Host 0's agent: 100 outgoing and 100 incoming connections, 20 + 20 shared QPs.
    let labels = match r.tables["tenants"].get("label") {
        Some(braid_sim::Column::Str(l)) => l.clone(),
        _ => panic!("no labels"),
    };
    let i = labels.iter().position(|l| l == "agent").expect("agent row");
    let col = |n: &str| match r.tables["tenants"].get(n) {
        Some(braid_sim::Column::F64(v)) => v[i],
        _ => f64::NAN,
    };
    assert_eq!(col("drum_connections"), 200.0);
    assert_eq!(col("drum_pipes_ready"), 40.0);
}

/// A bad agent parameter is one error naming its key.
#[test]
fn a_bad_drum_parameter_is_refused_by_name() {
    let mut s = scenario(&json!([{"kind": "drum", "mux_ratio": 0}]), 32, 1, 20, "1KB");
    s["duration"] = json!("1ms");
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    let m = e.to_string();
    assert!(m.contains("mux_ratio") && m.contains("expected"), "{m}");
    assert_eq!(m.lines().count(), 1, "{m}");
    // And the KV client's keys.
    let mut s = scenario(&raw(), 32, 1, 20, "1KB");
    s["apps"][1]["kind"] = json!("kv");
    s["apps"][1]["get_ratio"] = json!(1.5);
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("apps[1].get_ratio"), "{e}");
    s["apps"][1]["get_ratio"] = json!(0.5);
    s["apps"][1]["min_size"] = json!("2KB");
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("apps[1].min_size"), "{e}");
}

/// Test case 3 (Fig. 15, one-sided KV): a KV client of 50 connections (GET = READ, PUT = WRITE,
/// values uniform in 32 B..4 KB, one request outstanding per connection) beside the batch tenant
/// on 50 connections. Returns (KV mean latency µs, KV throughput Mops).
fn kv(mw: &Value, get_ratio: f64) -> (f64, f64) {
    let s = json!({
        "duration": "3ms",
        "nic": nic(32),
        "topology": pair(),
        "middleware": {"default": mw},
        "apps": [
            {"kind": "kv", "src": 0, "dst": 1, "size": "4KB", "min_size": "32B", "qps": 50,
             "tx_depth": 1, "get_ratio": get_ratio, "duration": "2ms", "start": "300us"},
            {"kind": "write_bw", "src": 0, "dst": 1, "size": "1KB", "qps": 50,
             "tx_depth": 20, "cq_mod": 20, "duration": "2.4ms", "start": "100us"},
        ],
    });
    let (sim, _) = run(&s);
    let f = sim.flows();
    let lat = &f[0].latencies;
    assert!(!lat.is_empty(), "{mw}: no KV request completed");
    let mean = lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e6;
    (mean, lat.len() as f64 / 2e-3 / 1e6)
}

#[test]
fn test_case_3_one_sided_kv_beside_a_batch_tenant() {
    for g in [0.95, 0.5] {
        let (r, s, d) = (kv(&raw(), g), kv(&share(), g), kv(&drum(), g));
        println!(
            "kv get {g}: mean latency raw {:.2} share {:.2} drum {:.2} us; Mops raw {:.3} share {:.3} drum {:.3}",
            r.0, s.0, d.0, r.1, s.1, d.1
        );
        // The paper: SHARE's latency 30.1% and RAW's 52% above DRUM's, DRUM's throughput 28.1%
        // above SHARE's and 39.2% above RAW's. braid's ordering is the paper's, its gaps wider
        // (the background fills the link; docs/drum-agent.md).
        assert!(d.0 * 1.3 < s.0 && s.0 < r.0, "latency, get {g}");
        assert!(d.1 > 1.28 * s.1 && s.1 > r.1, "throughput, get {g}");
    }
}

/// Test case 1, Fig. 11: a flow of `flow_wqes` WRITEs of 32 B (16 outstanding) beside `cc`
/// background connections (batches of 20 WRITEs of 1 KB, posting for `bg`): the flow's
/// completion time, µs (from its first post to its last completion).
fn small_wqe_flow(mw: &Value, cc: u32, flow_wqes: u64, bg: &str) -> f64 {
    let s = json!({
        "duration": "200ms",
        "nic": nic(32),
        "topology": pair(),
        "middleware": {"default": mw},
        "apps": [
            {"kind": "write_bw", "src": 0, "dst": 1, "size": "32B", "qps": 1, "tx_depth": 16,
             "iterations": flow_wqes, "start": "300us"},
            {"kind": "write_bw", "src": 0, "dst": 1, "size": "1KB", "qps": cc,
             "tx_depth": 20, "cq_mod": 20, "duration": bg, "start": "100us"},
        ],
    });
    let (sim, _) = run(&s);
    let f = &sim.flows()[0];
    let end = f.finish_ps.expect("the flow completes");
    (end - f.start_ps) as f64 / 1e6
}

/// Fig. 11: the paper's 1 MB flows of 32 B WQEs (32,768 WRITEs) complete 3.75x faster under DRUM
/// than RAW and 1.4x than SHARE at cc = 100. Scaled to 256 WQEs (8 KB), with the background
/// posting for longer than the slowest flow takes (checked). braid's order is the paper's; its gaps are
/// wider, as test case 1's are (what is queued ahead of the flow at the NIC decides).
#[test]
fn test_case_1_flows_of_small_wqes_finish_first_under_drum() {
    let (r, s, d) = (
        small_wqe_flow(&raw(), 100, 256, "12ms"),
        small_wqe_flow(&share(), 100, 256, "12ms"),
        small_wqe_flow(&drum(), 100, 256, "12ms"),
    );
    println!("fig11 cc 100, 256 x 32 B: raw {r:.0} share {s:.0} drum {d:.0} us");
    // Every flow ended while the background was still posting (it starts 200 µs earlier).
    assert!(r.max(s).max(d) < 11_500.0, "a flow outlived its background");
    assert!(r / d >= 3.75, "DRUM vs RAW: {r} / {d}");
    assert!(s / d >= 1.4, "DRUM vs SHARE: {s} / {d}");
    assert!(r > s, "SHARE beats RAW: {r} vs {s}");
}
