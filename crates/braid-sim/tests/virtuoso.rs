//! Virtuoso (`middleware = [{ kind = "virtuoso", ... }]`) on the paper's testbed shape: two hosts
//! under two ToRs joined by K parallel core paths (one spine each), each host with K addresses
//! (vNICs) and static routes at the ToRs that map source address k to spine k (the paper's
//! "IP-based path mapping"). Scaled down: MB flows instead of the paper's 100 GB.
//! The measured tables of docs/virtuoso.md come from `braid reproduce virtuoso`.

mod common;
use common::*;
use serde_json::{json, Value};

/// h0 - tor0 - s_k - tor1 - h1, core link k of `core[k]` (rate, delay, loss).
fn testbed(host: &str, core: &[(&str, &str, f64)]) -> (Value, Value) {
    let mut nodes = vec![json!("h0"), json!("h1"), json!("tor0"), json!("tor1")];
    let mut switches = vec![json!("tor0"), json!("tor1")];
    let mut links = vec![
        json!({"a": "h0", "b": "tor0", "rate": host, "delay": "1us"}),
        json!({"a": "h1", "b": "tor1", "rate": host, "delay": "1us"}),
    ];
    let mut routes = Vec::new();
    for (k, (rate, delay, loss)) in core.iter().enumerate() {
        let s = format!("s{k}");
        nodes.push(json!(s));
        switches.push(json!(s));
        links.push(json!({"a": "tor0", "b": s, "rate": rate, "delay": delay, "loss": loss}));
        links.push(json!({"a": s, "b": "tor1", "rate": rate, "delay": delay, "loss": loss}));
        routes.push(
            json!({"node": "tor0", "dst": [1], "src": [{"host": 0, "addr": k}], "next_hops": [s]}),
        );
        routes.push(
            json!({"node": "tor1", "dst": [0], "src": [{"host": 1, "addr": k}], "next_hops": [s]}),
        );
    }
    (
        json!({"kind": "edges", "nodes": nodes, "switches": switches, "links": links}),
        json!(routes),
    )
}

fn scenario(host: &str, core: &[(&str, &str, f64)], mw: Value, flows: Value) -> Value {
    let (topo, routes) = testbed(host, core);
    json!({
        "duration": "2s",
        "topology": topo,
        "routes": routes,
        "nic": {"addresses": core.len(), "data_check": true},
        "middleware": {"default": [mw]},
        "traffic": [{"pattern": "flows", "flows": flows}],
    })
}

/// Every finished flow's bytes are where they belong (the simulator carries real bytes:
/// `nic.data_check`). The simulator's own `verify_delivery` counts bytes on the flow's QP only,
/// which virtuoso spreads over several.
fn check_placement(sim: &braid_sim::Simulation) -> usize {
    let w = sim.world();
    let mut n = 0;
    for f in sim
        .flows()
        .iter()
        .filter(|f| f.kind == "flow" && f.finish_ps.is_some())
    {
        let (node, addr) = f.dst_addr.expect("landing address");
        let h = w.host_index[node as usize] as usize;
        let got = w.hosts[h].nic.mem.read(addr, f.size).unwrap();
        let want = pattern(f.id, f.size as usize);
        assert!(
            got == want,
            "flow {}: bytes differ at {:?}",
            f.id,
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        n += 1;
    }
    n
}

/// The flow pattern the simulator writes (braid_sim's `apps::pattern`).
fn pattern(flow: u32, len: usize) -> Vec<u8> {
    braid_sim::apps::pattern(flow, len)
}

/// A tenant counter of the virtuoso layer (`virtuoso_<name>`) for host `h`'s traffic tenant.
fn counter(r: &braid_sim::Results, h: u64, name: &str) -> f64 {
    let t = &r.tables["tenants"];
    let hosts = ints(t, "host");
    let col = format!("virtuoso_{name}");
    let v = match t.get(&col).unwrap_or_else(|| panic!("no column {col}")) {
        braid_sim::Column::F64(v) => v.clone(),
        braid_sim::Column::U64(v) => v.iter().map(|&x| x as f64).collect(),
        _ => panic!("{col}"),
    };
    hosts
        .iter()
        .zip(v)
        .filter(|(hh, _)| **hh as u64 == h)
        .map(|(_, x)| x)
        .filter(|x| !x.is_nan())
        .sum()
}

fn fct_ms(r: &braid_sim::Results) -> Vec<f64> {
    ints(&r.tables["flows"], "fct_ps")
        .iter()
        .map(|&x| x as f64 / 1e9)
        .collect()
}

fn one_flow(size: &str) -> Value {
    json!([{"src": 0, "dst": 1, "size": size, "start": "0us"}])
}

fn mp(paths: usize) -> Value {
    json!({"kind": "virtuoso", "paths": paths})
}

fn run_checked(s: &Value) -> (braid_sim::Simulation, braid_sim::Results) {
    let mut sim = build(s);
    sim.run();
    assert!(check_placement(&sim) > 0, "no flow finished");
    let r = sim.results();
    (sim, r)
}

/// §4.3 scaled down: one 4 MB flow, core links a tenth of the host links (10G hosts, 1G core).
fn fct_for(paths: usize, size: &str) -> f64 {
    let core = [("1Gbps", "1us", 0.0); 4];
    let (_, r) = run_checked(&scenario(
        "10Gbps",
        &core[..paths.max(1)],
        mp(paths),
        one_flow(size),
    ));
    fct_ms(&r)[0]
}

#[test]
fn fct_falls_as_paths_are_added() {
    let f: Vec<f64> = [1, 2, 4].iter().map(|&p| fct_for(p, "4MB")).collect();
    assert!(f[0] > f[1] && f[1] > f[2], "{f:?}");
    // 4 MB at 1 Gbit/s is 32 ms; over 4 paths 8 ms plus the 512 KiB probes (4.2 ms).
    assert!(f[0] > 32.0 && f[0] < 36.0, "{f:?}");
    assert!(f[2] < 0.45 * f[0], "{f:?}");
}

/// Paths of 10, 20 and 40 Gbit/s: the probes estimate them and the data follows 1:2:4. Hosts
/// at 200 Gbit/s, so that the NIC's round-robin between the three path QPs (a third of the link
/// each) does not cap the 40G path, and line-rate senders (`transport = none`, lossless), so
/// that the estimates are the paths' and not DCQCN's.
#[test]
fn split_follows_capacity_estimates() {
    let core = [
        ("10Gbps", "1us", 0.0),
        ("20Gbps", "1us", 0.0),
        ("40Gbps", "1us", 0.0),
    ];
    let mut s = scenario("200Gbps", &core, mp(3), one_flow("14MB"));
    s["transport"] = json!({"kind": "none"});
    let (_, r) = run_checked(&s);
    let b: Vec<f64> = (0..3)
        .map(|i| counter(&r, 0, &format!("path{i}_bytes")))
        .collect();
    let c: Vec<f64> = (0..3)
        .map(|i| counter(&r, 0, &format!("path{i}_cap_gbps")))
        .collect();
    assert_eq!(b.iter().sum::<f64>(), 14e6, "{b:?}");
    let (r1, r2) = (b[1] / b[0], b[2] / b[0]);
    assert!(
        (1.8..2.2).contains(&r1) && (3.5..4.5).contains(&r2),
        "bytes {b:?}, estimates {c:?}"
    );
    assert!(
        c[0] > 8.0 && c[0] < 10.5 && c[2] > 32.0 && c[2] < 42.0,
        "{c:?}"
    );
    // An equal split on the same paths leaves the 40G path idle early: slower.
    let mut e = scenario(
        "200Gbps",
        &core,
        json!({"kind": "virtuoso", "paths": 3, "policy": "equal"}),
        one_flow("14MB"),
    );
    e["transport"] = json!({"kind": "none"});
    let (_, re) = run_checked(&e);
    assert!(
        fct_ms(&re)[0] > 1.4 * fct_ms(&r)[0],
        "equal {:?} vs capacity {:?}",
        fct_ms(&re),
        fct_ms(&r)
    );
}

/// Reordering (core delays 1, 7 and 25 µs), random loss on one path (1% of packets, go-back-N
/// recovers) and a path whose spine fails mid-transfer (its QP gives up: RetryExceeded, retry_cnt
/// 1): every byte of every flow lands at its address, the application sees one completion per
/// flow, and the failed path's chunks are re-sent on the others.
#[test]
fn conservation_under_reordering_loss_and_a_failing_path() {
    let core = [
        ("10Gbps", "1us", 0.0),
        ("10Gbps", "7us", 0.01),
        ("10Gbps", "25us", 0.0),
        ("10Gbps", "3us", 0.0),
    ];
    let flows = json!([
        {"src": 0, "dst": 1, "size": "6000001B", "start": "0us"},
        {"src": 0, "dst": 1, "size": "3333333B", "start": "100us"},
        {"src": 0, "dst": 1, "size": "777777B", "start": "200us"},
    ]);
    let mw = json!({"kind": "virtuoso", "paths": 4, "retry_cnt": 1, "chunk": "256KB"});
    let mut s = scenario("40Gbps", &core, mw, flows);
    s["link_events"] = json!([{"a": "s2", "b": "tor1", "down": "1.5ms", "up": "40ms"}]);
    let mut sim = build(&s);
    sim.run();
    assert_eq!(
        check_placement(&sim),
        3,
        "every flow finished, every byte in place"
    );
    let r = sim.results();
    let moved: f64 = (0..4)
        .map(|i| counter(&r, 0, &format!("path{i}_bytes")))
        .sum();
    assert_eq!(
        moved,
        (6000001 + 3333333 + 777777) as f64,
        "each byte counted once on one path"
    );
    assert!(
        counter(&r, 0, "retry_exceeded") >= 1.0,
        "the failed path gave up"
    );
    assert!(counter(&r, 0, "resends") >= 1.0);
    assert!(
        counter(&r, 0, "resets") >= 1.0 && counter(&r, 1, "resets") >= 1.0,
        "both ends reset it"
    );
}

/// A lossy fabric: no PFC, a small shared buffer at the ToRs, line-rate senders.
fn lossy(paths: usize, size: &str, retry: u32, buffer: &str) -> Value {
    let core = vec![("1Gbps", "1us", 0.0); paths];
    let mw = json!({"kind": "virtuoso", "paths": paths, "lossy": true, "retry_cnt": retry,
                    "capacities": vec!["1Gbps"; paths]});
    let mut s = scenario("10Gbps", &core, mw, one_flow(size));
    s["switch"] = json!({"lossless": [], "buffer": buffer});
    s["transport"] = json!({"kind": "none"});
    s
}

/// Trunk size and RetryExceeded count after `flows` back-to-back 8 MB flows on one lossy path.
fn lossy_run(paths: usize, flows: usize) -> (Vec<f64>, f64, Vec<f64>) {
    let mut s = lossy(paths, "8MB", 0, "300KB");
    let f: Vec<Value> = (0..flows)
        .map(|i| json!({"src": 0, "dst": 1, "size": "8MB", "start": format!("{}ms", 200 * i)}))
        .collect();
    s["traffic"][0]["flows"] = json!(f);
    let mut sim = build(&s);
    sim.run();
    assert_eq!(
        check_placement(&sim),
        flows,
        "every byte in place despite the losses"
    );
    let r = sim.results();
    let t = (0..paths)
        .map(|i| counter(&r, 0, &format!("path{i}_trunk")))
        .collect();
    (t, counter(&r, 0, "retry_exceeded"), fct_ms(&r))
}

/// §3.5 on a lossy trunk (no PFC, 300 KB of switch buffer, line-rate senders, 10G hosts and a 1G
/// core, retry_cnt 0: the paper's RNIC gives up at once): the trunk doubles from 64 KiB until a
/// WR fails with RetryExceeded, falls back, then holds a size that fails no more in two further
/// flows; the failed chunk was re-sent.
#[test]
fn trunk_size_backs_off_after_retry_exceeded_and_converges() {
    let (t1, rex1, _) = lossy_run(1, 1);
    let (t3, rex3, fct3) = lossy_run(1, 3);
    assert!(
        rex1 >= 1.0,
        "the doubling trunk overflowed the core buffer: {rex1}"
    );
    assert!(
        t1[0] < 4.0 * 1048576.0 && t1[0] > 65536.0,
        "backed off below the failing size: {t1:?}"
    );
    assert_eq!(
        rex3, rex1,
        "no RetryExceeded once converged (trunks {t1:?} -> {t3:?}, FCTs {fct3:?})"
    );
}

/// The completion-driven policy moves load off a slow path (10/10/1 Gbit/s): it gets at most a
/// fifth of the bytes, where an equal split gives it a third and waits for it.
#[test]
fn completion_policy_moves_load_off_a_slow_path() {
    let core = [
        ("10Gbps", "1us", 0.0),
        ("10Gbps", "1us", 0.0),
        ("1Gbps", "1us", 0.0),
    ];
    let run = |policy: &str| {
        let mw = json!({"kind": "virtuoso", "paths": 3, "policy": policy, "chunk": "256KiB",
                        "capacities": ["10Gbps", "10Gbps", "10Gbps"]});
        let (_, r) = run_checked(&scenario("40Gbps", &core, mw, one_flow("12MB")));
        let b: Vec<f64> = (0..3)
            .map(|i| counter(&r, 0, &format!("path{i}_bytes")))
            .collect();
        (b, fct_ms(&r)[0])
    };
    let (dynamic, fd) = run("completion");
    let (equal, fe) = run("equal");
    assert_eq!(dynamic.iter().sum::<f64>(), 12e6);
    assert!(dynamic[2] <= 12e6 / 5.0, "{dynamic:?}");
    assert!((equal[2] - 4e6).abs() < 1.0, "{equal:?}");
    assert!(fd < 0.5 * fe, "completion {fd} ms vs equal {fe} ms");
}

/// Without static routes: the ToRs' ECMP hashes each path's source address (and port), so the
/// paths spread over the spines (here 2 + 2 over two of the four: ECMP collides); one 8 MB flow
/// over 4 spines of 10 Gbit/s (40 Gbit/s hosts, line-rate senders on a lossless fabric) finishes
/// well before a single QP's. (With DCQCN this run shows no gain: docs/virtuoso.md.)
#[test]
fn ecmp_on_the_addresses_spreads_the_paths() {
    let s = |mw: Value| {
        json!({
            "duration": "1s",
            "topology": {"kind": "two-tor", "hosts_per_tor": 1, "paths": 4,
                         "host_link": {"rate": "40Gbps", "delay": "1us"},
                         "fabric_link": {"rate": "10Gbps", "delay": "1us"}},
            "nic": {"addresses": 4, "data_check": true},
            "transport": {"kind": "none"},
            "middleware": {"default": [mw]},
            "traffic": [{"pattern": "flows", "flows": one_flow("8MB")}],
        })
    };
    let (_, raw) = run_checked(&s(json!("raw")));
    let (_, mp) = run_checked(&s(json!({"kind": "virtuoso", "paths": 4})));
    let (a, b) = (fct_ms(&raw)[0], fct_ms(&mp)[0]);
    let by: Vec<f64> = (0..4)
        .map(|i| counter(&mp, 0, &format!("path{i}_bytes")))
        .collect();
    assert_eq!(by.iter().sum::<f64>(), 8e6);
    assert!(b < 0.7 * a, "virtuoso {b} ms vs one QP {a} ms ({by:?})");
}

/// The perftest-like applications run unmodified over virtuoso (4 paths of 1 Gbit/s): send_bw
/// with 1 MB messages (split MP_SENDs into the advertised RECVs), read_bw (split MP_READs) and
/// write_lat (small WRITEs with immediate, on path 0) all finish, the bandwidth ones at more than
/// one path's rate.
#[test]
fn perftest_apps_run_unmodified() {
    let core = vec![("1Gbps", "1us", 0.0); 4];
    let (topo, routes) = testbed("10Gbps", &core);
    let app = |kind: &str, size: &str, n: u32| json!({"kind": kind, "src": 0, "dst": 1, "size": size, "iterations": n, "tx_depth": 4});
    for (kind, size, n) in [
        ("send_bw", "1MB", 8),
        ("read_bw", "1MB", 8),
        ("write_lat", "64B", 50),
    ] {
        let s = json!({
            "duration": "1s",
            "topology": topo, "routes": routes,
            "nic": {"addresses": 4},
            "middleware": {"default": [{"kind": "virtuoso", "paths": 4}]},
            "apps": [app(kind, size, n)],
        });
        let mut sim = build(&s);
        sim.run();
        let r = sim.results();
        let t = &r.tables["tenants"];
        let labels = match t.get("label").unwrap() {
            braid_sim::Column::Str(v) => v.clone(),
            _ => unreachable!(),
        };
        let i = labels.iter().position(|l| l == "apps[0].client").unwrap();
        let g = match t.get("goodput_gbps").unwrap() {
            braid_sim::Column::F64(v) => v[i],
            _ => unreachable!(),
        };
        assert!(sim.is_finished(), "{kind} did not finish");
        if kind != "write_lat" {
            assert!(g > 1.5, "{kind}: {g} Gbit/s");
        }
        if kind == "send_bw" {
            assert_eq!(counter(&r, 0, "split_sends"), 8.0);
        }
    }
}
